"""The model runner exactly as vLLM left it: a snapshot before the scratch stage, put back after.

The stage serves real batches on the runner, and every step writes the runner's persistent
buffers: token ids, positions, sequence lengths, block tables, slot mappings, the drafter's own
slot mapping. vLLM's own steps after the stage read some of them as they stand. One did on the
H200: the MTP drafter's ``_slot_mapping_buffer`` (zeros in a runner that never served) still held
the scratch cache's slots when vLLM's CUDA-graph memory profile ran the drafter's dummy batch on
its minimal cache of a few blocks, so the draft layer's KV write went far past that cache: an
illegal memory access where plain vLLM boots.

So the stage does not trust itself to know every such buffer. Before it builds the scratch
cache, :func:`take` records the runner's state: every attribute of the runner and of the objects
it owns (vLLM's worker-side classes: the input batch and its block tables, the drafter, the
graph dispatchers, the buffers), the items of their lists and dicts, and a host copy of every
tensor and array among them. :meth:`Snapshot.restore` puts it all back: attributes the stage
added are removed, attributes it rebound are rebound, containers get their items back, and
every tensor gets its contents back in place (same storage, so nothing that holds a view of it
goes stale). Objects outside the runner's own (the model's modules, the attention backends,
vLLM's config, b12x's and Triton's caches) keep what the stage did on purpose: compiled kernels
and the workspaces the prewarm measured.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from launcher.contract.record import Restored
from launcher.vllm.internals import OWNED_MODULES, read_on

OWNED = OWNED_MODULES
"""Modules whose objects, reached from the runner, are the runner's own state. nn.Modules (the
model, the sampler) and vLLM's configs are never walked: the stage's compiled kernels and
measured workspaces live there and must stay."""
MAX_DEPTH = 6
MAX_OBJECTS = 20_000
COPY_LIMIT = 1 << 30
"""Host bytes for tensor copies; past it a tensor keeps its identity but not its contents (the
restore names it). The runner's buffers are tens of MiB even for GLM-5.2."""


@dataclass
class _Copy:
    path: str
    value: Any
    """The tensor or array itself (restored in place)."""
    saved: Any
    """Its host copy, or None over the copy limit."""


@dataclass
class Snapshot:
    attrs: list[tuple[str, Any, dict[str, Any]]] = field(default_factory=list)
    """(path, object, a shallow copy of its ``__dict__``)."""
    containers: list[tuple[str, Any, Any]] = field(default_factory=list)
    """(path, list, dict or set, a shallow copy of its items)."""
    copies: list[_Copy] = field(default_factory=list)

    def restore(self) -> Restored:
        """Put the runner back as it was when the snapshot was taken."""
        out = Restored(objects=len(self.attrs), tensors=len(self.copies))
        for path, obj, saved in self.attrs:
            current = vars(obj)
            for name in [n for n in current if n not in saved]:
                del current[name]
                out.dropped.append(f"{path}.{name}")
            for name, value in saved.items():
                if current.get(name, _MISSING) is not value:
                    current[name] = value
                    out.rebound.append(f"{path}.{name}")
        for path, box, saved in self.containers:
            if _items(box) != _items(saved):
                out.rebound.append(f"{path}[...]")
                if isinstance(box, list):
                    box[:] = saved
                else:
                    box.clear()
                    box.update(saved)
        synchronize_device()  # no copy into or out of a buffer is still in flight
        for c in self.copies:
            if c.saved is None:
                out.uncopied.append(c.path)
            elif _write_back(c.value, c.saved):
                out.rewritten.append(c.path)
        return out


_MISSING = object()


def take(runner: Any, owned: Callable[[Any], bool] | None = None) -> Snapshot:
    """Record ``runner``'s state and that of the objects it owns (``owned``: default, objects of
    vLLM's worker-side modules, ``OWNED``)."""
    is_owned = owned or _vllm_owned
    snap = Snapshot()
    seen: set[int] = set()
    budget = [COPY_LIMIT]
    synchronize_device()
    for path, obj in _walk(runner, "runner", is_owned, seen):
        saved = dict(vars(obj))
        snap.attrs.append((path, obj, saved))
        for name, value in saved.items():
            _record_value(snap, f"{path}.{name}", value, budget, seen)
    return snap


def _walk(
    root: Any, path: str, owned: Callable[[Any], bool], seen: set[int]
) -> Iterator[tuple[str, Any]]:
    """The runner and every owned object reachable from it through attributes, lists, tuples
    and dicts, breadth first, each once."""
    queue: list[tuple[str, Any, int]] = [(path, root, 0)]
    seen.add(id(root))
    while queue and len(seen) < MAX_OBJECTS:
        path, obj, depth = queue.pop(0)
        yield path, obj
        if depth >= MAX_DEPTH:
            continue
        for name, value in list(vars(obj).items()):
            for sub_path, sub in _children(f"{path}.{name}", value):
                if id(sub) in seen or not hasattr(sub, "__dict__") or not owned(sub):
                    continue
                seen.add(id(sub))
                queue.append((sub_path, sub, depth + 1))


def _children(path: str, value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield f"{path}[{i}]", item
    elif isinstance(value, set):
        return
    elif isinstance(value, dict):
        for key, item in list(value.items()):
            yield f"{path}[{key!r}]", item
    else:
        yield path, value


def _vllm_owned(obj: Any) -> bool:
    module = type(obj).__module__ or ""
    if not module.startswith(OWNED):
        return False
    try:
        import torch

        return not isinstance(obj, torch.nn.Module)
    except ImportError:
        return True


def _record_value(
    snap: Snapshot, path: str, value: Any, budget: list[int], seen: set[int], depth: int = 0
) -> None:
    """Record an attribute's value: an array's contents, a container's items (and what they
    hold, nested containers included: a dict of sets, a list of buffers)."""
    if _is_array(value):
        _record_array(snap, path, value, budget, seen)
        return
    if not isinstance(value, list | dict | tuple | set) or id(value) in seen or depth > 3:
        return
    seen.add(id(value))
    if not isinstance(value, tuple):  # a tuple comes back with its attribute
        snap.containers.append((path, value, value.copy()))
    for sub_path, item in _children(path, value):
        _record_value(snap, sub_path, item, budget, seen, depth + 1)


def _record_array(snap: Snapshot, path: str, value: Any, budget: list[int], seen: set[int]) -> None:
    if id(value) in seen:
        return
    seen.add(id(value))
    size = _nbytes(value)
    saved = None
    if size <= budget[0]:
        saved = _host_copy(value)
        budget[0] -= size
    snap.copies.append(_Copy(path, value, saved))


def _is_array(value: Any) -> bool:
    kind = type(value)
    return (kind.__module__ == "numpy" and kind.__name__ == "ndarray") or (
        kind.__module__.startswith("torch")
        and hasattr(value, "data_ptr")
        and hasattr(value, "copy_")
    )


def nbytes(value: Any) -> int:
    """A tensor's or an array's bytes."""
    return _nbytes(value)


def _nbytes(value: Any) -> int:
    if hasattr(value, "nbytes"):
        return int(value.nbytes)
    return int(value.numel() * value.element_size())


def _host_copy(value: Any) -> Any:
    if hasattr(value, "detach"):
        return value.detach().to("cpu", copy=True)
    return value.copy()


def _write_back(value: Any, saved: Any) -> bool:
    """Copy ``saved`` back into ``value`` in place when they differ; whether they did."""
    if hasattr(value, "detach"):
        import torch

        current = value.detach().to("cpu")
        if current.shape == saved.shape and torch.equal(_bytes(current), _bytes(saved)):
            return False
        if value.shape != saved.shape:  # resized in place by the stage: back to its shape
            value.data = saved.to(value.device)
        else:
            with torch.no_grad():
                value.copy_(saved.to(value.device))
        return True
    if value.shape == saved.shape and value.tobytes() == saved.tobytes():
        return False
    value[...] = saved
    return True


def _bytes(t: Any) -> Any:
    """A tensor's bytes (NaN equals itself, as in an uninitialised buffer)."""
    import torch

    flat = t.reshape(-1).contiguous()
    return flat.view(torch.uint8) if flat.dtype != torch.bool else flat


def _items(box: Any) -> Any:
    if isinstance(box, set):
        return box
    pairs = box.items() if isinstance(box, dict) else enumerate(box)
    return [(k, id(v)) for k, v in pairs]


def synchronize_device() -> None:
    """Wait for the device's queued work (none before CUDA is initialised, or without torch)."""
    try:
        import torch
    except ImportError:
        return
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


# ---------------------------------------------------------------------- the layers' bindings


@dataclass
class Bindings:
    """The attention layers (vLLM's ``static_forward_context``) and their implementations as
    they were before the stage: identities only, no copies."""

    saved: list[tuple[str, Any, dict[str, Any]]] = field(default_factory=list)

    def restore(self, storages: list[tuple[int, int]]) -> list[str]:
        """Put back every attribute of a layer or its implementation that now points into the
        scratch cache's memory (``storages``: address ranges); what was not there before is
        removed. What the stage set that points elsewhere (a workspace) stays."""
        out = []
        for path, obj, before in self.saved:
            current = vars(obj)
            for name in list(current):
                if not _points_into(current[name], storages):
                    continue
                if name in before and not _points_into(before[name], storages):
                    current[name] = before[name]
                else:
                    del current[name]
                out.append(f"{path}.{name}")
        return out


def bindings(layers: dict[str, Any]) -> Bindings:
    """Record ``layers`` (vLLM's static forward context) and each one's ``impl``."""
    out = Bindings()
    for name, layer in layers.items():
        for path, obj in ((name, layer), (f"{name}.impl", read_on("attention.impl", layer))):
            if obj is not None and hasattr(obj, "__dict__"):
                out.saved.append((path, obj, dict(vars(obj))))
    return out


def tensors_in(values: Any) -> list[Any]:
    """The non-empty tensors in ``values`` (a tensor, or lists, tuples and dicts of them)."""
    out = []
    stack = [values]
    while stack:
        v = stack.pop()
        if isinstance(v, list | tuple):
            stack += list(v)
        elif isinstance(v, dict):
            stack += list(v.values())
        elif hasattr(v, "untyped_storage") and hasattr(v, "is_cuda") and v.numel():
            out.append(v)
    return out


def storages(values: Any) -> list[tuple[int, int]]:
    """The address ranges of the tensors in ``values``: the scratch cache's memory."""
    out = []
    for t in tensors_in(values):
        store = t.untyped_storage()
        if store.nbytes():
            out.append((store.data_ptr(), store.data_ptr() + store.nbytes()))
    return out


def _points_into(value: Any, ranges: list[tuple[int, int]]) -> bool:
    if not ranges:
        return False
    return any(lo <= start < hi for start, _ in storages(value) for lo, hi in ranges)
