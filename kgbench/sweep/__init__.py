"""Stage 1, the sweep: Hydra composes a config per job; a job renders its KataGo cfg, runs it (load or
`katago benchmark`) and records it (`python -m kgbench`)."""
