"""Real games for the traffic: SGF read and written (`kgserve.katago.sgf`: kgserve reads it too), replayed by the
rules (`board.py`), the repository's game library (`library.py`) and the self-play that made it with a real KataGo
(`python -m kgbench.load.games.selfplay`)."""
