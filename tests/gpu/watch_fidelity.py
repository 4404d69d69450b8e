"""Does a Triton compile hook change what a launch computes? Boots, compared bit for bit.

The worker of 2026-11-30 installed ``jit_watch``'s hooks before vLLM's profile run; on the
GLM-5-architecture tier model that boot died with a device-side assert. This runs the same
deployment (planned worker, ``prewarm.providers: [triton]``) several times, each from an empty
Triton cache of its own so every kernel compiles under the variant:

    none        no hook (the reference)
    jit_watch   launcher.runtime.jit_watch installed at interpreter start in every process
    noop        a bare pre- and post-compile hook that returns None (Triton's own hook path)

and serves the same greedy requests with logprobs. A variant that boots must return the
reference's tokens and logprobs exactly; one that does not boot leaves its log tail (with
CUDA_LAUNCH_BLOCKING=1, the failing launch). Results: $OUT/watch-fidelity.json.

    python3 -m tests.gpu.watch_fidelity [variant ...]      (after tests/gpu/kit-env.sh)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.gpu import models
from tests.gpu.boot import BootSpec, Lab, _stop, _wait_healthy
from tests.gpu.stress import Workload, prompt
from tests.integration.server import free_port

SITE = {
    "jit_watch": "from launcher.runtime import jit_watch\njit_watch.watch.install()\n",
    "noop": (
        "import triton\n"
        "triton.knobs.runtime.jit_cache_hook = lambda **kw: None\n"
        "triton.knobs.runtime.jit_post_compile_hook = lambda **kw: None\n"
    ),
}
PROMPTS = (37, 300, 1100)
"""Prompt lengths: shorter and longer than the model's indexer top-k (256)."""


def _boot(lab: Lab, variant: str, root: Path) -> dict:
    work = root / variant
    work.mkdir(parents=True, exist_ok=True)
    env = lab.env()
    if variant in SITE:
        site = work / "site"
        site.mkdir(exist_ok=True)
        (site / "sitecustomize.py").write_text(SITE[variant])
        env["PYTHONPATH"] = f"{site}{os.pathsep}{env['PYTHONPATH']}"
        env["CUDA_LAUNCH_BLOCKING"] = "1"
    spec = BootSpec(variant, "glm-dsa-h200.yaml", "glm_dsa", sets=("prewarm.providers=[triton]",))
    port = free_port()
    argv = lab.argv(spec, port, work / "run", "--set", f"env.TRITON_CACHE_DIR={work / 'triton'}")
    log_path = work / "server.log"
    started = time.monotonic()
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    out: dict = {"variant": variant, "outputs": []}
    try:
        out["healthy"] = _wait_healthy(proc, f"http://127.0.0.1:{port}")
        out["seconds"] = round(time.monotonic() - started, 1)
        if out["healthy"]:
            w = Workload(f"http://127.0.0.1:{port}", "tier", 20480, 8, models.VOCAB)
            for n in PROMPTS:
                body = complete_with_logprobs(w, prompt(n, 101 * n, w.vocab))
                out["outputs"].append(body)
    finally:
        out["exit_code"] = _stop(proc)
    text = log_path.read_text(errors="replace")
    out["log_tail"] = "\n".join(
        ln
        for ln in text.splitlines()[-400:]
        if any(k in ln for k in ("Error", "error", "assert", "Traceback", 'File "', "CUDA"))
    )[-6000:]
    return out


def complete_with_logprobs(w: Workload, ids: list[int]) -> dict:
    import urllib.request

    body = {
        "model": w.model,
        "prompt": ids,
        "max_tokens": 8,
        "temperature": 0,
        "ignore_eos": True,
        "logprobs": 5,
    }
    req = urllib.request.Request(
        f"{w.url}/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=120) as r:
        choice = json.loads(r.read())["choices"][0]
    lp = choice.get("logprobs") or {}
    return {
        "text": choice["text"],
        "tokens": lp.get("tokens"),
        "token_logprobs": lp.get("token_logprobs"),
        "top_logprobs": lp.get("top_logprobs"),
    }


def main(variants: list[str]) -> int:
    root = Path(os.environ.get("GPU_TIER_DIR", "/tmp/gpu-tier")) / "watch-fidelity"
    lab = Lab(
        root=root,
        models=Path(os.environ.get("GPU_TIER_MODELS", root / "models")),
        cache=root / "cache",
        devices=[0],
    )
    results = [_boot(lab, v, root) for v in variants]
    ref = next((r for r in results if r["variant"] == "none" and r.get("healthy")), None)
    for r in results:
        r["same_as_reference"] = (
            None if ref is None or not r.get("healthy") else r["outputs"] == ref["outputs"]
        )
        print(
            f"{r['variant']:<10} healthy={r.get('healthy')} seconds={r.get('seconds')} "
            f"same_as_reference={r['same_as_reference']}"
        )
        if not r.get("healthy"):
            print(r["log_tail"][-3000:])
    target = Path(os.environ.get("OUT", root)) / "watch-fidelity.json"
    target.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:] or ["none", "jit_watch", "noop"]))
