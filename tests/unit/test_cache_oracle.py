"""The cache-directory oracle: a compile after ready is counted whoever made it, by the file it
leaves in a compile cache. Real writers: Triton's own cache manager, and a real Inductor compile
(on the CPU Inductor writes C++ where on a GPU it writes Triton, into the same cache root)."""

from __future__ import annotations

import json

import pytest

from launcher.contract import census
from launcher.contract.record import CacheFile, RankRecord
from launcher.runtime import cache_oracle as oracle
from launcher.runtime import jit_watch
from tests.conftest import ROOT, need_serving


@pytest.fixture
def caches(tmp_path, monkeypatch):
    dirs = {}
    for var, sub in (("TRITON_CACHE_DIR", "triton"), ("TORCHINDUCTOR_CACHE_DIR", "inductor")):
        path = tmp_path / "cache" / sub
        path.mkdir(parents=True)
        monkeypatch.setenv(var, str(path))
        dirs[var] = path
    (tmp_path / "cache" / "calibration").mkdir()
    return oracle.cache_dirs({k: str(v) for k, v in dirs.items()})


def test_a_triton_compile_after_ready_is_a_late_file(caches, tmp_path):
    need_serving("triton")
    from triton.runtime.cache import get_cache_manager

    run = tmp_path / "run"
    run.mkdir()
    oracle.write_baseline(run, 0, caches)
    assert oracle.late_files(run) == []
    get_cache_manager("a" * 64).put(b"cubin", "late_kernel.cubin")  # what a compile leaves
    (late,) = oracle.late_files(run)
    assert late.startswith("TRITON_CACHE_DIR/") and late.endswith("late_kernel.cubin")


def test_an_inductor_compile_after_ready_is_a_late_file(caches, tmp_path):
    torch = need_serving("torch")
    run = tmp_path / "run"
    run.mkdir()
    oracle.write_baseline(run, 0, caches)
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: (x * 2 + 1).sum(), dynamic=False)
    compiled(torch.arange(7, dtype=torch.float32))
    late = oracle.late_files(run)
    assert late and all(name.startswith("TORCHINDUCTOR_CACHE_DIR/") for name in late), late


def test_what_was_there_at_ready_and_the_calibration_store_are_not_late(caches, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (caches["TRITON_CACHE_DIR"] / "early.cubin").write_bytes(b"x")
    oracle.write_baseline(run, 0, caches)
    (tmp_path / "cache" / "calibration" / "measure-rank0.json").write_text("{}")
    (caches["TRITON_CACHE_DIR"] / "x.lock").write_text("")
    assert oracle.late_files(run) == []


def test_every_ranks_baseline_counts_so_a_later_rank_warmup_is_not_late(caches, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    oracle.write_baseline(run, 0, caches)
    (caches["TRITON_CACHE_DIR"] / "rank1-warmup.cubin").write_bytes(b"x")
    oracle.write_baseline(run, 1, caches)
    assert oracle.late_files(run) == []


def test_a_run_without_a_baseline_is_not_measured_not_clean(caches, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (caches["TRITON_CACHE_DIR"] / "late.cubin").write_bytes(b"x")
    assert oracle.late_files(run) is None
    oracle.write_baseline(run, 0, {})
    assert oracle.late_files(run) == []


def test_a_damaged_baseline_is_named_not_passed_over(caches, tmp_path):
    """Without one rank's baseline its files would count as late: the count refuses instead."""
    from launcher.contract.base import ContractError

    run = tmp_path / "run"
    run.mkdir()
    oracle.write_baseline(run, 0, caches)
    (run / oracle.BASELINE.format(rank=1)).write_text('{"dirs": {"HOME": "/"}, "files": []}')
    with pytest.raises(ContractError, match=r"cache-baseline-rank1\.json: malformed dirs"):
        oracle.late_files(run)


def test_the_poller_names_each_new_file_once(caches):
    seen: list[str] = []
    poller = oracle.Poller(caches, oracle.listing(caches), seen.append, period=3600)
    (caches["TORCHINDUCTOR_CACHE_DIR"] / "fx").mkdir()
    (caches["TORCHINDUCTOR_CACHE_DIR"] / "fx" / "graph.py").write_text("")
    assert poller.poll() == ["TORCHINDUCTOR_CACHE_DIR/fx/graph.py"]
    assert poller.poll() == [] and seen == ["TORCHINDUCTOR_CACHE_DIR/fx/graph.py"]


def test_an_inductor_kernel_compiled_after_sizing_reaches_the_watchdog():
    """Inductor compiles through ``triton.compile`` and calls Triton's post-compile hook alone
    (under TORCHINDUCTOR_RUN_JIT_POST_COMPILE_HOOK=1), with its own ``JITFunction``: no
    pre-hook event is pending, and it still counts, as ``inductor``."""
    slots = type("Slots", (), {"pre": None, "post": None})()
    watch = jit_watch.JitWatch((slots, "pre", "post"))
    seen: list = []
    watch.arm(seen.append)

    def triton_poi_fused_count_0():  # Inductor names its kernels so
        pass

    inductor_fn = type("JITFunction", (), {"fn": triton_poi_fused_count_0})()
    slots.post(key="k1", repr="src", fn=inductor_fn, compile=None, already_compiled=True)
    (event,) = seen
    assert event.kind == "inductor" and event.late
    assert event.kernel.endswith("triton_poi_fused_count_0")
    assert watch.late_count == 1


def test_the_planned_launch_asks_inductor_for_its_post_compile_hook():
    from launcher import pipeline
    from launcher.launch.vllm_args import build_command
    from tests.conftest import PROFILES

    planned = pipeline.make_plan(pipeline.load(str(PROFILES / "glm52.yaml")), calibrate=False)
    p, plan, d = planned.loaded.profile, planned.plan, planned.deployment
    launched = build_command(p, plan, plan_file="/run/plan.json", deployment=d)
    printed = build_command(p, plan, deployment=d)  # the dry run's line: no planned worker
    assert launched.env["TORCHINDUCTOR_RUN_JIT_POST_COMPILE_HOOK"] == "1"
    assert "TORCHINDUCTOR_RUN_JIT_POST_COMPILE_HOOK" not in printed.env


# --- which kernel a new file was built for (pure: the H100 canary boot's own names) ----------

H100_RUN = ROOT / "docs/gpu-runs/2026-12-06-h100-glm-users-and-canary-after-sizing"
H100_CANARY = H100_RUN / "glm-canary.measure-rank0.json"
"""A canary boot on the H100 (Triton 3.6): each canary's files, and one launcher module in the
warmup window (its new signature), as the cache oracle recorded them."""


def h100_canary_record() -> RankRecord:
    return RankRecord.model_validate(json.loads(H100_CANARY.read_text()))


def test_the_launcher_module_beside_the_only_kernel_compiled_in_its_window_is_that_kernels():
    rec = h100_canary_record()
    owner = oracle.built_for(rec.cache_files, rec.late_compiles)
    (launcher_so,) = [f.name for f in rec.cache_files if "__triton_launcher" in f.name]
    assert launcher_so.endswith("/__triton_launcher.cpython-312-x86_64-linux-gnu.so")
    assert owner[launcher_so] == rec.canary.kernels["warmup"]
    for f in rec.cache_files:  # the .cubin, .ptx, .json, __grp__ .json of each canary
        assert owner[f.name] == rec.canary.kernels[f.window], f.name


def test_a_launcher_module_whose_kernel_is_not_decidable_is_nobodys():
    rec = h100_canary_record()
    (launcher_so,) = [f.name for f in rec.cache_files if "__triton_launcher" in f.name]
    warmup = rec.canary.kernels["warmup"]
    other = census.entry("triton", "vllm.sampler._topk_kernel", "", window="warmup")
    unnamed = CacheFile(name="TRITON_CACHE_DIR/Q7/__grp__other.json", window="warmup")
    second = CacheFile(name=launcher_so.replace("V2XAB", "W3YBC"), window="warmup")
    undecidable = {
        "no compile in its window": ([], rec.cache_files),
        "two kernels compiled": ([*rec.late_compiles, other], rec.cache_files),
        "a file no kernel names beside it": (rec.late_compiles, [*rec.cache_files, unnamed]),
        "two launcher modules": (rec.late_compiles, [*rec.cache_files, second]),
        "its kernel compiled in another window": (
            [e for e in rec.late_compiles if e.kernel != warmup],
            rec.cache_files,
        ),
        "b12x's program is no Triton kernel": (
            [census.entry("b12x", "b12x.moe_plan", "", window="warmup")],
            [f for f in rec.cache_files if f.name == launcher_so],
        ),
    }
    for why, (compiles, files) in undecidable.items():
        assert launcher_so not in oracle.built_for(files, compiles), why
