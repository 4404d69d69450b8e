#!/bin/sh
# Container entry point: key /cache by image build, then exec b12x-launch (launcher/entrypoint.py).
exec python3 -m launcher.entrypoint "$@"
