"""Wall time and peak memory of ``b12x-launch PROFILE --dry-run`` (a benchmark, not a test).

    python benchmarks/dry_run.py [--runs 20] [--profile profiles/glm52.yaml] [--against DIR]
                                 [--source] [-- extra args]

Each run is a fresh process, as a user would start it; the peak RSS is the largest
child's maximum resident set. ``python -c pass`` runs the same number of times, interleaved,
as the floor on this machine at this moment: on a shared, loaded machine the ratio and the
CPU time (user + system of the child) say more than the wall time alone. ``--against DIR``
(another checkout, e.g. ``git archive`` of an older commit unpacked) is timed in the same
loop, so before and after see the same load. Each tree's runs start in that tree with
``PYTHONPATH`` at it: ``python -m`` puts the working directory first on ``sys.path``, so a
child started here would import this tree's ``launcher`` whatever ``PYTHONPATH`` says.

Bytecode: by default the children run with ``PYTHONDONTWRITEBYTECODE`` removed from their
environment and one untimed warm-up run of each tree first, so every launcher module is
loaded from its cached ``.pyc``, as from a user's ``pip install`` (pip compiles on install).
A shell with ``PYTHONDONTWRITEBYTECODE=1`` (as on the project's CPU machine) would otherwise
compile every launcher module from source on every run, a cost no installed user pays.
``--source`` measures that case instead: it removes the timed trees' ``launcher/**/__pycache__``
and runs the children with ``PYTHONDONTWRITEBYTECODE=1`` (a checkout run in place with
bytecode writing off; third-party packages keep their installed ``.pyc`` either way).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import resource
import shutil
import statistics
import subprocess
import sys
import time


def _run(cmd: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=cwd)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _line(name: str, samples: list[tuple[float, float]]) -> str:
    walls = sorted(w for w, _ in samples)
    cpus = [c for _, c in samples]
    return (
        f"{name}: median {statistics.median(walls) * 1000:.0f} ms  "
        f"p90 {walls[int(0.9 * (len(walls) - 1))] * 1000:.0f} ms  min {walls[0] * 1000:.0f} ms  "
        f"max {walls[-1] * 1000:.0f} ms  "
        f"cpu median {statistics.median(cpus) * 1000:.0f} ms"
    )


def _drop_bytecode(tree: str) -> None:
    """Remove the launcher package's cached bytecode under ``tree`` (``--source``)."""
    for cache in pathlib.Path(tree, "launcher").rglob("__pycache__"):
        shutil.rmtree(cache)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--profile", default="profiles/glm52.yaml")
    parser.add_argument("--against", help="another source tree, timed in the same loop")
    parser.add_argument(
        "--source",
        action="store_true",
        help="compile the launcher from source on every run (no cached bytecode)",
    )
    parser.add_argument("extra", nargs="*", help="more b12x-launch arguments")
    args = parser.parse_args()
    # ``-m launcher`` with this interpreter, not a ``b12x-launch`` found on PATH: a version
    # manager's shim there would add its own start-up and may run another install.
    cmd = [sys.executable, "-m", "launcher", args.profile, "--dry-run", *args.extra]
    floor = [sys.executable, "-c", "pass"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["COLUMNS"] = "120"
    here = os.getcwd()
    trees = [here] + ([os.path.abspath(args.against)] if args.against else [])
    if args.source:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    runs = []
    for tree in trees:
        if args.source:
            _drop_bytecode(tree)
        tree_env = {**env, "PYTHONPATH": tree}
        where = subprocess.run(
            [sys.executable, "-c", "import launcher; print(launcher.__file__)"],
            check=True,
            capture_output=True,
            text=True,
            env=tree_env,
            cwd=tree,
        ).stdout.strip()
        if not where.startswith(tree + os.sep):
            sys.exit(f"{tree}: its runs would import {where}, not its own launcher")
        subprocess.run(cmd, check=True, capture_output=True, env=tree_env, cwd=tree)  # warm-up
        runs.append((cmd, tree_env, tree))
    dry, base, against = [], [], []
    for _ in range(args.runs):
        dry.append(_run(*runs[0]))
        base.append(_run(floor, env, here))
        if args.against:
            against.append(_run(*runs[1]))
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(f"command: {' '.join(cmd)}")
    bytecode = "launcher compiled from source each run" if args.source else "cached .pyc"
    print(f"runs: {args.runs}  bytecode: {bytecode}  peak RSS: {peak_kib / 1024:.1f} MiB")
    print(_line("dry run", dry))
    print(_line("python -c pass", base))
    pass_median = statistics.median(w for w, _ in base)
    ratio = statistics.median(w for w, _ in dry) / pass_median
    print(f"ratio of medians: {ratio:.1f}x")
    if against:
        print(_line(f"dry run of {args.against}", against))
        ratio = statistics.median(w for w, _ in against) / pass_median
        print(f"ratio of medians ({args.against}): {ratio:.1f}x")


if __name__ == "__main__":
    main()
