"""Prewarm providers: compile and run every kernel specialization before sizing.

A provider is registered by name in ``launcher.profile.prewarm_providers`` (the built-ins,
or a third party's entry point), or named as ``package.module:Class``. Providers are
imported lazily: the dry run lists them without importing torch, vLLM or b12x.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from launcher.profile.prewarm_providers import available
from launcher.runtime.prewarm.flow import Fact

if TYPE_CHECKING:
    from launcher.contract.census import CensusEntry
    from launcher.contract.facts import ModelFacts
    from launcher.contract.record import HeldKernel, KernelEnumeration
    from launcher.deployment import Deployment
    from launcher.profile.schema import Profile


@dataclass
class PrewarmContext:
    """What a provider may read inside a worker (or in ``b12x-launch prewarm``)."""

    deployment: Deployment
    """The profile's derived values (block size, capture sizes, runtime), resolved by whoever
    made the deployment (the launcher; the worker reads them from the run file)."""
    facts: ModelFacts
    rank: int = 0
    device: str = "cuda:0"
    model_runner: Any = None
    """vLLM's model runner when running inside a worker; None elsewhere."""
    worker: Any = None
    """vLLM's worker when running inside one; None elsewhere."""
    log: Any = None
    """A callable taking one line of text."""
    learned: tuple[CensusEntry, ...] = ()
    """Late compiles earlier boots recorded for this rank (the plan's census entries)."""
    enumerated: tuple[KernelEnumeration, ...] = ()
    """The key enumeration an earlier boot recorded for this rank (``prewarm --list``)."""
    scratch: Any = None
    """The scratch KV cache while the runtime provider's stage holds one (``scratch_kv``)."""
    replay: tuple[HeldKernel, ...] = ()
    """A warm boot's keys to load before sizing (the baked boot's ``held``): set when a cache
    artifact restored this deployment's caches and records whole (``ArtifactRecord.warm``).
    The stage then serves only the request-feature waves; the keys stand for the rest."""
    given: dict[Fact, Any] = field(default_factory=dict)
    """What the providers before this one handed of the facts it declares it needs or uses
    (``flow.run`` sets it for each provider); read through ``received``."""
    early: Any = None
    """``early_keys.EarlyKeys`` while the stage runs (``prewarm.early_keys``): the
    key enumeration after each serving pass, compiling in the background until the key pass."""
    compiling: list[Any] = field(default_factory=list)
    """Compile-only passes whose compiles go on beside the passes after them
    (``parallel_compile.Compiling``): the runtime provider settles them when its passes end."""
    after_forward: list[Any] = field(default_factory=list)
    """Work a provider leaves for after the model's first forward (callables taking no
    argument): the runtime provider runs them after its serving waves, on the scratch KV
    cache; the worker runs what is left after the last provider. The fork lines create
    their EXL3 MoE units on each layer's first forward."""

    @property
    def profile(self) -> Profile:
        return self.deployment.profile

    def received(self, fact: Fact) -> Any:
        """What an earlier provider handed of ``fact`` (None: no listed provider handed it on
        this boot). A provider reads only what it declares it needs or uses."""
        if fact not in self.given:
            raise KeyError(f"{fact.value!r} is not among what this provider declares it takes")
        return self.given[fact]


@dataclass
class PrewarmResult:
    provider: str
    compiled: int = 0
    """Specializations compiled (cache misses)."""
    warmed: int = 0
    """Specializations run once."""
    seconds: float = 0.0
    specializations: list[str] = field(default_factory=list)
    skipped: str = ""
    """Why the provider did nothing (not installed, not applicable), if it did nothing."""
    entry_points: list[dict] = field(default_factory=list)
    """Each runtime entry point: ``{name, status, detail, kernels}``; status ``called`` (it
    brought in ``kernels`` > 0 Triton kernels), ``no-op`` (none), ``skipped``, ``missing`` or
    ``failed``."""
    scratch: dict | None = None
    """The scratch KV stage: blocks, bytes, what was served, what its release removed."""
    serving_peak: int = 0
    """What the scratch stage's served waves took from torch's allocator above what they left
    (``ScratchKv.serving_peak``): the worker reserves it when larger than the profile's, and
    records it as ``Activation.stage_peak``."""
    held: list[dict] = field(default_factory=list)
    """Every Triton key the process held when the key enumeration ended, per kernel
    (``keys.held_keys``): what a warm boot from a cache artifact replays instead of serving
    the waves again."""
    enumeration: list[dict] = field(default_factory=list)
    """Per kernel, the key space derived after the waves (``keys``): each argument's classes
    and why, how many keys were launched, reachable and compiled by enumeration."""
    handed: dict[Fact, Any] = field(default_factory=dict)
    """What the provider hands the providers after it (``flow.Fact`` -> its typed value), of
    what it declares it ``provides``; not recorded."""


class Provider(Protocol):
    name: str
    provides: frozenset[Fact]
    """What it hands the providers after it (``flow``)."""
    needs: frozenset[Fact]
    """What a listed provider must provide before it runs, or the stage refuses."""
    uses: frozenset[Fact]
    """What it reads when a listed provider provides it (it runs after that one)."""

    def applies(self, ctx: PrewarmContext) -> bool:
        """Whether this deployment uses the provider's kernels at all."""

    def specializations(self, ctx: PrewarmContext) -> list[str]:
        """Human-readable list of what ``run`` compiles (no heavy imports)."""

    def run(self, ctx: PrewarmContext) -> PrewarmResult:
        """Compile and run every specialization once; may import torch/b12x/vLLM."""

    def freeze(self, ctx: PrewarmContext, on_late_compile, *, strict: bool = False) -> None:
        """Arm the late-JIT watchdog: call ``on_late_compile(kernel, detail)`` on a compile;
        under ``strict`` refuse it too (the worker asks for that from serving's start)."""


class UnknownProvider(LookupError):
    pass


def runtime_function(path: str) -> Callable[..., Any] | None:
    """``module:name`` in the loaded runtime, or None where this vLLM line lacks it (entry
    points are found by capability, never by version)."""
    module, _, attr = path.partition(":")
    try:
        return getattr(importlib.import_module(module), attr, None)
    except ImportError:
        return None


def load(name: str) -> Provider:
    """Instantiate provider ``name`` (a registered name, or ``package.module:Class``)."""
    target = name if ":" in name else available().get(name)
    if target is None:
        raise UnknownProvider(f"unknown prewarm provider {name!r}; known: {', '.join(available())}")
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)()


def run_after_forward(ctx: PrewarmContext) -> None:
    """Run (once) what providers left for after the model's first forward."""
    while ctx.after_forward:
        ctx.after_forward.pop(0)()
