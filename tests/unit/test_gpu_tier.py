"""The GPU tier's pure parts on the CPU: workload shapes, NVML low-water, summary, profiles."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.gpu import models, nvml, stress, summary
from tests.gpu.boot import PROFILES, BootResult, BootSpec

W = stress.Workload("http://127.0.0.1:1", "tier", max_model_len=16384, max_num_seqs=8, vocab=32000)


def test_the_memory_wave_is_the_longest_prompt_plus_max_num_seqs_decodes():
    memory, shapes = stress.requests(W)
    (longest, out), decodes = memory[0], memory[1:]
    assert len(longest) + out == W.max_model_len  # fills the context exactly
    assert len(decodes) == W.max_num_seqs
    assert all(n == W.decode_tokens for _, n in decodes)
    assert [len(ids) for ids, _ in shapes] == list(stress.SHAPES)


def test_prompts_are_word_ids_and_share_no_prefix():
    memory, shapes = stress.requests(W)
    prompts = [ids for ids, _ in memory + shapes]
    assert all(stress.FIRST_ID <= i < W.vocab for ids in prompts for i in ids)
    firsts = [ids[:3] for ids in prompts]
    assert len({tuple(f) for f in firsts}) == len(firsts)


def test_prompt_wraps_inside_the_vocabulary():
    ids = stress.prompt(10, 6, vocab=12)
    assert ids == [10, 11, 4, 5, 6, 7, 8, 9, 10, 11]


@pytest.mark.parametrize("profile", sorted(p.name for p in PROFILES.glob("*.yaml")))
def test_the_shapes_wave_has_prefills_past_the_capture_sizes_within_the_profile_run(profile):
    """Read from each tier profile's resolved deployment, not from constants: every shape is
    under the token count of vLLM's profile run (``max_num_batched_tokens``, which sized the
    activations), and some lie past the largest CUDA-graph capture size (no captured graph
    pads them), so the wave runs token counts no warmup ran."""
    from launcher import pipeline
    from launcher.deployment import resolve

    loaded = pipeline.load(str(PROFILES / profile), (), force=True)
    deployment, run = resolve(loaded.profile), loaded.profile.serving.max_num_batched_tokens
    sizes = stress.SHAPES
    assert len(set(sizes)) == len(sizes)
    assert run is not None and max(sizes) < run, (sizes, run)
    assert deployment.capture_sizes, "a tier profile without CUDA graphs"
    past = [n for n in sizes if n > max(deployment.capture_sizes)]
    assert past and not set(past) & set(deployment.decode_rows), (past, deployment.decode_rows)


def test_the_sampler_keeps_the_lowest_free_per_device(monkeypatch):
    frees = iter([50, 40, 45, 30, 60, 35, 70, 20] + [99] * 1000)
    monkeypatch.setattr(nvml, "memory", lambda d: nvml.Memory(100, next(frees), 0))
    s = nvml.Sampler([0, 1], period=3600)
    for _ in range(4):
        s.sample()
    assert s.low == {0: 45, 1: 20} and s.samples == 4


def test_visible_indices_follow_cuda_visible_devices(monkeypatch):
    from launcher.gpu import nvml as driver  # where the tier's reader lives

    monkeypatch.setattr(driver, "device_count", lambda: 4)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,0,7")
    assert nvml.visible_indices() == [2, 0]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert nvml.visible_indices() == [0, 1, 2, 3]


def _result(tmp_path: Path) -> BootResult:
    spec = BootSpec("moe", "dsv2-moe-h200.yaml", "deepseek_v2", ranks=2)
    r = BootResult(spec, tmp_path / "run", tmp_path / "server.log", devices=[0, 1])
    comps = {"weights": {"bytes": 2 << 30, "source": "headers"}}
    r.plan = {
        "kv": {"page_bytes_per_rank": 1000, "blocks_per_rank": 90, "block_tokens": 64, "dcp": 1},
        "ranks": [{"rank": k, "total_bytes": 80 << 30, "components": comps} for k in range(2)],
        "profile_data": {"memory": {"safety_margin": 512 << 20}},
    }
    armed = [
        {"name": name, "armed": True, "windows": ["profile", "warmup", "serving"]}
        for name in ("triton_hooks", "cache_oracle")
    ]
    late = {"kind": "triton", "kernel": "m.fused_moe_kernel", "detail": "[BLOCK_SIZE_M=16]"}
    r.records = {
        k: {
            "fingerprint": "fp",
            "rank": k,
            "when": "2026-12-06",
            "budget": {"bytes": 95_500 + k},
            "kv": {"blocks": 95, "tokens": 95 * 64, "planned_tokens": 90 * 64},
            "measured": {"weights": (2 << 30) + k},
            "late_compiles": [{**late, "window": "serving"}] * k,
            "counters": armed,
        }
        for k in (0, 1)
    }
    r.outcome = stress.Outcome(ok=16, low_free={0: 3 << 30, 1: 1 << 30})
    r.calibrated = {"kv": {"blocks_per_rank": 95}}
    return r


def test_the_summary_has_one_row_per_rank_with_planned_and_measured(tmp_path, monkeypatch):
    monkeypatch.setattr(summary, "_boots", [_result(tmp_path)])
    monkeypatch.setattr(summary, "root", None)
    monkeypatch.setenv("OUT", str(tmp_path / "out"))
    rows = summary.rows()
    assert [(r["rank"], r["gpu"]) for r in rows] == [(0, 0), (1, 1)]
    assert rows[1]["late_compiles"] == 1 and rows[1]["late_kernels"] == ["fused_moe_kernel"]
    assert rows[0]["late_compiles"] == 0 and rows[0]["late_files"] is None  # no baseline here
    assert rows[0]["components"]["weights"] == {
        "planned": 2 << 30,
        "source": "headers",
        "measured": 2 << 30,
    }
    assert (rows[0]["kv_blocks_planned"], rows[0]["kv_blocks_vllm"]) == (90, 95)
    assert rows[1]["low_water_free"] == 1 << 30
    text = summary.render(rows)
    assert "moe" in text and "fused_moe_kernel" in text and "weights 2.00 (headers)" in text
    written = summary.write(tmp_path / "tier")
    assert [p.parent.name for p in written] == ["tier", "out"]
    assert json.loads(written[1].read_text())["boots"][1]["kv_blocks_calibrated"] == 95


REFUSED_ON_026 = {"glm-dsa-h200-dcp2.yaml"}
"""Sparse MLA under DCP: vLLM 0.26 (the kit's) has no decode LSE on FLASHMLA_SPARSE."""


def _tier_model(name: str, tmp_path) -> tuple[str, tuple[str, ...]]:
    kind = {"dsv2": "deepseek_v2", "glm-": "glm_dsa"}.get(name[:4], "llama")
    model = tmp_path / kind
    model.mkdir()
    cfg = {**models.BUILDERS, **{k: (b,) for k, b in models.DUMMY_WEIGHTS.items()}}[kind][0]()
    (model / "config.json").write_text(json.dumps(cfg))
    if kind not in models.DUMMY_WEIGHTS:  # the tier writes these weights; a stand-in here
        (model / "model.safetensors").write_bytes(len(b"{}").to_bytes(8, "little") + b"{}")
    return kind, (
        f"model.path={model}",
        f"runtime.cache_root={tmp_path / 'cache'}",
        "model.weights_per_rank=1GiB",
    )


def test_the_sparse_mla_dcp2_tier_profile_is_refused_on_the_kits_vllm(tmp_path):
    from launcher import pipeline
    from launcher.errors import ProfileError

    (name,) = REFUSED_ON_026
    _, sets = _tier_model(name, tmp_path)
    with pytest.raises(ProfileError, match="softmax LSE during decode; FLASHMLA_SPARSE"):
        pipeline.make_plan(pipeline.load(str(PROFILES / name), sets), calibrate=False)


@pytest.mark.parametrize(
    "name", sorted(p.name for p in PROFILES.glob("*.yaml") if p.name not in REFUSED_ON_026)
)
def test_the_tier_profiles_plan_for_the_generated_models(name, tmp_path, monkeypatch):
    """Each profile loads and fits on an H200 with its model's config (no weights read)."""
    from launcher import pipeline

    kind, sets = _tier_model(name, tmp_path)
    planned = pipeline.make_plan(pipeline.load(str(PROFILES / name), sets), calibrate=False)
    assert planned.plan.fits
    assert planned.plan.kv.max_model_len == (20480 if kind == "glm_dsa" else 16384)
    argv = planned.command.argv
    # a bare Python name runs the launcher's own interpreter (launcher.launch.vllm_args)
    assert argv[:4] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model"]
    assert "--enforce-eager" not in argv  # CUDA graphs on
    tp = 2 if ("tp2" in name or "dcp2" in name) else 1
    assert argv[argv.index("--tensor-parallel-size") + 1] == str(tp)


def test_no_structured_row_of_the_features_workload_ignores_eos():
    """The H200 MoE boots failed every non-streamed ``structured_choice`` row: a choice ends in
    1-2 tokens, ``ignore_eos`` sampled past the finished grammar, and vLLM (plain too) ended
    the request with an internal error. A grammar row stops where its grammar does."""
    from launcher.vllm import request_features

    structured = {f.name: f for f in request_features.accepted(0) if f.structured}
    rows = [row for _, batch in stress.feature_batches(W, 0) for row in batch]
    with_grammar = [r for r in rows if "response_format" in r or "structured_outputs" in r]
    assert structured and with_grammar
    assert not any(r.get("ignore_eos") for r in with_grammar)
    assert all(r.get("ignore_eos") for r in rows if r not in with_grammar)


@pytest.fixture
def sse_server():
    """A real HTTP server answering 200 and streaming ``events`` (set by the test)."""
    import http.server
    import threading

    events: list[bytes] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for e in events:
                self.wfile.write(e)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", events
    server.shutdown()


def test_a_stream_that_fails_after_its_200_counts_as_failed(sse_server):
    """vLLM answers a streamed request 200 before generating; a failure mid-generation comes
    as an error event in the stream. The workload counted those as served."""
    url, events = sse_server
    w = stress.Workload(url, "tier", max_model_len=64, max_num_seqs=1, vocab=300)
    chunk = b'data: {"choices": [{"text": "w4"}]}\n\n'
    error = b'data: {"error": {"message": "internal error", "code": 500}}\n\n'
    events[:] = [chunk, error, b"data: [DONE]\n\n"]
    assert stress.post(w, {"stream": True}, timeout=5) == 500
    events[:] = [chunk, b"data: [DONE]\n\n"]
    assert stress.post(w, {"stream": True}, timeout=5) == 200


def test_the_stream_workload_fails_a_stream_that_ends_in_an_error_event(sse_server):
    """The long streamed request of the ``stream`` workload counted an error event as one
    more chunk; it is a failure, as in the features workload."""
    url, events = sse_server
    w = stress.Workload(url, "tier", max_model_len=64, max_num_seqs=1, vocab=300)
    chunk = b'data: {"choices": [{"text": "w4"}]}\n\n'
    events[:] = [chunk, b'data: {"error": {"message": "internal error", "code": 500}}\n\n']
    with pytest.raises(ValueError, match="HTTP 500"):
        stress.stream(w, [5, 6], 4, timeout=5)
    events[:] = [chunk, chunk, b"data: [DONE]\n\n"]
    assert stress.stream(w, [5, 6], 4, timeout=5) == 2


def test_a_record_without_counters_shows_late_compiles_as_not_measured(tmp_path, monkeypatch):
    result = _result(tmp_path)
    for rec in result.records.values():
        del rec["counters"]
    monkeypatch.setattr(summary, "_boots", [result])
    monkeypatch.setattr(summary, "root", None)
    monkeypatch.setenv("OUT", str(tmp_path / "out"))
    rows = summary.rows()
    assert [r["late_compiles"] for r in rows] == [None, None]
    row = summary.render(rows).splitlines()[2]
    assert row.split()[11] == "-", row  # the late column: not measured, not 0
    assert all(r["late_by_window"] == {} for r in rows)
