"""Stage 4, deciding: read a sweep back from MLflow, choose the winner, promote it into the serving config
(`python -m kgbench.promote`), report on a sweep (`python -m kgbench.report`)."""
