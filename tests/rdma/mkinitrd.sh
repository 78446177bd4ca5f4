#!/bin/bash
# tests/rdma/mkinitrd.sh CACHE BUILD OUT - builds the VM's initramfs: busybox,
# the soft-RoCE kernel modules, rdma-core's rxe provider, bash, setpriv (the
# daemons run as an unprivileged user there too), ferryd, ferryctl, libferry
# and the test programs (ft_alltoall, ft_stream, ft_steps, ft_rdmaflood; each with the shared libraries it needs; ft_rdmaflood
# is a host that opens RDMA connections and never authenticates),
# tests/rdma/init.sh as /init and tests/rdma/vm-tests.sh.
set -euo pipefail
CACHE=$1 BUILD=$2 OUT=$3
HERE=$(cd "$(dirname "$0")" && pwd)
KVER=$(cat "$CACHE/kver")
KROOT=$CACHE/kernel
ROOT=$CACHE/initramfs
rm -rf "$ROOT"
mkdir -p "$ROOT"/usr/{bin,sbin,lib64,lib/x86_64-linux-gnu/libibverbs,lib/modules/"$KVER"} \
	"$ROOT"/{proc,sys,dev,tmp,run,etc/libibverbs.d,tests}
ln -s usr/bin "$ROOT/bin"
ln -s usr/sbin "$ROOT/sbin"
ln -s usr/lib "$ROOT/lib"
ln -s usr/lib64 "$ROOT/lib64"

# A file and the shared libraries it needs, into the image.
copy() {
	local f=$1 dst=$2 l
	cp -L "$f" "$ROOT$dst"
	ldd "$f" 2>/dev/null | awk '/=> \// { print $3 } /^\s*\/lib64/ { print $1 }' | while read -r l; do
		[ -e "$ROOT/usr/lib/x86_64-linux-gnu/$(basename "$l")" ] ||
			cp -L "$l" "$ROOT/usr/lib/x86_64-linux-gnu/$(basename "$l")"
	done
}
cp /usr/bin/busybox "$ROOT/usr/bin/busybox"
for b in /usr/sbin/ip /usr/bin/rdma /usr/bin/ibv_devices /bin/bash /usr/bin/setpriv; do copy "$b" "/usr/bin/$(basename "$b")"; done
for b in "$BUILD/ferryd" "$BUILD/ferryctl" "$BUILD"/tests/ft_alltoall "$BUILD"/tests/ft_stream "$BUILD"/tests/ft_steps "$BUILD"/tests/ft_rdmaflood; do
	copy "$b" "/usr/bin/$(basename "$b")"
done
copy /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so
cp /etc/libibverbs.d/rxe.driver "$ROOT/etc/libibverbs.d/"
cp -L /lib/x86_64-linux-gnu/libgcc_s.so.1 "$ROOT/usr/lib/x86_64-linux-gnu/"
cp -L /lib64/ld-linux-x86-64.so.2 "$ROOT/usr/lib64/ld-linux-x86-64.so.2"
for a in $("$ROOT/usr/bin/busybox" --list-full); do
	[ -e "$ROOT/$a" ] || [ -L "$ROOT/$a" ] || ln -s /usr/bin/busybox "$ROOT/$a" 2>/dev/null || true
done

# Kernel modules, dependencies first.
declare -A SEEN=()
ORDER=()
visit() {
	local m=${1//-/_} d
	[ -n "${SEEN[$m]:-}" ] && return
	SEEN[$m]=1
	for d in $(modinfo -b "$KROOT" -k "$KVER" -F depends "$m" | tr ',' ' '); do visit "$d"; done
	ORDER+=("$m")
}
for m in crc32_generic veth bridge rdma_rxe rdma_ucm ib_uverbs; do visit "$m"; done
for m in "${ORDER[@]}"; do
	f=$(modinfo -b "$KROOT" -k "$KVER" -n "$m")
	cp "$f" "$ROOT/usr/lib/modules/$KVER/"
	echo "$(basename "$f")" >>"$ROOT/usr/lib/modules/$KVER/load-order"
done

cp "$HERE/init.sh" "$ROOT/init"
cp "${RDMA_VM_TESTS:-$HERE/vm-tests.sh}" "$ROOT/tests/vm-tests.sh"
chmod +x "$ROOT/init" "$ROOT/tests/vm-tests.sh"
(cd "$ROOT" && find . | cpio -o -H newc --quiet | gzip -1) >"$OUT"
