"""Config search on Optuna (ask/tell): the Hydra sweeper, the search space, the journal-stored study and the
job's side of a trial (intermediate values, pruning)."""
