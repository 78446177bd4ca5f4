#!/bin/bash
# Scatter and gather on physical tori (issue 13): one network namespace per
# node and veth links only between neighbours (lib.sh's netns_cluster).  The
# daemons follow the planned regions (plan/scatter.h: every hop one link,
# furthest-first on each), forced (opt, sdf) and chosen automatically, and
# direct (the root's node sends every node its message, routed hop by hop
# by the data path); every byte checked by ft_sg (roots first, last and in
# the middle, staged and ferry_alloc buffers, in place, non-blocking, v
# forms).  With the plan no piece is forwarded by the data path
# (coll_forwarded stays): the engine's own FORWARD steps carry the messages
# link by link.  Ranks that name different roots, or force different
# algorithms, fail instead of hanging.
# (Groups of a split, which do not cover the torus, go direct: coll_sg.sh.)
. "$(dirname "$0")/lib.sh"

if ! netns_ok; then
	echo "ok - $TEST: # SKIP needs root and network namespaces"
	exit 0
fi

# rooted NAME ALG: how many scatters and gathers node 0 ran with ALG
rooted() {
	"$BUILD/ferryctl" --runtime-dir "$TMP/${1}_n0" stats | awk -v k="rooted_$2" '$1 == "coll" && $2 ~ /^rooted_/ {
		for (i = 2; i < NF; i++) if ($i == k) print $(i + 1) }'
}

# torus NAME PPN DIMS...: the torus, PPN ranks per node, every strategy
torus() {
	local name=$1 ppn=$2 n=1 d k r s where="" fw0 fw1
	shift 2
	for d in "$@"; do n=$((n * d)); done
	netns_cluster "$name" torus "$@" || { t_fail "$name: namespaces"; return; }
	start_netns_cluster "$name" "$n" || { t_fail "$name: links up"; return; }
	for r in $(seq 0 $((n * ppn - 1))); do where="$where ${name}_n$((r % n))"; done
	for s in auto opt sdf direct; do
		fw0=$(peer_sum "$name" "$n" coll_forwarded)
		before=$(rooted "$name" "${s/auto/opt}")
		# shellcheck disable=SC2086
		expect "$name ($n nodes x $ppn), $s: scatter(v) and gather(v), every byte where it belongs" \
			run_sg "$name$s" $((n * ppn)) $where -- --blocks 0,1,100,4096 --strategy "$s" --job-only
		fw1=$(peer_sum "$name" "$n" coll_forwarded)
		want=${s/auto/opt}
		expect "... node 0 ran them as $want ($before -> $(rooted "$name" "$want") of them)" \
			test "$(rooted "$name" "$want")" -gt "$before"
		[ "$s" != direct ] && expect "... and the data path forwarded none of their pieces: the plan's hops are links ($fw0 -> $fw1)" \
			test "$fw1" = "$fw0"
		[ "$s" = direct ] && expect "... direct: the data path forwarded pieces to the far nodes ($fw0 -> $fw1)" \
			test "$fw1" -gt "$fw0"
	done
	if [ "$name" = q44 ]; then
		# ranks that name different roots fail, also where the pieces
		# pass through nodes on the planned paths (each names its root)
		for m in root root2 groot kind; do
			# shellcheck disable=SC2086
			expect "$name: $m disagreeing on rank 5 fails everywhere it should (ft_sg says where)" \
				run_sg "$name$m" $((n * ppn)) $where -- --mismatch "$m" --mismatch-rank 5
		done
		# ranks that force different algorithms (node 1's opt, the
		# others' direct: node 1 is next to the root's node 0, so the messages it
		# expects are what direct sends it, and without the
		# algorithm in every piece node 1 waited for ever): every rank
		# fails, none waits (60 s at most each)
		local pids="" rcs="" rk
		for rk in $(seq 0 $((n * ppn - 1))); do
			st=direct
			[ $((rk % n)) = 1 ] && st=opt
			FERRY_RUNTIME_DIR=$TMP/${name}_n$((rk % n)) bg "mix.$rk.log" timeout 60 "$BUILD/tests/ft_sg" \
				--job mix --rank "$rk" --size $((n * ppn)) --blocks 100 --strategy "$st" --job-only
			pids="$pids $LASTPID"
		done
		for p in $pids; do wait "$p"; rcs="$rcs $?"; done
		expect "$name: node 1 forces opt, the others direct: every rank fails, none hangs [exit codes$rcs]" \
			test "$(echo $rcs | tr ' ' '\n' | sort -u | tr '\n' ' ')" = "1 "
		expect "... saying the ranks chose different algorithms" \
			bash -c "grep -q 'chose different algorithms' '$TMP'/mix.*.log"
		[ "$(echo $rcs | tr ' ' '\n' | sort -u | tr '\n' ' ')" = "1 " ] || for f in "$TMP"/mix.*.log; do
			sed "s|^|#   $(basename "$f"): |" "$f" | tail -3
		done
	fi
	expect "$name: daemons exit cleanly" stop_cluster "$name" "$n"
}

sg() { spread_job ft_sg "$@"; }
run_sg() { sg "$@"; wait_job "$1"; }

torus q44 1 4 4
torus c333 1 3 3 3
torus q33 2 3 3
finish
