"""The loopback client against a small stdlib HTTP server: bodies, concurrency, the deadline."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from launcher.qualify.client import health, run_workload
from launcher.qualify.workload import RequestSpec, Workload


class Api(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, delay=0.05, short=False):
        super().__init__(("127.0.0.1", 0), Handler)
        self.delay, self.short = delay, short
        self.bodies, self.in_flight, self.most = [], 0, 0
        self.lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def do_POST(self):
        api = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with api.lock:
            api.bodies.append(body)
            api.in_flight += 1
            api.most = max(api.most, api.in_flight)
        time.sleep(api.delay)
        with api.lock:
            api.in_flight -= 1
        tokens = body["max_tokens"] - (1 if api.short else 0)
        data = json.dumps({"usage": {"completion_tokens": tokens}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def api(request):
    server = Api(**getattr(request, "param", {}))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def workload(n=7, width=3, seconds=30.0, prompt=50, out=5):
    specs = tuple(RequestSpec(i, prompt, out, seed=i) for i in range(n))
    return Workload(specs, width, seconds, chunk_tokens=16, tokens_per_dcp_rank=prompt + out)


def test_every_request_completes_with_at_most_concurrency_in_flight(api):
    port = api.server_address[1]
    assert health(port)
    seen = []
    result = run_workload(port, "tiny", workload(), vocab=384, on_outcome=seen.append)
    assert result.done == 7 and not result.failed and not result.timed_out
    assert len(seen) == 7
    assert api.most == 3
    body = api.bodies[0]
    assert body["model"] == "tiny" and len(body["prompt"]) == 50
    assert body["max_tokens"] == body["min_tokens"] == 5 and body["ignore_eos"]
    assert len({tuple(b["prompt"]) for b in api.bodies}) == 7


@pytest.mark.parametrize("api", [{"short": True}], indirect=True)
def test_a_short_answer_is_a_failure(api):
    result = run_workload(api.server_address[1], "tiny", workload(n=2), vocab=384)
    assert len(result.failed) == 2 and "4 of 5 output tokens" in result.failed[0].error


@pytest.mark.parametrize("api", [{"delay": 0.4}], indirect=True)
def test_what_does_not_finish_in_time_fails(api):
    result = run_workload(api.server_address[1], "tiny", workload(n=6, width=2, seconds=0.5), 384)
    assert result.timed_out
    assert result.done + len(result.failed) == 6 and result.failed
    assert any("out of time" in o.error for o in result.failed)


def test_a_dead_server_fails_every_request_quickly():
    start = time.monotonic()
    result = run_workload(1, "tiny", workload(n=3), vocab=384, alive=lambda: False)
    assert len(result.failed) == 3 and "the server is gone" in result.failed[0].error
    assert time.monotonic() - start < 5
    assert not health(1)
