"""The hostile-input table: run generated kernels and count how each case ended.

    python -m tests.hostile.table [--examples 150] [--runnable 40] [--targets generic pvc dg2] [--log F]

Draws ``--examples`` bad kernels (``kernel_source``) and ``--runnable`` runnable kernels
(``runnable_kernel_source``) per target -- derandomized, no shrinking, nothing asserted -- runs
each in a child process like the tests do (``test_generated_kernels._run``) and prints, per
category and target: cases, clean errors with / without the kernel's location, internal errors,
raw (non-xejit) exceptions, crashes, hangs, wrong results, and the cases that ran and matched the
interpreter. Every case goes to ``--log`` as a JSON line. The tests assert the same outcomes.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings

from .test_generated_kernels import _run, kernel_source, runnable_kernel_source

COLUMNS = ("cases", "error+loc", "error-loc", "internal", "raw", "crash", "hang", "wrong", "ok")


def collect(strategy, target: str, n: int, log: Path | None) -> Counter:
    counts: Counter = Counter()
    tmp = Path(tempfile.mkdtemp(prefix="hostile-"))

    @settings(max_examples=n, deadline=None, derandomize=True, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(src=strategy)
    def one(src):
        d = tmp / str(counts["cases"])
        d.mkdir()
        r = _run(d, src, target)
        counts["cases"] += 1
        o = r["outcome"]
        counts["error+loc" if o == "error" and r.get("located") else "error-loc" if o == "error" else o] += 1
        if log is not None:
            with open(log, "a") as f:
                f.write(json.dumps({"target": target, **r, "source": src}) + "\n")

    one()
    return counts


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=150)
    p.add_argument("--runnable", type=int, default=40)
    p.add_argument("--targets", nargs="+", default=["generic", "pvc", "dg2"])
    p.add_argument("--log", type=Path)
    a = p.parse_args()
    rows = []
    t0 = time.perf_counter()
    for name, strategy, n in (("bad kernels", kernel_source(), a.examples),
                              ("runnable kernels", runnable_kernel_source(), a.runnable)):
        for target in a.targets:
            c = collect(strategy, target, n, a.log)
            rows.append((f"{name} ({target})", c))
            print(f"{rows[-1][0]}: {dict(c)} [{time.perf_counter() - t0:.0f} s]", flush=True)
    print(f"| category | {' | '.join(COLUMNS)} |")
    print(f"|---|{'---|' * len(COLUMNS)}")
    total: Counter = Counter()
    for name, c in rows:
        total.update(c)
        print(f"| {name} | {' | '.join(str(c[k]) for k in COLUMNS)} |")
    print(f"| total | {' | '.join(str(total[k]) for k in COLUMNS)} |")


if __name__ == "__main__":
    main()
