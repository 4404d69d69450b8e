"""What a profile asks of its vLLM line, as the plain values ``launcher.vllm.can_serve`` reads.

The vLLM room sits below the profile and names none of its types; this is the one place the
profile's keys are read into the room's :class:`~launcher.vllm.can_serve.Asks`.
"""

from __future__ import annotations

from launcher.profile.schema import Profile
from launcher.vllm.can_serve import Asks


def asks_of(p: Profile) -> Asks:
    return Asks(
        runtime=p.vllm.runtime,
        release=p.vllm.release,
        attention_backend=p.vllm.attention_backend,
        quantization=p.model.quantization,
        kv_cache_dtype=p.serving.kv_cache_dtype,
        block_size=p.serving.block_size,
        tensor=p.parallel.tensor,
        decode_context=p.parallel.decode_context,
        interleave=p.parallel.interleave,
        mtp_tokens=p.mtp_tokens,
    )
