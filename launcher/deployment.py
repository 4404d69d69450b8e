"""Resolve once: a profile's derived values, each decided here with the reason for it.

The planner, the estimates, b12x's sizing, the vLLM argv and the prewarm providers read a
:class:`Deployment` instead of deriving block size, capture sizes, decode rows or the
runtime again, so what the plan sized and what vLLM is told cannot drift apart. The rules
that derive them live in ``profile/rules.py`` because the coupling checks need them before
a profile is accepted; nothing past this module calls them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from launcher.profile.rules import (
    auto_capture_sizes,
    capture_sizes,
    default_block_size,
    draft_rows,
    runtime_of,
)
from launcher.profile.schema import Profile, Reader, unread_paths
from launcher.vllm.lines import VllmLine, b12x_sparse_mla_backends, stored_kv_dtype

if TYPE_CHECKING:
    from launcher.contract.facts import ModelFacts
    from launcher.contract.runfile import DeploymentRecord

PREWARM_ALWAYS = ("census", "keys")
"""Prewarm providers that run whenever prewarm does, listed or not, last: the census replays
what earlier boots of this deployment compiled late, then the key enumeration compiles every
key the launches before it can reach in this deployment."""

UNREAD = unread_paths(Reader.DEPLOYMENT)
"""Profile keys no derived value reads, marked on the schema's fields (``Unread``): a profile
that differs from another only in these has the other's deployment (the cards' other processes
at launch, a sweep's trial context length); ``tests/unit/test_resolved_once.py`` changes each
and resolves again to check."""

BackendFamily = Literal["sparse-mla-b12x", "sparse-mla-flashmla", "dense"]


@dataclass(frozen=True)
class Deployment:
    """Every value the profile implies, decided once; ``why[name]`` says how."""

    profile: Profile
    runtime: VllmLine
    backend_family: BackendFamily
    """Which attention the backend runs: b12x's sparse MLA (a fork's ``B12X_MLA_SPARSE`` or
    ``B12X``), FlashMLA's sparse MLA (``FLASHMLA_SPARSE``), or dense (any other backend, or
    none named). Sparse only when it is one of the runtime's sparse-MLA backends."""
    block_size: int
    """vLLM's KV block, in tokens (``--block-size``)."""
    capture_sizes: tuple[int, ...]
    """CUDA-graph capture sizes (``cudagraph_capture_sizes``); empty without graphs."""
    decode_rows: tuple[int, ...]
    """The token counts a decode step runs at (1, each capture size, the MTP draft's)."""
    prewarm: tuple[str, ...]
    """The prewarm providers a worker runs, in order; empty when prewarm is off."""
    why: dict[str, str] = field(default_factory=dict, compare=False)

    def record(self) -> DeploymentRecord:
        """For the run file: every derived value, so the worker derives none again."""
        from launcher.contract.runfile import DeploymentRecord  # the run file's; not the dry run's

        return DeploymentRecord(
            runtime=self.runtime.name,
            backend_family=self.backend_family,
            block_size=self.block_size,
            capture_sizes=self.capture_sizes,
            decode_rows=self.decode_rows,
            prewarm=self.prewarm,
            why=dict(self.why),
        )

    @classmethod
    def from_record(cls, profile: Profile, data: DeploymentRecord) -> Deployment:
        from launcher.vllm.lines import VLLM_LINES

        return cls(
            profile=profile,
            runtime=VLLM_LINES[data.runtime],
            backend_family=data.backend_family,
            block_size=data.block_size,
            capture_sizes=data.capture_sizes,
            decode_rows=data.decode_rows,
            prewarm=data.prewarm,
            why=dict(data.why),
        )

    def with_profile(self, p: Profile) -> Deployment:
        """This deployment for ``p``, which differs from its profile only in ``UNREAD`` keys:
        nothing to derive again."""
        return replace(self, profile=p)

    @property
    def sparse_mla(self) -> bool:
        """The attention backend is the runtime's sparse-MLA backend."""
        return self.backend_family != "dense"

    @property
    def b12x_sparse_mla(self) -> bool:
        """The attention backend is a fork line's b12x sparse MLA (``B12X_MLA_SPARSE`` or
        ``B12X``), which b12x's kernels and workspaces serve (on an MLA model)."""
        return self.backend_family == "sparse-mla-b12x"

    @property
    def draft_rows(self) -> int:
        """Token rows of one decode step of every sequence with its drafts: max_num_seqs x
        (1 + MTP) (``rules.draft_rows``)."""
        return draft_rows(self.profile.serving.max_num_seqs, self.profile.mtp_tokens)

    def fp8_rope(self, facts: ModelFacts) -> bool:
        """Whether the nvfp4 KV record keeps its RoPE part in fp8 (runtime and env decide)."""
        return self.runtime.fp8_rope(facts, self.profile.env)

    def kv_record(self, facts: ModelFacts) -> str:
        """The KV record and the runtime that decides it, as the plan prints them."""
        p, how = self.profile, self.why["runtime"]
        if facts.is_mla and p.serving.kv_cache_dtype == "nvfp4_ds_mla":
            return f"{self.runtime.describe_record(facts, p.env)}; runtime {how}"
        stored = stored_kv_dtype(facts, p.serving.kv_cache_dtype, p.vllm.attention_backend)
        if stored != p.serving.kv_cache_dtype:
            return (
                f"{p.serving.kv_cache_dtype} stored as {stored} (656 B record: FlashMLA's "
                f"sparse backend); runtime {self.runtime.name} ({how})"
            )
        return f"runtime {self.runtime.name} ({how})"


def resolve(p: Profile) -> Deployment:
    """Decide every derived value of ``p`` (pure). Called only where a deployment is made:
    ``pipeline`` (the plan, each sweep combination's, another vLLM line) and each suggestion
    trial; everything else is handed the Deployment (``tests/unit/test_resolved_once.py``)."""
    runtime, runtime_how = runtime_of(p)
    captures = tuple(capture_sizes(p))
    family, family_how = _backend_family(p, runtime)
    return Deployment(
        profile=p,
        runtime=runtime,
        backend_family=family,
        block_size=default_block_size(p),
        capture_sizes=captures,
        decode_rows=_decode_rows(p, captures),
        prewarm=_prewarm(p),
        why={
            "runtime": runtime_how,
            "backend_family": family_how,
            "block_size": _block_why(p, family),
            "capture_sizes": _captures_why(p),
            "decode_rows": "1, each capture size up to max_num_seqs x (1 + MTP), and the MTP "
            "draft's count padded to a capture size"
            if captures
            else "no CUDA graphs: every count up to max_num_seqs x (1 + MTP)",
            "prewarm": f"prewarm.providers, then the ones that always run {list(PREWARM_ALWAYS)}"
            if p.prewarm.enabled and p.prewarm.providers
            else "prewarm off (prewarm.enabled false or no providers)",
        },
    )


def _backend_family(p: Profile, runtime: VllmLine) -> tuple[BackendFamily, str]:
    backend = p.vllm.attention_backend
    if (backend or "") not in runtime.sparse_mla_backends:
        return "dense", (
            f"vllm.attention_backend {backend} is not a sparse-MLA backend of runtime "
            f"{runtime.name}"
        )
    if backend in b12x_sparse_mla_backends():
        return "sparse-mla-b12x", f"vllm.attention_backend {backend}: b12x's sparse MLA"
    return "sparse-mla-flashmla", f"vllm.attention_backend {backend}: FlashMLA's sparse MLA"


def _prewarm(p: Profile) -> tuple[str, ...]:
    listed = tuple(p.prewarm.providers)
    if not p.prewarm.enabled or not listed:
        return ()
    return (*listed, *(n for n in PREWARM_ALWAYS if n not in listed))


def _block_why(p: Profile, family: BackendFamily) -> str:
    if p.serving.block_size:
        return "profile serving.block_size"
    if p.hardware.gpu == "cpu":
        return "vLLM's CPU default"
    if family != "dense":
        return "the sparse-MLA backend's block"
    return "vLLM's CUDA default"


def _captures_why(p: Profile) -> str:
    if p.serving.cudagraph_mode == "NONE":
        return "serving.cudagraph_mode NONE: no CUDA graphs"
    if p.serving.cudagraph_capture_sizes == "auto":
        return f"auto: multiples of 1+MTP up to max_num_seqs x (1+MTP) {auto_capture_sizes(p)}"
    return "profile serving.cudagraph_capture_sizes"


def _decode_rows(p: Profile, captures: tuple[int, ...]) -> tuple[int, ...]:
    """1, each capture size and the MTP draft's count (one token per sequence, padded to a
    capture size as vLLM pads a batch); without CUDA graphs every count up to
    max_num_seqs x (1 + MTP) can occur."""
    top = draft_rows(p.serving.max_num_seqs, p.mtp_tokens)
    fitting = [s for s in captures if s <= top]
    if not fitting:
        return tuple(range(1, top + 1))
    draft = set()
    if p.mtp_tokens:
        for n in range(1, p.serving.max_num_seqs + 1):
            draft.add(min((c for c in fitting if c >= n), default=n))
    return tuple(sorted({1, *fitting, *draft}))
