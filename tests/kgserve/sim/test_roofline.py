"""No profile may beat physics: its NN evaluations per second stay under the device's peak dense rate divided by the
net's FLOPs per evaluation, whatever the cfg. (The profile this replaced reached 8,565 NN evals/s with a b40c768
net on an H200, whose FP16 roofline is 5,937/s.)"""

from __future__ import annotations

import itertools

import pytest

from kgserve.sim.model.profiles import PROFILES, DeviceProfile
from kgserve.sim.model.throughput import SimParams, benchmark_figures, device_memory_gb, steady_state

ANALYSIS = (1, 4, 16, 64, 256, 1024)
SEARCH = (1, 2, 8, 32, 128)
BATCH = (1, 8, 64, 256, 1024, 8192)
SERVERS = (1, 2, 4, 8)
VISITS = (1, 10, 100, 1000, 100_000)


def _fits(p: SimParams) -> bool:
    return device_memory_gb(p) <= p.device.memory_gb  # a cfg that does not fit never starts: no steady state


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_profile_states_its_roofline(name: str) -> None:
    dev = PROFILES[name]
    assert dev.peak_tflops > 0 and dev.net_gflop > 0
    assert dev.roofline_evals_per_s == pytest.approx(dev.peak_tflops * 1e3 / dev.net_gflop)


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_no_steady_state_beats_the_roofline(name: str) -> None:
    dev = PROFILES[name]
    ceiling = dev.roofline_evals_per_s
    fastest = 0.0
    for a, t, b, s, v in itertools.product(ANALYSIS, SEARCH, BATCH, SERVERS, VISITS):
        p = SimParams(a, t, b, s, 20, profile=name)
        if _fits(p):
            rate = steady_state(p, a, v).evals_per_s
            assert rate <= ceiling, (name, (a, t, b, s, v), rate, ceiling)
            fastest = max(fastest, rate)
    for t, v in itertools.product((1, 16, 256, 4096), VISITS):  # `katago benchmark`: one search at a time
        p = SimParams(1, t, max(8, t), 2, 20, profile=name)
        if _fits(p):
            assert benchmark_figures(p, v).evals_per_s <= ceiling, (name, t, v)
    assert fastest > 0


def _linear_gpus() -> list[DeviceProfile]:
    return [p for p in PROFILES.values() if p.kind == "gpu"]


@pytest.mark.parametrize("dev", _linear_gpus(), ids=lambda p: p.name)
def test_a_gpu_device_rate_is_bounded_for_any_batch(dev: DeviceProfile) -> None:
    # a batch of b rows costs d0 + d1 x b**e on the device: with e < 1 its rate would grow without bound with b,
    # whatever the grid above tried; with e = 1 it tends to 1 / d1
    assert dev.batch_exponent == 1.0
    assert 1.0 / dev.d1 <= dev.roofline_evals_per_s
