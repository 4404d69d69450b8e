"""Every field vLLM's OpenAI protocol accepts for completions and chat, and where each one goes.

The request space is vLLM's, not the stage's catalogue: ``request_fields.json`` records the
fields of ``CompletionRequest`` and ``ChatCompletionRequest`` at each supported release, read
from the release's source by AST (``python -m launcher.vllm.request_fields VERSION=SRC ...``,
SRC a directory holding the release's ``vllm`` package). ``PLACEMENTS`` puts every field in one
of three places:

- ``feature``: a request feature of the catalogue (``launcher.vllm.request_features``)
  serves the kernels it reaches before sizing;
- ``no kernel``: it changes the text, the scheduling or the response, not a kernel or its
  constexprs (with why);
- ``refused``: the deployment's API refuses it (vLLM's own check, or the launch's middleware),
  with why.

A field a recorded release has and the table does not place fails ``tests/unit``; the
installed vLLM's models are checked against the table in ``tests/integration``. Nothing here
imports vLLM: the installed models are read by ``installed_fields`` only when it is called.
"""

from __future__ import annotations

import ast
import json
import sys
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from launcher import atomic

DATA = Path(__file__).with_name("request_fields.json")
PROTOCOLS = {
    "completions": ("vllm/entrypoints/openai/completion/protocol.py", "CompletionRequest"),
    "chat_completions": (
        "vllm/entrypoints/openai/chat_completion/protocol.py",
        "ChatCompletionRequest",
    ),
}
"""Endpoint -> (the request model's file in vLLM's source, its class), 0.26 to 0.33."""


class Place(StrEnum):
    FEATURE = "feature"
    NO_KERNEL = "no kernel"
    REFUSED = "refused"


@dataclass(frozen=True)
class Placement:
    place: Place
    why: str
    features: tuple[str, ...] = field(default=())
    """The catalogue's features that serve it (``feature`` only)."""


def _feature(why: str, *names: str) -> Placement:
    return Placement(Place.FEATURE, why, names)


def _none(why: str) -> Placement:
    return Placement(Place.NO_KERNEL, why)


def _refused(why: str) -> Placement:
    return Placement(Place.REFUSED, why)


_TEXT = "the prompt's text or the chat template: the tokens differ, not the kernels"
_RESPONSE = "what the response carries, on the CPU after the step"
_LENGTH = "a length: the shape axes (tokens, rows) cover it, not a feature"
_LOGPROB_COUNTS = ("logprobs=0", "logprobs=1", "logprobs=8", "logprobs=20")

PLACEMENTS: dict[str, Placement] = {
    # sampling
    "temperature": _feature("the sampler's temperature (0: greedy rows)", "greedy", "temperature"),
    "top_p": _feature("_topk_topp_kernel with TOPP_ENABLED", "top_p", "top_k_top_p"),
    "top_k": _feature("_topk_topp_kernel with TOPK_ENABLED", "top_k", "top_k_top_p"),
    "min_p": _feature("the min-p mask (refused with speculative decoding)", "min_p"),
    "presence_penalty": _feature("the penalties kernel", "penalties"),
    "frequency_penalty": _feature("the penalties kernel", "penalties"),
    "repetition_penalty": _feature("the penalties kernel", "penalties"),
    "seed": _feature("seeded rows: per-request generators", "seed"),
    "n": _feature("n requests of the scheduler (ParentRequest), rows of max_num_seqs", "n"),
    "min_tokens": _feature(
        "stop tokens masked until min_tokens (V2: _bias_kernel)", "min_tokens", "min_tokens_stop"
    ),
    "stop_token_ids": _feature(
        "ids the V2 _bias_kernel masks while min_tokens holds (alone: a CPU stop check)",
        "min_tokens_stop",
    ),
    "logit_bias": _feature("the bias kernel (refused with speculative decoding)", "logit_bias"),
    "allowed_token_ids": _feature("the V2 _bias_kernel's allowed-token mask", "allowed_token_ids"),
    "bad_words": _feature("the bad-words mask", "bad_words"),
    # logprobs
    "logprobs": _feature("V2 _topk_log_softmax_kernel's TOPK_BLOCK_SIZE", *_LOGPROB_COUNTS),
    "top_logprobs": _feature("chat's logprobs count (chat's logprobs is a switch)", "logprobs=8"),
    "logprob_token_ids": _feature(
        "V2 _fill_logprob_token_ids_kernel's PADDED_COLS (up to 128 ids)", "logprob_token_ids=1"
    ),
    "prompt_logprobs": _feature(
        "the chunk's logits after the forward (a planned transient, or refused by the profile)",
        "prompt_logprobs",
    ),
    "echo": _feature("with logprobs, prompt logprobs; alone, the prompt's text", "echo"),
    "use_beam_search": _feature(
        "beam search sends requests of logprobs 2 x n and max_tokens 1", *_LOGPROB_COUNTS
    ),
    # structured outputs
    "response_format": _feature("xgrammar's bitmask kernel", "json_object"),
    "structured_outputs": _feature("xgrammar's bitmask kernel", "structured_choice"),
    "tool_choice": _feature(
        "a named or required tool is a JSON-schema structured output", "json_object"
    ),
    # streaming
    "stream": _feature("the API's framing", "stream"),
    "stream_options": _none("the API's framing (usage chunks)"),
    "stream_interval": _none("how many tokens a streamed chunk batches"),
    # what the model reads, as text
    "model": _none("which served model: one per deployment"),
    "prompt": _none(_TEXT),
    "messages": _none(_TEXT),
    "suffix": _none("fill-in-the-middle rendering of the prompt's text"),
    "tools": _none(_TEXT),
    "parallel_tool_calls": _none("how tool calls are parsed from the output text"),
    "chat_template": _none(_TEXT),
    "chat_template_kwargs": _none(_TEXT),
    "add_generation_prompt": _none(_TEXT),
    "continue_final_message": _none(_TEXT),
    "add_special_tokens": _none(_TEXT),
    "documents": _none(_TEXT),
    "reasoning_effort": _none(_TEXT),
    "include_reasoning": _none("how reasoning is parsed from the output text"),
    "truncate_prompt_tokens": _none(_LENGTH),
    "truncation_side": _none(_LENGTH),
    "max_tokens": _none(_LENGTH),
    "max_completion_tokens": _none(_LENGTH),
    "length_penalty": _none("beam search's ranking of finished beams, on the CPU"),
    # stopping, detokenizing, the response
    "stop": _none("stop strings: the detokenizer's check, on the CPU"),
    "ignore_eos": _none("the scheduler's stop check"),
    "include_stop_str_in_output": _none(_RESPONSE),
    "skip_special_tokens": _none(_RESPONSE),
    "spaces_between_special_tokens": _none(_RESPONSE),
    "repetition_detection": _none("an n-gram stop check of the scheduler, on the CPU"),
    "return_tokens_as_token_ids": _none(_RESPONSE),
    "return_token_ids": _none(_RESPONSE),
    "return_prompt_text": _none(_RESPONSE),
    "return_token_offsets": _none(_RESPONSE),
    "return_weight_versions": _none(_RESPONSE),
    "return_assistant_tokens_mask": _none(_RESPONSE),
    "routed_experts_prompt_start": _none(_RESPONSE + " (the routed experts' record)"),
    "user": _none("an identifier of the caller"),
    "request_id": _none("an identifier of the request"),
    "session_id": _none("an identifier of the session"),
    "cache_salt": _none("the prefix cache's block hashes"),
    # multimodal: the launcher's deployments are text models
    "mm_processor_kwargs": _none("multimodal preprocessing, on the CPU"),
    "media_io_kwargs": _none("multimodal loading, on the CPU"),
    "mm_payload": _none("what the render endpoint returns"),
    "return_mm_kwargs": _none("what the render endpoint returns"),
    # what needs a server setting the launcher does not write
    "kv_transfer_params": _none("disaggregated serving: no KV connector is configured"),
    "ec_transfer_params": _none("disaggregated encoders: no connector is configured"),
    "vllm_xargs": _none("custom extensions: no plugin reads them"),
    "watermarking": _none(
        "no watermark configuration: vLLM logs it and runs the request without watermarking"
    ),
    "priority": _refused("vLLM refuses a priority other than 0 without priority scheduling"),
    "prompt_embeds": _refused("vLLM refuses prompt embeddings without --enable-prompt-embeds"),
    "thinking_token_budget": _refused(
        "vLLM refuses it without --reasoning-parser or --reasoning-config"
    ),
}


def fields_from_source(path: Path, cls: str) -> tuple[str, ...]:
    """The pydantic fields class ``cls`` of ``path`` declares, by AST: annotated names of its
    body, less ``ClassVar`` and private ones (pydantic makes no field of either). The bases
    add none: ``OpenAIBaseModel`` declares only a ``ClassVar``."""
    tree = ast.parse(path.read_text())
    found = next(
        (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls),
        None,
    )
    if found is None:
        raise LookupError(f"{path}: no class {cls}")
    out = []
    for node in found.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        name = node.target.id
        if name.startswith("_") or ast.unparse(node.annotation).startswith("ClassVar"):
            continue
        out.append(name)
    return tuple(out)


def release_fields(root: Path) -> dict[str, tuple[str, ...]]:
    """Endpoint -> fields, read from a release's source (``root`` holds its ``vllm``)."""
    return {ep: fields_from_source(root / path, cls) for ep, (path, cls) in PROTOCOLS.items()}


def installed_fields() -> dict[str, tuple[str, ...]]:
    """Endpoint -> fields of the installed vLLM's request models (imports vLLM)."""
    import importlib

    out = {}
    for ep, (path, cls) in PROTOCOLS.items():
        module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
        model = getattr(module, cls)
        out[ep] = tuple(model.model_fields)
    return out


def recorded() -> dict[str, dict[str, tuple[str, ...]]]:
    """Release -> endpoint -> fields, as recorded in ``request_fields.json``."""
    data = json.loads(DATA.read_text())
    return {
        release: {ep: tuple(names) for ep, names in endpoints.items()}
        for release, endpoints in data["releases"].items()
    }


def unplaced(fields: dict[str, tuple[str, ...]]) -> list[str]:
    """Fields of some endpoint the table does not place, sorted."""
    return sorted({f for names in fields.values() for f in names} - set(PLACEMENTS))


def main(argv: list[str]) -> None:
    """Record releases: ``VERSION=SRC`` each, merged into the data file."""
    data = json.loads(DATA.read_text()) if DATA.exists() else {"releases": {}}
    for item in argv:
        version, _, src = item.partition("=")
        data["releases"][version] = {ep: list(f) for ep, f in release_fields(Path(src)).items()}
    data["releases"] = dict(sorted(data["releases"].items(), key=lambda kv: _key(kv[0])))
    data["source"] = (
        "each release's wheel (pip download --no-deps vllm==VERSION), its protocol files "
        "read by AST (launcher.vllm.request_fields.fields_from_source)"
    )
    atomic.write_text(DATA, json.dumps(data, indent=1) + "\n")


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


if __name__ == "__main__":
    main(sys.argv[1:])
