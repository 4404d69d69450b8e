"""Traffic like users send: requests generated from vLLM's own request model, not our catalogue.

The stage's catalogue (``launcher.vllm.request_features``) says what the stage serves before
sizing; testing with it shows only that the catalogue is closed. This generator starts from the
other side: every field of the installed vLLM's ``CompletionRequest`` is either drawn here
(``DRAW``), or named with why the workload does not send it (``NOT_SENT``); a field in neither
fails the tier (``unplaced``). Each request mixes fields at random under the API's own rules
(what a deployment with speculative decoding refuses, what cannot stream), prompts run up to
``max_model_len``, some share a prefix, some stream, and one asks for prompt logprobs over the
longest prefill chunk. Seeded: the seed is printed, and the same seed sends the same requests.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

FIRST_ID = 4  # after <pad> <s> </s> <unk> (the tier's word-level tokenizers)
MAX_LOGPROBS = 20
"""vLLM's default ``--max-logprobs``: the tier's profiles keep it."""


@dataclass(frozen=True)
class Shape:
    """What a request may ask of this deployment."""

    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    vocab: int
    spec_tokens: int
    out_tokens: int = 4


@dataclass
class Request:
    body: dict[str, Any]
    label: str
    fields: tuple[str, ...] = field(default=())
    """The optional fields it sets (what the coverage counts)."""


Draw = Callable[[random.Random, Shape], Any]


def _ids(rng: random.Random, s: Shape, n: int) -> list[int]:
    return [rng.randrange(FIRST_ID, s.vocab) for _ in range(n)]


DRAW: dict[str, Draw] = {
    "echo": lambda r, s: True,
    "frequency_penalty": lambda r, s: r.choice((0.5, -0.3, 1.2)),
    "presence_penalty": lambda r, s: r.choice((0.4, -0.5, 1.0)),
    "repetition_penalty": lambda r, s: r.choice((1.1, 0.9, 1.3)),
    "logit_bias": lambda r, s: {str(t): r.choice((-5.0, 3.0)) for t in _ids(r, s, 3)},
    "logprobs": lambda r, s: r.choice((0, 1, 5, 8, 16, MAX_LOGPROBS)),
    "prompt_logprobs": lambda r, s: r.choice((0, 1, 5, MAX_LOGPROBS)),
    "logprob_token_ids": lambda r, s: _ids(r, s, r.choice((1, 4))),
    "n": lambda r, s: r.choice((2, 3)),
    "seed": lambda r, s: r.randrange(1 << 31),
    "stop": lambda r, s: ["w17"],
    "stop_token_ids": lambda r, s: _ids(r, s, 2),
    "temperature": lambda r, s: r.choice((0.0, 0.7, 1.3)),
    "top_p": lambda r, s: r.choice((0.5, 0.9)),
    "top_k": lambda r, s: r.choice((1, 5, 40)),
    "min_p": lambda r, s: r.choice((0.05, 0.2)),
    "min_tokens": lambda r, s: r.choice((1, 3)),
    "ignore_eos": lambda r, s: True,
    "include_stop_str_in_output": lambda r, s: True,
    "skip_special_tokens": lambda r, s: False,
    "spaces_between_special_tokens": lambda r, s: False,
    "allowed_token_ids": lambda r, s: _ids(r, s, r.choice((2, 16))),
    "bad_words": lambda r, s: ["w9 w10", "w11"],
    "truncate_prompt_tokens": lambda r, s: r.choice((16, 64)),
    "response_format": lambda r, s: {"type": "json_object"},
    "structured_outputs": lambda r, s: {"choice": ["w4", "w5"]},
    "length_penalty": lambda r, s: 1.0,
    "return_tokens_as_token_ids": lambda r, s: True,
    "return_token_ids": lambda r, s: True,
    "cache_salt": lambda r, s: f"salt{r.randrange(4)}",
    "user": lambda r, s: "tier",
    "priority": lambda r, s: 0,
    "add_special_tokens": lambda r, s: False,
    "stream": lambda r, s: True,
    "stream_options": lambda r, s: {"include_usage": True},
}
"""How the workload draws each field it sends."""

NOT_SENT: dict[str, str] = {
    "model": "set on every request",
    "prompt": "drawn by length class, with shared prefixes",
    "max_tokens": "set on every request",
    "suffix": "vLLM refuses it (HTTP 400): no kernel runs",
    "use_beam_search": "beam search is off the serving path this launcher plans (offline only)",
    "prompt_embeds": "needs --enable-prompt-embeds; the tier's profiles leave it off",
    "request_id": "an identifier: reaches no kernel",
    "kv_transfer_params": "disaggregated prefill only; the tier runs no connector",
    "truncation_side": "where truncation cuts, host-side: reaches no kernel",
    "return_token_offsets": "host-side detokenisation: reaches no kernel",
    "mm_processor_kwargs": "multimodal only; the tier's models are text",
    "vllm_xargs": "free-form extension arguments: no kernel reads them",
    "documents": "chat template input, host-side",
    "ec_transfer_params": "encoder-cache transfer between nodes; the tier runs no connector",
    "repetition_detection": "the scheduler's stop check on the host (v1/core/sched/utils.py)",
    "thinking_token_budget": "refused without --reasoning-config, which the tier's profiles lack",
}
NEWER: dict[str, str] = {
    name: "in vLLM 0.32's request model, not 0.26's (the GPU kit's): not reviewed for kernels"
    for name in (
        "mm_payload",
        "return_mm_kwargs",
        "routed_experts_prompt_start",
        "session_id",
        "stream_interval",
        "watermarking",
    )
}
"""Fields of a newer release than the GPU tier runs, known and not yet placed: a tier on that
release fails on them until each is in ``DRAW`` or ``NOT_SENT`` with a reason read there."""
"""Fields of the protocol the workload does not send, each with why."""

SPEC_REFUSES = ("min_p", "logit_bias")
"""What vLLM 0.26-0.33 refuse with speculative decoding (``SamplingParams``)."""
SPEC_FAULTS = {
    "logprob_token_ids": "vLLM 0.26 under MTP fails it in vLLM itself (H100, 2026-12-06): a "
    "batch of such rows beside logprobs=N rows stops the engine's step (a shape mismatch in "
    "its sampler), and a request of them was answered HTTP 500 (an IndexError building the "
    "completion's logprobs)",
}
"""Fields vLLM accepts with speculative decoding and then fails on: not drawn there, each with
what was seen (the stage serves them last, in waves of their own)."""
NO_STREAM = ("prompt_logprobs", "echo")
"""What vLLM's completions protocol refuses with ``stream: true``."""
EXCLUSIVE = (("response_format", "structured_outputs"),)
GRAMMAR_DROPS = ("ignore_eos", "min_tokens", "allowed_token_ids", "n")
"""What a request under a grammar does not send (``_obey`` says why)."""


def unplaced(protocol_fields: list[str]) -> list[str]:
    """Fields of the installed vLLM's request model that the workload neither draws nor names
    (``NEWER``'s among them: named as unreviewed is not placed)."""
    return sorted(f for f in protocol_fields if f not in DRAW and f not in NOT_SENT)


def protocol_fields() -> list[str]:
    """The installed vLLM's ``/v1/completions`` request fields (imports vLLM)."""
    try:
        from vllm.entrypoints.openai.completion.protocol import CompletionRequest
    except ImportError:  # 0.26's older layout
        from vllm.entrypoints.openai.protocol import CompletionRequest
    return sorted(CompletionRequest.model_fields)


def generate(shape: Shape, seed: int, count: int, sent: list[str]) -> list[Request]:
    """``count`` requests drawn from ``sent`` (the fields this vLLM has that ``DRAW`` knows):
    each sets a random handful under the API's rules; the first is the longest prompt the
    model takes, the second prompt logprobs over two full prefill chunks."""
    rng = random.Random(seed)
    prefixes = [_ids(rng, shape, rng.choice((64, 512, 1500))) for _ in range(3)]
    spec_out = (*SPEC_REFUSES, *SPEC_FAULTS) if shape.spec_tokens else ()
    allowed = [f for f in sent if f in DRAW and f not in spec_out]
    out: list[Request] = []
    longest = shape.max_model_len - shape.out_tokens
    out.append(Request(_body(_ids(rng, shape, longest), shape, {}), f"longest {longest}"))
    chunk = min(2 * shape.max_num_batched_tokens, longest)
    if "prompt_logprobs" in allowed:
        extra = {"prompt_logprobs": MAX_LOGPROBS}
        out.append(
            Request(
                _body(_ids(rng, shape, chunk), shape, extra),
                f"prompt logprobs over {chunk} tokens",
                ("prompt_logprobs",),
            )
        )
    while len(out) < count:
        picked = rng.sample(allowed, k=min(len(allowed), rng.randint(1, 6)))
        extra = {f: DRAW[f](rng, shape) for f in picked}
        _obey(extra)
        ids = _prompt(rng, shape, prefixes, longest)
        label = f"{len(ids)} tokens: {', '.join(sorted(extra)) or 'plain'}"
        out.append(Request(_body(ids, shape, extra), label, tuple(sorted(extra))))
    return out


def coverage(requests: list[Request]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in requests:
        for f in r.fields:
            counts[f] = counts.get(f, 0) + 1
    return counts


def _obey(extra: dict[str, Any]) -> None:
    """The API's own rules between fields: drop what it would refuse together."""
    if extra.get("stream"):
        for f in NO_STREAM:
            extra.pop(f, None)
    else:
        extra.pop("stream_options", None)
    for a, b in EXCLUSIVE:
        if a in extra and b in extra:
            extra.pop(b)
    if "response_format" in extra or "structured_outputs" in extra:
        # a grammar ends in a token or two; vLLM ends a request that samples past its
        # finished grammar with an internal error, plain vLLM too; and n > 1 under a grammar:
        # vLLM 0.26 under MTP rejected the children's first token, HTTP 500 (H100, 2026-12-06)
        for f in GRAMMAR_DROPS:
            extra.pop(f, None)
    if "logprob_token_ids" in extra:  # the protocol: "logprobs must be set" beside them
        extra.setdefault("logprobs", len(extra["logprob_token_ids"]))
    if "allowed_token_ids" in extra and "bad_words" in extra:
        extra.pop("bad_words")  # every allowed id may be banned: vLLM then has no token left


def _prompt(rng: random.Random, s: Shape, prefixes: list[list[int]], longest: int) -> list[int]:
    kind = rng.random()
    if kind < 0.35:  # shares a prefix with others (prefix caching hits)
        head = rng.choice(prefixes)
        return (head + _ids(rng, s, rng.randint(1, 64)))[:longest]
    if kind < 0.85:
        return _ids(rng, s, rng.randint(1, 256))
    return _ids(rng, s, rng.randint(256, longest))


def _body(ids: list[int], s: Shape, extra: dict[str, Any]) -> dict[str, Any]:
    return {"prompt": ids, "max_tokens": s.out_tokens, **extra}
