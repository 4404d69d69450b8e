"""Plans and records are read by typed attributes, not by string keys (issue 42).

Outside ``launcher/contract/`` (where the readers of older versions must look inside the JSON
of those versions), this counts every read of a string key that says "a plan or a record":
a key of the run file, the rank record or the qualified record, a component's or a headroom
part's name (``x["components"]``, ``x.get("late_compiles")``), less the keys the house's
other documents use too. A dict of another kind that happens to use such a key counts as
well, so the ceiling is a little above zero; a new read of a plan or a record by key fails
here. Before the contract (main at 3141fa7) there were 144 such reads in 19 modules.
"""

from __future__ import annotations

import ast
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from launcher.artifact.manifest import Manifest
from launcher.contract import schema
from launcher.contract.facts import ModelFacts
from launcher.contract.names import ComponentName, HeadroomPart
from launcher.profile.schema import Profile

PACKAGE = Path(__file__).resolve().parents[2] / "launcher"
CEILING = 10


def fields(*roots: type[BaseModel]) -> set[str]:
    """The JSON keys of these types and of every type they are made of."""
    out: set[str] = set()
    seen: set[type] = set()
    todo = list(roots)
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, field in model.model_fields.items():
            out.add(field.alias or name)
            todo += [t for t in _types(field.annotation) if _is_model(t)]
    return out


def _types(annotation: Any) -> list[Any]:
    return [annotation, *(t for arg in typing.get_args(annotation) for t in _types(arg))]


def _is_model(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, BaseModel)


def contract_keys() -> set[str]:
    """The keys that say "a plan or a record": every key of the contract's documents and the
    names of components and parts, less those the house's other documents use too (the
    profile's, the artifact manifest's, and config.json's, which the model facts mirror)."""
    keys = {c.value for c in ComponentName} | {p.value for p in HeadroomPart}
    keys |= fields(*(model for model, _ in schema.DOCUMENTS.values()))
    return keys - fields(Profile, Manifest, ModelFacts)


def string_key_reads(path: Path, keys: set[str]) -> list[str]:
    """``line: key`` for each read of a string key in ``keys`` (stores are not reads)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        key = None
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and isinstance(node.slice, ast.Constant)
        ):
            key = node.slice.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "pop", "setdefault")
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            key = node.args[0].value
        if isinstance(key, str) and key in keys:
            found.append(f"{node.lineno}: {key}")
    return found


def reads(root: Path = PACKAGE) -> dict[str, list[str]]:
    keys = contract_keys()
    out = {}
    for path in sorted(root.rglob("*.py")):
        if (root / "contract") in path.parents:
            continue
        if found := string_key_reads(path, keys):
            out[str(path.relative_to(root.parent))] = found
    return out


def test_plans_and_records_are_read_by_attribute_outside_the_contract():
    found = reads()
    total = sum(len(v) for v in found.values())
    shown = "\n".join(f"{p} {lines}" for p, lines in found.items())
    assert total <= CEILING, f"{total} string-key reads (at most {CEILING}):\n{shown}"


def test_the_count_sees_a_read_by_key(tmp_path):
    source = tmp_path / "probe.py"
    source.write_text(
        "def f(plan, record, d):\n"
        "    a = plan['kv']['page_bytes_per_rank'] + plan['x']['components']['kv_cache']\n"
        "    b = record.get('late_compiles')\n"
        "    d['kv'] = 1\n"  # a store, not a read
        "    return d['not_a_contract_key']\n"
    )
    assert sorted(string_key_reads(source, contract_keys())) == [
        "2: components",
        "2: kv",
        "2: kv_cache",
        "2: page_bytes_per_rank",
        "3: late_compiles",
    ]
