"""The worst case a deployment must survive, as a list of requests (pure: no I/O).

KV grows with every token a sequence holds, so the worst moment is a full KV cache
decoding ``max_num_seqs`` sequences at once while another prompt is prefilled in
``max_num_batched_tokens`` chunks beside them. The first request fills ``max_model_len``
(the longest context, and the longest share of it on one DCP rank); the others share what
the planned KV cache holds beside it, so ``max_num_seqs`` sequences fill it together
(each ``max_model_len`` when the cache holds that many; longer ones would only be
preempted and cost time). Outputs
are decoded to the end (EOS ignored); a second wave prefills while the first decodes.
Prompts are token ids (exact lengths without a tokenizer), different for every request
so prefix caching shares nothing.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from launcher.profile.schema import Profile

FIRST_ID = 10
"""Lowest token id used in prompts: above the special tokens of common vocabularies."""


@dataclass(frozen=True)
class RequestSpec:
    index: int
    prompt_tokens: int
    output_tokens: int
    seed: int


@dataclass(frozen=True)
class Workload:
    requests: tuple[RequestSpec, ...]
    concurrency: int
    max_seconds: float
    chunk_tokens: int
    """Prefill chunk (serving.max_num_batched_tokens) the server splits each prompt into."""
    tokens_per_dcp_rank: int
    """Longest context one DCP rank holds for one sequence (the interleaved share)."""

    @property
    def total_tokens(self) -> int:
        return sum(r.prompt_tokens + r.output_tokens for r in self.requests)

    @property
    def fill_tokens(self) -> int:
        """Prompt length of the requests after the first."""
        return self.requests[-1].prompt_tokens

    def describe(self) -> str:
        first = self.requests[0]
        prompts = f"{first.prompt_tokens:,}-token prompts"
        if self.fill_tokens != first.prompt_tokens:
            prompts = (
                f"one {first.prompt_tokens:,}-token prompt then {self.fill_tokens:,}-token ones"
            )
        return (
            f"{len(self.requests)} requests, {self.concurrency} at once: {prompts} "
            f"(prefill chunks of {self.chunk_tokens:,}) + {first.output_tokens:,} decoded"
            f"{self._per_rank()}, at most {self.max_seconds:g}s"
        )

    def _per_rank(self) -> str:
        first = self.requests[0]
        if self.tokens_per_dcp_rank >= first.prompt_tokens + first.output_tokens:
            return ""
        return f" ({self.tokens_per_dcp_rank:,} tokens per DCP rank)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": len(self.requests),
            "concurrency": self.concurrency,
            "prompt_tokens": self.requests[0].prompt_tokens,
            "fill_prompt_tokens": self.fill_tokens,
            "output_tokens": self.requests[0].output_tokens,
            "max_seconds": self.max_seconds,
            "chunk_tokens": self.chunk_tokens,
            "tokens_per_dcp_rank": self.tokens_per_dcp_rank,
        }


def output_tokens(p: Profile) -> int:
    q = p.qualify
    if q.output_tokens is not None:
        return q.output_tokens
    if q.prompt_tokens is not None:
        return max(1, min(1024, p.serving.max_model_len - q.prompt_tokens))
    return max(1, min(1024, p.serving.max_model_len // 16))


def prompt_tokens(p: Profile) -> int:
    q = p.qualify
    if q.prompt_tokens is not None:
        return q.prompt_tokens
    return max(1, p.serving.max_model_len - output_tokens(p))


def concurrency(p: Profile) -> int:
    return p.qualify.concurrency or p.serving.max_num_seqs


def dcp_share(tokens: int, dcp: int, interleave: int) -> int:
    """Tokens of a ``tokens``-long sequence the busiest DCP rank holds (round-robin runs of
    ``interleave`` tokens)."""
    runs = math.ceil(tokens / interleave)
    return min(tokens, math.ceil(runs / dcp) * interleave)


def worst_case(p: Profile, kv_tokens: int | None = None) -> Workload:
    """The profile's ``qualify`` workload (defaults: the worst case of its serving settings
    for a KV cache of ``kv_tokens`` logical tokens; None: as if it held every sequence)."""
    n_out, n_in, width = output_tokens(p), prompt_tokens(p), concurrency(p)
    count = p.qualify.requests or 2 * width
    fill = n_in
    if p.qualify.prompt_tokens is None and kv_tokens and width > 1:
        # What the cache holds beside the first (longest) request, shared by the others.
        share = (kv_tokens - (n_in + n_out)) // (width - 1)
        fill = max(1, min(n_in, share - n_out))
    requests = tuple(RequestSpec(i, n_in if i == 0 else fill, n_out, seed=i) for i in range(count))
    context = n_in + n_out
    return Workload(
        requests=requests,
        concurrency=min(width, count),
        max_seconds=p.qualify.max_seconds,
        chunk_tokens=p.serving.max_num_batched_tokens,
        tokens_per_dcp_rank=dcp_share(context, p.parallel.decode_context, p.parallel.interleave),
    )


def prompt_ids(spec: RequestSpec, vocab: int) -> list[int]:
    """The request's prompt as token ids, reproducible from its seed; random ids, so no two
    requests share a whole KV block for the prefix cache to reuse."""
    high = max(FIRST_ID + 2, vocab) - 1
    rng = random.Random(spec.seed)
    return [rng.randint(FIRST_ID, high) for _ in range(spec.prompt_tokens)]
