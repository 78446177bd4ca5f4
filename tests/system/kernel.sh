#!/bin/bash
# tests/system/kernel.sh CACHE - Debian's own kernel for a test VM, unpacked
# (not installed) into CACHE/kernel with its modules indexed, its version in
# CACHE/kver.  Idempotent.  Used by the soft-RoCE VM (tests/rdma/prepare.sh)
# and the systemd VM (tests/system/run.sh).
set -euo pipefail
CACHE=$1
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
