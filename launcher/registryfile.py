"""The image's vLLM registry record (``/opt/b12x-launch/vllm-registry.json``, or
``$BLAUNCH_VLLM_REGISTRY``): written once when the image is built, with what its vLLM
registers (plugins loaded), and read at every container start instead of importing vLLM.

This module owns the file: where it lies, reading it whole into its type or saying why not,
and writing it through the owned-files boundary. The type is the vLLM room's
(``launcher.vllm.registry_record``); what a record says of a profile is
``launcher.vllm.can_serve``'s, handed the record by :func:`read_registry`.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from launcher import buildid
from launcher.owned import read as owned_read
from launcher.owned import write as owned_write
from launcher.vllm import can_serve
from launcher.vllm.can_serve import Registry
from launcher.vllm.registry_record import REGISTRY_MAX, VllmRegistryRecord

REGISTRY_ENV = "BLAUNCH_VLLM_REGISTRY"
DEFAULT_REGISTRY = "/opt/b12x-launch/vllm-registry.json"


def read_record(env: Mapping[str, str]) -> VllmRegistryRecord | None:
    """The record in force, or None: there is none, it is unreadable or not a record (said on
    stderr, one line), or it was written for other versions (an image built on this one that
    moved a package: what it lists may no longer be registered)."""
    path = Path(env.get(REGISTRY_ENV) or DEFAULT_REGISTRY)
    if not path.is_file():
        return None
    try:
        raw = owned_read.read_bytes(path, REGISTRY_MAX, "vLLM registry record")
        record = VllmRegistryRecord.model_validate_json(raw)
    except (OSError, ValueError) as exc:  # ValidationError and Refused are ValueErrors
        why = str(exc).splitlines()[0]
        print(
            f"b12x-launch: note: the vLLM registry record {path} is unreadable or not one "
            f"({why}); vLLM's registries are imported instead",
            file=sys.stderr,
        )
        return None
    if buildid.moved(record.to_json(), buildid.build_info(env)):
        return None
    return record


def read_registry(plugins: bool = False, env: Mapping[str, str] | None = None) -> Registry | None:
    """What the installed vLLM registers (``can_serve.read_registry``), the record read from
    ``env``'s path only where a vLLM is installed and ``plugins`` does not import it."""
    env = os.environ if env is None else env
    return can_serve.read_registry(plugins, recorded=lambda: read_record(env))


def record_registry(path: str | os.PathLike, env: Mapping[str, str] | None = None) -> None:
    """Write what the installed vLLM registers, plugins loaded, to ``path`` (run once, at
    image build), with the versions it was read under (a record of other versions is not
    used)."""
    registry = can_serve.read_registry(plugins=True)
    if registry is None:
        raise SystemExit("record_registry: no vLLM is installed")
    record = VllmRegistryRecord(
        versions=buildid.build_info(env)["versions"],
        attention_backends=sorted(registry.attention_backends or ()),
        quantizations=sorted(registry.quantizations or ()),
    )
    owned_write.write_text(path, json.dumps(record.to_json(), indent=2, sort_keys=True) + "\n")
    print(
        f"vLLM registry: {len(record.attention_backends)} attention backends, "
        f"{len(record.quantizations)} quantization methods"
    )
