"""The late-compile counters arm when the stage ends, tag each compile with its window, and say
whether they ran: the planned worker on a stand-in vLLM worker whose own steps compile, through
Triton's hook slots (a plain object stands for ``triton.knobs.runtime``)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from launcher import pipeline
from launcher.contract.record import RankRecord
from launcher.runtime import jit_watch
from launcher.runtime.worker.planned import PlannedMixin
from tests.conftest import PROFILES, ROOT
from tests.gpu import counters as tier


class Slots:
    pre = None
    post = None


def compile_now(slots: Slots, kernel: str) -> None:
    """What Triton does when a ``@triton.jit`` function meets a new specialization (``kernel``:
    its name, or ``module.name``)."""
    module, _, name = kernel.rpartition(".")
    fn = SimpleNamespace(module=module or "vllm.kernels", name=name)
    kw = dict(key=kernel, repr=kernel, fn=fn, compile={}, is_manual_warmup=False)
    for hook in (slots.pre, slots.post):
        if hook is not None:
            hook(**kw)


class CompilingVllmWorker:
    """vLLM's worker, as far as the mixin calls it; each step compiles what ``compiles``
    names for it, and writes its files into the compile cache (``files``: Triton's names for
    them; otherwise one ``<kernel>.cubin``)."""

    def __init__(self, available: int, slots: Slots, compiles: dict[str, str], cache: Path):
        self.available, self.slots, self.compiles, self.cache = available, slots, compiles, cache
        self.files: dict[str, list[str]] = {}
        self.rank = 0
        self.model_runner = None

    def _step(self, name: str) -> None:
        if name in self.compiles:
            compile_now(self.slots, self.compiles[name])
            self.write(self.files.get(name, [f"TRITON_CACHE_DIR/{self.compiles[name]}.cubin"]))

    def write(self, names: list[str]) -> None:
        for name in names:
            path = self.cache / name.removeprefix("TRITON_CACHE_DIR/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"x")

    def determine_available_memory(self) -> int:
        self._step("profile")
        return self.available

    def initialize_from_config(self, kv_cache_config) -> None:
        self._step("allocate")

    def compile_or_warm_up_model(self):
        self._step("warmup")
        return "warmed"


class Worker(PlannedMixin, CompilingVllmWorker):
    platform = "cpu"


@pytest.fixture
def slots(monkeypatch):
    """A fresh process-wide watchdog over stand-in hook slots, restored after the test."""
    held = Slots()
    monkeypatch.setattr(jit_watch, "watch", jit_watch.JitWatch(slots=(held, "pre", "post")))
    return held


def boot(tmp_path, monkeypatch, slots, compiles, *sets) -> tuple[Worker, Path]:
    cache = tmp_path / "cache" / "triton"
    cache.mkdir(parents=True)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache))
    all_sets = (f"runtime.cache_root={tmp_path / 'cache'}", "prewarm.providers=[]", *sets)
    planned = pipeline.make_plan(pipeline.load(str(PROFILES / "tiny-cpu.yaml"), all_sets))
    prepared = pipeline.prepare(
        planned, force=False, run_dir=str(tmp_path / "run"), check_vllm=False
    )
    for key in ("BLAUNCH_PLAN", "BLAUNCH_RUN_DIR", "BLAUNCH_FINGERPRINT"):
        monkeypatch.setenv(key, prepared.env[key])
    argv = prepared.argv
    worker = Worker(int(argv[argv.index("--kv-cache-memory-bytes") + 1]), slots, compiles, cache)
    return worker, tmp_path / "run" / "measure-rank0.json"


def start(worker: Worker) -> str:
    worker.determine_available_memory()
    worker.initialize_from_config(SimpleNamespace(num_blocks=10))
    return worker.compile_or_warm_up_model()


def record_at(path: Path) -> RankRecord:
    return RankRecord.model_validate(json.loads(path.read_text()))


def poll_now(worker: Worker) -> None:
    """The cache oracle's next tick, now (its poller looks every few seconds)."""
    worker._state.late._flush_files()


def test_a_compile_in_vllms_warmup_after_sizing_is_late_and_so_is_serving(
    tmp_path, monkeypatch, slots
):
    worker, path = boot(
        tmp_path, monkeypatch, slots, {"allocate": "k_alloc", "warmup": "k_capture"}
    )
    assert start(worker) == "warmed"
    compile_now(slots, "k_serving")
    record = record_at(path)
    windows = [(e.kernel, e.window) for e in record.late_compiles]
    assert windows == [
        ("vllm.kernels.k_alloc", "warmup"),
        ("vllm.kernels.k_capture", "warmup"),
        ("vllm.kernels.k_serving", "serving"),
    ]
    assert record.late_by("triton_hooks", "warmup") == [
        "vllm.kernels.k_alloc",
        "vllm.kernels.k_capture",
    ]
    assert record.late_by("triton_hooks", "serving") == ["vllm.kernels.k_serving"]


def test_a_compile_in_vllms_memory_profile_is_before_sizing_not_late(tmp_path, monkeypatch, slots):
    worker, path = boot(tmp_path, monkeypatch, slots, {"profile": "k_profile"})
    start(worker)
    record = record_at(path)
    assert record.late_compiles == [] and record.late_files == []
    assert [(e.kernel, e.window) for e in record.before_sizing] == [
        ("vllm.kernels.k_profile", "profile")
    ]
    assert [(f.window, f.name.endswith("k_profile.cubin")) for f in record.cache_files] == [
        ("profile", True)
    ]
    assert record.late_by("triton_hooks", "warmup") == []


def test_the_cache_oracle_tags_a_file_vllms_warmup_wrote_as_late_in_the_warmup_window(
    tmp_path, monkeypatch, slots
):
    worker, path = boot(tmp_path, monkeypatch, slots, {"warmup": "k_tuned"})
    start(worker)
    record = record_at(path)
    (late,) = record.late_by("cache_oracle", "warmup")
    assert late.startswith("TRITON_CACHE_DIR/") and late.endswith("k_tuned.cubin")
    assert record.late_files == [late]
    assert record.late_by("cache_oracle", "serving") == []


def test_each_counter_records_that_it_ran_and_over_which_windows(tmp_path, monkeypatch, slots):
    worker, path = boot(tmp_path, monkeypatch, slots, {})
    start(worker)
    counters = {c.name: c for c in record_at(path).counters}
    assert counters["triton_hooks"].armed
    assert counters["triton_hooks"].windows == ["profile", "warmup", "serving"]
    assert counters["cache_oracle"].armed
    assert counters["cache_oracle"].windows == ["profile", "warmup", "serving"]
    assert not counters["b12x_report"].armed and "did not run" in counters["b12x_report"].why
    # this stand-in vLLM has no JIT monitor to turn on
    assert not counters["vllm_monitor"].armed and counters["vllm_monitor"].why


def test_a_counter_that_could_not_arm_reads_not_measured_never_zero(tmp_path, monkeypatch, slots):
    monkeypatch.setattr(jit_watch, "arm", lambda *a, **k: False)  # Triton does not import
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    worker, path = boot(tmp_path, monkeypatch, slots, {"warmup": "k_unseen"})
    monkeypatch.delenv("TRITON_CACHE_DIR")  # and no compile cache is set
    start(worker)
    record = record_at(path)
    assert record.counter("triton_hooks").armed is False
    assert record.late_by("triton_hooks", "warmup") is None
    assert record.late_by("cache_oracle", "serving") is None
    assert record.late_by("vllm_monitor", "serving") is None


def test_a_record_from_before_the_counters_measured_nothing():
    old = RankRecord(fingerprint="fp", rank=0, when="2026-11-01")
    assert old.counters == []
    assert old.late_by("triton_hooks", "serving") is None


def test_strict_refuses_a_compile_in_serving_but_not_in_vllms_own_warmup(
    tmp_path, monkeypatch, slots
):
    worker, path = boot(
        tmp_path, monkeypatch, slots, {"warmup": "k_capture"}, "prewarm.strict_jit=true"
    )
    assert start(worker) == "warmed"  # vLLM's warmup compiled: recorded, not refused
    with pytest.raises(jit_watch.LateCompileError):
        compile_now(slots, "k_serving")
    kernels = [(e.kernel, e.window) for e in record_at(path).late_compiles]
    assert kernels == [("vllm.kernels.k_capture", "warmup"), ("vllm.kernels.k_serving", "serving")]


def test_a_canary_boot_without_a_cuda_device_says_why_no_canary_compiled(
    tmp_path, monkeypatch, slots
):
    worker, path = boot(tmp_path, monkeypatch, slots, {}, "prewarm.canary=true")
    start(worker)
    canary = record_at(path).canary
    assert canary is not None and canary.kernels == {}
    assert canary.skipped == "no CUDA device"


def test_a_canary_is_never_learned_by_the_next_boot():
    from launcher.contract import census

    canary = census.entry("triton", "b12x_canary_warmup_7.b12x_canary_warmup_7", "", 0, "{}")
    real = census.entry("triton", "vllm.k", "", 0, "{}")
    assert census.merge([canary, real]) == [real]


# --- which kernel each new cache file was built for, in the record ---------------------------

H100_RUN = ROOT / "docs/gpu-runs/2026-12-06-h100-glm-users-and-canary-after-sizing"
H100_CANARY = H100_RUN / "glm-canary.measure-rank0.json"
"""A canary boot on the H100 (Triton 3.6): the files each canary left, under Triton's names, and
one launcher module (``__triton_launcher...so``, named by no kernel) in the warmup window."""


def h100_canary_boot(tmp_path, monkeypatch, slots) -> tuple[Worker, Path, RankRecord]:
    """The stand-in vLLM's warmup compiles the H100's warmup canary and leaves its files; the
    serving canary compiles after, and its files are polled."""
    h100 = RankRecord.model_validate(json.loads(H100_CANARY.read_text()))
    kernels = h100.canary.kernels
    files = {w: [f.name for f in h100.cache_files if f.window == w] for w in kernels}
    worker, path = boot(tmp_path, monkeypatch, slots, {"warmup": kernels["warmup"]})
    worker.files = {"warmup": files["warmup"]}
    start(worker)
    compile_now(slots, kernels["serving"])
    worker.write(files["serving"])
    poll_now(worker)
    return worker, path, h100


def test_the_worker_records_the_kernel_each_canary_file_and_its_launcher_module_was_built_for(
    tmp_path, monkeypatch, slots
):
    _, path, h100 = h100_canary_boot(tmp_path, monkeypatch, slots)
    record = record_at(path)
    kernels = h100.canary.kernels
    assert sorted((f.name, f.window) for f in record.cache_files) == sorted(
        (f.name, f.window) for f in h100.cache_files
    )
    (launcher_so,) = [f for f in record.cache_files if "__triton_launcher" in f.name]
    assert launcher_so.kernel == kernels["warmup"]
    assert {f.name: f.kernel for f in record.cache_files} == {
        f.name: kernels[f.window] for f in h100.cache_files
    }
    # the tier reads that from the record: each canary file is the canary's, and none is late
    assert tier.late({0: record}) == []
    every = tier.late({0: record}, canary=True)
    assert len([f for f in every if "cache_oracle" in f]) == len(record.cache_files)


def test_a_launcher_module_is_nobodys_once_another_kernel_compiles_in_its_window(
    tmp_path, monkeypatch, slots
):
    """The answer is asked again at each compile: a second kernel after the module was
    recorded makes it undecidable, so the record says so and the tier counts it late."""
    worker, path, h100 = h100_canary_boot(tmp_path, monkeypatch, slots)
    launcher_so = "TRITON_CACHE_DIR/W3YBC/__triton_launcher.cpython-312-x86_64-linux-gnu.so"
    worker.write([launcher_so])
    poll_now(worker)
    assert {f.name: f.kernel for f in record_at(path).cache_files}[launcher_so] == (
        h100.canary.kernels["serving"]
    )
    compile_now(slots, "k_sampler")  # no file of its own yet: it still makes two kernels
    record = record_at(path)
    owner = {f.name: f.kernel for f in record.cache_files}
    assert owner[launcher_so] == ""
    assert all(owner[f.name] == h100.canary.kernels[f.window] for f in h100.cache_files)
    assert f"rank 0: cache_oracle serving: {launcher_so}" in tier.late({0: record})


def test_a_record_from_before_the_kernel_was_recorded_reads_every_file_as_nobodys():
    """The H100's record was written before ``CacheFile.kernel``: it still reads, and the tier
    counts its launcher module late, not the canary's."""
    old = RankRecord.model_validate(json.loads(H100_CANARY.read_text()))
    assert {f.kernel for f in old.cache_files} == {""}
    (launcher_so,) = [f.name for f in old.cache_files if "__triton_launcher" in f.name]
    assert tier.late({0: old}) == [f"rank 0: cache_oracle warmup: {launcher_so}"]
