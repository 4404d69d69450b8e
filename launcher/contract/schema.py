"""The JSON Schemas of the contract's files, generated from the types.

``b12x-launch schema --run-file``, ``--record`` and ``--qualified`` print three of them;
``docs/schemas/`` holds every one (``DOCUMENTS``)
(``tests/unit/test_contract_schema.py`` keeps the files equal to what the types generate).
Each field's description is the docstring right under it (``base.field_docstrings``).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from pydantic import BaseModel

from launcher.contract.artifact import RestoreJournal
from launcher.contract.base import Contract, field_docstrings
from launcher.contract.build import BuildInfo
from launcher.contract.caches import CacheBaseline
from launcher.contract.emit_manifest import EmitManifest
from launcher.contract.qualified import QualifiedRecord
from launcher.contract.record import RankRecord
from launcher.contract.runfile import RunFile
from launcher.contract.verdicts import Verdicts
from launcher.vllm.registry_record import VllmRegistryRecord

DRAFT = "https://json-schema.org/draft/2020-12/schema"
DOCUMENTS: dict[str, tuple[type[BaseModel], str]] = {
    "run-file": (RunFile, "b12x-launch run file (plan.json)"),
    "record": (RankRecord, "b12x-launch rank record (measure-rank<N>.json, rank<N>.json)"),
    "qualified": (QualifiedRecord, "b12x-launch qualified record (qualified.json)"),
    "restore-journal": (RestoreJournal, "b12x-launch restore journal (.blaunch-restore.journal)"),
    "cache-baseline": (CacheBaseline, "b12x-launch cache baseline (cache-baseline-rank<N>.json)"),
    "verdicts": (Verdicts, "b12x-launch vLLM verdicts (vllm-verdicts.json)"),
    "build-info": (BuildInfo, "b12x-launch image build file (build.json)"),
    "vllm-registry": (VllmRegistryRecord, "b12x-launch vLLM registry record (vllm-registry.json)"),
    "emit-manifest": (EmitManifest, "b12x-launch emit manifest (b12x-launch-emit.manifest)"),
}
"""The documents of the contract, by the name their schema file and option take."""


def _models() -> list[type[BaseModel]]:
    """Every contract type, each after the types it is made of."""
    seen: list[type[BaseModel]] = []
    todo = [Contract]
    while todo:
        model = todo.pop()
        seen.append(model)
        todo += model.__subclasses__()
    return seen


@functools.cache
def describe_fields() -> None:
    """Give every contract field its docstring as its ``description`` (once per process)."""
    for model in _models():
        docs = field_docstrings(model.__module__).get(model.__name__, {})
        for name, field in model.model_fields.items():
            if name in docs:
                field.description = docs[name]
        model.model_rebuild(force=True)


def undocumented() -> list[str]:
    """``Class.field`` for every contract field without a docstring (a test keeps it empty)."""
    out = []
    for model in _models():
        own = inspect.get_annotations(model)
        docs = field_docstrings(model.__module__).get(model.__name__, {})
        out += [f"{model.__name__}.{name}" for name in own if name not in docs]
    return sorted(set(out))


def json_schema(document: str) -> dict[str, Any]:
    """The JSON Schema of ``document`` (a key of ``DOCUMENTS``), as it is written."""
    describe_fields()
    model, title = DOCUMENTS[document]
    schema = model.model_json_schema(mode="serialization")
    return {"$schema": DRAFT, "title": title, **{k: v for k, v in schema.items() if k != "title"}}
