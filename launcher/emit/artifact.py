"""The cache artifact in the emitted files: where it comes from, and the step that seeds it.

``emit --cache-from SOURCE`` ships a baked artifact (``b12x-launch bake``) with the deployment.
Before the leader and the workers start, a step on every node copies it, verified, onto the
node's cache volume (``python3 -m launcher.artifact.seed``, into ``/cache/artifacts/<name>``);
the launcher then restores it from there (``BLAUNCH_CACHE_FROM``), checking its keys against
the node, before vLLM starts. SOURCE is one of:

- ``oci:REF``: an OCI image holding the artifact at its root (a ``FROM scratch`` image, built
  by the one-liner in docs/operations.md), mounted read-only as an image volume (Kubernetes)
  or an image mount (compose);
- ``pvc:CLAIM[/PATH]``: a PersistentVolumeClaim holding it (Kubernetes only), at PATH in it;
- ``/HOST/DIR``: a directory (or ``.tar``) on every node, bind-mounted read-only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Literal

from launcher.artifact import CACHE_FROM_ENV, SEED_DIR, SOURCE_MOUNT
from launcher.emit import CACHE_MOUNT, dns_name
from launcher.secrets import secret_value

if TYPE_CHECKING:
    from launcher.emit import Target

VOLUME = "cache-artifact"
"""The seeding step's name (init container, compose service) and its source volume's."""
SEED_MODULE = "launcher.artifact.seed"
_CLAIM = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_IMAGE_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,254}$")
"""An image reference as the engines take it: nothing compose or a shell would expand."""
FORMS = "oci:IMAGE, pvc:CLAIM[/PATH] or an absolute directory on the nodes"


@dataclass(frozen=True)
class ArtifactSource:
    kind: Literal["oci", "pvc", "dir"]
    value: str
    """The image reference, the claim's name, or the host directory."""
    subpath: str = ""
    """Where the artifact is inside the claim (``pvc:`` only)."""

    @property
    def path(self) -> str:
        """The artifact's path in the seeding step's container."""
        if self.kind == "dir":  # its own name, less what a shell or the kubelet would read
            name = re.sub(r"[^A-Za-z0-9._-]+", "-", PurePosixPath(self.value).name)
            return f"{SOURCE_MOUNT}/{name}"
        return f"{SOURCE_MOUNT}/{self.subpath}" if self.subpath else SOURCE_MOUNT

    def describe(self) -> str:
        return (
            {"oci": "the OCI image", "pvc": "the claim", "dir": "the nodes' directory"}[self.kind]
            + f" {self.value}"
            + (f" (at {self.subpath})" if self.subpath else "")
        )


def parse_source(text: str) -> ArtifactSource:
    """``oci:REF``, ``pvc:CLAIM[/PATH]`` or ``/HOST/DIR``.

    Raises:
        ValueError: none of these, with the forms that are.
    """
    text = text.strip()
    if secret_value(text):
        raise ValueError(
            "the source holds a credential (a URL's userinfo, or a secret key in JSON or YAML; "
            "not shown): every emitted file would carry it; log in to the registry instead"
        )
    if text.startswith("oci:"):
        ref = text[4:]
        if not _IMAGE_REF.match(ref):
            raise ValueError(
                f"{text!r}: oci: needs an image reference (oci:registry/name:tag; no space, "
                "no '$', no braces)"
            )
        return ArtifactSource("oci", ref)
    if text.startswith("pvc:"):
        claim, _, sub = text[4:].partition("/")
        if not _CLAIM.match(claim):
            raise ValueError(f"{text!r}: {claim!r} is not a PersistentVolumeClaim name")
        return ArtifactSource("pvc", claim, _relative(sub, text))
    path = PurePosixPath(text)
    if path.is_absolute() and path.name and ".." not in path.parts and text.isprintable():
        return ArtifactSource("dir", str(path))
    raise ValueError(f"{text!r} is not an artifact source: give {FORMS}")


def _relative(sub: str, text: str) -> str:
    p = PurePosixPath(sub) if sub else None
    if p is not None and (p.is_absolute() or ".." in p.parts):
        raise ValueError(f"{text!r}: the path inside the claim must be relative, without '..'")
    return str(p) if p is not None else ""


def seeded_path(t: Target) -> str:
    """Where the seeding step puts the artifact on the cache volume, per deployment."""
    return f"{CACHE_MOUNT}/{SEED_DIR}/{dns_name(t.profile.name)}"


def seed_command(t: Target) -> list[str]:
    assert t.artifact is not None
    return ["python3", "-m", SEED_MODULE, t.artifact.path, seeded_path(t)]


def launcher_env(t: Target) -> dict[str, str]:
    """What the serving container needs to restore the seeded artifact (nothing without one)."""
    return {CACHE_FROM_ENV: seeded_path(t)} if t.artifact is not None else {}


def source_mount(source: ArtifactSource) -> str:
    """Where the source is mounted in the seeding step (a host directory or tar under its own
    name, so a tar keeps its suffix)."""
    return source.path if source.kind == "dir" else SOURCE_MOUNT
