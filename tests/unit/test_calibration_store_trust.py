"""The calibration store is input (issue 41, case 4): it lives on a volume every replica
shares, so a record is used only if it could be what a worker of this plan wrote there, and
only within what its card holds. A qualified record of 999,999,999 blocks planned a 1.9 PB KV
cache on a 95 GiB card with exit 0; a string ``environment`` was an internal error."""

from __future__ import annotations

import json

from click.testing import CliRunner

from launcher.cli import cli
from launcher.contract import census
from launcher.plan.calibration import SCHEMA as RECORD
from launcher.plan.calibration import load_measured, save_record
from launcher.plan.fingerprint import profile_fingerprint
from launcher.plan.qualified import SCHEMA as QUALIFIED
from launcher.plan.qualified import load_qualified
from launcher.profile import load_profile
from launcher.units import MiB
from tests.conftest import PROFILES

GLM = str(PROFILES / "glm52.yaml")


def store(tmp_path):
    sets = (f"runtime.cache_root={tmp_path / 'cache'}",)
    loaded = load_profile(GLM, sets)
    fp = profile_fingerprint(loaded.profile)
    folder = tmp_path / "cache" / "calibration" / fp
    folder.mkdir(parents=True)
    return loaded, fp, folder, sets


def dry_run(sets):
    result = CliRunner().invoke(cli, [GLM, "--json", *(a for s in sets for a in ("--set", s))])
    assert "internal error" not in result.output and "Traceback" not in result.output
    return result


def qualified(fp, blocks, **extra):
    return json.dumps({"schema": QUALIFIED, "fingerprint": fp, "kv": {"blocks": blocks}, **extra})


def test_a_qualified_record_larger_than_the_card_pins_nothing(tmp_path):
    _, fp, folder, sets = store(tmp_path)
    (folder / "qualified.json").write_text(qualified(fp, 999_999_999))
    result = dry_run(sets)
    plan = json.loads(result.stdout)
    assert plan["kv"]["pinned"] is None and plan["kv"]["blocks_per_rank"] < 10**6
    assert any("ignored the qualified record" in n for n in plan["notes"])


def test_a_qualified_record_with_a_string_environment_is_ignored_with_a_warning(tmp_path):
    _, fp, folder, sets = store(tmp_path)
    (folder / "qualified.json").write_text(qualified(fp, 100, environment="x"))
    result = dry_run(sets)
    assert result.exit_code == 0, result.output
    assert "malformed environment" in result.stderr
    assert json.loads(result.stdout)["kv"]["pinned"] is None


def test_a_qualified_record_of_another_plan_is_not_used(tmp_path):
    loaded, fp, folder, _ = store(tmp_path)
    (folder / "qualified.json").write_text(qualified("0123456789ab", 100))
    warnings = []
    assert load_qualified(loaded.profile, fp, warnings.append, versions={}) is None
    assert "another plan" in warnings[-1]


def record(fp, rank, **measured):
    return {
        "schema": RECORD,
        "fingerprint": fp,
        "rank": rank,
        "when": "2026-11-30T10:00:00",
        "environment": {"gpu_kind": "rtx-pro-6000"},
        "measured": measured,
    }


def test_rank_records_a_worker_of_this_plan_could_not_have_written_are_ignored(tmp_path):
    loaded, fp, folder, _ = store(tmp_path)
    save_record(record(fp, 0, jit_headroom=300 * MiB), None, loaded.profile)
    bad = {
        "rank1.json": record("0123456789ab", 1, jit_headroom=1),  # another plan's
        "rank2.json": record(fp, 2, weights=10**15),  # more than the card
        "rank3.json": record(fp, 99, jit_headroom=1),  # no such rank (and not its name)
    }
    for name, data in bad.items():
        (folder / name).write_text(json.dumps(data))
    (folder / "rank9.json").symlink_to(folder / "rank0.json")
    warnings = []
    measured = load_measured(loaded.profile, fp, warn=warnings.append, versions={})
    assert list(measured) == [0]
    assert len(warnings) == 4, warnings
    assert any("another plan" in w or "of plan" in w for w in warnings)
    assert any("above the card" in w for w in warnings)
    assert any("symbolic link" in w for w in warnings)


def test_a_record_whose_parts_have_the_wrong_types_is_ignored_not_a_crash(tmp_path):
    loaded, fp, folder, sets = store(tmp_path)
    for n, (key, value) in enumerate(
        [("environment", "x"), ("learned", {"a": 1}), ("when", 5), ("budget", [])]
    ):
        (folder / f"rank{n}.json").write_text(
            json.dumps({**record(fp, n, jit_headroom=1), key: value})
        )
    warnings = []
    assert load_measured(loaded.profile, fp, warn=warnings.append, versions={}) == {}
    assert len(warnings) == 4 and all("malformed" in w for w in warnings), warnings
    assert dry_run(sets).exit_code == 0


def test_census_entries_a_worker_did_not_write_are_dropped():
    good = census.entry("b12x", "k", "d", 10 * MiB)
    planted = [
        {"kind": "b12x", "kernel": "k2", "cost_bytes": "lots"},
        {"kind": "b12x", "kernel": "k3", "cost_bytes": 10**18},
        {"kind": "b12x", "kernel": 5},
        "not an entry",
    ]
    merged = census.merge(census.entries([good, *planted]), census.entries({"not": "a list"}))
    assert merged == [good]
    assert census.reserve(merged) == 10 * MiB
