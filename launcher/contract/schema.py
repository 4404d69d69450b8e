"""The JSON Schemas of the run file and the rank record, generated from the types.

``b12x-launch schema --run-file`` and ``--record`` print them; ``docs/schemas/`` holds them
(``tests/unit/test_contract_schema.py`` keeps the files equal to what the types generate).
Each field's description is the docstring right under it (``base.field_docstrings``).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from pydantic import BaseModel

from launcher.contract.base import Contract, field_docstrings
from launcher.contract.qualified import QualifiedRecord
from launcher.contract.record import RankRecord
from launcher.contract.runfile import RunFile

DRAFT = "https://json-schema.org/draft/2020-12/schema"
DOCUMENTS: dict[str, tuple[type[BaseModel], str]] = {
    "run-file": (RunFile, "b12x-launch run file (plan.json)"),
    "record": (RankRecord, "b12x-launch rank record (measure-rank<N>.json, rank<N>.json)"),
    "qualified": (QualifiedRecord, "b12x-launch qualified record (qualified.json)"),
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
