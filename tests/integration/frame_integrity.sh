#!/bin/bash
# Frame integrity (hardening finding 5): a host on the path between two keyed
# daemons, without the key (tests/progs/ft_mitm, a TCP proxy that node 0 is
# configured to reach node 1 through), changes a bit of a DATA frame, raises
# an ack in a frame's header, holds frames back and makes up an ACK for them,
# injects a DATA frame and a STEP control item, and replays a frame, one
# attack per connection, while jobs across both nodes run.  Each time the
# daemon that gets the frame refuses it (the link ends, the log says why),
# the link comes back, and the jobs get every item exactly once, in order,
# with every step right.  The same with security.encrypt, where the proxy must
# see no item in the clear.  And without integrity (security.integrity =
# false), the changed bit does reach a client: the attacks are real.
. "$(dirname "$0")/lib.sh"

"$BUILD/ferryctl" keygen >"$TMP/c.key"
chmod 600 "$TMP/c.key"
daemon_owns "$TMP/c.key"
ATTACKS=flip,hdr,ack,inject,step,replay
NATTACKS=6

# setup NAME SECURITY-SETTINGS ATTACKS: node 1 at its port, node 0 reaching
# it through ft_mitm (log $TMP/NAME.mitm); returns once the link is up.
# (The proxy's attacks pick DATA frames by their order: no link-start
# probes among them.)
setup() {
	proxied_cluster "$1" "$3" "security: { key_file = \"$TMP/c.key\"; $2 };" "transport: { probe = false; };"
}

# job NAME JOB: 4 ranks, 2 on each node, every item checked.
job() {
	local r pids="" rc=0
	for r in 0 1 2 3; do
		FERRY_TIMEOUT_MS=20000 FERRY_RUNTIME_DIR=$TMP/$1_n$((r % 2)) bg "$2.$r.log" prog ft_alltoall --job "$2" --rank $r --size 4 \
			--items 2000 --len 16 --len-max 120 --steps 3 --sync
		pids="$pids $LASTPID"
	done
	for r in $pids; do wait "$r" || rc=1; done
	[ $rc = 0 ] || for r in 0 1 2 3; do sed "s|^|#   $2.$r: |" "$TMP/$2.$r.log"; done
	return $rc
}

attacks_done() { grep -c '^attack ' "$TMP/$1.mitm"; }
# fails NAME K: lines of daemon K saying a frame failed its check.
fails() { grep -c 'fails its integrity check' "$TMP/$1_n$2.log"; }
peerstat() {
	"$BUILD/ferryctl" --runtime-dir "$TMP/$1" stats |
		awk -v f="$2" '$1 == "peer" { for (i = 3; i < NF; i += 2) if ($i == f) s += $(i + 1) } END { print s + 0 }'
}

# attacked NAME WHAT: jobs run until every attack happened (or one fails,
# or the proxy is gone), then checks.
attacked() {
	local name=$1 what=$2 i ok=1
	for i in 1 2 3 4 5 6 7 8; do
		job "$name" "j$name$i" || { ok=0; break; }
		[ "$(attacks_done "$name")" -ge $NATTACKS ] && break
		kill -0 "$(eval "echo \$MITM_$name")" 2>/dev/null || { echo "# ft_mitm is gone"; break; }
	done
	expect "$what: the jobs got every item exactly once, in order, every step right ($i jobs)" test $ok = 1
	expect "$what: all $NATTACKS attacks happened ($(attacks_done "$name"))" \
		test "$(attacks_done "$name")" -ge $NATTACKS
	sed 's/^/#   /' "$TMP/$name.mitm"
	expect "$what: the proxy ran without a sanitizer report" \
		not grep -qE 'runtime error|Sanitizer' "$TMP/$name.mitm"
	expect "$what: node 1 refused the frames changed, injected and replayed on their way to it ($(fails "$name" 1))" \
		test "$(fails "$name" 1)" -ge 4
	expect "$what: node 0 refused the raised ack and the made-up ACK ($(fails "$name" 0))" \
		test "$(fails "$name" 0)" -ge 2
	expect "$what: ferryctl stats counts them (integrity_failures $(peerstat "${name}_n0" integrity_failures) + $(peerstat "${name}_n1" integrity_failures))" \
		test $(($(peerstat "${name}_n0" integrity_failures) + $(peerstat "${name}_n1" integrity_failures))) -ge $NATTACKS
	expect "$what: nothing forged got past the check (no malformed or out-of-sequence frame, no forged ack believed)" \
		not grep -qE 'malformed frame|out of sequence|acknowledges frame' "$TMP/${name}_n0.log" "$TMP/${name}_n1.log"
	expect "$what: nothing was dropped" \
		test "$(stat "${name}_n0" items_dropped)$(stat "${name}_n1" items_dropped)" = 00
	expect "$what: the link is up again" wait_for "link_up ${name}_n0 1 && link_up ${name}_n1 0"
	expect "$what: ... and carries a job" job "$name" "j${name}after"
}

# mitm_stop NAME: stops the proxy (not in a subshell: wait needs its parent);
# its summary is then the last line of $TMP/NAME.mitm.  Fails if it did not
# exit 0 (a sanitizer report at exit, say).
mitm_stop() {
	local pid
	pid=$(eval "echo \$MITM_$1")
	kill -TERM "$pid"
	wait "$pid"
}

# --- integrity (the default with a key) ---
setup fim "" "$ATTACKS" || exit 1
expect "status says frames are authenticated" \
	bash -c "'$BUILD/ferryctl' --runtime-dir '$TMP/fim_n0' status | grep -q 'frames authenticated'"
attacked fim "integrity"
expect "the proxy exits cleanly" mitm_stop fim
s=$(tail -n 1 "$TMP/fim.mitm")
expect "integrity alone: the items travel in the clear ($s)" \
	bash -c "[[ '$s' =~ plaintext\ ([1-9][0-9]*)\ of ]]"
expect "daemon 0 exits cleanly" stop_daemon fim_n0
expect "daemon 1 exits cleanly" stop_daemon fim_n1

# --- encryption ---
setup fie "encrypt = true;" "$ATTACKS" || exit 1
expect "status says frames are encrypted" \
	bash -c "'$BUILD/ferryctl' --runtime-dir '$TMP/fie_n0' status | grep -q 'frames encrypted'"
attacked fie "encryption"
expect "the proxy exits cleanly" mitm_stop fie
s=$(tail -n 1 "$TMP/fie.mitm")
expect "encryption: no DATA frame on the wire reads as items ($s)" \
	bash -c "[[ '$s' =~ plaintext\ 0\ of\ [1-9] ]]"
expect "daemon 0 exits cleanly" stop_daemon fie_n0
expect "daemon 1 exits cleanly" stop_daemon fie_n1

# --- without integrity: the same changed bit reaches the receiving client ---
setup fio "integrity = false;" flip || exit 1
expect "status says frames are not authenticated" \
	bash -c "'$BUILD/ferryctl' --runtime-dir '$TMP/fio_n0' status | grep -q 'frames NOT authenticated'"
FERRY_RUNTIME_DIR=$TMP/fio_n1 bg off.1.log prog ft_stream --job off --rank 1 --items 20000 --len 64
recv=$LASTPID
FERRY_RUNTIME_DIR=$TMP/fio_n0 bg off.0.log prog ft_stream --job off --rank 0 --items 20000 --len 64
send=$LASTPID
wait "$recv"
rc=$?
kill "$send" 2>/dev/null
wait "$send" 2>/dev/null
expect "without integrity the flipped bit is delivered: the receiver finds the payload damaged (exit $rc)" \
	bash -c "[ $rc != 0 ] && grep -q 'payload damaged' '$TMP/off.1.log'"
[ $rc != 0 ] || sed 's/^/#   /' "$TMP/off.1.log" "$TMP/fio.mitm"
expect "... and no daemon noticed" not grep -q 'integrity check' "$TMP/fio_n0.log" "$TMP/fio_n1.log"
expect "the proxy exits cleanly" mitm_stop fio
expect "daemon 0 exits cleanly" stop_daemon fio_n0
expect "daemon 1 exits cleanly" stop_daemon fio_n1
finish
