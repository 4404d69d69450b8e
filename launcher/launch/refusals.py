"""Request fields the deployment refuses before vLLM sees them: an ASGI middleware.

vLLM has no flag that refuses prompt logprobs (``--max-logprobs`` bounds their count, and 0
still computes the whole chunk's logits). A profile with ``serving.prompt_logprobs: refuse``
has no room planned for them, so the API server runs this middleware (vLLM's
``--middleware``): a completions or chat request asking for ``prompt_logprobs``, or for
``echo`` with ``logprobs``, is answered HTTP 400 naming the key, like vLLM's own refusals.
Pure ASGI: nothing imported, the body read once and handed on unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

PATHS = ("/v1/completions", "/v1/chat/completions")
REASON = (
    "prompt_logprobs (and echo with logprobs) are refused by this deployment: its plan keeps "
    "no memory for the prefill chunk's logits (serving.prompt_logprobs: refuse)"
)

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def refused(body: bytes) -> bool:
    """Whether a request body asks for prompt logprobs (what vLLM's protocol turns into
    ``SamplingParams.prompt_logprobs``). A body that is not a JSON object is vLLM's to refuse."""
    try:
        data = json.loads(body or b"{}")
    except ValueError:
        return False
    if not isinstance(data, dict):
        return False
    if data.get("prompt_logprobs") is not None:
        return True
    return bool(data.get("echo")) and data.get("logprobs") is not None


class RefusePromptLogprobs:
    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("path") not in PATHS:
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if message.get("type") != "http.request" or not message.get("more_body"):
                break
        body = b"".join(chunks)
        if refused(body):
            payload = json.dumps(
                {"error": {"message": REASON, "type": "BadRequestError", "code": 400}}
            ).encode()
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 400, "headers": headers})
            await send({"type": "http.response.body", "body": payload})
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)
