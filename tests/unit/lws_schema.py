"""A structural check of a LeaderWorkerSet v1 manifest, offline.

The field names and types below are those of ``leaderworkerset.x-k8s.io/v1``
(sigs.k8s.io/lws api/leaderworkerset/v1: ``LeaderWorkerSetSpec.replicas`` int32,
``leaderWorkerTemplate`` with ``size`` int32, ``leaderTemplate`` an optional and
``workerTemplate`` a required ``corev1.PodTemplateSpec``, ``restartPolicy``,
``startupPolicy``), and of the core v1 pod fields the manifest uses. On top of the shape,
``needs`` checks what a b12x-launch leader or worker cannot run without.
"""

from __future__ import annotations

LWS_SPEC = {"replicas": int, "leaderWorkerTemplate": dict, "startupPolicy": str}
LWS_TEMPLATE = {
    "size": int,
    "leaderTemplate": dict,
    "workerTemplate": dict,
    "restartPolicy": str,
    "subGroupPolicy": dict,
    "volumeClaimTemplates": list,
}
RESTART_POLICIES = {"RecreateGroupOnPodRestart", "None"}
STARTUP_POLICIES = {"LeaderCreated", "LeaderReady"}
POD_TEMPLATE = {"metadata": dict, "spec": dict}
POD_SPEC = {
    "initContainers": list,
    "securityContext": dict,
    "affinity": dict,
    "containers": list,
    "volumes": list,
    "terminationGracePeriodSeconds": int,
    "nodeSelector": dict,
    "tolerations": list,
}
CONTAINER = {
    "securityContext": dict,
    "name": str,
    "image": str,
    "command": list,
    "args": list,
    "env": list,
    "volumeMounts": list,
    "resources": dict,
    "ports": list,
    "readinessProbe": dict,
    "startupProbe": dict,
    "livenessProbe": dict,
}


def _fields(obj, allowed: dict, where: str, problems: list[str]) -> None:
    if not isinstance(obj, dict):
        problems.append(f"{where}: must be a mapping")
        return
    for key, value in obj.items():
        if key not in allowed:
            problems.append(f"{where}.{key}: not a field of this type")
        elif not isinstance(value, allowed[key]) or isinstance(value, bool):
            problems.append(f"{where}.{key}: must be {allowed[key].__name__}")


def shape(m: dict) -> list[str]:
    """Problems with the manifest's LeaderWorkerSet v1 structure."""
    problems: list[str] = []
    if m.get("apiVersion") != "leaderworkerset.x-k8s.io/v1":
        problems.append("apiVersion: must be leaderworkerset.x-k8s.io/v1")
    if m.get("kind") != "LeaderWorkerSet":
        problems.append("kind: must be LeaderWorkerSet")
    if not isinstance(m.get("metadata", {}).get("name"), str):
        problems.append("metadata.name: required")
    spec = m.get("spec")
    _fields(spec, LWS_SPEC, "spec", problems)
    if not isinstance(spec, dict):
        return problems
    if spec.get("startupPolicy", "LeaderCreated") not in STARTUP_POLICIES:
        problems.append("spec.startupPolicy: unknown value")
    tmpl = spec.get("leaderWorkerTemplate")
    if not isinstance(tmpl, dict):
        problems.append("spec.leaderWorkerTemplate: required")
        return problems
    _fields(tmpl, LWS_TEMPLATE, "spec.leaderWorkerTemplate", problems)
    if not isinstance(tmpl.get("size"), int) or tmpl["size"] < 1:
        problems.append("spec.leaderWorkerTemplate.size: required, at least 1")
    if tmpl.get("restartPolicy", "None") not in RESTART_POLICIES:
        problems.append("spec.leaderWorkerTemplate.restartPolicy: unknown value")
    if "workerTemplate" not in tmpl:
        problems.append("spec.leaderWorkerTemplate.workerTemplate: required")
    for role in ("leaderTemplate", "workerTemplate"):
        if role in tmpl:
            _pod_template(tmpl[role], f"spec.leaderWorkerTemplate.{role}", problems)
    return problems


def _pod_template(t, where: str, problems: list[str]) -> None:
    _fields(t, POD_TEMPLATE, where, problems)
    spec = t.get("spec") if isinstance(t, dict) else None
    if not isinstance(spec, dict):
        problems.append(f"{where}.spec: required")
        return
    _fields(spec, POD_SPEC, f"{where}.spec", problems)
    containers = spec.get("containers")
    if not containers:
        problems.append(f"{where}.spec.containers: at least one")
        return
    for i, c in enumerate(containers):
        cw = f"{where}.spec.containers[{i}]"
        _fields(c, CONTAINER, cw, problems)
        for key in ("name", "image"):
            if key not in c:
                problems.append(f"{cw}.{key}: required")
        for j, e in enumerate(c.get("env", [])):
            if "name" not in e or ("value" in e) == ("valueFrom" in e):
                problems.append(f"{cw}.env[{j}]: name and exactly one of value/valueFrom")
            elif "value" in e and not isinstance(e["value"], str):
                problems.append(f"{cw}.env[{j}].value: must be a string")
        for j, a in enumerate(c.get("args", [])):
            if not isinstance(a, str):
                problems.append(f"{cw}.args[{j}]: must be a string")
    names = {v.get("name") for v in spec.get("volumes", [])}
    for c in containers:
        for vm in c.get("volumeMounts", []):
            if vm.get("name") not in names:
                problems.append(f"{where}: volumeMount {vm.get('name')} has no volume")


def needs(m: dict, *, gpus: int, port: int, env: dict[str, str], image: str) -> list[str]:
    """What the leader and the workers of a b12x-launch deployment cannot do without."""
    problems: list[str] = []
    tmpl = m["spec"]["leaderWorkerTemplate"]
    for role in ("leaderTemplate", "workerTemplate"):
        c = tmpl.get(role, {}).get("spec", {}).get("containers", [{}])[0]
        if c.get("image") != image:
            problems.append(f"{role}: not the image {image}")
        if "command" in c:
            problems.append(f"{role}: overrides the image's entry point")
        args = c.get("args", [])
        if "--node-rank" not in args:
            problems.append(f"{role}: no --node-rank")
        want = "0" if role == "leaderTemplate" else "$(LWS_WORKER_INDEX)"
        if "--node-rank" in args and args[args.index("--node-rank") + 1] != want:
            problems.append(f"{role}: --node-rank is not {want}")
        if "runtime.master_addr=$(LWS_LEADER_ADDRESS)" not in args:
            problems.append(f"{role}: master_addr is not the leader's address")
        if not any(vm.get("mountPath") == "/cache" for vm in c.get("volumeMounts", [])):
            problems.append(f"{role}: no /cache volume")
        have = {e["name"]: e.get("value") for e in c.get("env", [])}
        for key, value in env.items():
            if have.get(key) != value:
                problems.append(f"{role}: env {key} missing or not {value!r}")
        if gpus:
            res = c.get("resources", {})
            for kind in ("limits", "requests"):
                if res.get(kind, {}).get("nvidia.com/gpu") != str(gpus):
                    problems.append(f"{role}: {kind} nvidia.com/gpu is not {gpus}")
        probe = c.get("readinessProbe", {}).get("httpGet", {})
        if role == "leaderTemplate" and (probe.get("path"), probe.get("port")) != ("/health", port):
            problems.append(f"{role}: no readiness probe on /health:{port}")
        if role == "workerTemplate" and probe:
            problems.append(f"{role}: a readiness probe on a headless worker never passes")
    return problems
