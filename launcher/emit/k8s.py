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

from dataclasses import replace

import yaml

from launcher.emit import (
    CACHE_HOST_PATH,
    CACHE_MOUNT,
    IMAGE_UID,
    PROFILES_MOUNT,
    Target,
    artifact,
    dns_name,
    literal,
    model_mount,
    probes,
)
from launcher.plan.catalog import gpu
from launcher.secrets import secret_env

API_VERSION = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
GPU_RESOURCE = "nvidia.com/gpu"
HEALTH_TIMEOUT_S = 10
"""How long a health probe waits for /health (the image's HEALTHCHECK and compose: 10 s)."""
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
"""The label NVIDIA's GPU feature discovery puts on a node: the CUDA device name, spaces as
dashes (``kubectl get nodes -L nvidia.com/gpu.product`` shows it)."""
CPU_PER_GPU = 4
"""CPU cores requested per GPU: vLLM runs one worker process per GPU, plus the API server and
the tokenizer on the leader."""
MEMORY_PER_GPU_GI = 32
"""Host memory requested per GPU (GiB): loading the weights passes them through host memory;
requests only (no limit), so a large checkpoint is not killed for its page cache."""
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
API_SUFFIX = "-api"
"""The Service in front of the leader: LWS itself creates a headless Service named like the
LeaderWorkerSet (the pods' subdomain, which ``$(LWS_LEADER_ADDRESS)`` resolves through), so
ours must not take that name."""
SHM_SIZE = "32Gi"
"""The memory-backed ``/dev/shm``'s limit (the size ``deploy/compose.glm52.yaml`` gives where
host IPC is not allowed): without one it may grow to the node's memory."""


def _env(t: Target, name: str) -> list[dict]:
    """The plan's environment; a secret becomes a reference to a Secret, never a value."""
    out = []
    for key, value in {**t.env, **artifact.launcher_env(t)}.items():
        if secret_env(key, value):
            ref = {"name": f"{name}-secrets", "key": key}
            out.append({"name": key, "valueFrom": {"secretKeyRef": ref}})
        else:
            out.append({"name": key, "value": literal(value)})
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
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM_SIZE}},
    ]
    if t.shipped:  # the profile travels with the manifests, not in the image
        mounts.append({"name": "profile", "mountPath": PROFILES_MOUNT, "readOnly": True})
        volumes.append({"name": "profile", "configMap": {"name": f"{dns_name(p.name)}-profile"}})
    model = model_mount(p.model.path)
    if model is not None:  # a local checkpoint: the node's copy of it, itself, read-only
        mounts.append({"name": "models", "mountPath": model, "readOnly": True})
        volumes.append({"name": "models", "hostPath": {"path": model}})
    if t.artifact is not None:  # mounted by the seeding init container only
        volumes.append(_artifact_volume(t.artifact))
    return mounts, volumes


def _artifact_volume(source: artifact.ArtifactSource) -> dict:
    """The artifact's source as a pod volume: an OCI image (an image volume), a claim or a
    directory on the node; read-only in every form."""
    if source.kind == "oci":
        return {
            "name": artifact.VOLUME,
            "image": {"reference": source.value, "pullPolicy": "IfNotPresent"},
        }
    if source.kind == "pvc":
        claim = {"claimName": source.value, "readOnly": True}
        return {"name": artifact.VOLUME, "persistentVolumeClaim": claim}
    return {"name": artifact.VOLUME, "hostPath": {"path": source.value}}


def _seed(t: Target) -> dict:
    """An init step that copies the artifact, verified, onto the node's cache volume (after
    ``cache-owner`` gave the volume to the image's user); the launcher restores it from there
    before vLLM starts, checking its keys against the node."""
    assert t.artifact is not None
    return {
        "name": artifact.VOLUME,
        "image": t.image,
        "command": [literal(a) for a in artifact.seed_command(t)],
        "volumeMounts": [
            {"name": "cache", "mountPath": CACHE_MOUNT},
            {
                "name": artifact.VOLUME,
                "mountPath": artifact.source_mount(t.artifact),
                "readOnly": True,
            },
        ],
    }


def _container(t: Target, name: str, *, leader: bool) -> dict:
    p = t.profile
    rank = "0" if leader else "$(LWS_WORKER_INDEX)"
    master = "$(LWS_LEADER_ADDRESS)" if p.hardware.nodes > 1 else None
    mounts, _ = _volumes(t)
    # The profile's own words are literal; only the rank and the leader's address expand.
    own = replace(t, profile_ref=literal(t.profile_ref), overrides=tuple(map(literal, t.overrides)))
    c: dict = {
        "name": "vllm",
        "image": t.image,
        "args": own.launcher_args(rank, master),
        "env": _env(t, name),
        "volumeMounts": mounts,
    }
    gpus = p.hardware.count if p.hardware.gpu != "cpu" else 0
    requests = {
        "cpu": str(CPU_PER_GPU * max(gpus, 1)),
        "memory": f"{MEMORY_PER_GPU_GI * max(gpus, 1)}Gi",
    }
    c["resources"] = {"requests": requests}
    if gpus:
        c["resources"] = {
            "limits": {GPU_RESOURCE: str(gpus)},
            "requests": {**requests, GPU_RESOURCE: str(gpus)},
        }
    ports = []
    if leader:
        ports.append({"name": "http", "containerPort": p.serving.port})
        if p.hardware.nodes > 1:
            ports.append({"name": "rendezvous", "containerPort": p.runtime.master_port})
        # /health waits behind a busy engine: 10 s, as the image's HEALTHCHECK and compose
        # allow, not the kubelet's 1 s default that drops a loaded server from the Service.
        c["readinessProbe"] = {
            "httpGet": {"path": "/health", "port": p.serving.port},
            "periodSeconds": 10,
            "timeoutSeconds": HEALTH_TIMEOUT_S,
            "failureThreshold": 3,
        }
        # A cold start compiles kernels before vLLM answers: as long as this plan's boots took.
        budget = t.startup or probes.DEFAULT
        c["startupProbe"] = {
            "httpGet": {"path": "/health", "port": p.serving.port},
            "periodSeconds": budget.period,
            "timeoutSeconds": HEALTH_TIMEOUT_S,
            "failureThreshold": budget.failures,
        }
    elif p.hardware.nodes > 1:  # no HTTP: its vLLM alive and the leader's port answering
        c.update(probes.k8s_worker(p.runtime.master_port, t.startup or probes.DEFAULT))
    if ports:
        c["ports"] = ports
    return c


def _cache_owner(t: Target) -> dict:
    """An init step that gives the node's cache directory to the image's user: the kubelet
    creates a hostPath directory as root 0755, where the entry point cannot write (and
    ``fsGroup`` does not apply to hostPath volumes)."""
    ids = f"{IMAGE_UID}:{IMAGE_UID}"
    return {
        "name": "cache-owner",
        "image": t.image,
        "command": ["sh", "-c", f"chown {ids} {CACHE_MOUNT} && chmod 0775 {CACHE_MOUNT}"],
        "securityContext": {"runAsUser": 0, "runAsGroup": 0, "runAsNonRoot": False},
        "volumeMounts": [{"name": "cache", "mountPath": CACHE_MOUNT}],
    }


def _gpu_affinity(t: Target) -> dict | None:
    """Only nodes with the GPU the plan was made for (its memory is the plan's): the
    catalog's ``k8s_products`` of its kind."""
    products = gpu(t.profile.hardware.gpu).k8s_products
    if not products:
        return None
    term = {"key": GPU_PRODUCT_LABEL, "operator": "In", "values": list(products)}
    selector = {"nodeSelectorTerms": [{"matchExpressions": [term]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": selector}}


def pod_template(t: Target, name: str, *, leader: bool) -> dict:
    """The pod of the leader (``leader``) or a worker: its containers, volumes, user and
    node affinity (KServe's pods are these too)."""
    _, volumes = _volumes(t)
    role = "leader" if leader else "worker"
    spec: dict = {
        "initContainers": [_cache_owner(t)] + ([_seed(t)] if t.artifact is not None else []),
        "containers": [_container(t, name, leader=leader)],
        "volumes": volumes,
        "securityContext": {"runAsUser": IMAGE_UID, "runAsGroup": IMAGE_UID, "fsGroup": IMAGE_UID},
        # vLLM drains requests and stops its workers on SIGTERM.
        "terminationGracePeriodSeconds": 120,
    }
    affinity = _gpu_affinity(t)
    if affinity:
        spec["affinity"] = affinity
    return {
        "metadata": {"labels": {"app.kubernetes.io/name": name, "b12x-launch/role": role}},
        "spec": spec,
    }


def metadata(name: str, t: Target) -> dict:
    """A resource's metadata: its name, the app label and the plan it serves."""
    return {
        "name": name,
        "labels": {"app.kubernetes.io/name": name},
        "annotations": {"b12x-launch/plan": t.fingerprint},
    }


def manifest(t: Target) -> dict:
    """The LeaderWorkerSet as a dict (what ``render`` writes)."""
    name = dns_name(t.profile.name)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": metadata(name, t),
        "spec": {
            "replicas": 1,
            "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": {
                "size": t.profile.hardware.nodes,
                # One pod of a group lost means the whole TP group is: restart them together.
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": pod_template(t, name, leader=True),
                "workerTemplate": pod_template(t, name, leader=False),
            },
        },
    }


def service(t: Target) -> dict:
    """A Service in front of the leader's API port (LWS's own service is headless)."""
    name = dns_name(t.profile.name)
    port = t.profile.serving.port
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name + API_SUFFIX, "labels": {"app.kubernetes.io/name": name}},
        "spec": {
            "selector": {LWS_NAME_LABEL: name, LWS_INDEX_LABEL: "0"},
            "ports": [{"name": "http", "port": port, "targetPort": port, "protocol": "TCP"}],
        },
    }


def profile_config_map(t: Target) -> dict:
    """The shipped profile as a ConfigMap, mounted at ``/profiles`` in every pod."""
    name = dns_name(t.profile.name)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-profile", "labels": {"app.kubernetes.io/name": name}},
        "data": {t.shipped_name: t.shipped},
    }


def render(t: Target) -> dict[str, str]:
    """File name -> text."""
    p = t.profile
    name = dns_name(p.name)
    files = ["profile-configmap.yaml"] if t.shipped else []
    files += ["service.yaml", "leaderworkerset.yaml"]
    head = (
        f"# {p.name}: {p.hardware.nodes} node(s) x {p.hardware.count} "
        f"{p.hardware.gpu}, plan {t.fingerprint} (b12x-launch emit)\n"
        f"# kubectl apply {' '.join('-f ' + f for f in files)}\n"
        "#   (needs the LeaderWorkerSet controller)\n"
        f"# leader's startup probe: {(t.startup or probes.DEFAULT).describe()}\n"
    )
    secrets = t.secret_names
    if secrets:
        literals = " ".join(f"--from-literal={k}=..." for k in secrets)
        head += f"# first: kubectl create secret generic {name}-secrets {literals}\n"
    if t.artifact is not None:
        head += f"# cache artifact: {t.artifact.describe()}, seeded by the init container\n"
        if t.artifact.kind == "oci":
            head += (
                "#   (an image volume: on by default from Kubernetes 1.35; 1.31-1.34 need the "
                "ImageVolume feature gate)\n"
            )
    out = {}

    def dump(doc: dict) -> str:
        return head + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=100)

    if t.shipped:
        out["profile-configmap.yaml"] = dump(profile_config_map(t))
    out["service.yaml"] = dump(service(t))
    out["leaderworkerset.yaml"] = dump(manifest(t))
    return out
