"""Request features as a derived axis: what a deployment's OpenAI API accepts, and refuses.

The deployment fixes the shapes a kernel sees; a request's features fix which kernels run and
with which constexprs: top-p alone, top-k alone or both flip ``_topk_topp_kernel``'s flags (and
with top-k off its ``K`` pointer is the logits tensor), a logprobs count picks the V2 runner's
``TOPK_BLOCK_SIZE``, a structured request launches xgrammar's bitmask kernel. So the prewarm
serves every feature the API accepts, and the key enumeration ranges over them.

The catalogue's reach is checked against vLLM's protocol: every field of its completions and
chat request models, at each supported release, is placed in ``launcher.vllm.request_fields``
(a feature here, no kernel, or refused). What a vLLM line refuses is read from its source:
vLLM 0.26 to 0.33 refuse ``min_p`` and
``logit_bias`` with speculative decoding (``SamplingParams._validate_spec_decode``) and any
logprobs count above ``max_logprobs`` (20 by default). The fork lines derive from those
releases and are taken to refuse the same (their source was not read for this).

Pure data: the dry run (``prewarm --list``) prints it without vLLM.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_LOGPROBS = 20
"""vLLM's default ``--max-logprobs``: a request asking for more is refused."""
LOGPROB_COUNTS = (0, 1, 2, 3, 7, 8, 15, 16, 20)
"""Logprob counts to serve: each side of every power of two the V2 runner's
``next_power_of_2(1 + logprobs)`` block crosses (1, 2, 4, 8, 16, 32) up to 20."""
TOPK_BLOCK_MAX = 1024
"""The V2 runner's largest ``TOPK_BLOCK_SIZE`` (``logprob._MAX_TOPK_BLOCK``, 0.26-0.33): any
count of 1023 or more runs that block."""
MAX_LOGPROB_TOKEN_IDS = 128
"""The most ``logprob_token_ids`` a request may name (``sampling_params``, 0.26-0.33)."""
FIRST_TOKEN_ID = 5
"""The first id the features name (``logit_bias``, ``allowed_token_ids``, ``stop_token_ids``,
``logprob_token_ids``): an ordinary token of any vocabulary over a few hundred ids."""


def logprob_counts(max_logprobs: int = MAX_LOGPROBS) -> tuple[int, ...]:
    """The logprob counts to serve under ``--max-logprobs`` (-1: the vocabulary): the counts up
    to 20, and above 20 each side of every V2 block boundary (32 to 1024) up to the bound."""
    if max_logprobs <= MAX_LOGPROBS and max_logprobs >= 0:
        return LOGPROB_COUNTS
    bound = TOPK_BLOCK_MAX if max_logprobs < 0 else min(max_logprobs, TOPK_BLOCK_MAX)
    more = {k for i in range(5, 11) for k in ((1 << i) - 1, 1 << i) if k <= bound}
    return tuple(sorted({*LOGPROB_COUNTS, *more, bound}))


def logprob_token_id_counts() -> tuple[int, ...]:
    """How many ``logprob_token_ids`` to serve: each side of every power of two the V2
    ``_fill_logprob_token_ids_kernel``'s ``PADDED_COLS`` (next power of 2) crosses, to 128."""
    out = {n for i in range(8) for n in (1 << i, (1 << i) + 1)}
    return tuple(sorted(n for n in out if n <= MAX_LOGPROB_TOKEN_IDS))


SPEC_REFUSES = ("min_p", "logit_bias")
JSON = {"type": "json_object"}
CHOICE = {"choice": ["w4", "w5"]}
"""Sampling parameters vLLM 0.26-0.33 refuse with speculative decoding (HTTP 400)."""


@dataclass(frozen=True)
class Feature:
    """One request feature: the OpenAI completions fields that ask for it."""

    name: str
    group: str
    """sampling, penalties, control, logprobs, structured or streaming."""
    body: dict[str, Any]
    """The request's fields (``/v1/completions``), beside model, prompt and max_tokens."""
    refused: str = ""
    """Why this deployment's API refuses it (empty: accepted)."""
    top_k: bool = False
    top_p: bool = False
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    structured: bool = False
    bad_words: tuple[str, ...] = field(default=())
    streams: bool = True
    """Whether the API takes it with ``stream: true`` (prompt logprobs: "not available when
    stream=True", vLLM's completions and chat protocols refuse the pair with HTTP 400)."""

    @property
    def accepted(self) -> bool:
        return not self.refused

    @property
    def sampler_flags(self) -> tuple[bool, bool] | None:
        """(top-k, top-p) a batch of only this feature turns on in the sampler, or None."""
        return (self.top_k, self.top_p) if self.top_k or self.top_p else None

    def sampling_kwargs(self) -> dict[str, Any]:
        """The feature as ``vllm.SamplingParams`` keyword arguments (what the engine makes of
        the request's fields; echo and streaming are the API's, not the sampler's)."""
        out = {k: v for k, v in self.body.items() if k not in ("echo", "stream", "response_format")}
        out.pop("structured_outputs", None)
        if self.logprobs is not None:
            out["logprobs"] = self.logprobs
        if self.prompt_logprobs is not None:
            out["prompt_logprobs"] = self.prompt_logprobs
        if "logit_bias" in out:
            out["logit_bias"] = {int(k): v for k, v in out["logit_bias"].items()}
        if "logprob_token_ids" in out:
            out.pop("logprobs", None)  # the protocol asks for the named ids instead of a count
        out.pop("bad_words", None)  # token ids, set by the caller from its tokenizer
        return out


def _sampled(**body: Any) -> dict[str, Any]:
    return {"temperature": 0.8, **body}


PROMPT_LOGPROBS_REFUSED = (
    "refused by the profile (serving.prompt_logprobs: refuse): the launch's middleware answers "
    "HTTP 400"
)


def features(
    spec_tokens: int, max_logprobs: int = MAX_LOGPROBS, prompt_logprobs: str = "reserve"
) -> list[Feature]:
    """Every request feature, each accepted or refused (with why) for a deployment drafting
    ``spec_tokens`` tokens a step whose API allows ``max_logprobs`` and reserves or refuses
    prompt logprobs (``serving.prompt_logprobs``)."""
    prompt = PROMPT_LOGPROBS_REFUSED if prompt_logprobs == "refuse" else ""
    spec = (
        f"refused with speculative decoding ({spec_tokens} MTP tokens): vLLM's "
        "SamplingParams._validate_spec_decode"
        if spec_tokens
        else ""
    )
    out = [
        Feature("greedy", "sampling", {"temperature": 0.0}),
        Feature("temperature", "sampling", _sampled()),
        Feature("top_p", "sampling", _sampled(top_p=0.9), top_p=True),
        Feature("top_k", "sampling", _sampled(top_k=20), top_k=True),
        Feature("top_k_top_p", "sampling", _sampled(top_k=20, top_p=0.9), top_k=True, top_p=True),
        Feature("min_p", "sampling", _sampled(min_p=0.1), refused=spec),
        Feature(
            "penalties",
            "penalties",
            _sampled(presence_penalty=0.5, frequency_penalty=0.5, repetition_penalty=1.1),
        ),
        Feature("seed", "control", _sampled(seed=7)),
        Feature("n", "control", _sampled(n=2)),
        Feature("min_tokens", "control", {"temperature": 0.0, "min_tokens": 4}),
        Feature(
            "min_tokens_stop",
            "control",
            {"temperature": 0.0, "min_tokens": 4, "stop_token_ids": [FIRST_TOKEN_ID + 2]},
        ),
        Feature("logit_bias", "control", {"temperature": 0.0, "logit_bias": {"5": 5.0}}, spec),
        Feature(
            "allowed_token_ids",
            "control",
            {"temperature": 0.8, "allowed_token_ids": list(range(FIRST_TOKEN_ID, 21))},
        ),
        Feature("bad_words", "control", {"temperature": 0.0}, bad_words=("w7 w8",)),
    ]
    for k in logprob_counts(max_logprobs):
        over = max_logprobs >= 0 and k > max_logprobs
        refused = f"logprobs {k} is over max_logprobs {max_logprobs}" if over else ""
        out.append(Feature(f"logprobs={k}", "logprobs", {"logprobs": k}, refused, logprobs=k))
    for n in logprob_token_id_counts():
        ids = list(range(FIRST_TOKEN_ID, FIRST_TOKEN_ID + n))
        body = {"logprobs": 0, "logprob_token_ids": ids}
        out.append(Feature(f"logprob_token_ids={n}", "logprobs", body))
    out += [
        Feature(
            "prompt_logprobs",
            "logprobs",
            {"prompt_logprobs": 1},
            prompt,
            prompt_logprobs=1,
            logprobs=0,
            streams=False,
        ),
        Feature(
            "echo",
            "logprobs",
            {"echo": True, "logprobs": 1},
            prompt,
            prompt_logprobs=1,
            logprobs=1,
        ),
        Feature("json_object", "structured", {"response_format": JSON}, structured=True),
        Feature("structured_choice", "structured", {"structured_outputs": CHOICE}, structured=True),
        Feature("stream", "streaming", {"stream": True}),
    ]
    return out


def accepted(
    spec_tokens: int, max_logprobs: int = MAX_LOGPROBS, prompt_logprobs: str = "reserve"
) -> list[Feature]:
    return [f for f in features(spec_tokens, max_logprobs, prompt_logprobs) if f.accepted]


def sampler_flags(
    spec_tokens: int, max_logprobs: int = MAX_LOGPROBS
) -> tuple[tuple[bool, bool], ...]:
    """The (top-k, top-p) combinations the accepted features turn on, each once, sorted."""
    flags = {f.sampler_flags for f in accepted(spec_tokens, max_logprobs)}
    return tuple(sorted(f for f in flags if f is not None))


def describe(
    spec_tokens: int, max_logprobs: int = MAX_LOGPROBS, prompt_logprobs: str = "reserve"
) -> list[str]:
    """One line per group for ``prewarm --list``: what is served before sizing, what refused."""
    groups: dict[str, list[str]] = {}
    refused: list[str] = []
    catalogue = features(spec_tokens, max_logprobs, prompt_logprobs)
    for f in catalogue:
        if f.accepted and f.group == "streaming":
            groups.setdefault(f.group, []).append(f"{f.name} (the API's framing: no kernel)")
        elif f.accepted:
            groups.setdefault(f.group, []).append(f.name)
        else:
            refused.append(f"{f.name} ({f.refused})")
    lines = [f"{group}: {', '.join(names)}" for group, names in groups.items()]
    refused += [
        f"{f.name} with stream (vLLM's protocol: not available when stream=True)"
        for f in catalogue
        if f.accepted and not f.streams
    ]
    if refused:
        lines.append("refused by the API, not served: " + "; ".join(refused))
    return lines
