"""What every type of the contract shares: closed models, bounded figures, located errors.

A file of ours is read whole into its type or refused naming the file, the key and what is
wrong with it (``ContractError``); nothing past the reader sees a dict of it.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError

from launcher import bounded
from launcher.owned import read as owned_read

JSON_MAX = 64 << 20
"""The largest run file or record read (a record with a long census is a few MiB)."""
FIGURE_MAX = 1 << 50
"""1 PiB: more bytes than any figure of one GPU; a file with more was not a worker's."""

Bytes = Annotated[int, Strict(), Field(ge=0, le=FIGURE_MAX)]
"""A figure in bytes a worker or the planner wrote: a whole number, never a boolean."""
SignedBytes = Annotated[int, Strict(), Field(ge=-FIGURE_MAX, le=FIGURE_MAX)]
"""Bytes that go below zero where the plan does not fit (the KV cache left)."""
Count = Annotated[int, Strict(), Field(ge=0, le=FIGURE_MAX)]
"""A count (blocks, tokens, kernels)."""


class Contract(BaseModel):
    """Base of every type of the contract: unknown keys refused, no NaN or infinity.

    ``defer_build``: a validator is built at its first use, not at import (the dry run
    imports these types and validates few of them)."""

    model_config = ConfigDict(extra="forbid", defer_build=True, allow_inf_nan=False)

    def to_json(self) -> dict[str, Any]:
        """The JSON form, as written to the file."""
        return self.model_dump(mode="json")


class Frozen(Contract):
    """A contract type that is never changed once made."""

    model_config = ConfigDict(frozen=True)


class ContractError(ValueError):
    """A run file or record that is unreadable, foreign, of another version or malformed;
    the message names the file (and the key): ``path``, ``reason`` (what is wrong, without
    the path) and the whole line."""

    def __init__(self, path: str | Path, reason: str, message: str | None = None):
        self.path = str(path)
        self.reason = reason
        super().__init__(message or f"{path}: {reason}")


def located(path: str | Path, what: str, exc: ValidationError) -> ContractError:
    """One line per problem pydantic found (at most three), each with its key path."""
    lines = []
    for err in exc.errors()[:3]:
        key = ".".join(str(p) for p in err["loc"]) or "(the file)"
        lines.append(f"{key}: {err['msg']}")
    more = len(exc.errors()) - len(lines)
    tail = f" (and {more} more)" if more > 0 else ""
    return ContractError(path, f"malformed {'; '.join(lines)}{tail} (a {what})")


def read_json(path: str | Path, what: str, limit: int = JSON_MAX) -> dict[str, Any]:
    """The JSON object at ``path`` (a regular file, not a link, of at most ``limit`` bytes:
    ``launcher.owned.read``, the reader for what crosses a trust line)."""
    try:
        data = bounded.parse_json(owned_read.read_bytes(Path(path), limit, what))
    except (OSError, ValueError) as exc:
        why = f"unreadable: {exc}"
        raise ContractError(path, why, f"unreadable {what} {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ContractError(path, f"not a b12x-launch {what} (not a JSON object)")
    return data


Model = TypeVar("Model", bound=BaseModel)


def validate(kind: type[Model], data: Any, path: str | Path, what: str) -> Model:
    """``data`` as ``kind``, or ``ContractError`` naming the file and the keys."""
    try:
        return kind.model_validate(data)
    except ValidationError as exc:
        raise located(path, what, exc) from None


def read_model(
    path: str | Path, kind: type[Model], what: str, *, limit: int = JSON_MAX, fix: str = ""
) -> Model:
    """The file at ``path`` as ``kind``, validated from its bytes (``model_validate_json``),
    read as ``read_json`` reads (bounded, a regular file, no link).

    ``kind``'s ``schema_id`` (its ``schema`` key), where it has one, names the layout: a file
    with another is refused as another version, ``fix`` saying what to do.

    Raises:
        ContractError: one line naming the file: unreadable, not JSON, of another version,
            or malformed (naming the keys).
    """
    try:
        raw = owned_read.read_bytes(Path(path), limit, what)
    except (OSError, ValueError) as exc:
        why = f"unreadable: {exc}"
        raise ContractError(path, why, f"unreadable {what} {path}: {exc}") from None
    try:
        return kind.model_validate_json(raw)
    except ValidationError as exc:
        invalid = exc
    except RecursionError:
        raise ContractError(path, f"not a {what} (nested too deeply)") from None
    version = kind.model_fields.get("schema_id")
    try:
        data = bounded.parse_json(raw)
    except ValueError:
        raise ContractError(path, f"malformed: not JSON (the {what})") from None
    if not isinstance(data, dict):
        raise ContractError(path, f"not a b12x-launch {what} (not a JSON object)")
    if version is not None and data.get("schema", version.default) != version.default:
        theirs = data.get("schema")
        raise ContractError(
            path,
            f"another layout of {what} ({theirs!r}; this b12x-launch reads "
            f"{version.default!r}){': ' + fix if fix else ''}",
        )
    raise located(path, what, invalid)


@functools.cache
def field_docstrings(module: str) -> dict[str, dict[str, str]]:
    """Each class's field docstrings in ``module``, by class and field name: the string
    literal right under a field, cleaned as pydantic's ``use_attribute_docstrings`` cleans it
    (read from the source when a JSON Schema is made, not at import: that would cost every
    dry run the parse)."""
    import ast
    import inspect
    import sys

    tree = ast.parse(inspect.getsource(sys.modules[module]))
    docs: dict[str, dict[str, str]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        fields = docs.setdefault(node.name, {})
        for stmt, after in zip(node.body, node.body[1:], strict=False):
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                fields[stmt.target.id] = inspect.cleandoc(after.value.value)
    return docs
