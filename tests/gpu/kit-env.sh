# Sourced by the device scripts (tests/gpu/run-tier.sh, benchmarks/kv_ceiling_gpu.sh) from the
# repository root: assembles the staged vLLM kit when needed and sets the environment every
# device run uses (the kit on PYTHONPATH, no FlashInfer sampler, no NVLink multicast, offline).
tests/gpu/stage-kit.sh assemble || return 1
export PYTHONPATH=${KIT_SITE2:-/tmp/site2}:${KIT_SITE:-/tmp/site}:$PWD
export VLLM_USE_FLASHINFER_SAMPLER=0 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
