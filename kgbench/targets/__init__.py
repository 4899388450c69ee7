"""Targets of the load: kgserve processes, the in-process pool, HAProxy in front of several kgserve."""
