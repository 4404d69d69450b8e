"""``b12x-launch emit``: one plan as a LeaderWorkerSet and per-node compose files, offline."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys

import pytest
import yaml
from click.testing import CliRunner

from launcher.cli import cli
from tests.conftest import PROFILES, ROOT
from tests.unit import lws_schema

TWO_NODE = str(PROFILES / "glm52-2node.yaml")
IMAGE = "registry.example/b12x-launch:test"


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def emitted(tmp_path_factory):
    out = tmp_path_factory.mktemp("emit")
    result = run("emit", TWO_NODE, str(out), "--image", IMAGE)
    assert result.exit_code == 0, result.output
    return out


def _manifest(out) -> dict:
    return yaml.safe_load((out / "leaderworkerset.yaml").read_text())


def _plan_env() -> dict[str, str]:
    from launcher.pipeline import load

    p = load(TWO_NODE).profile
    return {**p.env, "BLAUNCH_PORT": str(p.serving.port)}


def _needs(m: dict) -> list[str]:
    return lws_schema.needs(m, gpus=4, port=8000, env=_plan_env(), image=IMAGE)


def test_writes_the_manifest_and_one_compose_file_per_node(emitted):
    names = sorted(p.name for p in emitted.iterdir())
    assert names == [
        "compose.node0.yaml",
        "compose.node1.yaml",
        "leaderworkerset.yaml",
        "profile-configmap.yaml",
        "profile.glm52-exl3-2node-tp8-dcp4-mtp3.yaml",
        "service.yaml",
    ]


def test_manifest_has_the_leaderworkerset_v1_shape(emitted):
    m = _manifest(emitted)
    assert lws_schema.shape(m) == []
    assert m["spec"]["replicas"] == 1
    assert m["spec"]["leaderWorkerTemplate"]["size"] == 2


def test_leader_and_workers_have_what_they_need(emitted):
    assert _needs(_manifest(emitted)) == []


LEADER = ("spec", "leaderWorkerTemplate", "leaderTemplate", "spec", "containers", 0)
WORKER = ("spec", "leaderWorkerTemplate", "workerTemplate", "spec", "containers", 0)
DROPS = [
    ("spec", "leaderWorkerTemplate", "size"),
    ("spec", "leaderWorkerTemplate", "workerTemplate"),
    ("spec", "leaderWorkerTemplate", "leaderTemplate", "spec"),
    (*LEADER, "image"),
    (*LEADER, "readinessProbe"),
    (*LEADER, "resources"),
    (*LEADER, "env"),
    (*LEADER, "args"),
    (*LEADER, "volumeMounts"),
    (*WORKER, "image"),
    (*WORKER, "resources"),
    (*WORKER, "env"),
    (*WORKER, "args"),
    (*WORKER, "volumeMounts"),
    ("spec", "leaderWorkerTemplate", "workerTemplate", "spec", "volumes"),
]


@pytest.mark.parametrize("path", DROPS, ids=lambda p: ".".join(map(str, p[2:])))
def test_dropping_a_needed_field_fails_the_check(emitted, path):
    """The two checks above are not vacuous: each field they guard is caught when dropped."""
    m = copy.deepcopy(_manifest(emitted))
    node = m
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    try:
        problems = lws_schema.shape(m) + _needs(m)
    except (KeyError, IndexError) as exc:  # the needs walk cannot even find its way
        problems = [f"missing {exc}"]
    assert problems, f"dropping {'.'.join(map(str, path))} went unnoticed"


def test_a_wrong_type_fails_the_shape_check(emitted):
    m = _manifest(emitted)
    m["spec"]["leaderWorkerTemplate"]["size"] = "2"
    m["spec"]["replicas"] = True
    problems = lws_schema.shape(m)
    assert any("size" in p for p in problems) and any("replicas" in p for p in problems)


def test_worker_has_no_probe_and_runs_headless_by_rank(emitted):
    t = _manifest(emitted)["spec"]["leaderWorkerTemplate"]
    worker = t["workerTemplate"]["spec"]["containers"][0]
    assert "readinessProbe" not in worker
    assert worker["args"][-2:] == ["--node-rank", "$(LWS_WORKER_INDEX)"]
    assert t["leaderTemplate"]["spec"]["containers"][0]["args"][-2:] == ["--node-rank", "0"]


def test_compose_files_run_each_node_with_its_rank(emitted):
    for rank in (0, 1):
        doc = yaml.safe_load((emitted / f"compose.node{rank}.yaml").read_text())
        svc = doc["services"]["vllm"]
        assert svc["image"] == IMAGE
        assert svc["command"][-2:] == ["--node-rank", str(rank)]
        assert svc["network_mode"] == "host" and "cache:/cache" in svc["volumes"]
        assert svc["deploy"]["resources"]["reservations"]["devices"][0]["count"] == 4
        assert svc["environment"]["NCCL_IB_DISABLE"] == "0"
        assert ("healthcheck" in svc) == (rank == 0)


def test_no_temporary_file_is_left(emitted):
    assert not [p for p in emitted.iterdir() if p.name.startswith(".")]


def test_secrets_become_references(tmp_path, write):
    text = (
        (PROFILES / "glm52-2node.yaml")
        .read_text()
        .replace("extends: glm52.yaml", f"extends: {PROFILES / 'glm52.yaml'}")
    )
    profile = write("p.yaml", text + '  HF_TOKEN: "hf_supersecret"\n')
    out = tmp_path / "out"
    assert run("emit", str(profile), str(out)).exit_code == 0
    for f in out.iterdir():
        assert "hf_supersecret" not in f.read_text()
    env = _manifest(out)["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
        "env"
    ]
    assert any(e["name"] == "HF_TOKEN" and "secretKeyRef" in e["valueFrom"] for e in env)


def test_ray_is_refused_with_one_line(tmp_path):
    result = CliRunner().invoke(
        cli, ["emit", TWO_NODE, str(tmp_path / "o"), "--set", "runtime.multinode=ray"]
    )
    assert result.exit_code == 1
    assert "runtime.multinode" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "o").exists()


def test_a_plan_that_does_not_fit_writes_nothing(tmp_path):
    result = CliRunner().invoke(
        cli, ["emit", TWO_NODE, str(tmp_path / "o"), "--set", "memory.safety_margin=80GiB"]
    )
    assert result.exit_code == 3 and not (tmp_path / "o").exists()


def test_emit_imports_no_heavy_module(tmp_path):
    code = (
        "import sys, runpy\n"
        f"sys.argv = ['b12x-launch', 'emit', {TWO_NODE!r}, {str(tmp_path)!r}]\n"
        "try:\n    runpy.run_module('launcher', run_name='__main__')\n"
        "except SystemExit: pass\n"
        "print('HEAVY', sorted(m for m in ('torch', 'vllm', 'b12x') if m in sys.modules),"
        " file=sys.stderr)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert "HEAVY []" in out.stderr


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed (optional)")
def test_kubectl_accepts_the_manifest_client_side(emitted, tmp_path):
    """Optional: kubectl needs the LeaderWorkerSet CRD from a cluster to dry-run it. An empty
    kubeconfig keeps it on 127.0.0.1; without a cluster there, the check is skipped."""
    config = tmp_path / "kubeconfig"
    config.write_text("")
    out = subprocess.run(
        [
            "kubectl",
            "apply",
            "--dry-run=client",
            "--validate=false",
            "--request-timeout=5s",
            "-f",
            str(emitted / "leaderworkerset.yaml"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "KUBECONFIG": str(config)},
        timeout=60,
    )
    if out.returncode != 0 and (
        "connection refused" in out.stderr or "unable to recognize" in out.stderr
    ):
        pytest.skip("no cluster with the LeaderWorkerSet CRD answers on 127.0.0.1")
    assert out.returncode == 0, out.stderr
