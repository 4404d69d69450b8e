#!/usr/bin/env bash
# Build a slim vLLM 0.26.0 for a CUDA 13 / torch 2.11 / Python 3.12 machine that reaches no
# package registry, in pieces small enough to send one at a time.
#
#   tests/gpu/build-kit.sh OUT_DIR
#
# OUT_DIR/vllm-site.tar.xz.NN : vLLM installed as a site directory (no FA2 kernels, no Rust
#                               frontend, no other Pythons' extensions), split in 24 MiB pieces
# OUT_DIR/wheels/             : cp312 wheels of what vLLM 0.26 imports that such a machine lacks
#                               (pydantic, fastapi, msgspec, pyzmq, openai, xgrammar, ...)
# On the GPU machine:
#   cat vllm-site.tar.xz.* | xz -d | tar -x -C /tmp/site
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site2 wheels/*.whl
#   export PYTHONPATH=/tmp/site2:/tmp/site:$PWD
# FlashInfer 0.6.14 (what vLLM 0.26 pins) is in the wheels: vLLM's default sampler on CUDA is
# FlashInfer's, which JIT-compiles with the device's nvcc into FLASHINFER_WORKSPACE_BASE.
# Seen working on an H200 with torch 2.11.0+cu130: a 2-layer Llama served through
# b12x-launch with the planned worker (FlashAttention 3, CUDA graphs, torch.compile).
set -euo pipefail
OUT=${1:?usage: build.sh OUT_DIR}
mkdir -p "$OUT/wheels"; OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PLAT=(--only-binary=:all: --python-version 3.12 --implementation cp
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64
      --platform manylinux_2_24_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64
      --platform manylinux_2_31_x86_64 --platform manylinux_2_34_x86_64 --platform manylinux_2_35_x86_64)

python3 -m pip download -q --no-deps "${PLAT[@]}" -d "$WORK" vllm==0.26.0
python3 -m pip install -q --no-deps --no-compile --target "$WORK/site" "$WORK"/vllm-0.26.0-*.whl
rm -rf "$WORK/site/vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so" "$WORK/site/vllm/vllm-rs" \
       "$WORK/site/vllm/third_party/fmha_sm100" "$WORK/site/bin"
find "$WORK/site" -name "*.cpython-3*" ! -name "*cpython-312*" -delete
tar -c -C "$WORK/site" . | xz -T0 -6 > "$WORK/vllm-site.tar.xz"
rm -f "$OUT"/vllm-site.tar.xz.*
split -b 24M -d "$WORK/vllm-site.tar.xz" "$OUT/vllm-site.tar.xz."

python3 -m pip download -q --no-deps "${PLAT[@]}" -d "$OUT/wheels" \
  "pydantic>=2.12,<2.15" pydantic-core annotated-types typing-inspection "typing-extensions>=4.16" \
  cbor2 "pyzmq>=25" msgspec pybase64 cachetools "openai>=2,<3" jiter distro sniffio \
  "openai-harmony>=0.0.3" "llguidance>=1.7,<1.8" "xgrammar>=0.2.1,<1" "apache-tvm-ffi>=0.1.11,<0.2" \
  "fastapi>=0.133,<0.137" "starlette>=1.0.1" annotated-doc "opentelemetry-api>=1.27" \
  importlib-metadata zipp uvicorn watchfiles partial-json-parser \
  "model-hosting-container-standards>=0.1.14,<1" supervisor jmespath blake3 setproctitle \
  "prometheus-fastapi-instrumentator>=8" python-json-logger ijson "depyf==0.20.0" astor dill \
  "lark==1.2.2" diskcache python-multipart \
  "lm-format-enforcer==0.11.3" interegular "outlines_core==0.2.14" \
  "nvidia-ml-py>=12" \
  "flashinfer-python==0.6.14" cuda-tile nvidia-cudnn-frontend "nvidia-cutlass-dsl==4.8.1" \
  "nvidia-cutlass-dsl-libs-base==4.8.1"
# nvidia-ml-py: launcher.gpu.nvml (the tier's sampler and the launch's card check); flashinfer
# and what it imports that the device lacks (einops, ninja, tabulate, requests are there).
# pip keeps every version it met: keep the newest of each name
ls "$OUT/wheels" | sed -E 's/-[0-9][^-]*-.*//' | sort | uniq -d | while read -r dup; do
  ls -v "$OUT/wheels/$dup"-* | head -n -1 | xargs -r rm -f
done
ls -la "$OUT"  # not piped to head: under pipefail its SIGPIPE ended the script
du -sh "$OUT"/vllm-site.tar.xz.* "$OUT/wheels"
