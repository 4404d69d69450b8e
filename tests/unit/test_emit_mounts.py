"""``emit`` mounts exactly what the plan needs (issue 64, item 8): ``model.path`` itself,
read-only, never its parent; it refuses ``/``, the cache mount and the image's own paths, naming
the key and the fix; and every string compose or the kubelet would interpolate is escaped."""

from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner

from launcher.cli import cli
from launcher.emit import IMAGE_PATHS, model_mount, model_mount_problem
from tests.conftest import PROFILES
from tests.unit.test_artifact_emit import validators  # noqa: F401  (a fixture)
from tests.unit.test_emit_schemas import _errors

GLM = PROFILES / "glm52.yaml"


def _emit(tmp_path, *args: str):
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["emit", str(GLM), str(out), *args])
    return result, out


def _docs(out):
    compose = yaml.safe_load((out / "compose.node0.yaml").read_text())
    lws = yaml.safe_load((out / "leaderworkerset.yaml").read_text())
    spec = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
    return compose, lws, spec


def test_emit_mounts_the_checkpoint_itself_read_only_not_its_parent(tmp_path, validators):  # noqa: F811
    result, out = _emit(tmp_path, "--set", "model.path=/srv/models/glm")
    assert result.exit_code == 0, result.output
    compose, lws, spec = _docs(out)
    assert {"type": "bind", "source": "/srv/models/glm", "target": "/srv/models/glm",
            "read_only": True} in compose["services"]["vllm"]["volumes"]  # fmt: skip
    assert not any("/srv/models:" in str(v) for v in compose["services"]["vllm"]["volumes"])
    models = next(v for v in spec["volumes"] if v["name"] == "models")
    assert models["hostPath"]["path"] == "/srv/models/glm"
    mount = next(m for m in spec["containers"][0]["volumeMounts"] if m["name"] == "models")
    assert mount == {"name": "models", "mountPath": "/srv/models/glm", "readOnly": True}
    lws_v, compose_v = validators
    assert _errors(compose_v, compose) == [] and _errors(lws_v, lws) == []


@pytest.mark.parametrize(
    "path",
    ["/var/run/m", "/cache/m", "/cache", "/profiles/m", "/opt/b12x-launch/m", "/artifact-src/m",
     "/models/../var/run/m", "/sys/m", "/etc/models"],
)  # fmt: skip
def test_emit_refuses_a_checkpoint_in_a_path_the_image_or_the_host_owns(tmp_path, path):
    result, out = _emit(tmp_path, "--set", f"model.path={path}")
    assert result.exit_code == 1, result.output
    assert "model.path" in result.stderr and "/models/NAME" in result.stderr
    assert "Traceback" not in result.output and not out.exists()


@pytest.mark.parametrize("path", ["/", "//", "/opt", "/var", "/usr", "/dev"])
def test_a_checkpoint_over_an_image_path_is_a_problem(path):
    assert model_mount_problem(path) is not None


@pytest.mark.parametrize("path", ["/models/glm", "/srv/a:b/m", "/home/me/m", "/data/$(x)/m"])
def test_a_checkpoint_of_its_own_is_mounted(path):
    assert model_mount_problem(path) is None and model_mount(path) == path


def test_every_image_path_is_absolute():
    assert all(p.startswith("/") and p != "/" for p in IMAGE_PATHS)


def test_a_dollar_or_a_colon_in_the_model_path_is_escaped_in_compose(tmp_path, validators):  # noqa: F811
    result, out = _emit(tmp_path, "--set", "model.path=/m/$(whoami):${HF_TOKEN}")
    assert result.exit_code == 0, result.output
    compose, lws, _ = _docs(out)
    bind = next(v for v in compose["services"]["vllm"]["volumes"] if isinstance(v, dict))
    assert bind["source"] == bind["target"] == "/m/$$(whoami):$${HF_TOKEN}"
    # the kubelet expands $(VAR) in args: with the profile in the image, the override is there
    result, ref = _emit(tmp_path / "ref", "--set", "model.path=/m/$(whoami)", "--profile-ref", "x")
    assert result.exit_code == 0, result.output
    args = _docs(ref)[2]["containers"][0]["args"]
    assert "model.path=/m/$$(whoami)" in args
    text = (out / "compose.node0.yaml").read_text()  # the kubelet reads no mount path's $
    assert "${HF_TOKEN}" not in text.replace("$${HF_TOKEN}", "")
    lws_v, compose_v = validators
    assert _errors(compose_v, compose) == [] and _errors(lws_v, lws) == []


def test_an_oci_reference_compose_would_interpolate_is_refused(tmp_path):
    result, out = _emit(tmp_path, "--cache-from", "oci:${HF_TOKEN}")
    assert result.exit_code == 2 and "--cache-from" in result.output, result.output
    assert not out.exists()


def test_a_host_directory_artifact_is_escaped_in_both_targets(tmp_path, validators):  # noqa: F811
    result, out = _emit(tmp_path, "--cache-from", "/data/$(whoami)/a:b.tar")
    assert result.exit_code == 0, result.output
    compose, lws, spec = _docs(out)
    seed = compose["services"]["cache-artifact"]
    bind = next(v for v in seed["volumes"] if isinstance(v, dict))
    assert bind["source"] == "/data/$$(whoami)/a:b.tar" and bind["read_only"] is True
    assert all("$(" not in a.replace("$$(", "") for a in seed["command"])
    init = spec["initContainers"][-1]
    assert all("$(" not in a.replace("$$(", "") for a in init["command"])
    lws_v, compose_v = validators
    assert _errors(compose_v, compose) == [] and _errors(lws_v, lws) == []
