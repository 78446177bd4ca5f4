#!/bin/bash
# tests/rdma/prepare.sh CACHE - one-time preparation of the soft-RoCE VM:
# the host packages (packaging/deps.sh rdma) and Debian's own kernel, unpacked
# (not installed) into CACHE/kernel with its modules indexed.  Idempotent.
set -euo pipefail
CACHE=$1
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
"$ROOT/packaging/deps.sh" rdma
mkdir -p "$CACHE"
cd "$CACHE"
KPKG=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/ { print $2; exit }')
KVER=${KPKG#linux-image-}
if [ ! -f "kernel/boot/vmlinuz-$KVER" ]; then
	rm -rf kernel ./*.deb
	# apt's sandbox user cannot write here; the warning about it is harmless
	apt-get download "$KPKG" 2>&1 | grep -v "unsandboxed" || true
	dpkg -x "$KPKG"_*.deb kernel
	rm -f "$KPKG"_*.deb
	depmod -b "$CACHE/kernel" "$KVER"       # the package's postinst normally does this
fi
echo "$KVER" >kver
