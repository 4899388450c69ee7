"""What the load is sent to: kgserve as a subprocess (HTTP) or kgserve's engine pool in this process (direct)."""
