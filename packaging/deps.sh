#!/bin/sh
# Installs the Debian packages ferry needs to build and test, if any are missing.
# Idempotent: when everything is present it only checks and exits 0.
#   packaging/deps.sh            build + test dependencies
#   packaging/deps.sh bench      also what `make bench` and `make apps` need (Open MPI,
#                                gnuplot, valgrind, and Debian's hpcc for RandomAccess)
#   packaging/deps.sh rdma       also what `make check-rdma` needs (QEMU, busybox, rdma-core)
#   packaging/deps.sh launch     also what `make check-launch` needs (Slurm, munge, Open MPI);
#                                their services are not started (policy-rc.d during the install):
#                                the tests start their own with their own state directories
set -eu

pkgs="make gcc clang libclang-rt-14-dev pkg-config
      libconfig-dev libsystemd-dev libibverbs-dev librdmacm-dev libsodium-dev libseccomp-dev
      iproute2 util-linux procps psmisc systemd strace jq"
for extra in "$@"; do
	case "$extra" in
	bench) pkgs="$pkgs openmpi-bin libopenmpi-dev gnuplot-nox valgrind hpcc" ;;
	rdma)  pkgs="$pkgs qemu-system-x86 busybox-static rdma-core ibverbs-utils ibverbs-providers cpio kmod" ;;
	launch) pkgs="$pkgs slurm-wlm munge openmpi-bin" ;;
	*) echo "deps.sh: unknown group '$extra' (known: bench, rdma, launch)" >&2; exit 2 ;;
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
# Packages with daemons (slurmd, slurmctld, munge) would start them: a
# policy-rc.d that refuses every start (101) stands in place of the
# machine's own during the install (invoke-rc.d and deb-systemd-invoke ask
# it), and the machine's own, if any, is put back afterwards.
policy=/usr/sbin/policy-rc.d
$sudo mv "$policy" "$policy.ferry-saved" 2>/dev/null || true
restore() {
	$sudo rm -f "$policy"
	$sudo mv "$policy.ferry-saved" "$policy" 2>/dev/null || true
}
trap restore EXIT
trap 'exit 130' INT TERM
printf '#!/bin/sh\n# packaging/deps.sh: no service starts during the install\nexit 101\n' | $sudo tee "$policy" >/dev/null
$sudo chmod 755 "$policy"
# A fresh machine may have stale or no package lists.
$sudo apt-get update -qq >/dev/null || $sudo apt-get update
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
