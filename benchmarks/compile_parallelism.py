"""How far Triton compiles scale in threads against processes (no GPU needed).

    python benchmarks/compile_parallelism.py [--keys 8] [--workers 2] [--blocks 40]

The prewarm compiles Triton keys in threads (the MoE buckets' compile-only launches, the early
key enumeration, the key pass). Part of each compile holds the GIL (the frontend that walks
the kernel's Python AST), so threads share that part with each other and with the stage's own
thread. This compiles ``--keys`` keys of one generated kernel (``--blocks`` blocks of
arithmetic and a reduction each; distinct constexprs, so no key hits another's cache) for an
H200 target three ways: one after another, in ``--workers`` threads and in ``--workers``
forked processes, each into a fresh Triton cache, and prints the wall times. Then it compiles
the keys once more in one thread, and once more in one process, while this thread counts in a
pure-Python loop: the loop's speed against an idle one is what the stage's own thread keeps
while a compile thread (or process) works beside it.
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing
import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

KERNEL = None


def _source(blocks: int) -> str:
    lines = [
        "import triton",
        "import triton.language as tl",
        "",
        "",
        "@triton.jit",
        "def generated(X, Y, n, BLOCK: tl.constexpr, SEED: tl.constexpr):",
        "    i = tl.arange(0, BLOCK)",
        "    x = tl.load(X + i, mask=i < n, other=0.0)",
    ]
    for b in range(blocks):
        lines += [
            f"    x = tl.where(x > {b}.5, x * 1.0001 + SEED, tl.exp(x) - {b})",
            f"    s{b} = tl.sum(x, axis=0)",
            f"    x = x + s{b} * 0.001",
        ]
    lines.append("    tl.store(Y + i, x, mask=i < n)")
    return "\n".join(lines) + "\n"


def _load(blocks: int) -> None:
    global KERNEL
    path = Path(tempfile.mkdtemp()) / "generated_kernel.py"
    path.write_text(_source(blocks))
    spec = importlib.util.spec_from_file_location("generated_kernel", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["generated_kernel"] = module
    spec.loader.exec_module(module)
    KERNEL = module.generated


def compile_key(seed: int) -> float:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, compile

    signature = {"X": "*fp32", "Y": "*fp32", "n": "i32", "BLOCK": "constexpr", "SEED": "constexpr"}
    constexprs = {(3,): 1024, (4,): seed}
    attrs = {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]}
    start = time.perf_counter()
    compile(ASTSource(KERNEL, signature, constexprs, attrs), target=GPUTarget("cuda", 90, 32))
    return time.perf_counter() - start


def run(mode: str, keys: int, workers: int, first_seed: int) -> float:
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp()
    seeds = range(first_seed, first_seed + keys)
    start = time.perf_counter()
    if mode == "serial":
        for seed in seeds:
            compile_key(seed)
    elif mode == "threads":
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(compile_key, seeds))
    else:  # forked after the kernel is loaded, as a pool started by the worker would be
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(workers, mp_context=context) as pool:
            list(pool.map(compile_key, seeds))
    return time.perf_counter() - start


def _count(seconds: float) -> float:
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        n += 1
    return n / seconds


def beside(mode: str, keys: int, first_seed: int) -> float:
    """This thread's loop speed while one worker (``thread`` or ``process``) compiles ``keys``
    keys, against its idle speed."""
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp()
    seeds = list(range(first_seed, first_seed + keys + 1))
    pool = None
    if mode == "process":
        pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
        pool.submit(compile_key, seeds[0]).result()  # started before the count

        def work() -> None:
            list(pool.map(compile_key, seeds[1:]))
    else:
        compile_key(seeds[0])

        def work() -> None:
            for seed in seeds[1:]:
                compile_key(seed)

    worker = threading.Thread(target=work)
    worker.start()
    rates = []
    while worker.is_alive():
        rates.append(_count(0.25))
    worker.join()
    if pool is not None:
        pool.shutdown()
    idle = sum(_count(0.25) for _ in range(8)) / 8  # after, the worker idle: as fast as it gets
    return sum(rates) / len(rates) / idle if rates else 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--blocks", type=int, default=40)
    args = parser.parse_args()
    _load(args.blocks)
    compile_key(0)  # Triton's own imports and first-use costs, outside the timings
    times = {
        mode: run(mode, args.keys, args.workers, 1000 * (i + 1))
        for i, mode in enumerate(("serial", "threads", "processes"))
    }
    serial = times["serial"]
    print(f"{args.keys} keys, {args.workers} workers, {os.cpu_count()} CPUs, {args.blocks} blocks")
    for mode, seconds in times.items():
        print(f"  {mode:9} {seconds:6.2f} s wall, {serial / seconds:4.2f}x")
    for i, mode in enumerate(("thread", "process")):
        speed = beside(mode, args.keys, 10000 * (i + 1))
        print(f"  a busy Python thread keeps {speed:.0%} of its speed beside one compile {mode}")


if __name__ == "__main__":
    main()
