"""The reader of run files of version 2 (``plan.json`` as b12x-launch wrote it before the
contract was typed), and of plans alone as ``--json`` printed them: both read into today's
types, so nothing past this module knows the older layout.

What differs from version 3: the plan's JSON came from the renderer, a pinned KV cache's
source carried the qualification's date (``qualified 2026-11-30``), a calibrated
``jit_headroom`` was one figure (the measurement plus the census's reserve, the reserve named
only in its detail), and ``driver``, ``gpu_kind`` stood at the top level.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from launcher.contract import census
from launcher.contract.base import ContractError
from launcher.contract.names import ComponentName, HeadroomPart, Source

_LATE = re.compile(r"^measured (\S+) \+ \d+ MiB of late compiles the census cannot replay$")
"""A version 2 calibrated headroom's detail: the measurement plus the census's reserve."""


def upgrade(data: dict[str, Any], path: str | Path) -> dict[str, Any]:
    """A version 2 run file's JSON as version 3's (``launcher.contract.runfile`` validates it)."""
    return {
        **_plan_fields(data, path),
        "run_file": 3,
        "profile_data": data.get("profile_data"),
        "profile_file": data.get("profile_file") or "",
        "deployment": data.get("deployment"),
        "model_facts": data.get("model_facts"),
        "cards": {"driver": data.get("driver") or None, "gpu_kind": data.get("gpu_kind") or None},
        "artifact": _artifact(data.get("artifact")),
    }


def _artifact(value: Any) -> Any:
    """An artifact ignored before its manifest was read had ``keys: {}``; now none."""
    if isinstance(value, dict) and value.get("keys") == {}:
        return {**value, "keys": None}
    return value


def plan(data: Any, path: str | Path) -> dict[str, Any]:
    """A plan alone, as ``--json`` printed it (this version's keys, or version 2's), in
    today's keys (``launcher.contract.runfile`` validates it)."""
    missing = _not_a_plan(data)
    if missing:
        raise ContractError(path, missing, f"{path} is not a b12x-launch plan ({missing})")
    return _plan_fields(data, path)


PLAN_KEYS = (
    *("schema_version", "profile", "fingerprint", "fits", "reasons", "suggestions", "notes"),
    *("ranks", "kv", "vllm"),
)


def _plan_fields(data: dict[str, Any], path: str | Path) -> dict[str, Any]:
    """The plan's keys of ``data`` in today's layout."""
    out = {k: data[k] for k in PLAN_KEYS if k in data}
    if isinstance(out.get("ranks"), list):
        out["ranks"] = [_rank(r) if isinstance(r, dict) else r for r in out["ranks"]]
    kv = out.get("kv")
    if isinstance(kv, dict):
        # A plan written before these keys were printed (a hand-made one in the tests)
        out["kv"] = {"bytes_per_token_per_rank": 0.0, **kv}
    return out


def _rank(r: dict[str, Any]) -> dict[str, Any]:
    learned = census.entries(r.get("learned"))
    comps = r.get("components")
    if isinstance(comps, dict):
        comps = {n: _component(c) if isinstance(c, dict) else c for n, c in comps.items()}
        headroom = comps.get(ComponentName.JIT_HEADROOM)
        if isinstance(headroom, dict):
            comps[ComponentName.JIT_HEADROOM] = _headroom(headroom, learned)
    return {**r, "components": comps, "learned": learned}


def _component(c: dict[str, Any]) -> dict[str, Any]:
    """A pinned KV cache's ``qualified <date>`` is source ``qualified`` with the date in its
    detail; parts are read the same way."""
    out = dict(c)
    source = out.get("source")
    if isinstance(source, str) and source.startswith(Source.QUALIFIED + " "):
        out["source"] = Source.QUALIFIED
        out["detail"] = out.get("detail") or source
    parts = out.get("parts")
    if isinstance(parts, dict):
        out["parts"] = {k: _component(p) if isinstance(p, dict) else p for k, p in parts.items()}
    return out


def _headroom(c: dict[str, Any], learned: list[census.CensusEntry]) -> dict[str, Any]:
    """A calibrated headroom's two parts, from the learned entries it was summed from (the
    planner of version 2 added ``census.reserve(learned)`` to the measurement)."""
    found = _LATE.match(str(c.get("detail", "")))
    late = census.reserve(learned)
    size = c.get("bytes")
    if not found or not isinstance(size, int) or not 0 < late <= size:
        return c
    when = found.group(1)
    return {
        **c,
        "parts": {
            HeadroomPart.PREWARM: {
                "bytes": size - late,
                "source": Source.MEASURED,
                "detail": f"measured {when}",
            },
            HeadroomPart.LATE_COMPILES: {
                "bytes": late,
                "source": Source.MEASURED,
                "detail": _late_detail(learned),
            },
        },
    }


def _late_detail(learned: list[census.CensusEntry]) -> str:
    reserved = [e for e in learned if not e.replayable]
    return f"{len(reserved)} late compile(s) the census cannot replay"


def _not_a_plan(plan: Any) -> str:
    """What ``report`` needs that ``plan`` lacks ("" when it has it all), in words."""
    if not isinstance(plan, dict):
        return "not a JSON object"
    ranks = plan.get("ranks")
    if not isinstance(ranks, list) or not ranks:
        return "no ranks"
    for r in ranks:
        components = r.get("components") if isinstance(r, dict) else None
        if not isinstance(components, dict) or not all(
            _number(r.get(k)) for k in ("rank", "total_bytes")
        ):
            return "a rank without its number, total_bytes and components"
        if not all(
            isinstance(c, dict) and _number(c.get("bytes")) and "source" in c
            for c in components.values()
        ):
            return "a component without its bytes and source"
    kv = plan.get("kv")
    if not isinstance(kv, dict) or not all(
        _number(kv.get(k)) for k in ("tokens", "max_concurrency")
    ):
        return "no kv tokens"
    return ""


def _number(value: Any) -> bool:
    """A figure a plan holds: a finite number (JSON's 1e400 reads as infinity, NaN as NaN)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
