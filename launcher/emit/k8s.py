"""The profile as a Kubernetes LeaderWorkerSet (``leaderworkerset.x-k8s.io/v1``).

One group per replica of the deployment: the leader pod is node 0 (it serves the API), each
worker pod is node ``$(LWS_WORKER_INDEX)`` (headless). LWS gives every pod the leader's
address (``$(LWS_LEADER_ADDRESS)``), which becomes ``runtime.master_addr``; the kubelet
expands ``$(VAR)`` in ``args`` from the container's environment. Both templates run the same
image and entry point, mount the node's JIT cache at ``/cache``, request the profile's GPUs
per pod and carry the plan's environment; only the leader has a readiness probe on
``/health`` (workers serve no HTTP).
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

import yaml

from launcher.emit import CACHE_HOST_PATH, CACHE_MOUNT, Target
from launcher.secrets import is_secret

API_VERSION = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
GPU_RESOURCE = "nvidia.com/gpu"


def dns_name(name: str) -> str:
    """``name`` as an RFC 1123 label (what Kubernetes accepts as a resource name)."""
    label = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")
    return (label[:63].rstrip("-")) or "b12x-launch"


def _env(t: Target, name: str) -> list[dict]:
    """The plan's environment; a secret becomes a reference to a Secret, never a value."""
    out = []
    for key, value in t.env.items():
        if is_secret(key):
            ref = {"name": f"{name}-secrets", "key": key}
            out.append({"name": key, "valueFrom": {"secretKeyRef": ref}})
        else:
            out.append({"name": key, "value": str(value)})
    return out


def _volumes(t: Target) -> tuple[list[dict], list[dict]]:
    p = t.profile
    mounts = [
        {"name": "cache", "mountPath": CACHE_MOUNT},
        {"name": "dshm", "mountPath": "/dev/shm"},
    ]
    volumes = [
        {"name": "cache", "hostPath": {"path": CACHE_HOST_PATH, "type": "DirectoryOrCreate"}},
        # vLLM's workers and NCCL share memory through /dev/shm: a memory-backed one.
        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
    ]
    model = PurePosixPath(p.model.path)
    if model.is_absolute():  # a local checkpoint: the node's copy, read-only
        mounts.append({"name": "models", "mountPath": str(model.parent), "readOnly": True})
        volumes.append({"name": "models", "hostPath": {"path": str(model.parent)}})
    return mounts, volumes


def _container(t: Target, name: str, *, leader: bool) -> dict:
    p = t.profile
    rank = "0" if leader else "$(LWS_WORKER_INDEX)"
    master = "$(LWS_LEADER_ADDRESS)" if p.hardware.nodes > 1 else None
    mounts, _ = _volumes(t)
    c: dict = {
        "name": "vllm",
        "image": t.image,
        "args": t.launcher_args(rank, master),
        "env": _env(t, name),
        "volumeMounts": mounts,
    }
    if p.hardware.gpu != "cpu":
        gpus = {GPU_RESOURCE: str(p.hardware.count)}
        c["resources"] = {"limits": dict(gpus), "requests": dict(gpus)}
    ports = []
    if leader:
        ports.append({"name": "http", "containerPort": p.serving.port})
        if p.hardware.nodes > 1:
            ports.append({"name": "rendezvous", "containerPort": p.runtime.master_port})
        c["readinessProbe"] = {
            "httpGet": {"path": "/health", "port": p.serving.port},
            "periodSeconds": 10,
            "failureThreshold": 3,
        }
        # A cold start compiles kernels before vLLM answers: up to 30 minutes.
        c["startupProbe"] = {
            "httpGet": {"path": "/health", "port": p.serving.port},
            "periodSeconds": 10,
            "failureThreshold": 180,
        }
    if ports:
        c["ports"] = ports
    return c


def _pod_template(t: Target, name: str, *, leader: bool) -> dict:
    _, volumes = _volumes(t)
    role = "leader" if leader else "worker"
    return {
        "metadata": {"labels": {"app.kubernetes.io/name": name, "b12x-launch/role": role}},
        "spec": {
            "containers": [_container(t, name, leader=leader)],
            "volumes": volumes,
            # vLLM drains requests and stops its workers on SIGTERM.
            "terminationGracePeriodSeconds": 120,
        },
    }


def manifest(t: Target) -> dict:
    """The LeaderWorkerSet as a dict (what ``render`` writes)."""
    name = dns_name(t.profile.name)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/name": name},
            "annotations": {"b12x-launch/plan": t.fingerprint},
        },
        "spec": {
            "replicas": 1,
            "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": {
                "size": t.profile.hardware.nodes,
                # One pod of a group lost means the whole TP group is: restart them together.
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": _pod_template(t, name, leader=True),
                "workerTemplate": _pod_template(t, name, leader=False),
            },
        },
    }


def render(t: Target) -> dict[str, str]:
    """File name -> text."""
    head = (
        f"# {t.profile.name}: {t.profile.hardware.nodes} node(s) x {t.profile.hardware.count} "
        f"{t.profile.hardware.gpu}, plan {t.fingerprint} (b12x-launch emit)\n"
        "# kubectl apply -f leaderworkerset.yaml  (needs the LeaderWorkerSet controller)\n"
    )
    text = yaml.safe_dump(manifest(t), sort_keys=False, default_flow_style=False, width=100)
    return {"leaderworkerset.yaml": head + text}
