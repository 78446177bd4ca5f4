#!/bin/bash
# tests/rdma/run.sh BUILD - make check-rdma: ferry over real RDMA verbs, on
# soft-RoCE (rdma_rxe) inside a QEMU VM running Debian's own kernel (the
# build machines have no RDMA device and no RDMA in their kernel).  Prints
# the VM's TAP lines ("ok - ..."), the tail of its console on failure, and
# exits 0 only if every test inside passed.  For experiments,
# RDMA_VM_TESTS=SCRIPT runs another script inside the VM instead of
# vm-tests.sh (the kernel's dynamic_debug, e.g. "module rdma_rxe +p", tells
# what rxe drops and why); RDMA_VM_TIMEOUT limits the VM's run (900 s).
set -uo pipefail
BUILD=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${RDMA_VM_CACHE:-$(cd "$HERE/../.." && pwd)/build/rdma-vm}
"$HERE/prepare.sh" "$CACHE" >"$CACHE.prepare.log" 2>&1 || {
	echo "not ok - rdma: preparing the VM failed"; sed 's/^/#   /' "$CACHE.prepare.log" | tail -20; exit 1; }
"$HERE/mkinitrd.sh" "$CACHE" "$BUILD" "$CACHE/initrd.gz" || { echo "not ok - rdma: building the initramfs failed"; exit 1; }
KVER=$(cat "$CACHE/kver")
LOG=$CACHE/console.log
# KVM is not usable on these hosts: TCG.  QEMU's own exit status means nothing
# (0 on a panic too); the guest reports through isa-debug-exit.
timeout "${RDMA_VM_TIMEOUT:-900}" qemu-system-x86_64 -accel tcg -cpu max -smp 2 -m 1536 -nographic -no-reboot \
	-net none -device isa-debug-exit,iobase=0xf4,iosize=0x04 \
	-kernel "$CACHE/kernel/boot/vmlinuz-$KVER" -initrd "$CACHE/initrd.gz" \
	-append 'console=ttyS0 panic=-1 quiet' </dev/null >"$LOG" 2>&1
rc=$?
# -a: the console holds the odd binary byte, and grep would then print
# "binary file matches" instead of the lines.
tr -d '\r' <"$LOG" | grep -a -E '^(not )?ok - |^# ' | sed 's/^\(not \)\{0,1\}ok - /&rdma: /'
# (qemu's own failure to start is status 1 too: a verdict of 0 counts only
# with checks reported)
n=$(tr -d '\r' <"$LOG" | grep -a -c -E '^(not )?ok - ')
if [ "$rc" = 1 ] && [ "$n" = 0 ]; then
	echo "not ok - rdma: the VM said passed with no checks reported"
	tail -30 "$LOG" | sed 's/^/#   /'
	exit 1
fi
case $rc in
1) exit 0 ;;
3) echo "# VM tests failed; console tail:"; tr -d '\r' <"$LOG" | tail -40 | cat -v | sed 's/^/#   /'; exit 1 ;;
124) echo "not ok - rdma: the VM did not finish in time"; tail -20 "$LOG" | sed 's/^/#   /'; exit 1 ;;
*) echo "not ok - rdma: the VM ended without reporting (qemu status $rc)"; tail -30 "$LOG" | sed 's/^/#   /'; exit 1 ;;
esac
