"""``emit --cache-from``: every node seeds its cache volume with the artifact before its server
starts (an init container on Kubernetes, a one-shot service in compose), and the files still
validate against the vendored LeaderWorkerSet CRD and compose-spec schemas."""

from __future__ import annotations

import gzip
import json

import pytest
import yaml
from click.testing import CliRunner

from launcher.artifact import CACHE_FROM_ENV
from launcher.cli import cli
from launcher.emit.artifact import parse_source
from tests.conftest import PROFILES, need_module
from tests.unit.test_emit_schemas import SCHEMAS, _errors, _strict

jsonschema = need_module("unit", "jsonschema", "jsonschema is in the test extra")
TWO_NODES = PROFILES / "glm52-2node.yaml"
ADDR = ("--set", "runtime.master_addr=192.168.1.10")


@pytest.fixture(scope="module")
def validators():
    with gzip.open(SCHEMAS / "leaderworkerset-v1.schema.json.gz", "rt") as f:
        lws = jsonschema.Draft7Validator(_strict(json.load(f)))
    compose = jsonschema.Draft7Validator(json.loads((SCHEMAS / "compose-spec.json").read_text()))
    return lws, compose


def emit(tmp_path, source, *args, profile=TWO_NODES):
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli, ["emit", str(profile), str(out), *ADDR, "--cache-from", source, *args]
    )
    return result, out


def templates(out):
    doc = yaml.safe_load((out / "leaderworkerset.yaml").read_text())
    t = doc["spec"]["leaderWorkerTemplate"]
    return doc, [t["leaderTemplate"]["spec"], t["workerTemplate"]["spec"]]


def test_the_oci_artifact_is_seeded_by_an_init_container_before_leader_and_workers(
    tmp_path, validators
):
    result, out = emit(tmp_path, "oci:registry.example/glm52-cache:v1")
    assert result.exit_code == 0, result.output
    doc, specs = templates(out)
    assert _errors(validators[0], doc) == []
    dest = "/cache/artifacts/glm52-exl3-2node-tp8-dcp4-mtp3"
    for spec in specs:
        init = spec["initContainers"]
        assert [c["name"] for c in init] == ["cache-owner", "cache-artifact"]
        seed = init[1]
        assert seed["command"] == ["python3", "-m", "launcher.artifact.seed", "/artifact-src", dest]
        assert {"name": "cache-artifact", "mountPath": "/artifact-src", "readOnly": True} in seed[
            "volumeMounts"
        ]
        volume = next(v for v in spec["volumes"] if v["name"] == "cache-artifact")
        assert volume["image"] == {
            "reference": "registry.example/glm52-cache:v1",
            "pullPolicy": "IfNotPresent",
        }
        serving = spec["containers"][0]
        assert {"name": CACHE_FROM_ENV, "value": dest} in serving["env"]
        assert all(m["name"] != "cache-artifact" for m in serving["volumeMounts"])
    assert "ImageVolume feature gate" in (out / "leaderworkerset.yaml").read_text()


def test_a_claim_is_mounted_read_only_and_refused_for_compose(tmp_path, validators):
    result, _ = emit(tmp_path, "pvc:glm52-artifacts/v1/glm52")
    assert result.exit_code == 1
    assert "error: --cache-from pvc:glm52-artifacts" in result.stderr
    assert "--target k8s" in result.stderr and "Traceback" not in result.output
    result, out = emit(tmp_path, "pvc:glm52-artifacts/v1/glm52", "--target", "k8s")
    assert result.exit_code == 0, result.output
    doc, specs = templates(out)
    assert _errors(validators[0], doc) == []
    volume = next(v for v in specs[0]["volumes"] if v["name"] == "cache-artifact")
    assert volume["persistentVolumeClaim"] == {"claimName": "glm52-artifacts", "readOnly": True}
    assert specs[0]["initContainers"][1]["command"][3] == "/artifact-src/v1/glm52"


def test_compose_seeds_the_named_volume_before_each_node_serves(tmp_path, validators):
    result, out = emit(tmp_path, "/srv/artifacts/glm52.tar", "--target", "compose")
    assert result.exit_code == 0, result.output
    for node in (0, 1):
        doc = yaml.safe_load((out / f"compose.node{node}.yaml").read_text())
        assert _errors(validators[1], doc) == [], node
        seed, serving = doc["services"]["cache-artifact"], doc["services"]["vllm"]
        assert seed["entrypoint"] == ["python3", "-m", "launcher.artifact.seed"]
        assert seed["command"] == [
            "/artifact-src/glm52.tar",
            "/cache/artifacts/glm52-exl3-2node-tp8-dcp4-mtp3",
        ]
        assert seed["volumes"] == [
            "cache:/cache",
            {
                "type": "bind",
                "source": "/srv/artifacts/glm52.tar",
                "target": "/artifact-src/glm52.tar",
                "read_only": True,
            },
        ]
        assert seed["restart"] == "no" and seed["network_mode"] == "none"
        assert serving["depends_on"] == {
            "cache-artifact": {"condition": "service_completed_successfully"}
        }
        assert serving["environment"][CACHE_FROM_ENV] == seed["command"][1]
        assert "cache:/cache" in serving["volumes"]


def test_compose_mounts_an_oci_artifact_as_an_image(tmp_path, validators):
    result, out = emit(tmp_path, "oci:registry.example/c:1", "--target", "compose")
    assert result.exit_code == 0, result.output
    doc = yaml.safe_load((out / "compose.node0.yaml").read_text())
    assert _errors(validators[1], doc) == []
    mount = doc["services"]["cache-artifact"]["volumes"][1]
    assert mount == {"type": "image", "source": "registry.example/c:1", "target": "/artifact-src"}


def test_without_cache_from_nothing_is_seeded(tmp_path):
    out = tmp_path / "plain"
    result = CliRunner().invoke(cli, ["emit", str(TWO_NODES), str(out), *ADDR])
    assert result.exit_code == 0, result.output
    _, specs = templates(out)
    assert [c["name"] for c in specs[0]["initContainers"]] == ["cache-owner"]
    assert all(v["name"] != "cache-artifact" for v in specs[0]["volumes"])
    doc = yaml.safe_load((out / "compose.node0.yaml").read_text())
    assert list(doc["services"]) == ["vllm"] and "depends_on" not in doc["services"]["vllm"]
    assert CACHE_FROM_ENV not in doc["services"]["vllm"]["environment"]


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("relative/dir", "not an artifact source"),
        ("oci:", "needs an image reference"),
        ("pvc:Bad_Claim", "not a PersistentVolumeClaim name"),
        ("pvc:claim/../etc", "without '..'"),
    ],
)
def test_a_bad_source_is_bad_usage_naming_the_forms(tmp_path, source, why):
    result, _ = emit(tmp_path, source)
    assert result.exit_code == 2
    assert why in result.stderr and "Traceback" not in result.output
    with pytest.raises(ValueError, match=why.replace("..", r"\.\.")):
        parse_source(source)
