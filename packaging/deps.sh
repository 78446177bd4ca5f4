#!/bin/sh
# Installs the Debian packages ferry needs to build and test, if any are missing.
# Idempotent: when everything is present it only checks and exits 0.
#   packaging/deps.sh            build + test dependencies (Open MPI and MPICH:
#                                libferry-mpi, libferry-mpich and their tests,
#                                tests/integration/mpi_*.sh; mpicc and mpirun stay
#                                Open MPI's, below)
#   packaging/deps.sh bench      also what `make bench` and `make apps` need (gnuplot,
#                                valgrind, and Debian's hpcc for RandomAccess)
#   packaging/deps.sh rdma       also what `make check-rdma` needs (QEMU, busybox, rdma-core)
#   packaging/deps.sh launch     also what `make check-launch` needs (Slurm, munge, Open MPI);
#                                their services are not started (policy-rc.d during the install):
#                                the tests start their own with their own state directories
#   packaging/deps.sh deb        also what `make deb` needs (debhelper, lintian)
#   packaging/deps.sh system     also what `make check-system` needs (QEMU, mmdebstrap)
# The man pages are plain roff (packaging/man/): `make check` lints them with groff.
set -eu

pkgs="make gcc clang libclang-rt-14-dev pkg-config
      libconfig-dev libsystemd-dev libibverbs-dev librdmacm-dev libsodium-dev libseccomp-dev
      iproute2 util-linux procps psmisc systemd strace jq groff-base openmpi-bin libopenmpi-dev
      mpich libmpich-dev"
for extra in "$@"; do
	case "$extra" in
	bench) pkgs="$pkgs gnuplot-nox valgrind hpcc" ;;
	rdma)  pkgs="$pkgs qemu-system-x86 busybox-static rdma-core ibverbs-utils ibverbs-providers cpio kmod" ;;
	launch) pkgs="$pkgs slurm-wlm munge openmpi-bin" ;;
	deb)   pkgs="$pkgs debhelper dpkg-dev fakeroot lintian" ;;
	system) pkgs="$pkgs qemu-system-x86 mmdebstrap cpio kmod" ;;
	*) echo "deps.sh: unknown group '$extra' (known: bench, rdma, launch, deb, system)" >&2; exit 2 ;;
	esac
done

missing=""
for p in $pkgs; do
	st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[ "$st" = installed ] || missing="$missing $p"
done
# Packages with daemons (slurmd, slurmctld, munge) would start them: a
# policy-rc.d that refuses every start (101) stands in place of the
# machine's own during the install (invoke-rc.d and deb-systemd-invoke ask
# it), and the machine's own, if any, is put back afterwards.  One run at a
# time swaps them (flock); a run killed before it put the machine's own
# back left ours, marked: the next run puts it back first (unswap).
policy=/usr/sbin/policy-rc.d
mark='# packaging/deps.sh: no service starts during the install'
sudo=""
unswap() {
	if [ -f "$policy" ] && grep -qxF "$mark" "$policy"; then
		if [ -e "$policy.ferry-saved" ]; then
			$sudo mv -f "$policy.ferry-saved" "$policy"
		else
			$sudo rm -f "$policy"
		fi
	fi
}
if [ -z "$missing" ]; then
	[ "$(id -u)" -ne 0 ] || unswap
	exit 0
fi

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
exec 9>"${TMPDIR:-/tmp}/ferry-deps.$(id -u).lock"
flock 9
unswap
trap unswap EXIT
trap 'exit 130' INT TERM
if [ -e "$policy" ]; then
	$sudo mv -n "$policy" "$policy.ferry-saved"
fi
printf '#!/bin/sh\n%s\nexit 101\n' "$mark" | $sudo tee "$policy" >/dev/null
$sudo chmod 755 "$policy"
# A fresh machine may have stale or no package lists.
$sudo apt-get update -qq >/dev/null || $sudo apt-get update
# Open MPI and MPICH both provide mpicc, mpirun and mpi.h through
# alternatives; Debian 12 ranks Open MPI first (50 against 40), but a
# machine's own choice, one that had MPICH alone before, or another release
# may differ: after the install, each alternative that has an Open MPI
# choice is set to it, since libferry-mpi is built with mpicc and tested
# with mpirun and must be Open MPI's (libferry-mpich is built with
# mpicc.mpich and tested with mpiexec.mpich, by name).  gcc, not
# dpkg-architecture (dpkg-dev may be absent), names the multiarch triplet.
alts="mpi mpirun mpi-$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)"
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
for a in $alts; do
	q=$(update-alternatives --query "$a" 2>/dev/null) || continue
	want=$(printf '%s\n' "$q" | sed -n 's/^Alternative: \(.*openmpi.*\)/\1/p' | head -n 1)
	now=$(printf '%s\n' "$q" | sed -n 's/^Value: //p')
	if [ -n "$want" ] && [ "$now" != "$want" ]; then
		echo "deps.sh: the $a alternative is ${now:-unset}: Open MPI's, $want" >&2
		$sudo update-alternatives --quiet --set "$a" "$want"
	fi
done
# ... nor at the next boot: what deps.sh installed for the tests is theirs,
# started by them with their own state (not on a machine that had them)
for unit in slurm-wlm:slurmd slurm-wlm:slurmctld munge:munge; do
	case " $missing " in
	*" ${unit%%:*} "*) $sudo systemctl disable "${unit#*:}" >/dev/null 2>&1 || true ;;
	esac
done
