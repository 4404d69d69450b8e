#!/usr/bin/env bash
# The GPU tier in one command on the device machine (H200, no network, python3.12 + torch
# 2.11 cu130 + Triton + CuPy; vLLM 0.26 from the kit, staged with tests/gpu/stage-kit.sh):
#
#   tests/gpu/run-tier.sh                         all of tests/gpu
#   tests/gpu/run-tier.sh tests/gpu/test_real_vllm.py -k "Llama or Moe"   pytest's arguments
#   PYTEST_FLAGS="-q -rA" tests/gpu/run-tier.sh   without -x (every boot runs)
#
# The last kit piece can travel with the run itself (carry .kit/vllm-site.tar.xz.04, a wheels part
# and .kit/SHA256SUMS): they are staged inside the deadline, so TIER_SECONDS stays whole.
#
# Assembles the kit when /tmp/site is missing, prints the versions, runs pytest under a
# deadline (TIER_SECONDS, default 560 s, so the device's 600 s limit still leaves time to
# pack), and packs the logs, run directories and records into $OUT/gpu-tier.tar.gz next to
# gpu-tier-summary.{json,txt} and versions.txt (four files back).
# GPU_TIER_BALLAST=1 holds all but 95.01 GiB of each card during the boots (RTX PRO 6000).
set -uo pipefail
START=$SECONDS
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gpu-tier-out}
mkdir -p "$OUT"
export GPU_TIER_DIR=${GPU_TIER_DIR:-/tmp/gpu-tier/run-$(date +%H%M%S)}
export GPU_TIER_MODELS=${GPU_TIER_MODELS:-/tmp/gpu-tier/models}  # kept while the machine is warm
export GPU_TIER_CACHE=${GPU_TIER_CACHE:-/tmp/gpu-tier/cache}     # JIT caches, calibration
mkdir -p "$GPU_TIER_DIR"

# Kit pieces carried into this call are staged first, inside this script's deadline (staging
# outside it once left pytest no time to stop and pack before the device's 600 s limit).
for piece in .kit/vllm-site.tar.xz.*; do
  [ -f "$piece" ] && tests/gpu/stage-kit.sh "${piece##*.}" >/dev/null
done
ls -d .kit/wheels .kit/wheels-* >/dev/null 2>&1 && tests/gpu/stage-kit.sh wheels >/dev/null
. tests/gpu/kit-env.sh || exit 1
# The tier's profiles name the H200; an H100 lent instead is named to every boot.
if [ -z "${GPU_TIER_GPU:-}" ] && nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H100; then
  export GPU_TIER_GPU=h100
fi
export BLAUNCH_TEST_REQUIRE=gpu  # asked for: a tier that cannot run here fails, not skips

python3 - <<'PY' 2>&1 | tee "$GPU_TIER_DIR/versions.txt"
import importlib, platform, subprocess
print("python", platform.python_version())
for name in ("torch", "triton", "vllm", "transformers", "pydantic", "click", "rich", "yaml",
             "cupy", "pytest", "safetensors", "tokenizers"):
    try:
        print(name, getattr(importlib.import_module(name), "__version__", "?"))
    except Exception as exc:
        print(name, "MISSING", type(exc).__name__, exc)
import torch
print("cuda", torch.version.cuda, "devices", torch.cuda.device_count())
print(subprocess.run(["nvidia-smi", "--query-gpu=index,name,memory.total,memory.used,driver_version",
                      "--format=csv,noheader"], capture_output=True, text=True).stdout.strip())
PY
# The launcher's tree this call ran: its commit where the copy has git, and always a hash of
# the files under launcher/ and tests/gpu/ that a checkout reproduces (tests/gpu/tree-id.sh).
# The copy's git may lag its files: a commit is named only where the files match it.
commit=$(git rev-parse --short HEAD 2>/dev/null || echo 'not in this copy')
if [ "$commit" != 'not in this copy' ] && ! git diff --quiet HEAD -- launcher tests/gpu 2>/dev/null; then
  commit="$commit with changes under launcher/ or tests/gpu/ (the tree id names what ran)"
fi
{ echo "launcher commit $commit"
  echo "launcher tree $(tests/gpu/tree-id.sh)"
  # which machine: calls on one held machine share these (a bar or a check split over
  # back-to-back calls names them); a fresh machine has another boot id
  echo "machine boot $(cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo unknown)" \
    "gpu $(nvidia-smi --query-gpu=uuid --format=csv,noheader | paste -sd, -)"
} | tee -a "$GPU_TIER_DIR/versions.txt"
cp "$GPU_TIER_DIR/versions.txt" "$OUT/versions.txt"

LEFT=$(( ${TIER_SECONDS:-560} - (SECONDS - START) ))
[ $# -eq 0 ] && set -- tests/gpu
# shellcheck disable=SC2086
timeout -s INT -k 20 "$LEFT" python3 -m pytest "$@" ${PYTEST_FLAGS:--x -q -rA} \
  2>&1 | tee "$GPU_TIER_DIR/pytest.log"
rc=${PIPESTATUS[0]}
[ "$rc" = 124 ] && echo "run-tier: pytest stopped at the ${LEFT}s deadline"

# A server a killed pytest left behind: each boot wrote its process id.
for pidfile in "$GPU_TIER_DIR"/*/server.pid; do
  [ -f "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    echo "run-tier: stopping leftover server group $pid"; kill -KILL -- "-$pid" 2>/dev/null
  fi
done

tar -czf "$OUT/gpu-tier.tar.gz" -C "$GPU_TIER_DIR" . 2>/dev/null
for f in gpu-tier-summary.json gpu-tier-summary.txt; do
  [ -f "$GPU_TIER_DIR/$f" ] && cp "$GPU_TIER_DIR/$f" "$OUT/$f"
done
ls -la "$OUT"
echo "run-tier: pytest exit $rc after $((SECONDS - START)) s"
exit "$rc"
