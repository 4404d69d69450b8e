"""Secrets by their shape, not only by their name (issue 64, item 7): a ``*_PAT`` variable,
JSON or YAML holding a secret key inside any value, and a URL's userinfo anywhere are secrets,
and none is printed or written: not by the dry run, ``--json``, the run directory
(``plan.json``, ``command.txt``), ``emit``'s files, nor ``sweep``'s rows, reasons and JSON."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from launcher.cli import cli
from launcher.secrets import is_secret, redact_argv, secret_env, secret_value
from tests.conftest import PROFILES

SHAPES = {
    "GITHUB_PAT": "ghp_shapeLEAK1",
    "GH_PAT": "ghp_shapeLEAK2",
    "DEPLOY_PAT": "shapeLEAK3",
    "MY_CONFIG": '{"api_key": "shapeLEAK4"}',
    "MY_YAML": "password: shapeLEAK5",
    "NESTED_JSON": '{"outer": {"token": "shapeLEAK6"}}',
    "HF_ENDPOINT": "https://user:shapeLEAK7@hf.example.com",
    "HTTPS_PROXY": "http://bob:shapeLEAK8@proxy.example.com:3128",
    "GIT_REMOTE": "https://shapeLEAK9@github.com/o/r.git",
    "BARE_PROXY": "bob:shapeLEAK10@proxy:3128",
    "CALLBACK": "https://h.example.com/cb?access_token=shapeLEAK11",
}
LEAK = "shapeLEAK"


def _profile(tmp_path: Path, base: str = "glm52.yaml") -> Path:
    path = tmp_path / "shapes.yaml"
    lines = [f"extends: {PROFILES / base}", "env:"]
    lines += [f"  {k}: {v!r}" for k, v in SHAPES.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def _run(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.mark.parametrize("name", ["GITHUB_PAT", "GH_PAT", "ANY_PAT", "ghPat"])
def test_a_pat_is_a_secret_by_its_name(name):
    assert is_secret(name)


@pytest.mark.parametrize("name", ["PATH", "PATCH_SIZE", "PYTHONPATH", "COMPAT_MODE"])
def test_a_name_holding_pat_inside_another_word_is_not(name):
    assert not is_secret(name)


@pytest.mark.parametrize("name,value", list(SHAPES.items()))
def test_every_shape_is_a_secret_variable(name, value):
    assert secret_env(name, value)
    if not is_secret(name):
        assert secret_value(value), value


@pytest.mark.parametrize(
    "value",
    ["http://host:8000/v1", "git@github.com:o/r", "/models/GLM", "0", "nobind", "a: b",
     '{"cudagraph_mode": "FULL"}', "user@example.com", "max_tokens: 5",
     '{% set eos_token = "</s>" %}', "a" * 100_000],
)  # fmt: skip
def test_a_plain_value_is_not_a_secret(value):
    assert not secret_value(value)


@pytest.mark.parametrize("flag", ["--dry-run", "--json"])
def test_the_plan_shows_no_secret_by_shape(tmp_path, flag):
    result = _run(str(_profile(tmp_path)), flag)
    assert result.exit_code == 0, result.output
    assert LEAK not in result.output
    for name in SHAPES:
        assert name in result.output  # named, its value masked


def test_the_run_directory_holds_no_secret_by_shape(tmp_path):
    runs = tmp_path / "runs"
    profile = _profile(tmp_path, "tiny-cpu.yaml")
    result = _run(str(profile), "--print-command", "--run-dir", str(runs))
    assert result.exit_code == 0, result.output
    assert LEAK not in result.output
    files = [p for p in runs.rglob("*") if p.is_file()]
    assert any(f.name == "command.txt" for f in files)
    for f in files:
        assert LEAK not in f.read_text(errors="replace"), f.name


def test_emit_passes_a_secret_by_shape_by_name_only(tmp_path):
    out = tmp_path / "out"
    result = _run("emit", str(_profile(tmp_path)), str(out))
    assert result.exit_code == 0, result.output
    assert LEAK not in result.output
    for f in out.iterdir():
        assert LEAK not in f.read_text(), f.name
    lws = (out / "leaderworkerset.yaml").read_text()
    compose = (out / "compose.node0.yaml").read_text()
    for name in SHAPES:
        assert f"key: {name}" in lws and f"${{{name}:?" in compose, name


@pytest.mark.parametrize(
    "setting",
    ["env.HTTPS_PROXY=http://u:shapeLEAK@proxy:1", "env.X='{\"api_key\": \"shapeLEAK\"}'",
     "env.GH_PAT=shapeLEAK"],
)  # fmt: skip
def test_emit_leaves_a_secret_set_by_shape_out_of_its_args(tmp_path, setting):
    out = tmp_path / "out"
    result = _run("emit", str(PROFILES / "glm52.yaml"), str(out), "--set", setting)
    assert result.exit_code == 0, result.output
    for f in out.iterdir():
        assert LEAK not in f.read_text(), f.name


@pytest.mark.parametrize(
    "args",
    [["--otlp-traces-endpoint", "http://u:shapeLEAK@collector:4317"],
     ["--otlp-traces-endpoint=http://u:shapeLEAK@collector:4317"],
     ["--kv-transfer-config", '{"kv_connector": "x", "url": "https://t:shapeLEAK@h"}']],
)  # fmt: skip
def test_userinfo_in_an_extra_arg_is_refused_and_not_shown(args):
    setting = "vllm.extra_args=[" + ", ".join(repr(a) for a in args) + "]"
    result = _run(str(PROFILES / "glm52.yaml"), "--dry-run", "--set", setting)
    assert result.exit_code == 1, result.output
    assert "puts a secret on vLLM's command line" in result.stderr
    assert LEAK not in result.output


def test_redact_argv_masks_userinfo_and_keeps_the_option():
    argv = ["serve", "m", "--otlp-traces-endpoint", "http://u:p@h", "--x=https://t@h", "-q"]
    assert redact_argv(argv) == ["serve", "m", "--otlp-traces-endpoint", "***", "--x=***", "-q"]


@pytest.mark.parametrize(
    "vary",
    ["vllm.extra_args=[--api-key, shapeLEAK],[]",
     "vllm.extra_args=[--otlp-traces-endpoint, 'http://u:shapeLEAK@h'],[]",
     "env.HTTPS_PROXY=http://u:shapeLEAK@h,none"],
)  # fmt: skip
@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_sweep_prints_no_secret_in_its_rows_reasons_or_json(vary, json_flag):
    result = _run("sweep", str(PROFILES / "glm52.yaml"), "--vary", vary, *json_flag)
    assert result.exit_code == 2, result.output
    assert "names a secret" in result.output
    assert LEAK not in result.output


@pytest.mark.parametrize(
    "option,value",
    [("--image", "bob:shapeLEAK@registry.example/x:1"),
     ("--profile-ref", "https://u:shapeLEAK@h/p.yaml"),
     ("--cache-from", "oci:user:shapeLEAK@registry.example/c:1"),
     ("--cache-from", 'oci:{"token": "shapeLEAK"}')],
)  # fmt: skip
def test_emit_refuses_a_credential_in_its_options_without_showing_it(tmp_path, option, value):
    out = tmp_path / "out"
    result = _run("emit", str(PROFILES / "glm52.yaml"), str(out), option, value)
    assert result.exit_code == 2 and option in result.output, result.output
    assert "credential" in result.output and LEAK not in result.output
    assert not out.exists()


def test_a_credential_in_vllm_command_is_refused_and_not_shown():
    setting = 'vllm.command=[vllm, serve, "https://u:shapeLEAK@hub.example.com/m"]'
    result = _run(str(PROFILES / "glm52.yaml"), "--dry-run", "--set", setting)
    assert result.exit_code == 1, result.output
    assert "vllm.command.2" in result.stderr and "credential" in result.stderr
    assert LEAK not in result.output
