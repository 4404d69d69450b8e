"""The launch path up to the exec, on this machine's own parts: failure modes first."""

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from launcher import pipeline
from launcher.cli import cli
from launcher.contract.record import RECORD_SCHEMA
from launcher.errors import DoesNotFit, EnvironmentProblem, ProfileError
from launcher.launch import preflight
from launcher.launch import start as launch_mod
from launcher.launch.hardware import Gpu, query_gpus
from launcher.units import GiB, MiB
from tests.conftest import MINIMAL, PROFILES

BACKEND_LINE = next(
    i for i, line in enumerate(MINIMAL.splitlines(), 1) if "attention_backend" in line
)
"""MINIMAL's line of ``vllm.attention_backend``."""


def rtx(index, used=300 * MiB, name="NVIDIA RTX PRO 6000 Blackwell Server Edition"):
    total = int(95.59 * GiB)
    return Gpu(index, name, total, used, total - used)


def planned(write, tmp_path, *overrides):
    sets = [f"runtime.cache_root={tmp_path / 'cache'}", *overrides]
    return pipeline.make_plan(pipeline.load(str(write("p.yaml", MINIMAL)), tuple(sets)))


def prepare(p, tmp_path, gpus, **kw):
    return pipeline.prepare(
        p,
        force=kw.pop("force", False),
        run_dir=str(tmp_path / "run"),
        check_vllm=False,
        gpus=gpus,
        **kw,
    )


def test_the_cards_are_read_through_nvml(monkeypatch):
    from tests.unit import fake_pynvml

    h200 = [fake_pynvml.Card("NVIDIA H200", 143771 * MiB, used) for used in (0, 512 * MiB)]
    fake_pynvml.install(monkeypatch, fake_pynvml.module(h200))
    gpus = query_gpus()
    assert [g.kind for g in gpus] == ["h200", "h200"]
    assert gpus[1].used == 512 * MiB


def test_no_gpu(write, tmp_path):
    with pytest.raises(EnvironmentProblem, match=r"no GPU visible.*--dry-run"):
        prepare(planned(write, tmp_path), tmp_path, [])


def test_fewer_gpus_than_the_profile(write, tmp_path):
    with pytest.raises(EnvironmentProblem, match=r"2 GPU\(s\) visible, the profile needs 4"):
        prepare(planned(write, tmp_path), tmp_path, [rtx(0), rtx(1)])


def test_another_gpu_kind_needs_force(write, tmp_path):
    h200 = [Gpu(i, "NVIDIA H200", 140 * GiB, 0, 140 * GiB) for i in range(4)]
    with pytest.raises(EnvironmentProblem, match=r"hardware.gpu: rtx-pro-6000; fix .* --force"):
        prepare(planned(write, tmp_path), tmp_path, h200)
    done = prepare(planned(write, tmp_path), tmp_path, h200, force=True)
    assert done.planned.plan.ranks[0].total_bytes == 140 * GiB
    assert done.planned.plan.total_source == "measured"


def test_a_forced_launch_on_another_gpu_kind_neither_reads_nor_writes_its_calibration(
    write, tmp_path
):
    """Records under the profile were measured on its own cards; an H200 forced to run an
    RTX profile must not plan with them, and its workers must not record as RTX cards."""
    from launcher.plan.calibration import save_record
    from launcher.runtime.worker import recording
    from launcher.runtime.worker.runplan import RunPlan

    p = planned(write, tmp_path)
    record = {
        "fingerprint": p.fingerprint,
        "when": "2026-12-01T10:00:00",
        "environment": {"gpu_kind": "rtx-pro-6000"},
        "measured": {"jit_headroom": MiB},
    }
    for rank in range(4):
        save_record({**record, "rank": rank}, None, p.loaded.profile)
    p = planned(write, tmp_path)
    assert p.plan.ranks[0].component("jit_headroom").source == "measured"
    h200 = [Gpu(i, "NVIDIA H200", 140 * GiB, 0, 140 * GiB) for i in range(4)]
    done = prepare(p, tmp_path, h200, force=True)
    assert all(c.source != "measured" for r in done.planned.plan.ranks for c in r.components)
    run = RunPlan.from_env({"BLAUNCH_PLAN": done.env["BLAUNCH_PLAN"]})
    assert run.file.cards.gpu_kind not in (None, "rtx-pro-6000")
    assert recording.environment(run, "cpu", None).gpu_kind == run.file.cards.gpu_kind
    forced = {**record, "environment": {"gpu_kind": run.file.cards.gpu_kind}}
    for rank in range(4):  # the forced boot's workers save their records
        paths = save_record({**forced, "rank": rank}, done.run_dir, p.loaded.profile)
        assert paths == [done.run_dir / f"measure-rank{rank}.json"]  # not the store
    on_rtx = prepare(planned(write, tmp_path), tmp_path, [rtx(i) for i in range(4)])
    assert on_rtx.planned.plan.ranks[0].component("jit_headroom").source == "measured"


def test_memory_held_by_others_shrinks_the_plan(write, tmp_path, capsys):
    base = prepare(planned(write, tmp_path), tmp_path, [rtx(i) for i in range(4)])
    busy = [rtx(0), rtx(1, used=1 * GiB), rtx(2), rtx(3)]
    done = prepare(planned(write, tmp_path), tmp_path, busy)
    other = done.planned.plan.ranks[0].component("other_processes")
    assert other.bytes == 1 * GiB  # what is not free on the tightest card, no guessed idle use
    assert done.planned.plan.kv.tokens < base.planned.plan.kv.tokens
    assert "GPU 1: " in capsys.readouterr().err


def test_memory_the_cards_hold_is_labelled_measured_and_the_profiles_figure_stays_its_own(
    write, tmp_path
):
    """The launch reads what is not free from NVML: the plan says so, not ``profile``; the
    profile in the run file keeps what the user wrote; a larger profile figure still wins."""
    busy = [rtx(0), rtx(1, used=1 * GiB), rtx(2), rtx(3)]
    done = prepare(planned(write, tmp_path), tmp_path, busy)
    other = done.planned.plan.ranks[0].component("other_processes")
    assert (other.bytes, other.source) == (1 * GiB, "measured")
    assert "NVML" in other.detail
    assert done.planned.loaded.profile.hardware.reserved_by_others == 0
    more = planned(
        write, tmp_path, "hardware.reserved_by_others=1536MiB", "serving.max_model_len=65536"
    )
    other = prepare(more, tmp_path, busy).planned.plan.ranks[0].component("other_processes")
    assert (other.bytes, other.source) == (1536 * MiB, "profile")


def test_a_shared_card_starts_with_a_utilization_its_free_memory_meets(write, tmp_path):
    """The H200 case: 119 GiB held by another process; vLLM refused 0.142 x 139.8 GiB
    against 19.49 GiB free. The utilization now comes from the free memory per card."""
    total = 143771 * MiB
    free = int(19.49 * GiB)
    h200 = [Gpu(0, "NVIDIA H200", total, total - free, free)]
    p = planned(
        write,
        tmp_path,
        "hardware.gpu=h200",
        "hardware.count=1",
        "parallel.tensor=1",
        "parallel.decode_context=1",
        "model.weights_per_rank=1GiB",
        "serving.max_model_len=4096",
    )
    done = prepare(p, tmp_path, h200)
    argv = done.argv
    util = float(argv[argv.index("--gpu-memory-utilization") + 1])
    context = done.planned.plan.ranks[0].component("cuda_context").bytes
    assert util * total <= free - context  # vLLM's check passes with the context built
    assert done.planned.plan.ranks[0].kv_bytes < free


def test_a_plan_that_does_not_fit_is_refused_before_anything_starts(write, tmp_path):
    p = planned(write, tmp_path, "serving.max_model_len=1048576")
    with pytest.raises(DoesNotFit, match=r"Would fit with: --set serving.max_model_len="):
        prepare(p, tmp_path, [rtx(i) for i in range(4)])
    assert not (tmp_path / "run").exists()


def test_prepare_writes_the_run_and_the_worker_env(write, tmp_path):
    done = prepare(planned(write, tmp_path), tmp_path, [rtx(i) for i in range(4)])
    plan_file = Path(done.env["BLAUNCH_PLAN"])
    data = json.loads(plan_file.read_text())
    assert data["profile_data"]["serving"]["max_model_len"] == 131072
    assert done.env["BLAUNCH_RUN_DIR"] == str(tmp_path / "run")
    command_txt = (tmp_path / "run" / "command.txt").read_text()
    assert command_txt.startswith("env ") and " vllm serve " in command_txt
    assert f"BLAUNCH_PLAN={plan_file}" in command_txt
    assert done.argv[:2] == ["vllm", "serve"]
    assert not [
        k
        for k in done.env
        if k.startswith("BLAUNCH") is False
        and k.startswith(("B12X_", "CUTE_", "CUTLASS_"))
        and k not in os.environ
        and k not in ("B12X_COMPILE_CACHE_DIR", "CUTE_DSL_CACHE_DIR", "CUTE_DSL_ARCH")
    ]
    assert all(Path(done.env[v]).is_dir() for v in ("TRITON_CACHE_DIR", "B12X_COMPILE_CACHE_DIR"))


def test_unwritable_run_dir(write, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(EnvironmentProblem, match=r"run directory .* is not writable"):
        pipeline.prepare(
            planned(write, tmp_path),
            force=False,
            run_dir=str(blocker / "run"),
            check_vllm=False,
            gpus=[rtx(i) for i in range(4)],
        )


def test_two_launches_in_one_second_get_a_run_directory_each(write, tmp_path, monkeypatch):
    monkeypatch.setattr(launch_mod.time, "strftime", lambda fmt: "20261201-100000")
    p = planned(write, tmp_path, f"runtime.run_dir={tmp_path / 'runs'}")
    first, _ = launch_mod.write_run(p, None)
    second, _ = launch_mod.write_run(p, None)
    assert first != second and first.parent == second.parent == tmp_path / "runs"
    assert (first / "plan.json").exists() and (second / "plan.json").exists()


def test_a_reused_run_directory_loses_the_earlier_launchs_records(write, tmp_path):
    """A rank that dies before writing its record must not leave the earlier launch's
    record standing in for it (report and qualify read every measure-rank*.json)."""
    run = tmp_path / "run"
    run.mkdir()
    record = json.dumps({"schema": RECORD_SCHEMA, "rank": 3, "measured": {}})
    (run / "measure-rank3.json").write_text(record)
    (run / "vllm.log").write_text("kept")
    (run / "measure-rank4.json").write_text(record)  # another node's rank, same directory
    prepare(planned(write, tmp_path), tmp_path, [rtx(i) for i in range(4)])
    assert not (run / "measure-rank3.json").exists() and (run / "vllm.log").exists()
    assert (run / "measure-rank4.json").exists()


@pytest.mark.parametrize("name", ["plan.json", "command.txt", "measure-rank2.json"])
def test_a_run_directory_file_no_launch_wrote_is_neither_written_over_nor_deleted(
    write, tmp_path, name
):
    """Issue 41: the run directory writes and deletes only files a launch made; --run-dir
    pointed at a directory that has its own plan.json (or notes) costs nobody a file."""
    run = tmp_path / "run"
    run.mkdir()
    (run / name).write_text("my own notes\n")
    with pytest.raises(EnvironmentProblem, match=f"holds {name} not written by b12x-launch"):
        prepare(planned(write, tmp_path), tmp_path, [rtx(i) for i in range(4)])
    assert (run / name).read_text() == "my own notes\n"


def test_a_profile_name_with_a_slash_makes_one_run_directory(write, tmp_path):
    from launcher.launch.start import _make_run_dir

    p = planned(write, tmp_path, f"runtime.run_dir={tmp_path / 'runs'}", "name=team/glm")
    run = _make_run_dir(p, None)
    assert run.parent == tmp_path / "runs" and run.name.endswith("-team_glm")


def test_the_writable_probe_does_not_take_a_name_another_launch_uses(write, tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / ".writable").mkdir()  # another launch's probe, mid-check
    prepare(planned(write, tmp_path), tmp_path, [rtx(i) for i in range(4)])
    assert (tmp_path / "run" / ".writable").is_dir()


def test_unwritable_cache_dir(write, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    p = planned(write, tmp_path, f"runtime.cache_root={blocker / 'cache'}")
    with pytest.raises(EnvironmentProblem, match=r"cache directory .* runtime.cache_root"):
        prepare(p, tmp_path, [rtx(i) for i in range(4)])


def test_vllm_not_installed(monkeypatch):
    monkeypatch.setattr(preflight.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(EnvironmentProblem, match=r"vLLM is not installed.*--dry-run works"):
        preflight.require_vllm()


def test_cli_launch_without_vllm_exits_1(monkeypatch, tmp_path):
    monkeypatch.setattr(preflight.importlib.util, "find_spec", lambda name: None)
    out = CliRunner().invoke(
        cli,
        [
            str(PROFILES / "tiny-cpu.yaml"),
            "--run-dir",
            str(tmp_path),
            "--set",
            f"runtime.cache_root={tmp_path}",
        ],
    )
    assert out.exit_code == 1 and "vLLM is not installed" in out.output
    assert "Traceback" not in out.output


def test_cli_launch_without_a_gpu_exits_1(monkeypatch, tmp_path):
    monkeypatch.setattr(
        launch_mod,
        "query_gpus",
        lambda: (_ for _ in ()).throw(
            launch_mod.NoGpuInfo("nvidia-smi not found: no NVIDIA driver on this machine")
        ),
    )
    out = CliRunner().invoke(cli, [str(PROFILES / "glm52.yaml"), "--run-dir", str(tmp_path)])
    assert out.exit_code == 1
    assert "no NVIDIA driver" in out.output and "needs 4x rtx-pro-6000" in out.output


def test_a_flag_vllm_rejects_names_the_profile_key(write, tmp_path):
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--model")
    parser.add_argument("--kv-cache-dtype", choices=["auto", "fp8"])
    with pytest.raises(ProfileError) as exc:
        preflight.check_argv(
            ["--model", "x", "--kv-cache-dtype", "nvfp4"],
            {"--kv-cache-dtype": "serving.kv_cache_dtype"},
            parser,
        )
    (issue,) = exc.value.issues
    assert issue.key == "serving.kv_cache_dtype" and "invalid choice" in issue.message


def test_exec_replaces_the_process_with_vllm(write, tmp_path, monkeypatch):
    seen = {}

    def fake_exec(file, argv, env):
        seen.update(file=file, argv=argv, env=env)
        raise SystemExit(0)

    monkeypatch.setattr(launch_mod.os, "execvpe", fake_exec)
    monkeypatch.setattr(launch_mod, "require_vllm", lambda: None)
    monkeypatch.setattr(launch_mod, "check_argv", lambda flags, keys: None)
    monkeypatch.setattr(launch_mod, "probe_installed", probed("gilded-gnosis"))
    p = planned(write, tmp_path)
    monkeypatch.setattr(launch_mod, "query_gpus", lambda: [rtx(i) for i in range(4)])
    with pytest.raises(SystemExit):
        pipeline.launch(p, force=False, run_dir=str(tmp_path / "run"))
    assert seen["file"] == "vllm" and "--worker-cls" in seen["argv"]
    assert seen["env"]["BLAUNCH_FINGERPRINT"] == p.fingerprint


def test_the_launch_records_its_phases_before_the_exec(write, tmp_path, monkeypatch):
    from launcher.contract.phases import read_phases

    seen = {}

    def fake_exec(file, argv, env):
        seen["phases"] = read_phases(tmp_path / "run" / "phases-launcher.json")
        raise SystemExit(0)

    monkeypatch.setattr(launch_mod.os, "execvpe", fake_exec)
    monkeypatch.setattr(launch_mod, "require_vllm", lambda: None)
    monkeypatch.setattr(launch_mod, "check_argv", lambda flags, keys: None)
    monkeypatch.setattr(launch_mod, "probe_installed", probed("gilded-gnosis"))
    monkeypatch.setattr(launch_mod, "query_gpus", lambda: [rtx(i) for i in range(4)])
    p = planned(write, tmp_path)
    with pytest.raises(SystemExit):
        pipeline.launch(p, force=False, run_dir=str(tmp_path / "run"), started=1.0)
    f = seen["phases"]
    assert [ph.name for ph in f.phases] == ["plan", "preflight", "checks", "exec"]
    assert all(ph.ended is not None for ph in f.phases) and f.phases[0].started == 1.0
    assert f.fingerprint == p.fingerprint and f.boot_kind == "cold"
    assert f.ready_url.endswith(f":{p.loaded.profile.serving.port}/health")
    assert f.boots_file.endswith(f"calibration/{p.fingerprint}/boots.json")


def test_no_secret_reaches_the_run_directory(write, tmp_path):
    # --api-key in extra_args is refused (settings_checks): the key goes by VLLM_API_KEY
    text = MINIMAL + "env:\n  HF_TOKEN: hf_supersecret\n  VLLM_API_KEY: sk-topsecret\n"
    sets = (f"runtime.cache_root={tmp_path / 'cache'}",)
    p = pipeline.make_plan(pipeline.load(str(write("s.yaml", text)), sets))
    done = prepare(p, tmp_path, [rtx(i) for i in range(4)])
    for path in (tmp_path / "run").iterdir():
        body = path.read_text()
        assert "hf_supersecret" not in body and "sk-topsecret" not in body, path
    assert done.env["HF_TOKEN"] == "hf_supersecret"  # vLLM itself still gets it


def test_the_launch_replans_without_reading_the_facts_again(write, tmp_path, monkeypatch):
    """The readers under the facts (config/catalog and checkpoint headers) are counted: a
    first plan reads them, the launch's re-plan against the cards does not."""
    from launcher.plan import inputs as facts_mod

    reads = {"facts": 0, "tensors": 0}
    for name, key in (("_facts", "facts"), ("_local_tensors", "tensors")):
        real = getattr(facts_mod, name)

        def counted(*a, real=real, key=key, **k):
            reads[key] += 1
            return real(*a, **k)

        monkeypatch.setattr(facts_mod, name, counted)
    p = planned(write, tmp_path)
    assert reads["facts"] >= 1  # the counters sit where the facts are read
    reads.update(facts=0, tensors=0)
    done = prepare(p, tmp_path, [rtx(i) for i in range(4)])
    assert reads == {"facts": 0, "tensors": 0}
    assert done.planned.inputs.gpu_memory == rtx(0).total
    assert done.planned.fingerprint == p.fingerprint


# --- the installed vLLM's line -----------------------------------------------------------


def probed(name):
    from launcher.vllm.lines import VLLM_LINES

    return lambda: (VLLM_LINES[name], f"test probe: {name}")


@pytest.fixture
def vllm_checks(monkeypatch):
    """vLLM 'installed' and its argument parser content; the line is the test's to probe."""
    monkeypatch.setattr(launch_mod, "require_vllm", lambda: None)
    monkeypatch.setattr(launch_mod, "check_argv", lambda flags, keys: None)
    return lambda name: monkeypatch.setattr(launch_mod, "probe_installed", probed(name))


def prepare_checked(p, tmp_path):
    gpus = [rtx(i) for i in range(4)]
    return pipeline.prepare(p, force=False, run_dir=str(tmp_path / "run"), gpus=gpus)


def test_a_profile_the_installed_vllm_cannot_serve_is_refused_before_it_starts(
    write, tmp_path, vllm_checks
):
    vllm_checks("upstream")
    with pytest.raises(ProfileError) as exc:
        prepare_checked(planned(write, tmp_path), tmp_path)
    by_key = {i.key: i for i in exc.value.issues}
    assert set(by_key) == {"vllm.attention_backend", "model.quantization"}
    backend = by_key["vllm.attention_backend"]
    assert backend.line == BACKEND_LINE and backend.file.endswith("p.yaml")
    assert "B12X_MLA_SPARSE is not a sparse-MLA backend of this vLLM" in backend.message
    assert "set vllm.attention_backend to FLASHMLA_SPARSE" in backend.message
    assert "gilded-gnosis" in backend.message  # the line that has it
    assert "exl3 checkpoints are not loaded" in by_key["model.quantization"].message
    assert not (tmp_path / "run").exists()


def test_a_profile_naming_another_line_is_refused(write, tmp_path, vllm_checks):
    vllm_checks("gilded-gnosis")
    p = planned(write, tmp_path, "vllm.runtime=b12x-fork", "vllm.attention_backend=B12X")
    with pytest.raises(ProfileError) as exc:
        prepare_checked(p, tmp_path)
    keys = [i.key for i in exc.value.issues]
    assert keys == ["vllm.runtime", "vllm.attention_backend"]
    assert "set vllm.runtime: gilded-gnosis (or auto)" in exc.value.issues[0].message


def test_auto_plans_for_the_line_that_is_installed(write, tmp_path, vllm_checks):
    vllm_checks("gilded-gnosis")
    p = planned(write, tmp_path, "vllm.attention_backend=FLASHMLA_SPARSE", "vllm.release=0.33")
    done = prepare_checked(p, tmp_path)
    assert done.planned.loaded.profile.vllm.runtime == "gilded-gnosis"
    plan = json.loads((tmp_path / "run" / "plan.json").read_text())
    assert plan["profile_data"]["vllm"]["runtime"] == "gilded-gnosis"
    assert any("planned for the installed vLLM, gilded-gnosis" in n for n in plan["notes"])


def test_the_installed_line_that_serves_the_profile_passes(write, tmp_path, vllm_checks):
    vllm_checks("gilded-gnosis")
    p = planned(write, tmp_path)
    done = prepare_checked(p, tmp_path)
    assert done.planned.fingerprint == p.fingerprint


def test_cli_launch_on_the_wrong_vllm_exits_1_naming_the_key(
    write, tmp_path, vllm_checks, monkeypatch
):
    vllm_checks("upstream")
    monkeypatch.setattr(launch_mod, "query_gpus", lambda: [rtx(i) for i in range(4)])
    monkeypatch.setattr(launch_mod.os, "execvpe", lambda *a: pytest.fail("vLLM started"))
    path = write("p.yaml", MINIMAL)
    args = [
        str(path),
        "--run-dir",
        str(tmp_path / "run"),
        "--set",
        f"runtime.cache_root={tmp_path}",
    ]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 1, out.output
    assert (
        f"error: {path}:{BACKEND_LINE} vllm.attention_backend: B12X_MLA_SPARSE is not" in out.stderr
    )
    assert f"error: {path}:4 model.quantization: exl3" in out.stderr
    assert "Traceback" not in out.output


def fake_vllm(tmp_path, monkeypatch, *files):
    from importlib.machinery import ModuleSpec

    from launcher.vllm import can_serve

    root = tmp_path / "vllm"
    for f in files:
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).write_text("")
    spec = ModuleSpec("vllm", None, is_package=True)
    spec.submodule_search_locations = [str(root)]
    monkeypatch.setattr(can_serve.importlib.util, "find_spec", lambda name: spec)
    return can_serve.probe_installed()


def test_the_probe_tells_the_lines_apart(tmp_path, monkeypatch):
    # upstream 0.32 ships vllm/utils/b12x.py (the paged B12X backend's accessors): not a fork
    runtime, how = fake_vllm(tmp_path / "a", monkeypatch, "utils/b12x.py", "v1/__init__.py")
    assert runtime.name == "upstream", how
    runtime, _ = fake_vllm(
        tmp_path / "b", monkeypatch, "utils/b12x.py", "v1/worker/b12x_startup.py"
    )
    assert runtime.name == "b12x-fork"
    gg = "v1/attention/backends/mla/b12x_mla_sparse.py"
    assert fake_vllm(tmp_path / "c", monkeypatch, gg)[0].name == "gilded-gnosis"
    # stock 0.26 ships the sparse-MLA Triton warmup (the H200 kit): still upstream
    stock = "model_executor/warmup/sparse_mla_triton_warmup.py"
    assert fake_vllm(tmp_path / "d", monkeypatch, stock)[0].name == "upstream"


def test_a_launch_on_another_line_reads_that_lines_calibration(write, tmp_path, vllm_checks):
    """The records a boot writes are kept under the launched plan's fingerprint, which names
    the installed line: the next launch must read them there (on the H200, a stock vLLM
    taken for a fork line made every boot start uncalibrated)."""
    from launcher.contract.names import MEASURABLE
    from launcher.plan.calibration import save_record, stack_versions

    vllm_checks("gilded-gnosis")
    p = planned(write, tmp_path, "vllm.attention_backend=FLASHMLA_SPARSE", "vllm.release=0.33")
    first = prepare_checked(p, tmp_path)
    assert first.planned.fingerprint != p.fingerprint
    comps = first.planned.plan.ranks[0].components
    record = {
        "fingerprint": first.planned.fingerprint,
        "rank": 0,
        "when": "2026-12-01T05:10:51",
        "environment": {"gpu_kind": "rtx-pro-6000", **stack_versions()},
        "measured": {c.name: c.bytes + 1 for c in comps if c.name in MEASURABLE},
    }
    for rank in range(4):
        save_record({**record, "rank": rank}, None, first.planned.loaded.profile)
    again = prepare_checked(p, tmp_path / "again")
    sources = {c.name: c.source for c in again.planned.plan.ranks[0].components}
    assert {sources[n] for n in record["measured"]} == {"measured"}, sources


@pytest.mark.parametrize(
    ("version", "supported"),
    [("0.26.0", True), ("0.32.0", True), ("0.33.1", True), ("0.33.0rc1.dev5+g1a2b", True),
     ("0.25.2", False), ("0.34.0", False), ("1.0.0", False)],
)  # fmt: skip
def test_the_supported_vllm_range_has_tested_ends(version, supported):
    from launcher.launch.preflight import vllm_outside_support

    assert (vllm_outside_support(version) is None) is supported


def test_a_vllm_outside_the_range_is_refused_with_the_fix(monkeypatch):
    from launcher.errors import EnvironmentProblem
    from launcher.launch import preflight

    monkeypatch.setattr(preflight.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(preflight, "installed_vllm_version", lambda: "0.35.0")
    monkeypatch.delenv(preflight.ALLOW_UNTESTED, raising=False)
    with pytest.raises(EnvironmentProblem, match=r"install vllm>=0.26,<0.34, or set"):
        preflight.require_vllm()
    monkeypatch.setenv(preflight.ALLOW_UNTESTED, "1")
    preflight.require_vllm()  # the operator's call
