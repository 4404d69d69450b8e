"""The one provider loop: providers ordered by what they declare, run in turn, each handed
what the ones before it provided.

A provider declares ``provides`` (the facts it hands on), ``needs`` (facts a listed provider
must provide: without one the stage refuses, naming it) and ``uses`` (facts it reads when a
listed provider provides them: it runs after that provider, else it gets None). ``order``
keeps the listed order wherever no declaration says otherwise. The worker's stage and
``b12x-launch prewarm`` both run the providers through ``run``. Imports no torch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from launcher.runtime.prewarm import PrewarmContext, PrewarmResult, Provider


class Fact(StrEnum):
    """What one provider hands the ones after it."""

    LAUNCHED = "launched"
    """Triton kernels launched or loaded in this process (an ordering edge: no value; the
    key enumeration reads Triton's own caches)."""
    SERVED_KERNELS = "served_kernels"
    """``ServedKernels``: what the serving-shaped passes launched (the ``vllm`` provider's
    waves, capture shapes and MoE buckets)."""


@dataclass(frozen=True)
class ServedKernels:
    """The Triton kernels (``module.qualname``) the serving-shaped passes launched: the key
    enumeration derives only theirs (without it every launched kernel is a template)."""

    names: frozenset[str]


class FlowError(ValueError):
    """The listed providers cannot be ordered: a need no listed provider provides, or a
    cycle of declarations."""


NONE: frozenset[Fact] = frozenset()


def declared(provider: Any, what: str) -> frozenset[Fact]:
    """A provider's ``provides``/``needs``/``uses``; a third party's provider that declares
    none has no edges and keeps its listed place."""
    return frozenset(getattr(provider, what, NONE))


def order(providers: Sequence[Provider]) -> list[Provider]:
    """``providers`` with each one after every listed provider of what it needs or uses;
    otherwise in the listed order. ``FlowError`` names an unmet need or a cycle."""
    by_fact: dict[Fact, list[int]] = {}
    for i, p in enumerate(providers):
        for fact in declared(p, "provides"):
            by_fact.setdefault(fact, []).append(i)
    before: list[set[int]] = []
    for i, p in enumerate(providers):
        for fact in sorted(declared(p, "needs")):
            if not any(j != i for j in by_fact.get(fact, ())):
                raise FlowError(
                    f"prewarm provider {p.name!r} needs {fact.value!r}, which no listed "
                    "provider provides: list one that provides it in prewarm.providers, "
                    f"or remove {p.name!r}"
                )
        edges = declared(p, "needs") | declared(p, "uses")
        before.append({j for f in edges for j in by_fact.get(f, ()) if j != i})
    done: list[int] = []
    while len(done) < len(providers):
        ready = [i for i in range(len(providers)) if i not in done and before[i] <= set(done)]
        if not ready:
            left = [i for i in range(len(providers)) if i not in done]
            raise FlowError(
                "prewarm providers wait on each other: "
                + "; ".join(_waits(providers, i, before[i] - set(done)) for i in left)
            )
        done.append(ready[0])
    return [providers[i] for i in done]


def _waits(providers: Sequence[Provider], i: int, on: Iterable[int]) -> str:
    return f"{providers[i].name} after {', '.join(providers[j].name for j in sorted(on))}"


def why_not(provider: Provider, ctx: PrewarmContext) -> str:
    """The provider's own one-line reason it does not apply, when it has one."""
    why = getattr(provider, "why_not", None)
    return (why(ctx) if callable(why) else "") or NOT_USED


NOT_USED = "not used by this deployment"


Step = Callable[["Provider", int, int], "PrewarmResult"]
"""Runs one applying provider (index, count): the caller's timing, logging and measuring."""


def run(
    providers: Sequence[Provider],
    ctx: PrewarmContext,
    step: Step,
    skipped: Callable[[Provider, str], None] = lambda p, why: None,
) -> list[PrewarmResult]:
    """Run ``providers`` in ``order``: each sees on ``ctx.given`` what the providers before
    it handed of what it declared it needs or uses, and hands on only what it provides."""
    from launcher.runtime.prewarm import PrewarmResult

    handed: dict[Fact, Any] = {}
    results: list[PrewarmResult] = []
    ordered = order(providers)
    for i, provider in enumerate(ordered):
        takes = declared(provider, "needs") | declared(provider, "uses")
        ctx.given = {fact: handed.get(fact) for fact in takes}
        if not provider.applies(ctx):
            why = why_not(provider, ctx)
            skipped(provider, why)
            results.append(PrewarmResult(provider.name, skipped=why))
            continue
        result = step(provider, i, len(ordered))
        extra = set(result.handed) - declared(provider, "provides")
        if extra:
            raise FlowError(
                f"prewarm provider {provider.name!r} handed {sorted(map(str, extra))}, "
                "which it does not declare it provides"
            )
        handed.update(result.handed)
        results.append(result)
    ctx.given = {}
    return results
