"""The run directory's files: what the launcher hands the workers, and what they hand back.

The launcher writes ``plan.json`` (the run file) and points the workers at it through the
environment; each worker writes ``measure-rank{N}.json`` (its record), which calibration,
``report RUN_DIR`` and qualify read. Both layouts, their names and their versions live here,
in the base room, so the writer (the argv builder, the worker) and every reader agree without
importing each other. Dict-typed parts (components, prewarm results) keep the JSON shape the
records always had: records written before these types existed read back unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launcher import atomic, bounded
from launcher.units import format_size

RUN_FILE_VERSION = 2
"""plan.json's layout for the worker (2: the resolved deployment and the model facts; the
optional ``driver``, ``gpu_kind`` and ``artifact`` added since need no new version: a worker
reads their absence as unknown, or as no artifact restored)."""
PLAN_FILE = "plan.json"
COMMAND_FILE = "command.txt"
RECORD_SCHEMA = "b12x-launch/measurement/1"

# The launcher's own variables. Never B12X_, CUTE_ or CUTLASS_: b12x puts those into
# its compile-cache key, and one extra variable would recompile every kernel.
ENV_PREFIX = "BLAUNCH_"
PLAN_ENV = ENV_PREFIX + "PLAN"
RUN_DIR_ENV = ENV_PREFIX + "RUN_DIR"
FINGERPRINT_ENV = ENV_PREFIX + "FINGERPRINT"
REQUIRE_PLAN_ENV = ENV_PREFIX + "REQUIRE_PLAN"
"""Set to 1 with a plan: a planned worker that cannot read its plan then refuses to start
instead of sizing the KV cache as plain vLLM does (a command run by hand without the plan)."""


class RunFileError(ValueError):
    """A run file or record that is unreadable, foreign or of another version; names the file."""


def record_name(rank: int) -> str:
    return f"measure-rank{rank}.json"


# -- the run file ------------------------------------------------------------------------
@dataclass(frozen=True)
class RunFile:
    """The parts of ``plan.json`` a worker reads; ``data`` is the whole file (the rendered
    plan the report shows)."""

    fingerprint: str
    ranks: list[dict[str, Any]]
    kv: dict[str, Any]
    profile_data: dict[str, Any]
    deployment: dict[str, Any]
    model_facts: dict[str, Any]
    driver: str | None = None
    """The GPU driver the launcher read on the cards (None: a CPU run or a dry run)."""
    gpu_kind: str | None = None
    """The kind of the cards the launcher read (None: not read; the profile's is assumed)."""
    artifact: ArtifactRecord | None = None
    """The cache artifact restored before vLLM started (``--cache-from``), or None: no
    artifact was given. ``artifact.warm`` is the runtime's sign that this boot's caches and
    calibration records came whole from an earlier boot of the same deployment."""
    data: dict[str, Any] = field(default_factory=dict, repr=False)


ARTIFACT_KEY = "artifact"
"""plan.json's key for the restored artifact (``ArtifactRecord.to_dict``); absent: none."""


@dataclass(frozen=True)
class ArtifactRecord:
    """What the launcher did with a cache artifact before vLLM started (``--cache-from``,
    ``BLAUNCH_CACHE_FROM``): written into ``plan.json`` (``ARTIFACT_KEY``) for the workers
    and ``report RUN_DIR``. The manifest it came from is ``launcher.artifact.manifest``."""

    state: str
    """``restored`` (its files were moved into the caches now), ``present`` (restored by an
    earlier start into this cache root; every file still there) or ``ignored`` (it did not
    fit this node and ``--force`` booted without it; ``note`` says which key differed)."""
    artifact_id: str
    """16 hex digits of its manifest's sha256."""
    source: str
    """Where it was read from (a directory or a tar)."""
    fingerprint: str
    """The plan fingerprint it was baked for (its key; equal to the run's unless ignored)."""
    keys: dict[str, Any]
    """All its keys: fingerprint, gpu_kind, compute_capability, cuda_driver, build_id and
    the versions behind the build id."""
    caches: dict[str, dict[str, int]]
    """Files and bytes per cache it held (``triton``, ``inductor``, ``vllm-compile``, ...)."""
    file_count: int
    total_bytes: int
    calibration_ranks: tuple[int, ...] = ()
    """Ranks whose measurement record (measured figures and census) it held; restored into
    ``<cache_root>/calibration/<fingerprint>/rank<N>.json``."""
    qualified: bool = False
    """Whether it held the qualified KV size (``qualified.json``)."""
    census_entries: int = 0
    """Late compiles its records' census held."""
    files_restored: int = 0
    """Files written into the caches by this restore."""
    files_present: int = 0
    """Files the caches already held with the same bytes."""
    files_kept: int = 0
    """Files the caches already held with other bytes: the node's own, kept."""
    covers: bool = False
    """Whether it covers this boot: restored or present, baked for this run's fingerprint,
    and holding a measurement record of every rank of this node."""
    seconds: float = 0.0
    """How long verifying and restoring took."""
    note: str = ""

    @property
    def warm(self) -> bool:
        """Whether the runtime may take this boot as a warm one: every compiled object and
        record of the baked boot is in the caches and the calibration store (see
        docs/operations.md, "A fresh node boots warm")."""
        return self.state in ("restored", "present") and self.covers

    def to_dict(self) -> dict[str, Any]:
        out = dict(vars(self))
        out["calibration_ranks"] = list(self.calibration_ranks)
        out["warm"] = self.warm
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ArtifactRecord:
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        known["calibration_ranks"] = tuple(int(r) for r in known.get("calibration_ranks") or ())
        return cls(**known)


def write_run_file(path: Path, plan: dict[str, Any], **parts: Any) -> Path:
    """Write the rendered ``plan`` with the worker's ``parts`` (profile_data, deployment,
    model_facts, driver, ...) and this version, atomically."""
    return atomic.write_json(path, {**plan, **parts, "run_file": RUN_FILE_VERSION})


_REQUIRED = ("ranks", "kv", "profile_data", "deployment", "model_facts")


def read_run_file(path: str | Path) -> RunFile:
    """The run file at ``path``, checked: raises ``RunFileError`` naming it when it cannot be
    read, is not a b12x-launch run file, or was written by another version."""
    data = read_json(Path(path), "run file")
    version = data.get("run_file")
    if version != RUN_FILE_VERSION:
        raise RunFileError(
            f"{path}: run file version {version!r}, this b12x-launch reads {RUN_FILE_VERSION}: "
            "it was written by another b12x-launch; write it again with this one"
        )
    missing = [k for k in _REQUIRED if not isinstance(data.get(k), (dict, list))]
    if missing:
        raise RunFileError(f"{path}: not a complete run file (no {', '.join(missing)})")
    return RunFile(
        fingerprint=str(data.get("fingerprint", "")),
        ranks=data["ranks"],
        kv=data["kv"],
        profile_data=data["profile_data"],
        deployment=data["deployment"],
        model_facts=data["model_facts"],
        driver=data.get("driver") or None,
        gpu_kind=data.get("gpu_kind") or None,
        artifact=artifact_record(path, data.get(ARTIFACT_KEY)),
        data=data,
    )


def artifact_record(path: str | Path, value: Any) -> ArtifactRecord | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise RunFileError(f"{path}: malformed {ARTIFACT_KEY!r} record (not a JSON object)")
    try:
        return ArtifactRecord.from_dict(value)
    except (TypeError, ValueError) as exc:
        raise RunFileError(f"{path}: malformed {ARTIFACT_KEY!r} record ({exc})") from None


JSON_MAX = 64 << 20
"""The largest run file or record read (a record with a long census is a few MiB)."""
FIGURE_MAX = 1 << 50
"""1 PiB: more bytes than any figure of one GPU; a record with more was not a worker's."""


def read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        data = bounded.read_json(path, JSON_MAX, what)
    except (OSError, ValueError) as exc:
        raise RunFileError(f"unreadable {what} {path}: {exc}") from None
    if not isinstance(data, dict):
        raise RunFileError(f"{path}: not a b12x-launch {what} (not a JSON object)")
    return data


# -- a worker's record -------------------------------------------------------------------
@dataclass(frozen=True)
class Budget:
    """What the worker handed vLLM for the KV cache (``bytes``, on ``basis``), what it kept
    back by component, and the room it measured it could give (free after vLLM's profile
    less the reserves: the plan's figure is checked against it even when returned)."""

    bytes: int
    basis: str
    reserved: dict[str, int] = field(default_factory=dict)
    room: int | None = None

    def describe(self) -> str:
        parts = ", ".join(f"{k} {format_size(v)}" for k, v in self.reserved.items())
        return f"{format_size(self.bytes)} ({self.basis}; reserved {parts})"

    def to_dict(self) -> dict[str, Any]:
        # Flat, as the records always were: the reserved components beside the figure.
        return {
            "bytes": self.bytes,
            "basis": self.basis,
            "measured_room": self.room,
            **self.reserved,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Budget:
        rest = {k: v for k, v in d.items() if k not in ("bytes", "basis", "measured_room")}
        return cls(int(d["bytes"]), str(d.get("basis", "")), rest, d.get("measured_room"))


@dataclass
class KvActual:
    """The KV cache vLLM allocated, against the plan."""

    blocks: int
    tokens: int
    planned_tokens: int


@dataclass
class Activation:
    """Torch's activation peak across vLLM's profile run, and what its warmup left cached."""

    profile_peak: int
    warmup_cached: int


@dataclass
class RankRecord:
    """One rank's measurements (``measure-rank{N}.json``), built up by the worker as vLLM
    starts and saved whole after each step (``save_record``)."""

    fingerprint: str
    rank: int
    when: str
    environment: dict[str, Any]
    plan: dict[str, int]
    measured: dict[str, int]
    vllm_available: int
    budget: Budget
    prewarm: list[dict[str, Any]] = field(default_factory=list)
    prewarm_seconds: dict[str, float] = field(default_factory=dict)
    prewarm_measurement: dict[str, Any] | None = None
    late_compiles: list[dict[str, Any]] = field(default_factory=list)
    learned: list[dict[str, Any]] = field(default_factory=list)
    late_files: list[str] = field(default_factory=list)
    """Files that appeared in the compile caches after the watchdog was armed
    (``runtime.cache_oracle``): compiles no hook saw count here too."""
    # Set by later steps; absent from the file until then (a reader tells "not yet" by it).
    kv: KvActual | None = None
    free_after_warmup: int | None = None
    activation: Activation | None = None
    measured_why: dict[str, str] = field(default_factory=dict)
    """For a measured figure that is more than one reading, how it was made (the next plan's
    detail string carries it)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, keys in the order records have always had."""
        out: dict[str, Any] = {
            "schema": RECORD_SCHEMA,
            "fingerprint": self.fingerprint,
            "rank": self.rank,
            "when": self.when,
            "environment": self.environment,
            "plan": self.plan,
            "measured": self.measured,
            "prewarm": self.prewarm,
            "prewarm_seconds": self.prewarm_seconds,
            "prewarm_measurement": self.prewarm_measurement,
            "vllm_available": self.vllm_available,
            "budget": self.budget.to_dict(),
            "late_compiles": self.late_compiles,
            "learned": self.learned,
        }
        if self.late_files:
            out["late_files"] = list(self.late_files)
        if self.kv is not None:
            out["kv"] = vars(self.kv).copy()
        if self.free_after_warmup is not None:
            out["free_after_warmup"] = self.free_after_warmup
        if self.activation is not None:
            out["activation"] = vars(self.activation).copy()
        if self.measured_why:
            out["measured_why"] = dict(self.measured_why)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RankRecord:
        kv, act = d.get("kv"), d.get("activation")
        return cls(
            fingerprint=str(d.get("fingerprint", "")),
            rank=int(d["rank"]),
            when=str(d.get("when", "?")),
            environment=dict(d.get("environment") or {}),
            plan=dict(d.get("plan") or {}),
            measured=dict(d["measured"]),
            vllm_available=int(d.get("vllm_available") or 0),
            budget=Budget.from_dict(d.get("budget") or {"bytes": 0, "basis": ""}),
            prewarm=list(d.get("prewarm") or []),
            prewarm_seconds=dict(d.get("prewarm_seconds") or {}),
            prewarm_measurement=d.get("prewarm_measurement"),
            late_compiles=list(d.get("late_compiles") or []),
            late_files=list(d.get("late_files") or []),
            learned=list(d.get("learned") or []),
            kv=KvActual(**kv) if isinstance(kv, dict) else None,
            free_after_warmup=d.get("free_after_warmup"),
            activation=Activation(**act) if isinstance(act, dict) else None,
            measured_why={str(k): str(v) for k, v in (d.get("measured_why") or {}).items()},
        )


def check_record(path: Path, data: Any) -> dict[str, Any]:
    """``data`` if it is a well-formed record, else ``RunFileError`` naming ``path``."""
    if not isinstance(data, dict) or data.get("schema") != RECORD_SCHEMA:
        raise RunFileError(f"{path}: not a b12x-launch measurement record")
    measured = data.get("measured")
    if not isinstance(measured, dict) or not all(_figure(v) for v in measured.values()):
        raise RunFileError(f"{path}: malformed measured figures")
    rank = data.get("rank")
    if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank < 1 << 16:
        raise RunFileError(f"{path}: malformed rank")
    shapes = {
        "environment": dict,
        "plan": dict,
        "budget": dict,
        "when": str,
        "fingerprint": str,
        "prewarm": list,
        "late_compiles": list,
        "learned": list,
        "kv": dict,
        "activation": dict,
    }
    wrong = [k for k, kind in shapes.items() if k in data and not isinstance(data[k], kind)]
    for part in ("kv", "activation"):
        if part in data and not all(_figure(v) for v in data[part].values()):
            wrong.append(part)
    if wrong:
        raise RunFileError(f"{path}: malformed {', '.join(wrong)}")
    return data


def _figure(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= FIGURE_MAX


def read_record(path: Path) -> RankRecord:
    """The record at ``path``, typed; ``RunFileError`` naming it when it is unreadable,
    foreign or malformed."""
    data = check_record(path, read_json(path, "measurement record"))
    try:
        return RankRecord.from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise RunFileError(f"{path}: malformed measurement record ({exc})") from None


def write_record(data: dict[str, Any], paths: list[Path]) -> list[Path]:
    """Write a record's JSON whole to each of ``paths`` (a reader sees the old one or the
    new one, never half: qualify reads them while the worker rewrites them)."""
    return [atomic.write_json(p, data) for p in paths]
