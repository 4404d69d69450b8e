"""The artifact tier's check that a fresh node plans from the records its artifact carried
(``tests/gpu/test_artifact_boot.py``), on the CPU, over the boots of a GPU run: each boot's run
directory is written as the tier's boots leave it (``plan.json``, ``measure-rank<N>.json``) and
read back by the tier's own reader, which keys the records by integer rank."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.gpu.boot import BootResult, BootSpec, _read_back, carried_mismatches

RUN = ROOT / "tests" / "unit" / "gpu_runs" / "h200-artifact-boots-2026-12-05.json"
DATA = json.loads(RUN.read_text())


def _booted(tmp_path: Path, name: str, rows: list[dict[str, Any]] | None = None) -> BootResult:
    """Boot ``name``'s run directory as the tier leaves it, read back by the tier's reader."""
    rows = DATA["boots"][name] if rows is None else rows
    run = tmp_path / name / "run"
    run.mkdir(parents=True)
    ranks = [
        {
            "rank": row["rank"],
            "components": {
                k: {"bytes": c["planned"], "source": c["source"]}
                for k, c in row["components"].items()
            },
        }
        for row in sorted(rows, key=lambda r: r["rank"])
    ]
    (run / "plan.json").write_text(json.dumps({"ranks": ranks}))
    for row in rows:
        measured = {
            k: c["measured"] for k, c in row["components"].items() if c["measured"] is not None
        }
        (run / f"measure-rank{row['rank']}.json").write_text(json.dumps({"measured": measured}))
    result = BootResult(BootSpec(name, "p.yaml", "glm"), run, tmp_path / "log", [0])
    _read_back(result)
    return result


@pytest.mark.parametrize("baked,fresh", DATA["carried"], ids=["-".join(p) for p in DATA["carried"]])
def test_a_fresh_node_of_the_run_plans_from_the_records_its_artifact_carried(
    tmp_path, baked, fresh
):
    theirs, ours = _booted(tmp_path, baked), _booted(tmp_path, fresh)
    assert set(theirs.records) == {0}  # integer ranks, as the tier keeps them
    assert carried_mismatches(ours.plan, theirs.records) == []


def test_a_figure_one_byte_off_is_named_with_its_rank(tmp_path):
    baked, fresh = DATA["carried"][0]
    rows = json.loads(json.dumps(DATA["boots"][baked]))
    rows[0]["components"]["weights"]["measured"] += 1
    found = carried_mismatches(
        _booted(tmp_path, fresh).plan, _booted(tmp_path, baked, rows).records
    )
    assert len(found) == 1 and found[0].startswith("rank 0:") and "weights" in found[0]


def test_a_figure_the_plan_did_not_call_measured_is_a_mismatch(tmp_path):
    baked, fresh = DATA["carried"][0]
    rows = json.loads(json.dumps(DATA["boots"][fresh]))
    rows[0]["components"]["cuda_context"]["source"] = "estimate"
    found = carried_mismatches(
        _booted(tmp_path, fresh, rows).plan, _booted(tmp_path, baked).records
    )
    assert len(found) == 1 and "cuda_context" in found[0]


def test_missing_records_fail_rather_than_pass_or_raise(tmp_path):
    """String keys (a result.json read back without the tier's reader), no record for a rank,
    a record without figures and a plan without ranks: each is named, none passes and none
    raises (the check once looked records up by ``str(rank)`` and raised ``KeyError: '0'``)."""
    baked, fresh = DATA["carried"][0]
    plan, records = _booted(tmp_path, fresh).plan, _booted(tmp_path, baked).records
    assert carried_mismatches(plan, {str(r): rec for r, rec in records.items()}) == [
        "rank 0: no record (the records hold ranks ['0'])"
    ]
    assert carried_mismatches(plan, {}) == ["rank 0: no record (the records hold ranks [])"]
    assert carried_mismatches(plan, {0: {"measured": {}}}) == [
        "rank 0: its record holds no measured figure"
    ]
    assert carried_mismatches({"ranks": []}, records) == ["the plan has no ranks"]
