"""Stage 3, tracking: MLflow runs of a sweep and its jobs, GPU sampling, the plots of one run, the sweep summary."""
