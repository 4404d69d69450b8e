"""The lowest-free forecast against what the H100 measured (2026-12-06, vLLM 0.26, the users'
traffic): each calibrated boot's plan, as it ran, with the serving dip of the boot its
calibration came from, through the planner's own ``lowest_free``, lands within issue 63's
128 MiB of NVML's low-water under the same traffic. Replays the committed raw runs; no GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from launcher.contract.names import ComponentName
from launcher.contract.plan import ComponentRecord
from launcher.contract.record import RankRecord
from launcher.contract.runfile import read_run_file
from launcher.plan.planner import Component, RankPlan, lowest_free

RUNS = Path(__file__).resolve().parents[2] / "docs" / "gpu-runs"
MOE = "2026-12-06-h100-moe-users-calibrated-and-canary"
GLM = "2026-12-06-h100-glm-users-and-calibrated"
BOOT1 = "2026-12-06-h100-moe-and-glm-users-boot-1-logprob-keys"
BOOT2 = "2026-12-06-h100-moe-and-glm-users-calibrated-logprob-keys"
CANARY = "2026-12-06-h100-moe-canary-logprob-keys"
BAKE = "2026-12-06-h100-moe-fresh-node-bar-mtimes-kept-cold-and-bake"
FRESH = "2026-12-06-h100-moe-fresh-node-bar-mtimes-kept-samples"
TOLERANCE = 128 << 20
"""Issue 63: predicted lowest free within 128 MiB of the measured."""

CALIBRATED = [  # (run, the boot; run, the boot its newest record came from)
    (MOE, "moe-users-calibrated", MOE, "moe-users"),
    (MOE, "moe-canary", MOE, "moe-users-calibrated"),
    (GLM, "glm-users-calibrated", GLM, "glm-users"),
    (BOOT2, "moe-users-calibrated", BOOT1, "moe-users"),
    (BOOT2, "glm-users-calibrated", BOOT1, "glm-users"),
    (CANARY, "moe-canary", BOOT2, "moe-users-calibrated"),
    (BAKE, "moe-art-baked-2", BAKE, "moe-art-baked"),
    # fresh nodes: the artifact holds the baked node's boot-1 records
    (FRESH, "moe-art-fresh", BAKE, "moe-art-baked"),
    (FRESH, "moe-art-fresh-2", BAKE, "moe-art-baked"),
    (FRESH, "moe-art-fresh-3", BAKE, "moe-art-baked"),
]
IDS = [f"{c[0][16:]}:{c[1]}" for c in CALIBRATED]


def _component(name: str, c: ComponentRecord) -> Component:
    parts = tuple(_component(n, p) for n, p in c.parts.items())
    return Component(name, c.bytes, c.source, c.detail, parts)


def _rank_plan(run: str, boot: str, dip: int | None) -> tuple[RankPlan, int]:
    """The plan the boot ran (its run file, typed), as the planner's rank with ``dip``."""
    plan = read_run_file(RUNS / run / f"{boot}.plan.json")
    rank, kv = plan.rank(0), plan.kv
    comps = tuple(
        _component(n, c) for n, c in rank.components.items() if n != ComponentName.KV_CACHE
    )
    blocks, page = kv.blocks_per_rank, kv.page_bytes_per_rank
    r = RankPlan(0, 0, rank.total_bytes, comps, blocks * page, blocks, serving_dip=dip)
    return r, page


def _record(run: str, boot: str) -> RankRecord:
    return RankRecord.model_validate_json((RUNS / run / f"{boot}.measure-rank0.json").read_text())


def _measured_low(run: str, boot: str) -> int:
    rows = json.loads((RUNS / run / "gpu-tier-summary.json").read_text())["boots"]
    return next(b["low_water_free"] for b in rows if b["boot"] == boot)


@pytest.mark.parametrize("run,boot,before_run,before", CALIBRATED, ids=IDS)
def test_the_calibrated_forecast_lands_within_128_mib_of_the_measured_low(
    run, boot, before_run, before
):
    dip = _record(before_run, before).serving_dip()
    assert dip is not None, "the earlier boot served nothing: no dip to forecast from"
    r, page = _rank_plan(run, boot, max(0, dip[0]))
    measured = _measured_low(run, boot)
    forecast = lowest_free(r, page)
    assert abs(forecast - measured) <= TOLERANCE, (forecast >> 20, measured >> 20)


@pytest.mark.parametrize("run,boot,before_run,before", CALIBRATED, ids=IDS)
def test_without_the_dip_every_reserve_counts_and_the_forecast_misses(
    run, boot, before_run, before
):
    """The same plans forecast with every reserve at its peak (what the plans printed) miss
    by more than the tolerance: the dip is what makes the figure a forecast."""
    r, page = _rank_plan(run, boot, None)
    assert _measured_low(run, boot) - lowest_free(r, page) > TOLERANCE
