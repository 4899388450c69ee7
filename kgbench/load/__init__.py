"""The load stage: traffic, the load generator and the statistics of what it measured."""
