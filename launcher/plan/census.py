"""The late-JIT census: what compiled after sizing, and what the next boot does about it.

A worker records every compile after the KV cache was sized as an entry: its identity
(``kind`` triton with the kernel and Triton's own specialization data, or b12x with its
program key) and the physical memory the serving step that compiled it lost outside torch's
allocator. The calibration store keeps them; the next plan reads them:

- an entry the census provider can replay (a Triton kernel with specialization data) is
  compiled again before sizing (``launcher.runtime.prewarm.census``): the next boot is prewarmed;
- the rest are reserved: their measured cost joins ``jit_headroom`` (source ``measured``).

Pure: no torch, no Triton (the replay lives in the provider).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def entry(
    kind: str, kernel: str, detail: str, cost: int = 0, specialization: str = ""
) -> dict[str, Any]:
    """One census entry as records keep it."""
    return {
        "kind": kind,
        "kernel": kernel,
        "detail": detail,
        "cost_bytes": max(0, int(cost)),
        "specialization": specialization,
    }


def key(e: dict[str, Any]) -> tuple[str, str, str]:
    return (
        str(e.get("kind")),
        str(e.get("kernel")),
        str(e.get("specialization") or e.get("detail")),
    )


def replayable(e: dict[str, Any]) -> bool:
    """Whether the census provider can compile this entry again before sizing."""
    return e.get("kind") == "triton" and bool(e.get("specialization"))


COST_MAX = 1 << 40
"""More memory than one compile can cost; a larger figure is not a worker's measurement."""
TEXT_MAX = 4096
"""The longest kind, kernel, detail or specialization text an entry may carry."""


def well_formed(e: Any) -> bool:
    """Whether ``e`` is an entry as a worker writes it: text fields as text of a bounded
    length, the cost a whole number of bytes a compile can take. Records come from the
    calibration store, which replicas share: anything else is not used."""
    if not isinstance(e, dict) or not isinstance(e.get("kernel"), str):
        return False
    texts = [e.get(k, "") for k in ("kind", "kernel", "detail", "specialization")]
    if not all(isinstance(t, str | None) and len(t or "") <= TEXT_MAX for t in texts):
        return False
    cost = e.get("cost_bytes", 0)
    return isinstance(cost, int) and not isinstance(cost, bool) and 0 <= cost <= COST_MAX


def merge(*lists: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entries of several boots, one per identity, keeping the largest measured cost; an
    entry that is not ``well_formed`` is dropped."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for items in lists:
        for e in items if isinstance(items, list | tuple) else ():
            if not well_formed(e):
                continue
            k = key(e)
            if k not in out or e.get("cost_bytes", 0) > out[k].get("cost_bytes", 0):
                out[k] = dict(e)
    return list(out.values())


def reserve(entries: Iterable[dict[str, Any]]) -> int:
    """Bytes the next boot keeps free for entries it cannot replay."""
    return sum(int(e.get("cost_bytes", 0)) for e in entries if not replayable(e))


def plan_for(e: dict[str, Any]) -> str:
    """What the next boot does with an entry, in words."""
    if replayable(e):
        return "prewarmed before sizing (census replay)"
    return f"reserved in jit_headroom ({int(e.get('cost_bytes', 0)) / 2**20:.0f} MiB measured)"


def describe(e: dict[str, Any]) -> str:
    return f"{e.get('kind')} {e.get('kernel')}{e.get('detail', '')}: {plan_for(e)}"
