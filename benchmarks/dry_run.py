"""Wall time and peak memory of ``b12x-launch PROFILE --dry-run`` (a benchmark, not a test).

    python benchmarks/dry_run.py [--runs 20] [--profile profiles/glm52.yaml] [-- extra args]

Each run is a fresh process, as a user would start it; the peak RSS is the largest
child's maximum resident set.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--profile", default="profiles/glm52.yaml")
    parser.add_argument("extra", nargs="*", help="more b12x-launch arguments")
    args = parser.parse_args()
    exe = shutil.which("b12x-launch")
    cmd = [exe] if exe else [sys.executable, "-m", "launcher"]
    cmd += [args.profile, "--dry-run", *args.extra]
    env = {**os.environ, "COLUMNS": "120"}
    subprocess.run(cmd, check=True, capture_output=True, env=env)  # warm the page cache
    times = []
    for _ in range(args.runs):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - start)
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    times.sort()
    print(f"command: {' '.join(cmd)}")
    print(
        f"runs: {args.runs}  median: {statistics.median(times) * 1000:.0f} ms  "
        f"p90: {times[int(0.9 * (len(times) - 1))] * 1000:.0f} ms  min: {times[0] * 1000:.0f} ms  "
        f"peak RSS: {peak_kib / 1024:.1f} MiB"
    )


if __name__ == "__main__":
    main()
