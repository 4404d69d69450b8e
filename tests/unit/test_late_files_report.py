"""``report RUN_DIR``'s counter lines, over the H100's records of 2026-12-06: which counters ran
over which windows, the late cache files of each window by the kernel they were built for, and
"not measured" (never 0) where the cache oracle did not watch."""

from __future__ import annotations

from pathlib import Path

from launcher.contract.record import CacheFile, Counter, RankRecord
from launcher.report.late_files import counter_line, late_file_lines

RUNS = Path(__file__).resolve().parents[2] / "docs" / "gpu-runs"


def _record(run: str, boot: str) -> RankRecord:
    return RankRecord.model_validate_json((RUNS / run / f"{boot}.measure-rank0.json").read_text())


def test_a_calibrated_boot_reads_0_in_each_late_window_and_names_the_counter_that_did_not_run():
    r = _record("2026-12-06-h100-glm-users-and-calibrated", "glm-users-calibrated")
    assert late_file_lines(r) == ["late cache files in warmup: 0", "late cache files in serving: 0"]
    line = counter_line(r)
    assert "cache_oracle (profile, warmup, serving)" in line
    assert "b12x_report not armed: the b12x provider did not run" in line


def test_the_moe_boots_late_files_are_counted_in_serving():
    r = _record("2026-12-06-h100-moe-users-calibrated-and-canary", "moe-users")
    assert late_file_lines(r) == [
        "late cache files in warmup: 0",
        "late cache files in serving: 16 (16 for no kernel named)",  # a record before .kernel
    ]


def test_files_are_grouped_by_the_kernel_the_worker_named():
    r = _record("2026-12-06-h100-glm-users-and-calibrated", "glm-users-calibrated")
    r.cache_files = [
        CacheFile(name=f"TRITON_CACHE_DIR/H/k.{ext}", window="serving", kernel="m.canary")
        for ext in ("cubin", "json", "ptx")
    ] + [CacheFile(name="TRITON_CACHE_DIR/L/__triton_launcher.so", window="serving")]
    assert late_file_lines(r)[1] == (
        "late cache files in serving: 4 (3 for m.canary, 1 for no kernel named)"
    )


def test_an_oracle_that_did_not_run_reads_not_measured_never_0():
    r = _record("2026-12-06-h100-glm-users-and-calibrated", "glm-users-calibrated")
    r.counters = [
        c if c.name != "cache_oracle" else Counter(name=c.name, armed=False, why="no baseline")
        for c in r.counters
    ]
    assert late_file_lines(r) == [
        "late cache files: not measured, the cache oracle did not run (no baseline)"
    ]
    r.counters = [
        c if c.name != "cache_oracle" else Counter(name=c.name, armed=True, windows=["warmup"])
        for c in r.counters
    ]
    assert late_file_lines(r) == [
        "late cache files in warmup: 0",
        "late cache files in serving: not measured",
    ]


def test_a_record_from_before_the_counters_says_nothing_of_them():
    r = _record("2026-12-06-h100-glm-users-and-calibrated", "glm-users-calibrated")
    r.counters = []
    assert counter_line(r) == ""
