"""The reader of version 1 records (``b12x-launch/measurement/1``): what workers wrote before
the contract was typed, in run directories, calibration stores and baked artifacts.

Version 1's layout is version 2's but for the environment (the package versions beside the
cards' names), late compiles that may be text (a worker before the census), and figures and
parts a worker of the time did not write (read as absent). Its shape is checked as the reader
of the time checked it, each problem named; ``upgrade`` gives version 2's JSON, which the
record's own reader (``launcher.contract.record``) validates.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from launcher.contract import census
from launcher.contract.base import FIGURE_MAX, ContractError
from launcher.contract.names import ComponentName

SCHEMA = "b12x-launch/measurement/1"
SCHEMA_V2 = "b12x-launch/measurement/2"

SHAPES = {
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
"""What each part of a version 1 record is, when it is there."""
ENVIRONMENT = ("gpu_kind", "host", "gpu", "cuda", "driver")
"""The environment's own keys; the others are package versions."""
NAMES = {c.value for c in ComponentName}


def upgrade(data: dict[str, Any], path: Path | str) -> dict[str, Any]:
    """A version 1 record's JSON as version 2's; ``ContractError`` naming the file (and the
    part) when it is malformed."""
    _check(data, path)
    env = data.get("environment") or {}
    if not all(isinstance(v, str | int | float | type(None)) for v in env.values()):
        raise ContractError(path, "malformed environment")
    budget = data.get("budget") or {"bytes": 0}
    return {
        "schema": SCHEMA_V2,
        "fingerprint": data.get("fingerprint", ""),
        "rank": data["rank"],
        "when": data.get("when", "?"),
        "environment": {
            **{k: _text(env.get(k)) for k in ENVIRONMENT},
            "packages": {k: _text(v) for k, v in env.items() if k not in ENVIRONMENT},
        },
        "plan": {k: v for k, v in (data.get("plan") or {}).items() if k in NAMES},
        "measured": {k: v for k, v in data["measured"].items() if k in NAMES},
        "measured_why": {
            str(k): str(v) for k, v in (data.get("measured_why") or {}).items() if k in NAMES
        },
        "vllm_available": data.get("vllm_available") or 0,
        "budget": {"bytes": 0, **budget},
        "prewarm": [_outcome(p) for p in data.get("prewarm") or [] if isinstance(p, dict)],
        "prewarm_seconds": data.get("prewarm_seconds") or {},
        "prewarm_measurement": data.get("prewarm_measurement"),
        "late_compiles": _late(data.get("late_compiles") or []),
        "learned": census.entries(data.get("learned") or []),
        "late_files": data.get("late_files") or [],
        "kv": data.get("kv"),
        "free_after_warmup": data.get("free_after_warmup"),
        "activation": data.get("activation"),
    }


def _check(data: dict[str, Any], path: Path | str) -> None:
    measured = data.get("measured")
    if not isinstance(measured, dict) or not all(_figure(v) for v in measured.values()):
        raise ContractError(path, "malformed measured figures")
    rank = data.get("rank")
    if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank < 1 << 16:
        raise ContractError(path, "malformed rank")
    wrong = [k for k, kind in SHAPES.items() if k in data and not isinstance(data[k], kind)]
    for part in ("kv", "activation"):
        value = data.get(part)
        if isinstance(value, dict) and not all(_figure(v) for v in value.values()):
            wrong.append(part)
    if wrong:
        raise ContractError(path, f"malformed {', '.join(wrong)}")


def _figure(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= FIGURE_MAX


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _late(items: list[Any]) -> list[census.CensusEntry]:
    """Census entries, and a text entry (a worker before the census) kept as its text."""
    out = []
    for item in items:
        if isinstance(item, str):
            out.append(census.entry("text", item, ""))
        else:
            out += census.entries([item])
    return out


def _outcome(p: dict[str, Any]) -> dict[str, Any]:
    """A provider's result as version 1 wrote it: ``scratch`` null when there was none."""
    return {k: v for k, v in p.items() if v is not None or k != "scratch"}
