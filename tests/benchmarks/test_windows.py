"""benchmarks.windows: answers re-counted in longer windows settle where short windows only count bursts."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.windows import answer_times, main, settle


def _bursts(seconds: int) -> list[float]:
    """10 answers a second, in bursts: 3 in the first half of each second, 7 in the second."""
    times = []
    for second in range(seconds):
        times += [second + 0.1 + 0.01 * i for i in range(3)] + [second + 0.6 + 0.01 * i for i in range(7)]
    return times


def test_short_windows_count_bursts_longer_ones_settle() -> None:
    times = _bursts(30)
    short = settle(times, 0.0, 0.5, 6)
    assert short is not None and not short.stable and short.windows == 6  # 3, 7, 3, 7, ...: never within 25%
    longer = settle(times, 0.0, 1.0, 6)
    assert longer is not None and longer.stable and longer.windows == 3 and longer.half_width == 0.0
    assert settle(times, 25.0, 1.0, 6) is None  # past the answers


def test_the_command_reads_a_jobs_requests_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "requests.csv"
    rows = ["level,phase,window,send_s,latency_ms,status,bytes,visits,error,position,repeat"]
    rows += [f"4,measure,0,{t - 0.3:.3f},300,200,10,20,,p,0" for t in _bursts(12)]
    rows += ["4,warmup,-1,0.0,100,200,10,20,,p,0", "4,measure,0,1.0,100,0,0,,timeout,p,0"]
    path.write_text("\n".join(rows) + "\n")
    assert len(answer_times(path)[4]) == 120  # warmup and errors left out
    assert main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "level 4, 120 answers" in out and "1.0 s x <= 6: settles 100% of" in out
    short = next(line for line in out.splitlines() if "0.5 s x <= 6" in line)
    assert int(short.split("settles ")[1].split("%")[0]) < 10  # a few starts fall where the bursts even out
