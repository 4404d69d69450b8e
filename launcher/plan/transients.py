"""What request features and deployment settings allocate after the KV cache is sized.

Pure arithmetic from the model's vocabulary and dtype, the prefill chunk, the sequences and
the ranks; each part says how, by vLLM's code as read at 0.26 and 0.33:

- Prompt logprobs (and ``echo`` with logprobs, which the protocol turns into them). The V1
  runner's ``_get_prompt_logprobs_dict`` computes logits over every prompt token the step
  scheduled, all-gathered over the TP ranks (every rank holds the whole vocabulary), then
  ``log_softmax(dtype=float32)``, which casts a model-dtype input to an fp32 copy before it
  writes its fp32 output: chunk x vocab x (dtype + 4 + 4) at its peak. The all-gather itself
  (the shard, the gathered buffer and the reshaped copy, (2 + 1/tp) x dtype) is below that.
  The V2 runner scores 1,024-row chunks with a Triton kernel (no fp32 copy), so V1's figure
  is the worst and the one planned. The chunk is ``max_num_batched_tokens``: a step's
  scheduled tokens, whichever requests they belong to (the loop frees each request's logits
  before the next one's fp32 copy, so several requests sum to no more than one chunk).
- The DCP all-gather: with decode context parallelism vLLM's MLA layer all-gathers the
  query over the DCP group along the heads (``get_dcp_group().all_gather(mqa_q, dim=1)``),
  a fresh buffer plus the reshaped copy of it, beside the concatenated input. A sparse-MLA
  backend sends every token of the chunk through that path; a dense one only the decode
  rows (its prefill reads the context through a preallocated workspace).
- Sampled logprobs: V1's sampler takes ``log_softmax`` of the fp32 logits of every row of a
  step where one request asks for logprobs (rows x vocab x 4), then the top ``max_logprobs``.
- Structured outputs: xgrammar's token bitmask, ceil(vocab / 32) int32 per row, copied to
  the device for the rows of a step (max_num_seqs x (1 + speculative tokens)).
- ``n`` > 1 fans out into n requests of the scheduler (``ParentRequest``): rows of
  max_num_seqs, already the sampler's rows in ``activation_peak``, and prompt tokens of the
  chunk, already the prompt-logprob part. Its part is 0, shown with why.

In one step the DCP gather (inside the forward) and the prompt logprobs (after the sampler)
never hold memory at once, so the component reserves the larger of the two (``shared``); the
sampled logprobs and the bitmask live with the sampler and are added.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from launcher.deployment import Deployment
from launcher.plan.model import ModelFacts
from launcher.units import GiB

BITMASK_BITS = 32
"""Tokens per int32 word of xgrammar's bitmask."""
FP32 = 4


@dataclass(frozen=True)
class Transient:
    name: str
    bytes: int
    detail: str
    shared: bool = False
    """Held at a moment of the step no other shared part is (the component takes the max)."""


def prompt_logprob_bytes(chunk: int, vocab: int, dtype_bytes: int, tp: int) -> int:
    """V1's peak for prompt logprobs over ``chunk`` tokens: the gathered logits in the model's
    dtype, the fp32 cast ``log_softmax`` makes of them and its fp32 output (no cast when the
    logits are fp32 already), or the all-gather's (2 + 1/tp) copies if larger."""
    cast = FP32 if dtype_bytes != FP32 else 0
    softmax = chunk * vocab * (dtype_bytes + cast + FP32)
    gather = 0
    if tp > 1:
        gather = chunk * vocab * dtype_bytes * 2 + chunk * ceil(vocab / tp) * dtype_bytes
    return max(softmax, gather)


def dcp_gather_bytes(rows: int, local_heads: int, width: int, dtype_bytes: int, dcp: int) -> int:
    """The DCP query all-gather over ``rows`` tokens: the input (local heads), the gathered
    buffer and its reshaped copy (local heads x dcp each)."""
    if dcp <= 1:
        return 0
    one = rows * local_heads * width * dtype_bytes
    return one * (1 + 2 * dcp)


def transients(d: Deployment, f: ModelFacts) -> tuple[Transient, ...]:
    """Every planned transient of deployment ``d`` on model ``f``, per rank."""
    p = d.profile
    s = p.serving
    chunk, vocab, dt, tp = s.max_num_batched_tokens, f.vocab, f.dtype_bytes, p.parallel.tensor
    rows = d.draft_rows
    out = [_prompt_logprobs(d, f)]
    dcp = p.parallel.decode_context
    if dcp > 1:
        width = (f.kv_lora_rank + f.qk_rope) if f.is_mla else f.head_dim
        heads = max(1, f.heads // tp)
        gathered = chunk if d.sparse_mla else rows
        which = "every token of the chunk (sparse MLA)" if d.sparse_mla else "the decode rows"
        out.append(
            Transient(
                "dcp_all_gather",
                dcp_gather_bytes(gathered, heads, width, dt, dcp),
                f"query all-gather over DCP {dcp}: {gathered} tokens ({which}) x {heads} heads "
                f"x {width} x {dt} B x (1 input + {dcp} gathered + {dcp} reshaped)",
                shared=True,
            )
        )
    k = _max_logprobs(s.max_logprobs, vocab)
    out.append(
        Transient(
            "sampled_logprobs",
            rows * vocab * FP32 + rows * (k + 1) * (8 + FP32),
            f"{rows} rows x vocab x 4 (fp32 log-probs) + top-{k} (max_logprobs) ids and values",
        )
    )
    out.append(
        Transient(
            "n_fanout",
            0,
            f"n > 1 is n requests of the scheduler: rows within max_num_seqs {s.max_num_seqs} "
            "(activation_peak's sampler), prompt tokens within the chunk (prompt_logprobs)",
        )
    )
    words = ceil(vocab / BITMASK_BITS)
    out.append(
        Transient(
            "structured_bitmask",
            rows * words * 4,
            f"xgrammar bitmask: {rows} rows x ceil(vocab/32)={words} x int32",
        )
    )
    return tuple(out)


def _max_logprobs(max_logprobs: int, vocab: int) -> int:
    """``--max-logprobs`` as vLLM reads it (-1: the vocabulary)."""
    return vocab if max_logprobs < 0 else min(max_logprobs, vocab)


def _prompt_logprobs(d: Deployment, f: ModelFacts) -> Transient:
    s, tp = d.profile.serving, d.profile.parallel.tensor
    chunk = s.max_num_batched_tokens
    dt = f.dtype_bytes
    cast = " + 4 (fp32 cast)" if dt != FP32 else ""
    need = prompt_logprob_bytes(chunk, f.vocab, dt, tp)
    how = f"chunk {chunk} x vocab {f.vocab:,} x ({dt} logits{cast} + 4 fp32 log-probs)"
    if s.prompt_logprobs == "refuse":
        return Transient(
            "prompt_logprobs",
            0,
            f"refused (serving.prompt_logprobs=refuse, HTTP 400): would need {need / GiB:.2f} "
            f"GiB, V1 {how}",
            shared=True,
        )
    return Transient(
        "prompt_logprobs",
        need,
        f"V1: {how}, logits all-gathered on every rank; echo too",
        shared=True,
    )
