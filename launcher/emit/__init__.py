"""One plan, every target: the same profile as a Kubernetes LeaderWorkerSet and as
per-node docker compose files.

Each target runs the same image and entry point (``docker/entrypoint.sh``) with the same
launcher arguments as a shell on the node would: the profile, its ``--set`` overrides and
the node's ``--node-rank``; the launcher on each node then plans and checks its own GPUs
and meets the other nodes before vLLM starts. Nothing here imports torch, vLLM or b12x.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import yaml

from launcher.artifact import SOURCE_MOUNT
from launcher.errors import ProfileError
from launcher.owned import write as owned_write
from launcher.secrets import drop_secrets, secret_env, secret_value

if TYPE_CHECKING:
    from launcher.emit.artifact import ArtifactSource
    from launcher.emit.probes import StartupBudget
    from launcher.profile import LoadedProfile

DEFAULT_IMAGE = "b12x-launch:latest"
CACHE_MOUNT = "/cache"
CACHE_HOST_PATH = "/var/cache/b12x-launch"
"""Where each machine keeps its JIT caches: a node's kernels are compiled for its GPUs."""
IMAGE_UID = 10001
"""The image's user and group (``BLAUNCH_UID``/``BLAUNCH_GID`` in the Dockerfile): the cache
must be writable by them, which a directory the kubelet creates (root, 0755) is not."""
PROFILES_MOUNT = "/profiles"
"""Where the shipped profile is mounted (first of the image's ``BLAUNCH_PROFILE_DIRS``)."""

IMAGE_PATHS = (
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/proc", "/run", "/sbin",
    "/sys", "/usr", "/var/run", "/opt/b12x-launch", CACHE_MOUNT, PROFILES_MOUNT,
    SOURCE_MOUNT,
)  # fmt: skip
"""The image's own trees and the mounts emit makes (``launcher.artifact.SOURCE_MOUNT``): a
checkpoint mounted at, over or under one would hide the image's files or the cache, or put a
host's system tree (``/var/run/docker.sock``) in the container."""

EXAMPLE_ADDRESSES = re.compile(
    r"^(10\.0\.0\.1|192\.0\.2\.\d+|198\.51\.100\.\d+|203\.0\.113\.\d+|127\.\d+\.\d+\.\d+"
    r"|localhost|0\.0\.0\.0|.*\bexample(\.(com|org|net))?)$",
    re.I,
)
"""Addresses that cannot be node 0 of a real cluster: the profiles' example, the
documentation ranges (RFC 5737), loopback, and example domains."""


@dataclass(frozen=True)
class Target:
    """What every emitted file shares: how to run the launcher in the image."""

    loaded: LoadedProfile
    fingerprint: str
    image: str = DEFAULT_IMAGE
    profile_ref: str = ""
    """The profile as the container's entry point finds it (a path in the image or a name
    under ``/profiles``)."""
    overrides: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    shipped: str = ""
    """The profile shipped with the manifests (one YAML file, ``extends:`` and ``--set``
    resolved, secret values left out), mounted at ``PROFILES_MOUNT``; empty when the image
    has it (``--profile-ref``)."""
    artifact: ArtifactSource | None = None
    """The cache artifact each node seeds its cache volume with before it starts
    (``emit --cache-from``; ``launcher/emit/artifact.py``), or None."""
    startup: StartupBudget | None = None
    """How long the leader may take to answer, and why (``launcher/emit/probes.py``); None:
    the default budget."""

    @property
    def secret_names(self) -> list[str]:
        """The variables passed by name only (a Secret, the host's environment)."""
        return [k for k, v in self.env.items() if secret_env(k, v)]

    @property
    def shipped_name(self) -> str:
        """The shipped profile's file name under ``PROFILES_MOUNT``."""
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", self.loaded.profile.name or "").strip(".-")
        return f"{name or 'profile'}.yaml"

    @property
    def shipped_ref(self) -> str:
        """The shipped profile's path in the container."""
        return f"{PROFILES_MOUNT}/{self.shipped_name}"

    @property
    def profile(self):
        return self.loaded.profile

    def launcher_args(self, node_rank: str, master_addr: str | None = None) -> list[str]:
        args = [self.shipped_ref if self.shipped else self.profile_ref]
        for o in self.overrides:
            args += ["--set", o]
        if master_addr is not None:
            args += ["--set", f"runtime.master_addr={master_addr}"]
        if self.profile.hardware.nodes > 1:
            args += ["--node-rank", node_rank]
        return args


_IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,254}$")
"""An image reference as the container engines take it (``registry:port/name:tag@digest``):
no space, no newline, no shell or YAML syntax, 255 characters at most."""


NAME_MAX = 45
"""The longest LeaderWorkerSet name: LWS names the workers' StatefulSet ``<name>-<group>`` and
their pods ``<name>-<group>-<index>``, and the StatefulSet controller labels each pod with
``<statefulset>-<revision hash>`` (up to 10 characters); a label value is 63 at most."""


def dns_name(name: str) -> str:
    """``name`` as a LeaderWorkerSet name: an RFC 1035 label (LWS makes a Service of it, which
    must start with a letter) of ``NAME_MAX`` characters at most; a longer one keeps a hash of
    the whole name, so two long names that share a beginning stay apart."""
    label = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")
    if not label[:1].isalpha():
        label = f"b12x-{label}" if label else "b12x-launch"
    if len(label) > NAME_MAX:
        digest = hashlib.sha256(name.encode()).hexdigest()[:6]
        label = f"{label[: NAME_MAX - len(digest) - 1].rstrip('-')}-{digest}"
    return label


CREDENTIAL = (
    "holds a credential (a URL's userinfo, or a secret key in JSON or YAML; not shown): every "
    "emitted file would carry it"
)


def image_problem(image: str) -> str | None:
    """Why ``image`` is not an image reference (None: it is one)."""
    if secret_value(image):
        return f"the image {CREDENTIAL}; log in to the registry instead (an imagePullSecret)"
    if not _IMAGE.match(image) or "//" in image:
        return f"{image[:60]!r} is not an image reference (registry/name:tag, e.g. b12x-launch:gg)"
    return None


def profile_ref_problem(ref: str) -> str | None:
    """Why ``ref`` cannot name the profile in the image (None: it can)."""
    if secret_value(ref):
        return f"the profile reference {CREDENTIAL}; name a path or a profile in the image"
    if not ref.strip() or not ref.isprintable() or ref.startswith("-") or len(ref) > 4096:
        return (
            f"{ref[:60]!r} is not a profile path or name (printable, not an option, at most "
            "4096 characters), e.g. glm52 or /profiles/glm52.yaml"
        )
    return None


def literal(value: object) -> str:
    """``value`` as written, for both targets: compose interpolates ``$VAR`` and ``${VAR}`` in
    every value at ``up``, the kubelet ``$(VAR)`` in ``args`` and env values; ``$$`` is a
    literal ``$`` to both. Only the secrets' and LWS's own variables are meant to expand."""
    return str(value).replace("$", "$$")


def secret_override(override: str) -> bool:
    """``env.HF_TOKEN=...`` or ``env={HF_TOKEN: ...}``: a ``--set`` whose value is a secret,
    by its key or by a key inside its value (never written in args)."""
    from launcher.profile.load import names_a_secret

    return names_a_secret(override)


def shipped_profile(loaded: LoadedProfile, overrides: tuple[str, ...], fingerprint: str) -> str:
    """The profile as one file for the container: parents merged, overrides applied, every
    secret variable left out (the container gets it from a Secret or the host's shell)."""
    from launcher.profile.load import read_profile

    data = drop_secrets(read_profile(loaded.path).merged(overrides))
    data["name"] = loaded.profile.name
    (data.get("runtime") or {}).pop("node_rank", None)  # set per node by each target
    head = (
        f"# {loaded.profile.name}: plan {fingerprint}, written by b12x-launch emit from "
        f"{loaded.path}\n# (extends and --set resolved; secret variables come from the "
        "environment, never from this file)\n"
    )
    return head + yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=100)


def address_warnings(loaded: LoadedProfile) -> list[str]:
    """Multi-node files that would point at an example address."""
    p = loaded.profile
    addr = p.runtime.master_addr or ""
    if p.hardware.nodes > 1 and EXAMPLE_ADDRESSES.match(addr.strip()):
        message = (
            f"the compose files point every node at {addr}, an example address, not node 0 "
            "of your cluster; emit again with --set runtime.master_addr=<node 0's address> "
            "(the LeaderWorkerSet finds its leader itself)"
        )
        return [str(loaded.issue("runtime.master_addr", message))]
    return []


def plan_env(loaded: LoadedProfile) -> dict[str, str]:
    """The plan's own environment for a container: the profile's ``env`` plus the port the
    health check reads. Cache paths are not here: the entry point keys them by image build."""
    p = loaded.profile
    return {**p.env, "BLAUNCH_PORT": str(p.serving.port)}


def model_mount(path: str) -> str | None:
    """The host directory emit mounts, read-only and at the same path, for ``model.path``: the
    checkpoint itself, never its parent (None: not a local path, the image or the hub has it)."""
    if not PurePosixPath(path).is_absolute():
        return None
    return posixpath.normpath(path).replace("//", "/")


def _within(path: str, tree: str) -> bool:
    return path == tree or path.startswith(tree.rstrip("/") + "/")


def model_mount_problem(path: str) -> str | None:
    """Why the checkpoint at ``path`` cannot be mounted as it is (None: it can)."""
    mount = model_mount(path)
    if mount is None:
        return None
    if mount == "/":
        return "mounts the host's whole root filesystem"
    if not mount.isprintable():
        return "holds a control character"
    for tree in IMAGE_PATHS:
        if _within(mount, tree):
            return f"lies in {tree}, a path the image or the deployment owns"
        if _within(tree, mount):
            return f"would hide {tree}, a path the image or the deployment owns"
    return None


def check_target(loaded: LoadedProfile) -> None:
    """Refuse what the emitted files cannot run, before anything is written."""
    p = loaded.profile
    problem = model_mount_problem(p.model.path)
    if problem is not None:
        raise ProfileError(
            [
                loaded.issue(
                    "model.path",
                    f"{p.model.path!r} {problem}; emit mounts model.path itself, read-only: "
                    "keep the checkpoint in a directory of its own (e.g. /models/NAME)",
                )
            ]
        )
    if p.hardware.nodes > 1 and p.runtime.multinode != "mp":
        raise ProfileError(
            [
                loaded.issue(
                    "runtime.multinode",
                    "emit writes vLLM's multiprocess multi-node launch only (got ray); set "
                    "runtime.multinode: mp, or start the Ray cluster yourself",
                )
            ]
        )


def write_all(files: dict[str, str], out_dir: Path) -> list[Path]:
    """Write every file atomically (each whole or not at all) under ``out_dir``, which must be
    a real directory: a link there would take the files wherever it points."""
    from launcher.owned import Refused
    from launcher.owned.paths import is_link

    if is_link(out_dir):
        raise Refused(
            f"{out_dir}: the output directory is a symbolic link; emit writes only into a real "
            "directory: pass the directory itself"
        )
    return [
        owned_write.write_text(out_dir / name, text, root=out_dir) for name, text in files.items()
    ]
