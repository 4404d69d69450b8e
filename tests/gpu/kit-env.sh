# Sourced by the device scripts (tests/gpu/run-tier.sh, benchmarks/kv_ceiling_gpu.sh) from the
# repository root: assembles the staged vLLM kit when needed and sets the environment every
# device run uses (the kit on PYTHONPATH, no NVLink multicast, offline). vLLM's default sampler
# (FlashInfer's) stays on: the tier runs what users run. KIT_NO_FLASHINFER=1 turns it off for a
# run that must not depend on FlashInfer's JIT, and says so in versions.txt.
tests/gpu/stage-kit.sh assemble || return 1
export PYTHONPATH=${KIT_SITE2:-/tmp/site2}:${KIT_SITE:-/tmp/site}:$PWD
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
[ "${KIT_NO_FLASHINFER:-0}" = 1 ] && export VLLM_USE_FLASHINFER_SAMPLER=0
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
