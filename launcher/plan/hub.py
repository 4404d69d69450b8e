"""Checkpoints by Hub repo id: their safetensors headers, read by HTTP range requests.

``huggingface_hub`` (optional: ``pip install '.[hub]'`` in the b12x-launch checkout) reads each
shard's header with ``get_safetensors_metadata`` (a ranged GET of the first bytes of every
file), plus ``config.json`` and a mixed checkpoint's tier bitmap; no weight is downloaded.
The result is cached under ``runtime.cache_root`` so the next dry run needs no network. It is
imported only when a profile's ``model.path`` is a repo id that is not a local directory.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher import bounded
from launcher.atomic import write_text
from launcher.plan.checkpoint import TensorInfo, tensor_info
from launcher.switches import switch

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
CACHE_VERSION = 1
CACHE_MAX = 256 << 20
"""The largest cached header file read (a checkpoint of 100,000 tensors is tens of MiB)."""


class HubUnavailable(RuntimeError):
    """The hub did not answer, or the repo is not a safetensors checkpoint."""


@dataclass(frozen=True)
class HubCheckpoint:
    repo_id: str
    config: dict[str, Any]
    tensors: list[TensorInfo]
    files: int
    aux: dict[str, Any]
    """Other JSON files the config names (the tier bitmap of a mixed EXL3 checkpoint)."""
    cached: bool
    """Read from the cache under runtime.cache_root rather than from the hub."""


def is_repo_id(path: str) -> bool:
    """``owner/name`` that is not a local path."""
    if not _REPO_ID.match(path) or path.startswith((".", "~")):
        return False
    return not Path(path).exists()


def offline() -> bool:
    return switch("HF_HUB_OFFLINE")


def cache_file(cache_root: str, repo_id: str) -> Path:
    return Path(cache_root).expanduser() / "hub-headers" / (repo_id.replace("/", "--") + ".json")


def read_checkpoint(repo_id: str, cache_root: str) -> HubCheckpoint:
    """The config and every tensor header of ``repo_id``: from the cache, else from the hub.

    huggingface_hub's own timeouts apply (``HF_HUB_ETAG_TIMEOUT``,
    ``HF_HUB_DOWNLOAD_TIMEOUT``, 10 s each by default); ``HF_ENDPOINT`` picks the hub.

    Raises:
        HubUnavailable: offline, huggingface_hub missing, or the hub failed to answer.
    """
    path = cache_file(cache_root, repo_id)
    cached = _from_cache(path, repo_id)
    if cached is not None:
        return cached
    if offline():
        raise HubUnavailable("HF_HUB_OFFLINE is set")
    try:
        from huggingface_hub import HfApi
    except ImportError:
        raise HubUnavailable(
            "huggingface_hub is not installed (pip install '.[hub]' in the b12x-launch checkout)"
        ) from None
    api = HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None)
    try:
        meta = api.get_safetensors_metadata(repo_id)
        config = _json(api, repo_id, "config.json")
        aux = {}
        ref = str((config.get("hybrid_tr3_tail") or {}).get("bits_per_expert") or "")
        if ":" in ref:
            name = ref.split(":", 1)[0]
            aux[name] = _json(api, repo_id, name)
    except Exception as exc:  # the client raises many kinds; all mean "not from the hub"
        raise HubUnavailable(f"{type(exc).__name__}: {_first_line(exc)}") from None
    tensors = [
        TensorInfo(name, t.dtype, tuple(t.shape), _nbytes(t))
        for f in meta.files_metadata.values()
        for name, t in f.tensors.items()
    ]
    out = HubCheckpoint(repo_id, config, tensors, len(meta.files_metadata), aux, cached=False)
    _to_cache(path, out)
    return out


def _json(api: Any, repo_id: str, filename: str) -> dict[str, Any]:
    return json.loads(Path(api.hf_hub_download(repo_id, filename)).read_text())


def _nbytes(t: Any) -> int:
    start, end = t.data_offsets
    return int(end) - int(start)


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:200]


def _from_cache(path: Path, repo_id: str) -> HubCheckpoint | None:
    try:
        data = bounded.read_json(path, CACHE_MAX, "cached Hub header file")
        if data.get("version") != CACHE_VERSION or data.get("repo_id") != repo_id:
            return None
        tensors = [tensor_info(n, d, s, 0, b) for n, d, s, b in data["tensors"]]
        return HubCheckpoint(
            repo_id, data["config"], tensors, int(data["files"]), data.get("aux", {}), True
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _to_cache(path: Path, c: HubCheckpoint) -> None:
    data = {
        "version": CACHE_VERSION,
        "repo_id": c.repo_id,
        "files": c.files,
        "config": c.config,
        "aux": c.aux,
        "tensors": [[t.name, t.dtype, list(t.shape), t.nbytes] for t in c.tensors],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, json.dumps(data))
