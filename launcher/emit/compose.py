"""The profile as one docker compose file per node (``compose.node<N>.yaml``).

Run ``docker compose -f compose.node<N>.yaml up -d`` on node N (node 0 at
``runtime.master_addr``). Host networking: vLLM's workers reach each other (and node 0's
``runtime.master_port``) on the hosts' addresses, as NCCL needs. Each node keeps its own JIT
cache in the ``cache`` volume; only node 0 has the health check (workers serve no HTTP: the
image's HEALTHCHECK is disabled on them).
"""

from __future__ import annotations

import yaml

from launcher.emit import CACHE_MOUNT, Target, artifact, dns_name, literal, model_mount, probes
from launcher.secrets import secret_env

HEALTHCHECK = (
    "python3 -c \"import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + "
    "(os.environ.get('BLAUNCH_PORT') or '8000') + '/health', timeout=8)\" || exit 1"
)


SHIPPED_PREFIX = "profile."
"""The shipped profile's file beside the compose files: ``profile.<name>.yaml``."""


def _master(t: Target) -> str | None:
    """Node 0's address as the profile (with its ``--set``) has it, for a profile in the
    image: every node must be told the same address."""
    p = t.profile
    return p.runtime.master_addr if p.hardware.nodes > 1 else None


def _leader(t: Target) -> str:
    """Node 0's address as every node is told it (the profile's, with its ``--set``)."""
    return t.profile.runtime.master_addr or "127.0.0.1"


def service(t: Target, rank: int) -> dict:
    p = t.profile
    # A secret by name only: compose takes its value from the shell or an .env file at `up`.
    env = {
        k: (
            f"${{{k}:?set {k} in the environment of docker compose}}"
            if secret_env(k, v)
            else literal(v)
        )
        for k, v in {**t.env, **artifact.launcher_env(t)}.items()
    }
    volumes = [f"cache:{CACHE_MOUNT}"]
    if t.shipped:  # the profile beside this file, where the entry point looks first
        volumes.append(f"./{SHIPPED_PREFIX}{t.shipped_name}:{t.shipped_ref}:ro")
    model = model_mount(p.model.path)
    if model is not None:  # the checkpoint itself, read-only
        volumes.append(bind(model, model))
    s: dict = {
        "image": t.image,
        "command": [
            literal(a) for a in t.launcher_args(str(rank), None if t.shipped else _master(t))
        ],
        "environment": env,
        "network_mode": "host",
        "ipc": "host",
        "volumes": volumes,
        "ulimits": {"memlock": -1, "stack": 67108864},
        "stop_grace_period": "2m",
        "restart": "unless-stopped" if rank == 0 else "on-failure",
    }
    if t.artifact is not None:  # the seeding service ran to its end (a failure stops here)
        s["depends_on"] = {artifact.VOLUME: {"condition": "service_completed_successfully"}}
    if p.hardware.gpu != "cpu":
        device = {"driver": "nvidia", "count": p.hardware.count, "capabilities": ["gpu"]}
        s["deploy"] = {"resources": {"reservations": {"devices": [device]}}}
    budget = t.startup or probes.DEFAULT
    if rank > 0:
        # A headless node serves no HTTP (the image's own HEALTHCHECK would call it unhealthy,
        # or report node 0's health as its own): its vLLM alive and node 0's port answering.
        s["healthcheck"] = probes.compose_worker(p.runtime.master_port, _leader(t), budget)
    else:
        s["healthcheck"] = {
            "test": ["CMD-SHELL", HEALTHCHECK],
            "interval": "30s",
            "timeout": "10s",
            "retries": 3,
            "start_period": f"{budget.seconds}s",
        }
    return s


def bind(source: str, target: str) -> dict:
    """A read-only bind mount in compose's long syntax: a ``:`` in a path cannot split it (as
    in ``SRC:DST:ro``), and ``$`` is escaped (compose interpolates every string)."""
    return {"type": "bind", "source": literal(source), "target": literal(target), "read_only": True}


def seed_service(t: Target) -> dict:
    """A one-shot service that copies the artifact, verified, into the ``cache`` volume before
    the node's server starts (which restores it, checking its keys against the node)."""
    assert t.artifact is not None
    source = t.artifact
    if source.kind == "oci":  # Compose v2 on an engine with image mounts
        mount: str | dict = {
            "type": "image",
            "source": literal(source.value),
            "target": artifact.source_mount(source),
        }
    elif source.kind == "dir":
        mount = bind(source.value, artifact.source_mount(source))
    else:
        raise ValueError("compose mounts no PersistentVolumeClaim")  # emit refuses it first
    return {
        "image": t.image,
        "entrypoint": artifact.seed_command(t)[:3],
        "command": [literal(a) for a in artifact.seed_command(t)[3:]],
        "volumes": [f"cache:{CACHE_MOUNT}", mount],
        "network_mode": "none",
        "restart": "no",
        "healthcheck": {"disable": True},
    }


def render(t: Target) -> dict[str, str]:
    """File name -> text, one file per node."""
    p = t.profile
    name = dns_name(p.name)
    files = {}
    for rank in range(p.hardware.nodes):
        role = "serves the API" if rank == 0 else "headless"
        head = (
            f"# {p.name}: node {rank} of {p.hardware.nodes} ({role}), plan {t.fingerprint}\n"
            f"#   docker compose -f compose.node{rank}.yaml up -d   (on node {rank})\n"
            f"#   start period: {(t.startup or probes.DEFAULT).describe()}\n"
        )
        if t.shipped:
            head += f"#   with {SHIPPED_PREFIX}{t.shipped_name} beside this file (the profile)\n"
        secrets = t.secret_names
        if secrets:
            head += (
                f"#   {', '.join(secrets)}: from the shell or an .env file beside this file, "
                "never written here\n"
            )
        services = {"vllm": service(t, rank)}
        if t.artifact is not None:
            services[artifact.VOLUME] = seed_service(t)
            head += (
                f"#   cache artifact: {t.artifact.describe()}, copied into the cache volume by "
                f"the {artifact.VOLUME} service first\n"
            )
        doc = {"name": f"{name}-node{rank}", "services": services, "volumes": {"cache": {}}}
        text = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=100)
        files[f"compose.node{rank}.yaml"] = head + text
    if t.shipped:
        files[f"{SHIPPED_PREFIX}{t.shipped_name}"] = t.shipped
    return files
