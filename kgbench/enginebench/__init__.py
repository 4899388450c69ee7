"""`mode=engine`: KataGo's own `katago benchmark` run with a job's cfg (run) and its output parsed (parse)."""
