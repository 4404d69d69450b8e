#!/usr/bin/env bash
# Stage the vLLM 0.26 kit (tests/gpu/build-kit.sh) on the device machine, which reaches
# no registry and takes at most 64 MiB of carried files per call: one piece per call.
#
# Here (the checkout the device copies), once:
#   tests/gpu/build-kit.sh .kit && (cd .kit && sha256sum vllm-site.tar.xz.* > SHA256SUMS)
# On the device, one call each (carry the path named):
#   tests/gpu/stage-kit.sh 00        carry .kit/vllm-site.tar.xz.00 and .kit/SHA256SUMS
#   tests/gpu/stage-kit.sh 01 ...    carry .kit/vllm-site.tar.xz.01, and so on
#   tests/gpu/stage-kit.sh wheels    carry .kit/wheels, or (the tree past 14 MiB) run
#                                    split-wheels [N] here first and carry .kit/wheels-1, -2...
#   (the tree past 24 MiB: run resplit [SIZE] here first, and stage each smaller piece)
#   (or carry the last piece and the wheels with the first run: run-tier.sh stages them itself)
#   tests/gpu/stage-kit.sh assemble  unpack /tmp/kit into /tmp/site and /tmp/site2
#   tests/gpu/stage-kit.sh status    what /tmp/kit holds
# Pieces land in /tmp/kit, which lasts as long as the machine stays warm. run-tier.sh
# assembles by itself when /tmp/site is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
KIT=${KIT:-/tmp/kit}
SITE=${KIT_SITE:-/tmp/site}
SITE2=${KIT_SITE2:-/tmp/site2}
mkdir -p "$KIT"

status() {
  ls -la "$KIT" "$KIT/wheels" 2>/dev/null | grep -v '^total' || true
  du -sh "$KIT" 2>/dev/null || true
  [ -f "$SITE/vllm/__init__.py" ] && echo "assembled: $SITE" || echo "not assembled yet"
}

assemble() {
  if [ -f "$SITE/vllm/__init__.py" ] && [ -d "$SITE2" ]; then
    echo "kit already assembled in $SITE and $SITE2"; return 0
  fi
  ls "$KIT"/vllm-site.tar.xz.* >/dev/null 2>&1 || {
    echo "error: no kit pieces in $KIT; stage them first: tests/gpu/stage-kit.sh 00 (carry .kit/vllm-site.tar.xz.00)" >&2
    return 1; }
  if [ -f "$KIT/SHA256SUMS" ]; then
    (cd "$KIT" && sha256sum -c --quiet SHA256SUMS) || {
      echo "error: kit pieces missing or damaged (see above); stage them again" >&2; return 1; }
  else
    echo "note: no SHA256SUMS staged; a missing piece shows as an xz error"
  fi
  rm -rf "$SITE" "$SITE2" && mkdir -p "$SITE"
  cat "$KIT"/vllm-site.tar.xz.* | xz -d -T0 | tar -x -C "$SITE" || {
    rm -rf "$SITE"; echo "error: the kit does not unpack: a piece is missing" >&2; return 1; }
  ls "$KIT"/wheels/*.whl >/dev/null 2>&1 || {
    echo "error: no wheels in $KIT/wheels; stage them: tests/gpu/stage-kit.sh wheels (carry .kit/wheels)" >&2
    return 1; }
  python3 -m pip install -q --no-index --no-deps --target "$SITE2" "$KIT"/wheels/*.whl
  echo "assembled: $(du -sh "$SITE" | cut -f1) in $SITE, $(ls "$KIT"/wheels | wc -l) wheels in $SITE2"
}

case "${1:?usage: stage-kit.sh NN | wheels | resplit [SIZE] | split-wheels [N] | assemble | status}" in
  assemble) assemble ;;
  status) status ;;
  wheels)
    # .kit/wheels whole, or its halves .kit/wheels-1 and -2 (split-wheels), a call each
    dirs=$(ls -d .kit/wheels .kit/wheels-* 2>/dev/null || true)
    [ -n "$dirs" ] || { echo "error: no .kit/wheels* was carried (carry: [\".kit/wheels-1\"])" >&2; exit 1; }
    mkdir -p "$KIT/wheels" && for d in $dirs; do cp "$d"/* "$KIT/wheels/"; done
    status ;;
  resplit)
    # Here: the kit's pieces cut again to SIZE (default 24M), so a piece travels beside a
    # working tree that outgrew 24 MiB (docs/gpu-runs); SHA256SUMS is written again.
    size=${2:-24M}
    tmp=$(mktemp -d .kit/resplit.XXXX)
    cat .kit/vllm-site.tar.xz.* > "$tmp/whole" && rm -f .kit/vllm-site.tar.xz.*
    split -b "$size" -d "$tmp/whole" .kit/vllm-site.tar.xz. && rm -rf "$tmp"
    (cd .kit && sha256sum vllm-site.tar.xz.* > SHA256SUMS) && ls -la .kit/vllm-site.tar.xz.* ;;
  split-wheels)
    # Here, not on the device: the working tree travels with each call (64 MiB in all), and
    # once it outgrew 14 MiB the 50 MiB of wheels no longer fit beside it. Into N parts by size
    # (default 2; 3 fit beside a kit piece each where docs/gpu-runs stays behind), largest first
    # into the lightest part.
    parts=${2:-2}
    rm -rf .kit/wheels-[0-9]*
    declare -a size
    for i in $(seq 1 "$parts"); do mkdir -p ".kit/wheels-$i"; size[i]=0; done
    for w in $(ls -S .kit/wheels/*.whl); do
      light=1
      for i in $(seq 2 "$parts"); do [ "${size[i]}" -lt "${size[light]}" ] && light=$i; done
      ln "$w" ".kit/wheels-$light/"; size[light]=$((size[light] + $(stat -c %s "$w")))
    done
    du -sh .kit/wheels-[0-9]* ;;
  *)
    piece=$(printf '%02d' "$((10#$1))")
    src=.kit/vllm-site.tar.xz.$piece
    [ -f "$src" ] || { echo "error: $src was not carried (carry: [\"$src\"])" >&2; exit 1; }
    cp "$src" "$KIT/"
    [ -f .kit/SHA256SUMS ] && cp .kit/SHA256SUMS "$KIT/"
    status ;;
esac
