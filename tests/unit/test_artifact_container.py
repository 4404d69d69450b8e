"""The artifact in the container: the entry point passes the launch the artifact to restore
(``BLAUNCH_CACHE_FROM``, or the one built into the image), and the init container's seed
copies one onto the cache volume, verified, whole or not at all."""

from __future__ import annotations

import subprocess
import sys

import pytest

from launcher import entrypoint
from launcher.artifact import CACHE_FROM_ENV, FILES_DIR, MANIFEST_NAME
from launcher.artifact.bake import bake
from launcher.artifact.seed import main as seed_main
from launcher.buildid import BUILD_ID_ENV
from tests.conftest import PROFILES, ROOT
from tests.unit.artifact_caches import fill, keys, tree
from tests.unit.test_entrypoint import Exec


@pytest.fixture
def execs(monkeypatch):
    calls: list[list[str]] = []

    def fake(file, args):
        calls.append(list(args))
        raise Exec

    monkeypatch.setattr(entrypoint.os, "execvp", fake)
    monkeypatch.setattr(entrypoint, "BUILTIN_ARTIFACT", "/nonexistent/artifact")
    return calls


@pytest.fixture
def env(tmp_path):
    return {
        entrypoint.MOUNT_ENV: str(tmp_path / "cache"),
        entrypoint.BUILD_ID_ENV: "build-a",
        entrypoint.PROFILE_DIRS_ENV: str(PROFILES),
        entrypoint.RUNTIME_CHECK_ENV: "0",
    }


def launched(argv, env, execs) -> list[str]:
    with pytest.raises(Exec):
        entrypoint.main(argv, env)
    return execs[-1][1:]


def cache_from(args: list[str]) -> str | None:
    return args[args.index("--cache-from") + 1] if "--cache-from" in args else None


def test_the_variable_gives_a_launch_its_artifact(env, execs, capsys):
    args = launched(["tiny-cpu"], {**env, CACHE_FROM_ENV: "/cache/artifacts/tiny"}, execs)
    assert args[0] == "launch" and cache_from(args) == "/cache/artifacts/tiny"
    assert "/cache/artifacts/tiny is restored before vLLM starts" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [["tiny-cpu", "--dry-run"], ["tiny-cpu", "--json"], ["prewarm", "tiny-cpu", "--list"]],
)
def test_a_dry_run_or_another_command_restores_nothing(env, execs, argv):
    args = launched(argv, {**env, CACHE_FROM_ENV: "/cache/artifacts/tiny"}, execs)
    assert cache_from(args) is None


def test_the_artifact_built_into_the_image_is_restored_unless_none(
    env, execs, tmp_path, monkeypatch
):
    inside = tmp_path / "opt-artifact"
    inside.mkdir()
    monkeypatch.setattr(entrypoint, "BUILTIN_ARTIFACT", str(inside))
    assert cache_from(launched(["tiny-cpu"], env, execs)) is None, "no manifest: none"
    (inside / MANIFEST_NAME).write_text("{}")
    assert cache_from(launched(["tiny-cpu"], env, execs)) == str(inside)
    assert cache_from(launched(["tiny-cpu"], {**env, CACHE_FROM_ENV: "none"}, execs)) is None
    typed = launched(["tiny-cpu", "--cache-from", "/mine"], env, execs)
    assert cache_from(typed) == "/mine" and typed.count("--cache-from") == 1


def test_the_entrypoint_still_imports_no_profile_stage():
    code = (
        "import sys, launcher.entrypoint; "
        "print(sorted(m for m in ('launcher.profile', 'pydantic', 'yaml') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.strip() == "[]", out.stderr


# --- seed: the init container's copy ------------------------------------------------------


@pytest.fixture
def same_build(monkeypatch):
    """seed runs in the image the artifact was baked for (it refuses another build's)."""
    monkeypatch.setenv(BUILD_ID_ENV, keys().build_id)


@pytest.fixture(params=["art", "art.tar.gz"])
def shipped(request, tmp_path, same_build):
    fill(tmp_path / "c")
    path = tmp_path / "ship" / request.param
    bake(tmp_path / "c", path, profile="p", keys=keys())
    return path


def test_seed_copies_the_artifact_verified_and_then_copies_nothing(shipped, tmp_path, capsys):
    dest = tmp_path / "cache" / "artifacts" / "tiny"
    assert seed_main([str(shipped), str(dest)]) == 0
    assert "copied artifact " in capsys.readouterr().out
    baked = tree(tmp_path / "c")
    copied = tree(dest / FILES_DIR)
    assert copied and all(baked[k] == v for k, v in copied.items())
    assert seed_main([str(shipped), str(dest)]) == 0
    assert "already holds artifact" in capsys.readouterr().out


def test_seed_of_a_damaged_artifact_leaves_the_volume_as_it_was(tmp_path, capsys, same_build):
    fill(tmp_path / "c")
    bake(tmp_path / "c", tmp_path / "old", profile="old", keys=keys())
    bake(tmp_path / "c", tmp_path / "new", profile="new", keys=keys())
    dest = tmp_path / "cache" / "artifacts" / "tiny"
    assert seed_main([str(tmp_path / "old"), str(dest)]) == 0
    before = tree(dest)
    victim = tmp_path / "new" / FILES_DIR / "triton" / "EF34" / "_topk.ptx"
    victim.write_bytes(b"bit rot")
    capsys.readouterr()
    assert seed_main([str(tmp_path / "new"), str(dest)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("b12x-launch seed: error: ") and "triton/EF34/_topk.ptx" in err
    assert "was left as it was" in err and "Traceback" not in err
    assert tree(dest) == before
    assert [p.name for p in dest.parent.iterdir()] == ["tiny"]


def test_seed_replaces_an_older_artifact_whole(tmp_path, same_build):
    fill(tmp_path / "c")
    bake(tmp_path / "c", tmp_path / "old", profile="old", keys=keys())
    bake(tmp_path / "c", tmp_path / "new", profile="new", keys=keys())
    dest = tmp_path / "cache" / "artifacts" / "tiny"
    assert seed_main([str(tmp_path / "old"), str(dest)]) == 0
    assert seed_main([str(tmp_path / "new"), str(dest)]) == 0
    assert (dest / MANIFEST_NAME).read_bytes() == (tmp_path / "new" / MANIFEST_NAME).read_bytes()


def test_seed_usage_and_a_missing_source(tmp_path, capsys):
    assert seed_main([]) == 2
    assert seed_main([str(tmp_path / "nothing"), str(tmp_path / "d")]) == 1
    assert "no such artifact" in capsys.readouterr().err


def test_the_dockerfile_can_build_an_artifact_into_the_image():
    """An optional stage: BLAUNCH_ARTIFACT_IMAGE (default scratch, which holds nothing) is
    copied to where the entry point looks for a built-in artifact."""
    from launcher.entrypoint import BUILTIN_ARTIFACT
    from tests.unit.test_docker import DOCKERFILE, parse_dockerfile

    df = parse_dockerfile(DOCKERFILE.read_text())
    assert df.global_args["BLAUNCH_ARTIFACT_IMAGE"] == "scratch"
    froms = [i.args for i in df.all("FROM")]
    assert froms[0] == "${BLAUNCH_ARTIFACT_IMAGE} AS artifact"
    assert froms[-1] == "${VLLM_IMAGE}", "the image itself is still the last stage (the default)"
    copies = [i.args.split() for i in df.all("COPY") if "--from=artifact" in i.args]
    assert copies == [["--from=artifact", "/", BUILTIN_ARTIFACT + "/"]]
