"""The plan as it leaves the planner: ``MemoryPlan`` -> ``PlanRecord`` (the contract's type).

Made once per plan: ``--json`` prints it, the run file carries it to the workers, and every
reader after that reads the record's typed fields. The renderers show the same record.
"""

from __future__ import annotations

from launcher.contract.names import ComponentName
from launcher.contract.plan import (
    CommandRecord,
    ComponentRecord,
    KvRecord,
    PlanRecord,
    RankPlan,
)
from launcher.plan.planner import Component, MemoryPlan
from launcher.plan.planner import RankPlan as PlannedRank


def component(c: Component) -> ComponentRecord:
    return ComponentRecord(
        bytes=c.bytes,
        source=c.source,
        detail=c.detail,
        parts={p.name: component(p) for p in c.parts},
    )


def rank(plan: MemoryPlan, r: PlannedRank) -> RankPlan:
    kv = ComponentRecord(bytes=r.kv_bytes, source=plan.kv_source, detail=plan.kv.pin_detail)
    return RankPlan(
        rank=r.rank,
        node=r.node,
        total_bytes=r.total_bytes,
        total_source=plan.total_source,
        components={
            **{ComponentName(c.name): component(c) for c in r.components},
            ComponentName.KV_CACHE: kv,
        },
        kv_blocks_fit=r.kv_blocks,
        predicted_lowest_free=r.lowest_free,
        learned=list(r.learned),
    )


def plan_record(
    plan: MemoryPlan, fingerprint: str = "", command: CommandRecord | None = None
) -> PlanRecord:
    """``plan`` as the contract's type (``command``: the vLLM command, secrets masked)."""
    kv = plan.kv
    return PlanRecord(
        profile=plan.profile,
        fingerprint=fingerprint,
        fits=plan.fits,
        reasons=list(plan.reasons),
        suggestions=list(plan.suggestions),
        notes=list(plan.notes),
        ranks=[rank(plan, r) for r in plan.ranks],
        kv=KvRecord(
            bytes_per_token_per_rank=kv.bytes_per_token_per_rank,
            page_bytes_per_rank=kv.layout.page_bytes,
            block_tokens=kv.layout.block_tokens,
            dcp=kv.layout.dcp,
            blocks_per_rank=kv.blocks_per_rank,
            tokens=kv.tokens,
            max_model_len=kv.max_model_len,
            max_concurrency=round(kv.max_concurrency, 4),
            bounding_rank=kv.bounding_rank,
            pinned=kv.pinned,
            source=kv.source,
            runtime=kv.runtime,
            record=kv.record,
        ),
        vllm=command,
    )
