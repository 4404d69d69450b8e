"""Every ``emit`` target, in one table: the command's choices, its help, the default set and
the renderer are all read from ``TARGETS``. A new target is one module with a
``render(Target) -> {file name: text}`` and one row here."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from launcher.emit import Target


@dataclass(frozen=True)
class EmitTarget:
    name: str
    """What ``--target`` takes."""
    module: str
    """The module whose ``render`` writes the target's files (imported when used)."""
    what: str
    """What it writes, for ``--help``."""
    kubernetes: bool
    """Whether it runs on Kubernetes (a PersistentVolumeClaim can seed its cache)."""
    default: bool = True
    """Written when no ``--target`` is given."""

    def render(self) -> Callable[[Target], dict[str, str]]:
        return importlib.import_module(self.module).render


TARGETS: tuple[EmitTarget, ...] = (
    EmitTarget("k8s", "launcher.emit.k8s", "a LeaderWorkerSet", kubernetes=True),
    EmitTarget("compose", "launcher.emit.compose", "one compose file per node", kubernetes=False),
    EmitTarget(
        "kserve",
        "launcher.emit.kserve",
        "a KServe LLMInferenceService",
        kubernetes=True,
        default=False,
    ),
)


def names() -> list[str]:
    return [t.name for t in TARGETS]


def defaults() -> tuple[str, ...]:
    return tuple(t.name for t in TARGETS if t.default)


def get(name: str) -> EmitTarget:
    """The row of ``name`` (the command's choices are ``names()``, so it is one)."""
    return next(t for t in TARGETS if t.name == name)


def help_text() -> str:
    rows = ", ".join(f"{t.name} ({t.what})" for t in TARGETS)
    return f"What to write: {rows}. Repeatable; default {', '.join(defaults())}."
