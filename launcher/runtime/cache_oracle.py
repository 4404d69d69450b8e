"""The late-compile oracle that needs no hook: a file that appears in a compile cache after ready.

Triton's hooks see ``@triton.jit`` kernels; Inductor compiles through ``triton.compile`` (its
post-compile hook only when asked), xgrammar's kernel module is imported on first use, and
DeepGEMM and FlashInfer JIT on their own. Every one of them writes its result into a cache
directory the launcher set (``contract.caches.CACHE_DIRS``), so a file that appears there after
the worker armed its counters (when its stage ends, before vLLM sizes) is a compile after the stage,
whoever made it. The worker writes the listing at that moment (``cache-baseline-rank<N>.json``)
and polls for new files, tagging each with its window (``runtime.worker.late``);
``report RUN_DIR`` and the GPU tier compare the caches with the baselines again at the end.
Which kernel a new file was built for, where its name or its window tells, is
:func:`built_for`'s; the record carries its answer (``CacheFile.kernel``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from launcher.contract.base import read_model
from launcher.contract.caches import CACHE_DIRS, CacheBaseline
from launcher.owned import write as owned_write

if TYPE_CHECKING:
    from launcher.contract.census import CensusEntry
    from launcher.contract.record import CacheFile

BASELINE = "cache-baseline-rank{rank}.json"
BASELINE_MAX = 64 << 20
"""A baseline lists the caches' file names at ready; past this it is not one."""
FIX = "boot again with this b12x-launch to count the compiles after the stage"
SKIP_DIRS = ("calibration",)
"""Under a cache root, what is not a compile cache (the records between boots)."""
SKIP_SUFFIXES = (".lock", ".tmp", ".temp")
"""Lock and scratch files a cache writes and removes around a read."""
POLL_S = 5.0
LAUNCHER = "__triton_launcher"
"""Triton's launcher module (``<hash>/__triton_launcher.cpython-312-x86_64-linux-gnu.so``):
built once per new kernel signature, in a directory of its own, and named by no kernel."""
GROUP = "__grp__"
"""Triton's group file beside a kernel's (``<hash>/__grp__<kernel>.json``)."""
HOOKED = ("triton", "inductor")
"""The compiles Triton's hooks report: the only ones that build a Triton launcher."""


def cache_dirs(env: Mapping[str, str] | None = None) -> dict[str, Path]:
    """The compile caches this process writes into, by variable (those that are set)."""
    env = os.environ if env is None else env
    return {var: Path(env[var]) for var in CACHE_DIRS if env.get(var)}


def listing(dirs: Mapping[str, Path]) -> set[str]:
    """Every file under ``dirs`` as ``VAR/relative/path`` (one name per file, whichever
    variable reaches it first when caches nest)."""
    out: set[str] = set()
    seen: set[str] = set()
    for var, root in sorted(dirs.items(), key=lambda kv: -len(str(kv[1]))):  # deepest first
        for path in _files(root):
            real = str(path)
            if real in seen:
                continue
            seen.add(real)
            out.add(f"{var}/{path.relative_to(root)}")
    return out


def _files(root: Path) -> Iterable[Path]:
    if not root.is_dir():
        return
    for here, subdirs, files in os.walk(root):
        subdirs[:] = [d for d in subdirs if d not in SKIP_DIRS]
        for name in files:
            if not name.endswith(SKIP_SUFFIXES):
                yield Path(here) / name


def write_baseline(run_dir: str | Path, rank: int, dirs: Mapping[str, Path]) -> set[str]:
    """Record what the caches hold now (the worker, when it arms its watchdog)."""
    files = listing(dirs)
    body = CacheBaseline(dirs={k: str(v) for k, v in dirs.items()}, files=sorted(files))
    owned_write.write_json(Path(run_dir) / BASELINE.format(rank=rank), body.to_json())
    return files


def late_files(run_dir: str | Path) -> list[str] | None:
    """Files in the run's caches that no rank's baseline holds: compiles after the stage.
    None when no baseline was written (plain vLLM, or a boot that never got that far): not
    measured, which is not "none".

    Raises:
        ContractError: a baseline that is damaged or of another layout, naming it (a count
            without one rank's baseline would take its files for late ones).
    """
    dirs: dict[str, Path] = {}
    known: set[str] = set()
    baselines = 0
    for path in sorted(Path(run_dir).glob(BASELINE.format(rank="*"))):
        body = read_model(path, CacheBaseline, "cache baseline", limit=BASELINE_MAX, fix=FIX)
        baselines += 1
        dirs.update({k: Path(v) for k, v in body.dirs.items()})
        known |= set(body.files)
    if not baselines:
        return None
    return sorted(listing(dirs) - known) if dirs else []


def built_for(files: Iterable[CacheFile], compiles: Iterable[CensusEntry]) -> dict[str, str]:
    """The kernel each new cache file was built for, where that is decidable; a file left
    out was made by something no hook named (late, if its window is).

    Within each window: a file named for one kernel Triton's hooks saw compile there
    (``<hash>/<name>.cubin``, ``<hash>/__grp__<name>.json``: Triton 3.6 names them by the
    kernel's function) is that kernel's. A launcher module is the kernel's when the hooks saw
    exactly one kernel compile in its window, it is the window's only launcher, and every
    other new file of the window is that kernel's too: one new kernel, one new signature.
    Otherwise (no compile, two, or a file nobody named beside it) it is left out.

    Args:
        files: the new files with their windows (``RankRecord.cache_files``).
        compiles: the compiles the hooks saw with their windows (``before_sizing`` and
            ``late_compiles``); b12x's programs build no Triton launcher and are not read.

    Returns:
        ``{file name: kernel}`` (the kernel as the census names it, ``module.name``).
    """
    kernels: dict[str, set[str]] = {}
    for e in compiles:
        if e.kind in HOOKED and e.window is not None:
            kernels.setdefault(e.window, set()).add(e.kernel)
    by_window: dict[str, list[str]] = {}
    for f in files:
        by_window.setdefault(f.window, []).append(f.name)
    out: dict[str, str] = {}
    for window, names in by_window.items():
        compiled = kernels.get(window, set())
        by_stem: dict[str, list[str]] = {}  # the worker asks at each new file: no scan per file
        for k in compiled:
            by_stem.setdefault(k.rsplit(".", 1)[-1], []).append(k)
        launchers = [n for n in names if _is_launcher(n)]
        for name in names:
            owners = by_stem.get(_stem(name), [])
            if len(owners) == 1:
                out[name] = owners[0]
        rest = {out.get(n) for n in names if n not in launchers}
        if len(compiled) == 1 and len(launchers) == 1 and rest <= compiled:
            out[launchers[0]] = next(iter(compiled))
    return out


def _is_launcher(name: str) -> bool:
    return PurePosixPath(name).name.startswith(LAUNCHER + ".")


def _stem(name: str) -> str:
    """A cache file's kernel name: its base name without Triton's group prefix and suffixes."""
    return PurePosixPath(name).name.removeprefix(GROUP).split(".", 1)[0]


class Poller:
    """Looks for new cache files every ``period`` seconds on a daemon thread; each new one is
    handed to ``on_late`` once."""

    def __init__(self, dirs: Mapping[str, Path], known: set[str], on_late, period: float = POLL_S):
        self._dirs, self._known, self._on_late, self._period = (
            dict(dirs),
            set(known),
            on_late,
            period,
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="b12x-cache-oracle", daemon=True)

    def start(self) -> Poller:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def poll(self) -> list[str]:
        new = sorted(listing(self._dirs) - self._known)
        self._known.update(new)
        for name in new:
            self._on_late(name)
        return new

    def _run(self) -> None:
        while not self._stop.wait(self._period):
            try:
                self.poll()
            except OSError:  # a cache being rewritten under us: the next poll sees it
                continue
