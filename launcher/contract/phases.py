"""A boot's phases: what each process of a launch was doing, and when (issue 67).

Two kinds of file:

- ``phases-launcher.json`` and ``phases-rank<N>.json`` in the run directory, one per process,
  rewritten whole (``atomic``) at every phase boundary: ``status RUN_DIR`` reads them while
  the boot goes on, from this container or another on the same volume;
- ``boots.json`` in the calibration store (``<cache_root>/calibration/<fp>/``), the last
  boots' phase times, written by rank 0 once the server answers: where the expected times
  come from (an artifact's baked boot travels with the store's folder).

Times are seconds since the epoch (``time.time()``): a reader in another process or container
compares them with its own clock.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, Strict

from launcher import atomic
from launcher.contract.base import Contract, ContractError, Frozen, read_json, validate

PHASES_SCHEMA = "b12x-launch/phases/1"
BOOTS_SCHEMA = "b12x-launch/boots/1"
LAUNCHER = "launcher"
BOOTS_FILE = "boots.json"
BOOTS_KEPT = 8
"""How many boots ``boots.json`` keeps (the newest)."""
PHASES_MAX = 1 << 20
"""The largest phase file read: a boot has tens of phases; a larger file is not ours."""

Seconds = Annotated[float, Strict(), Field(ge=0, le=1e11)]
"""A time since the epoch, or a duration, in seconds."""
Index = Annotated[int, Strict(), Field(ge=0, le=1 << 30)]
Name = Annotated[str, Field(min_length=1, max_length=120)]

BootKind = Literal["cold", "warm", "artifact"]
"""A boot with no earlier record of its plan and build here (``cold``), one after such a boot
(``warm``: its caches hold what the last one compiled), one restored from a cache artifact."""


def phase_file(who: str) -> str:
    """The run directory's file of ``who`` (``launcher`` or ``rank<N>``)."""
    return f"phases-{who}.json"


def rank_name(rank: int) -> str:
    return f"rank{rank}"


class Progress(Frozen):
    """How far a phase's parts went (``waves 14/27``, ``prewarm keys 2/3``)."""

    part: Name
    """What the parts are (``waves``, ``prewarm keys``)."""
    done: Index
    """The part running now, counted from 0."""
    total: Index
    """How many parts there are."""


class Phase(Contract):
    """One phase of one process."""

    name: Name
    """The phase (``weights``, ``stage``, ``graph capture``...)."""
    started: Seconds
    """When it began."""
    ended: Seconds | None = None
    """None while the phase runs."""
    expected: Seconds | None = None
    """The seconds it took on the boot the expected times come from (None: no record)."""
    progress: Progress | None = None
    """How far its parts went (None: it has none, or none said yet)."""

    def elapsed(self, now: float) -> float:
        return max(0.0, (self.ended if self.ended is not None else now) - self.started)


class PhaseFile(Contract):
    """One process's phases, in order; the last one runs while ``ended`` is None."""

    schema_: Literal["b12x-launch/phases/1"] = Field(PHASES_SCHEMA, alias="schema")
    """``b12x-launch/phases/1``."""
    who: Name
    """``launcher`` or ``rank<N>``."""
    fingerprint: str = ""
    """The plan the boot runs (empty where the worker has no launcher's file)."""
    host: str = ""
    """The machine's name."""
    pid: Index = 0
    """The process that writes the file."""
    started: Seconds
    """When the process began (the launcher: when the launch command started)."""
    expected_from: str = ""
    """Which boot the expected times come from, in words (empty: none)."""
    phases: list[Phase] = Field(default_factory=list)
    """Its phases in order."""
    failed: str = ""
    """Why the process stopped early, when it says so before it ends."""
    ready_at: Seconds | None = None
    """When ``/health`` first answered (rank 0 only; None: not yet, or not this process)."""
    # The launcher's file alone carries the boot's own facts, for the workers and ``status``:
    build: str = ""
    """The image's build id the launch runs under."""
    boot_kind: BootKind | None = None
    """``cold``, ``warm`` or ``artifact`` (the launcher's file only)."""
    boots_file: str = ""
    """The store's ``boots.json`` this boot's times go to once it is ready."""
    ready_url: str = ""
    """Where rank 0 asks whether the server answers (``http://host:port/health``)."""
    expected_all: dict[Name, dict[Name, Seconds]] = Field(default_factory=dict)
    """Every process's expected phase times (``launcher``/``rank<N>`` -> phase -> seconds)."""

    model_config = ConfigDict(populate_by_name=True)

    def to_json(self) -> dict:
        return self.model_dump(mode="json", by_alias=True)


class BootTimes(Frozen):
    """What one boot measured: each process's phase durations and the ready time."""

    build: str
    """The image's build id the boot ran under (``buildid``)."""
    kind: BootKind
    """``cold``, ``warm`` or ``artifact``."""
    when: Seconds
    """When the launch started."""
    ready: Seconds
    """From the launch's start to the first answer of ``/health``."""
    phases: dict[Name, dict[Name, Seconds]]
    """``launcher`` / ``rank<N>`` -> phase name -> seconds."""


class Boots(Frozen):
    """``boots.json``: the newest boots of one plan, newest last."""

    schema_: Literal["b12x-launch/boots/1"] = Field(BOOTS_SCHEMA, alias="schema")
    """``b12x-launch/boots/1``."""
    boots: list[BootTimes] = Field(default_factory=list)
    """The newest boots, oldest first (``BOOTS_KEPT`` at most)."""

    model_config = ConfigDict(populate_by_name=True, frozen=True)

    def to_json(self) -> dict:
        return self.model_dump(mode="json", by_alias=True)

    def latest(self, build: str, kind: BootKind | None = None) -> BootTimes | None:
        """The newest boot of ``build``; of ``kind`` when there is one of that kind."""
        same = [b for b in self.boots if b.build == build]
        of_kind = [b for b in same if b.kind == kind] if kind else []
        pick = of_kind or same
        return pick[-1] if pick else None


def durations(f: PhaseFile) -> dict[str, float]:
    """Each ended phase's seconds (a name met twice adds up)."""
    out: dict[str, float] = {}
    for p in f.phases:
        if p.ended is not None:
            out[p.name] = round(out.get(p.name, 0.0) + p.ended - p.started, 3)
    return out


def read_phases(path: Path) -> PhaseFile:
    """The phase file at ``path``, typed.

    Raises:
        ContractError: unreadable, too large, foreign or malformed (naming the file).
    """
    data = read_json(path, "phase file", PHASES_MAX)
    if data.get("schema") != PHASES_SCHEMA:
        raise ContractError(path, "not a b12x-launch phase file (no schema b12x-launch/phases/1)")
    return validate(PhaseFile, data, path, "phase file")


def write_phases(path: Path, phases: PhaseFile) -> Path:
    """Whole or not at all: a reader of a live boot sees the last version or this one."""
    return atomic.write_json(path, phases.to_json())


def read_boots(path: Path) -> Boots:
    """``boots.json``; an empty history when there is none.

    Raises:
        ContractError: unreadable, foreign or malformed.
    """
    if not path.exists() and not path.is_symlink():
        return Boots()
    if path.is_symlink():
        raise ContractError(path, "a symbolic link, never a worker's boots file")
    data = read_json(path, "boots file", PHASES_MAX)
    if data.get("schema") != BOOTS_SCHEMA:
        raise ContractError(path, "not a b12x-launch boots file")
    return validate(Boots, data, path, "boots file")


def add_boot(path: Path, boot: BootTimes) -> Boots:
    """Append ``boot`` to the history at ``path`` (an unreadable one starts afresh)."""
    try:
        old = read_boots(path).boots
    except ContractError:
        old = []
    boots = Boots(boots=[*old, boot][-BOOTS_KEPT:])
    atomic.write_json(path, boots.to_json())
    return boots


class Recorder:
    """One process's phases, kept in memory and written whole at every boundary.

    Phases run one after another: ``begin`` ends the one running. Each ended phase is said in
    one line (``say``) with its elapsed time and, when a record exists, the expected one. A
    file that cannot be written is said once and the boot goes on: the phases are for people
    watching, never a reason to stop a boot.
    """

    def __init__(
        self,
        path: Path | None,
        who: str,
        *,
        started: float,
        say,
        fingerprint: str = "",
        host: str = "",
        pid: int = 0,
        expected: dict[str, float] | None = None,
        expected_from: str = "",
        clock=None,
    ):
        import time

        self.path = path
        self.say = say
        self.clock = clock or time.time
        self.expected = dict(expected or {})
        self.file = PhaseFile(
            who=who,
            fingerprint=fingerprint,
            host=host,
            pid=pid,
            started=started,
            expected_from=expected_from if self.expected else "",
        )
        self._unwritable = False

    @property
    def current(self) -> Phase | None:
        last = self.file.phases[-1] if self.file.phases else None
        return last if last is not None and last.ended is None else None

    def begin(self, name: str, at: float | None = None) -> None:
        """End the phase running (if any) and start ``name`` (now, or ``at``: a phase that
        began before this process could say so, as the launch's plan or vLLM's start)."""
        now = self.clock()
        self._close(now)
        start = now if at is None else min(at, now)
        self.file.phases.append(Phase(name=name, started=start, expected=self.expected.get(name)))
        self.write()

    def part(self, part: str, done: int, total: int) -> None:
        """How far the running phase's parts went."""
        phase = self.current
        if phase is None:
            return
        phase.progress = Progress(part=part[:120] or "part", done=max(0, done), total=max(0, total))
        self.write()

    def end(self) -> None:
        self._close(self.clock())
        self.write()

    def fail(self, why: str) -> None:
        self.file.failed = why[:2000]
        self.end()

    def durations(self) -> dict[str, float]:
        return durations(self.file)

    def _close(self, now: float) -> None:
        phase = self.current
        if phase is None:
            return
        phase.ended = max(now, phase.started)
        took = phase.ended - phase.started
        line = f"{self.file.who}: phase {phase.name} took {took:.1f}s"
        if phase.expected is not None:
            source = self.file.expected_from.split(",")[0]  # the file says the rest
            line += f" (expected {phase.expected:.1f}s, {source})"
        self.say(line)

    def write(self) -> None:
        if self.path is None or self._unwritable:
            return
        try:
            write_phases(self.path, self.file)
        except (OSError, ValueError) as exc:
            self._unwritable = True
            self.say(f"{self.file.who}: phases not recorded in {self.path}: {exc}")


STATUS_SCHEMA = "b12x-launch/status/1"
PhaseState = Literal["done", "running", "possibly stuck", "process gone", "not started"]


class PhaseStatus(Frozen):
    """One phase of one process as ``status`` sees it now."""

    name: str
    """The phase."""
    state: PhaseState
    """``done``, ``running``, ``possibly stuck`` or ``not started`` (one the last boot had)."""
    elapsed: float | None = None
    """Seconds so far (None: not started)."""
    expected: float | None = None
    """Seconds it took on the boot the expected times come from (None: no record)."""
    progress: Progress | None = None
    """How far its parts went."""


class ProcessStatus(Frozen):
    who: str
    """``launcher`` or ``rank<N>``."""
    host: str = ""
    """The machine it runs on."""
    pid: int = 0
    """Its process id there."""
    current: str | None = None
    """The phase running (None: none; ended or not begun)."""
    failed: str = ""
    """Why it stopped early, when it said so."""
    alive: bool | None = None
    """Whether its process still runs (None: another machine's, or unknown; the launcher's
    process became vLLM's API server, so its own is not asked)."""
    phases: list[PhaseStatus] = Field(default_factory=list)
    """Its phases in order, then those ahead of it."""


class BootStatus(Frozen):
    """``status RUN_DIR --json``: the boot's phases per process, read from the run directory."""

    schema_: Literal["b12x-launch/status/1"] = Field(STATUS_SCHEMA, alias="schema")
    """``b12x-launch/status/1``."""
    run_dir: str
    """The run directory read."""
    now: float
    """When it was read (seconds since the epoch)."""
    fingerprint: str = ""
    """The plan the boot runs."""
    boot_kind: BootKind | None = None
    """``cold``, ``warm`` or ``artifact``."""
    expected_from: str = ""
    """The boot the expected times come from, in words (empty: none)."""
    ready: float | None = None
    """Seconds from the launch's start to the server's first answer (None: not yet)."""
    elapsed: float | None = None
    """Seconds since the launch started (to ready, once ready)."""
    slowest: str | None = None
    """The rank furthest behind (None: fewer than two ranks)."""
    stuck: list[str] = Field(default_factory=list)
    """``who: phase`` of every phase running past ``stuck_factor`` x its expected time."""
    stuck_factor: float
    """A running phase past this many times its expected time..."""
    stuck_floor: float
    """... and past this many seconds is possibly stuck."""
    problems: list[str] = Field(default_factory=list)
    """Files that could not be read, each with why."""
    processes: list[ProcessStatus] = Field(default_factory=list)
    """The launcher, then each rank."""

    model_config = ConfigDict(populate_by_name=True, frozen=True)

    def to_json(self) -> dict:
        return self.model_dump(mode="json", by_alias=True)
