"""The machine sampled while a job measures: host CPU, the GPU over NVML, other device processes, on one thread."""
