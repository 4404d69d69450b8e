#!/usr/bin/env bash
# benchmarks/kv_ceiling.py on the device machine (H200, vLLM 0.26 from the gpu-kit, staged
# with tests/gpu/stage-kit.sh as for the GPU tier), on the tier's random-weight Llama:
#
#   benchmarks/kv_ceiling_gpu.sh [kv_ceiling.py arguments]
#
# Writes kv_ceiling.json, the printed table and a tarball of every boot's run directory
# (vllm.log, plan, measure-rank*.json, qualified.json) under $OUT. KV_CEILING_SECONDS
# (default 570) bounds the whole run below the device's 600 s per command. The JSON and the
# run directories stay in $KV_CEILING_DIR while the machine is warm, so the two methods can
# run in two calls, one after the other:
#   benchmarks/kv_ceiling_gpu.sh --only qualify
#   benchmarks/kv_ceiling_gpu.sh --only bisection --tolerance 0.0005
set -uo pipefail
START=$SECONDS
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kv-ceiling-out}
WORK=${KV_CEILING_DIR:-/tmp/kv-ceiling}
PROFILE=${KV_CEILING_PROFILE:-tests/gpu/profiles/llama-h200.yaml}
mkdir -p "$OUT" "$WORK"
# KV_CEILING_FROM: an earlier run's JSON (a fresh machine lost $WORK), for --resume.
if [ -n "${KV_CEILING_FROM:-}" ] && [ ! -f "$WORK/kv_ceiling.json" ]; then
  cp "$KV_CEILING_FROM" "$WORK/kv_ceiling.json"
fi

. tests/gpu/kit-env.sh || exit 1

MODEL=$(python3 -c "from pathlib import Path; from tests.gpu import models; \
print(models.write('llama', Path('$WORK/models/llama')))") || exit 1
nvidia-smi --query-gpu=index,name,memory.total,memory.used,driver_version \
  --format=csv,noheader | tee "$OUT/gpu.txt"

LEFT=$(( ${KV_CEILING_SECONDS:-570} - (SECONDS - START) ))
timeout -s INT -k 20 "$LEFT" python3 benchmarks/kv_ceiling.py "$PROFILE" --model "$MODEL" \
  --force --emulate-gib 95.01 --set "runtime.cache_root=$WORK/cache" \
  --run-dir "$WORK/runs" --json-out "$WORK/kv_ceiling.json" "$@" 2>&1 | tee -a "$WORK/kv_ceiling.txt"
rc=${PIPESTATUS[0]}
[ "$rc" = 124 ] && echo "kv_ceiling_gpu: stopped at the ${LEFT}s deadline"
cp "$WORK/kv_ceiling.json" "$WORK/kv_ceiling.txt" "$OUT/" 2>/dev/null
tar -czf "$OUT/kv-ceiling-runs.tar.gz" -C "$WORK" runs 2>/dev/null
echo "kv_ceiling_gpu: exit $rc after $((SECONDS - START)) s"
exit "$rc"
