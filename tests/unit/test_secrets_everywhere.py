"""No secret value in any file or argv the launcher writes or prints: one planted through
every door (``--set env.*``, the profile's ``env``, the process environment) is looked for in
everything ``emit``, ``--print-command`` (with its run directory), ``--dry-run`` and
``--json`` produce."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from launcher.cli import cli
from tests.conftest import PROFILES

FROM_SET = "hf_from_set_0123456789"
FROM_PROFILE = "hf_from_profile_0123456789"
FROM_PROFILE_KEY = "sk-from-profile-0123456789"
FROM_ENVIRONMENT = "hf_from_environment_0123456789"
SECRETS = (FROM_SET, FROM_PROFILE, FROM_PROFILE_KEY, FROM_ENVIRONMENT)


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """A profile with secrets in its env (extending a shipped one), and one in the process
    environment; returns a function that runs the CLI with a secret ``--set``."""
    monkeypatch.setenv("HF_TOKEN", FROM_ENVIRONMENT)
    monkeypatch.setenv("VLLM_API_KEY", FROM_ENVIRONMENT)

    def profile(base: str) -> Path:
        path = tmp_path / f"secret-{base}"
        path.write_text(
            f"extends: {PROFILES / base}\n"
            "env:\n"
            f"  HF_HUB_TOKEN: {FROM_PROFILE}\n"
            f"  VLLM_API_KEY: {FROM_PROFILE_KEY}\n"
        )
        return path

    def run(*args: str):
        result = CliRunner().invoke(cli, [*args, "--set", f"env.HF_TOKEN={FROM_SET}"])
        return result

    return profile, run


def _leaks(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


@pytest.mark.parametrize("base", ["glm52.yaml", "glm52-2node.yaml", "tiny-cpu.yaml"])
def test_emit_writes_no_secret(planted, tmp_path, base):
    profile, run = planted
    out = tmp_path / "out"
    result = run("emit", str(profile(base)), str(out))
    assert result.exit_code == 0, result.output
    assert not _leaks(result.output)
    files = _files(out)
    assert any(f.name == "leaderworkerset.yaml" for f in files)
    for f in files:
        assert not _leaks(f.read_text()), f.name
    # each secret is there by name, as a reference
    lws = (out / "leaderworkerset.yaml").read_text()
    for name in ("HF_TOKEN", "HF_HUB_TOKEN", "VLLM_API_KEY"):
        assert f"key: {name}" in lws
        assert f"${{{name}:?" in (out / "compose.node0.yaml").read_text()


def test_emit_with_a_profile_in_the_image_writes_no_secret(planted, tmp_path):
    profile, run = planted
    out = tmp_path / "out"
    result = run("emit", str(profile("glm52.yaml")), str(out), "--profile-ref", "glm52")
    assert result.exit_code == 0, result.output
    for f in _files(out):
        assert not _leaks(f.read_text()), f.name
        assert "env.HF_TOKEN" not in f.read_text(), f.name


def test_print_command_and_its_run_directory_hold_no_secret(planted, tmp_path):
    profile, run = planted
    runs = tmp_path / "runs"
    result = run(str(profile("tiny-cpu.yaml")), "--print-command", "--run-dir", str(runs))
    assert result.exit_code == 0, result.output
    assert not _leaks(result.output)
    assert "HF_TOKEN" not in result.stdout  # not even "$HF_TOKEN": the shell exports it
    files = _files(runs)
    assert files
    for f in files:
        assert not _leaks(f.read_text(errors="replace")), f.name


@pytest.mark.parametrize("flag", ["--dry-run", "--json"])
def test_the_plan_shows_no_secret(planted, flag):
    profile, run = planted
    result = run(str(profile("glm52.yaml")), flag)
    assert result.exit_code == 0, result.output
    assert not _leaks(result.output)


# -- issue 41 (6, 7): secrets named inside a value, and names outside the old pattern --------

PLANTED = "hf_planted_in_a_mapping_0123456789"


@pytest.mark.parametrize("ref", [[], ["--profile-ref", "glm52"]], ids=["shipped", "profile-ref"])
@pytest.mark.parametrize(
    "setting",
    [
        f"env={{HF_TOKEN: {PLANTED}}}",
        f"env={{WANDB_KEY: {PLANTED}, A: b}}",
        f"env.WANDB_KEY={PLANTED}",
    ],
)
def test_emit_writes_no_secret_given_inside_a_mapping(tmp_path, ref, setting):
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli, ["emit", str(PROFILES / "glm52.yaml"), str(out), "--set", setting, *ref]
    )
    assert result.exit_code == 0, result.output
    assert PLANTED not in result.output
    files = _files(out)
    assert files
    for f in files:
        assert PLANTED not in f.read_text(), f.name


@pytest.mark.parametrize(
    "setting",
    [
        f'env={{HF_TOKEN: "{PLANTED}}}',
        f"env={{A: [{PLANTED}, HF_TOKEN]",
        f"env.HF_TOKEN=[{PLANTED}",
    ],
)
def test_a_yaml_error_in_a_secret_value_does_not_quote_it(setting):
    result = CliRunner().invoke(cli, [str(PROFILES / "glm52.yaml"), "--dry-run", "--set", setting])
    assert result.exit_code == 1 and "value is not YAML" in result.stderr, result.output
    assert PLANTED not in result.output


def test_a_secret_keys_value_is_not_shown_in_a_schema_error():
    result = CliRunner().invoke(
        cli, ["validate", str(PROFILES / "glm52.yaml"), "--set", "env.HF_TOKEN=2031-12-24"]
    )
    assert result.exit_code == 1 and "env.HF_TOKEN" in result.stderr, result.output
    assert "2031" not in result.output and "is not shown" in result.stderr
