#!/bin/bash
# tests/system/run.sh BUILD - make check-system: the Debian packages
# (build/deb/, make deb) installed on Debian 12 booted with systemd as PID 1
# in a QEMU VM (TCG: these machines have no KVM, and their PID 1 is not
# systemd, so no container would do).  What an administrator does is
# checked inside by tests/system/vm-tests.sh; its TAP lines ("ok - ...")
# come back on the serial console and its verdict through isa-debug-exit,
# as in the soft-RoCE VM (tests/rdma/).
#
# The VM: Debian's kernel booted directly (tests/system/kernel.sh), and as
# its root file system an initramfs: the base image, a Debian 12 made by
# mmdebstrap from the package list below and cached in
# build/system-vm/base-HASH.cpio (HASH of the list and of how it is made:
# change either and it is made again, some 2 minutes), followed by a small
# archive of this run's files (the .deb files, the test programs, the test
# script and the unit that runs it).  The kernel unpacks both into its
# tmpfs root and starts /sbin/init, which is systemd.
#
# Without QEMU or mmdebstrap (packaging/deps.sh system installs them) every
# check is reported skipped.  SYSTEM_VM_TIMEOUT limits the VM (default 840 s).
set -uo pipefail
BUILD=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CACHE=${SYSTEM_VM_CACHE:-$ROOT/build/system-vm}
mkdir -p "$CACHE"

# Every check of vm-tests.sh, skipped.
skip_all() {
	sed -n 's/^expect "\([^"]*\)".*/\1/p' "$HERE/vm-tests.sh" | while read -r c; do
		echo "ok - system: $c # SKIP $1"
	done
	exit 0
}
command -v qemu-system-x86_64 >/dev/null || skip_all "no qemu-system-x86_64 (packaging/deps.sh system)"
command -v mmdebstrap >/dev/null || skip_all "no mmdebstrap (packaging/deps.sh system)"
[ "$(id -u)" = 0 ] || skip_all "mmdebstrap and the image need root"
DEBS=$(ls "$ROOT"/build/deb/ferryd_*.deb "$ROOT"/build/deb/libferry0_*.deb "$ROOT"/build/deb/libferry-dev_*.deb 2>/dev/null)
[ "$(echo "$DEBS" | wc -w)" = 3 ] || { echo "not ok - system: no packages in build/deb (make deb)"; exit 1; }

WORK=$(mktemp -d "$CACHE/run.XXXXXX")
QPID=
cleanup() {
	[ -n "$QPID" ] && kill "$QPID" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The kernel.
"$HERE/kernel.sh" "$CACHE" >"$CACHE/kernel.log" 2>&1 || {
	echo "not ok - system: fetching the kernel failed"; sed 's/^/#   /' "$CACHE/kernel.log" | tail; exit 1; }
KVER=$(cat "$CACHE/kver")

# The base image: what ferryd's package depends on is there already, since
# the VM has no network (apt installs the .deb files from the disk).
PKGS="systemd systemd-sysv udev dbus iproute2 procps kmod passwd eatmydata
      libconfig9 libsodium23 libibverbs1 librdmacm1 libseccomp2 libsystemd0"
MMOPTS="--variant=minbase --dpkgopt=path-exclude=/usr/share/doc/* --dpkgopt=path-exclude=/usr/share/locale/*
        --dpkgopt=path-include=/usr/share/doc/*/copyright"
HASH=$(echo "bookworm $PKGS $MMOPTS v1" | sha256sum | cut -c1-16)
BASE=$CACHE/base-$HASH.cpio
if [ ! -f "$BASE" ]; then
	echo "# making the base image ($BASE)"
	rm -f "$CACHE"/base-*.cpio
	rm -rf "$WORK/rootfs"
	# shellcheck disable=SC2086
	if ! nice -n 19 mmdebstrap $MMOPTS --include="$(echo $PKGS | tr ' ' ,)" \
		--customize-hook='echo ferry-vm >"$1/etc/hostname"' \
		--customize-hook='chroot "$1" passwd -d root' \
		bookworm "$WORK/rootfs" /etc/apt/sources.list.d/debian.sources >"$CACHE/mmdebstrap.log" 2>&1; then
		echo "not ok - system: mmdebstrap failed"; tail -20 "$CACHE/mmdebstrap.log" | sed 's/^/#   /'; exit 1
	fi
	(cd "$WORK/rootfs" && find . | cpio -o -H newc --quiet) >"$BASE.tmp" && mv "$BASE.tmp" "$BASE"
	rm -rf "$WORK/rootfs"
fi

# This run's files.
O=$WORK/overlay
mkdir -p "$O/root/debs" "$O/usr/local/bin" "$O/etc/systemd/system/multi-user.target.wants"
cp $DEBS "$O/root/debs/"
cp "$BUILD/tests/ft_alltoall" "$BUILD/tests/ft_open" "$O/usr/local/bin/"
cp "$HERE/vm-tests.sh" "$O/root/vm-tests.sh"
cp "$(modinfo -b "$CACHE/kernel" -k "$KVER" -n veth)" "$O/root/veth.ko"
cat >"$O/etc/systemd/system/ferry-vm-tests.service" <<'UNIT'
[Unit]
Description=ferry system tests (tests/system/vm-tests.sh)
After=multi-user.target

[Service]
Type=oneshot
ExecStart=/bin/bash /root/vm-tests.sh
StandardOutput=tty
StandardError=tty
TTYPath=/dev/ttyS0
UNIT
ln -s ../ferry-vm-tests.service "$O/etc/systemd/system/multi-user.target.wants/ferry-vm-tests.service"
(cd "$O" && find . | cpio -o -H newc --quiet) >"$WORK/overlay.cpio"
cat "$BASE" "$WORK/overlay.cpio" >"$WORK/initrd"
rm -rf "$O" "$WORK/overlay.cpio"

LOG=$CACHE/console.log
start=$(date +%s)
timeout "${SYSTEM_VM_TIMEOUT:-840}" qemu-system-x86_64 -accel tcg -cpu max -smp 2 -m 2048 -nographic -no-reboot \
	-net none -device isa-debug-exit,iobase=0xf4,iosize=0x04 \
	-kernel "$CACHE/kernel/boot/vmlinuz-$KVER" -initrd "$WORK/initrd" \
	-append "console=ttyS0 panic=-1 quiet rdinit=/sbin/init systemd.unit=multi-user.target systemd.show_status=0 systemd.mask=serial-getty@ttyS0.service systemd.mask=getty@tty1.service" \
	</dev/null >"$LOG" 2>&1 &
QPID=$!
wait "$QPID"
rc=$?
QPID=
echo "# the VM ran $(($(date +%s) - start)) s"
tr -d '\r' <"$LOG" | grep -a -E '^(not )?ok - |^# ' | sed 's/^\(not \)\{0,1\}ok - /&system: /'
case $rc in
1) exit 0 ;;
3) echo "# VM tests failed; console tail:"; tr -d '\r' <"$LOG" | tail -40 | cat -v | sed 's/^/#   /'; exit 1 ;;
124) echo "not ok - system: the VM did not finish in time"; tr -d '\r' <"$LOG" | tail -30 | cat -v | sed 's/^/#   /'; exit 1 ;;
*) echo "not ok - system: the VM ended without reporting (qemu status $rc)"; tr -d '\r' <"$LOG" | tail -30 | cat -v | sed 's/^/#   /'; exit 1 ;;
esac
