"""A worker's record of one rank (``measure-rank<N>.json``, version 2).

The planned worker builds it up as vLLM starts and writes it whole after each step, into the
run directory and the calibration store (``launcher.contract.store``); calibration, ``report
RUN_DIR``, ``qualify`` and ``bake`` read it. Version 1 records (``record_v1``) read into this
type: the store and every run directory written before the contract keep working.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, JsonValue, Strict, model_serializer

from launcher import atomic
from launcher.contract import record_v1
from launcher.contract.base import (
    Bytes,
    Contract,
    ContractError,
    Count,
    Frozen,
    SignedBytes,
    read_json,
    validate,
)
from launcher.contract.census import CensusEntry, Window
from launcher.contract.names import ComponentName
from launcher.units import format_size

RECORD_SCHEMA = record_v1.SCHEMA_V2
"""The record's ``schema`` (2: typed throughout, the environment's packages nested, late
compiles census entries only)."""
RECORD_SCHEMA_V1 = record_v1.SCHEMA


def record_name(rank: int) -> str:
    """A rank's record in the run directory."""
    return f"measure-rank{rank}.json"


Rank = Annotated[int, Strict(), Field(ge=0, lt=1 << 16)]


class Environment(Frozen):
    """What the record was measured under: the cards and the software stack. A record made
    under another value of any of these is stale (``launcher.contract.store``)."""

    gpu_kind: str | None = None
    """The cards' kind as the catalog names it (``cpu`` for vLLM's CPU backend)."""
    host: str | None = None
    """The machine's name."""
    gpu: str | None = None
    """The card's own name (``torch.cuda.get_device_name``)."""
    cuda: str | None = None
    """torch's CUDA version."""
    driver: str | None = None
    """The GPU driver the launcher read on the cards."""
    packages: dict[str, str | None] = Field(default_factory=dict)
    """Installed versions of the packages whose kernels and allocator shape the figures
    (``store.STACK``; None: not installed)."""

    def stack(self) -> dict[str, str | None]:
        """The packages and the driver: what staleness compares."""
        return {**self.packages, "driver": self.driver}


class Budget(Frozen):
    """What the worker handed vLLM for the KV cache (``bytes``, on ``basis``), what it kept
    back by component, and the room it measured it could give (free after vLLM's profile
    less the reserves: the plan's figure is checked against it even when returned)."""

    bytes: Bytes
    """The KV bytes handed to vLLM."""
    basis: str = ""
    """How the figure was found, in words."""
    measured_room: SignedBytes | None = None
    """The room the worker measured it could give (None: not measured)."""
    activation_peak: Bytes | None = None
    """Kept back for vLLM's activation peak (on a GPU)."""
    cudagraph_pool: Bytes | None = None
    """Kept back for the CUDA-graph pool (on a GPU)."""
    transients: Bytes | None = None
    """Kept back for what request features allocate after sizing (on a GPU): the plan's
    ``transients``."""
    jit_headroom: Bytes | None = None
    """Kept back for compiles after sizing: the plan's two parts, or this boot's figure."""
    safety_margin: Bytes | None = None
    """Kept back as the profile's safety margin."""

    @model_serializer(mode="wrap")
    def _flat(self, handler: Any) -> dict[str, Any]:
        """Flat, as the records always were: the reserved components beside the figure."""
        out = handler(self)
        return {k: v for k, v in out.items() if v is not None or k == "measured_room"}

    @classmethod
    def of(cls, size: int, basis: str, reserved: dict[str, int], room: int | None) -> Budget:
        return cls(bytes=size, basis=basis, measured_room=room, **reserved)

    @property
    def reserved(self) -> dict[ComponentName, int]:
        """What was kept back, by component, in the order it is reserved."""
        names = (
            ComponentName.ACTIVATION_PEAK,
            ComponentName.CUDAGRAPH_POOL,
            ComponentName.TRANSIENTS,
            ComponentName.JIT_HEADROOM,
            ComponentName.SAFETY_MARGIN,
        )
        return {n: v for n in names if (v := getattr(self, n.value)) is not None}

    def describe(self) -> str:
        parts = ", ".join(f"{k} {format_size(v)}" for k, v in self.reserved.items())
        return f"{format_size(self.bytes)} ({self.basis}; reserved {parts})"


Status = Literal["called", "no-op", "skipped", "missing", "failed"]


class EntryPoint(Frozen):
    """One runtime entry point a provider called (or could not)."""

    name: str
    """The entry point, with the arguments it was called with."""
    status: Status
    """``called`` (it brought in kernels), ``no-op`` (none), ``skipped``, ``missing`` (not in
    this vLLM line) or ``failed`` (its exception in ``detail``)."""
    detail: str = ""
    """What it did, or why not (a failure's exception)."""
    kernels: Count | None = None
    """Triton kernels it brought in (None: not counted)."""
    seconds: float | None = None
    """How long it ran (None: not timed)."""

    def line(self) -> str:
        """For the log: its status, kernels and time; why, unless it was called."""
        extra = [f"{self.kernels} kernels"] if self.kernels else []
        if self.seconds is not None:
            extra.append(f"{self.seconds:.1f}s")
        if self.status != "called" and self.detail:
            extra.append(self.detail)
        return f"{self.name} {self.status}" + (f" ({', '.join(extra)})" if extra else "")


class Restored(Frozen):
    """What the scratch stage's release found changed on vLLM's runner and put back."""

    objects: Count = 0
    """Objects checked."""
    tensors: Count = 0
    """Buffers checked."""
    rewritten: list[str] = Field(default_factory=list)
    """Tensors and arrays whose contents were written back in place."""
    rebound: list[str] = Field(default_factory=list)
    """Attributes and container items rebound."""
    dropped: list[str] = Field(default_factory=list)
    """Attributes the stage added, removed."""
    uncopied: list[str] = Field(default_factory=list)
    """Tensors over the copy limit: identity restored, contents not."""

    def describe(self) -> str:
        """In words, for the log: what was checked and, by kind, what was put back."""
        parts = [f"{self.objects} objects and {self.tensors} buffers checked"]
        for label, names in (
            ("contents written back", self.rewritten),
            ("rebound", self.rebound),
            ("added, removed", self.dropped),
            ("over the copy limit", self.uncopied),
        ):
            if names:
                shown = ", ".join(names[:12]) + (
                    f" and {len(names) - 12} more" if len(names) > 12 else ""
                )
                parts.append(f"{label}: {shown}")
        return "; ".join(parts)


class ScratchStage(Frozen):
    """The scratch-KV stage: a small real KV cache the runtime's warmups served on before
    sizing, then released (``launcher.runtime.prewarm.stage.scratch_kv``)."""

    blocks: Count
    """KV blocks per rank it held."""
    bytes: Bytes
    """Device bytes its tensors took."""
    served: str = ""
    """What was served on it (waves, steps, tokens)."""
    forced: list[str] = Field(default_factory=list)
    """What the release removed by hand (requests a failed step left in the batch)."""
    restored: Restored | None = None
    """What the release put back on the runner."""
    stray: list[str] = Field(default_factory=list)
    """Work the stage started that outlived it and was ended."""


class HeldKernel(Frozen):
    """Every Triton key one kernel held when the key enumeration ended: what a warm boot from
    a cache artifact replays."""

    kernel: str
    """The kernel, ``module.name``."""
    module: str
    """The kernel's module (imported to find it again)."""
    qualname: str
    """Its name in the module."""
    keys: list[JsonValue] = Field(default_factory=list)
    """Each key: Triton's specialization list and ``str(options)``, in JSON's shapes: a Triton
    dtype as ``{"tl.dtype": name}``, a constexpr ``inf`` or ``nan`` as ``{"float": repr}``
    (``launcher.runtime.prewarm.providers.key_json`` writes and reads them). Anything else is
    refused here, so a record that validates always serializes."""


class Autotuned(Frozen):
    """What an autotuner wrapping a kernel keys on, and what it tuned."""

    key: list[str] = Field(default_factory=list)
    """The arguments the autotuner keys on."""
    configs: Count = 0
    """Configs it times for a new key value."""
    tuned: Count = 0
    """Key values it tuned in this process."""


class KernelEnumeration(Frozen):
    """One kernel's key space, derived after the waves
    (``launcher.runtime.prewarm.providers.keys``)."""

    kernel: str
    """The kernel, ``module.name``."""
    launched: Count = 0
    """Keys launched."""
    reachable: Count = 0
    """Keys the deployment reaches."""
    missing: Count = 0
    """Reachable keys the process did not hold."""
    too_many: bool = False
    """The full product was over the cap: a reduced space was taken."""
    reduced: str = ""
    """How the space was reduced (empty: the full product)."""
    args: list[str] = Field(default_factory=list)
    """Each argument's classes and why."""
    assumed: list[str] = Field(default_factory=list)
    """Arguments never varied."""
    as_launched: list[str] = Field(default_factory=list)
    """Arguments held as launched (``NAME=value``)."""
    derived: str = ""
    """What a call site's rule derived whole (its arguments that move together, how many
    combinations, on what basis); empty: each argument by its own rule."""
    compiled: Count | None = None
    """Keys compiled by enumeration (None: a record older than the count)."""
    failed: Count | None = None
    """Keys that failed to compile."""
    autotuned: Autotuned | None = None
    """The autotuner wrapping the kernel (None: none)."""
    not_served: str = ""
    """Why no key was derived (a kernel only a runtime warmup launched)."""


class PrewarmOutcome(Frozen):
    """One prewarm provider's result."""

    provider: str
    """The provider's name."""
    compiled: Count = 0
    """Specializations compiled (cache misses)."""
    warmed: Count = 0
    """Specializations run once."""
    seconds: float = 0.0
    """How long it ran."""
    specializations: list[str] = Field(default_factory=list)
    """What it compiled or ran, in words."""
    skipped: str = ""
    """Why the provider did nothing, or what it could not do."""
    entry_points: list[EntryPoint] = Field(default_factory=list)
    """Each runtime entry point the provider called, or could not."""
    scratch: ScratchStage | None = None
    """The scratch-KV stage it ran (None: none)."""
    held: list[HeldKernel] = Field(default_factory=list)
    """Every Triton key held when the enumeration ended, per kernel."""
    enumeration: list[KernelEnumeration] = Field(default_factory=list)
    """The key enumeration, per kernel (the ``keys`` provider's)."""


class Measurement(Frozen):
    """What the prewarm did to device memory, physically and in torch's view, as
    ``launcher.gpu.measure.measure`` returns it."""

    baseline_used: int
    """Used bytes before the prewarm."""
    retained_bytes: int
    """Used after less used before: what stayed."""
    transient_peak_bytes: int
    """Highest used above the baseline during the prewarm."""
    torch_reserved_delta: int
    """torch's reserved bytes after less before (blind to modules and local memory)."""
    torch_allocated_delta: int
    """torch's allocated bytes after less before."""
    samples: Count
    """Samples taken."""
    seconds: float
    """How long the prewarm ran."""
    method: str
    """How free memory was read (``cudart``, ``nvml``)."""
    total: int = 0
    """The card's total bytes."""
    min_free: int = 0
    """The least free bytes seen during the prewarm."""
    end_free: int = 0
    """Free bytes after the prewarm."""
    outside_torch_peak_bytes: int | None = None
    """Highest growth of used memory beyond torch's reserved growth."""


class KvActual(Frozen):
    """The KV cache vLLM allocated, against the plan."""

    blocks: Count
    """KV blocks vLLM allocated on this rank."""
    tokens: Count
    """Logical tokens those blocks hold."""
    planned_tokens: Count
    """The tokens the plan said."""


class MissingInternal(Frozen):
    """A declared vLLM internal (``launcher.vllm.internals``) the installed vLLM lacks."""

    name: str
    """The entry's name (``runner.profile_run``)."""
    where: str
    """``module:path`` in vLLM."""
    needed_by: str
    """What depends on it: ``worker``, ``cuda`` or a prewarm provider."""
    without: Literal["refuse", "skip", "fallback"]
    """What the launcher does without it (a recorded one was never ``refuse``: that boot
    stopped before the weights)."""
    says: str
    """The refusal's reason, the skip's cost or the fallback taken."""
    why: str
    """What the installed source showed: ``absent``, or the signature it has."""
    expected: bool = False
    """The release table records it absent on this release: a reviewed gap (the part has
    nothing to do there, or its cost is known), not a rename found at boot."""


class InternalsCheck(Frozen):
    """The declared vLLM internals, resolved before the weights loaded."""

    release: str
    """The installed vLLM's version, as its ``_version.py`` says."""
    missing: list[MissingInternal] = Field(default_factory=list)
    """What this deployment needs and the release lacks: each a named downgrade (a refused
    boot writes no record)."""


class Activation(Frozen):
    """Torch's activation peak across vLLM's profile run, and what its warmup left cached."""

    profile_peak: Bytes
    """torch's activation peak across vLLM's profile run (allocated bytes)."""
    warmup_cached: Bytes
    """What vLLM's warmup left cached in torch's default pool."""
    profile_segments: Bytes = 0
    """What torch's caching allocator grew its segments by across the profile run: the
    allocated peak plus the fragmentation around it, which the warmup caches again."""
    stage_peak: Bytes = 0
    """What the scratch stage's served waves took from torch's allocator above what they
    left (allocated peak or segments grown, the larger): the deployment's own request
    shapes, a prompt reaching the context among them."""


CounterName = Literal["triton_hooks", "b12x_report", "cache_oracle", "vllm_monitor"]
"""The late-compile counters: Triton's compile hooks (``runtime.jit_watch``: ``@triton.jit``
kernels, and Inductor's under its post-compile hook), b12x's "not prepared before its first
use" report, the cache-directory oracle (``runtime.cache_oracle``: any compiler's new file) and
vLLM's own JIT monitor (serving only: vLLM turns it on after its warmup)."""


class Counter(Frozen):
    """Whether one late-compile counter ran, and over which windows: a count from a counter
    that did not run is "not measured", never 0."""

    name: CounterName
    """Which counter."""
    armed: bool
    """Whether it ran from the stage's end (vLLM's monitor: from serving's start)."""
    windows: list[Window] = Field(default_factory=list)
    """The windows it watched (empty when not armed)."""
    why: str = ""
    """Why it did not run, or what it cannot see."""


class CacheFile(Frozen):
    """A file that appeared in a compile cache after the stage, when, and for which kernel."""

    name: str
    """``VAR/relative/path``: the cache's variable and the file under it."""
    window: Window
    """When it appeared (at the poll that first saw it)."""
    kernel: str = ""
    """The kernel this file was built for, where the window decides it
    (``cache_oracle.built_for``); empty: not decidable (or a worker from before it was
    recorded)."""


class Canary(Frozen):
    """The deliberately new kernels a canary boot compiled after sizing (``prewarm.canary``):
    each armed counter must report them, which proves it was counting."""

    kernels: dict[Window, str] = Field(default_factory=dict)
    """The canary kernel compiled in each window (its ``module.name``)."""
    skipped: str = ""
    """Why no canary compiled (no CUDA device, no Triton)."""


class RankRecord(Contract):
    """One rank's measurements, built up by the worker as vLLM starts and written whole
    after each step."""

    schema_id: Literal["b12x-launch/measurement/2"] = Field(RECORD_SCHEMA, alias="schema")
    """This layout's name and version."""
    fingerprint: str
    """The plan the worker ran."""
    rank: Rank
    """The rank that measured."""
    when: str
    """ISO time the worker sized the KV cache."""
    environment: Environment = Field(default_factory=Environment)
    """What it was measured under."""
    plan: dict[ComponentName, SignedBytes] = Field(default_factory=dict)
    """The plan's figures for this rank, by component."""
    measured: dict[ComponentName, Bytes] = Field(default_factory=dict)
    """What the worker measured, by component (``jit_headroom``: the prewarm's figure, never
    the census's reserve, which the plan adds as its own part)."""
    measured_why: dict[ComponentName, str] = Field(default_factory=dict)
    """How a figure that is more than one reading was made (the next plan's detail)."""
    vllm_available: Bytes = 0
    """What vLLM's own ``determine_available_memory`` returned."""
    budget: Budget = Field(default_factory=lambda: Budget(bytes=0))
    """What the worker handed vLLM for the KV cache, and what it kept back."""
    prewarm: list[PrewarmOutcome] = Field(default_factory=list)
    """Each prewarm provider's outcome, in the order they ran."""
    prewarm_seconds: dict[str, float] = Field(default_factory=dict)
    """Seconds per provider."""
    prewarm_measurement: Measurement | None = None
    """What the prewarm did to device memory (None: on CPU)."""
    late_compiles: list[CensusEntry] = Field(default_factory=list)
    """Compiles after sizing, with their cost: the census."""
    learned: list[CensusEntry] = Field(default_factory=list)
    """What earlier boots learned, carried on (a boot that replayed it compiles nothing late)."""
    late_files: list[str] = Field(default_factory=list)
    """Files that appeared in the compile caches after sizing (``cache_files`` says when)."""
    counters: list[Counter] = Field(default_factory=list)
    """Which late-compile counters ran, from the stage's end (empty: a worker from before
    they were recorded, so none of its counts is a measurement)."""
    before_sizing: list[CensusEntry] = Field(default_factory=list)
    """Compiles between the stage's end and sizing (vLLM's own memory profile): not late,
    its measurement saw them, but the stage did not cover them."""
    cache_files: list[CacheFile] = Field(default_factory=list)
    """Every file that appeared in the compile caches after the stage, with its window."""
    canary: Canary | None = None
    """The canary kernels of a canary boot (None: not asked for)."""
    kv: KvActual | None = None
    """The KV cache vLLM allocated (None: not yet)."""
    free_after_warmup: Bytes | None = None
    """Free device memory after vLLM's warmup (None: not yet, or on CPU)."""
    serving_low_free: Bytes | None = None
    """The least free device memory at a serving step's edges since the warmup, to 16 MiB
    (None: nothing served yet, or on CPU)."""
    reserved_after_warmup: Bytes | None = None
    """Torch's reserved segments after vLLM's warmup (None: not yet, or on CPU)."""
    serving_low_reserved: Bytes | None = None
    """Torch's reserved segments at serving's low-water (None: not read): what serving took
    past the warmup splits into segments torch grew and memory outside its allocator."""
    forecast_lowest_free: SignedBytes | None = None
    """This boot's own forecast of its lowest free memory, made as the KV cache was built:
    free device memory then, less the reserves vLLM's warmup and serving draw on (the
    CUDA-graph pool, the activations, the transients). The activation and transient reserves
    are held from the warmup on (``held_for_serving``), so only the graph pool's estimate
    stands between it and the card (None: on CPU)."""
    held_for_serving: Bytes | None = None
    """Torch's segments the worker added after vLLM's warmup to hold the activation and
    transient reserves in its cache, where serving draws on them (None: not held)."""
    allocated_after_warmup: Bytes | None = None
    """Torch's allocated bytes once the reserves were held (None: not read)."""
    serving_peak_allocated: Bytes | None = None
    """Torch's allocated peak while serving, to 16 MiB (None: not read): what serving drew
    on the held reserves is this less ``allocated_after_warmup``."""
    hold_released: bool = False
    """Whether the held reserves went back to the card while serving (below the margin, or
    serving on another stream): free readings after it include them."""
    activation: Activation | None = None
    """The activation peak and what vLLM's warmup left cached (None: not measured)."""
    internals: InternalsCheck | None = None
    """The declared vLLM internals this deployment needs, resolved before the weights loaded:
    the downgrades this release costs (None: not checked)."""

    def serving_dip(self) -> tuple[int, int | None] | None:
        """What serving took past vLLM's warmup at its low, and how much of it was torch's
        segments growing past the hold (None where not read); None before both free readings.

        With the reserves held, free memory falls only by what serving took past the hold;
        what it drew inside the pool is torch's allocated peak over the hold's start, less
        what vLLM's warmup left cached there (counted in the graph pool already: GLM's
        MTP drafter leaves 2.6 GiB that serving's activations reuse), and what it took
        outside torch's allocator is the fall its segments do not explain."""
        if self.free_after_warmup is None or self.serving_low_free is None:
            return None
        held = self.held_for_serving or 0
        grown = None
        if self.serving_low_reserved is not None and self.reserved_after_warmup is not None:
            grown = self.serving_low_reserved - self.reserved_after_warmup - held
        fell = self.free_after_warmup - held - self.serving_low_free
        drawn = self._drawn()
        if drawn is None:
            return fell, grown
        return drawn + max(0, fell - max(0, grown or 0)), grown

    def _drawn(self) -> int | None:
        """What serving allocated at its peak past the hold's start, less what vLLM's warmup
        left cached (None: not read)."""
        if self.serving_peak_allocated is None or self.allocated_after_warmup is None:
            return None
        cached = self.activation.warmup_cached if self.activation else 0
        return max(0, self.serving_peak_allocated - self.allocated_after_warmup - cached)

    def unused_hold(self) -> int:
        """The held reserves serving never drew, even at its peak (0: none held, not read, or
        given back): free memory in effect, which a free reading does not show."""
        drawn = self._drawn()
        if not self.held_for_serving or self.hold_released or drawn is None:
            return 0
        return max(0, self.held_for_serving - drawn)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)

    def counter(self, name: CounterName) -> Counter | None:
        return next((c for c in self.counters if c.name == name), None)

    def late_by(self, name: CounterName, window: Window) -> list[str] | None:
        """What counter ``name`` saw compile in ``window`` (kernels, or cache files), or None
        when it did not watch that window: not measured, never an empty list. vLLM's monitor
        writes to vLLM's log alone (the GPU tier counts its lines there): None here."""
        counter = self.counter(name)
        if name == "vllm_monitor":
            return None
        if counter is None or not counter.armed or window not in counter.windows:
            return None
        if name == "cache_oracle":
            return [f.name for f in self.cache_files if f.window == window]
        kinds = ("b12x",) if name == "b12x_report" else ("triton", "inductor")
        pool = self.before_sizing if window == "profile" else self.late_compiles
        return [e.kernel for e in pool if e.window == window and e.kind in kinds]

    def enumeration(self) -> list[KernelEnumeration]:
        """The key enumeration of this boot, every provider's."""
        return [e for outcome in self.prewarm for e in outcome.enumeration]

    def held(self) -> list[HeldKernel]:
        """The Triton keys held when the enumeration ended (a warm boot replays them)."""
        return [k for outcome in self.prewarm for k in outcome.held if k.keys]


def read_record(path: Path) -> RankRecord:
    """The record at ``path``, typed (a version 1 record through its reader).

    Raises:
        ContractError: naming it, when it is unreadable, foreign or malformed.
    """
    data = read_json(path, "measurement record")
    schema = data.get("schema")
    if schema == RECORD_SCHEMA:
        return validate(RankRecord, data, path, "measurement record")
    if schema == RECORD_SCHEMA_V1:
        return validate(RankRecord, record_v1.upgrade(data, path), path, "measurement record")
    raise ContractError(path, "not a b12x-launch measurement record")


def write_record(record: RankRecord, paths: Iterable[Path]) -> list[Path]:
    """Write the record whole to each of ``paths`` (a reader sees the old one or the new
    one, never half: qualify reads them while the worker rewrites them)."""
    data = record.to_json()
    return [atomic.write_json(p, data) for p in paths]
