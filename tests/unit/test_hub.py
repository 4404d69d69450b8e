"""Checkpoints by Hub repo id, against a local hub: an HTTP server this test starts that serves
generated safetensors shards on the routes huggingface_hub calls (``/{repo}/resolve/{rev}/
{file}``, HEAD and ranged GET). No weight may be downloaded: every shard read is a range."""

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from launcher.plan.checkpoint import read_header
from launcher.plan.hub import cache_file, is_repo_id
from launcher.profile import load_profile
from tests.conftest import gathered, need_serving
from tests.unit.test_checkpoint import write_checkpoint

REPO = "tester/tiny-glm-exl3"
COMMIT = "0" * 39 + "1"


class Hub:
    """A local hub serving one repo from a directory; it records every request."""

    def __init__(self, root: Path):
        self.root, self.requests = root, []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_HEAD(self):
                self.answer(body=False)

            def do_GET(self):
                self.answer(body=True)

            def answer(self, body: bool):
                hub.requests.append((self.command, self.path, self.headers.get("range")))
                m = re.match(rf"^/{re.escape(REPO)}/resolve/[^/]+/(.+)$", self.path)
                path = hub.root / m.group(1) if m else None
                if path is None or not path.is_file():
                    self.send_response(404)
                    self.send_header("X-Error-Code", "EntryNotFound")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data = path.read_bytes()
                start, end = 0, len(data) - 1
                rng = self.headers.get("range")
                if rng:
                    a, b = rng.removeprefix("bytes=").split("-")
                    start, end = int(a), min(int(b), len(data) - 1)
                chunk = data[start : end + 1]
                self.send_response(206 if rng else 200)
                self.send_header("ETag", '"' + hashlib.sha1(data).hexdigest() + '"')
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("Content-Length", str(len(chunk)))
                if rng:
                    self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
                self.end_headers()
                if body:
                    self.wfile.write(chunk)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def sharded_checkpoint(root: Path) -> Path:
    """The test checkpoint split into two shards with an index, as sharded repos are."""
    write_checkpoint(root)
    files = sorted(root.glob("*.safetensors"))
    weight_map = {t.name: f.name for f in files for t in read_header(f)}
    index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
    (root / "model.safetensors.index.json").write_text(json.dumps(index))
    return root


@pytest.fixture
def hub(tmp_path, monkeypatch):
    need_serving("huggingface_hub")
    import huggingface_hub.constants as hf

    h = Hub(sharded_checkpoint(tmp_path / "repo"))
    monkeypatch.setenv("HF_ENDPOINT", h.url)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hf, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    yield h
    h.close()


def profile_for(write, path: str, cache_root: Path) -> str:
    return write(
        "p.yaml",
        f"""\
hardware: {{gpu: rtx-pro-6000, count: 2}}
model: {{path: {path}, quantization: exl3}}
parallel: {{tensor: 2}}
speculative: {{method: mtp, tokens: 1}}
serving: {{max_model_len: 1024, max_num_seqs: 2, max_num_batched_tokens: 512}}
runtime: {{cache_root: {cache_root}}}
""",
    )


def test_sharded_checkpoint_has_two_shards(tmp_path):
    assert len(list(sharded_checkpoint(tmp_path).glob("*.safetensors"))) >= 2


def test_repo_id_is_sized_from_hub_headers_without_downloading_a_weight(hub, tmp_path, write):
    local = gathered(load_profile(profile_for(write, str(hub.root), tmp_path / "c0")))
    remote = gathered(load_profile(profile_for(write, REPO, tmp_path / "c1")))
    assert remote.weights_source == "headers"
    assert "from the Hub" in remote.weights_detail
    assert remote.weights == local.weights  # the same bytes as reading the files on disk
    shard_reads = [r for r in hub.requests if r[0] == "GET" and r[1].endswith(".safetensors")]
    assert shard_reads and all(rng for _, _, rng in shard_reads)  # ranges only
    assert cache_file(str(tmp_path / "c1"), REPO).is_file()


def test_cached_headers_need_no_hub(hub, tmp_path, write):
    profile = profile_for(write, REPO, tmp_path / "cache")
    first = gathered(load_profile(profile))
    hub.close()
    hub.requests.clear()
    again = gathered(load_profile(profile))
    assert again.weights == first.weights and again.weights_source == "headers"
    assert hub.requests == []


def test_a_hub_that_does_not_answer_falls_back_to_the_catalog(tmp_path, write, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: nothing listens
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    repo = "willfalco/GLM-5.2-EXL3-TR3-3.42bpw"
    profile = write(
        "p.yaml",
        f"""\
extends: {Path(__file__).parents[2] / "profiles" / "glm52.yaml"}
model: {{path: {repo}, checkpoint: null}}
runtime: {{cache_root: {tmp_path}}}
""",
    )
    inputs = gathered(load_profile(profile))
    assert inputs.weights_source == "catalog"
    assert len(inputs.notes) == 1
    assert inputs.notes[0].startswith(f"{repo}: Hub headers not read (")
    assert inputs.notes[0].endswith("sized from the catalog")


def test_repo_ids_and_paths():
    assert is_repo_id("willfalco/GLM-5.2-EXL3-TR3-3.42bpw")
    assert not is_repo_id("/models/GLM-5.2")
    assert not is_repo_id("./a/b") and not is_repo_id("a/b/c")
