#!/bin/bash
# tests/system/vm-tests.sh - inside the systemd VM (tests/system/run.sh), as
# root, run by ferry-vm-tests.service once multi-user.target is reached:
# installs ferry's packages and checks what an administrator does with them.
# One "ok - CHECK: ..." or "not ok - ..." line per check on the serial
# console; the verdict leaves through isa-debug-exit (0 passed, 1 failed).
# Every check is one line that starts with expect "DESCRIPTION" (run.sh
# reads them to report each one skipped where no VM can run).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
FAILED=0
ok()   { echo "ok - $*"; }
fail() { echo "not ok - $*"; FAILED=1; }
expect() { local d=$1; shift; if "$@"; then ok "$d"; else fail "$d"; fi; }
# wait_for SECONDS COMMAND...: until it succeeds, or false.
wait_for() { local n=$1 i; shift; for i in $(seq $((n * 10))); do "$@" && return 0; sleep 0.1; done; return 1; }
prop() { systemctl show -p "$2" --value "$1"; }
active() { [ "$(prop "$1" ActiveState)" = active ]; }
# jlog [journalctl options]: ferryd's messages since this boot.
jlog() { journalctl -b -u ferryd --no-pager -o cat "$@"; }
say() { echo "# $*"; }
finish() {
	say "vm-tests done in $(($(date +%s) - T0)) s, $([ $FAILED = 0 ] && echo passed || echo failed)"
	printf "\\$(printf %03o $FAILED)" | dd of=/dev/port bs=1 seek=244 count=1 2>/dev/null
	systemctl poweroff -f
}
trap finish EXIT
T0=$(date +%s)
say "systemd $(systemctl --version | head -n 1 | cut -d' ' -f2) is PID 1: $(cat /proc/1/comm), kernel $(uname -r)"

# --- install: apt from the disk, as an administrator would ---------------
useradd -m alice
# (Not --no-download, with which apt looks for local files in its cache and
# fails: "Pathname to install is not absolute".  There is no network: what
# the packages depend on is in the image.)
install_debs() {
	eatmydata apt-get install -y -q /root/debs/ferryd_*.deb /root/debs/libferry0_*.deb \
		/root/debs/libferry-dev_*.deb >/root/apt.log 2>&1 && return 0
	sed 's/^/#   /' /root/apt.log | tail -20
	return 1
}
expect "install: apt-get install ./ferryd_*.deb ./libferry0_*.deb ./libferry-dev_*.deb" install_debs
expect "install: ferryd.service and ferryd.socket enabled" \
	test "$(systemctl is-enabled ferryd.service)/$(systemctl is-enabled ferryd.socket)" = enabled/enabled
expect "install: ferryd started by the package (Debian's policy)" wait_for 30 active ferryd.service
expect "install: /etc/ferry/ferry.conf is a conffile, no key shipped" \
	bash -c "dpkg-query -W -f='\${Conffiles}' ferryd | grep -q /etc/ferry/ferry.conf && [ ! -e /etc/ferry/cluster.key ]"

# --- status: READY (Type=notify: active only after READY=1) and STATUS= ---
expect "status: active (running), READY=1 received" test "$(prop ferryd SubState)" = running
st=$(prop ferryd StatusText)
say "StatusText: $st"
expect "status: systemctl status shows the STATUS= line" \
	bash -c "[[ '$st' == 'node 0/1: '* ]] && systemctl status ferryd --no-pager | grep -qF 'Status: \"$st'"

# --- socket: activation through ferryd.socket ---------------------------
systemctl stop ferryd.service 2>/dev/null
expect "socket: the service stops, ferryd.socket keeps listening" \
	bash -c "! systemctl is-active -q ferryd.service && systemctl is-active -q ferryd.socket && [ -S /run/ferry/ferryd.sock ]"
ctl_status() { ferryctl --timeout 20000 status >/root/status.txt; }
expect "socket: a client starts ferryd (ferryctl status)" ctl_status
expect "socket: ferryd.service active again" active ferryd.service

# --- user-job: a job of an unprivileged user -----------------------------
job() {   # job NAME DIR0 DIR1: ranks 0 and 1 as alice, through those sockets
	local pids=() r rc=0
	for r in 0 1; do
		local dir=$2; [ $r = 1 ] && dir=$3
		runuser -u alice -- env FERRY_RUNTIME_DIR="$dir" ft_alltoall --job "$1" --rank $r --size 2 \
			--items 2000 --steps 2 --sync >"/tmp/$1.$r" 2>&1 &
		pids+=($!)
	done
	for r in 0 1; do wait "${pids[$r]}" || rc=1; done
	for r in 0 1; do sed "s/^/#   rank $r: /" "/tmp/$1.$r"; grep -q "rank $r ok" "/tmp/$1.$r" || rc=1; done
	return $rc
}
expect "user-job: alice runs a 2-rank all-to-all through /run/ferry" job j1 /run/ferry /run/ferry
pid=$(prop ferryd MainPID)
expect "user-job: ferryd runs as a dynamic user, not root" \
	bash -c "[ '$pid' -gt 0 ] && u=\$(ps -o user= -p $pid) && [ -n \"\$u\" ] && [ \"\$u\" != root ]"

# --- upgrade: installing the packages again (dpkg's upgrade path) keeps the
# daemon and the jobs it serves (dh_installsystemd --no-restart-after-upgrade)
pid=$(prop ferryd MainPID)
runuser -u alice -- env FERRY_RUNTIME_DIR=/run/ferry ft_alltoall --job up --rank 0 --size 2 --items 2000 \
	--steps 2 --sync >/tmp/up.0 2>&1 &
r0=$!
wait_for 20 bash -c "[ \"\$(ferryctl stats | awk '\$1 == \"endpoints\" { print \$2 }')\" -ge 1 ]"
eatmydata dpkg -i /root/debs/ferryd_*.deb /root/debs/libferry0_*.deb /root/debs/libferry-dev_*.deb >/root/upgrade.log 2>&1
expect "upgrade: dpkg -i of the packages again succeeds" test $? = 0
expect "upgrade: the daemon was neither stopped nor restarted" \
	bash -c "systemctl is-active -q ferryd && [ \"\$(systemctl show -p MainPID --value ferryd)\" = $pid ]"
if [ "$(prop ferryd MainPID)" != "$pid" ]; then
	sed 's/^/#   dpkg: /' /root/upgrade.log
	journalctl -b --no-pager -o short-monotonic -n 40 | sed 's/^/#   journal: /'
fi
runuser -u alice -- env FERRY_RUNTIME_DIR=/run/ferry ft_alltoall --job up --rank 1 --size 2 --items 2000 \
	--steps 2 --sync >/tmp/up.1 2>&1
r1=$?
wait "$r0"
expect "upgrade: a job whose rank 0 joined before the upgrade completes after it" \
	bash -c "[ $? = 0 ] && [ $r1 = 0 ] && grep -q 'rank 0 ok' /tmp/up.0 && grep -q 'rank 1 ok' /tmp/up.1"
sed 's/^/#   /' /tmp/up.0 /tmp/up.1

# --- reload: there is none (ferryd(8), \"Reload and restart\") -----------
pid=$(prop ferryd MainPID)
out=$(systemctl reload ferryd 2>&1)
say "systemctl reload ferryd: $out"
expect "reload: systemctl reload is refused (no ExecReload=)" bash -c "[[ '$out' == *'not applicable'* ]]"
systemctl kill -s HUP --kill-whom=main ferryd
expect "reload: SIGHUP is logged at notice and ignored" wait_for 10 bash -c \
	"journalctl -b -u ferryd -p notice..notice -o cat | grep -q 'SIGHUP: configuration reload is not supported'"
expect "reload: the same daemon runs on" test "$(prop ferryd MainPID)" = "$pid"

# --- restart: a new daemon, as documented --------------------------------
systemctl restart ferryd
expect "restart: systemctl restart starts a new daemon" \
	bash -c "systemctl is-active -q ferryd && [ \"\$(systemctl show -p MainPID --value ferryd)\" != $pid ]"

# --- watchdog: a hung daemon is killed and restarted -----------------------
mkdir -p /etc/systemd/system/ferryd.service.d
printf '[Service]\nWatchdogSec=2\nTimeoutAbortSec=2\n' >/etc/systemd/system/ferryd.service.d/watchdog.conf
systemctl daemon-reload
systemctl restart ferryd
pid=$(prop ferryd MainPID)
n0=$(prop ferryd NRestarts)
kill -STOP "$pid"
expect "watchdog: a SIGSTOPped ferryd is restarted (WatchdogSec=2 in a drop-in)" wait_for 60 bash -c \
	"systemctl is-active -q ferryd && p=\$(systemctl show -p MainPID --value ferryd) && [ \"\$p\" != $pid ] && [ \"\$p\" != 0 ]"
say "NRestarts $n0 -> $(prop ferryd NRestarts)"
expect "watchdog: systemd says why (watchdog timeout)" \
	bash -c "journalctl -b -u ferryd --no-pager | grep -qi 'watchdog timeout'"
rm -f /etc/systemd/system/ferryd.service.d/watchdog.conf
systemctl daemon-reload
systemctl restart ferryd

# --- stop: SIGTERM drains and exits cleanly --------------------------------
systemctl stop ferryd.service 2>/dev/null
expect "stop: ferryd delivered what was queued and exited 0" bash -c \
	"journalctl -b -u ferryd -o cat | grep -q 'stopping, delivering what is queued' &&
	 journalctl -b -u ferryd -o cat | grep -q 'drained; exiting' &&
	 [ \"\$(systemctl show -p Result --value ferryd)\" = success ]"
systemctl start ferryd

# --- journal: ferryd's lines with their priorities -------------------------
expect "journal: journalctl -u ferryd has ferryd's lines at their priorities (info, notice), without <N> prefixes" \
	bash -c "jl() { journalctl -b -u ferryd -o cat -p \$1..\$1; };
	 jl info | grep -q 'drained; exiting' && jl notice | grep -q ' ready on ' && ! journalctl -b -u ferryd -o cat | grep -q '^<[0-7]>'"

# --- security: systemd-analyze's score, as the README promises -------------
score=$(systemd-analyze security ferryd.service 2>/dev/null | sed -n 's/.*Overall exposure level for ferryd.service: \([0-9.]*\).*/\1/p')
say "systemd-analyze security ferryd.service: $score"
expect "security: systemd-analyze security ferryd scores at most 2.0 (README: 1.6)" \
	awk -v s="$score" 'BEGIN { exit !(s != "" && s <= 2.0) }'

# --- cluster: two nodes (node 1 in a network namespace) with a key ---------
insmod /root/veth.ko 2>/dev/null
ip netns add n1 && ip link add v0 type veth peer name v1 && ip link set v1 netns n1 &&
	ip addr add 10.9.0.1/24 dev v0 && ip link set v0 up &&
	ip -n n1 addr add 10.9.0.2/24 dev v1 && ip -n n1 link set v1 up && ip -n n1 link set lo up
ferryctl keygen >/etc/ferry/cluster.key && chmod 600 /etc/ferry/cluster.key
cat >/etc/ferry/ferry.conf <<'CONF'
cluster: {
  name = "vm";
  nodes = ( { host = "10.9.0.1"; }, { host = "10.9.0.2"; } );
};
security: {
  key_file = "/etc/ferry/cluster.key";
};
CONF
# This node is node 0: its host name is no node's host.
printf '[Service]\nExecStart=\nExecStart=/usr/sbin/ferryd --node 0\n' >/etc/systemd/system/ferryd.service.d/node.conf
systemctl daemon-reload
systemctl restart ferryd
# Node 1: the same unit's sandbox and credential, in namespace n1.
systemd-run --unit=ferryd-n1 -p Type=notify -p NetworkNamespacePath=/run/netns/n1 -p DynamicUser=yes \
	-p RuntimeDirectory=ferry-n1 -p StateDirectory=ferry-n1 -p LoadCredential=cluster.key:/etc/ferry/cluster.key \
	/usr/sbin/ferryd --node 1 --runtime-dir /run/ferry-n1 --state-dir /var/lib/ferry-n1 >/dev/null 2>&1
links() { ferryctl --runtime-dir "$1" status 2>/dev/null | grep -qE '^  peer [01] .*: up '; }
expect "cluster: ferryd.service and node 1 link up with the key (from the credential)" \
	bash -c "$(declare -f wait_for links); wait_for 60 links /run/ferry && wait_for 30 links /run/ferry-n1 &&
	 journalctl -b -u ferryd -o cat | grep -qi credential"
ferryctl status | sed 's/^/#   /' | head -20
expect "cluster: alice's job runs across both nodes" job j2 /run/ferry /run/ferry-n1
systemctl stop ferryd-n1 2>/dev/null
