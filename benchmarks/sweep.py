"""Time ``b12x-launch sweep`` over 50 combinations of a profile (a benchmark, not a test).

    python benchmarks/sweep.py [--runs 10] [--profile profiles/glm52.yaml] [--vary K=V1,V2 ...]

Reports, each the median of ``--runs``:
  in-process   ``run_sweep`` alone, and with its table rendered (modules already
               imported): the sweep's own cost;
  naive        the same combinations as separate ``load`` + ``make_plan`` calls in one
               process (what a loop over dry runs costs without its start-ups);
  processes    ``b12x-launch sweep`` and one ``b12x-launch --dry-run`` as fresh processes;
               their difference is the sweep's time beyond start-up.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DEFAULT_VARY = [
    "parallel.decode_context=2,4",
    "serving.max_model_len=65536,131072,262144,524288,1048576",
    "serving.max_num_seqs=1,2,4,8,16",
]


def median_ms(fn, runs: int) -> tuple[float, float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000, min(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--profile", default="profiles/glm52.yaml")
    parser.add_argument("--vary", action="append", default=None)
    args = parser.parse_args()
    vary_args = args.vary or DEFAULT_VARY

    from launcher import pipeline
    from launcher.errors import ProfileError
    from launcher.pipeline import run_sweep
    from launcher.report.sweep import combinations, parse_vary
    from launcher.report.sweep_report import render_table

    vary = [parse_vary(v) for v in vary_args]
    combos = combinations(vary)
    sweep = run_sweep(args.profile, (), vary, calibrate=False)
    fits = sum(1 for r in sweep.rows if r.plan is not None and r.plan.fits)
    print(
        f"{len(combos)} combinations of {args.profile}: {fits} fit, "
        f"{len(combos) - fits} do not or are invalid; facts gathered {sweep.gathered}x"
    )

    def naive() -> None:
        for combo in combos:
            sets = tuple(f"{k}={v}" for k, v in combo)
            # an invalid combination costs its load, as in the sweep
            with contextlib.suppress(ProfileError):
                pipeline.make_plan(pipeline.load(args.profile, sets), calibrate=False)

    def sweep_and_table() -> None:
        render_table(run_sweep(args.profile, (), vary, calibrate=False))

    render_table(sweep)  # rich's first table pays its lazy imports
    sweep_ms = median_ms(lambda: run_sweep(args.profile, (), vary, calibrate=False), args.runs)
    table_ms = median_ms(sweep_and_table, args.runs)
    naive_ms = median_ms(naive, args.runs)
    print(f"in-process run_sweep: median {sweep_ms[0]:.0f} ms, min {sweep_ms[1]:.0f} ms")
    print(f"in-process run_sweep + table: median {table_ms[0]:.0f} ms, min {table_ms[1]:.0f} ms")
    print(f"in-process naive load+make_plan x{len(combos)}: median {naive_ms[0]:.0f} ms")

    exe = shutil.which("b12x-launch")
    cmd = [exe] if exe else [sys.executable, "-m", "launcher"]
    env = {**os.environ, "COLUMNS": "120"}
    vary_cli = [a for v in vary_args for a in ("--vary", v)]
    sweep_cmd = [*cmd, "sweep", args.profile, "--no-calibration", *vary_cli]
    dry_cmd = [*cmd, args.profile, "--dry-run", "--no-calibration"]

    def run(c: list[str]) -> None:
        subprocess.run(c, capture_output=True, env=env, check=False)

    run(sweep_cmd)  # warm the page cache
    process_sweep = median_ms(lambda: run(sweep_cmd), args.runs)
    process_dry = median_ms(lambda: run(dry_cmd), args.runs)
    print(f"command: {' '.join(sweep_cmd)}")
    print(
        f"process: sweep median {process_sweep[0]:.0f} ms, one dry run median "
        f"{process_dry[0]:.0f} ms, sweep beyond start-up {process_sweep[0] - process_dry[0]:.0f} ms"
    )


if __name__ == "__main__":
    main()
