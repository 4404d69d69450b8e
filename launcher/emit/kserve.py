"""The profile as a KServe ``LLMInferenceService`` (``serving.kserve.io/v1alpha1``).

Multi-node without Ray: KServe runs ``spec.template`` as the leader and ``spec.worker`` as
each worker of a LeaderWorkerSet it makes, so the pods are the LeaderWorkerSet target's
(``k8s.py``): the same image, launcher arguments, cache, probes and environment, the leader's
address from LWS's ``$(LWS_LEADER_ADDRESS)``. The container is ``main`` (the name KServe's
configs merge into) and runs the image's entry point explicitly, so a config's ``command``
cannot replace it. The launcher reads the checkpoint itself: KServe's storage initializer is
off and ``model.uri`` names the model for KServe's routing only.
"""

from __future__ import annotations

from pathlib import PurePosixPath

import yaml

from launcher.emit import Target, dns_name, k8s, probes

API_VERSION = "serving.kserve.io/v1alpha1"
KIND = "LLMInferenceService"
CONTAINER = "main"
CONFIG_MAP = "kserve-profile-configmap.yaml"
"""The shipped profile's ConfigMap (the same object as the LeaderWorkerSet target's)."""
ENTRYPOINT = ["dumb-init", "--", "/opt/b12x-launch/entrypoint.sh"]
"""The image's ``ENTRYPOINT`` (``Dockerfile``)."""


def model_uri(path: str) -> str:
    """A hub id as ``hf://org/name``; a checkpoint on the nodes' disk as ``file://PATH``
    (the launcher reads it through the pod's hostPath mount; KServe downloads nothing)."""
    p = PurePosixPath(path)
    return f"file://{p}" if p.is_absolute() else f"hf://{path}"


def _pod(t: Target, name: str, *, leader: bool) -> dict:
    spec = k8s.pod_template(t, name, leader=leader)["spec"]
    for c in spec["containers"]:
        c["name"] = CONTAINER
        c["command"] = list(ENTRYPOINT)
    return spec


def manifest(t: Target) -> dict:
    p = t.profile
    name = dns_name(p.name)
    spec: dict = {
        "model": {"uri": model_uri(p.model.path), "name": p.model.served_name or p.model.path},
        "replicas": 1,
        "parallelism": {"tensor": p.parallel.tensor, "pipeline": p.parallel.pipeline},
        "storageInitializer": {"enabled": False},
        "template": _pod(t, name, leader=True),
    }
    if p.hardware.nodes > 1:
        spec["worker"] = _pod(t, name, leader=False)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": k8s.metadata(name, t),
        "spec": spec,
    }


def render(t: Target) -> dict[str, str]:
    """File name -> text: the service, and the shipped profile's ConfigMap."""
    p = t.profile
    name = dns_name(p.name)
    files = ([CONFIG_MAP] if t.shipped else []) + ["llminferenceservice.yaml"]
    head = (
        f"# {p.name}: {p.hardware.nodes} node(s) x {p.hardware.count} {p.hardware.gpu}, plan "
        f"{t.fingerprint} (b12x-launch emit --target kserve)\n"
        f"# kubectl apply {' '.join('-f ' + f for f in files)}\n"
        "#   (needs KServe's LLMInferenceService controller and, for several nodes, the "
        "LeaderWorkerSet controller; add spec.router for KServe's gateway route)\n"
        f"# leader's startup probe: {(t.startup or probes.DEFAULT).describe()}\n"
    )
    if t.secret_names:
        literals = " ".join(f"--from-literal={k}=..." for k in t.secret_names)
        head += f"# first: kubectl create secret generic {name}-secrets {literals}\n"

    def dump(doc: dict) -> str:
        return head + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=100)

    out = {}
    if t.shipped:
        out[CONFIG_MAP] = dump(k8s.profile_config_map(t))
    out["llminferenceservice.yaml"] = dump(manifest(t))
    return out
