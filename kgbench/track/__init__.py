"""Tracking a sweep in MLflow: the store, the runs, how the experiment shows in `mlflow ui`."""
