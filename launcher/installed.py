"""Where an installed package lies, found without importing it (the dry run and the launch
read vLLM's and torch's files before either is imported, if ever)."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def package_root(name: str) -> Path | None:
    """The directory of the installed top-level package ``name``; None when there is none."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))
