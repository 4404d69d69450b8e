"""Where the stage's compile time goes: every compile that passes through Triton's JIT hooks
while the prewarm runs, on the stage's own thread (the waves wait on it) or beside it (the
compile threads of the MoE buckets and the key pass), slowest first.

Boot 1 against plain vLLM's cold boot is decided by what the stage's thread waits on: on the
H200 the key pass stopped mattering once its keys compiled early, and what was left were
compiles inside the waves (docs/changelog.md, 2026-12-03), which the per-wave times do not
name. The hooks are the watchdog's (``jit_watch.JitWatch``), installed for the prewarm only
and put back as they were, before vLLM's own warmup installs its monitor and the worker its
watchdog. Off unless ``prewarm.compile_times: true``: the worker otherwise installs no hook
before sizing (a precaution kept since the H200 showed hooked and unhooked boots identical bit
for bit, docs/gpu-runs/2026-12-01-h200-watch-fidelity.json).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from launcher.runtime import jit_watch
from launcher.runtime.prewarm.diagnostics import thread_samples

SLOWEST = 6
"""How many of the stage thread's compiles the log line names."""


@dataclass
class StageCompiles:
    thread: int
    """The thread the stage ran on: its compiles are the ones the waves wait for."""
    started: float
    """``time.monotonic()`` when the prewarm began (compiles are placed from it)."""
    events: list[jit_watch.CompileEvent] = field(default_factory=list)
    hooked: bool = False
    """Whether Triton's hooks could be installed (False without Triton)."""
    samples: thread_samples.Samples | None = None
    """Where the stage's thread spent its time, compiling or not (``thread_samples``)."""

    def on_thread(self) -> list[jit_watch.CompileEvent]:
        """Compiles the stage's thread waited for: launched there, not compile-only."""
        return [
            e
            for e in self.events
            if e.kind == "triton" and e.thread == self.thread and not e.warmup
        ]

    def describe(self, slowest: int = SLOWEST) -> str:
        if not self.hooked:
            return "compile times not taken: Triton's hooks are not there"
        waited = self.on_thread()
        ids = {id(e) for e in waited}
        beside = [e for e in self.events if e.kind == "triton" and id(e) not in ids]
        inductor = sum(e.kind == "inductor" for e in self.events)
        total = sum(e.seconds or 0.0 for e in waited)
        ranked = sorted(waited, key=lambda e: -(e.seconds or 0.0))[:slowest]
        named = ", ".join(
            f"{e.kernel.rsplit('.', 1)[-1]} {e.seconds or 0.0:.1f}s"
            f" at +{e.started - self.started:.0f}s"
            for e in ranked
        )
        return (
            f"compiles in the prewarm: {len(waited)} Triton keys on its thread, {total:.1f}s"
            + (f" (slowest: {named})" if named else "")
            + f"; {len(beside)} compile-only or on other threads; "
            f"{inductor} Inductor kernels reported"
        )


@contextlib.contextmanager
def timed() -> Iterator[StageCompiles]:
    """Times every Triton compile while the block runs, and samples where its thread's time
    goes; the hooks and the sampler end with it."""
    out = StageCompiles(thread=threading.get_ident(), started=time.monotonic())
    watch = jit_watch.JitWatch()
    out.hooked = watch.install()
    sampler = thread_samples.Sampler(out.thread).start()
    try:
        yield out
    finally:
        out.samples = sampler.stop()
        if out.hooked:
            watch.uninstall()
            out.events = list(watch.events)
