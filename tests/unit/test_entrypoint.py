"""The container entry point, run outside a container: arguments, the cache tree, the exec."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from launcher import buildid, entrypoint, registryfile
from launcher.contract.caches import CACHE_DIRS
from launcher.owned import write as owned_write  # where the writable probe is made
from launcher.vllm import can_serve
from launcher.vllm import registry_record as vllm_registry
from launcher.vllm.can_serve import Registry
from tests.conftest import PROFILES, ROOT, need


class Exec(Exception):
    """Raised by the fake exec so nothing after it runs, as with the real one."""


@pytest.fixture
def execs(monkeypatch):
    """Capture ``os.execvp`` instead of replacing the test process."""
    calls: list[tuple[str, list[str]]] = []

    def fake(file, args):
        calls.append((file, list(args)))
        raise Exec

    monkeypatch.setattr(entrypoint.os, "execvp", fake)
    return calls


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        entrypoint.MOUNT_ENV: str(tmp_path / "cache"),
        entrypoint.BUILD_ID_ENV: "build-a",
        entrypoint.PROFILE_DIRS_ENV: str(PROFILES),
    }


def run(argv, env, execs) -> list[str]:
    with pytest.raises(Exec):
        entrypoint.main(argv, env)
    file, args = execs[-1]
    assert file == "b12x-launch" and args[0] == "b12x-launch"
    return args[1:]


def sets(args: list[str]) -> dict[str, str]:
    """The ``--set KEY=VALUE`` options, last one winning (as the loader applies them)."""
    out = {}
    for i, arg in enumerate(args):
        if arg == "--set":
            key, _, value = args[i + 1].partition("=")
            out[key] = value
    return out


# --- arguments -----------------------------------------------------------------------------


def test_profile_launch_gets_cache_root_and_run_dir(env, execs, tmp_path):
    args = run([str(PROFILES / "glm52.yaml")], env, execs)
    assert args[0] == "launch"
    assert args[-1] == str(PROFILES / "glm52.yaml")
    assert sets(args) == {
        "runtime.cache_root": str(tmp_path / "cache" / "build-a"),
        "runtime.run_dir": str(tmp_path / "cache" / "runs"),
    }


def test_dry_run_and_json_pass_through(env, execs):
    args = run(["glm52.yaml", "--dry-run", "--json"], env, execs)
    assert args[:1] == ["launch"] and "--dry-run" in args and "--json" in args
    assert "runtime.cache_root" in sets(args)


def test_user_set_comes_after_ours_so_it_wins(env, execs):
    args = run(["glm52.yaml", "--set", "runtime.cache_root=/elsewhere"], env, execs)
    assert sets(args)["runtime.cache_root"] == "/elsewhere"
    assert args.index("runtime.cache_root=/elsewhere") > args.index("--set")


def test_validate_and_schema_pass_through_without_cache(tmp_path, execs):
    env = {
        entrypoint.MOUNT_ENV: str(tmp_path / "no" / "cache"),
        entrypoint.BUILD_ID_ENV: "b",
        entrypoint.PROFILE_DIRS_ENV: str(PROFILES),
    }
    assert run(["schema"], env, execs) == ["schema"]
    args = run(["validate", "glm52", "kimi-k2.yaml"], env, execs)
    assert args == ["validate", str(PROFILES / "glm52.yaml"), str(PROFILES / "kimi-k2.yaml")]
    assert not (tmp_path / "no").exists(), "validate and schema touch no cache"


@pytest.mark.parametrize("argv", [[], ["--help"], ["-h"], ["--version"]])
def test_help_and_version_pass_through(argv, env, execs):
    assert run(argv, env, execs) == argv


def test_debug_stays_in_front(env, execs):
    args = run(["--debug", "glm52.yaml", "--dry-run"], env, execs)
    assert args[:2] == ["--debug", "launch"]
    assert "runtime.cache_root" in sets(args)


def test_explicit_launch_subcommand(env, execs):
    args = run(["launch", "glm52.yaml", "--run-dir", "glm52"], env, execs)
    # The value of --run-dir is not a profile, even though a profile has that name.
    assert args[args.index("--run-dir") + 1] == "glm52"
    assert str(PROFILES / "glm52.yaml") in args


def test_profile_name_resolution(tmp_path, monkeypatch):
    shipped = tmp_path / "shipped"
    mine = tmp_path / "mine"
    for d in (shipped, mine):
        d.mkdir()
        (d / "a.yaml").write_text("x: 1\n")
    (shipped / "only-shipped.yaml").write_text("x: 1\n")
    here = tmp_path / "cwd"
    (here / "profiles").mkdir(parents=True)
    (here / "profiles" / "local.yaml").write_text("x: 1\n")
    dirs = [mine, shipped]
    resolve = entrypoint.resolve_profile
    # A path that exists here is used as given.
    assert resolve("profiles/local.yaml", dirs, here) == "profiles/local.yaml"
    # Otherwise the first directory that has it, by name, with or without .yaml.
    assert resolve("a.yaml", dirs, here) == str(mine / "a.yaml")
    assert resolve("a", dirs, here) == str(mine / "a.yaml")
    assert resolve("profiles/only-shipped.yaml", dirs, here) == str(shipped / "only-shipped.yaml")
    # Unknown: unchanged, for b12x-launch to report.
    assert resolve("missing.yaml", dirs, here) == "missing.yaml"
    assert resolve("/abs/missing.yaml", dirs, here) == "/abs/missing.yaml"


def test_port_variable_sets_serving_port(env, execs):
    args = run(["glm52.yaml"], {**env, entrypoint.PORT_ENV: "9000"}, execs)
    assert sets(args)["serving.port"] == "9000"
    assert "serving.port" not in sets(run(["glm52.yaml"], env, execs))


def test_bad_port_variable_is_a_clear_error(env, execs, capsys):
    assert entrypoint.main(["glm52.yaml"], {**env, entrypoint.PORT_ENV: "http"}) == 1
    assert "BLAUNCH_PORT='http' is not a port number" in capsys.readouterr().err
    assert not execs


# --- the cache tree and build keying -------------------------------------------------------


def test_cache_tree_created_with_marker(env, execs, tmp_path):
    run(["glm52.yaml"], env, execs)
    root = tmp_path / "cache" / "build-a"
    for sub in CACHE_DIRS.values():
        assert (root / sub).is_dir()
    assert (tmp_path / "cache" / "runs").is_dir()
    assert json.loads((root / entrypoint.MARKER).read_text())["build_id"] == "build-a"
    assert not [p for p in root.iterdir() if p.name.startswith(".writable")]


def test_two_builds_two_dirs_same_build_same_dir(env, execs, tmp_path):
    first = sets(run(["glm52.yaml"], env, execs))["runtime.cache_root"]
    (Path(first) / "triton" / "kernel.bin").write_text("compiled")
    again = sets(run(["glm52.yaml"], env, execs))["runtime.cache_root"]
    other = sets(run(["glm52.yaml"], {**env, entrypoint.BUILD_ID_ENV: "build-b"}, execs))[
        "runtime.cache_root"
    ]
    assert first == again, "a restart of the same image reuses its caches"
    assert (Path(again) / "triton" / "kernel.bin").read_text() == "compiled"
    assert other != first and Path(other).parent == Path(first).parent
    assert not (Path(other) / "triton" / "kernel.bin").exists(), "a new build starts empty"


def test_build_id_from_the_image_file(tmp_path, execs):
    info = tmp_path / "build.json"
    entrypoint.write_build_info(info, {entrypoint.EPOCH_ENV: "1"})
    build_id = json.loads(info.read_text())["build_id"]
    env = {
        entrypoint.MOUNT_ENV: str(tmp_path / "cache"),
        entrypoint.BUILD_INFO_ENV: str(info),
        entrypoint.PROFILE_DIRS_ENV: str(PROFILES),
    }
    assert sets(run(["glm52.yaml"], env, execs))["runtime.cache_root"] == str(
        tmp_path / "cache" / build_id
    )


def test_build_id_is_keyed_by_versions_and_epoch(monkeypatch):
    versions = {"vllm": "0.33.0", "torch": "2.14.0+cu130", "b12x": "1.5.1", "triton": "3.7.0"}
    monkeypatch.setattr(buildid, "installed_version", lambda d: versions.get(d))
    a = entrypoint.build_info({})
    assert a["build_id"].startswith("vllm0.33.0-b12x1.5.1-")
    assert a == entrypoint.build_info({}), "deterministic: no clock, no randomness"
    assert entrypoint.build_info({entrypoint.EPOCH_ENV: "2"})["build_id"] != a["build_id"]
    versions["torch"] = "2.14.1+cu130"
    assert entrypoint.build_info({})["build_id"] != a["build_id"]
    versions["nvidia-cutlass-dsl"] = "4.8.1"
    b = entrypoint.build_info({})["build_id"]
    versions["nvidia-cutlass-dsl"] = "4.8.0"
    assert entrypoint.build_info({})["build_id"] != b
    assert buildid.checked_id(a["build_id"], "the computed id") == a["build_id"]


def test_constraints_pin_the_base_toolchain(monkeypatch, tmp_path):
    versions = {"vllm": "0.33.0", "torch": "2.14.0+cu130", "nvidia-cutlass-dsl": "4.8.0"}
    monkeypatch.setattr(buildid, "installed_version", lambda d: versions.get(d))
    out = tmp_path / "pins.txt"
    entrypoint.write_constraints(out)
    assert out.read_text().splitlines() == [
        "vllm==0.33.0",
        "torch==2.14.0+cu130",
        "nvidia-cutlass-dsl==4.8.0",
    ]


@pytest.mark.parametrize("bad", ["../escape", "a/b", ".hidden", "x" * 200])
def test_bad_build_id_is_refused(bad, env, execs, capsys):
    assert entrypoint.main(["glm52.yaml"], {**env, entrypoint.BUILD_ID_ENV: bad}) == 1
    assert "is not a directory name" in capsys.readouterr().err
    assert not execs


def test_corrupt_build_info_is_a_clear_error(tmp_path, execs, capsys):
    info = tmp_path / "build.json"
    info.write_text("{not json")
    env = {entrypoint.MOUNT_ENV: str(tmp_path / "c"), entrypoint.BUILD_INFO_ENV: str(info)}
    assert entrypoint.main(["glm52.yaml"], env) == 1
    err = capsys.readouterr().err
    assert "cannot read the build id" in err and "Traceback" not in err


def test_a_build_file_of_another_layout_is_refused_naming_it(tmp_path, execs, capsys):
    info = tmp_path / "build.json"
    info.write_text(json.dumps({"schema": "b12x-launch/build-info/9", "build_id": "x"}))
    env = {entrypoint.MOUNT_ENV: str(tmp_path / "c"), entrypoint.BUILD_INFO_ENV: str(info)}
    assert entrypoint.main(["glm52.yaml"], env) == 1
    err = capsys.readouterr().err
    assert f"cannot read the build id from {info}" in err and "another layout" in err
    assert "rebuild the image" in err and "Traceback" not in err and not execs


def test_a_build_file_written_before_its_schema_key_reads_as_it_is(tmp_path, execs):
    info = tmp_path / "build.json"
    entrypoint.write_build_info(info, {entrypoint.EPOCH_ENV: "1"})
    data = json.loads(info.read_text())
    assert data.pop("schema") == "b12x-launch/build-info/1"
    info.write_text(json.dumps(data))  # an image built by the launcher before this one
    env = {
        entrypoint.MOUNT_ENV: str(tmp_path / "cache"),
        entrypoint.BUILD_INFO_ENV: str(info),
        entrypoint.PROFILE_DIRS_ENV: str(PROFILES),
    }
    root = sets(run(["glm52.yaml"], env, execs))["runtime.cache_root"]
    assert root == str(tmp_path / "cache" / data["build_id"])


# --- an unwritable cache -------------------------------------------------------------------


def test_cache_under_a_regular_file_exits_1_with_the_fix(tmp_path, execs, capsys, env):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    env = {**env, entrypoint.MOUNT_ENV: str(blocker / "cache")}
    assert entrypoint.main(["glm52.yaml"], env) == 1
    err = capsys.readouterr().err
    assert f"the cache volume {blocker / 'cache'} is not writable" in err
    assert "docker run -v cache:" in err and "--user" in err
    assert "Traceback" not in err
    assert not execs


def test_read_only_cache_detected_even_when_dirs_exist(env, execs, capsys, monkeypatch):
    run(["glm52.yaml"], env, execs)  # the tree exists now
    execs.clear()

    def read_only(*args, **kwargs):
        raise PermissionError(30, "Read-only file system", kwargs.get("dir"))

    monkeypatch.setattr(owned_write.tempfile, "mkstemp", read_only)
    assert entrypoint.main(["glm52.yaml"], env) == 1
    assert "Read-only file system" in capsys.readouterr().err
    assert not execs


def test_dry_run_goes_on_with_an_unwritable_cache(tmp_path, env, execs, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    env = {**env, entrypoint.MOUNT_ENV: str(blocker)}
    args = run(["glm52.yaml", "--dry-run"], env, execs)
    assert sets(args)["runtime.cache_root"] == str(blocker / "build-a")
    assert "warning (dry run goes on)" in capsys.readouterr().err


def test_unwritable_cache_in_a_subprocess_prints_no_traceback(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    env = {
        **os.environ,
        entrypoint.MOUNT_ENV: str(blocker / "cache"),
        entrypoint.BUILD_ID_ENV: "x",
    }
    out = subprocess.run(
        [sys.executable, "-m", "launcher.entrypoint", str(PROFILES / "glm52.yaml")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1
    assert "is not writable" in out.stderr and "Traceback" not in out.stderr


# --- pruning -------------------------------------------------------------------------------


def test_prune_only_when_asked_and_only_build_dirs(env, execs, tmp_path):
    cache = tmp_path / "cache"
    run(["glm52.yaml"], {**env, entrypoint.BUILD_ID_ENV: "old"}, execs)
    (cache / "not-ours").mkdir()
    run(["glm52.yaml"], env, execs)
    assert (cache / "old").is_dir(), "nothing is pruned unless asked"
    run(["glm52.yaml", "--dry-run"], {**env, entrypoint.PRUNE_ENV: "1"}, execs)
    assert (cache / "old").is_dir(), "a dry run prunes nothing"
    run(["glm52.yaml"], {**env, entrypoint.PRUNE_ENV: "1"}, execs)
    assert not (cache / "old").exists()
    assert (cache / "build-a").is_dir() and (cache / "runs").is_dir()
    assert (cache / "not-ours").is_dir(), "only directories with our marker are pruned"


# --- the exec and the import weight --------------------------------------------------------


def test_exec_failure_is_reported(env, monkeypatch, capsys):
    def missing(file, args):
        raise FileNotFoundError(2, "No such file or directory", file)

    monkeypatch.setattr(entrypoint.os, "execvp", missing)
    assert entrypoint.main(["glm52.yaml"], env) == 1
    assert "cannot start b12x-launch" in capsys.readouterr().err


def test_real_exec_runs_the_dry_run(tmp_path):
    """End to end: the module execs the real console script, which prints the plan."""
    env = {
        **os.environ,
        entrypoint.MOUNT_ENV: str(tmp_path / "cache"),
        entrypoint.BUILD_ID_ENV: "e2e",
        entrypoint.PROFILE_DIRS_ENV: str(PROFILES),
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
    }
    out = subprocess.run(
        [sys.executable, "-m", "launcher.entrypoint", "glm52", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    started = not (out.returncode != 0 and "cannot start b12x-launch" in out.stderr)
    need("unit", started, "the b12x-launch console script is not on PATH (pip install -e .)")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["vllm"]["env"]["TRITON_CACHE_DIR"] == str(tmp_path / "cache" / "e2e" / "triton")


def test_no_heavy_imports():
    code = (
        "import sys, launcher.entrypoint as e; "
        "e.plan_args(['glm52.yaml'], {}); e.build_info({}); "
        "print(sorted(m for m in ('torch', 'vllm', 'b12x', 'triton') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_importing_the_entrypoint_leaves_the_profile_stage_unloaded():
    """Every container start imports it: launcher.profile (pydantic, yaml) tripled that."""
    code = (
        "import sys, launcher.entrypoint; "
        "print(sorted(m for m in ('launcher.profile', 'pydantic', 'yaml') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_every_cache_command_takes_set():
    """The container points caches with ``--set``: a profile command without it would compile
    into the image's home directory instead of the volume."""
    from launcher.cli import cli

    for name, command in cli.commands.items():
        if name in entrypoint.NO_CACHE_COMMANDS:
            continue
        if entrypoint._takes_profiles(command):
            assert entrypoint._takes_set(command), f"b12x-launch {name} needs --set"


# --- can the image's vLLM serve the profile? ------------------------------------------------


@pytest.fixture(autouse=True)
def no_vllm_probe(monkeypatch):
    """By default the check sees no vLLM (as without one installed): it lets the launch go on."""
    monkeypatch.setattr(entrypoint, "probe_vllm", lambda plugins=False: None)


def offering(backends=(), quantizations=()):
    caps = Registry(frozenset(backends), frozenset(quantizations), "vLLM 9.9 at /x/vllm")
    return lambda plugins=False: caps


UPSTREAM = offering(["FLASH_ATTN", "FLASHINFER", "B12X"], ["fp8", "awq", "gptq"])
FORK = offering(["FLASH_ATTN", "B12X", "B12X_MLA_SPARSE"], ["fp8", "exl3"])


def line_of(path: Path, key: str) -> int:
    return next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if f"{key}:" in ln)


def test_upstream_vllm_refuses_the_glm52_profile_naming_the_fork_image(
    env, execs, capsys, monkeypatch
):
    monkeypatch.setattr(entrypoint, "probe_vllm", UPSTREAM)
    assert entrypoint.main(["glm52"], env) == 1
    assert execs == []
    err = capsys.readouterr().err
    glm52 = PROFILES / "glm52.yaml"
    assert f"{glm52}:{line_of(glm52, 'attention_backend')} vllm.attention_backend" in err
    assert f"{glm52}:{line_of(glm52, 'quantization')} model.quantization" in err
    assert "'B12X_MLA_SPARSE' is not registered" in err and "'exl3' is not registered" in err
    assert "vLLM 9.9 at /x/vllm cannot serve" in err
    assert f"--build-arg VLLM_IMAGE={entrypoint.fork_image()}" in err
    assert "Traceback" not in err


def test_the_fork_serves_the_glm52_profile(env, execs, monkeypatch):
    monkeypatch.setattr(entrypoint, "probe_vllm", FORK)
    assert run(["glm52"], env, execs)[0] == "launch"


def test_a_missing_upstream_method_names_the_upstream_base(env, execs, capsys, monkeypatch):
    monkeypatch.setattr(entrypoint, "probe_vllm", offering(["FLASH_ATTN"], ["awq"]))
    assert entrypoint.main(["kimi-k2"], env) == 1
    err = capsys.readouterr().err
    assert "model.quantization: quantization method 'fp8' is not registered" in err
    assert entrypoint.upstream_image() in err and entrypoint.fork_image() not in err


def test_the_check_reads_the_profile_after_set(env, execs, monkeypatch):
    monkeypatch.setattr(entrypoint, "probe_vllm", UPSTREAM)
    sets_ = ["--set", "vllm.attention_backend=FLASH_ATTN", "--set", "model.quantization=fp8"]
    assert run(["glm52", *sets_], env, execs)[0] == "launch"


def test_dry_run_and_validate_never_probe_vllm(env, execs, monkeypatch):
    def probe(plugins=False):
        raise AssertionError("probed vLLM")

    monkeypatch.setattr(entrypoint, "probe_vllm", probe)
    run(["glm52", "--dry-run"], env, execs)
    run(["glm52", "--print-command"], env, execs)
    run(["validate", "glm52"], env, execs)


def test_the_check_can_be_skipped(env, execs, monkeypatch):
    monkeypatch.setattr(entrypoint, "probe_vllm", UPSTREAM)
    assert run(["glm52"], {**env, entrypoint.RUNTIME_CHECK_ENV: "0"}, execs)[0] == "launch"


def test_unreadable_registries_or_a_broken_vllm_do_not_block(env, execs, capsys, monkeypatch):
    unknown = Registry(None, None, "vLLM ?")
    monkeypatch.setattr(entrypoint, "probe_vllm", lambda plugins=False: unknown)
    run(["glm52"], env, execs)

    def broken(plugins=False):
        raise RuntimeError("libcuda.so.1 missing")

    monkeypatch.setattr(entrypoint, "probe_vllm", broken)
    run(["glm52"], env, execs)
    assert "libcuda.so.1 missing" in capsys.readouterr().err


def test_plugins_are_loaded_only_when_the_registries_lack_something(env, execs, monkeypatch):
    calls = []

    def probe(plugins=False):
        calls.append(plugins)
        backends = ["B12X_MLA_SPARSE"]
        quantizations = ["fp8", "exl3"] if plugins else ["fp8"]  # a plugin registers exl3
        return Registry(frozenset(backends), frozenset(quantizations), "v")

    monkeypatch.setattr(entrypoint, "probe_vllm", probe)
    run(["glm52"], env, execs)
    assert calls == [False, True]
    calls.clear()
    run(["glm52", "--set", "model.quantization=fp8"], env, execs)
    assert calls == [False]


def test_a_bad_profile_is_left_to_b12x_launch(env, execs, write, monkeypatch):
    monkeypatch.setattr(entrypoint, "probe_vllm", UPSTREAM)
    bad = write("bad.yaml", "model: [unclosed\n")
    assert run([str(bad)], env, execs)[-1] == str(bad)


def test_the_registry_recorded_at_image_build_is_read_without_importing(
    tmp_path, monkeypatch, capsys
):
    """The entry point parsed vLLM's source for its registries; the image build now records
    what they register (plugins loaded), and the entry point reads that record. Where it is
    missing, another schema or written for other versions, nothing is known (the import probe
    then decides), never an empty registry."""
    record = tmp_path / "vllm-registry.json"
    env = {registryfile.REGISTRY_ENV: str(record)}
    monkeypatch.setattr(can_serve, "vllm_root", lambda: tmp_path / "vllm")
    monkeypatch.setattr(can_serve, "installed_vllm_version", lambda: "9.9")
    unknown = Registry(None, None, f"vLLM 9.9 at {tmp_path}/vllm")
    assert registryfile.read_registry(env=env) == unknown
    versions = buildid.build_info({})["versions"]
    written = {
        "schema": vllm_registry.SCHEMA,
        "versions": versions,
        "attention_backends": ["B12X_MLA_SPARSE", "FLASH_ATTN"],
        "quantizations": ["exl3", "fp8"],
    }
    record.write_text(json.dumps(written))
    read = registryfile.read_registry(env=env)
    assert read.attention_backends == {"FLASH_ATTN", "B12X_MLA_SPARSE"}
    assert read.quantizations == {"fp8", "exl3"} and "(recorded)" in read.where
    moved = {**written, "versions": {**versions, "vllm": "0.0.1"}}
    for stale in (moved, {**written, "schema": "other"}, ["not", "a", "record"]):
        record.write_text(json.dumps(stale))
        assert registryfile.read_registry(env=env).attention_backends is None, stale
    record.write_text("{oops")
    assert registryfile.read_registry(env=env).quantizations is None
    assert f"vLLM registry record {record} is unreadable" in capsys.readouterr().err  # said


def test_can_serve_reads_no_file_it_says_what_the_record_it_is_handed_says(monkeypatch):
    """The record's file is ``registryfile``'s: ``can_serve`` calls the reader it is handed,
    and only where a vLLM is installed (no note about a record where there is no vLLM)."""
    calls = []

    def recorded():
        calls.append(1)
        return vllm_registry.VllmRegistryRecord(attention_backends=["FLASH_ATTN"])

    monkeypatch.setattr(can_serve, "vllm_root", lambda: None)
    assert can_serve.read_registry(recorded=recorded) is None and not calls
    monkeypatch.setattr(can_serve, "vllm_root", lambda: Path("/v"))
    monkeypatch.setattr(can_serve, "installed_vllm_version", lambda: "9.9")
    read = can_serve.read_registry(recorded=recorded)
    assert calls == [1]
    assert read == Registry(frozenset({"FLASH_ATTN"}), None, "vLLM 9.9 at /v (recorded)")
    assert can_serve.read_registry() == Registry(None, None, "vLLM 9.9 at /v")


def test_the_image_build_records_the_registry_it_reads(tmp_path, monkeypatch):
    seen = Registry(frozenset({"FLASH_ATTN", "CPU_ATTN"}), frozenset({"fp8"}), "vLLM 9.9")
    monkeypatch.setattr(can_serve, "read_registry", lambda plugins=False, recorded=None: seen)
    path = tmp_path / "opt" / "vllm-registry.json"
    registryfile.record_registry(path, env={})
    data = json.loads(path.read_text())
    assert data["attention_backends"] == ["CPU_ATTN", "FLASH_ATTN"]
    assert data["quantizations"] == ["fp8"]
    assert data["versions"] == buildid.build_info({})["versions"]


def test_a_key_the_source_could_not_tell_is_checked_with_the_import_probe(
    env, execs, capsys, monkeypatch
):
    calls = []

    def probe(plugins=False):
        calls.append(plugins)
        if not plugins:
            return Registry(None, frozenset({"fp8"}), "v")
        return Registry(frozenset({"FLASH_ATTN"}), frozenset({"fp8"}), "v")

    monkeypatch.setattr(entrypoint, "probe_vllm", probe)
    assert entrypoint.main(["glm52", "--set", "model.quantization=fp8"], env) == 1
    assert calls == [False, True]
    assert "'B12X_MLA_SPARSE' is not registered" in capsys.readouterr().err
    calls.clear()
    run(["kimi-k2"], env, execs)  # sets no backend: nothing unknown to look up
    assert calls == [False]


def test_a_full_cache_volume_is_pruned_before_this_builds_tree_is_made(
    env, execs, tmp_path, monkeypatch
):
    """BLAUNCH_PRUNE_CACHE=1 is the fix for a volume another build filled: it must run before
    the tree this build needs is created, which a full volume refuses."""
    cache = tmp_path / "cache"
    run(["glm52.yaml"], {**env, entrypoint.BUILD_ID_ENV: "old"}, execs)
    prepare = entrypoint.prepare_cache

    def full_while_old_is_there(mount, build_id, info):
        if (mount / "old").exists():
            raise entrypoint.EntrypointError("the cache volume is full")
        return prepare(mount, build_id, info)

    monkeypatch.setattr(entrypoint, "prepare_cache", full_while_old_is_there)
    args = run(["glm52.yaml"], {**env, entrypoint.PRUNE_ENV: "1"}, execs)
    assert not (cache / "old").exists()
    assert sets(args)["runtime.cache_root"] == str(cache / "build-a")


def test_a_full_cache_volume_says_full_and_how_to_free_it(env, execs, capsys, monkeypatch):
    run(["glm52.yaml"], env, execs)
    execs.clear()

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device", kwargs.get("dir"))

    monkeypatch.setattr(owned_write.tempfile, "mkstemp", full)
    assert entrypoint.main(["glm52.yaml"], env) == 1
    err = capsys.readouterr().err
    assert "is full (No space left on device" in err and "BLAUNCH_PRUNE_CACHE=1" in err
    assert "not writable" not in err and "chown" not in err
    assert not execs


def test_an_image_built_from_this_one_with_other_packages_gets_its_own_build(
    tmp_path, execs, monkeypatch, capsys
):
    """A derived image (FROM b12x-launch, vLLM upgraded) keeps its parent's build.json: its
    compiled objects must not land in, or be loaded from, the parent's cache tree."""
    versions = {"vllm": "0.33.0", "torch": "2.14.0+cu130", "b12x": "1.5.1"}
    monkeypatch.setattr(buildid, "installed_version", lambda d: versions.get(d))
    info = tmp_path / "build.json"
    parent = entrypoint.write_build_info(info, {entrypoint.EPOCH_ENV: "1"})
    env = {
        entrypoint.MOUNT_ENV: str(tmp_path / "cache"),
        entrypoint.BUILD_INFO_ENV: str(info),
        entrypoint.PROFILE_DIRS_ENV: str(PROFILES),
    }
    assert sets(run(["glm52.yaml"], env, execs))["runtime.cache_root"].endswith(parent)
    versions["vllm"] = "0.34.0"
    root = sets(run(["glm52.yaml"], env, execs))["runtime.cache_root"]
    derived = entrypoint.build_info({entrypoint.EPOCH_ENV: "1"})["build_id"]
    assert root == str(tmp_path / "cache" / derived) and derived != parent
    assert "written for vllm 0.33.0; this image differs" in capsys.readouterr().err
