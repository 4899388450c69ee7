"""The decide stage: which run of a sweep wins, and why."""
