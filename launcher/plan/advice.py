"""What to change so a plan fits, in one line (the launch's refusal, the table, sweeps)."""

from __future__ import annotations

from launcher.contract.names import ComponentName
from launcher.plan.planner import MemoryPlan
from launcher.units import format_size


def fix_hint(plan: MemoryPlan) -> str:
    """What to change so the plan fits: the setting that caused it first, when the profile
    asked for more than the cards have (a pinned KV size, a safety margin)."""
    pinned = plan.kv.pinned
    if pinned in ("kv_tokens", "kv_cache_bytes") and any(
        f"memory.{pinned}" in r for r in plan.reasons
    ):
        blocks = min(r.kv_blocks for r in plan.ranks)
        if blocks <= 0:
            return f"Nothing is left for the KV cache: remove memory.{pinned}"
        if pinned == "kv_tokens":
            most = f"{plan.kv.layout.tokens_for_blocks(blocks)} tokens"
        else:
            most = format_size(min(r.kv_bytes for r in plan.ranks))
        return f"Lower memory.{pinned} to at most {most} (what fits), or remove it"
    for r in plan.ranks:
        fixed = r.fixed_bytes
        margin = sum(c.bytes for c in r.components if c.name == ComponentName.SAFETY_MARGIN)
        if (
            fixed > r.total_bytes
            and margin >= fixed - r.total_bytes
            and margin > r.total_bytes // 8
        ):
            return (
                f"memory.safety_margin ({format_size(margin)}) alone is more than the card can "
                f"spare ({format_size(r.total_bytes)} per GPU): lower it (default 512MiB)"
            )
    if plan.suggestions:
        return "Would fit with: " + " ".join(f"--set {s}" for s in plan.suggestions)
    return (
        "Nothing smaller in serving.max_model_len or serving.max_num_seqs fits: lower the "
        "weights (model.bits_per_weight), add GPUs, or use a smaller kv_cache_dtype"
    )
