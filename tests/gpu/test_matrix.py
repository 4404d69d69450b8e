"""Generated deployments booted from empty caches: b12x-launch boots every one plain vLLM boots.

The deployments come from ``tests.gpu.matrix.generate`` (seeded; the seed is printed with each
row, and ``Generated.command`` boots one again). Each boots through b12x-launch from an empty
cache root of its own and serves the users' traffic (``tests/gpu/traffic.py``, as the tier's
three models do; drawn from the matrix's seed unless ``GPU_TIER_SEED`` names another). Where it
fails, plain vLLM boots the same deployment from empty caches to tell the two apart: a
deployment both fail on fails as BOTH FAIL (the launcher accepted what vLLM cannot run), apart
from one only b12x-launch fails on. A boot that serves must also keep the plan's safety margin
free after vLLM's warmup and under the workload (boot 1 is where the plan has measured least),
and compile nothing late by any of the three counters, each of which must have run
(``tests.gpu.row_verdict``).

``GPU_MATRIX_PLAIN=1`` boots plain vLLM beside every deployment, for the ready times side by
side; ``GPU_MATRIX_PLAIN=gen1-1,gen1-7`` beside those named only. ``GPU_MATRIX_AGAIN`` (the same
forms) boots a row a second time on its own caches: the calibrated plan must be what vLLM
allocates, to the block, within the margin.

    GPU_MATRIX_SEED=1 GPU_MATRIX_COUNT=8 tests/gpu/run-tier.sh tests/gpu/test_matrix.py
    GPU_MATRIX_SEED=1 tests/gpu/run-tier.sh tests/gpu/test_matrix.py -k "gen1-0 or gen1-2"
"""

from __future__ import annotations

import os

import pytest

from tests.gpu import summary
from tests.gpu.boot import boot
from tests.gpu.matrix import Generated, generate
from tests.gpu.row_verdict import failure, forecast_missed, late, under_margin

pytestmark = pytest.mark.gpu

SEED = int(os.environ.get("GPU_MATRIX_SEED", "1"))
COUNT = int(os.environ.get("GPU_MATRIX_COUNT", "8"))
PLAIN = os.environ.get("GPU_MATRIX_PLAIN", "")
AGAIN = os.environ.get("GPU_MATRIX_AGAIN", "")
"""Rows booted a second time on their own caches (``1``: every row; or a comma list): the
calibrated boot must allocate its plan's blocks and keep the margin too."""

DEPLOYMENTS = generate(SEED, COUNT)


def _plain_beside(name: str) -> bool:
    """Whether plain vLLM boots beside ``name`` even when b12x-launch boots it."""
    return PLAIN == "1" or name in PLAIN.split(",")


def _again(name: str) -> bool:
    return AGAIN == "1" or name in AGAIN.split(",")


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=[g.name for g in DEPLOYMENTS])
def test_each_row_boots_within_the_margin_and_compiles_nothing_late(lab, deployment: Generated):
    print(f"\n{deployment.describe()}\nagain: {deployment.command()}")
    planned = boot(lab, deployment.spec())
    summary.add(planned)
    why = failure(planned)
    plain = None
    if why or _plain_beside(deployment.name):
        plain = boot(lab, deployment.spec(plain=True))
        summary.add(plain)
    if why:
        plain_why = failure(plain)
        if plain_why:  # neither boots it: the launcher let through a deployment vLLM cannot run
            pytest.fail(
                f"{deployment.name}: BOTH FAIL: b12x-launch {why}; plain vLLM {plain_why}. "
                "The launcher accepted a deployment plain vLLM cannot run either; refuse it "
                f"(or keep the generator from drawing it)\nagain: {deployment.command()}"
            )
        pytest.fail(
            f"{deployment.name}: b12x-launch {why}; plain vLLM boots and serves it\n"
            f"again: {deployment.command()}\n--- {planned.log_path} (tail) ---\n{planned.tail()}"
        )
    # Boot 2 runs even when boot 1 dipped: it shows whether calibration took the dip back.
    failures = []
    if short := under_margin(planned):
        failures.append(f"boot 1 under the {planned.margin / 2**30:.2f} GiB margin: {short}")
    if compiled := late(planned):
        failures.append(f"boot 1 late compiles: {compiled}")
    failures += [f"boot 1: {p}" for p in forecast_missed(planned)]
    if _again(deployment.name):
        calibrated = boot(lab, deployment.again())
        summary.add(calibrated)
        if why := failure(calibrated):
            failures.append(f"boot 2: {why}")
        else:
            missed = under_margin(calibrated) + late(calibrated) + forecast_missed(calibrated)
            failures += [f"boot 2: {p}" for p in missed]
        blocks = calibrated.plan.get("kv", {}).get("blocks_per_rank")
        got = {r: rec["kv"]["blocks"] for r, rec in calibrated.records.items()}
        if not got or got != {r: blocks for r in got}:
            failures.append(f"boot 2 allocated {got} blocks, the calibrated plan {blocks}")
    assert not failures, f"{deployment.name}: {'; '.join(failures)}\nagain: {deployment.command()}"
