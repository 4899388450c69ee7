"""The sweep stage: Hydra jobs, their launchers and callbacks."""
