"""The quick-start runs' table: python docs/data/issue33/quickstart/table.py DIR... (each DIR holds run*/ folders
written by qs_once.sh: log.txt, sweep.out, promote.out)."""

import glob
import os
import re
import sys

for root in sys.argv[1:]:
    rows = []
    for d in sorted(glob.glob(f"{root}/run*"), key=lambda p: int(p.rsplit("run", 1)[1])):
        log = open(f"{d}/log.txt").read()
        if "serve=" not in log:
            continue
        sweep = open(f"{d}/sweep.out").read()
        jobs = [ln for ln in sweep.splitlines() if re.match(r"\s*sim b\d+ t\d+x\d+ ", ln)]
        unstable = sum(" unstable" in ln for ln in jobs)
        best = re.search(r"best job is run \w+: sim (\S+) ([\d.]+) req/s(?: \+-([\d.]+)%)?", sweep)
        smoke = "yes" if best and "a smoke verdict" in sweep.split("best job is", 1)[1].splitlines()[0] else "-"
        chain = re.search(r"chain_rc=(\d+) secs=([\d.]+)", log)
        serve = re.search(r"serve=(\w+)", log).group(1)
        # "load average: 1.0, ..." (uptime) or "load 1.0 ..." (/proc/loadavg, the earlier A/B runs)
        start = re.search(r"start (\S+) (?:load|.*load average:) ([\d.]+)", log)
        end = re.search(r"serve=\w+ end (\S+) (?:load|.*load average:) ([\d.]+)", log)
        rows.append(
            (
                os.path.basename(d),
                f"{start.group(1)}-{end.group(1)}",
                f"{start.group(2)} / {end.group(2)}",
                f"{unstable} of {len(jobs)}",
                f"{best.group(1)} {best.group(2)}" + (f" ±{best.group(3)}%" if best.group(3) else "") if best else "none",
                smoke,
                "yes" if chain.group(1) == "0" else f"no (rc {chain.group(1)})",
                f"{float(chain.group(2)):.0f}",
                serve,
            )
        )
    print(f"{root}:")
    print("| run | time | load avg 1 min (start / end) | jobs unstable | best job | smoke verdict | promoted | sweep+promote s | served (sample answered) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    promoted = sum(r[6] == "yes" for r in rows)
    served = sum(r[8] == "answered" for r in rows)
    unst = sum(int(r[3].split()[0]) for r in rows)
    total = sum(int(r[3].split()[2]) for r in rows)
    print(f"{len(rows)} runs: promoted {promoted}, served {served}, jobs unstable {unst} of {total}")
