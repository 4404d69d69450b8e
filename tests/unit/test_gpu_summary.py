"""The evidence standard of tests/gpu/summary.py, over the committed raw runs (CPU only).

A timing bar is called met or missed only from at least three clean, interleaved samples a
side in one call; a boot that hit vLLM's warm-load fault is counted apart; and
docs/gpu-runs/SUMMARY.txt is the summary's output today, so the tables docs/benchmarks.md
pastes from it cannot drift from the raw files.
"""

from __future__ import annotations

import json
import random
import shlex
from pathlib import Path
from statistics import median

import pytest

from tests.conftest import ROOT
from tests.gpu import summary

RUNS = ROOT / "docs" / "gpu-runs"
GLM_BAR = RUNS / "2026-12-05-h200-glm-fresh-node-bar.json"
MOE_BAR = RUNS / "2026-12-05-h200-moe-bake-and-fresh-node-bar.json"
LOGS = RUNS / "2026-12-05-h200-fresh-node-bar-logs.txt"
SEED = 20261206


def _rows(path: Path) -> list[dict]:
    return json.loads(path.read_text())["boots"]


def _bar(path: Path, logs: Path | None = LOGS) -> summary.Bar:
    (bar,) = summary.bars(_rows(path), logs.read_text() if logs else None)
    return bar


def _call(
    order: str, plain: list[float], launcher: list[float], stems=("m-plain-warm", "m-fresh")
) -> list[dict]:
    """Rows of one call: ``A`` a plain boot, ``B`` the launcher's (by default a plain warm
    boot and a fresh node), named ``stem[-N]``, in run order."""
    a, b = iter(plain), iter(launcher)
    rows, seen = [], {"A": 0, "B": 0}
    for side in order:
        stem = stems[0] if side == "A" else stems[1]
        name = stem if seen[side] == 0 else f"{stem}-{seen[side] + 1}"
        seen[side] += 1
        rows.append({"boot": name, "rank": 0, "ready_seconds": next(a if side == "A" else b)})
    return rows


def test_the_glm_bar_counts_plain_vllms_retraced_warm_boot_apart():
    bar = _bar(GLM_BAR)
    assert bar.order == "ABAB"
    assert [s.boot for s in bar.plain.faulted] == ["glm-art-plain-warm"]
    assert bar.plain.clean == pytest.approx((42.045,), abs=0.01)
    assert median(bar.launcher.clean) == pytest.approx(52.30, abs=0.01)
    assert bar.figure() == "+10.3 s (medians)"


def test_a_bar_with_fewer_than_three_samples_a_side_is_not_called_met():
    # the MoE call: two clean samples a side whose medians are within the +10 s
    bar = _bar(MOE_BAR)
    assert (len(bar.plain.clean), len(bar.launcher.clean)) == (2, 2)
    assert median(bar.launcher.clean) <= median(bar.plain.clean) + bar.limit
    assert bar.verdict().startswith(summary.NOT_ENOUGH)
    assert not bar.met()


def test_every_committed_bar_says_not_enough_samples_until_a_call_runs_three_a_side():
    for path in sorted(RUNS.glob("*.json")):
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or "boots" not in data:
            continue
        for bar in summary.bars(data["boots"]):
            if min(len(bar.plain.clean), len(bar.launcher.clean)) < summary.MIN_SAMPLES:
                assert bar.verdict().startswith(summary.NOT_ENOUGH), (path.name, bar.name)


def test_the_verdict_needs_three_clean_samples_a_side_over_generated_calls():
    rng = random.Random(SEED)
    print(f"seed {SEED}")
    for _ in range(200):
        n = rng.randint(0, 5)
        order = "".join(rng.choice(["AB", "BA"]) for _ in range(n))
        plain = [rng.uniform(40, 60) for _ in range(n)]
        fresh = [rng.uniform(40, 75) for _ in range(n)]
        (bar,) = summary.bars(_call(order, plain, fresh)) or (None,)
        if n == 0:
            assert bar is None
            continue
        assert bar.order == order and bar.interleaved()
        verdict = bar.verdict()
        if n < summary.MIN_SAMPLES:
            assert verdict.startswith(summary.NOT_ENOUGH), (order, verdict)
        else:
            met = median(fresh) <= median(plain) + 10.0
            assert verdict.startswith("met" if met else "missed"), (order, verdict)


def test_a_faulted_sample_does_not_count_toward_the_three():
    rows = _call("ABABAB", [40.0, 41.0, 42.0], [45.0, 46.0, 47.0])
    logs = "".join(
        f"== call Y, {r['boot']}\nINFO Directly load AOT compilation from path x\n" for r in rows
    ).replace(
        "== call Y, m-plain-warm-2\nINFO Directly load",
        f"== call Y, m-plain-warm-2\nWARNING {summary.LOAD_FAILURE} from x\nINFO Directly load",
    )
    (bar,) = summary.bars(rows, logs)
    assert [s.boot for s in bar.plain.faulted] == ["m-plain-warm-2"]
    assert bar.verdict().startswith(summary.NOT_ENOUGH)
    (clean,) = summary.bars(rows, logs.replace(summary.LOAD_FAILURE, "fine"))
    assert clean.verdict().startswith("met")


def test_a_warm_boot_without_a_direct_aot_load_is_a_fault():
    seen = summary.faults(LOGS.read_text())
    assert seen["glm-art-plain-warm"] == "vLLM load failure: traced again"
    assert seen["glm-art-fresh"] is None and seen["moe-art-fresh-2"] is None
    assert summary.faults("== call X, cold\nINFO saved AOT compiled function\n") == {
        "cold": "no direct AOT load: traced again"
    }


@pytest.mark.parametrize("order", ["AABB", "ABAABB", "BBAA"])
def test_samples_not_interleaved_get_no_verdict(order):
    n = order.count("A")
    (bar,) = summary.bars(_call(order, [40.0] * n, [41.0] * n))
    assert not bar.interleaved()
    if n >= summary.MIN_SAMPLES:
        assert bar.verdict().startswith("not interleaved")
    else:
        assert not bar.met()


def test_the_committed_summary_is_the_summary_of_the_raw_files_today():
    text = (RUNS / "SUMMARY.txt").read_text()
    blocks = text.split("\n$ ")[1:]
    assert blocks, "docs/gpu-runs/SUMMARY.txt holds no command"
    for block in blocks:
        command, _, printed = block.partition("\n")
        argv = shlex.split(command)
        assert argv[:3] == ["python", "-m", "tests.gpu.summary"], command
        args = summary.parser().parse_args(argv[3:])
        runs = [ROOT / run for run in args.runs]
        logs = ROOT / args.logs if args.logs else None
        assert printed.rstrip("\n") == summary.report(runs, logs, args.together).rstrip("\n"), (
            f"regenerate docs/gpu-runs/SUMMARY.txt: {command}"
        )


def test_a_run_that_booted_nothing_has_no_summary_to_print():
    """The tier's end-of-run hook asks ``booted()`` first: with no boot it must say no (a
    helper once shadowed the boots' list, and every run's summary hook then crashed)."""
    assert isinstance(summary._boots, list)
    assert summary.booted() is bool(summary._boots)


def _cold(order: str, plain: list[float], planned: list[float]) -> list[dict]:
    """Rows of a boot-1 call: plain vLLM cold and the launcher's boot 1 under stems that
    share no name (``g-plain``, ``g3-mixed``)."""
    return _call(order, plain, planned, ("g-plain", "g3-mixed"))


def test_the_boot_1_bar_pairs_stems_that_do_not_share_a_name_and_takes_their_samples():
    bar = summary.bar_between(
        _cold("ABABAB", [100, 110, 120], [115, 130, 150]), "g-plain", "g3-mixed"
    )
    assert bar is not None and bar.order == "ABABAB"
    assert bar.figure() == "1.18x (medians)"
    assert bar.met()


def test_the_boot_1_bar_on_one_sample_a_side_is_not_met_however_close():
    bar = summary.bar_between(_cold("AB", [100], [101]), "g-plain", "g3-mixed")
    assert bar is not None and not bar.met()
    assert bar.verdict().startswith(summary.NOT_ENOUGH)


def test_the_boot_1_bar_over_1_2x_by_the_medians_is_missed():
    bar = summary.bar_between(
        _cold("ABABAB", [100, 100, 100], [119, 121, 125]), "g-plain", "g3-mixed"
    )
    assert bar.verdict() == "missed (bar 1.2x)"


def test_no_boot_1_bar_where_a_side_never_booted():
    assert summary.bar_between(_cold("AAA", [1, 2, 3], []), "g-plain", "g3-mixed") is None


def _calls(tmp_path: Path, machines: list[str]) -> list[Path]:
    """Two back-to-back calls of the MoE boot-1 bar (ABA, then BAB), each in its own
    ``run-HHMMSS`` directory with the machine its versions.txt names."""
    template = _rows(
        RUNS / "2026-12-06-h100-moe-and-glm-users-boot-1-held-reserves" / "gpu-tier-summary.json"
    )[0]
    rows = [
        {**template, **r}
        for r in _call("ABABAB", [121.0, 119.0, 124.0], [140.0, 146.0, 139.0], ("m-plain", "m"))
    ]
    dirs = []
    for i, (machine, part) in enumerate(zip(machines, (rows[:3], rows[3:]), strict=True)):
        d = tmp_path / f"run-1{i}0000"
        d.mkdir()
        (d / "versions.txt").write_text(f"torch 2.11\nlauncher tree abc\nmachine boot {machine}\n")
        (d / "gpu-tier-summary.json").write_text(json.dumps({"boots": part}))
        dirs.append(d)
    return dirs


def test_a_bar_split_over_back_to_back_calls_on_one_machine_is_one_bar(tmp_path):
    first, second = _calls(tmp_path, ["m1 gpu GPU-1", "m1 gpu GPU-1"])
    rows = summary.same_machine_rows(second) + _rows(second / "gpu-tier-summary.json")
    bar = summary.bar_between(rows, "m-plain", "m", "ratio", 1.2)
    assert bar.order == "ABABAB" and bar.interleaved() and bar.met(), bar.render()
    together = summary.report([d / "gpu-tier-summary.json" for d in (first, second)], None, True)
    assert "run-100000 + run-110000 (one machine)" in together
    assert "verdict:    met (bar 1.2x)" in together


def test_a_call_on_another_machine_lends_no_sample(tmp_path):
    """A fresh machine (another boot id) or another launcher tree starts its bar again: the
    second call alone has one plain sample and is not enough."""
    first, second = _calls(tmp_path, ["m1 gpu GPU-1", "m2 gpu GPU-2"])
    assert summary.same_machine_rows(second) == []
    assert summary.bar_between(_rows(second / "gpu-tier-summary.json"), "m-plain", "m") is None
    with pytest.raises(ValueError, match="one machine"):
        summary.report([d / "gpu-tier-summary.json" for d in (first, second)], None, True)


def test_a_later_call_on_the_machine_lends_nothing_to_an_earlier_one(tmp_path):
    first, _ = _calls(tmp_path, ["m1 gpu GPU-1", "m1 gpu GPU-1"])
    assert summary.same_machine_rows(first) == []
