"""The key enumeration started while the stage still serves: missing keys compile into
Triton's disk cache in background threads, so the key pass after the waves loads them.

On boot 1 the key pass waits on its slowest key: vLLM's top-k/top-p sampler kernel took 7-10 s
a key on the H200, and the pass took 14-18 s on every tier model however many keys it had
(31 to 138). Enumerated after each serving pass (the MoE buckets, each wave), the same keys
compile while the waves go on; the wave that launches the sampler's kernel goes first
(``serving_batches.waves``). On by default since the H200 measured it (docs/changelog.md,
2026-12-03: glm39's key pass 18.5 s -> 3.0 s, 0 late compiles); ``prewarm.early_keys: false``
turns it off (the worker reads the key and starts none).

Nothing here touches a kernel's in-process caches: a thread runs Triton's ``compile``, which
writes its disk cache and returns a kernel nobody loads; the key pass's own compile of that
key then finds the files. Before the key pass (and, failing that, when the worker's prewarm
ends) ``close`` cancels what has not started and waits for what runs, so no thread outlives
the stage. An early key the final enumeration would not make costs compile time, no memory.
"""

from __future__ import annotations

import ast
import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, wait
from dataclasses import dataclass
from typing import Any

from launcher.runtime.prewarm.accelerators import parallel_compile
from launcher.runtime.prewarm.providers import keys

logger = logging.getLogger(__name__)

THREADS = max(2, parallel_compile.COMPILE_THREADS // 4)
"""Few: the waves' own compiles run on the main thread and share the GIL with these."""


class EarlyKeys:
    """Background compiles of the keys the kernels launched so far are missing."""

    def __init__(self, ranges: Any, threads: int = THREADS) -> None:
        self._ranges = ranges
        self._pool = parallel_compile.DaemonPool(threads)
        self._futures: list[Future] = []
        self._submitted: set[tuple[int, Any]] = set()
        self._params: dict[int, Any] = {}
        self._seen_launches: dict[int, int] = {}
        self.served: tuple[Iterable[str], ...] = ()
        """Where the kernels served so far are (sets filled as the passes run): ``submit``
        enumerates only theirs, as the key pass does."""
        self.stopped = ""
        """Why submitting stopped (a failure here never stops the stage)."""
        self.unpacked = ""
        """The first key that could not be handed over, and why (left to the key pass)."""
        self.closed: Closed | None = None

    def submit(self) -> int:
        """Hand the compile threads every missing key of the served kernels not handed yet;
        how many. A failure stops early submitting, with its reason kept: the key pass
        compiles whatever did not start here."""
        if self.stopped or self.closed is not None:
            return 0
        try:
            return self._submit(set().union(*self.served))
        except Exception as exc:  # the key pass is the fallback for everything
            self.stopped = f"{type(exc).__name__}: {exc}"
            logger.warning("b12x-launch: early key compiles stopped: %s", self.stopped)
            return 0

    def _submit(self, served: set[str]) -> int:
        from launcher.runtime import jit_watch

        handed = 0
        longest_first = sorted(jit_watch.jit_functions(), key=lambda f: -keys.source_size(f))
        for fn in longest_first:  # as the key pass orders its jobs (keys.biggest_first)
            name = keys.kernel_name(fn)
            if name not in served:
                continue
            launches = keys.launched(fn)
            count = sum(len(v) for v in launches.values())
            if not count or self._seen_launches.get(id(fn)) == count:
                continue  # nothing new launched since the last enumeration
            self._seen_launches[id(fn)] = count
            if id(fn) not in self._params:
                self._params[id(fn)] = keys.params_of(fn)
            for device, seen in launches.items():
                e = keys.enumerate_keys(name, self._params[id(fn)], seen, self._ranges)
                for spec, options_text in e.missing:
                    try:
                        thunk = disk_compile(fn, device, spec, options_text, self._submitted)
                    except Exception as exc:  # the key pass compiles it and reports it
                        self.unpacked = self.unpacked or f"{name}: {type(exc).__name__}: {exc}"
                        continue
                    if thunk is not None:
                        self._futures.append(self._pool.submit(thunk))
                        handed += 1
        return handed

    def settled(self, timeout: float) -> bool:
        """Whether every key handed over finished within ``timeout`` seconds (keeps them)."""
        return not wait(self._futures, timeout=timeout).not_done

    def close(self, until: float | None = None) -> Closed:
        """Cancel what has not started, wait for what runs (until ``until``, default a fresh
        compile deadline), end the threads; idempotent."""
        if self.closed is not None:
            return self.closed
        start = time.monotonic()
        cancelled = sum(f.cancel() for f in self._futures)
        running = [f for f in self._futures if not f.cancelled()]
        left = max(0.0, (parallel_compile.deadline() if until is None else until) - start)
        done, unfinished = wait(running, timeout=left) if running else (set(), set())
        self._pool.shutdown()
        failed = [f.exception() for f in done if f.exception() is not None]
        self.closed = Closed(
            len(done) - len(failed),
            len(failed),
            cancelled,
            len(unfinished),
            time.monotonic() - start,
            f"{type(failed[0]).__name__}: {failed[0]}" if failed else "",
        )
        return self.closed

    def account(self) -> str:
        c = self.close()
        text = (
            f"early: {c.finished} keys compiled into Triton's disk cache during the waves "
            f"(waited {c.waited:.1f}s for the last); {c.cancelled} not started, left to this pass"
        )
        if c.failed:
            text += f"; {c.failed} failed (compiled again here), first: {c.first_failure}"
        if c.unfinished:
            text += f"; {c.unfinished} still compiling at the deadline"
        if self.unpacked:
            text += f"; a key not handed over: {self.unpacked}"
        return text + (f"; early submitting stopped: {self.stopped}" if self.stopped else "")


@dataclass(frozen=True)
class Closed:
    """What became of the keys handed over, when the key pass started."""

    finished: int
    failed: int
    cancelled: int
    """Not started: left to the key pass's own threads."""
    unfinished: int
    """Still compiling at the deadline (a stuck ptxas): their threads are daemons."""
    waited: float
    first_failure: str = ""


def disk_compile(
    fn: Any, device: Any, spec: tuple, options_text: str, handed: set[tuple[int, Any]]
) -> Callable[[], Any] | None:
    """A thunk compiling ``fn``'s key into Triton's disk cache, as ``JITFunction._do_compile``
    would (same source, target and options: the same cache entry); None where the process
    holds the key already or it was handed before (``handed`` gains it)."""
    options = ast.literal_eval(options_text)
    key = keys.unheld(fn, device, spec, options)
    if key is None or (id(fn), key) in handed:
        return None
    handed.add((id(fn), key))
    opts, signature, constexprs, attrs = keys.packed(fn, device, spec, options)
    src = fn.ASTSource(fn, signature, constexprs, attrs)
    target, compile_ = fn.device_caches[device][2], fn.compile
    return lambda: compile_(src, target=target, options=opts.__dict__)
