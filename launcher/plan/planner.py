"""The planner: a pure function from a profile and its facts to a per-rank memory plan.

No I/O, no GPU, no clock, no logging. Every number carries its source:
``measured``, ``b12x``, ``headers``, ``catalog``, ``config.json``, ``estimate``,
``profile`` or ``qualified`` (a KV size ``b12x-launch qualify`` proved under load).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from launcher.contract import census
from launcher.contract.census import CensusEntry
from launcher.contract.names import MEASURABLE, HeadroomPart, Source
from launcher.contract.names import ComponentName as Name
from launcher.deployment import Deployment, resolve
from launcher.plan import estimates, transients
from launcher.plan.catalog import GpuKind
from launcher.plan.kv import KvLayout, kv_layout
from launcher.plan.measured import Measured
from launcher.plan.model import ModelFacts
from launcher.plan.ranks import RankShape, rank_shapes
from launcher.profile.rules import draft_rows
from launcher.profile.schema import Prewarm, Profile
from launcher.units import GiB, MiB
from launcher.vllm.lines import stored_kv_dtype


@dataclass(frozen=True)
class Component:
    name: str
    """A ``ComponentName`` for a rank's component; a part's own name for a part."""
    bytes: int
    source: Source
    detail: str = ""
    parts: tuple[Component, ...] = ()
    shared: bool = False
    """A part that shares one scratch arena with the other shared parts (max, not sum)."""


@dataclass(frozen=True)
class Qualified:
    """A KV size ``b12x-launch qualify`` found for this deployment (its worst case left
    exactly the safety margin free)."""

    blocks: int
    """Blocks per rank."""
    when: str
    """ISO date of the qualification."""


@dataclass(frozen=True)
class PlanInputs:
    """Everything ``plan()`` reads besides the profile; gathered at the edges."""

    facts: ModelFacts
    gpu: GpuKind
    weights: tuple[int, ...]
    """Weights per rank, in rank order."""
    weights_source: Source
    deployment: Deployment
    """The profile's derived values, resolved by the caller that made the deployment."""
    weights_detail: str = ""
    workspaces: tuple[Component, ...] | None = None
    """Workspace parts from b12x's own sizing; None: use formulas."""
    measured: dict[int, Measured] = field(default_factory=dict)
    gpu_memory: int | None = None
    """Memory per GPU, when known better than the catalog (NVML, the profile)."""
    gpu_memory_source: Source = Source.CATALOG
    qualified: Qualified | None = None
    """The qualified KV size; a pin in the profile takes precedence."""
    reserved_at_launch: int = 0
    """What the tightest card did not have free at launch (NVML: total minus free), when a
    launch read the cards; the plan keeps the larger of it and the profile's figure."""
    notes: tuple[str, ...] = ()
    """Lines about how the facts were gathered (a Hub that did not answer)."""


@dataclass(frozen=True)
class RankPlan:
    rank: int
    node: int
    total_bytes: int
    components: tuple[Component, ...]
    kv_bytes: int
    kv_blocks: int
    learned: tuple[CensusEntry, ...] = ()
    """Late compiles earlier boots recorded (``launcher.contract.census``): the census provider
    replays what it can before sizing; the rest is ``jit_headroom``'s ``late_compiles`` part."""
    lowest_free: int = 0
    """The predicted lowest free memory after sizing (``lowest_free``)."""
    serving_dip: int | None = None
    """What serving drew on the held activation and transient reserves on the boot this
    rank is calibrated from (None: not measured): how much of them that traffic used."""

    def component(self, name: str) -> Component:
        return next(c for c in self.components if c.name == name)

    @property
    def fixed_bytes(self) -> int:
        """Every component but the KV cache."""
        return sum(c.bytes for c in self.components)


@dataclass(frozen=True)
class KvPlan:
    layout: KvLayout
    bytes_per_token_per_rank: float
    blocks_per_rank: int
    tokens: int
    max_model_len: int
    max_concurrency: float
    bounding_rank: int
    pinned: str | None
    """``kv_tokens`` or ``kv_cache_bytes`` when the profile pins the KV size, ``qualified``
    when a qualification does."""
    source: Source
    runtime: str = "upstream"
    """The vLLM runtime whose KV record sizes the plan uses (``launcher.vllm.lines``)."""
    record: str = ""
    """What decided the attention record size, e.g. 368 B nvfp4 record (fp8 RoPE)."""
    pin_source: Source = Source.PROFILE
    """Where a pinned size came from: ``profile`` or ``qualified``."""
    pin_detail: str = ""
    """How: ``memory.kv_tokens``, ``qualified <date>``."""


@dataclass(frozen=True)
class MemoryPlan:
    profile: str
    fits: bool
    ranks: tuple[RankPlan, ...]
    kv: KvPlan
    total_source: Source
    reasons: tuple[str, ...] = ()
    """Why it does not fit (empty when it fits)."""
    suggestions: tuple[str, ...] = ()
    """``key=value`` overrides that would fit."""
    notes: tuple[str, ...] = ()
    total_detail: str = ""
    """How the card total was read (the table's HOW; not in the JSON contract)."""

    @property
    def kv_source(self) -> Source:
        """The KV figure is as good as the weakest number it was derived from."""
        if self.kv.pinned:
            return self.kv.pin_source
        sources = {c.source for r in self.ranks for c in r.components}
        return Source.ESTIMATE if Source.ESTIMATE in sources else Source.MEASURED


def plan(profile: Profile, inputs: PlanInputs) -> MemoryPlan:
    """Plan every rank's memory and the KV cache they all get.

    vLLM gives every rank the smallest rank's block count; so does the plan, and it
    names the rank that bounds it. A plan that does not fit says what would.
    """
    return _plan(profile, inputs, suggest=True)


def _deployment(profile: Profile, inputs: PlanInputs) -> Deployment:
    """The deployment the caller resolved for ``profile`` (planning another profile on the
    same inputs would plan it with the wrong derived values)."""
    d = inputs.deployment
    if d.profile != profile:
        raise ValueError(f"the inputs' deployment is not {profile.name}'s: resolve it first")
    return d


def _total_detail(source: Source, gpu: GpuKind) -> str:
    if source is Source.PROFILE:
        return "hardware.memory"
    if source is Source.MEASURED:
        return "the card's total as the driver reports it now"
    sold = ""
    if gpu.sold_as:
        # A card's GB are binary (DRAM comes in powers of two): 96 GB is 96 GiB, of which
        # the driver and firmware keep some before CUDA counts a byte.
        kept = float(gpu.sold_as.removesuffix("GB")) - gpu.memory / GiB
        sold = f"; sold as {gpu.sold_as}, of which the driver and firmware keep {kept:.2f} GiB"
    return f"what CUDA reports as the {gpu.name}'s total{sold}"


def _plan(profile: Profile, inputs: PlanInputs, *, suggest: bool) -> MemoryPlan:
    f, gpu = inputs.facts, inputs.gpu
    shapes = rank_shapes(
        f.num_layers, profile.parallel.tensor, profile.parallel.pipeline, profile.hardware.count
    )
    total = profile.hardware.memory or inputs.gpu_memory or gpu.memory
    total_source = Source.PROFILE if profile.hardware.memory else Source(inputs.gpu_memory_source)
    d = _deployment(profile, inputs)
    layouts = [_layout(d, f, s) for s in shapes]
    ranks = [_rank_plan(profile, inputs, s, total, layouts[s.rank], d) for s in shapes]
    bounding = min(ranks, key=lambda r: (r.kv_blocks, r.rank))
    layout = layouts[bounding.rank]
    blocks = bounding.kv_blocks
    pinned = None
    over: str | None = None
    if profile.memory.kv_tokens is not None:
        pinned = "kv_tokens"
        blocks = layout.blocks_for_tokens(profile.memory.kv_tokens)
    elif profile.memory.kv_cache_bytes is not None:
        pinned = "kv_cache_bytes"
        blocks = layout.blocks_for(profile.memory.kv_cache_bytes)
    elif inputs.qualified is not None:
        over = _over_the_card(inputs.qualified, ranks, layouts)
        if over is None:
            pinned = "qualified"
            blocks = inputs.qualified.blocks
    reasons = _reasons(profile, ranks, layouts, blocks, pinned)
    if reasons:
        reasons += _prompt_logprob_reason(ranks[bounding.rank])
    if pinned:
        ranks = [
            replace(r, kv_bytes=blocks * layouts[r.rank].page_bytes, kv_blocks=blocks)
            for r in ranks
        ]
    else:
        ranks = [replace(r, kv_blocks=blocks) for r in ranks]
    ranks = [replace(r, lowest_free=lowest_free(r, layouts[r.rank].page_bytes)) for r in ranks]
    mml = profile.serving.max_model_len
    per_request = layout.blocks_for_tokens(mml)
    kv = KvPlan(
        layout=layout,
        bytes_per_token_per_rank=layout.bytes_per_token_per_rank,
        blocks_per_rank=blocks,
        tokens=layout.tokens_for_blocks(blocks),
        max_model_len=mml,
        max_concurrency=blocks / per_request if per_request else 0.0,
        bounding_rank=bounding.rank,
        pinned=pinned,
        source=f.source,
        runtime=d.runtime.name,
        record=d.kv_record(f),
        pin_source=Source.QUALIFIED if pinned == "qualified" else Source.PROFILE,
        pin_detail=_pin_detail(pinned, inputs.qualified),
    )
    return MemoryPlan(
        profile=profile.name or "",
        fits=not reasons,
        ranks=tuple(ranks),
        kv=kv,
        total_source=total_source,
        total_detail=_total_detail(total_source, gpu),
        reasons=tuple(reasons),
        suggestions=tuple(_suggest(profile, inputs, kv) if reasons and suggest else ()),
        notes=(
            *inputs.notes,
            *_notes(d),
            *_qualified_note(pinned, bounding, blocks),
            *([over] if over else []),
            *_field_note(f, bounding, pinned),
        ),
    )


def _pin_detail(pinned: str | None, qualified: Qualified | None) -> str:
    if pinned == "qualified" and qualified is not None:
        return f"qualified {qualified.when}"
    return f"memory.{pinned}" if pinned else ""


def _layout(d: Deployment, f: ModelFacts, s: RankShape) -> KvLayout:
    p = d.profile
    mtp = p.mtp_tokens > 0
    draft = f.mtp_layers if (mtp and s.is_last_stage) else 0
    return kv_layout(
        f,
        kv_dtype=stored_kv_dtype(f, p.serving.kv_cache_dtype, p.vllm.attention_backend),
        block_tokens=d.block_size,
        tp=p.parallel.tensor,
        dcp=p.parallel.decode_context,
        layers=len(s.layers),
        draft_layers=draft,
        indexer_layers=sum(1 for i in s.layers if i in f.indexer_layers),
        draft_indexer_layers=draft if f.mtp_has_indexer and f.has_indexer else 0,
        runtime=d.runtime,
        env=p.env,
        replicate_indexer=p.parallel.replicate_indexer_cache,
        replicate_draft=p.parallel.replicate_draft_cache,
        indexer_shards=p.parallel.indexer_cache_shards or 0,
    )


def _others(p: Profile, inputs: PlanInputs) -> tuple[int, Source, str] | None:
    """What other processes hold per card: the profile's figure, or what the launch saw not
    free on the cards where that is more (the driver's own reservation included)."""
    said, seen = p.hardware.reserved_by_others, inputs.reserved_at_launch
    if seen > said:
        return seen, Source.MEASURED, "not free on the card at launch (NVML: total minus free)"
    return (said, Source.PROFILE, "hardware.reserved_by_others") if said else None


def _rank_plan(
    p: Profile, inputs: PlanInputs, s: RankShape, total: int, layout: KvLayout, d: Deployment
) -> RankPlan:
    f, gpu = inputs.facts, inputs.gpu
    measured = inputs.measured.get(s.rank)
    comps: list[Component] = []
    profile = Source.PROFILE
    if others := _others(p, inputs):
        comps.append(Component(Name.OTHER_PROCESSES, *others))
    comps.append(Component(Name.CUDA_CONTEXT, *_est(estimates.cuda_context(p, gpu))))
    if p.model.weights_per_rank is not None:
        pinned = p.model.weights_per_rank
        comps.append(Component(Name.WEIGHTS, pinned, profile, "model.weights_per_rank"))
    else:
        weights = inputs.weights[s.rank]
        source, detail = Source(inputs.weights_source), inputs.weights_detail
        comps.append(Component(Name.WEIGHTS, weights, source, detail))
    stand_ins = d.runtime.profile_stand_ins
    peak = estimates.activation_peak(d, f, gpu)
    comps.append(Component(Name.ACTIVATION_PEAK, *_est(peak)))
    comps.append(_workspaces(inputs))
    graphs = estimates.cudagraph_pool(p, f, gpu, d.capture_sizes, d.block_size, stand_ins)
    comps.append(Component(Name.CUDAGRAPH_POOL, *_est(graphs)))
    comps.append(_transients(d, f))
    headroom = p.memory.jit_headroom
    if headroom == "measure":
        workspaces = next(c.bytes for c in comps if c.name == Name.WORKSPACES)
        unmeasured = estimates.jit_headroom_unmeasured(d, gpu, workspaces)
        comps.append(Component(Name.JIT_HEADROOM, *_est(unmeasured)))
    else:  # the profile's size wins, decided here once: a worker keeps exactly this
        comps.append(Component(Name.JIT_HEADROOM, headroom, profile, "memory.jit_headroom"))
    margin = p.memory.safety_margin
    comps.append(Component(Name.SAFETY_MARGIN, margin, profile, "memory.safety_margin"))
    if measured:
        comps = [_calibrated(c, measured) for c in comps]
    kv_bytes = total - sum(c.bytes for c in comps)
    learned = measured.learned if measured else ()
    dip = measured.serving_dip if measured else None
    return RankPlan(
        s.rank,
        s.node,
        total,
        tuple(comps),
        kv_bytes,
        layout.blocks_for(kv_bytes),
        learned,
        serving_dip=dip,
    )


FREE_AFTER_SIZING = (Name.SAFETY_MARGIN, Name.JIT_HEADROOM)
"""Components the card keeps free after sizing: the margin is never used, and the headroom's
prewarm part peaked in the stage, before the KV cache existed (its late-compile part is used
after sizing and is counted)."""


def lowest_free(r: RankPlan, page_bytes: int) -> int:
    """The predicted lowest free memory on rank ``r`` after sizing: the card's total less every
    component at its peak and the KV cache's blocks. The worker holds the activation and
    transient reserves in torch's cache from vLLM's warmup on (``runtime.worker.hold``), so
    serving draws on them without moving free memory: the safety margin and the JIT
    headroom's prewarm part are what the card shows. The GPU tier compares it with the lowest
    free memory a boot measured."""
    held = sum(c.bytes for c in r.components if c.name not in FREE_AFTER_SIZING)
    late = next((c for c in r.components if c.name == Name.JIT_HEADROOM), None)
    late_bytes = (
        sum(p.bytes for p in late.parts if p.name == HeadroomPart.LATE_COMPILES) if late else 0
    )
    return r.total_bytes - held - late_bytes - r.kv_blocks * page_bytes


def _est(pair: tuple[int, str]) -> tuple[int, Source, str]:
    return pair[0], Source.ESTIMATE, pair[1]


def _workspaces(inputs: PlanInputs) -> Component:
    if inputs.workspaces is not None:
        parts = inputs.workspaces
    else:
        parts = tuple(
            Component(n, b, Source.ESTIMATE, why, shared=shared)
            for n, b, why, shared in estimates.workspace_parts(
                inputs.deployment, inputs.facts, inputs.gpu
            )
        )
    total, how = _max_of_shared(parts)
    sources = {c.source for c in parts}
    source = Source.ESTIMATE if Source.ESTIMATE in sources or not parts else sources.pop()
    return Component(Name.WORKSPACES, total, source, how, parts)


def _max_of_shared(parts: tuple[Component, ...]) -> tuple[int, str]:
    """The bytes of parts of which the shared ones are never held at once (their largest
    counts) and the others are (added), and that sum in words."""
    shared = [c for c in parts if c.shared]
    own = [c for c in parts if not c.shared]
    total = max((c.bytes for c in shared), default=0) + sum(c.bytes for c in own)
    terms = []
    if len(shared) > 1:
        terms.append("max(" + ", ".join(c.name for c in shared) + ")")
    terms += [c.name for c in shared if len(shared) == 1] + [c.name for c in own]
    return total, " + ".join(terms) or "none"


def _transients(d: Deployment, f: ModelFacts) -> Component:
    """What request features allocate after sizing: the shared parts (never held in the same
    moment of a step) reserve their largest, the others add."""
    parts = tuple(
        Component(t.name, t.bytes, Source.ESTIMATE, t.detail, shared=t.shared)
        for t in transients.transients(d, f)
    )
    total, how = _max_of_shared(parts)
    return Component(Name.TRANSIENTS, total, Source.ESTIMATE, how, parts)


def _calibrated(c: Component, m: Measured) -> Component:
    if c.name not in MEASURABLE or c.name not in m.components:
        return c
    if c.source is Source.PROFILE:  # the profile pins it (weights, jit_headroom): it wins
        return c
    why = m.why.get(c.name)
    detail = f"measured {m.when}" + (f": {why}" if why else "")
    measured = Component(c.name, m.components[c.name], Source.MEASURED, detail)
    if c.name == Name.JIT_HEADROOM:
        return _headroom(measured, m)
    return measured


def _headroom(measured: Component, m: Measured) -> Component:
    """A calibrated JIT headroom with its parts: what the last boot's prewarm measured, and
    the measured cost of the late compiles the census cannot replay. The planner adds them
    here, once; the worker reads both parts and takes nothing back out of the sum."""
    late = census.reserve(m.learned)
    if not late:
        return measured
    reserved = [e for e in m.learned if not e.replayable]
    parts = (
        replace(measured, name=HeadroomPart.PREWARM),
        Component(
            HeadroomPart.LATE_COMPILES,
            late,
            Source.MEASURED,
            f"{len(reserved)} late compile(s) the census cannot replay",
        ),
    )
    detail = f"measured {m.when} + {late / 2**20:.0f} MiB of late compiles the census cannot replay"
    return Component(measured.name, measured.bytes + late, Source.MEASURED, detail, parts)


def _reasons(
    p: Profile, ranks: list[RankPlan], layouts: list[KvLayout], blocks: int, pinned: str | None
) -> list[str]:
    out: list[str] = []
    for r in ranks:
        fixed = sum(c.bytes for c in r.components)
        if fixed > r.total_bytes:
            out.append(
                f"fixed costs {_g(fixed)} exceed the card's {_g(r.total_bytes)} "
                f"by {_g(fixed - r.total_bytes)}"
            )
        elif pinned and pinned != "qualified" and blocks > r.kv_blocks:
            out.append(
                f"memory.{pinned} needs {blocks} blocks "
                f"({_g(blocks * layouts[r.rank].page_bytes)}) but only {r.kv_blocks} fit"
            )
        else:
            out.append("")
    out = _per_rank(out)
    need = layouts[0].blocks_for_tokens(p.serving.max_model_len)
    if not out and blocks < need:
        got = layouts[0].tokens_for_blocks(blocks)
        out.append(
            f"the KV cache holds {got:,} tokens, less than one max_model_len request "
            f"({p.serving.max_model_len:,} tokens)"
        )
    return out


def _prompt_logprob_reason(r: RankPlan) -> list[str]:
    """The prompt-logprob reserve, named with its key and figure where the plan does not fit."""
    part = next(
        (p for p in r.component(Name.TRANSIENTS).parts if p.name == "prompt_logprobs"), None
    )
    if part is None or not part.bytes:
        return []
    return [
        f"serving.prompt_logprobs=reserve keeps {_g(part.bytes)} per GPU for prompt logprobs "
        "over a full prefill chunk; refuse them (HTTP 400) or lower "
        "serving.max_num_batched_tokens"
    ]


def _per_rank(messages: list[str]) -> list[str]:
    """One line per distinct message, naming the ranks it applies to."""
    groups: dict[str, list[int]] = {}
    for rank, message in enumerate(messages):
        if message:
            groups.setdefault(message, []).append(rank)
    out = []
    for message, ranks in groups.items():
        if len(ranks) == 1:
            who = f"rank {ranks[0]}"
        elif ranks == list(range(ranks[0], ranks[-1] + 1)):
            who = f"ranks {ranks[0]}-{ranks[-1]}"
        else:
            who = "ranks " + ",".join(map(str, ranks))
        out.append(f"{who}: {message}")
    return out


def _suggest(p: Profile, inputs: PlanInputs, kv: KvPlan) -> list[str]:
    """Refusing prompt logprobs where that alone fits; else the largest max_model_len, or else
    the largest max_num_seqs, that would fit."""

    def fits(t: Profile) -> bool:  # another profile, another deployment
        return _plan(t, replace(inputs, deployment=resolve(t)), suggest=False).fits

    if p.serving.prompt_logprobs == "reserve":
        serving = p.serving.model_copy(update={"prompt_logprobs": "refuse"})
        if fits(p.model_copy(update={"serving": serving})):
            return ["serving.prompt_logprobs=refuse"]
    if kv.layout.logical_block_tokens <= kv.tokens < p.serving.max_model_len:
        return [f"serving.max_model_len={kv.tokens}"]

    def trial(seqs: int) -> Profile:
        batched = max(draft_rows(seqs, p.mtp_tokens), min(p.serving.max_num_batched_tokens, 2048))
        return _with_serving(p, max_num_seqs=seqs, max_num_batched_tokens=batched)

    # Fewer sequences never need more memory, so the largest that fits is found by bisection.
    low, high = 0, p.serving.max_num_seqs - 1
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if fits(trial(mid)) else (low, mid - 1)
    if low == 0:
        return []
    best = trial(low).serving
    out = [f"serving.max_num_seqs={low}"]
    if best.max_num_batched_tokens != p.serving.max_num_batched_tokens:
        out.append(f"serving.max_num_batched_tokens={best.max_num_batched_tokens}")
    return out


def _with_serving(p: Profile, **changes) -> Profile:
    serving = p.serving.model_copy(update=changes)
    sizes = p.serving.cudagraph_capture_sizes
    if sizes != "auto":
        serving = serving.model_copy(update={"cudagraph_capture_sizes": "auto"})
    return p.model_copy(update={"serving": serving})


def _notes(d: Deployment) -> list[str]:
    out = []
    p = d.profile
    if p.mtp_tokens and p.parallel.decode_context > 1 and not d.sparse_mla:
        out.append("MTP with DCP is tested with the MLA sparse backends only")
    return out + _stage_switches(p)


def _stage_switches(p: Profile) -> list[str]:
    """The prewarm stage's switches the profile sets away from their defaults, each with what
    the workers then do (at its default a switch is not said)."""
    w, defaults = p.prewarm, Prewarm.model_construct()
    said = {
        "early_keys": "the key pass compiles every missing key itself, after the waves",
        "sampler_ahead": "the sampler's Triton keys compile in the first wave, after its "
        "torch.compile",
        "inductor_pool": "Inductor compiles on the stage's thread, one kernel after another"
        if w.inductor_pool == 0
        else f"{w.inductor_pool} Inductor compile processes per rank during the stage",
        "compile_times": "the prewarm's compiles are timed and its thread sampled (a "
        "diagnostic: the fingerprint leaves it out)",
    }
    return [
        f"prewarm.{key} {_yaml(getattr(w, key))} (profile; default "
        f"{_yaml(getattr(defaults, key))}): {what}"
        for key, what in said.items()
        if getattr(w, key) != getattr(defaults, key)
    ]


def _yaml(value: object) -> str:
    """A key's value as a profile writes it (``true``, not ``True``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _field_note(f: ModelFacts, bounding: RankPlan, pinned: str | None) -> list[str]:
    """An estimated first-prefill reserve below what the field measured for this model."""
    field = estimates.FIELD_FIRST_PREFILL.get(f.model_type)
    parts = {c.name: c for c in bounding.components}
    reserve = [parts[n] for n in (Name.ACTIVATION_PEAK, Name.JIT_HEADROOM) if n in parts]
    if not field or pinned == "qualified" or any(c.source is Source.MEASURED for c in reserve):
        return []
    have = sum(c.bytes for c in reserve)
    if have >= field:
        return []
    return [
        f"the reserve for a first long prefill (activation_peak + jit_headroom, "
        f"{have / MiB:,.0f} MiB, estimated) is below the {field / MiB:,.0f} MiB the field "
        f"measured for a first 64K prefill of this model type (docs/benchmarks.md); run "
        "`b12x-launch qualify PROFILE` before serving: it measures the worst case and pins "
        "the KV cache so that it survives it"
    ]


def _over_the_card(q: Qualified, ranks: list[RankPlan], layouts: list[KvLayout]) -> str | None:
    """Why a qualified record cannot be this deployment's (its KV cache alone is more than a
    card), or None. The record comes from the calibration store, which replicas share: it is
    checked against the card like any other input before it pins anything."""
    for r in ranks:
        kv = q.blocks * layouts[r.rank].page_bytes
        if kv > r.total_bytes:
            return (
                f"ignored the qualified record of {q.when}: its {q.blocks:,} KV blocks take "
                f"{_g(kv)} per GPU, more than the card's {_g(r.total_bytes)}; it was not "
                "measured on this deployment. Run `b12x-launch qualify PROFILE` again"
            )
    return None


def _qualified_note(pinned: str | None, bounding: RankPlan, blocks: int) -> list[str]:
    """A qualified size is measured under load; the reserves above are what it replaced."""
    if pinned != "qualified" or blocks == bounding.kv_blocks:
        return []
    more = "more" if blocks > bounding.kv_blocks else "fewer"
    return [
        f"the KV cache is pinned at the qualified {blocks:,} blocks, "
        f"{abs(blocks - bounding.kv_blocks):,} {more} than the reserves above leave "
        "(the worst case measured left the safety margin)"
    ]


def _g(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def plan_without_suggestions(profile: Profile, inputs: PlanInputs) -> MemoryPlan:
    """``plan()`` without the search for what would fit when it does not (for searches over
    settings, which would otherwise nest one search in another)."""
    return _plan(profile, inputs, suggest=False)
