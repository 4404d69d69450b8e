"""``b12x-launch emit``: one plan as a LeaderWorkerSet and per-node compose files, offline."""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml
from click.testing import CliRunner

from launcher.cli import cli
from tests.conftest import PROFILES, ROOT, need
from tests.unit import lws_schema

TWO_NODE = str(PROFILES / "glm52-2node.yaml")
ONE_NODE = str(PROFILES / "glm52.yaml")
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
        "b12x-launch-emit.manifest",  # emit's record of its own files
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
        # node 0 probes /health; the headless node its vLLM and node 0's port, not HTTP
        test = svc["healthcheck"]["test"]
        assert ("/health" in " ".join(test)) == (rank == 0)
        assert ("launcher.launch.probe" in test) == (rank != 0)


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


def test_a_plan_that_does_not_fit_says_what_would(tmp_path):
    result = CliRunner().invoke(
        cli, ["emit", ONE_NODE, str(tmp_path / "o"), "--set", "serving.max_model_len=1048576"]
    )
    assert result.exit_code == 3, result.output
    assert "Would fit with: --set serving.max_model_len=" in result.output
    assert not (tmp_path / "o").exists()


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


def test_kubectl_accepts_the_manifest_client_side(emitted, tmp_path):
    """Optional: kubectl needs the LeaderWorkerSet CRD from a cluster to dry-run it. An empty
    kubeconfig keeps it on 127.0.0.1; without kubectl or a cluster there, the check is skipped
    (failed where the run asks for the ``cluster`` condition)."""
    need("cluster", shutil.which("kubectl") is not None, "kubectl is not installed")
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
    answered = out.returncode == 0 or not (
        "connection refused" in out.stderr or "unable to recognize" in out.stderr
    )
    need("cluster", answered, "no cluster with the LeaderWorkerSet CRD answers on 127.0.0.1")
    assert out.returncode == 0, out.stderr


def _pod(m: dict, role: str) -> dict:
    return m["spec"]["leaderWorkerTemplate"][role]["spec"]


def test_the_cache_is_given_to_the_images_user_on_a_fresh_node(emitted):
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "ARG BLAUNCH_UID=10001" in dockerfile and "ARG BLAUNCH_GID=10001" in dockerfile
    for role in ("leaderTemplate", "workerTemplate"):
        spec = _pod(_manifest(emitted), role)
        init = spec["initContainers"][0]
        assert init["securityContext"]["runAsUser"] == 0
        assert "chown 10001:10001 /cache" in init["command"][-1]
        assert spec["securityContext"]["runAsUser"] == 10001


def test_the_profile_ships_with_the_manifests(emitted):
    config = yaml.safe_load((emitted / "profile-configmap.yaml").read_text())
    ((key, text),) = config["data"].items()
    assert "extends" not in yaml.safe_load(text)
    assert (emitted / f"profile.{key}").read_text() == text
    spec = _pod(_manifest(emitted), "workerTemplate")
    assert {"name": "profile", "configMap": {"name": config["metadata"]["name"]}} in spec["volumes"]
    assert spec["containers"][0]["args"][0] == f"/profiles/{key}"
    svc = yaml.safe_load((emitted / "compose.node1.yaml").read_text())["services"]["vllm"]
    assert f"./profile.{key}:/profiles/{key}:ro" in svc["volumes"]


def test_a_service_for_the_leader_gpu_affinity_and_requests(emitted):
    service = yaml.safe_load((emitted / "service.yaml").read_text())
    assert service["spec"]["selector"]["leaderworkerset.sigs.k8s.io/worker-index"] == "0"
    assert service["spec"]["ports"][0]["port"] == 8000
    spec = _pod(_manifest(emitted), "leaderTemplate")
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    expr = terms["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert expr["key"] == "nvidia.com/gpu.product"
    assert any(v.startswith("NVIDIA-RTX-PRO-6000") for v in expr["values"])
    requests = spec["containers"][0]["resources"]["requests"]
    assert requests["cpu"] == "16" and requests["memory"] == "128Gi"


def test_another_plans_files_are_refused_unless_replaced(tmp_path):
    out = tmp_path / "o"
    assert run("emit", TWO_NODE, str(out)).exit_code == 0
    one = CliRunner().invoke(cli, ["emit", str(PROFILES / "glm52.yaml"), str(out)])
    assert one.exit_code == 1 and "--replace" in one.output and "compose.node1.yaml" in one.output
    again = run("emit", TWO_NODE, str(out))  # the same plan again: nothing stale
    assert again.exit_code == 0, again.output
    replaced = run("emit", str(PROFILES / "glm52.yaml"), str(out), "--replace")
    assert replaced.exit_code == 0, replaced.output
    assert not (out / "compose.node1.yaml").exists()
    assert (out / "compose.node0.yaml").exists()


def test_an_example_master_address_is_warned(tmp_path):
    result = CliRunner().invoke(cli, ["emit", TWO_NODE, str(tmp_path / "o")])
    assert "warning:" in result.stderr and "10.0.0.1, an example address" in result.stderr
    quiet = CliRunner().invoke(
        cli, ["emit", TWO_NODE, str(tmp_path / "p"), "--set", "runtime.master_addr=172.16.4.2"]
    )
    assert "example address" not in quiet.stderr
    compose = yaml.safe_load((tmp_path / "p" / "compose.node1.yaml").read_text())
    assert "--set" not in compose["services"]["vllm"]["command"]  # in the shipped profile
    shipped = next((tmp_path / "p").glob("profile.*.yaml")).read_text()
    assert "master_addr: 172.16.4.2" in shipped


def test_the_api_service_does_not_take_the_name_of_the_lws_headless_service(emitted):
    """LWS creates a headless Service named like the LeaderWorkerSet (the pods' subdomain,
    which $(LWS_LEADER_ADDRESS) resolves through): a ClusterIP Service of that name, applied
    first, makes LWS skip its own and the workers cannot resolve the leader."""
    lws = _manifest(emitted)["metadata"]["name"]
    service = yaml.safe_load((emitted / "service.yaml").read_text())
    assert service["metadata"]["name"] != lws
    assert service["metadata"]["name"] == f"{lws}-api"
    assert service["spec"]["selector"]["leaderworkerset.sigs.k8s.io/name"] == lws


RFC1035 = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"


@pytest.mark.parametrize(
    "name",
    [
        "70B Llama / tp4",
        "glm52 " + "very-long-variant-name " * 4 + "2",
        "glm52 " + "very-long-variant-name " * 4 + "3",
        "---",
    ],
)
def test_odd_or_long_profile_names_give_names_kubernetes_accepts(tmp_path, name):
    """A Service name (the LWS's headless one included) must start with a letter; a worker
    pod's StatefulSet labels (<lws>-<group>-<hash>) must fit in 63 characters."""
    from launcher.emit import NAME_MAX

    out = tmp_path / "o"
    result = run("emit", str(PROFILES / "tiny-cpu.yaml"), str(out), "--set", f"name={name}")
    assert result.exit_code == 0, result.output
    lws = _manifest(out)["metadata"]["name"]
    service = yaml.safe_load((out / "service.yaml").read_text())["metadata"]["name"]
    assert re.match(RFC1035, lws) and len(lws) <= NAME_MAX, lws
    assert re.match(RFC1035, service) and len(service) <= 63, service
    assert len(f"{lws}-0-") + 10 <= 63


def test_long_names_that_share_a_beginning_stay_apart():
    from launcher.emit import dns_name

    a, b = ("glm52 " + "very-long-variant-name " * 4 + s for s in ("2", "3"))
    assert dns_name(a) != dns_name(b)
    assert dns_name("glm52-exl3-2node-tp8-dcp4-mtp3") == "glm52-exl3-2node-tp8-dcp4-mtp3"


def test_dev_shm_is_memory_backed_with_a_size_limit(emitted):
    for role in ("leaderTemplate", "workerTemplate"):
        spec = _pod(_manifest(emitted), role)
        (shm,) = [v for v in spec["volumes"] if v["name"] == "dshm"]
        assert shm["emptyDir"]["medium"] == "Memory"
        assert shm["emptyDir"]["sizeLimit"].endswith("Gi")


def test_a_dollar_in_the_profile_reaches_the_container_as_written(tmp_path):
    """Compose interpolates $VAR at `up` and the kubelet expands $(VAR) in args and env
    values; `$$` is the literal `$` for both. Only the secrets (compose) and the LWS variables
    (Kubernetes) are meant to expand."""
    out = tmp_path / "o"
    value = "pre$(HOME)-${USER}-$X"
    result = run(
        "emit", TWO_NODE, str(out), "--profile-ref", "glm52-2node",
        "--set", f"env.MY_FLAG={value}", "--set", f"description=d{value}",
        "--set", "runtime.master_addr=172.16.4.2",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    escaped = value.replace("$", "$$")
    for rank in (0, 1):
        svc = yaml.safe_load((out / f"compose.node{rank}.yaml").read_text())["services"]["vllm"]
        assert svc["environment"]["MY_FLAG"] == escaped
        assert f"description=d{escaped}" in svc["command"]
    worker = _pod(_manifest(out), "workerTemplate")["containers"][0]
    assert {"name": "MY_FLAG", "value": escaped} in worker["env"]
    assert f"description=d{escaped}" in worker["args"]
    assert worker["args"][-2:] == ["--node-rank", "$(LWS_WORKER_INDEX)"]
    assert "runtime.master_addr=$(LWS_LEADER_ADDRESS)" in worker["args"]


def test_the_leaders_probes_wait_as_long_as_the_images_healthcheck(emitted):
    """The kubelet's default probe timeout is 1 s: a /health answer slowed by a busy engine
    would take the leader out of the Service where the image's own check waits 10 s."""
    leader = _manifest(emitted)["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    c = leader["spec"]["containers"][0]
    compose = yaml.safe_load((emitted / "compose.node0.yaml").read_text())
    wait = compose["services"]["vllm"]["healthcheck"]["timeout"]
    for probe in ("readinessProbe", "startupProbe"):
        assert f"{c[probe]['timeoutSeconds']}s" == wait, probe
