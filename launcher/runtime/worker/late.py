"""The late-compile counters of one rank: armed once, when the stage ends, before vLLM sizes.

"Late" means after the KV cache is sized, not after vLLM's own warmup: vLLM allocates the cache,
then captures graphs, warms its sampler, autotunes and runs ``kernel_warmup``, and whatever
those compile or load takes memory the plan must have reserved. So every counter arms when the
stage ends and tags what it sees with a window (``contract.census.Window``):

- ``profile``: vLLM's own memory profile, before sizing. Its measurement sees what it kept, so
  nothing here is late; it is what the stage did not cover (``RankRecord.before_sizing``).
- ``warmup``: from sizing through vLLM's own warmup. Late.
- ``serving``: after. Late.

Each new cache file is recorded with the kernel it was built for, where its window decides it
(``cache_oracle.built_for``), so ``report`` and the GPU tier read that from the record.

Each counter records whether it ran (``RankRecord.counters``), so a count from a counter that
was off reads "not measured", never 0; a canary boot (``prewarm.canary``) compiles a new kernel
in each late window, which every armed counter must report.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from launcher.contract import census
from launcher.contract.census import Window
from launcher.contract.record import CacheFile, Canary, Counter, CounterName, RankRecord
from launcher.runtime import cache_oracle, jit_watch

logger = logging.getLogger("vllm.b12x_launch")

MONITOR = "monitor.is_active"
"""vLLM's own JIT monitor's switch (``launcher.vllm.internals``): on after its warmup."""


class LateCounters:
    """Arms the counters at the stage's end, moves them through the windows, and records what
    each saw into the rank's record (buffered until the record exists: the profile window
    runs before the worker builds it)."""

    def __init__(self, rank: int, strict: bool, log: Callable[[str], None]):
        self.rank, self.strict, self._log = rank, strict, log
        self.window: Window = "profile"
        self.record: RankRecord | None = None
        self._save: Callable[[], None] = lambda: None
        self._counters: dict[CounterName, Counter] = {}
        self._before: list[census.CensusEntry] = []
        self._files: list[CacheFile] = []
        self._poller: Any = None
        self._providers: list[tuple[Any, Any]] = []
        self._attributing = threading.Lock()  # files come on the poller's thread

    # -- arming ---------------------------------------------------------------------------
    def arm(self, providers: list[tuple[Any, Any]], run_dir: str | None) -> None:
        """At the stage's end: Triton's hooks, b12x's report and the cache oracle."""
        self._providers = providers
        if jit_watch.arm(self._on_compile, strict=False):  # strict from serving on
            self._set("triton_hooks", True)
        else:
            self._set("triton_hooks", False, "Triton does not import in this process")
        for provider, ctx in providers:  # b12x's reports its unprepared plans
            provider.freeze(ctx, self._on_b12x, strict=False)
        reported = any(getattr(p, "name", "") == "b12x" for p, _ in providers)
        self._set("b12x_report", reported, "" if reported else "the b12x provider did not run")
        self._arm_oracle(run_dir)
        self._set("vllm_monitor", False, "vLLM turns its monitor on after its warmup")
        armed = [c.name for c in self._counters.values() if c.armed]
        self._log(
            f"rank {self.rank}: late-compile counters armed at the stage's end: "
            f"{', '.join(armed) or 'none'}"
        )

    def _arm_oracle(self, run_dir: str | None) -> None:
        dirs = cache_oracle.cache_dirs()
        if not dirs:
            self._set("cache_oracle", False, "no compile cache directory is set")
            return
        if not run_dir:
            self._set("cache_oracle", False, "no run directory to keep its baseline in")
            return
        try:
            known = cache_oracle.write_baseline(run_dir, self.rank, dirs)
        except OSError as exc:
            self._set("cache_oracle", False, f"no baseline: {exc}")
            return
        self._poller = cache_oracle.Poller(dirs, known, self._on_file).start()
        self._set("cache_oracle", True)

    def attach(self, record: RankRecord, save: Callable[[], None]) -> None:
        """The rank's record now exists: what the profile window saw goes into it."""
        self.record, self._save = record, save
        record.before_sizing.extend(self._before)
        record.cache_files.extend(self._files)
        record.counters = list(self._counters.values())
        self._attribute()

    def sized(self) -> None:
        """The KV cache is sized: from here every compile is late."""
        self._flush_files()
        self.window = "warmup"
        self._extend_windows("warmup")

    def serving(self, model_runner: Any) -> None:
        """vLLM's warmup is done: serving's window; under ``strict_jit`` a compile now fails
        (b12x's sessions freeze only now: vLLM's warmup prepares its own plans on first use)."""
        self._flush_files()
        self.window = "serving"
        self._extend_windows("serving")
        if self.strict:
            jit_watch.arm(self._on_compile, strict=True)
            for provider, ctx in self._providers:
                provider.freeze(ctx, self._on_b12x, strict=True)
        self._monitor()
        self._save_now()

    def _monitor(self) -> None:
        from launcher.vllm.internals import Missing, resolve

        is_active = resolve(MONITOR)
        if isinstance(is_active, Missing):
            self._set("vllm_monitor", False, str(is_active))
        elif is_active():
            self._set("vllm_monitor", True, windows=["serving"])
        else:
            self._set("vllm_monitor", False, "vLLM left its JIT monitor off (enforce_eager?)")

    # -- the canary -----------------------------------------------------------------------
    def canary(self, run_dir: str | None, device: int | None) -> None:
        """Compile one new kernel in the current window (a canary boot only)."""
        if self.record is None:
            return
        found = self.record.canary or Canary()
        if device is None or not run_dir:
            why = "no CUDA device" if device is None else "no run directory"
            self.record.canary = found.model_copy(update={"skipped": why})
            self._save_now()
            return
        from launcher.runtime import canary

        try:
            name = canary.compile_one(Path(run_dir) / "canary", self.window, device)
        except Exception as exc:  # the canary proves the counters; it never stops a boot
            why = f"{type(exc).__name__}: {exc}"
            self.record.canary = found.model_copy(update={"skipped": why})
            logger.warning("b12x-launch rank %d: canary not compiled: %s", self.rank, why)
        else:
            kernels = {**found.kernels, self.window: name}
            self.record.canary = found.model_copy(update={"kernels": kernels})
            self._log(f"rank {self.rank}: canary {name} compiled in the {self.window} window")
        self._flush_files()
        self._save_now()

    # -- what the counters see ------------------------------------------------------------
    def _on_compile(self, event: Any) -> None:
        e = census.entry(
            event.kind,
            event.kernel,
            event.detail,
            specialization=event.specialization,
            window=self.window,
        )
        self._seen(e)

    def _on_b12x(self, kernel: Any, detail: str = "") -> None:
        self._seen(census.entry("b12x", str(kernel), f" {detail}", window=self.window))

    def _seen(self, e: census.CensusEntry) -> None:
        if self.window == "profile":
            (self.record.before_sizing if self.record else self._before).append(e)
            self._attribute(e.window)
            logger.info(
                "b12x-launch rank %d: compiled in vLLM's memory profile (before sizing, not "
                "late; the stage did not cover it): %s%s",
                self.rank,
                e.kernel,
                e.detail,
            )
            return
        self.record.late_compiles.append(e)
        self._attribute(e.window)
        logger.warning(
            "b12x-launch rank %d: LATE COMPILE after sizing (%s): %s%s",
            self.rank,
            self.window,
            e.kernel,
            e.detail,
        )
        self._save_now()

    def _on_file(self, name: str) -> None:
        found = CacheFile(name=name, window=self.window)
        if self.record is None:
            self._files.append(found)
            return
        self.record.cache_files.append(found)
        self._attribute(found.window)
        if self.window != "profile":
            self.record.late_files.append(name)
            logger.warning(
                "b12x-launch rank %d: LATE CACHE FILE after sizing (%s): %s",
                self.rank,
                self.window,
                name,
            )
        self._save_now()

    def _flush_files(self) -> None:
        """Files written before a window ends belong to it: poll now, not at the next tick."""
        if self._poller is None:
            return
        with contextlib.suppress(OSError):  # a cache rewritten under us: the next poll sees it
            self._poller.poll()

    def _attribute(self, window: Window | None = None) -> None:
        """Record which kernel each new file of ``window`` (None: every window) was built for.
        A window's answer changes with each file or compile it gains (a second kernel makes its
        launcher module nobody's), so it is asked again at each, before any save."""
        record = self.record
        if record is None:
            return
        with self._attributing:
            files = record.cache_files
            mine = [i for i, f in enumerate(files) if window is None or f.window == window]
            compiles = [*record.before_sizing, *record.late_compiles]
            owner = cache_oracle.built_for([files[i] for i in mine], compiles)
            for i in mine:
                kernel = owner.get(files[i].name, "")
                if files[i].kernel != kernel:
                    files[i] = files[i].model_copy(update={"kernel": kernel})

    # -- bookkeeping ----------------------------------------------------------------------
    def _set(
        self, name: CounterName, armed: bool, why: str = "", windows: list[Window] | None = None
    ) -> None:
        if windows is None:
            windows = [self.window] if armed else []
        self._counters[name] = Counter(name=name, armed=armed, windows=windows, why=why)
        if self.record is not None:
            self.record.counters = list(self._counters.values())

    def _extend_windows(self, window: Window) -> None:
        for name, c in list(self._counters.items()):
            if c.armed and name != "vllm_monitor" and window not in c.windows:
                self._counters[name] = c.model_copy(update={"windows": [*c.windows, window]})
        if self.record is not None:
            self.record.counters = list(self._counters.values())

    def _save_now(self) -> None:
        if self.record is not None:
            self._save()
