"""The artifact's manifest: for which deployment it was baked, and every file it holds.

A typed, versioned object (pydantic): ``keys`` say where the artifact may be restored (the
plan's fingerprint, the GPU kind and compute capability, the driver's CUDA version, the image's
build id with the versions behind it); ``files`` list each file's path under
``runtime.cache_root``, size and sha256, sorted by path; ``caches`` and the totals summarise
them. Nothing in it varies between two bakes of the same caches (no time, no host, no order
of a directory walk), so the same boot gives the same manifest, byte for byte
(``canonical``), and the same ``artifact_id``.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from launcher.contract.artifact import ArtifactKeys, CacheSummary
from launcher.contract.caches import CachePath
from launcher.contract.store_layout import CALIBRATION

FORMAT = "b12x-launch/cache-artifact"
VERSION = 3
"""The artifact's layout. A reader refuses another version, naming it: bake again with this
b12x-launch (an artifact is cheap to bake and dear to misread). 2: a tar stores the bytes of
several paths once, the later paths as hard-link members (``launcher.artifact.archive``).
3: each file's modification time, restored with it."""

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_FINGERPRINT = re.compile(r"^[0-9a-f]{12}$")


def cache_of(path: str) -> str:
    """The cache a path belongs to, as the summaries name it: the directory under the cache
    root, with vLLM's ``torch.compile``/AOT cache and DeepGEMM (which vLLM puts under its own
    root) named apart."""
    parts = path.split("/")
    if parts[0] == "vllm" and len(parts) > 2:
        if parts[1] == "torch_compile_cache":
            return "vllm-compile"
        if parts[1] == "deep_gemm":
            return "deepgemm"
    return parts[0]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


KEY_ORDER = ("fingerprint", "gpu_kind", "compute_capability", "cuda_driver", "build_id")
"""The keys compared before a restore, in the order a refusal names them."""


def differences(artifact: ArtifactKeys, here: ArtifactKeys) -> list[str]:
    """Each key whose value differs, as ``key: artifact X, here Y`` (the build id with the
    versions that make it differ); empty when the artifact fits this node."""
    out = []
    for key in KEY_ORDER:
        a, h = getattr(artifact, key), getattr(here, key)
        if a == h:
            continue
        line = f"{key}: artifact {a or 'none'}, here {h or 'none'}"
        if key == "build_id":
            moved = [
                f"{d} {artifact.versions.get(d) or 'absent'} -> {here.versions.get(d) or 'absent'}"
                for d in sorted(set(artifact.versions) | set(here.versions))
                if artifact.versions.get(d) != here.versions.get(d)
            ]
            if moved:
                line += f" ({', '.join(moved)})"
        out.append(line)
    return out


class FileEntry(_Strict):
    """One file of the artifact."""

    path: CachePath
    """Its path under ``runtime.cache_root`` (POSIX, relative; the first component one of
    ``launcher.contract.caches.TOPS``)."""
    size: int = Field(ge=0)
    sha256: str
    executable: bool = False
    """Whether it was executable (restored 0755, else 0644)."""
    mtime_ns: int = Field(ge=0)
    """When it was last modified on the baked node (ns), restored as is. Ninja decides what to
    rebuild from file times: FlashInfer's JIT modules were built again on every fresh node
    when the restore's own times put its generated sources after the objects built from them
    (2026-12-06, H100: 93-119 s in the stage's first step)."""

    @field_validator("sha256")
    @classmethod
    def _hex(cls, value: str) -> str:
        if not _SHA256.match(value):
            raise ValueError(f"not a sha256 (64 lowercase hex digits): {value!r}")
        return value


class Calibration(_Strict):
    """What the calibration store's records for the fingerprint held."""

    ranks: list[int] = Field(default_factory=list)
    """Ranks with a measurement record (``rank<N>.json``: measured figures, census)."""
    qualified: bool = False
    """Whether ``qualified.json`` (the pinned KV size) is in it."""
    census_entries: int = Field(default=0, ge=0)
    """Late compiles the records' census holds (replayed or reserved by the next boot)."""


class Manifest(_Strict):
    """The artifact's manifest (``manifest.json``)."""

    format: Literal["b12x-launch/cache-artifact"] = FORMAT
    version: Literal[3] = VERSION
    profile: str
    """The profile's name (a label: the fingerprint is the key)."""
    keys: ArtifactKeys
    caches: dict[str, CacheSummary]
    """Files and bytes per cache (``cache_of``), sorted by name."""
    calibration: Calibration = Field(default_factory=Calibration)
    file_count: int = Field(ge=0)
    total_bytes: int = Field(ge=0)
    files: list[FileEntry]
    """Sorted by path, each path once."""

    @model_validator(mode="after")
    def _consistent(self) -> Manifest:
        paths = [f.path for f in self.files]
        if paths != sorted(set(paths)):
            raise ValueError("files are not sorted by path, or a path is listed twice")
        if self.file_count != len(self.files):
            raise ValueError(f"file_count {self.file_count} but {len(self.files)} files listed")
        if self.total_bytes != sum(f.size for f in self.files):
            raise ValueError("total_bytes is not the sum of the files' sizes")
        if self.caches != summarise(self.files):
            raise ValueError("caches do not summarise the files listed")
        own = f"{CALIBRATION}/{self.keys.fingerprint}/"
        for f in self.files:  # another plan's records would be read as that plan's
            if f.path.startswith(CALIBRATION + "/") and (
                not f.path.startswith(own) or "/" in f.path[len(own) :]
            ):
                raise ValueError(
                    f"{f.path}: an artifact holds its own plan's records only ({own}<file>)"
                )
        return self

    def canonical(self) -> bytes:
        """The manifest as written: JSON, keys in a fixed order, one file per line."""
        return _dump(self.model_dump(mode="json"))

    @property
    def artifact_id(self) -> str:
        """16 hex digits of the canonical manifest's sha256: which artifact this is."""
        return hashlib.sha256(self.canonical()).hexdigest()[:16]

    def summary(self) -> str:
        """``1,234 files, 2.1 GiB: triton 900 files 1.2 GiB, ...``"""
        from launcher.units import format_size

        def files(n: int) -> str:
            return f"{n:,} file" + ("" if n == 1 else "s")

        parts = [
            f"{name} {files(c.files)} {format_size(c.bytes)}" for name, c in self.caches.items()
        ]
        return f"{files(self.file_count)}, {format_size(self.total_bytes)}: {', '.join(parts)}"


def summarise(files: list[FileEntry]) -> dict[str, CacheSummary]:
    counts: dict[str, list[int]] = {}
    for f in files:
        c = counts.setdefault(cache_of(f.path), [0, 0])
        c[0] += 1
        c[1] += f.size
    return {k: CacheSummary(files=v[0], bytes=v[1]) for k, v in sorted(counts.items())}


def make_manifest(
    profile: str, keys: ArtifactKeys, files: list[FileEntry], calibration: Calibration
) -> Manifest:
    files = sorted(files, key=lambda f: f.path)
    return Manifest(
        profile=profile,
        keys=keys,
        caches=summarise(files),
        calibration=calibration,
        file_count=len(files),
        total_bytes=sum(f.size for f in files),
        files=files,
    )


def _dump(data: dict[str, Any]) -> bytes:
    """Stable JSON: keys sorted, the file list last with one entry per line (a diff of two
    manifests reads file by file)."""
    files = data.pop("files")
    head = json.dumps(data, indent=2, sort_keys=True)[: -len("\n}")]
    lines = ",\n".join("    " + json.dumps(f, sort_keys=True) for f in files)
    tail = f'"files": [\n{lines}\n  ]' if files else '"files": []'
    return f"{head},\n  {tail}\n}}\n".encode()


class ManifestError(ValueError):
    """A manifest that cannot be read, is not an artifact's, or is of another version."""


def parse(data: bytes, where: str) -> Manifest:
    """The manifest in ``data`` (read from ``where``), checked.

    Raises:
        ManifestError: one line naming ``where``, what is wrong and the fix.
    """
    try:
        raw = json.loads(data)
    except ValueError as exc:
        raise ManifestError(f"{where}: not JSON ({exc}); bake the artifact again") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise ManifestError(
            f"{where}: not a b12x-launch cache artifact's manifest (no format {FORMAT!r}); "
            "an artifact is what `b12x-launch bake PROFILE OUT` writes"
        )
    if raw.get("version") != VERSION:
        raise ManifestError(
            f"{where}: manifest version {raw.get('version')!r}, this b12x-launch reads "
            f"{VERSION}: bake the artifact again with this b12x-launch"
        )
    try:
        return Manifest.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "manifest"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise ManifestError(
            f"{where}: {loc}: {first['msg']}{more}; the manifest is damaged: bake the "
            "artifact again"
        ) from None
