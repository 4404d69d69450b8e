"""The late-JIT census: what compiled after sizing, and what the next boot does about it.

A worker records every compile after the KV cache was sized as a ``CensusEntry``: its
identity (``kind`` triton or inductor with the kernel and Triton's own specialization data,
or b12x with its program key) and the physical memory the serving step that compiled it lost
outside torch's allocator. The calibration store keeps them; the next plan reads them:

- an entry the census provider can replay (a Triton kernel with specialization data) is
  compiled again before sizing (``launcher.runtime.prewarm.providers.census``): the next boot
  is prewarmed;
- the rest are reserved: their measured cost is the ``late_compiles`` part of ``jit_headroom``.

Pure: no torch, no Triton (the replay lives in the provider).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import Field, Strict, StringConstraints, ValidationError

from launcher.contract.base import Frozen

COST_MAX = 1 << 40
"""More memory than one compile can cost; a larger figure is not a worker's measurement."""
TEXT_MAX = 4096
"""The longest kind, kernel, detail or specialization text an entry may carry."""

CANARY_PREFIX = "b12x_canary_"
"""Every canary kernel's name starts so (``runtime.canary``): recorded late, never learned."""

Text = Annotated[str, Strict(), StringConstraints(max_length=TEXT_MAX)]
CompileKind = Literal["triton", "inductor", "b12x", "text"]
Window = Literal["profile", "warmup", "serving"]
"""When, after the stage, a compile or a cache file came: ``profile`` (vLLM's own memory profile,
before sizing: its measurement sees what it kept, so not late), ``warmup`` (after sizing, through
vLLM's own warmup: graph capture, sampler warmup, autotune) or ``serving``."""


class CensusEntry(Frozen):
    """One compile after sizing, as the worker recorded it."""

    kind: CompileKind
    """``triton`` (a ``@triton.jit`` kernel), ``inductor`` (a ``torch.compile``d helper),
    ``b12x`` (a CuTe DSL program b12x had not prepared), or ``text`` (an entry a worker
    before the census wrote as text, read from a v1 record: no identity, no cost)."""
    kernel: Text
    """The kernel: ``module.name`` for Triton, the program key for b12x."""
    detail: Text = ""
    """What distinguishes this compile in words (its shapes or constants)."""
    cost_bytes: Annotated[int, Strict(), Field(ge=0, le=COST_MAX)] = 0
    """Device memory the serving step that compiled it lost outside torch's allocator."""
    specialization: Text = ""
    """Triton's own specialization data (JSON): what the census provider replays."""
    window: Window | None = None
    """When it compiled (None: a record from before the windows, where late meant after
    vLLM's own warmup)."""

    @property
    def key(self) -> tuple[str, str, str]:
        """The entry's identity across boots."""
        return (self.kind, self.kernel, self.specialization or self.detail)

    @property
    def replayable(self) -> bool:
        """Whether the census provider can compile this entry again before sizing."""
        return self.kind == "triton" and bool(self.specialization)

    def plan_for(self) -> str:
        """What the next boot does with it, in words."""
        if self.replayable:
            return "prewarmed before sizing (census replay)"
        return f"reserved in jit_headroom ({self.cost_bytes / 2**20:.0f} MiB measured)"

    def describe(self) -> str:
        if self.kind == "text":
            return f"{self.kernel} (recorded)"
        return f"{self.kind} {self.kernel}{self.detail}: {self.plan_for()}"


def entry(
    kind: CompileKind,
    kernel: str,
    detail: str,
    cost: int = 0,
    specialization: str = "",
    window: Window | None = None,
) -> CensusEntry:
    """One census entry, texts cut to ``TEXT_MAX`` (a kernel's text is the runtime's)."""
    return CensusEntry(
        kind=kind,
        kernel=kernel[:TEXT_MAX],
        detail=detail[:TEXT_MAX],
        cost_bytes=min(max(0, int(cost)), COST_MAX),
        specialization=specialization[:TEXT_MAX],
        window=window,
    )


def entries(raw: Any) -> list[CensusEntry]:
    """The well-formed entries of a list read from an older record (v1): text fields as text
    of a bounded length, the cost a whole number of bytes a compile can take. Records come
    from the calibration store, which replicas share: anything else is dropped."""
    out = []
    for item in raw if isinstance(raw, list | tuple) else ():
        if isinstance(item, CensusEntry):
            out.append(item)
            continue
        if not isinstance(item, dict):
            continue
        known = {k: v for k, v in item.items() if k in CensusEntry.model_fields and v is not None}
        try:
            out.append(CensusEntry.model_validate(known))
        except ValidationError:
            continue
    return out


def merge(*lists: Iterable[CensusEntry]) -> list[CensusEntry]:
    """Entries of several boots, one per identity, keeping the largest measured cost; an
    older worker's text entry (no identity, no cost) and a canary are not carried on."""
    out: dict[tuple[str, str, str], CensusEntry] = {}
    for items in lists:
        for e in items:
            if e.kind == "text" or e.kernel.startswith(CANARY_PREFIX):
                continue
            if e.key not in out or e.cost_bytes > out[e.key].cost_bytes:
                out[e.key] = e
    return list(out.values())


def reserve(entries: Iterable[CensusEntry]) -> int:
    """Bytes the next boot keeps free for entries it cannot replay."""
    return sum(e.cost_bytes for e in entries if not e.replayable)
