"""Sweeps on a PBS cluster: the Hydra launcher, its dask-jobqueue cluster, and the jobs whose process was lost."""
