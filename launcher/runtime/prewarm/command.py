"""``b12x-launch prewarm PROFILE``: fill the compile caches before the first boot.

It runs under exactly the serving environment (the cache directories and the profile's
``env``), since b12x keys its compile cache on every ``B12X_*``/``CUTE_*``/``CUTLASS_*``
variable: a cache filled under another environment would not be hit.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from launcher.contract import store
from launcher.errors import EnvironmentProblem
from launcher.runtime.prewarm import (
    PrewarmContext,
    PrewarmResult,
    Provider,
    UnknownProvider,
    flow,
    load,
)

if TYPE_CHECKING:
    from launcher.launch.planned import Planned


def providers(planned: Planned, device: str = "cuda:0"):
    p = planned.loaded.profile
    learned = planned.plan.ranks[0].learned if planned.plan.ranks else ()
    facts = planned.inputs.facts  # what the plan used: no second read of the checkpoint
    last = store.newest_record(p.runtime.cache_root, planned.fingerprint, 0)
    enumerated = tuple(last.enumeration()) if last is not None else ()
    d = planned.deployment
    ctx = PrewarmContext(d, facts, 0, device, learned=learned, enumerated=enumerated)
    out = []
    for name in d.prewarm or p.prewarm.providers:
        try:
            out.append(load(name))
        except UnknownProvider as exc:
            raise EnvironmentProblem(f"prewarm.providers: {exc}") from None
    try:
        return ctx, flow.order(out)  # listed in the order the stage runs them
    except flow.FlowError as exc:
        raise EnvironmentProblem(f"prewarm.providers: {exc}") from None


def list_specializations(planned: Planned, echo: Callable[[str], None]) -> None:
    """Every provider's specializations for rank 0, then, where a rank differs (the DCP
    rank is a constexpr of the DCP helpers), what the other ranks compile instead."""
    from dataclasses import replace

    ctx, provs = providers(planned)
    ranks = planned.loaded.profile.parallel.tensor
    if not provs:  # say so: an empty listing reads as a failure
        echo("nothing to prewarm: prewarm.providers is empty")
    for prov in provs:
        if not prov.applies(ctx):
            echo(f"{prov.name}: {flow.why_not(prov, ctx)}")
            continue
        specs = prov.specializations(ctx)
        echo(f"{prov.name}: {len(specs)} specialization(s)")
        for spec in specs:
            echo(f"  {spec}")
        for rank in range(1, ranks):
            other = prov.specializations(replace(ctx, rank=rank))
            if other != specs:
                echo(f"  rank {rank}:")
                for spec in (s for s in other if s not in specs):
                    echo(f"    {spec}")


def run_prewarm(planned: Planned, device: int, echo: Callable[[str], None]) -> None:
    """Compile every provider's specializations on ``device`` under the serving env (its
    cache directories made and proven writable by the caller: ``launch.start``)."""
    os.environ.update(planned.command.env)
    try:
        import torch
    except ImportError:
        raise EnvironmentProblem(
            "prewarm needs torch and the serving GPU stack: pip install '.[serve]' in the "
            "b12x-launch checkout"
        ) from None
    if not torch.cuda.is_available():
        raise EnvironmentProblem(
            "prewarm compiles for the serving GPU and none is visible; "
            "--list shows what it would compile"
        )
    torch.cuda.set_device(device)
    from launcher.gpu.measure import measure

    ctx, provs = providers(planned, f"cuda:{device}")

    def step(prov: Provider, index: int, count: int) -> PrewarmResult:
        start = time.perf_counter()
        result, m = measure(lambda: prov.run(ctx), device)
        echo(
            f"{prov.name}: {result.compiled} compiled, {result.warmed} warmed in "
            f"{time.perf_counter() - start:.1f}s; memory retained {m.retained_bytes / 2**20:.0f} "
            f"MiB, transient peak {m.transient_peak_bytes / 2**20:.0f} MiB"
            + (f"; skipped: {result.skipped}" if result.skipped else "")
        )
        return result

    def skipped(prov: Provider, why: str) -> None:
        hint = " (or needs the vLLM worker)" if why == flow.NOT_USED else ""
        echo(f"{prov.name}: {why}{hint}")

    flow.run(provs, ctx, step, skipped)
