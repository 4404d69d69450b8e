"""Inputs that were reported as internal errors (issue 64, item 10) are user errors: one
message naming what is wrong and the fix, a non-zero exit, no "internal error"."""

from __future__ import annotations

import json
import sys

import pytest
from click.testing import CliRunner

from launcher.cli import cli
from tests.conftest import PROFILES

GLM = PROFILES / "glm52.yaml"


def _run(*args: str):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture
def no_matplotlib(monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import and find_spec: not there


@pytest.mark.parametrize("command", ["launch", "report", "sweep"])
def test_plot_without_matplotlib_says_what_to_install_before_any_work(
    no_matplotlib, tmp_path, command
):
    plot = tmp_path / "p.svg"
    args = {
        "launch": [GLM, "--plot", plot],
        "report": ["report", tmp_path, "--plot", plot],
        "sweep": ["sweep", GLM, "--vary", "serving.max_num_seqs=1,2", "--plot", plot],
    }[command]
    result = _run(*args)
    assert result.exit_code == 2, result.output
    assert "needs matplotlib" in result.output and "pip install" in result.output
    assert "internal error" not in result.output
    assert "vLLM command" not in result.output and "Memory plan" not in result.output
    assert not plot.exists()


@pytest.mark.parametrize("profile", ["glm52.yaml", "kimi-k2.yaml", "deepseek-v32.yaml"])
@pytest.mark.parametrize("tokens", [2**31, 10**12, 2**40])
def test_json_and_the_table_agree_on_a_huge_kv_tokens(profile, tokens):
    sets = ("--set", f"memory.kv_tokens={tokens}")
    table = _run(PROFILES / profile, "--dry-run", *sets)
    as_json = _run(PROFILES / profile, "--json", *sets)
    assert "internal error" not in table.output + as_json.output
    assert table.exit_code == as_json.exit_code == 3, (table.output[-500:], as_json.output[-500:])
    data = json.loads(as_json.stdout)
    assert data["fits"] is False and any("memory.kv_tokens" in r for r in data["reasons"])


@pytest.mark.parametrize("text", ["[]", "3", '"x"', "null", "[{}]"])
def test_emit_into_a_directory_whose_manifest_is_json_but_not_an_object(tmp_path, text):
    """Emit cannot tell its own files there: refused in one line naming the manifest."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "b12x-launch-emit.manifest").write_text(text)
    result = _run("emit", GLM, out)
    assert "internal error" not in result.output
    assert result.exit_code == 1, result.output
    assert "b12x-launch-emit.manifest" in result.stderr and "Traceback" not in result.output
    assert not (out / "leaderworkerset.yaml").exists()


def test_bake_leaves_out_a_cache_file_whose_name_holds_a_backslash(tmp_path):
    cache = tmp_path / "cache"
    (cache / "triton" / "ab").mkdir(parents=True)
    (cache / "triton" / "ab" / "a\\b.json").write_text("x")
    (cache / "triton" / "ab" / "k.json").write_text("y")
    out = tmp_path / "artifact"
    tiny = PROFILES / "tiny-cpu.yaml"
    result = _run("bake", tiny, out, "--set", f"runtime.cache_root={cache}")
    assert "internal error" not in result.output
    assert result.exit_code == 0, result.output
    assert "1 file" in result.output


def test_a_vllm_whose_import_fails_is_an_environment_error_naming_the_failure(tmp_path):
    from launcher.errors import EnvironmentProblem
    from launcher.launch import preflight

    fake = tmp_path / "vllm"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise RuntimeError('libcudart.so.12: cannot open')\n")
    preflight.vllm_parser.cache_clear()
    saved = {k: v for k, v in sys.modules.items() if k == "vllm" or k.startswith("vllm.")}
    for k in saved:
        del sys.modules[k]
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(EnvironmentProblem) as caught:
            preflight.vllm_parser()
    finally:
        sys.path.remove(str(tmp_path))
        for k in [k for k in sys.modules if k == "vllm" or k.startswith("vllm.")]:
            del sys.modules[k]
        sys.modules.update(saved)
        preflight.vllm_parser.cache_clear()
    message = str(caught.value)
    assert "cannot be imported" in message and "libcudart.so.12" in message
    assert "reinstall" in message and "--dry-run" in message


@pytest.mark.parametrize(
    "args",
    [["", "--dry-run"], ["validate", ""], ["report", ""], ["emit", GLM, ""],
     [GLM, "--plot", ""]],
)  # fmt: skip
def test_an_empty_path_is_refused_naming_its_parameter(args):
    result = _run(*args)
    assert result.exit_code == 2, result.output
    assert "an empty path" in result.output and "internal error" not in result.output


def test_a_profile_that_is_a_link_to_itself_is_refused_naming_it(tmp_path):
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(loop)
    for args in ([loop, "--dry-run"], ["sweep", loop, "--vary", "serving.max_num_seqs=1,2"]):
        result = _run(*args)
        assert result.exit_code == 1, result.output
        assert str(loop) in result.output and "internal error" not in result.output
