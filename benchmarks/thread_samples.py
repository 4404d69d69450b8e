"""What the stage's thread samples (``prewarm.compile_times: true``) cost the thread they sample.

    python benchmarks/thread_samples.py [--depth 60] [--rounds 7]

Every 20 ms the sampler thread takes the stage thread's stack (``sys._current_frames``) and
files it under a place, which needs the GIL. The boots that measure boot 1 against plain vLLM
ran with the samples on (docs/changelog.md, 2026-12-03); this says how much of that time is
the sampler's. The workload is pure Python at a stack ``--depth`` frames deep, as Dynamo's and
Inductor's are, timed in alternating rounds without and with a sampler on its thread.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

from launcher.runtime.prewarm.diagnostics import thread_samples


def _work(depth: int, n: int) -> int:
    if depth:
        return _work(depth - 1, n)
    total = 0
    for i in range(n):
        total += (i * 7) % 13
    return total


def _timed(depth: int, n: int, sampled: bool) -> float:
    sampler = thread_samples.Sampler(threading.get_ident()).start() if sampled else None
    start = time.perf_counter()
    _work(depth, n)
    took = time.perf_counter() - start
    if sampler is not None:
        sampler.stop()
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--n", type=int, default=6_000_000, help="loop iterations a round")
    args = parser.parse_args()
    plain, sampled = [], []
    for _ in range(args.rounds):
        plain.append(_timed(args.depth, args.n, sampled=False))
        sampled.append(_timed(args.depth, args.n, sampled=True))
    a, b = statistics.median(plain), statistics.median(sampled)
    print(f"stack depth {args.depth}, {args.rounds} rounds of {args.n:,} iterations")
    print(f"  without samples: {a:.3f} s (median)")
    print(f"  with samples:    {b:.3f} s (median), {100 * (b - a) / a:+.1f}%")


if __name__ == "__main__":
    main()
