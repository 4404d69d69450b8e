"""On/off switches read from the environment, spelled one way everywhere."""

from __future__ import annotations

import os
from collections.abc import Mapping

ON = ("1", "true", "yes", "on")
OFF = ("0", "false", "no", "off")


def switch(name: str, default: bool = False, env: Mapping[str, str] | None = None) -> bool:
    """``name`` in ``env`` (default: this process's environment) as a switch: on for
    ``1/true/yes/on``, off for ``0/false/no/off`` (any case), ``default`` when unset or
    anything else."""
    value = (os.environ if env is None else env).get(name, "").strip().lower()
    if value in ON:
        return True
    if value in OFF:
        return False
    return default
