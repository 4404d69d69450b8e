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
    return _emit(out, PROFILES / request.param, "--set", "env.HF_TOKEN=hf_schema_check")


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
