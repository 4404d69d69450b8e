"""The artifact through the commands: ``bake`` after a boot, ``PROFILE --cache-from`` before
vLLM starts (keys, the plan made again on the records it brought, the run file the workers
read), ``report RUN_DIR`` and ``prewarm --list``; exit codes and one-line errors."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from launcher import pipeline
from launcher.artifact import keys as keys_mod
from launcher.artifact.keys import CudaTarget, read_cuda_target
from launcher.buildid import BUILD_ID_ENV, BUILD_INFO_ENV
from launcher.cli import cli
from launcher.contract import runfile
from launcher.contract.base import ContractError
from launcher.contract.record import RECORD_SCHEMA_V1
from launcher.launch import start as launch_mod
from launcher.launch.hardware import NoGpuInfo
from launcher.units import MiB
from launcher.vllm import can_serve
from launcher.vllm.lines import VLLM_LINES
from tests.conftest import MINIMAL, PROFILES
from tests.unit.artifact_caches import fill
from tests.unit.test_launch import rtx

CUDA = CudaTarget("12.0", "12.9")
GPUS = [rtx(i) for i in range(4)]


@pytest.fixture(autouse=True)
def node(monkeypatch, tmp_path):
    """One build id, the installed vLLM's line not probed (the dry run's own), and the cards'
    CUDA target read from no nvidia-smi."""
    monkeypatch.setenv(BUILD_ID_ENV, "build-a")
    monkeypatch.setenv(BUILD_INFO_ENV, str(tmp_path / "no-build.json"))
    monkeypatch.setattr(can_serve, "probe_installed", lambda: None)
    monkeypatch.setattr(keys_mod, "read_cuda_target", lambda: CUDA)


def planned(write, cache, *sets):
    path = write("p.yaml", MINIMAL)
    overrides = (f"runtime.cache_root={cache}", *sets)
    return pipeline.make_plan(pipeline.load(str(path), overrides))


def booted(cache, fingerprint, ranks=range(4)):
    """What a boot on the RTX cards left: JIT caches and a measured record of every rank."""
    fill(cache, fingerprint=fingerprint, ranks=())
    (cache / "calibration" / fingerprint / "qualified.json").unlink()  # not qualified yet
    for rank in ranks:
        record = {
            "schema": RECORD_SCHEMA_V1,  # as main's workers wrote it
            "fingerprint": fingerprint,
            "rank": rank,
            "when": "2026-12-01T10:00:00",
            "environment": {"gpu_kind": "rtx-pro-6000"},
            "measured": {"jit_headroom": 777 * MiB},
            "budget": {"bytes": 1, "basis": "measured"},
        }
        path = cache / "calibration" / fingerprint / f"rank{rank}.json"
        path.write_text(json.dumps(record))


def baked(write, tmp_path, name="art"):
    p = planned(write, tmp_path / "first-node")
    booted(tmp_path / "first-node", p.fingerprint)
    pipeline.bake(p, str(tmp_path / name), replace=False, gpus=GPUS, cuda=CUDA)
    return tmp_path / name, p.fingerprint


def restored(p, tmp_path, source, **kw):
    return pipeline.prepare(
        p,
        force=kw.pop("force", False),
        run_dir=str(tmp_path / "run"),
        check_vllm=False,
        gpus=GPUS,
        cache_from=str(source),
        cuda=CUDA,
    )


def test_a_fresh_node_restores_the_artifact_and_plans_with_its_records(write, tmp_path):
    art, fingerprint = baked(write, tmp_path)
    fresh = planned(write, tmp_path / "fresh-node")
    before = {c.name: c.source for c in fresh.plan.ranks[0].components}
    assert before["jit_headroom"] == "estimate"
    done = restored(fresh, tmp_path, art)
    after = {c.name: c for c in done.planned.plan.ranks[0].components}
    assert after["jit_headroom"].source == "measured" and after["jit_headroom"].bytes == 777 * MiB
    assert (tmp_path / "fresh-node" / "triton/AB12CD/_fwd_kernel.cubin").is_file()
    run = runfile.read_run_file(tmp_path / "run" / runfile.PLAN_FILE)
    assert run.artifact is not None and run.artifact.warm
    assert (run.artifact.state, run.artifact.fingerprint) == ("restored", fingerprint)
    assert run.artifact.keys.gpu_kind == "rtx-pro-6000"
    assert run.artifact.keys.compute_capability == "12.0"
    assert run.artifact.calibration_ranks == (0, 1, 2, 3)
    assert any(n.startswith("cache artifact") for n in run.notes)


FACTORS = "vllm/torch_compile_cache/9f1e/rank_0_0/backbone/cache_key_factors.json"


@pytest.mark.parametrize(("home", "differs"), [("/home/server", True), ("/home/baker", False)])
def test_a_node_under_another_home_is_told_before_vllm_starts_that_vllm_will_compile_again(
    write, tmp_path, monkeypatch, home, differs
):
    for name in ("VLLM_CONFIG_ROOT", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    p = planned(write, tmp_path / "first-node")
    booted(tmp_path / "first-node", p.fingerprint)
    factors = tmp_path / "first-node" / FACTORS
    factors.write_text(json.dumps({"env": {"VLLM_CONFIG_ROOT": "/home/baker/.config/vllm"}}))
    pipeline.bake(p, str(tmp_path / "art"), replace=False, gpus=GPUS, cuda=CUDA)
    monkeypatch.setenv("HOME", home)
    restored(planned(write, tmp_path / "fresh-node"), tmp_path, tmp_path / "art")
    run = runfile.read_run_file(tmp_path / "run" / runfile.PLAN_FILE)
    said = (
        "VLLM_CONFIG_ROOT is /home/server/.config/vllm here and was /home/baker/.config/vllm there"
    )
    assert (said in run.artifact.note) is differs
    assert any(said in n for n in run.notes) is differs
    assert run.artifact.warm  # the Triton keys and records still hold: only vLLM's graph compiles
    report = CliRunner().invoke(cli, ["report", str(tmp_path / "run")])
    assert report.exit_code == 0, report.output
    assert ("note: vLLM's torch.compile key will differ" in report.stdout) is differs


def test_an_artifact_from_another_build_is_refused_before_the_run_is_written(
    write, tmp_path, monkeypatch
):
    from launcher.artifact import ArtifactError

    art, _ = baked(write, tmp_path)
    monkeypatch.setenv(BUILD_ID_ENV, "build-b")
    with pytest.raises(ArtifactError, match="build_id: artifact build-a, here build-b"):
        restored(planned(write, tmp_path / "fresh-node"), tmp_path, art)
    assert not (tmp_path / "run").exists()
    assert not (tmp_path / "fresh-node" / "triton").exists()


def test_force_boots_cold_and_the_run_says_which_key_differed(write, tmp_path, monkeypatch):
    art, _ = baked(write, tmp_path)
    monkeypatch.setattr(keys_mod, "read_cuda_target", lambda: CudaTarget("12.0", "13.0"))
    done = pipeline.prepare(
        planned(write, tmp_path / "fresh-node"),
        force=True,
        run_dir=str(tmp_path / "run"),
        check_vllm=False,
        gpus=GPUS,
        cache_from=str(art),
    )
    run = runfile.read_run_file(tmp_path / "run" / runfile.PLAN_FILE)
    assert run.artifact.state == "ignored" and not run.artifact.warm
    assert "cuda_driver: artifact 12.9, here 13.0" in run.artifact.note
    components = {c.name: c.source for c in done.planned.plan.ranks[0].components}
    assert components["jit_headroom"] == "estimate"


def test_a_launch_without_cache_from_records_no_artifact(write, tmp_path):
    pipeline.prepare(
        planned(write, tmp_path / "c"),
        force=False,
        run_dir=str(tmp_path / "run"),
        check_vllm=False,
        gpus=GPUS,
    )
    data = json.loads((tmp_path / "run" / runfile.PLAN_FILE).read_text())
    assert data["artifact"] is None
    assert runfile.read_run_file(tmp_path / "run" / runfile.PLAN_FILE).artifact is None


def test_a_malformed_artifact_record_in_the_run_file_names_it(write, tmp_path):
    pipeline.prepare(
        planned(write, tmp_path / "c"),
        force=False,
        run_dir=str(tmp_path / "run"),
        check_vllm=False,
        gpus=GPUS,
    )
    plan = tmp_path / "run" / runfile.PLAN_FILE
    data = json.loads(plan.read_text())
    data["artifact"] = {"state": "restored"}
    plan.write_text(json.dumps(data))
    with pytest.raises(ContractError, match=r"malformed artifact\.artifact_id: Field required"):
        runfile.read_run_file(plan)


# --- the command line ----------------------------------------------------------------------


def test_cli_bake_prints_the_artifact_and_exits_0(write, tmp_path, monkeypatch):
    p = planned(write, tmp_path / "cache")
    booted(tmp_path / "cache", p.fingerprint)
    monkeypatch.setattr("launcher.launch.hardware.query_gpus", lambda: GPUS)
    args = ["bake", str(write("p.yaml", MINIMAL)), str(tmp_path / "a.tar")]
    out = CliRunner().invoke(cli, [*args, "--set", f"runtime.cache_root={tmp_path / 'cache'}"])
    assert out.exit_code == 0, out.output
    assert f"baked {tmp_path / 'a.tar'}: artifact " in out.stdout
    assert f"for plan {p.fingerprint} (rtx-pro-6000, compute 12.0)" in out.stdout
    assert "build build-a, CUDA 12.9" in out.stdout
    assert "calibration 4 files" in out.stdout and "triton 4 files" in out.stdout


def test_cli_bake_of_empty_caches_exits_1_with_the_fix(write, tmp_path, monkeypatch):
    monkeypatch.setattr("launcher.launch.hardware.query_gpus", lambda: GPUS)
    args = ["bake", str(write("p.yaml", MINIMAL)), str(tmp_path / "art")]
    out = CliRunner().invoke(cli, [*args, "--set", f"runtime.cache_root={tmp_path / 'empty'}"])
    assert out.exit_code == 1
    assert out.stderr.startswith("error: nothing to bake: the JIT caches under ")
    assert "boot the deployment on its cards first" in out.stderr
    assert "Traceback" not in out.output


def test_cli_bake_without_the_cards_exits_1_naming_nvidia_smi(write, tmp_path, monkeypatch):
    def no_driver():
        raise NoGpuInfo("nvidia-smi not found: no NVIDIA driver on this machine")

    monkeypatch.setattr("launcher.launch.hardware.query_gpus", no_driver)
    args = ["bake", str(write("p.yaml", MINIMAL)), str(tmp_path / "art")]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 1
    assert "error: nvidia-smi not found" in out.stderr and "bake on the node" in out.stderr
    assert "Traceback" not in out.output


def test_cli_bake_of_the_cpu_profile_needs_no_gpu(tmp_path):
    cache = tmp_path / "cache"
    sets = ["--set", f"runtime.cache_root={cache}"]
    p = pipeline.make_plan(pipeline.load(str(PROFILES / "tiny-cpu.yaml"), tuple(sets[1::2])))
    fill(cache, fingerprint=p.fingerprint, ranks=(0,))
    out = CliRunner().invoke(cli, ["bake", str(PROFILES / "tiny-cpu.yaml"), str(tmp_path / "a")])
    assert out.exit_code == 1, "another cache root: nothing there"
    out = CliRunner().invoke(
        cli, ["bake", str(PROFILES / "tiny-cpu.yaml"), str(tmp_path / "a"), *sets]
    )
    assert out.exit_code == 0, out.output
    assert f"for plan {p.fingerprint} (cpu)" in out.stdout


def test_cli_cache_from_with_a_dry_run_is_bad_usage(tmp_path):
    (tmp_path / "art").mkdir()
    for flag in ("--dry-run", "--json", "--print-command"):
        out = CliRunner().invoke(
            cli, [str(PROFILES / "glm52.yaml"), flag, "--cache-from", str(tmp_path / "art")]
        )
        assert out.exit_code == 2, flag
        assert "--cache-from restores an artifact before a launch" in out.stderr


def test_cli_cache_from_a_missing_path_is_bad_usage(tmp_path):
    out = CliRunner().invoke(cli, [str(PROFILES / "glm52.yaml"), "--cache-from", "/nope/art"])
    assert out.exit_code == 2 and "does not exist" in out.stderr


@pytest.fixture
def launchable(monkeypatch):
    """The launch's checks of vLLM passed (the fork's line installed), no vLLM started."""
    monkeypatch.setattr(launch_mod, "require_vllm", lambda: None)
    monkeypatch.setattr(launch_mod, "check_argv", lambda flags, keys: None)
    gg = VLLM_LINES["gilded-gnosis"]
    monkeypatch.setattr(launch_mod, "probe_installed", lambda: (gg, "test"))
    monkeypatch.setattr(launch_mod, "query_gpus", lambda: GPUS)
    monkeypatch.setattr(launch_mod.os, "execvpe", lambda *a: pytest.fail("vLLM started"))


def test_cli_a_mismatched_artifact_exits_1_before_vllm_starts(
    write, tmp_path, monkeypatch, launchable
):
    art, _ = baked(write, tmp_path)
    monkeypatch.setenv(BUILD_ID_ENV, "build-b")
    args = [str(write("p.yaml", MINIMAL)), "--cache-from", str(art)]
    args += ["--run-dir", str(tmp_path / "run"), "--set", f"runtime.cache_root={tmp_path / 'n'}"]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 1, out.output
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {art}: artifact ")
    assert "build_id: artifact build-a, here build-b" in lines[0]
    assert "--force" in lines[0] and "Traceback" not in out.output
    assert not (tmp_path / "run" / runfile.PLAN_FILE).exists()


def test_a_damaged_artifact_is_refused_naming_itself_before_vllm_or_the_cards_are_checked(
    write, tmp_path, monkeypatch
):
    """The user's input first: a manifest that is not JSON is named even on a machine where
    vLLM is missing and no card answers (as in CI's unit tier)."""
    from launcher.artifact import ArtifactError
    from launcher.errors import EnvironmentProblem

    def machine_checked(*a, **kw):
        raise EnvironmentProblem("vLLM is not installed in this environment")

    monkeypatch.setattr(launch_mod, "require_vllm", machine_checked)
    monkeypatch.setattr(launch_mod, "read_cards", machine_checked)
    art = tmp_path / "art"
    art.mkdir()
    (art / "manifest.json").write_text("password: hunter2\n")
    with pytest.raises(ArtifactError, match=str(art)):
        pipeline.prepare(
            planned(write, tmp_path / "n"), force=False, run_dir=None, cache_from=str(art)
        )


def test_cli_report_and_prewarm_list_say_which_artifact_was_restored(write, tmp_path):
    art, fingerprint = baked(write, tmp_path)
    restored(planned(write, tmp_path / "fresh-node"), tmp_path, art)
    out = CliRunner().invoke(cli, ["report", str(tmp_path / "run")])
    assert out.exit_code == 0, out.output
    assert "cache artifact " in out.stdout and f"from {art}: restored in " in out.stdout
    assert (
        f"plan {fingerprint}, rtx-pro-6000 (compute 12.0, CUDA 12.9), build build-a" in out.stdout
    )
    assert "calibration records: ranks 0, 1, 2, 3, 0 census entries" in out.stdout
    assert "covers this boot: yes (warm)" in out.stdout
    path = write("p.yaml", MINIMAL)
    listed = CliRunner().invoke(
        cli,
        ["prewarm", str(path), "--list", "--set", f"runtime.cache_root={tmp_path / 'fresh-node'}"],
    )
    assert listed.exit_code == 0, listed.output
    assert f"from {art}: restored in " in listed.stdout and f"plan {fingerprint}" in listed.stdout
    assert "triton 4 files" in listed.stdout


def test_read_cuda_target_reads_the_visible_cards(monkeypatch):
    from tests.unit import fake_pynvml

    caps = ((9, 0), (9, 0), (12, 0))
    cards = [fake_pynvml.Card("NVIDIA H200", 1024 * MiB, 0, cap) for cap in caps]
    fake_pynvml.install(monkeypatch, fake_pynvml.module(cards, cuda=12080))
    assert read_cuda_target({}) == CudaTarget("12.0, 9.0", "12.8")
    assert read_cuda_target({"CUDA_VISIBLE_DEVICES": "0,1"}) == CudaTarget("9.0", "12.8")
    fake_pynvml.install(monkeypatch, None)
    with pytest.raises(NoGpuInfo):
        read_cuda_target({})


def test_a_fresh_node_from_the_artifact_checks_nothing_its_baked_node_had_passed(
    write, tmp_path, monkeypatch, launchable
):
    """The baked node's launch remembered vLLM's verdicts on the plan and its command beside
    its records; the artifact carries them, so the fresh node imports no vLLM for either,
    although it plans from the baked node's calibrated records (other memory figures)."""
    from launcher.launch import verdicts
    from tests.unit.test_verdicts import fake_vllm

    root = fake_vllm(tmp_path / "site" / "vllm")
    monkeypatch.setattr(verdicts, "vllm_root", lambda: root)
    parsed, lines = [], []
    monkeypatch.setattr(launch_mod, "check_argv", lambda flags, keys: parsed.append(flags))
    monkeypatch.setattr(launch_mod, "installed_line_issues", lambda *a: lines.append(a) or [])
    first = planned(write, tmp_path / "first-node")
    pipeline.prepare(first, force=False, run_dir=str(tmp_path / "run-1"), gpus=GPUS)
    booted(tmp_path / "first-node", first.fingerprint)
    pipeline.bake(first, str(tmp_path / "art"), replace=False, gpus=GPUS, cuda=CUDA)
    pipeline.prepare(
        planned(write, tmp_path / "fresh-node"),
        force=False,
        run_dir=str(tmp_path / "run-2"),
        gpus=GPUS,
        cache_from=str(tmp_path / "art"),
        cuda=CUDA,
    )
    assert len(parsed) == 1 and len(lines) == 1
    assert (tmp_path / "fresh-node/calibration" / first.fingerprint / verdicts.FILE).is_file()
