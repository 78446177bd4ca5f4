#!/bin/sh
# Installs the Debian packages ferry needs to build and test, if any are missing.
# Idempotent: when everything is present it only checks and exits 0.
#   packaging/deps.sh            build + test dependencies (Open MPI: libferry-mpi
#                                and its tests, tests/integration/mpi_*.sh)
#   packaging/deps.sh bench      also what `make bench` needs (gnuplot, valgrind)
#   packaging/deps.sh rdma       also what `make check-rdma` needs (QEMU, busybox, rdma-core)
set -eu

pkgs="make gcc clang libclang-rt-14-dev pkg-config
      libconfig-dev libsystemd-dev libibverbs-dev librdmacm-dev libsodium-dev libseccomp-dev
      iproute2 util-linux procps psmisc systemd strace jq openmpi-bin libopenmpi-dev"
for extra in "$@"; do
	case "$extra" in
	bench) pkgs="$pkgs gnuplot-nox valgrind" ;;
	rdma)  pkgs="$pkgs qemu-system-x86 busybox-static rdma-core ibverbs-utils ibverbs-providers cpio kmod" ;;
	*) echo "deps.sh: unknown group '$extra' (known: bench, rdma)" >&2; exit 2 ;;
	esac
done

missing=""
for p in $pkgs; do
	st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[ "$st" = installed ] || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

echo "deps.sh: installing:$missing" >&2
if [ "$(id -u)" -eq 0 ]; then
	sudo=""
elif command -v sudo >/dev/null 2>&1; then
	sudo="sudo"
else
	echo "deps.sh: need root (or sudo) to install:$missing" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# A fresh machine may have stale or no package lists.
$sudo apt-get update -qq >/dev/null || $sudo apt-get update
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
