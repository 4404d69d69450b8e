"""The planned worker inside a real vLLM on real GPUs, started as a user would.

One boot per scenario, each ``python3 -m launcher PROFILE --force`` in its own process
group (tests/gpu/boot.py): start, wait for /health, run the bounded stress workload while
NVML samples free memory, stop, then plan again with ``--dry-run --json``. The tests only
read what the boot left: the log, plan.json, each rank's measure-rank<N>.json, the
sampled low-water free memory and the next plan.

    scenario        model        what it shows
    llama           dense Llama  prewarm before the profile, KV blocks = budget, margin kept,
                                 the calibrated plan equal to the allocation
    moe             DeepSeek-V2  the same with MLA + MoE, and no late compile with prewarm
    moe-noprewarm   DeepSeek-V2  the fused-MoE kernels compile late without prewarm
    moe-strict      DeepSeek-V2  --strict-jit stops the server on that late compile
    moe-tp2         DeepSeek-V2  two ranks on two GPUs: the budget is the minimum over ranks
    glm-plain       GLM-5 arch.  plain vLLM (its own worker, same flags), empty caches: what
                                 its JIT monitor sees compile during inference
    glm             GLM-5 arch.  boot 1 from empty caches: the scratch-KV stage compiles the
                                 sparse-MLA, indexer, MoE and MTP kernels before sizing
    glm-calibrated  GLM-5 arch.  boot 2: the calibrated plan is the allocation, no late compile

Needs a CUDA machine with vLLM importable (tests/gpu/run-tier.sh on the H200).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from launcher.report.vllm_log import parse_kv_lines
from tests.conftest import need
from tests.gpu import counters, row_verdict, summary, vllm_faults
from tests.gpu.boot import BootResult, BootSpec

pytestmark = pytest.mark.gpu

NO_PREWARM = "prewarm.enabled=false"
PREDICTION = 0.005
"""A calibrated plan's KV bytes against what the worker measured it could give: within 0.5%
(the H200 runs: 0.12% before the activation peak was measured, docs/benchmarks.md)."""
LLAMA = BootSpec("llama", "llama-h200.yaml", "llama")
MOE = BootSpec("moe", "dsv2-moe-h200.yaml", "deepseek_v2")
MOE_COLD = BootSpec("moe-noprewarm", "dsv2-moe-h200.yaml", "deepseek_v2", sets=(NO_PREWARM,))
MOE_STRICT = BootSpec(
    "moe-strict", "dsv2-moe-h200.yaml", "deepseek_v2", sets=(NO_PREWARM,), strict_jit=True
)
MOE_TP2 = BootSpec("moe-tp2", "dsv2-moe-h200-tp2.yaml", "deepseek_v2", ranks=2)
# The GLM-5 architecture (sparse MLA + DSA indexer + MoE + MTP) from empty caches of its own,
# plain vLLM beside the planned worker.
GLM_PLAIN = BootSpec("glm-plain", "glm-dsa-h200.yaml", "glm_dsa", cache="glm-plain", plain=True)
GLM_PLAIN_WARM = BootSpec(
    "glm-plain-warm", "glm-dsa-h200.yaml", "glm_dsa", cache="glm-plain", plain=True
)  # plain vLLM again on the caches its cold boot filled: the warm boot to compare against
GLM = BootSpec("glm", "glm-dsa-h200.yaml", "glm_dsa", cache="glm")
GLM_AGAIN = BootSpec("glm-calibrated", "glm-dsa-h200.yaml", "glm_dsa", cache="glm")
GLM_DCP2 = BootSpec("glm-dcp2", "glm-dsa-h200-dcp2.yaml", "glm_dsa", ranks=2, cache="glm-dcp2")
# Issue 33, two H200s: DCP on the dense-MLA tier model (vLLM 0.26 has no DCP for sparse MLA on
# Hopper), each boot from empty caches of its own, plain vLLM beside it, and TP2 without DCP.
MOE_DCP2 = BootSpec("moe-dcp2", "dsv2-moe-h200-dcp2.yaml", "deepseek_v2", ranks=2, cache="md2")
MOE_DCP2_I64 = BootSpec(
    "moe-dcp2-i64", "dsv2-moe-h200-dcp2.yaml", "deepseek_v2", ("parallel.interleave=64",),
    ranks=2, cache="md2-i64",
)  # fmt: skip
MOE_DCP2_PLAIN = BootSpec(
    "moe-dcp2-plain", "dsv2-moe-h200-dcp2.yaml", "deepseek_v2", ranks=2, cache="md2-plain",
    plain=True,
)  # fmt: skip
MOE_TP2_COLD = BootSpec(
    "moe-tp2-cold", "dsv2-moe-h200-tp2.yaml", "deepseek_v2", ranks=2, cache="mt2"
)
# Issue 39: a GLM deployment the tier never booted crashed boot 1 (vLLM's CUDA-graph memory
# profile ran the MTP drafter's dummy batch on the slots the scratch stage's steps left in its
# buffer), where plain vLLM boots it. Each from empty caches of its own.
ISSUE_39 = (
    "speculative={method: mtp, tokens: 3}",
    "serving.max_model_len=24576",
    "serving.max_num_seqs=12",
    "serving.max_num_batched_tokens=3000",
    "serving.cudagraph_capture_sizes=[4, 8, 16, 32, 48]",
)
GLM_39_PLAIN = BootSpec(
    "glm39-plain", "glm-dsa-h200.yaml", "glm_dsa", ISSUE_39, cache="glm39-plain", plain=True
)
GLM_39 = BootSpec("glm39", "glm-dsa-h200.yaml", "glm_dsa", ISSUE_39, cache="glm39")
GLM_39_AGAIN = BootSpec("glm39-calibrated", "glm-dsa-h200.yaml", "glm_dsa", ISSUE_39, cache="glm39")
# Boot 1's bar takes three cold samples a side: each on its own empty cache root.
GLM_39_PLAIN_2, GLM_39_PLAIN_3 = (
    BootSpec(f"glm39-plain-{n}", "glm-dsa-h200.yaml", "glm_dsa", ISSUE_39, cache=f"glm39-plain-{n}",
             plain=True)
    for n in (2, 3)
)  # fmt: skip
GLM_39_2, GLM_39_3 = (
    BootSpec(f"glm39-{n}", "glm-dsa-h200.yaml", "glm_dsa", ISSUE_39, cache=f"glm39-{n}")
    for n in (2, 3)
)  # fmt: skip
# Issue 40: every request feature the API accepts, at 1, 8 and max_num_seqs rows, streamed
# and not, on each model from empty caches of its own (boot 1, then the calibrated boot 2),
# and plain vLLM beside it on the same workload.
FEATURES = {
    model: (
        BootSpec(f"{name}-features", profile, model, cache=f"{name}-feat", workload="features"),
        BootSpec(
            f"{name}-features-calibrated", profile, model, cache=f"{name}-feat",
            workload="features",
        ),
        BootSpec(
            f"{name}-features-plain", profile, model, cache=f"{name}-feat-plain", plain=True,
            workload="features",
        ),
    )
    for name, profile, model in (
        ("glm", "glm-dsa-h200.yaml", "glm_dsa"),
        ("moe", "dsv2-moe-h200.yaml", "deepseek_v2"),
        ("llama", "llama-h200.yaml", "llama"),
    )
}  # fmt: skip
# Issue 63: traffic like users send (tests/gpu/traffic.py, generated from vLLM's own request
# model, max_num_seqs in flight, seeded) under vLLM's default sampler, each model from empty
# caches of its own: boot 1, the calibrated boot 2, then a canary boot on the warm caches that
# proves every counter was counting.
USERS = {
    model: (
        BootSpec(f"{name}-users", profile, model, cache=f"{name}-users", workload="users"),
        BootSpec(
            f"{name}-users-calibrated", profile, model, cache=f"{name}-users", workload="users"
        ),
        BootSpec(
            f"{name}-canary", profile, model, ("prewarm.canary=true",), cache=f"{name}-users",
            workload="users",
        ),
    )
    for name, profile, model in (
        ("glm", "glm-dsa-h200.yaml", "glm_dsa"),
        ("moe", "dsv2-moe-h200.yaml", "deepseek_v2"),
        ("llama", "llama-h200.yaml", "llama"),
    )
}  # fmt: skip
# Second boots of the same deployments: the plan now reads the first boot's records.
LLAMA_AGAIN = BootSpec("llama-calibrated", "llama-h200.yaml", "llama")
MOE_AGAIN = BootSpec("moe-census", "dsv2-moe-h200.yaml", "deepseek_v2")
# Issue 29: each model from empty caches of its own, three boots with three workloads (the
# tier's mixed waves, qualify's worst case, one streamed MTP generation beside max_num_seqs
# short prompts); on every boot nothing compiles late and the census learns nothing.
THREE = {
    kind: (
        BootSpec(f"llama3-{kind}", "llama-h200.yaml", "llama", cache="llama3", workload=kind),
        BootSpec(f"moe3-{kind}", "dsv2-moe-h200.yaml", "deepseek_v2", cache="moe3", workload=kind),
        BootSpec(f"glm3-{kind}", "glm-dsa-h200.yaml", "glm_dsa", cache="glm3", workload=kind),
    )
    for kind in ("mixed", "qualify", "stream")
}


def _why(r: BootResult) -> str:
    return f"\n--- {r.log_path} (tail) ---\n{r.tail()}"


class Served:
    """What every prewarmed boot must show, per rank."""

    spec: BootSpec

    def test_it_starts_and_serves_the_whole_workload(self, booted):
        """Every request answered, but for vLLM's own named faults, each matched by its line
        in the server's log (``vllm_faults``)."""
        assert booted.healthy, "the server never became healthy" + _why(booted)
        out = booted.outcome
        own, other = vllm_faults.split(out.failed, booted.log(), booted.plan)
        assert other == [], _why(booted)
        assert out.sent > booted.plan["profile_data"]["serving"]["max_num_seqs"]
        assert out.ok == out.sent - len(own)
        assert out.samples > 10, "NVML sampled too rarely to see a low-water mark"
        assert set(booted.records) == set(range(self.spec.ranks))

    def test_prewarm_runs_before_vllms_profile(self, booted):
        lines = booted.log().splitlines()
        prewarm = [i for i, line in enumerate(lines) if "prewarm retained" in line]
        profile = [i for i, line in enumerate(lines) if "Available KV cache memory" in line]
        assert len(prewarm) == self.spec.ranks, _why(booted)
        assert profile, "vLLM's profile line is missing" + _why(booted)
        assert max(prewarm) < min(profile)
        for rank, rec in booted.records.items():
            assert rec["prewarm_measurement"] is not None, rank
            assert rec["prewarm"], rank

    def test_no_entry_point_of_the_stage_failed(self, booted):
        """A failed entry point leaves what it would have served to compile after sizing (the
        H100's GLM stage failed a wave and the boot went on, 2026-12-06)."""
        failed = [
            f"rank {rank}: {p['provider']}: {e['name']}: {e['detail']}"
            for rank, rec in booted.records.items()
            for p in rec["prewarm"]
            for e in p.get("entry_points", ())
            if e.get("status") == "failed"
        ]
        assert failed == [], _why(booted)

    def test_every_late_compile_counter_was_armed_from_the_stages_end(self, booted):
        """A count from a counter that was off is not a 0: each record says which ran, and
        over which windows (vLLM's monitor from serving on)."""
        assert counters.unarmed(counters.typed(booted.records)) == [], _why(booted)

    def test_vllm_allocates_the_returned_budget_to_the_block(self, booted):
        page = booted.page_bytes
        budgets = {r: rec["budget"]["bytes"] for r, rec in booted.records.items()}
        expected = min(b // page for b in budgets.values())  # vLLM takes the smallest rank
        assert {r: rec["kv"]["blocks"] for r, rec in booted.records.items()} == {
            r: expected for r in budgets
        }
        kv = booted.plan["kv"]
        logged = parse_kv_lines(booted.log()).tokens
        assert logged == expected * kv["block_tokens"] * kv["dcp"], _why(booted)

    def test_free_memory_stays_above_the_safety_margin(self, booted):
        low = booted.outcome.low_free
        assert set(low) == set(booted.devices)
        for device, free in low.items():
            assert free >= booted.margin, (
                f"GPU {device}: {free / 2**20:.0f} MiB free at the lowest under the workload, "
                f"margin {booted.margin / 2**20:.0f} MiB"
            )

    def test_the_record_keeps_the_lowest_free_memory_while_serving(self, booted):
        """The worker's own reading at the steps' edges, against NVML's sampled low-water on
        the same card: it cannot be lower than what NVML saw, beyond NVML's sampling."""
        for rank, rec in booted.records.items():
            low = rec.get("serving_low_free")
            assert low is not None, f"rank {rank}: no serving low-water recorded"
            nvml = min(booted.outcome.low_free.values())
            assert low >= nvml - 64 * 2**20, (rank, low, nvml)

    def test_the_next_plan_is_calibrated(self, booted):
        assert booted.calibrated is not None, booted.dry_run_error
        for rank, rec in booted.records.items():
            comps = booted.calibrated["ranks"][rank]["components"]
            sources = {name: comps[name]["source"] for name in rec["measured"] if name in comps}
            assert set(sources.values()) == {"measured"}, sources


class CompilesNothingLate:
    """Every kernel the workload ran was compiled (or replayed) before sizing."""

    def test_no_late_compile_with_prewarm(self, booted):
        """Late: after sizing, in vLLM's own warmup (capture, sampler warmup, autotune) or in
        serving, by Triton's hooks and by the cache oracle; each window measured, none empty
        by being off."""
        assert counters.late(counters.typed(booted.records)) == []


PROFILED = ("cuda_context", "weights", "workspaces")
"""Components vLLM holds when it profiles: what they weigh on this boot is taken from the room
the worker measures, so growth since the calibrating boot comes out of the KV cache."""


def grown_since_calibration(plan: dict, rank: int, record: dict) -> int:
    """Bytes the profiled components grew on this boot over the plan's measured figures."""
    comps = plan["ranks"][rank]["components"]
    measured = record.get("measured") or {}
    return sum(
        max(0, measured[n] - comps[n]["bytes"])
        for n in PROFILED
        if n in measured and comps.get(n, {}).get("source") == "measured"
    )


class Calibrated(Served):
    """A second boot of the same deployment on the idle card: its plan, made from the
    first boot's records, is what vLLM allocates, to the block."""

    def test_the_calibrated_plan_fits_what_the_worker_measured(self, booted):
        """Not by construction (the worker returns the plan's figure whenever it fits): vLLM's
        own log line gives the tokens it allocated, and the room each rank measured after
        vLLM's profile, before any figure was returned, holds the plan's blocks."""
        need("gpu-idle", not booted.ballast, "a ballasted card is shared; this needs an idle one")
        kv = booted.plan["kv"]
        planned = kv["blocks_per_rank"]
        per_block = kv["block_tokens"] * kv["dcp"]
        logged = parse_kv_lines(booted.log()).tokens
        for rank, rec in booted.records.items():
            room = rec["budget"]["measured_room"] // booted.page_bytes
            grew = -(-grown_since_calibration(booted.plan, rank, rec) // booted.page_bytes)
            # To the block, unless what vLLM held at its profile grew since the calibrating
            # boot (2026-12-06, H100: the MoE model's workspaces by 64 KiB, one block short):
            # then the worker gives the room it measured, short by no more than that growth.
            assert room >= planned - grew, (
                f"rank {rank}: room for {room:,} blocks, plan {planned:,}; grown {grew} block(s)"
            )
            assert logged == min(planned, room) * per_block, _why(booted)
        sources = {n: c["source"] for n, c in booted.plan["ranks"][0]["components"].items()}
        assert sources["cudagraph_pool"] == sources["cuda_context"] == "measured", sources

    def test_the_plan_predicts_what_the_worker_measured(self, booted):
        """Not by construction: the worker returns the calibrated plan's figure whenever it
        fits, so the allocation equals the plan; what it measured it could give (free after
        vLLM's profile less every reserve) must be within PREDICTION of that figure."""
        need("gpu-idle", not booted.ballast, "a ballasted card is shared; this needs an idle one")
        planned = booted.plan["ranks"][0]["components"]["kv_cache"]["bytes"]
        for rank, rec in booted.records.items():
            room = rec["budget"]["measured_room"]
            assert abs(room - planned) <= PREDICTION * planned, (rank, room, planned)


class TestLlama(Served, CompilesNothingLate):
    spec = LLAMA


class TestLlamaCalibrated(Calibrated, CompilesNothingLate):
    spec = LLAMA_AGAIN


class TestMoe(Served, CompilesNothingLate):
    """First boot of the MoE deployment, on vLLM's V2 model runner: the scratch stage runs
    there too (2026-12-06, H100: 0 late under the users' traffic), so nothing compiles late."""

    spec = MOE


class TestMoeCensus(Calibrated, CompilesNothingLate):
    """The MoE deployment booted again: whatever compiled late before is replayed before
    sizing (census provider); nothing compiles late."""

    spec = MOE_AGAIN

    def test_the_census_replayed_what_the_first_boot_learned(self, booted):
        """Each replayable key the plan carried, compiled before sizing; none where boot 1
        compiled nothing late (the census then says it had nothing to replay)."""
        learned = booted.plan["ranks"][0].get("learned") or []
        replayable = [e for e in learned if e.get("kind") == "triton" and e.get("specialization")]
        prewarm = {p["provider"]: p for p in booted.records[0]["prewarm"]}
        assert prewarm["census"]["compiled"] == len(replayable), prewarm.get("census")


class TestMoeWithoutPrewarm:
    spec = MOE_COLD

    def test_it_serves(self, booted):
        assert booted.healthy, _why(booted)
        assert booted.outcome.failed == [], _why(booted)

    def test_the_fused_moe_kernels_compile_late(self, booted):
        late = [k for kernels in booted.late_compiles.values() for k in kernels]
        assert late, "no late compile without prewarm: the workload missed the MoE buckets"


class TestStrictJit:
    spec = MOE_STRICT

    def test_a_late_compile_stops_the_server_with_a_clear_message(self, booted):
        assert booted.healthy, _why(booted)
        assert not booted.stopped_by_us, "the server kept serving after a late compile"
        assert booted.exit_seconds is not None
        log = booted.log()
        said = [line for line in log.splitlines() if "late JIT compile after sizing" in line]
        assert said, _why(booted)
        assert any(booted.late_compiles.values()), "the record lacks the late compile"


class TestMoeTp2(Served, CompilesNothingLate):
    """Two ranks on two GPUs, a first boot: nothing compiles late, as on one rank."""

    spec = MOE_TP2


class ScratchStaged(Served, CompilesNothingLate):
    """What the scratch-KV stage must show on the GLM-5 architecture, per rank."""

    def test_the_scratch_stage_ran_the_runtime_on_a_real_kv_cache(self, booted):
        for rank, rec in booted.records.items():
            stage = next(p for p in rec["prewarm"] if p["provider"] == "vllm")
            assert stage["scratch"] and stage["scratch"]["blocks"] > 0, (rank, stage)
            assert stage["scratch"]["forced"] == [], stage["scratch"]
            called = {e["name"].split(":")[0] for e in stage["entry_points"]}
            assert "vLLM's scheduler and execute_model" in called, stage["entry_points"]

    def test_no_late_compile_by_the_watchdog_or_vllms_monitor(self, booted):
        assert counters.late(counters.typed(booted.records)) == []
        lines = counters.monitor_lines(booted.log())
        assert lines == [], "\n".join(lines[:20])


class TestGlm(ScratchStaged):
    """Boot 1 from empty caches: nothing compiles after sizing."""

    spec = GLM


class TestGlmCalibrated(ScratchStaged, Calibrated):
    spec = GLM_AGAIN


class TestGlmPlain:
    """Plain vLLM 0.26 on the GLM-5-architecture model: the seed's failure class."""

    spec = GLM_PLAIN

    def test_it_serves(self, booted):
        assert booted.healthy, _why(booted)
        assert booted.outcome.failed == [], _why(booted)

    def test_vllms_monitor_sees_kernels_compile_during_inference(self, booted):
        assert booted.monitor_late, "plain vLLM compiled nothing late: the workload is too easy"


class TestGlmPlainWarm(TestGlmPlain):
    """Plain vLLM's warm boot (after TestGlmPlain): issue 29's bar for a warm planned boot.
    Warm caches do not quiet vLLM's monitor: it logged 20 events on each of this boot's two
    recorded runs (H200, the key-enumeration calls of 2026-12-01 and 2026-12-02), and 26 and
    22 on the artifact tier's plain warm boots (2026-12-05): the cold boot's check holds too."""

    spec = GLM_PLAIN_WARM


class TestGlmDcp2Refused:
    """Sparse MLA under DCP on vLLM 0.26 (FlashMLASparseImpl returns no decode LSE): the
    launch refuses it before the weights load (issue 30)."""

    spec = GLM_DCP2

    def test_the_launch_exits_1_before_the_weights_load(self, booted):
        assert not booted.healthy and booted.exit_code == 1
        log = booted.log_path.read_text()
        assert "softmax LSE during decode" in log, log[-2000:]
        assert "Loading weights" not in log and "EngineCore" not in log


class LearnsNothing(Served, CompilesNothingLate):
    """Issue 29: the key enumeration, not the census, covers what serving runs."""

    def test_no_late_compile_by_the_watchdog_or_vllms_monitor(self, booted):
        assert counters.late(counters.typed(booted.records)) == []
        lines = counters.monitor_lines(booted.log())
        assert lines == [], "\n".join(lines[:20])

    def test_no_file_appears_in_the_compile_caches_after_sizing(self, booted):
        """The oracle no hook can miss: Inductor, xgrammar, DeepGEMM and FlashInfer write
        into these caches too. Read again after the workload against each rank's baseline
        (taken when its stage ended): what appeared before sizing, in vLLM's own memory
        profile, is the records' ``profile`` window and not late."""
        recs = counters.typed(booted.records)
        before = {f.name for rec in recs.values() for f in rec.cache_files if f.window == "profile"}
        assert booted.late_files is not None, "no baseline: the oracle did not run"
        after = [f for f in booted.late_files if f not in before]
        assert after == [], after[:20]

    def test_the_enumeration_ran_and_says_what_it_assumed(self, booted):
        for rank, rec in booted.records.items():
            keys = next((p for p in rec["prewarm"] if p["provider"] == "keys"), None)
            # Llama on FlashAttention launches no Triton kernel before sizing: nothing to derive
            assert keys is not None and not keys["skipped"], (rank, rec["prewarm_seconds"])
            assert all("assumed" in e for e in keys["enumeration"])

    def test_the_early_enumeration_ran_unless_turned_off_and_compiled_without_failures(
        self, booted
    ):
        """On by default; ``prewarm.early_keys: false`` (a boot's ``sets``) turns it off, as
        the boot's run file says. The key pass's record says how many keys compiled early and
        that none failed; turned off, nothing ran early."""
        asked = booted.plan["profile_data"]["prewarm"]["early_keys"]
        for rank, rec in booted.records.items():
            keys = next(p for p in rec["prewarm"] if p["provider"] == "keys")
            lines = [s for s in keys["specializations"] if s.startswith("early: ")]
            assert bool(lines) == asked, (rank, lines)
            if lines:
                assert " failed" not in lines[0] and "stopped" not in lines[0], (rank, lines)

    def test_the_sampler_ahead_compiled_beside_the_first_wave_and_compile_times_ran_if_asked(
        self, booted
    ):
        """Unless ``prewarm.sampler_ahead: false``, each rank's log says what the ahead thread
        did; with ``prewarm.compile_times: true`` it names the prewarm's compiles (the boot's
        run file says which it ran with)."""
        log = booted.log_path.read_text(errors="replace")
        asked = booted.plan["profile_data"]["prewarm"]
        if asked["sampler_ahead"]:
            assert "sampler ahead: " in log, booted.tail()
            assert "sampler ahead: not done" not in log and "still compiling" not in log
        if asked["compile_times"]:
            assert "compiles in the prewarm: " in log, booted.tail()


class UsersTraffic(LearnsNothing):
    """Issue 63: the generated users' workload served whole, its seed printed; nothing late in
    vLLM's warmup or in serving; free memory above the margin (``Served``)."""

    def test_every_generated_request_was_served_and_its_seed_is_recorded(self, booted):
        out = booted.outcome
        _own, other = vllm_faults.split(out.failed, booted.log(), booted.plan)
        assert out.seed is not None and other == [], other[:20]
        assert "prompt_logprobs" in out.coverage and "stream" in out.coverage, out.coverage

    def test_the_predicted_lowest_free_is_within_128_mib_of_the_measured(self, booted):
        """Every transient planned: the forecast (a calibrated plan's, else the worker's made
        as the KV cache was built: ``row_verdict.forecast_of``) against NVML's low-water
        under the users' traffic, per card."""
        assert row_verdict.forecast_missed(booted) == []

    def test_the_serving_reserves_were_held_and_serving_drew_on_them(self, booted):
        """The activation and transient reserves held in torch's cache after vLLM's warmup
        (``runtime.worker.hold``: all of them, or what the warmup left past the headroom and
        the margin), to torch's 2 MiB rounding, and torch's allocated peak read while serving."""
        from launcher.contract.record import Budget
        from launcher.runtime.worker.hold import hold_size

        for rank, rec in booted.records.items():
            size = hold_size(Budget.model_validate(rec["budget"]), rec["free_after_warmup"])
            held = rec.get("held_for_serving")
            assert held is not None, (rank, booted.tail())
            assert size.bytes <= held <= size.bytes + 2 * 2**20, (rank, held, size)
            assert rec.get("serving_peak_allocated") is not None, rank


class CanaryCounted(Served):
    """A canary boot: one new kernel compiled in vLLM's warmup window and one in serving; each
    counter reports each (a late count of 0 elsewhere then means the counter was counting),
    and nothing else compiles late."""

    def test_every_counter_reported_the_canary_in_its_window(self, booted):
        recs = counters.typed(booted.records)
        assert counters.canary_missed(recs, booted.log()) == [], _why(booted)

    def test_nothing_but_the_canary_compiled_late(self, booted):
        assert counters.late(counters.typed(booted.records)) == []
        assert counters.monitor_lines(booted.log()) == []


class TestGlmUsers(UsersTraffic):
    spec = USERS["glm_dsa"][0]


class TestGlmUsersCalibrated(UsersTraffic, Calibrated):
    spec = USERS["glm_dsa"][1]


class TestGlmCanary(CanaryCounted):
    spec = USERS["glm_dsa"][2]


class TestMoeUsers(UsersTraffic):
    spec = USERS["deepseek_v2"][0]


class TestMoeUsersCalibrated(UsersTraffic, Calibrated):
    spec = USERS["deepseek_v2"][1]


class TestMoeCanary(CanaryCounted):
    spec = USERS["deepseek_v2"][2]


class TestLlamaUsers(UsersTraffic):
    spec = USERS["llama"][0]


class TestLlamaUsersCalibrated(UsersTraffic, Calibrated):
    spec = USERS["llama"][1]


class TestLlamaCanary(CanaryCounted):
    spec = USERS["llama"][2]


class TestGlm3Mixed(LearnsNothing):
    spec = THREE["mixed"][2]


class Boot1Bar:
    """The planned boot 1 within 1.2x plain vLLM's cold boot, both from empty caches: the
    medians of three samples a side or more, interleaved (``plain[-N]`` and ``planned[-N]``
    booted in turn), in one call or over back-to-back calls on one held machine and launcher
    tree (``summary.same_machine_rows``). Fewer samples fail: no bar is met on one."""

    plain: str
    planned: str
    BAR = 1.2

    def test_boot_1_takes_at_most_1_2x_plain_vllms_cold_boot(self, lab):
        rows = summary.same_machine_rows(lab.root) + summary.rows()
        bar = summary.bar_between(rows, self.plain, self.planned, "ratio", self.BAR)
        if bar is None:
            pytest.fail(f"run {self.plain} and {self.planned} first, in this call")
        said = bar.render()
        print(said)
        if bar.verdict().startswith((summary.NOT_ENOUGH, "not interleaved")):
            pytest.fail(said)
        assert bar.met(), said


class TestGlmBoot1Time(Boot1Bar):
    """Issue 29's bar on the GLM model: ``::TestGlmPlain ::TestGlm3Mixed`` and their
    samples in turn, then this."""

    plain, planned = "glm-plain", "glm3-mixed"


class TestMoeColdPlain:
    """Plain vLLM on the MoE model from empty caches: the A side of the MoE boot-1 bar.
    Six cold boots outlast one call: ``::TestMoeColdPlain ::TestMoeCold ::TestMoeColdPlain2``
    in one, ``::TestMoeCold2 ::TestMoeColdPlain3 ::TestMoeCold3 ::TestMoeBoot1Time`` in the
    next, at once on the same machine."""

    spec = BootSpec(
        "moe-cold-plain", "dsv2-moe-h200.yaml", "deepseek_v2", cache="moe-cold-plain", plain=True
    )

    def test_it_serves(self, booted):
        assert booted.healthy, _why(booted)
        assert booted.outcome.failed == [], _why(booted)


class TestMoeCold(LearnsNothing):
    spec = BootSpec("moe-cold", "dsv2-moe-h200.yaml", "deepseek_v2", cache="moe-cold")


class TestMoeColdPlain2(TestMoeColdPlain):
    spec = replace(TestMoeColdPlain.spec, name="moe-cold-plain-2", cache="moe-cold-plain-2")


class TestMoeCold2(LearnsNothing):
    spec = replace(TestMoeCold.spec, name="moe-cold-2", cache="moe-cold-2")


class TestMoeColdPlain3(TestMoeColdPlain):
    spec = replace(TestMoeColdPlain.spec, name="moe-cold-plain-3", cache="moe-cold-plain-3")


class TestMoeCold3(LearnsNothing):
    spec = replace(TestMoeCold.spec, name="moe-cold-3", cache="moe-cold-3")


class TestMoeBoot1Time(Boot1Bar):
    plain, planned = "moe-cold-plain", "moe-cold"


class TestGlm39Plain(TestGlmPlain):
    """Issue 39's deployment on plain vLLM, from empty caches: it boots and serves."""

    spec = GLM_39_PLAIN


class TestGlm39(LearnsNothing, ScratchStaged):
    """Issue 39's deployment through b12x-launch, boot 1 from empty caches: it boots where it
    crashed, and the stage put back what its steps left in the runner (the drafter's slot
    mapping among them)."""

    spec = GLM_39

    def test_the_stage_put_the_drafters_slot_mapping_back(self, booted):
        for rank, rec in booted.records.items():
            stage = next(p for p in rec["prewarm"] if p["provider"] == "vllm")
            restored = stage["scratch"]["restored"]
            assert "runner.drafter._slot_mapping_buffer" in restored["rewritten"], (rank, restored)


class TestGlm39Calibrated(LearnsNothing, Calibrated):
    spec = GLM_39_AGAIN


class TestGlm39Boot1Time(Boot1Bar):
    """Boot 1 of issue 39's deployment against plain vLLM's cold boot: ``::TestGlm39Plain
    ::TestGlm39 ::TestGlm39Plain2 ::TestGlm39Sample2 ::TestGlm39Plain3 ::TestGlm39Sample3``
    (about 230 s each on an H200: two calls do not make one bar), then this."""

    plain, planned = "glm39-plain", "glm39"


class TestGlm39Plain2(TestGlm39Plain):
    spec = GLM_39_PLAIN_2


class TestGlm39Sample2(LearnsNothing):
    spec = GLM_39_2


class TestGlm39Plain3(TestGlm39Plain):
    spec = GLM_39_PLAIN_3


class TestGlm39Sample3(LearnsNothing):
    spec = GLM_39_3


class TestGlm3Qualify(LearnsNothing):
    spec = THREE["qualify"][2]


class TestGlm3Stream(LearnsNothing):
    spec = THREE["stream"][2]


class TestLlama3Mixed(LearnsNothing):
    spec = THREE["mixed"][0]


class TestLlama3Qualify(LearnsNothing):
    spec = THREE["qualify"][0]


class TestLlama3Stream(LearnsNothing):
    spec = THREE["stream"][0]


class TestMoe3Mixed(LearnsNothing):
    spec = THREE["mixed"][1]


class TestMoe3Qualify(LearnsNothing):
    spec = THREE["qualify"][1]


class TestMoe3Stream(LearnsNothing):
    spec = THREE["stream"][1]


class TestMoeDcp2(LearnsNothing):
    """Issue 33: TP2 / DCP2, interleave 1, boot 1 from empty caches."""

    spec = MOE_DCP2


class TestMoeDcp2Interleave64(LearnsNothing):
    spec = MOE_DCP2_I64


class TestMoeDcp2Plain:
    spec = MOE_DCP2_PLAIN

    def test_it_serves(self, booted):
        assert booted.healthy, _why(booted)
        assert booted.outcome.failed == [], _why(booted)


class TestMoeTp2Cold(LearnsNothing):
    """The key enumeration at two ranks: TP2 without DCP, boot 1 from empty caches."""

    spec = MOE_TP2_COLD


class FeaturesPlain:
    """Plain vLLM on the features workload: every accepted feature served, each refused one
    answered 400; what its monitor sees compile late is the baseline the planned boots beat."""

    def test_every_accepted_feature_serves_and_every_refused_one_is_refused(self, booted):
        assert booted.healthy, _why(booted)
        assert booted.outcome.failed == [], booted.outcome.failed[:10]


class TestGlmFeaturesPlain(FeaturesPlain):
    spec = FEATURES["glm_dsa"][2]


class TestGlmFeatures(LearnsNothing):
    spec = FEATURES["glm_dsa"][0]


class TestGlmFeaturesCalibrated(LearnsNothing, Calibrated):
    spec = FEATURES["glm_dsa"][1]


class TestMoeFeaturesPlain(FeaturesPlain):
    spec = FEATURES["deepseek_v2"][2]


class TestMoeFeatures(LearnsNothing):
    spec = FEATURES["deepseek_v2"][0]


class TestMoeFeaturesCalibrated(LearnsNothing, Calibrated):
    spec = FEATURES["deepseek_v2"][1]


class TestLlamaFeaturesPlain(FeaturesPlain):
    spec = FEATURES["llama"][2]


class TestLlamaFeatures(LearnsNothing):
    spec = FEATURES["llama"][0]


class TestLlamaFeaturesCalibrated(LearnsNothing, Calibrated):
    spec = FEATURES["llama"][1]
