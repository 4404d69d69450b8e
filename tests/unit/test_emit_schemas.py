"""``emit``'s files against the real schemas, offline: the LeaderWorkerSet v1 CRD's
openAPIV3Schema and the Compose Specification (vendored under ``tests/schemas``, see its
README for versions and licences)."""

from __future__ import annotations

import gzip
import json

import pytest
import yaml
from click.testing import CliRunner

from launcher.cli import cli
from tests.conftest import PROFILES, ROOT, need_module

jsonschema = need_module("unit", "jsonschema", "jsonschema is in the test extra")

SCHEMAS = ROOT / "tests" / "schemas"


def _strict(node):
    """Unknown fields refused, as ``kubectl apply``'s strict field validation does."""
    if isinstance(node, dict):
        if (
            node.get("type") == "object"
            and "properties" in node
            and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")
        ):
            node["additionalProperties"] = False
        for value in node.values():
            _strict(value)
    elif isinstance(node, list):
        for value in node:
            _strict(value)
    return node


@pytest.fixture(scope="module")
def lws_validator():
    with gzip.open(SCHEMAS / "leaderworkerset-v1.schema.json.gz", "rt") as f:
        schema = _strict(json.load(f))
    return jsonschema.Draft7Validator(schema)


@pytest.fixture(scope="module")
def kserve_validator():
    with gzip.open(SCHEMAS / "llminferenceservice-v1alpha1.schema.json.gz", "rt") as f:
        schema = _strict(json.load(f))
    return jsonschema.Draft7Validator(schema)


@pytest.fixture(scope="module")
def compose_validator():
    schema = json.loads((SCHEMAS / "compose-spec.json").read_text())
    return jsonschema.Draft7Validator(schema)


def _emit(out, profile, *args):
    result = CliRunner().invoke(cli, ["emit", str(profile), str(out), *args])
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module", params=["glm52.yaml", "glm52-2node.yaml", "tiny-cpu.yaml"])
def emitted(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("schemas")
    targets = ("--target", "k8s", "--target", "compose", "--target", "kserve")
    return _emit(out, PROFILES / request.param, "--set", "env.HF_TOKEN=hf_schema_check", *targets)


def _errors(validator, doc) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)
    ]


def test_the_leaderworkerset_is_valid_v1(emitted, lws_validator):
    doc = yaml.safe_load((emitted / "leaderworkerset.yaml").read_text())
    assert _errors(lws_validator, doc) == []


def test_every_compose_file_is_valid_compose(emitted, compose_validator):
    files = sorted(emitted.glob("compose.node*.yaml"))
    assert files
    for f in files:
        assert _errors(compose_validator, yaml.safe_load(f.read_text())) == [], f.name


def test_the_checks_are_not_vacuous(emitted, lws_validator, compose_validator):
    lws = yaml.safe_load((emitted / "leaderworkerset.yaml").read_text())
    lws["spec"]["leaderWorkerTemplate"]["size"] = "two"
    lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containerz"] = []
    problems = _errors(lws_validator, lws)
    assert any("size" in p for p in problems) and any("containerz" in p for p in problems)
    compose = yaml.safe_load((emitted / "compose.node0.yaml").read_text())
    compose["services"]["vllm"]["restart"] = {"always": True}
    compose["services"]["vllm"]["netwrk_mode"] = "host"
    assert len(_errors(compose_validator, compose)) >= 2


def test_the_other_kubernetes_objects_are_core_v1(emitted):
    service = yaml.safe_load((emitted / "service.yaml").read_text())
    assert (service["apiVersion"], service["kind"]) == ("v1", "Service")
    config = yaml.safe_load((emitted / "profile-configmap.yaml").read_text())
    assert (config["apiVersion"], config["kind"]) == ("v1", "ConfigMap")
    assert all(isinstance(v, str) for v in config["data"].values())


def test_the_llminferenceservice_is_valid_v1alpha1(emitted, kserve_validator):
    doc = yaml.safe_load((emitted / "llminferenceservice.yaml").read_text())
    assert (doc["apiVersion"], doc["kind"]) == ("serving.kserve.io/v1alpha1", "LLMInferenceService")
    assert _errors(kserve_validator, doc) == []


def test_the_kserve_check_is_not_vacuous(emitted, kserve_validator):
    doc = yaml.safe_load((emitted / "llminferenceservice.yaml").read_text())
    doc["spec"]["parallelism"]["tensor"] = 0
    doc["spec"]["template"]["containerz"] = []
    del doc["spec"]["model"]["uri"]
    problems = _errors(kserve_validator, doc)
    assert len(problems) >= 3, problems


def test_a_multinode_kserve_service_runs_the_workers_as_lws_does(tmp_path_factory):
    out = _emit(
        tmp_path_factory.mktemp("kserve"), PROFILES / "glm52-2node.yaml", "--target", "kserve"
    )
    spec = yaml.safe_load((out / "llminferenceservice.yaml").read_text())["spec"]
    leader, worker = spec["template"]["containers"][0], spec["worker"]["containers"][0]
    assert leader["name"] == worker["name"] == "main"
    assert leader["args"][-2:] == ["--node-rank", "0"]
    assert worker["args"][-2:] == ["--node-rank", "$(LWS_WORKER_INDEX)"]
    assert "runtime.master_addr=$(LWS_LEADER_ADDRESS)" in worker["args"]
    assert leader["startupProbe"]["httpGet"]["path"] == "/health"
    assert worker["livenessProbe"]["exec"]["command"][2] == "launcher.launch.probe"
    assert spec["storageInitializer"] == {"enabled": False}


def test_files_with_a_measured_startup_budget_pass_the_schemas(
    tmp_path_factory, lws_validator, compose_validator, kserve_validator
):
    from launcher.contract import store
    from launcher.contract.phases import BOOTS_FILE, BootTimes, add_boot

    cache = tmp_path_factory.mktemp("cache")
    profile = PROFILES / "glm52-2node.yaml"
    dry = CliRunner().invoke(
        cli, [str(profile), "--dry-run", "--json", "--set", f"runtime.cache_root={cache}"]
    )
    fingerprint = json.loads(dry.output)["fingerprint"]
    boot = BootTimes(build="b", kind="cold", when=1.8e9, ready=1234.5, phases={})
    add_boot(store.folder(cache, fingerprint) / BOOTS_FILE, boot)
    out = _emit(
        tmp_path_factory.mktemp("measured"), profile, "--set", f"runtime.cache_root={cache}",
        "--target", "k8s", "--target", "compose", "--target", "kserve",
    )  # fmt: skip
    lws = yaml.safe_load((out / "leaderworkerset.yaml").read_text())
    leader = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    assert leader["startupProbe"]["failureThreshold"] == 247  # 2 x 1234.5 s / 10 s, up
    assert _errors(lws_validator, lws) == []
    for f in sorted(out.glob("compose.node*.yaml")):
        assert _errors(compose_validator, yaml.safe_load(f.read_text())) == [], f.name
    doc = yaml.safe_load((out / "llminferenceservice.yaml").read_text())
    assert _errors(kserve_validator, doc) == []
