#!/usr/bin/env bash
# The id of the launcher's tree a GPU call ran: sha256 over the Python and shell files under
# launcher/ and tests/gpu/, by path, cut to 12 hex digits. The device's copy of the working
# tree may have no git; a checkout finds the commit by running this at each candidate:
#   git checkout -q COMMIT && tests/gpu/tree-id.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
find launcher tests/gpu -type f \( -name '*.py' -o -name '*.sh' \) -not -path '*/__pycache__/*' \
  | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-12
