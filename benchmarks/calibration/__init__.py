"""The simulated engine held against real engines: `cpu` (``python -m benchmarks.calibration``: the sim's CPU
profile against a real KataGo Eigen build, same grid and load) and `gpu` (``python -m benchmarks.calibration.gpu``:
the GPU profile fitted to a real GPU's measurements, `gpu_data` reading them, `gpu_fit` fitting, `gpu_derive`
deriving another card), with the CPU grid (`grid`) and its table (`table`)."""
