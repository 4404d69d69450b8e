"""A prewarm provider's result as the rank record keeps it (``PrewarmOutcome``), and the
stage's times in words."""

from __future__ import annotations

from pydantic import ValidationError

from launcher.contract.record import PrewarmOutcome
from launcher.runtime.prewarm import PrewarmResult

NOT_RECORDED = ("serving_peak", "handed")
"""A result's parts the record does not keep as the outcome: the stage's served peak (kept
once, as ``Activation.stage_peak``) and what a provider handed the ones after it."""


def outcome(result: PrewarmResult) -> PrewarmOutcome:
    """A provider's result as the record keeps it. A third party's provider may hand back
    what the record's types refuse: its outcome is then kept without those parts, and says
    so, rather than stop the boot. The stage's served peak is not the outcome's: the record
    keeps it once, as ``Activation.stage_peak``."""
    data = {k: v for k, v in vars(result).items() if k not in NOT_RECORDED}
    try:
        return PrewarmOutcome.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
    where = ", ".join(".".join(map(str, e["loc"])) for e in errors[:3])
    note = f"its result's {where} not recorded (not the record's types)"
    refused = {e["loc"][0] for e in errors if e["loc"]}
    kept = {k: v for k, v in data.items() if k not in refused}
    kept["skipped"] = "; ".join(filter(None, [result.skipped, note]))
    try:  # everything but the refused fields (the H200's held keys: the scratch stage stays)
        return PrewarmOutcome.model_validate(kept)
    except ValidationError:
        basic = {k: getattr(result, k) for k in ("provider", "compiled", "warmed", "seconds")}
        return PrewarmOutcome.model_validate({**basic, "skipped": kept["skipped"]})


def stage_times(results: list[PrewarmResult]) -> str:
    """The stage's time per part: each provider, and the scratch stage's waves."""
    total = sum(r.seconds for r in results)
    parts = [f"{r.provider} {r.seconds:.1f}s" for r in results if r.seconds]
    points = [e for r in results for e in outcome(r).entry_points]
    slow = sorted((e for e in points if e.seconds is not None), key=lambda e: -(e.seconds or 0))
    inner = ", ".join(f"{e.name.split('(')[0]} {e.seconds:.1f}s" for e in slow[:3])
    return f"{total:.1f}s: {', '.join(parts)}" + (f" (longest: {inner})" if inner else "")
