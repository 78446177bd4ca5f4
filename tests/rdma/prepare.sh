#!/bin/bash
# tests/rdma/prepare.sh CACHE - one-time preparation of the soft-RoCE VM:
# the host packages (packaging/deps.sh rdma) and Debian's own kernel, unpacked
# (not installed) into CACHE/kernel with its modules indexed.  Idempotent.
set -euo pipefail
CACHE=$1
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
"$ROOT/packaging/deps.sh" rdma
"$ROOT/tests/system/kernel.sh" "$CACHE"
