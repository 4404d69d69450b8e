"""Where one thread's time goes, by sampling its Python stack: what the compile hooks cannot
name.

On the H200 the stage's own thread compiled 80 Triton keys in 8 s, yet glm39's waves after the
first took 28 s (docs/changelog.md, 2026-12-03): the rest is Inductor, Dynamo, vLLM's other
JITs or the eager steps themselves, which no hook reports. A daemon thread reads the stage
thread's frame every ``INTERVAL`` seconds (``sys._current_frames``: a dict copy under the GIL,
nothing installed, nothing the stage calls changes) and files each sample under the innermost
frame that belongs to a known place, else under that frame's own function.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from types import FrameType

INTERVAL = 0.02
WINDOW = 10.0
"""The timeline's step, seconds, where no pass marked its phase."""
TOP = 8
PHASE_TOP = 3
"""Places named per phase."""
_phase = ""
"""What the stage is doing now (``mark``): an entry point, a wave."""


def mark(phase: str) -> None:
    """Say what the stage does from now on; samples are filed under it as well. One
    assignment: costs nothing when no sampler runs."""
    global _phase
    _phase = phase


PLACES = (
    ("/triton/runtime/autotuner.py", "Triton autotuning"),
    ("/triton/runtime/_async_compile.py", "waiting for a Triton compile thread"),
    ("/triton/runtime/cache.py", "Triton's cache"),
    ("/triton/backends/nvidia/driver.py", "Triton loading (module, launcher)"),
    ("/triton/runtime/build.py", "Triton loading (module, launcher)"),
    ("/triton/compiler/", "Triton compiling"),
    ("/triton/backends/", "Triton compiling"),
    ("/torch/_inductor/runtime/", "Inductor's runtime (launch, autotune)"),
    ("/torch/_inductor/", "Inductor compiling"),
    ("/torch/_dynamo/", "Dynamo"),
    ("/torch/fx/", "Dynamo (FX)"),
    ("/torch/_functorch/", "AOT autograd"),
    ("/torch/_subclasses/", "fake tensors"),
    ("/xgrammar/", "xgrammar"),
    ("/deep_gemm/", "DeepGEMM"),
    ("/flashinfer/", "FlashInfer"),
    ("/triton/runtime/", "Triton launching (binder, key)"),
)
"""Path fragments, most specific first: the innermost frame under one names the sample."""


def place(frame: FrameType | None) -> str:
    """The sample's name: the innermost frame under a known place, else the innermost
    frame's ``file:function`` (its path from the package root)."""
    innermost = frame
    while frame is not None:
        found = _place_of(frame.f_code.co_filename)
        if found:
            return found
        frame = frame.f_back
    if innermost is None:
        return "(no Python frame)"
    path = innermost.f_code.co_filename.replace("\\", "/")
    short = path.rsplit("/site-packages/", 1)[-1] if "/site-packages/" in path else path
    short = "/".join(short.split("/")[-3:])
    return f"{short}:{innermost.f_code.co_name}"


_PLACES_OF: dict[str, str] = {}
"""A source file's place ("" for none): the stacks are 100-200 frames deep under Dynamo and
Inductor, and matching every frame's path against every place, 50 times a second, took the
sampled thread's time (``benchmarks/thread_samples.py``)."""


def _place_of(filename: str) -> str:
    found = _PLACES_OF.get(filename)
    if found is None:
        path = filename.replace("\\", "/")
        found = next((name for fragment, name in PLACES if fragment in path), "")
        _PLACES_OF[filename] = found
    return found


@dataclass
class Samples:
    thread: int
    started: float = field(default_factory=time.monotonic)
    taken: list[tuple[float, str, str]] = field(default_factory=list)
    """(when, place, phase) each sample."""

    def describe(self, top: int = TOP, window: float = WINDOW) -> str:
        """The most sampled places over the whole block, then per phase (as the stage
        marked them, in order) its time and top places; per window where none was marked.
        Each sample stands for the time since the one before (a sampler kept from the GIL
        samples late, not less)."""
        if not self.taken:
            return "thread samples: none taken"
        marked = any(phase for _, _, phase in self.taken)
        whole: Counter = Counter()
        groups: dict[str, Counter] = {}
        last = self.started
        for t, name, phase in self.taken:
            if marked:
                key = phase or "(unmarked)"
            else:
                key = f"+{(t - self.started) // window * window:.0f}s"
            whole[name] += t - last
            groups.setdefault(key, Counter())[name] += t - last
            last = t
        head = f"thread samples: {len(self.taken)} over {last - self.started:.0f}s: "
        parts = "; ".join(
            f"{key} {sum(c.values()):.1f}s {_shares(c, PHASE_TOP if marked else 1)}"
            for key, c in groups.items()
        )
        by = "phase" if marked else f"{window:.0f}s window"
        return f"{head}{_shares(whole, top)}; by {by}: {parts}"


def _shares(seconds: Counter, top: int) -> str:
    total = sum(seconds.values()) or 1.0
    return ", ".join(f"{name} {s / total:.0%}" for name, s in seconds.most_common(top))


class Sampler:
    """Samples ``thread``'s stack from a daemon thread until ``stop``."""

    def __init__(self, thread: int, interval: float = INTERVAL) -> None:
        self.samples = Samples(thread)
        self._interval = interval
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._run, name="b12x-samples", daemon=True)

    def start(self) -> Sampler:
        global _phase
        _phase = ""  # a mark made while no sampler ran is not this one's
        self._sampler.start()
        return self

    def _run(self) -> None:
        thread = self.samples.thread
        while not self._stop.wait(self._interval):
            frame = sys._current_frames().get(thread)
            if frame is None:
                return  # the thread ended
            self.samples.taken.append((time.monotonic(), place(frame), _phase))
            del frame  # no frame kept alive between samples

    def stop(self) -> Samples:
        global _phase
        self._stop.set()
        self._sampler.join(5)
        _phase = ""
        return self.samples
