"""The matrix row's verdict (``tests/gpu/row_verdict.py``), on the CPU: over boots shaped as
the tier leaves them, a late compile by any counter and a dip under the margin are named, and a
counter that did not run or a reading that was not taken is a problem, never a 0."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from launcher.runtime.cache_oracle import BASELINE
from tests.gpu import row_verdict
from tests.gpu.boot import BootResult, BootSpec
from tests.gpu.stress import Outcome

GIB = 2**30
MARGIN = GIB // 2
ARGV = ["vllm", "serve", "m", "--jit-monitor-mode", "warn", "--jit-monitor-verbose"]


def _boot(tmp_path: Path, ranks: int = 2, log: str = "") -> BootResult:
    """A planned boot that served, compiled nothing late and kept the margin on every card."""
    run = tmp_path / "run"
    run.mkdir(parents=True, exist_ok=True)
    for rank in range(ranks):
        (run / BASELINE.format(rank=rank)).write_text('{"dirs": {}, "files": []}')
    (tmp_path / "server.log").write_text(log)
    r = BootResult(BootSpec("gen1-0", "p.yaml", "glm_dsa"), run, tmp_path / "server.log", [])
    r.devices = [4 + rank for rank in range(ranks)]  # device numbers differ from ranks
    r.healthy = True
    r.plan = {"profile_data": {"memory": {"safety_margin": MARGIN}}, "vllm": {"argv": list(ARGV)}}
    r.records = {
        rank: {"late_compiles": [], "free_after_warmup": 2 * GIB, "forecast_lowest_free": GIB}
        for rank in range(ranks)
    }
    estimate = {"bytes": GIB, "source": "estimate"}
    r.plan["ranks"] = [
        {
            "rank": rank,
            "total_bytes": 80 * GIB,
            "components": {"weights": estimate},
            "predicted_lowest_free": 3 * GIB,
        }
        for rank in range(ranks)
    ]
    r.outcome = Outcome(sent=3, ok=3, low_free={d: GIB for d in r.devices})
    r.late_files = []  # the oracle read after the workload: nothing new
    return r


def test_a_clean_boot_has_no_problem(tmp_path):
    r = _boot(tmp_path)
    assert row_verdict.failure(r) is None
    assert row_verdict.late(r) == []
    assert row_verdict.under_margin(r) == []
    assert row_verdict.forecast_missed(r) == []


BREAKS = {
    "watchdog counted": lambda r: r.records.get(1, {}).update(late_compiles=[{"kernel": "k"}]),
    "watchdog silent": lambda r: r.records[0].pop("late_compiles"),
    "watchdog None": lambda r: r.records.get(1, {}).update(late_compiles=None),
    "no record": lambda r: r.records.pop(1),
    "oracle counted": lambda r: r.late_files.append("triton/abc/k.cubin"),
    "oracle unarmed": lambda r: (r.run_dir / BASELINE.format(rank=1)).unlink(),
    "monitor counted": lambda r: r.log_path.write_text("x compilation during inference y\n"),
    "monitor off": lambda r: r.plan["vllm"]["argv"].remove("--jit-monitor-verbose"),
}
MARGIN_BREAKS = {
    "dipped after warmup": lambda r: r.records[0].update(free_after_warmup=MARGIN - 1),
    "warmup not read": lambda r: r.records[1].pop("free_after_warmup"),
    "dipped under load": lambda r: r.outcome.low_free.update({5: MARGIN - 1}),
    "card not sampled": lambda r: r.outcome.low_free.pop(4),
    "no workload": lambda r: setattr(r, "outcome", None),
}


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_each_late_counter_fails_when_it_counts_or_did_not_run(tmp_path, name):
    r = _boot(tmp_path)
    BREAKS[name](r)
    assert len(row_verdict.late(r)) == 1, row_verdict.late(r)


@pytest.mark.parametrize("name", sorted(MARGIN_BREAKS))
def test_the_margin_fails_when_it_dips_or_was_not_read(tmp_path, name):
    r = _boot(tmp_path)
    MARGIN_BREAKS[name](r)
    assert row_verdict.under_margin(r), name


def _counter(name: str) -> str:
    """The counter a break takes out (a missing record takes the watchdog's count with it)."""
    return "watchdog" if name == "no record" else name.split()[0]


@pytest.mark.parametrize("a,b", list(itertools.combinations(sorted(BREAKS), 2)))
def test_every_pair_of_breaks_gives_one_line_per_counter_broken(tmp_path, a, b):
    r = _boot(tmp_path)
    BREAKS[a](r)
    BREAKS[b](r)
    found = row_verdict.late(r)
    counters = {_counter(a), _counter(b)}
    if counters == {"watchdog"}:  # one line per rank: two when each took out another rank
        assert 1 <= len(found) <= 2, found
    else:
        assert len(found) == len(counters), found


MiB = 2**20
FORECAST_BREAKS = {
    "low under the worker's forecast": lambda r: r.outcome.low_free.update({5: GIB - 129 * MiB}),
    "low over the worker's forecast": lambda r: r.outcome.low_free.update({4: GIB + 129 * MiB}),
    "no worker forecast": lambda r: r.records[1].pop("forecast_lowest_free"),
    "no record": lambda r: r.records.pop(0),
    "card not sampled": lambda r: r.outcome.low_free.pop(5),
    "calibrated plan's own figure missed": lambda r: r.plan["ranks"][0]["components"].update(
        weights={"bytes": GIB, "source": "measured"}
    ),
}


@pytest.mark.parametrize("name", sorted(FORECAST_BREAKS))
def test_the_forecast_fails_past_128_mib_either_way_or_unread(tmp_path, name):
    """A first boot is held to the worker's forecast (its plan is an estimate); a calibrated
    rank to its plan's own figure (3 GiB here, 2 GiB from the low)."""
    r = _boot(tmp_path)
    FORECAST_BREAKS[name](r)
    assert len(row_verdict.forecast_missed(r)) == 1, row_verdict.forecast_missed(r)


def test_within_128_mib_either_way_the_forecast_holds(tmp_path):
    r = _boot(tmp_path)
    r.outcome.low_free.update({4: GIB - 128 * MiB, 5: GIB + 128 * MiB})
    assert row_verdict.forecast_missed(r) == []


GRAMMAR_500 = "req 7 (structured_outputs): HTTP 500"
FAULT_LINE = "grammar rejected tokens [0] for request cmpl-7. Terminating request\n"


def _speculating(r: BootResult) -> BootResult:
    r.plan["vllm"]["argv"].append("--speculative-config")
    return r


def test_a_failed_request_fails_the_row(tmp_path):
    r = _speculating(_boot(tmp_path))
    r.outcome.failed.append(GRAMMAR_500)
    assert "requests failed" in (row_verdict.failure(r) or "")


def test_vllm_s_named_grammar_fault_matched_in_its_log_is_not_the_row_s(tmp_path):
    r = _speculating(_boot(tmp_path, log=FAULT_LINE))
    r.outcome.failed.append(GRAMMAR_500)
    assert row_verdict.failure(r) is None


def test_a_second_failure_past_the_fault_s_log_lines_fails_the_row(tmp_path):
    r = _speculating(_boot(tmp_path, log=FAULT_LINE))
    r.outcome.failed += [GRAMMAR_500, GRAMMAR_500]
    assert "requests failed" in (row_verdict.failure(r) or "")
