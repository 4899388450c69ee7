"""The sweep stage: Hydra sweepers and the jobs they launch."""
