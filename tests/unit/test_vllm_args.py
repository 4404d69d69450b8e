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
