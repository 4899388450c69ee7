"""The simulated engine's throughput model: device profiles, the GPU and CPU models, one process's steady state."""
