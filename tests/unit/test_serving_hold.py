"""What the worker holds for serving after vLLM's warmup (``hold_size``), and the forecast it
makes as the KV cache is built (``forecast``): pure arithmetic over the budget it sized with."""

from __future__ import annotations

import random

import pytest

from launcher.contract.names import ComponentName as Name
from launcher.contract.record import Budget
from launcher.runtime.worker.hold import HELD, KEPT, forecast, hold_size

MiB = 2**20
SEED = 20261206


def budgets(n: int = 200) -> list[Budget]:
    """Budgets as the worker makes them on a GPU, the reserves drawn (seeded)."""
    rng = random.Random(SEED)
    out = []
    for _ in range(n):
        reserved = {
            n.value: rng.randrange(0, 4096) * MiB
            for n in (
                Name.ACTIVATION_PEAK,
                Name.CUDAGRAPH_POOL,
                Name.TRANSIENTS,
                Name.JIT_HEADROOM,
                Name.SAFETY_MARGIN,
            )
        }
        out.append(Budget.of(rng.randrange(1, 80 << 10) * MiB, "measured", reserved, None))
    return out


@pytest.mark.parametrize("budget", budgets(), ids=lambda b: f"kv{b.bytes >> 20}")
def test_the_hold_is_the_serving_reserves_and_never_eats_the_headroom_or_the_margin(budget):
    """Free after vLLM's warmup drawn from nothing to twice what the reserves need: the hold
    is every serving reserve where that fits, else all that leaves the kept ones free."""
    r = budget.reserved
    want = sum(r[n] for n in HELD)
    kept = sum(r[n] for n in KEPT)
    free = random.Random(budget.bytes).randrange(0, 2 * (want + kept) + 1)
    size = hold_size(budget, free)
    assert size.reserves == want
    assert 0 <= size.bytes <= want
    assert free - size.bytes >= min(free, kept)
    assert (size.bytes == want) == (size.capped == "") == (free - kept >= want)


@pytest.mark.parametrize("budget", budgets(), ids=lambda b: f"kv{b.bytes >> 20}")
def test_the_forecast_keeps_the_jit_headroom_and_the_margin_free(budget):
    """Free once the KV cache exists is the reserves; the forecast is what stays of them
    once the graphs, activations and transients are drawn: the headroom and the margin."""
    r = budget.reserved
    after_kv = sum(r.values())
    assert forecast(budget, after_kv) == r[Name.JIT_HEADROOM] + r[Name.SAFETY_MARGIN]


def test_a_cpu_budget_without_reserves_forecasts_the_free_it_was_given():
    assert forecast(Budget(bytes=1), 5 * MiB) == 5 * MiB
