"""The planned vLLM worker, passed to vLLM as ``--worker-cls launcher.worker.PlannedWorker``.

The classes subclass vLLM's platform workers, so they are imported lazily: importing
this package imports no vLLM.
"""

from __future__ import annotations

from typing import Any

_CLASSES = {
    "PlannedWorker": "launcher.runtime.worker.gpu",
    "PlannedCPUWorker": "launcher.runtime.worker.cpu",
}


def __getattr__(name: str) -> Any:
    module = _CLASSES.get(name)
    if module is None:
        raise AttributeError(name)
    import importlib

    return getattr(importlib.import_module(module), name)
