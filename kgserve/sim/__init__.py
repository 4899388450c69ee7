"""A simulated KataGo analysis engine (same protocol and log lines; timings from a throughput model), for runs
and tests without KataGo: `python -m kgserve.sim analysis -config CFG -model MODEL`."""
