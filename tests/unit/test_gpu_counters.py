"""The GPU tier's checks of the late-compile counters, over records built here: each finding the
tier must report is reported, and a counter that was off is a finding, not a clean 0."""

from __future__ import annotations

from launcher.contract import census
from launcher.contract.record import CacheFile, Canary, Counter, RankRecord
from tests.gpu import counters

ALL = ["profile", "warmup", "serving"]
CANARY_W = "b12x_canary_warmup_7.b12x_canary_warmup_7"
CANARY_S = "b12x_canary_serving_9.b12x_canary_serving_9"


def armed(**changes) -> RankRecord:
    rec = RankRecord(fingerprint="fp", rank=0, when="2026-12-06")
    rec.counters = [
        Counter(name="triton_hooks", armed=True, windows=ALL),
        Counter(name="cache_oracle", armed=True, windows=ALL),
        Counter(name="b12x_report", armed=False, why="the b12x provider did not run"),
        Counter(name="vllm_monitor", armed=True, windows=["serving"]),
    ]
    for key, value in changes.items():
        setattr(rec, key, value)
    return rec


def test_a_clean_armed_boot_has_no_finding():
    recs = {0: armed()}
    assert counters.unarmed(recs) == [] and counters.late(recs) == []


def test_a_boot_whose_counters_were_off_fails_instead_of_reading_zero():
    off = armed()
    off.counters = [Counter(name="triton_hooks", armed=False, why="Triton does not import")]
    found = counters.unarmed({0: off})
    assert any("triton_hooks" in f and "Triton does not import" in f for f in found)
    assert any("cache_oracle" in f for f in found) and any("monitor" in f for f in found)
    assert "rank 0: triton_hooks warmup: not measured" in counters.late({0: off})
    assert counters.unarmed({0: RankRecord(fingerprint="fp", rank=0, when="x")}) != []


def test_a_compile_in_vllms_warmup_is_late_and_one_in_its_profile_is_not():
    rec = armed(
        late_compiles=[census.entry("triton", "vllm.k_capture", "", window="warmup")],
        before_sizing=[census.entry("triton", "vllm.k_profile", "", window="profile")],
        cache_files=[CacheFile(name="TRITON_CACHE_DIR/a/k.cubin", window="serving")],
    )
    assert counters.late({0: rec}) == [
        "rank 0: triton_hooks warmup: vllm.k_capture",
        "rank 0: cache_oracle serving: TRITON_CACHE_DIR/a/k.cubin",
    ]


def test_canaries_are_left_out_of_the_late_count_but_must_each_be_seen():
    rec = armed(
        canary=Canary(kernels={"warmup": CANARY_W, "serving": CANARY_S}),
        late_compiles=[
            census.entry("triton", CANARY_W, "", window="warmup"),
            census.entry("triton", CANARY_S, "", window="serving"),
        ],
        cache_files=[
            CacheFile(name="TRITON_CACHE_DIR/h1/b12x_canary_warmup_7.cubin", window="warmup"),
            CacheFile(name="TRITON_CACHE_DIR/h2/b12x_canary_serving_9.cubin", window="serving"),
        ],
    )
    log = "WARNING Triton JIT compilation during inference: b12x_canary_serving_9 [x]"
    assert counters.late({0: rec}) == []
    assert counters.canary_missed({0: rec}, log) == []
    assert counters.monitor_lines(log) == []


def test_a_canary_a_counter_missed_is_named():
    rec = armed(
        canary=Canary(kernels={"warmup": CANARY_W, "serving": CANARY_S}),
        late_compiles=[census.entry("triton", CANARY_S, "", window="serving")],
        cache_files=[],
    )
    missed = counters.canary_missed({0: rec}, "")
    assert f"rank 0: Triton's hooks missed {CANARY_W} (warmup)" in missed
    assert any("cache oracle saw no file" in m for m in missed)
    assert "rank 0: vLLM's monitor did not log b12x_canary_serving_9" in missed
    skipped = armed(canary=Canary(skipped="no CUDA device"))
    assert "canary not compiled" in counters.canary_missed({0: skipped}, "")[0]


def test_a_launcher_module_the_worker_recorded_as_the_canarys_is_and_one_of_nobody_is_late():
    """Triton builds a launcher per new signature; the H100's canary boot built one in its
    warmup window (2026-12-06). The worker records its kernel where the window decides it
    (``test_late_counters``); beside another late kernel, or none, it records none: late."""
    launcher_so = "TRITON_CACHE_DIR/h3/__triton_launcher.cpython-312-x86_64-linux-gnu.so"
    rec = armed(
        canary=Canary(kernels={"warmup": CANARY_W, "serving": CANARY_S}),
        late_compiles=[census.entry("triton", CANARY_W, "", window="warmup")],
        cache_files=[CacheFile(name=launcher_so, window="warmup", kernel=CANARY_W)],
    )
    assert counters.late({0: rec}) == []
    rec.late_compiles.append(census.entry("triton", "vllm.k_capture", "", window="warmup"))
    rec.cache_files = [CacheFile(name=launcher_so, window="warmup")]
    assert f"rank 0: cache_oracle warmup: {launcher_so}" in counters.late({0: rec})
    alone = armed(cache_files=[CacheFile(name=launcher_so, window="serving")])
    assert counters.late({0: alone}) == [f"rank 0: cache_oracle serving: {launcher_so}"]
