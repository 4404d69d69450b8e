"""The plan as it crosses a process: what ``--json`` prints and the run file carries.

The planner's own ``MemoryPlan`` is made of richer objects (the KV layout and its methods,
which workspace parts share one arena); ``launcher.plan.record`` turns it into a
``PlanRecord`` once, and every reader after that (the run file, the worker, ``report``, the
plots, ``qualify``) reads these types. The JSON keys are the ``--json`` contract of
DESIGN.md: added freely, renamed never without a changelog entry (docs/changelog.md).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, Strict, model_serializer

from launcher.contract import census
from launcher.contract.base import Bytes, Count, Frozen, SignedBytes
from launcher.contract.names import ComponentName, HeadroomPart, Source, calibrated

REQUEST_MAX = 1 << 62
"""A plan that does not fit records what it was asked for (``memory.kv_tokens`` of 2^40 tokens
is petabytes): more than any card holds (``FIGURE_MAX``), still bounded."""
Requested = Annotated[int, Strict(), Field(ge=-REQUEST_MAX, le=REQUEST_MAX)]

PLAN_SCHEMA_VERSION = 1
"""``schema_version`` of the plan's JSON (``--json``): its keys, not the run file's."""


class ComponentRecord(Frozen):
    """One component of one rank: its bytes and where they came from."""

    bytes: Requested
    """Bytes on this rank (the KV cache's goes below 0 where the plan does not fit)."""
    source: Source
    """Where the figure came from."""
    detail: str = ""
    """How it was made, in words (a formula, a file, the date of a measurement)."""
    parts: dict[str, ComponentRecord] = Field(default_factory=dict)
    """What it is made of, by name (b12x's workspace groups; a calibrated jit_headroom's
    ``prewarm`` and ``late_compiles``)."""

    @model_serializer(mode="wrap")
    def _omit_empty(self, handler: Any) -> dict[str, Any]:
        """``detail`` and ``parts`` only where there is one, as ``--json`` always wrote them."""
        out = handler(self)
        if not self.detail:
            out.pop("detail", None)
        if not self.parts:
            out.pop("parts", None)
        return out

    def part(self, name: str) -> int:
        """A part's bytes (0 where it has none of that name)."""
        found = self.parts.get(name)
        return found.bytes if found is not None else 0


class JitHeadroom(Frozen):
    """A rank's JIT headroom read as its parts (``ComponentRecord`` of ``jit_headroom``)."""

    bytes: Bytes
    """The whole headroom: the parts' sum."""
    source: Source
    """Where the headroom came from."""
    prewarm: Bytes
    """What the prewarm must keep free: an earlier boot's measurement (``measured``), the
    estimate, or the profile's figure (the whole headroom where it has no parts)."""
    late_compiles: Bytes
    """The census's reserve for late compiles it cannot replay (0 without a census)."""

    @property
    def pinned(self) -> bool:
        """The profile sets the headroom (``memory.jit_headroom`` is a size): the plan decided
        it, and a worker keeps exactly that."""
        return self.source is Source.PROFILE

    @classmethod
    def of(cls, c: ComponentRecord) -> JitHeadroom:
        late = c.part(HeadroomPart.LATE_COMPILES)
        prewarm = c.part(HeadroomPart.PREWARM) if c.parts else c.bytes
        return cls(bytes=c.bytes, source=c.source, prewarm=prewarm, late_compiles=late)


class RankPlan(Frozen):
    """One rank of the plan."""

    rank: Count
    """The rank's number."""
    node: Count = 0
    """The node this rank runs on (multi-node profiles)."""
    total_bytes: Bytes
    """The card's memory the plan divides."""
    total_source: Source = Source.CATALOG
    """Where the card's total came from."""
    components: dict[ComponentName, ComponentRecord]
    """Every component in plan order, the KV cache (what is left) last."""
    kv_blocks_fit: SignedBytes = 0
    """The KV blocks this rank alone would fit (the plan gives every rank the smallest)."""
    predicted_lowest_free: Requested = 0
    """The lowest free memory the plan predicts after sizing: the card's total less every
    component at its peak (the safety margin and the JIT headroom's prewarm part excepted: the
    one is never used, the other peaked before sizing) and the KV cache's blocks. The GPU tier
    holds the measured lowest to it (within 128 MiB)."""
    learned: list[census.CensusEntry] = Field(default_factory=list)
    """Late compiles earlier boots recorded: the census provider replays what it can before
    sizing; the cost of the rest is ``jit_headroom``'s ``late_compiles`` part."""

    def bytes(self, name: ComponentName) -> int:
        """A component's bytes (0 where this rank has none of it)."""
        found = self.components.get(name)
        return found.bytes if found is not None else 0

    def measured(self, name: ComponentName) -> int | None:
        """A component's bytes when an earlier boot measured them (a calibrated figure)."""
        found = self.components.get(name)
        return found.bytes if found is not None and found.source is Source.MEASURED else None

    @property
    def jit_headroom(self) -> JitHeadroom:
        return JitHeadroom.of(self.components[ComponentName.JIT_HEADROOM])

    @property
    def kv_cache(self) -> ComponentRecord:
        return self.components[ComponentName.KV_CACHE]

    @property
    def calibrated(self) -> bool:
        """Whether every measurable component with bytes is an earlier boot's measurement."""
        return calibrated((n, c.bytes, c.source) for n, c in self.components.items())


Pin = Literal["kv_tokens", "kv_cache_bytes", "qualified"]


class KvRecord(Frozen):
    """The KV cache every rank gets, and its geometry."""

    bytes_per_token_per_rank: Annotated[float, Field(ge=0)]
    """KV bytes one token takes on one rank."""
    page_bytes_per_rank: Bytes = 0
    """One block's bytes on one rank (every layer)."""
    block_tokens: Count = 0
    """vLLM's block, in tokens."""
    dcp: Annotated[int, Strict(), Field(ge=1, le=1 << 16)] = 1
    """Decode context parallelism: a logical block spans this many ranks."""
    blocks_per_rank: SignedBytes = 0
    """KV blocks every rank gets."""
    tokens: SignedBytes
    """Logical tokens: blocks x block x DCP."""
    max_model_len: Count = 0
    """The longest request (``serving.max_model_len``)."""
    max_concurrency: Annotated[float, Field(ge=0)]
    """Requests of ``max_model_len`` that fit at once."""
    bounding_rank: Count = 0
    """The rank with the fewest blocks (vLLM gives every rank that many)."""
    pinned: Pin | None = None
    """What pins the size: the profile's ``kv_tokens`` or ``kv_cache_bytes``, or ``qualified``;
    None: it is what is left."""
    source: Source = Source.ESTIMATE
    """Where the model's KV geometry came from (``config.json`` or ``catalog``)."""
    runtime: str = ""
    """The vLLM line whose KV record sizes the plan uses."""
    record: str = ""
    """What decided the attention record size, e.g. 368 B nvfp4 record (fp8 RoPE)."""


class CommandRecord(Frozen):
    """The vLLM command, secrets masked (``launcher.secrets``)."""

    argv: list[str]
    """The command line, secrets masked."""
    env: dict[str, str]
    """The environment the launcher sets, secrets masked."""


class PlanRecord(Frozen):
    """The memory plan: ``b12x-launch PROFILE --json``."""

    schema_version: Literal[1] = PLAN_SCHEMA_VERSION
    """The version of the plan's keys (``PLAN_SCHEMA_VERSION``)."""
    profile: str = ""
    """The profile's name."""
    fingerprint: str = ""
    """The plan's fingerprint: what the calibration store and the workers key by."""
    fits: bool = True
    """Whether the deployment fits the cards."""
    reasons: list[str] = Field(default_factory=list)
    """Why it does not fit (empty when it fits)."""
    suggestions: list[str] = Field(default_factory=list)
    """``key=value`` overrides that would fit."""
    notes: list[str] = Field(default_factory=list)
    """What the planner wants read (how facts were gathered, what replaced what)."""
    ranks: list[RankPlan] = Field(min_length=1)
    """Every rank's components."""
    kv: KvRecord
    """The KV cache every rank gets."""
    vllm: CommandRecord | None = None
    """The vLLM command (absent where none was built)."""

    def rank(self, rank: int) -> RankPlan:
        """Rank ``rank``'s plan (the first where there is none of that number)."""
        return next((r for r in self.ranks if r.rank == rank), self.ranks[0])


ComponentRecord.model_rebuild()
