"""Every Triton specialization the deployment can reach, derived from what ran before sizing.

The serving waves sample the specialization space; this provider closes it. Triton keys a
launch by its constexprs, each tensor's dtype, each pointer's 16-byte alignment and each plain
int's class (equal to 1, divisible by 16, other) unless the kernel marks it
``do_not_specialize``. For every ``@triton.jit`` kernel the process launched (Triton's
``kernel_key_cache`` keeps each launch's specialization and options), each argument gets the
classes it can reach in this deployment:

- an int named as a request count reaches the classes of 1..max_num_seqs, one named as a token
  count those of 1..max_num_batched_tokens (and the speculative tokens of a full decode batch);
- any other int or pointer that the launches showed in more than one class varies with the
  batch: it gets every class a token count reaches (ints) or both alignments (pointers);
- the rest were seen in one class only and are taken as fixed by the model's shapes: the
  report names each such argument, so an assumption is never silent.

Every combination of those classes over each launched key (its dtypes and constexprs kept)
that the process lacks is compiled without launching (Triton's own ``_pack_args`` and
``_do_compile``, the path ``JITFunction.preload`` takes) and its module loaded, before vLLM
measures memory. The late-JIT census stays as the check that the enumeration was complete.

The class arithmetic is pure (no Triton import) and unit-tested with Triton's binder.
"""

from __future__ import annotations

import ast
import itertools
import re
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from launcher.contract.record import Autotuned, HeldKernel, KernelEnumeration
from launcher.runtime import phases
from launcher.runtime.prewarm import PrewarmContext, PrewarmResult
from launcher.runtime.prewarm.accelerators import parallel_compile
from launcher.runtime.prewarm.accelerators.parallel_compile import parallel_compiles, settle
from launcher.runtime.prewarm.flow import NONE, Fact
from launcher.runtime.prewarm.model import call_sites
from launcher.runtime.prewarm.providers import key_json
from launcher.vllm.internals import read_on
from launcher.vllm.request_features import MAX_LOGPROB_TOKEN_IDS

ONE, MULTIPLE_OF_16, OTHER = "1", "16k", "other"
ALIGNED, UNALIGNED = "aligned", "unaligned"
INT_CLASSES = (ONE, MULTIPLE_OF_16, OTHER)
INT_TYPES = ("i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
MAX_KEYS_PER_KERNEL = 512
"""A kernel whose enumeration exceeds this is reported, not compiled (a compile is ~0.1-3 s)."""

REQUEST_NAMES = re.compile(
    r"^(num_|n_)?(reqs|requests|seqs|sequences|decodes|prefills|prefill_reqs|decode_reqs)$"
    r"|^(batch_size|bs|batch)$"
)
TOKEN_NAMES = re.compile(
    r"^(num_|n_|total_)?(tokens|valid_tokens|actual_tokens|query_tokens|prefill_tokens|"
    r"decode_tokens|rows|elements)$|^(em|m|numel|token_count)$"
)
"""Names vLLM's kernels give a per-batch count (``fused_moe_kernel``'s ``EM`` and
``num_valid_tokens``, ``num_reqs`` of the merge and EAGLE kernels, ``num_tokens``...)."""
ROUTED_NAMES = re.compile(r"^(em|num_valid_tokens)$")
"""vLLM's fused-MoE kernel counts routed tokens (tokens x top-k): ``num_valid_tokens`` is
that product, ``EM`` the sorted ids' length (the product, padded per expert block)."""
SAMPLED_NAMES = re.compile(r"^num_sampled_tokens_per_req$|^stride_sampled_token_ids$")
"""The width of the sampled ids (1 + the speculative tokens kept, per request and step) and
the row stride of that array: vLLM's EAGLE/MTP proposer passes both."""
REQUEST_ARRAYS = re.compile(r"start_loc|seq_lens?\b|seq_lens?_|cu_seq|query_lens?\b|_lens$")
"""Per-request index arrays (``query_start_loc``, ``seq_lens``, ``cu_seq_lens``...): the runtime
passes slices of them that start at a request (prefills behind decode rows, a context chunk's
row), so an int32/int64 one reaches both 16-byte alignments whatever the launches showed."""


@dataclass(frozen=True)
class Ranges:
    """The per-batch counts a deployment's launches range over."""

    max_num_seqs: int
    max_tokens: int
    """max_num_batched_tokens, or a full decode batch with its speculative tokens if larger."""
    top_k: int = 1
    """Experts per token (routed token counts start there)."""
    spec_tokens: int = 0
    """Speculative tokens per step: a request samples 1..1+spec_tokens tokens a step (fewer
    than all when its drafts are cut near max_tokens or max_model_len)."""
    max_logprobs: int = 20
    """The most logprobs a request may ask for (``--max-logprobs``)."""
    sampler_flags: tuple[tuple[bool, bool], ...] = ((False, True), (True, False), (True, True))
    """The (top-k, top-p) combinations the accepted request features turn on."""
    max_logprob_token_ids: int = MAX_LOGPROB_TOKEN_IDS
    """The most ``logprob_token_ids`` a request may name (vLLM's cap, not a flag)."""

    @classmethod
    def of(
        cls,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        spec_tokens: int,
        top_k: int = 1,
        max_logprobs: int = 20,
        sampler_flags: tuple[tuple[bool, bool], ...] | None = None,
    ) -> Ranges:
        from launcher.profile import rules
        from launcher.vllm import request_features

        tokens = max(max_num_batched_tokens, rules.draft_rows(max_num_seqs, spec_tokens))
        flags = sampler_flags or request_features.sampler_flags(spec_tokens, max_logprobs)
        return cls(max_num_seqs, tokens, max(1, top_k), max(0, spec_tokens), max_logprobs, flags)

    @property
    def draft_rows(self) -> int:
        """Rows of a full decode batch with its drafts: the rejection sampler's logits (of
        vLLM's live counts, which a forced ``--speculative-config`` may set apart from the
        deployment's)."""
        from launcher.profile import rules

        return rules.draft_rows(self.max_num_seqs, self.spec_tokens)


def _next_power_of_2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def _sampled_width(r: Ranges) -> tuple[tuple[int, ...], str]:
    widths = sorted({_next_power_of_2(n) for n in range(1, r.spec_tokens + 2)})
    return tuple(widths), (
        f"next power of 2 of the tokens a request samples a step, 1..{r.spec_tokens + 1}"
    )


def _logprob_block(r: Ranges) -> tuple[tuple[int, ...], str]:
    counts = range(1, r.max_logprobs + 2)
    return tuple(sorted({min(_next_power_of_2(n), 1024) for n in counts})), (
        f"next power of 2 of the sampled token and 0..{r.max_logprobs} logprobs"
    )


CONSTEXPR_RULES = {
    ("eagle_prepare_next_token_padded_kernel", "BLOCK_SIZE_TOKENS"): _sampled_width,
    ("_topk_log_softmax_kernel", "TOPK_BLOCK_SIZE"): _logprob_block,
}
"""Constexprs a call site derives from a per-step count (kernel's short name, parameter):
their values over the deployment. vLLM's EAGLE/MTP proposer launches the kernel with
``next_power_of_2`` of the sampled ids' width, which drops below 1 + spec when a request's
drafts are cut: the H200's qualify boot compiled ``BLOCK_SIZE_TOKENS=2`` late (GLM tier, 2
speculative tokens). vLLM's V2 sampler launches ``_topk_log_softmax_kernel`` with the next power
of 2 of 1 + the batch's logprobs (the H200's MoE boot compiled ``TOPK_BLOCK_SIZE=4`` late under
logprobs 3). Any other constexpr stays as launched."""


TRITON_SAMPLER_ROWS = 8
"""vLLM's ``apply_top_k_top_p`` (0.26-0.33, every caller: V1's sampler and rejection sampler,
V2's sampler) takes the Triton kernel from this many rows of logits on CUDA; fewer sort in
PyTorch. So ``BATCH_SIZE`` is never 1 there: its ``1`` class would compile a key no step runs."""


def _sampler_rows(r: Ranges) -> tuple[int, int, str]:
    most = max(r.max_num_seqs, r.draft_rows)
    return (
        min(TRITON_SAMPLER_ROWS, most),
        most,
        (
            f"rows of logits on the Triton path ({TRITON_SAMPLER_ROWS} or more: fewer sort in "
            f"PyTorch): up to {r.max_num_seqs} requests in the sampler, up to {r.draft_rows} "
            f"draft rows (max_num_seqs x (1 + {r.spec_tokens})) in the rejection sampler"
        ),
    )


def _logprob_count(r: Ranges) -> tuple[int, int, str]:
    return 1, r.max_logprobs + 1, f"the sampled token and 0..{r.max_logprobs} logprobs"


def _query_slice(r: Ranges) -> tuple[int, int, str]:
    return (
        0,
        r.max_tokens,
        (
            f"a token offset into the step's queries, 0..{r.max_tokens} (the indexer's prefill "
            "chunk starts and stops anywhere in a batch of max_num_batched_tokens)"
        ),
    )


SITE_RULES = {
    ("_topk_topp_kernel", "BATCH_SIZE"): _sampler_rows,
    ("_topk_log_softmax_kernel", "topk"): _logprob_count,
    ("_build_prefill_chunk_metadata_kernel", "query_slice_start"): _query_slice,
    ("_build_prefill_chunk_metadata_kernel", "query_slice_stop"): _query_slice,
}
"""Ints whose range their call site decides, whatever their name (kernel's short name,
parameter): the V1 sampler launches ``_topk_topp_kernel`` with a row per request, its
rejection sampler with a row per draft token; the V2 sampler's logprob kernel counts the
sampled token and the logprobs asked for; the DSA indexer's prefill-chunk metadata kernel takes
the chunk's query slice as token offsets (vLLM's own warmup happens to launch 0 and 1; the rule
derives every class the deployment reaches). A rule here wins over the name patterns."""


def int_classes(lo: int, hi: int) -> tuple[str, ...]:
    """Triton's classes of the ints in ``lo..hi``."""
    out = []
    if lo <= 1 <= hi:
        out.append(ONE)
    if hi >= lo and hi // 16 * 16 >= lo:  # a multiple of 16 (0 among them) in the range
        out.append(MULTIPLE_OF_16)
    if any(v != 1 and v % 16 for v in range(lo, min(hi, lo + 17) + 1)):  # 17 steps: one
        out.append(OTHER)
    return tuple(out)


@dataclass(frozen=True)
class Param:
    """What the enumeration needs of one ``KernelParam``."""

    name: str
    is_constexpr: bool = False
    do_not_specialize: bool = False
    do_not_specialize_on_alignment: bool = False
    annotation: str = ""
    """An int type the kernel declares (``num_seqs: tl.int32`` gives ``i32``), else empty:
    Triton then keeps the type for a 1 (``("i32", 1)``, not ``("constexpr", 1)``)."""
    stored_only: bool = False
    """A pointer the kernel only writes through (an output): call sites allocate those fresh,
    so no request-array slice moves its alignment."""
    fresh: str = ""
    """How every call site in the kernel's module allocates this argument fresh (``call_sites``),
    else empty: aligned at every launch, whatever its name says."""


@dataclass
class Reach:
    """The classes one argument reaches, and why."""

    name: str
    kind: str
    """``int`` or ``pointer``."""
    classes: tuple[str, ...]
    basis: str
    derived: bool
    """False where the range is taken from the launches alone (reported as such)."""

    def describe(self) -> str:
        return f"{self.name} {{{', '.join(self.classes)}}} ({self.basis})"


def class_of(entry: Any, param: Param) -> tuple[str, str] | None:
    """(kind, class) of one specialization entry, or None when Triton does not vary it."""
    if param.is_constexpr or not isinstance(entry, tuple) or len(entry) != 2:
        return None
    typ, spec = entry
    if not isinstance(typ, str):
        return None
    if typ == "constexpr":  # a plain int equal to 1 (None arguments are constexpr too)
        return ("int", ONE) if spec == 1 and not param.do_not_specialize else None
    if typ.startswith("*"):
        # Triton keys such a pointer on its type only: varying its alignment would make keys
        # Triton never makes.
        if param.do_not_specialize_on_alignment or param.do_not_specialize:
            return None
        return "pointer", ALIGNED if spec == "D" else UNALIGNED
    if typ in INT_TYPES and not param.do_not_specialize:
        if spec == 1:  # a declared int type's 1 (``("i32", 1)``)
            return "int", ONE
        return "int", MULTIPLE_OF_16 if spec == "D" else OTHER
    return None


def reach(
    param: Param, kind: str, seen: set[str], ranges: Ranges, typ: str = "", kernel: str = ""
) -> Reach:
    """The classes ``param`` reaches over the deployment: from its call site's rule
    (``SITE_RULES``), else its name, else its launches."""
    name = param.name
    site = SITE_RULES.get((kernel.rsplit(".", 1)[-1], name))
    if kind == "int" and site is not None:
        lo, hi, basis = site(ranges)
        return Reach(name, kind, int_classes(lo, hi), basis, True)
    if kind == "pointer":
        if param.fresh and seen <= {ALIGNED}:
            return Reach(
                name, kind, (ALIGNED,), f"allocated at every call site: {param.fresh}", True
            )
        loaded = not param.stored_only
        if loaded and typ[1:] in INT_TYPES and REQUEST_ARRAYS.search(name.lower()):
            return Reach(
                name, kind, (ALIGNED, UNALIGNED),
                "a per-request index array: slices start at any request", True,
            )  # fmt: skip
        if len(seen) > 1:
            return Reach(name, kind, (ALIGNED, UNALIGNED), "seen both ways: varies", True)
        return Reach(name, kind, tuple(sorted(seen)), f"seen only {_one(seen)}: fixed", False)
    lowered = name.lower()
    if REQUEST_NAMES.match(lowered):
        return Reach(
            name, kind, int_classes(1, ranges.max_num_seqs),
            f"a request count, 1..{ranges.max_num_seqs}", True,
        )  # fmt: skip
    if SAMPLED_NAMES.match(lowered):
        hi = ranges.spec_tokens + 1
        return Reach(
            name, kind, int_classes(1, hi), f"tokens a request samples a step, 1..{hi}", True
        )
    if ROUTED_NAMES.match(lowered) and ranges.top_k > 1:
        k = ranges.top_k
        classes = tuple(c for c in int_classes(k, ranges.max_tokens * k) if c != ONE)
        return Reach(
            name, kind, classes,
            f"routed tokens (tokens x top-k {k}), {k}..{ranges.max_tokens * k}", True,
        )  # fmt: skip
    if TOKEN_NAMES.match(lowered):
        return Reach(
            name, kind, int_classes(1, ranges.max_tokens),
            f"a token count, 1..{ranges.max_tokens}", True,
        )  # fmt: skip
    if len(seen) > 1:
        return Reach(
            name, kind, int_classes(1, ranges.max_tokens),
            f"seen as {', '.join(sorted(seen))}: varies with the batch, "
            f"taken over 1..{ranges.max_tokens}",
            False,
        )  # fmt: skip
    return Reach(name, kind, tuple(sorted(seen)), f"seen only {_one(seen)}: fixed", False)


def _one(seen: set[str]) -> str:
    return next(iter(seen)) if seen else "-"


Spec = tuple[Any, ...]
Launch = tuple[Spec, str]
"""One launched key: Triton's specialization list (as a tuple) and ``str(options)``."""


@dataclass
class Enumeration:
    """One kernel's derived key space."""

    kernel: str
    args: list[Reach]
    launched: int
    keys: list[Launch] = field(default_factory=list)
    """Every key the deployment reaches (the launched ones included)."""
    missing: list[Launch] = field(default_factory=list)
    """The reachable keys the process did not hold."""
    too_many: bool = False
    """The full product was over ``MAX_KEYS_PER_KERNEL``: a reduced space was taken."""
    reduced: str = ""
    """How the space was reduced under the cap (empty: the full product)."""
    held: list[str] = field(default_factory=list)
    """Arguments never varied, each as launched (``NAME=value|value``): constexprs that no
    rule derives and None arguments. Each is an assumption, so the record names it."""
    derived: str = ""
    """For a ``WHOLE_RULES`` call site: what its rule combined and on what basis (empty: every
    argument by its own rule)."""

    def to_dict(self) -> dict[str, Any]:
        names = [r.name for r in self.args if not r.derived]
        return {
            "kernel": self.kernel,
            "launched": self.launched,
            "reachable": len(self.keys),
            "missing": len(self.missing),
            "too_many": self.too_many,
            "reduced": self.reduced,
            "args": [r.describe() for r in self.args],
            "assumed": list(dict.fromkeys(names + [h.partition("=")[0] for h in self.held])),
            "as_launched": self.held,
            "derived": self.derived,
        }


def enumerate_keys(
    kernel: str, params: Sequence[Param], launches: Iterable[Launch], ranges: Ranges
) -> Enumeration:
    """Every key over the classes each argument reaches, around each launched key (and each
    variant a ``VARIANT_RULES`` call site makes of it); a ``WHOLE_RULES`` call site's arguments
    as the call site combines them."""
    launches = list(dict.fromkeys(launches))
    whole = _enumerate_whole(kernel, params, launches, ranges)
    return whole if whole is not None else _enumerate_each(kernel, params, launches, ranges)


def _enumerate_each(
    kernel: str, params: Sequence[Param], launches: list[Launch], ranges: Ranges
) -> Enumeration:
    """Every key over the classes each argument reaches, taken one argument at a time."""
    templates = list(dict.fromkeys(_variants(kernel, params, launches, ranges)))
    seen: dict[int, tuple[str, set[str]]] = {}
    int_type: dict[int, str] = {}
    pointer_type: dict[int, str] = {}
    for spec, _ in templates:
        for i, (entry, param) in enumerate(zip(spec, params, strict=False)):
            found = class_of(entry, param)
            if found is None:
                continue
            kind, cls = found
            seen.setdefault(i, (kind, set()))[1].add(cls)
            if kind == "int" and entry[0] != "constexpr":
                int_type.setdefault(i, entry[0])
            if kind == "pointer":
                pointer_type.setdefault(i, entry[0])
    reaches = {
        i: reach(params[i], kind, classes, ranges, pointer_type.get(i, ""), kernel)
        for i, (kind, classes) in sorted(seen.items())
    }
    derived = _constexpr_reaches(kernel, params, templates, ranges)
    reaches = dict(sorted({**reaches, **derived}.items()))
    out = Enumeration(kernel, list(reaches.values()), len(launches))
    out.held = _as_launched(params, templates, derived)
    varying = [i for i, r in reaches.items() if len(r.classes) > 1]
    per_template = []
    for spec, options in templates:
        # A None argument (a constexpr None) stays as launched: only classes vary.
        here = [
            i for i in varying if i < len(spec) and (i in derived or class_of(spec[i], params[i]))
        ]
        per_template.append((spec, options, here))
    one_at_a_time = False
    if _size(per_template, reaches) > MAX_KEYS_PER_KERNEL:
        # Over the cap: what a rule or a name derived varies together, the rest as launched;
        # still over, each argument through its classes alone. Never nothing.
        out.too_many = True
        per_template = [(s, o, [i for i in h if reaches[i].derived]) for s, o, h in per_template]
        one_at_a_time = _size(per_template, reaches) > MAX_KEYS_PER_KERNEL
        out.reduced = "one argument at a time" if one_at_a_time else "derived arguments only"
    keys: dict[Launch, None] = {}
    for spec, options, here in per_template:
        choices = [reaches[i].classes for i in here]
        combos = _one_at_a_time(choices) if one_at_a_time else itertools.product(*choices)
        for combo in combos:
            variant = list(spec)
            for i, cls in zip(here, combo, strict=True):
                if cls is not None:
                    variant[i] = entry_for(
                        spec[i], cls, int_type.get(i, "i32"), params[i].annotation
                    )
            keys[(tuple(variant), options)] = None
    held = set(launches)
    out.keys = list(keys)[:MAX_KEYS_PER_KERNEL]
    out.missing = [k for k in out.keys if k not in held]
    return out


def _size(per_template: list[tuple[Spec, str, list[int]]], reaches: dict[int, Reach]) -> int:
    return sum(_product([reaches[i].classes for i in here]) for _, _, here in per_template)


def _one_at_a_time(choices: list[tuple[str, ...]]) -> Iterator[tuple[str | None, ...]]:
    """Each argument through its classes with the others as launched (None: as launched)."""
    yield tuple(None for _ in choices)
    for n, classes in enumerate(choices):
        for cls in classes:
            yield tuple(cls if m == n else None for m in range(len(choices)))


def _sampler_flag_variants(params: Sequence[Param], spec: Spec, r: Ranges) -> list[Spec]:
    """``_topk_topp_kernel`` per (top-k, top-p) the accepted features turn on: with one side
    off vLLM passes the logits tensor for its pointer (``K`` of the logits' dtype), with it on
    a fresh int32 (``K``) or float32 (``P``) tensor."""
    names = [p.name for p in params]
    need = ("LOGITS", "K", "P", "TOPK_ENABLED", "TOPP_ENABLED")
    if not all(n in names for n in need) or len(spec) < len(names):
        return []
    logits, k, p, topk, topp = (names.index(n) for n in need)
    out = []
    for k_on, p_on in r.sampler_flags:
        v = list(spec)
        v[topk], v[topp] = ("constexpr", k_on), ("constexpr", p_on)
        was_k, was_p = spec[topk][1] is True, spec[topp][1] is True
        v[k] = (spec[k] if was_k else ("*i32", "D")) if k_on else spec[logits]
        v[p] = (spec[p] if was_p else ("*fp32", "D")) if p_on else spec[logits]
        out.append(tuple(v))
    return out


VARIANT_RULES = {"_topk_topp_kernel": _sampler_flag_variants}
"""Call sites whose constexprs move together with other arguments (kernel's short name ->
the variants of a launched key): the enumeration ranges over each variant's classes."""


def _variants(
    kernel: str, params: Sequence[Param], launches: list[Launch], r: Ranges
) -> list[Launch]:
    rule = VARIANT_RULES.get(kernel.rsplit(".", 1)[-1])
    out = list(launches)
    if rule is not None:
        for spec, options in launches:
            out += [(v, options) for v in rule(params, spec, r)]
    return out


# ------------------------------------------------------------- call sites derived whole


@dataclass(frozen=True)
class WholeSpace:
    """The arguments one call site computes together, and every combination it makes."""

    names: tuple[str, ...]
    rows: tuple[tuple[int | str, ...], ...]
    """Per combination, each named argument: a constexpr's value, a plain int's class. In the
    order the step's counts grow, so that a cut under the cap keeps the smaller requests."""
    basis: str


def int_class(v: int) -> str:
    """Triton's class of one plain int."""
    return ONE if v == 1 else MULTIPLE_OF_16 if v % 16 == 0 else OTHER


FILL_COLUMNS = (
    "NUM_TOPK",
    "PADDED_COLS",
    "out_token_ids_stride",
    "out_valid_mask_stride",
    "topk_indices_stride",
    "per_req_token_ids_stride",
)


def _logprob_token_id_columns(r: Ranges) -> WholeSpace:
    """vLLM's V2 ``compute_topk_scores`` (0.26.0, 0.32.0: the same) launches the kernel when a
    request of the batch names ``logprob_token_ids``: with the batch's logprobs k and its most
    named ids m, ``num_cols = max(k, m)``; ``NUM_TOPK`` is k, ``PADDED_COLS`` the next power of
    2 of num_cols, both outputs are fresh ``[batch, 1 + num_cols]`` (row stride 1 + num_cols);
    the top-k ids are a fresh int32 ``[batch, k]`` (stride k), at k = 0 the per-request ids'
    state (stride: the cap, as ``per_req_token_ids_stride`` always)."""
    cap = r.max_logprob_token_ids
    rows: dict[tuple[int | str, ...], None] = {}
    for k in range(max(0, r.max_logprobs) + 1):
        topk_stride = int_class(k) if k else int_class(cap)
        for cols in range(max(k, 1), max(k, cap) + 1):  # m in 1..cap
            out = int_class(1 + cols)
            rows[(k, _next_power_of_2(cols), out, out, topk_stride, int_class(cap))] = None
    return WholeSpace(
        FILL_COLUMNS,
        tuple(rows),
        f"the call site's arithmetic over 0..{r.max_logprobs} logprobs and 1..{cap} "
        "logprob_token_ids: NUM_TOPK = logprobs, PADDED_COLS = next power of 2 of "
        "max(logprobs, ids), output strides 1 + that max, top-k stride the logprobs (the "
        f"ids' row, {cap}, at 0)",
    )


WHOLE_RULES = {"_fill_logprob_token_ids_kernel": _logprob_token_id_columns}
"""Call sites whose keys are derived whole (kernel's short name -> the combinations of the
arguments it computes from one count). The rules above take each argument apart: where a call
site computes a constexpr, a padded width and the strides of tensors it allocates at that
width from the same count, their product holds keys no step makes (``PADDED_COLS`` below
``NUM_TOPK``), and past ``MAX_KEYS_PER_KERNEL`` it is cut one argument at a time, which drops
the pairs the call site does make: the H100's MoE boot of 2026-12-06 compiled three keys of
``_fill_logprob_token_ids_kernel`` late (NUM_TOPK/PADDED_COLS 0/4, 16/16, 0/1) after the waves
had launched 0/16 and 0/128. A rule here lists exactly what the call site reaches; the
kernel's other arguments keep the per-argument rules."""


def _enumerate_whole(
    kernel: str, params: Sequence[Param], launches: list[Launch], ranges: Ranges
) -> Enumeration | None:
    """``kernel``'s keys by its ``WHOLE_RULES`` rule (None: it has none): each combination the
    call site makes, over every key of the other arguments (their own rules; as launched when
    over the cap)."""
    rule = WHOLE_RULES.get(kernel.rsplit(".", 1)[-1])
    if rule is None:
        return None
    space = rule(ranges)
    names = [p.name for p in params]
    absent = [n for n in space.names if n not in names]
    if absent:  # another release's signature: the per-argument rules, and the record says so
        out = _enumerate_each(kernel, params, launches, ranges)
        out.derived = f"not derived whole: the kernel has no {', '.join(absent)}"
        return out
    at = [names.index(n) for n in space.names]
    launches = [(s, o) for s, o in launches if len(s) >= len(params)]
    # the rule's arguments blanked (a None: never varied), the rest by the per-argument rules
    blank = list(
        dict.fromkeys(
            (tuple(NO_VALUE if i in at else e for i, e in enumerate(s)), o) for s, o in launches
        )
    )
    others = _enumerate_each(kernel, params, blank, ranges)
    int_type = {i: s[i][0] for s, _ in launches for i in at if s[i][0] in INT_TYPES}

    def filled(templates: Sequence[Launch]) -> dict[Launch, None]:
        """Each row on each template, row by row (a cut keeps the first rows on all), the
        first ``MAX_KEYS_PER_KERNEL`` + 1 at most: rows and templates are each distinct, so
        their product is the count."""
        keys: dict[Launch, None] = {}
        for row in space.rows:
            for spec, options in templates:
                if len(keys) > MAX_KEYS_PER_KERNEL:
                    return keys
                variant = list(spec)
                for i, value in zip(at, row, strict=True):
                    variant[i] = _entry_of(params[i], value, int_type.get(i, "i32"))
                keys[(tuple(variant), options)] = None
        return keys

    out = Enumeration(kernel, [], len(launches), too_many=others.too_many)
    out.reduced = others.reduced
    keys = filled(others.keys)
    if len(keys) > MAX_KEYS_PER_KERNEL:
        out.too_many, out.reduced = True, "the other arguments as launched"
        keys = filled(blank)
        if len(keys) > MAX_KEYS_PER_KERNEL:
            last = list(keys)[MAX_KEYS_PER_KERNEL - 1][0][at[0]][1]
            out.reduced = (
                f"the first {MAX_KEYS_PER_KERNEL} of {len(blank) * len(space.rows)} keys in "
                f"the rule's order ({space.names[0]} up to {last}), the other arguments as "
                "launched: the rest is left to the census"
            )
    made = set(space.rows)
    unmade = [k for k in dict.fromkeys(launches) if _row_of(k[0], at, params) not in made]
    out.derived = f"{len(space.rows)} combinations of {', '.join(space.names)}: {space.basis}"
    if unmade:  # held already; a rule that misses a launched key is behind its call site
        out.derived += f"; {len(unmade)} launched keys outside them (the call site changed?)"
    reaches = {names.index(r.name): r for r in others.args}
    for j, i in enumerate(at):
        values = list(dict.fromkeys(str(row[j]) for row in space.rows))
        kind = "constexpr" if params[i].is_constexpr else "int"
        reaches[i] = Reach(names[i], kind, _shown(values), "derived whole (see derived)", True)
    out.args = [reaches[i] for i in sorted(reaches)]
    out.held = [h for h in others.held if h.partition("=")[0] not in space.names]
    out.keys = [*dict.fromkeys([*list(keys)[:MAX_KEYS_PER_KERNEL], *unmade])]
    held = set(launches)
    out.missing = [k for k in out.keys if k not in held]
    return out


NO_VALUE = ("constexpr", None)
"""What a blanked argument holds while the other arguments are enumerated (Triton's own
entry for a None, which no rule varies)."""


def _entry_of(param: Param, value: int | str, int_type: str) -> tuple[str, Any]:
    """The binder's entry for a rule's value: a constexpr's own, a plain int's class."""
    if param.is_constexpr:
        return ("constexpr", value)
    return entry_for((int_type, ""), str(value), int_type, param.annotation)


def _row_of(spec: Spec, at: Sequence[int], params: Sequence[Param]) -> tuple[Any, ...]:
    """The rule's arguments of a launched key, as a rule's row holds them."""
    out = []
    for i in at:
        found = class_of(spec[i], params[i])
        out.append(spec[i][1] if found is None else found[1])
    return tuple(out)


def _shown(values: list[str]) -> tuple[str, ...]:
    """A rule's values for the record: a run of consecutive ints as ``lo..hi``."""
    if len(values) <= 2 * SHOWN_VALUES:
        return tuple(values)
    if all(v.isdigit() for v in values):
        ints = sorted(int(v) for v in values)
        if ints == list(range(ints[0], ints[-1] + 1)):
            return (f"{ints[0]}..{ints[-1]}",)
    return (*values[:SHOWN_VALUES], f"+{len(values) - SHOWN_VALUES} more")


def _constexpr_reaches(
    kernel: str, params: Sequence[Param], launches: list[Launch], ranges: Ranges
) -> dict[int, Reach]:
    """The constexprs ``CONSTEXPR_RULES`` derives, each over the values launched and derived."""
    short = kernel.rsplit(".", 1)[-1]
    out: dict[int, Reach] = {}
    for i, param in enumerate(params):
        rule = CONSTEXPR_RULES.get((short, param.name))
        if rule is None or not param.is_constexpr:
            continue
        values, basis = rule(ranges)
        as_launched = {spec[i][1] for spec, _ in launches if i < len(spec)}
        every = sorted({*values, *(v for v in as_launched if isinstance(v, int))})
        classes = tuple(str(v) for v in every)
        out[i] = Reach(param.name, "constexpr", classes, basis, True)
    return out


SHOWN_VALUES = 6


def _as_launched(
    params: Sequence[Param], launches: list[Launch], derived: dict[int, Reach]
) -> list[str]:
    """``NAME=value|value`` for each argument kept as launched: a constexpr no rule derives,
    or a None (Triton keys it, like any non-tensor it cannot type, as a constexpr). A plain
    int's 1 is a class, varied above."""
    values: dict[int, set[str]] = {}
    for spec, _ in launches:
        for i, (entry, param) in enumerate(zip(spec, params, strict=False)):
            if i in derived or not isinstance(entry, tuple) or len(entry) != 2:
                continue
            if entry[0] != "constexpr" or (not param.is_constexpr and type(entry[1]) is int):
                continue
            values.setdefault(i, set()).add(str(entry[1]))
    out = []
    for i, seen in sorted(values.items()):
        shown = sorted(seen)
        more = f"|+{len(shown) - SHOWN_VALUES}" if len(shown) > SHOWN_VALUES else ""
        out.append(f"{params[i].name}={'|'.join(shown[:SHOWN_VALUES])}{more}")
    return out


def _product(choices: list[tuple[str, ...]]) -> int:
    n = 1
    for c in choices:
        n *= len(c)
    return n


def entry_for(
    entry: tuple[str, Any], cls: str, int_type: str, annotation: str = ""
) -> tuple[str, Any]:
    """The specialization entry Triton's binder makes for an argument of class ``cls``
    (``annotation``: the int type the kernel declares for it, if any)."""
    if entry[0] == "constexpr" and cls.isdigit():  # a derived constexpr's value
        return ("constexpr", int(cls))
    if cls == ONE:
        return (annotation, 1) if annotation else ("constexpr", 1)
    if cls in (MULTIPLE_OF_16, OTHER):
        typ = entry[0] if entry[0] != "constexpr" else annotation or int_type
        return (typ, "D" if cls == MULTIPLE_OF_16 else "")
    return (entry[0], "D" if cls == ALIGNED else "")


# ---------------------------------------------------------------------- Triton's side


def params_of(fn: Any) -> list[Param]:
    outputs = stored_only(getattr(fn, "src", "") or "")
    fresh = call_sites.of(fn)
    return [
        Param(
            p.name,
            bool(p.is_constexpr),
            bool(getattr(p, "do_not_specialize", False)),
            bool(getattr(p, "do_not_specialize_on_alignment", False)),
            _int_annotation(p),
            p.name in outputs,
            fresh.get(p.name, ""),
        )
        for p in fn.params
    ]


def stored_only(src: str) -> set[str]:
    """Names the kernel's source writes through (``tl.store``'s pointer) and never reads
    (``tl.load``, ``tl.atomic_*``): its outputs. A local assigned from a name stands for it
    (``row = OUT + i; tl.store(row, x)`` writes through ``OUT``). Empty when the source does
    not parse."""
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(src))
    except SyntaxError:
        return set()
    sources: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign) and node.value:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            used = _names(node.value)
            for t in targets:
                for name in _names(t):
                    sources.setdefault(name, set()).update(used)

    def roots(names: set[str]) -> set[str]:
        out, todo = set(), list(names)
        while todo:
            n = todo.pop()
            if n in out:
                continue
            out.add(n)
            todo += list(sources.get(n, ()))
        return out

    stored: set[str] = set()
    read: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else ""
        if name == "store":
            stored |= roots(_names(node.args[0]))
        elif name == "load" or name.startswith("atomic"):
            read |= roots(_names(node.args[0]))
    return stored - read


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _int_annotation(p: Any) -> str:
    typ = getattr(p, "annotation_type", "")
    return typ if isinstance(typ, str) and typ in INT_TYPES and not p.is_constexpr else ""


def launched(fn: Any) -> dict[Any, list[Launch]]:
    """Per device, the keys this process launched ``fn`` with (Triton's key cache)."""
    out: dict[Any, list[Launch]] = {}
    for device, caches in list(fn.device_caches.items()):
        kernel_cache, key_cache = caches[0], caches[1]
        for (spec, options), key in list(key_cache.items()):
            if key in kernel_cache and isinstance(options, str):
                out.setdefault(device, []).append((tuple(spec), options))
    return out


def kernel_name(fn: Any) -> str:
    return f"{fn.fn.__module__}.{fn.fn.__qualname__}"


@dataclass
class Compiled:
    compiled: int = 0
    """Keys compiled and loaded (their device memory taken before sizing)."""
    failed: list[str] = field(default_factory=list)


@dataclass
class Job:
    """One kernel's missing keys on one device, and what became of them."""

    fn: Any
    device: Any
    missing: list[Launch]
    compiled: int = 0
    failed: int = 0
    submitted: list[Any] = field(default_factory=list)
    """Triton cache keys handed to the compile threads (settled after the pool drains)."""
    last_done: float = 0.0
    """When (monotonic) the job's last compile finished: which kernel holds the pass up."""

    def _done(self, _future: Any) -> None:
        self.last_done = max(self.last_done, time.monotonic())


def compile_missing(jobs: Sequence[Job], done: Compiled, until: float | None = None) -> None:
    """Compile every job's missing keys as ``run`` would have, without launching, then load
    them; what is unfinished at ``until`` (the pass's deadline) is dropped and reported.

    All kernels share one pool: per kernel, a pass waited on its slowest key before the next
    kernel started (on the H200, 9 kernels of 1-56 keys took 14 rounds of 16 threads where
    134 keys need 9)."""
    if until is not None and time.monotonic() >= until:
        for job in jobs:
            job.failed += len(job.missing)
            done.failed.append(
                f"{kernel_name(job.fn)}: {len(job.missing)} keys not compiled: past the deadline"
            )
        return
    with parallel_compiles(until):
        for job in biggest_first(jobs):
            try:
                _submit(job, done)
            except Exception as exc:  # this kernel's keys are left to the census; the rest go on
                job.failed += len(job.missing) - len(job.submitted)
                done.failed.append(f"{kernel_name(job.fn)}: {type(exc).__name__}: {exc}")
    for i, job in enumerate(jobs):
        phases.part("keys (kernels settled)", i, len(jobs))
        if job.submitted:
            loaded, failed = settle(job.fn, job.submitted)
            job.compiled += loaded
            job.failed += len(failed)
            done.compiled += loaded
            done.failed += failed


def biggest_first(jobs: Sequence[Job]) -> list[Job]:
    """The jobs of the longest kernel sources first: the pass ends with its slowest compile,
    and a long kernel compiles long. On the H200 vLLM's top-k/top-p sampler kernel (7-10 s a
    key) was handed to the threads after 43 other keys, 32 of them fused-MoE's, in a pass of
    18.5 s."""
    return sorted(jobs, key=lambda job: -source_size(job.fn))


def source_size(fn: Any) -> int:
    """The length of a kernel's source: what ``biggest_first`` takes for its compile time."""
    return len(getattr(fn, "src", "") or "")


def _submit(job: Job, done: Compiled) -> None:
    """Hand ``job``'s keys that the kernel's cache lacks to the compile threads."""
    fn = job.fn
    for spec, options_text in job.missing:
        try:
            options = ast.literal_eval(options_text)
        except (ValueError, SyntaxError):
            job.failed += 1
            done.failed.append(f"{kernel_name(fn)}: options not readable: {options_text}")
            continue
        key = unheld(fn, job.device, spec, options)
        if key is None:
            continue
        try:
            opts, signature, constexprs, attrs = packed(fn, job.device, spec, options)
            kernel = fn._do_compile(
                key, signature, job.device, constexprs, opts, attrs, warmup=True
            )
            job.submitted.append(key)
            # Triton 3.6 puts the future in the cache only when it finishes: take the returned one
            future = getattr(kernel, "future", None)
            if future is not None:
                future.add_done_callback(job._done)
        except Exception as exc:  # reported per kernel; serving would compile it late
            job.failed += 1
            done.failed.append(f"{kernel_name(fn)}: {type(exc).__name__}: {exc}")


def unheld(fn: Any, device: Any, spec: Spec, options: dict[str, Any]) -> str | None:
    """Triton's cache key of ``spec`` on ``device``, or None where the process holds it."""
    from triton.runtime.jit import compute_cache_key

    kernel_cache, key_cache = fn.device_caches[device][:2]
    key = compute_cache_key(key_cache, list(spec), options)
    return None if key in kernel_cache else key


def packed(fn: Any, device: Any, spec: Spec, options: dict[str, Any]) -> tuple[Any, ...]:
    """Triton's compile inputs for a key, without its arguments: (options, signature,
    constexprs, attrs), as ``JITFunction.run`` packs them (constexprs from the key itself)."""
    backend = fn.device_caches[device][3]
    bound = {
        p.name: (entry[1] if isinstance(entry, tuple) and entry[0] == "constexpr" else None)
        for p, entry in zip(fn.params, spec, strict=False)
    }
    return fn._pack_args(backend, dict(options), bound, list(spec), options)


def held_keys() -> tuple[list[dict[str, Any]], int]:
    """Every key each ``@triton.jit`` kernel holds now, per kernel, in JSON's shapes: what a
    warm boot replays (``replay``); and how many keys had a value with no JSON form (left
    out: a warm boot compiles those on first use, and the census names them)."""
    from launcher.runtime import jit_watch

    out, dropped = [], 0
    for fn in jit_watch.jit_functions():
        try:
            keys = list(dict.fromkeys(k for ks in launched(fn).values() for k in ks))
        except (AttributeError, TypeError, ValueError):  # a cache layout of another Triton
            continue
        encoded = []
        for spec, options in keys:
            try:
                encoded.append([key_json.spec_to_json(spec), options])
            except TypeError:
                dropped += 1
        if encoded:
            out.append(
                {
                    "kernel": kernel_name(fn),
                    "module": fn.fn.__module__,
                    "qualname": fn.fn.__qualname__,
                    "keys": encoded,
                }
            )
    return out, dropped


def replay(held: Iterable[HeldKernel], device: Any, done: Compiled) -> int:
    """Load each recorded key (compiled before: Triton's disk cache has it) without launching;
    the kernels replayed. A kernel whose module is gone is reported, not fatal."""
    import importlib

    from launcher.runtime import jit_watch

    jobs = []
    for k in held:
        try:
            obj: Any = importlib.import_module(k.module)
            for part in k.qualname.split("."):
                obj = getattr(obj, part)
            fn = jit_watch.unwrap(obj)
        except (ImportError, AttributeError, KeyError) as exc:
            done.failed.append(f"{k.kernel}: not found to replay: {exc}")
            continue
        keys = [(key_json.spec_from_json(spec), options) for spec, options in k.keys]
        jobs.append(Job(fn, device, keys))
    compile_missing(jobs, done, parallel_compile.deadline())
    return len(jobs)


def ranges_of(ctx: PrewarmContext) -> Ranges:
    """The live config's counts inside a worker (scheduler and speculative decoding, as
    ``serving_batches.shape_of`` reads them), the profile's elsewhere."""
    live = read_on("keys.live_config", ctx.worker)
    config = read_on("keys.scheduler_config", live)
    p = ctx.profile
    seqs = int(read_on("keys.max_num_seqs", config, 0) or p.serving.max_num_seqs)
    tokens = int(
        read_on("keys.max_num_batched_tokens", config, 0) or p.serving.max_num_batched_tokens
    )
    spec = p.mtp_tokens
    logprobs = p.serving.max_logprobs
    if live is not None:  # a forced --speculative-config in vllm.extra_args wins over the profile
        drafts = read_on("keys.speculative_config", live)
        spec = int(read_on("keys.num_speculative_tokens", drafts, 0) or 0) if drafts else 0
        model = read_on("keys.model_config", live)
        if model is not None:  # --max-logprobs as vLLM took it (-1: the vocabulary)
            from launcher.runtime.prewarm.stage.serving_batches import live_max_logprobs

            logprobs = live_max_logprobs(model)
    elif logprobs < 0:
        logprobs = ctx.facts.vocab
    return Ranges.of(seqs, tokens, spec, ctx.facts.experts_per_token or 1, logprobs)


class KeysProvider:
    name = "keys"
    provides = needs = NONE
    uses = frozenset({Fact.LAUNCHED, Fact.SERVED_KERNELS})
    """After every provider that launches kernels: it derives their keys."""

    def applies(self, ctx: PrewarmContext) -> bool:
        return ctx.profile.hardware.gpu != "cpu"

    def why_not(self, ctx: PrewarmContext) -> str:
        return "vLLM's CPU backend runs no Triton kernels"

    def specializations(self, ctx: PrewarmContext) -> list[str]:
        r = ranges_of(ctx)
        lines = [
            "every Triton kernel launched before sizing, each argument over the classes it "
            "reaches: ints as 1 / a multiple of 16 / other, pointers 16-byte aligned or not",
            f"request counts 1..{r.max_num_seqs}: {{{', '.join(int_classes(1, r.max_num_seqs))}}}",
            f"token counts 1..{r.max_tokens}: {{{', '.join(int_classes(1, r.max_tokens))}}}",
            "other arguments: every class when the launches showed more than one, else "
            "fixed as seen (named in the record as assumed)",
            "dtypes, constexprs (but those a rule derives) and None arguments: as launched, "
            "never varied (the record names each kernel's as assumed)",
            "call sites that compute several arguments from one count, their keys derived "
            f"whole (never a product of each argument's classes): {', '.join(WHOLE_RULES)}",
            f"a kernel over {MAX_KEYS_PER_KERNEL} reachable keys: the arguments a rule or a name "
            "derives varied together, the rest as launched (still over: one at a time)",
            "only kernels the serving waves, capture shapes and MoE buckets launched: a kernel "
            "only a runtime warmup launched keeps that warmup's keys",
            "a kernel behind an autotuner of several configs: its keys compiled, its configs "
            "timed at serving for a key value not tuned before sizing (named in the record)",
        ]
        for e in ctx.enumerated:
            lines.append(f"{e.kernel}: {_account(e)} on the last boot")
            lines += [f"    {a}" for a in e.args]
            if e.as_launched:
                lines.append(f"    as launched (assumed): {', '.join(e.as_launched)}")
            if e.derived:
                lines.append(f"    derived whole: {e.derived}")
            if e.autotuned is not None:
                lines.append(f"    {_autotune_note(e.autotuned)}")
        return lines

    def run(self, ctx: PrewarmContext) -> PrewarmResult:
        from launcher.runtime import jit_watch

        result = PrewarmResult(self.name)
        start = time.perf_counter()
        ranges = ranges_of(ctx)
        done = Compiled()
        tuners = jit_watch.autotuners()
        until = parallel_compile.deadline()  # one for the pass: a stuck ptxas costs it once
        early = getattr(ctx, "early", None)
        if early is not None:  # its threads end here; what it compiled loads from disk below
            early.close(until)
            said = early.account()
            result.specializations.append(said)
            if ctx.log:
                ctx.log(f"keys: {said}")
        replayed = getattr(ctx, "replay", ())
        if replayed:
            kernels = replay(replayed, _device(), done)
            result.specializations.append(
                f"replayed {done.compiled} keys of {kernels} kernels from the baked boot's "
                "record (cache artifact)"
            )
        handed = ctx.received(Fact.SERVED_KERNELS)  # None: no waves ran, every kernel counts
        served = handed.names if handed is not None else None
        pending: list[tuple[Job, dict[str, Any]]] = []
        for fn in jit_watch.jit_functions():
            if served is not None and launched(fn) and kernel_name(fn) not in served:
                result.enumeration.append(_warmup_only(fn))
                continue
            try:
                pending += self._close(fn, ranges, result, tuners.get(id(fn)))
            except Exception as exc:  # this kernel's keys are left to the census; the rest go on
                done.failed.append(f"{kernel_name(fn)}: enumeration: {type(exc).__name__}: {exc}")
        compiling = time.monotonic()
        compile_missing([job for job, _ in pending], done, until)
        for job, record in pending:
            record["compiled"], record["failed"] = job.compiled, job.failed
            account = _account(KernelEnumeration.model_validate(record))
            if job.last_done:
                account += f"; its last key done {job.last_done - compiling:.1f}s into the pass"
            result.specializations.append(f"{record['kernel']}: {account}")
        result.compiled = result.warmed = done.compiled
        result.held, unheld = held_keys()
        if unheld:
            done.failed.append(f"{unheld} held keys not recorded for a warm boot (no JSON form)")
        more = len(done.failed) - SHOWN_FAILURES
        result.skipped = "; ".join(done.failed[:SHOWN_FAILURES]) + (
            f"; and {more} more failed" if more > 0 else ""
        )
        result.seconds = time.perf_counter() - start
        return result

    def _close(
        self, fn: Any, ranges: Ranges, result: PrewarmResult, tuner: Any = None
    ) -> list[tuple[Job, dict[str, Any]]]:
        """Enumerate ``fn``'s keys on each device it ran on: a compile job for the missing ones
        per device, with the record it accounts to."""
        jobs = []
        for device, launches in launched(fn).items():
            e = enumerate_keys(kernel_name(fn), params_of(fn), launches, ranges)
            record = e.to_dict()
            record["compiled"] = record["failed"] = 0
            if tuner is not None:
                tuned = autotuned(tuner)
                record["autotuned"] = tuned.model_dump()
                result.specializations.append(f"{e.kernel}: {_autotune_note(tuned)}")
            result.enumeration.append(record)
            if e.missing:
                jobs.append((Job(fn, device, e.missing), record))
        return jobs

    def freeze(self, ctx: PrewarmContext, on_late_compile, *, strict: bool = False) -> None:
        """Late Triton compiles are caught by ``runtime.jit_watch``, which the worker arms."""


def _device() -> Any:
    """The device Triton launches on here (its key for ``device_caches``)."""
    from triton.runtime.driver import driver

    return driver.active.get_current_device()


def _warmup_only(fn: Any) -> dict[str, Any]:
    """A kernel only a runtime warmup launched: its keys are that warmup's, none derived."""
    launches = sum(len(v) for v in launched(fn).values())
    return {
        "kernel": kernel_name(fn),
        "launched": launches,
        "reachable": launches,
        "missing": 0,
        "too_many": False,
        "reduced": "",
        "args": [],
        "assumed": [],
        "as_launched": [],
        "not_served": "launched by a runtime warmup only, never by the serving waves",
    }


SHOWN_FAILURES = 20
BENCHMARK_BUFFER = "256 MiB"
"""What Triton's benchmark allocates to flush L2 before each timed run (the NVIDIA driver's
``get_empty_cache_for_benchmark``)."""


def autotuned(tuner: Any) -> Autotuned:
    """What an autotuner wrapping a kernel keys on, how many configs it times, and how many
    key values it tuned in this process."""
    return Autotuned(
        key=[str(k) for k in getattr(tuner, "keys", ())],
        configs=len(getattr(tuner, "configs", ())),
        tuned=len(getattr(tuner, "cache", {})),
    )


def _autotune_note(a: Autotuned) -> str:
    """The enumeration compiles keys, it does not tune: say what serving still does."""
    return (
        f"autotuned on ({', '.join(a.key)}), {a.tuned} value(s) tuned before sizing: "
        f"a new value times up to {a.configs} configs at its first launch while serving "
        f"(a {BENCHMARK_BUFFER} buffer and the timing runs, not in the plan; fewer where the "
        "autotuner prunes them, none where its disk cache holds the value)"
    )


def _account(e: KernelEnumeration) -> str:
    """One kernel's keys, as its record holds them (a record older than the ``compiled``
    count says only what was missing)."""
    if e.too_many and not e.reduced:  # a record of an older boot
        return (
            f"more than {MAX_KEYS_PER_KERNEL} reachable keys ({e.launched} launched): "
            "none compiled by enumeration, left to the census"
        )
    text = f"{e.reachable} keys"
    if e.reduced:
        text += f" (over {MAX_KEYS_PER_KERNEL} in full: {e.reduced})"
    text += f" ({e.launched} launched, {e.missing} missing"
    if e.compiled is not None:
        text += f", {e.compiled} compiled by enumeration"
    if e.failed:
        text += f", {e.failed} failed to compile"
    return text + ")"
