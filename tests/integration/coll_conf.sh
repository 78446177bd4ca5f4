#!/bin/bash
# collectives.alltoall, .scatter and .gather in ferry.conf: the home node's
# setting forces the algorithm of the whole job, on every node of it, even
# where the other nodes' files say otherwise (it travels in GO); a rank's
# ferry_coll_strategy wins over it; a job whose home says "auto" is chosen
# for by the cost model.  Four real daemons with a configuration file each,
# real ranks (ft_coll for the all-to-alls, ft_sg for scatters and gathers,
# which check every byte).
. "$(dirname "$0")/lib.sh"

cluster_conf cf 4 || exit 1
# node 2 forces hypercube, tree and orth; nodes 0 and 1 other ones; node 3
# nothing
for k in 0 1 2 3; do cp "$TMP/cf.conf" "$TMP/cf$k.conf"; done
echo 'collectives: { alltoall = "hypercube"; scatter = "tree"; gather = "orth"; };' >>"$TMP/cf2.conf"
echo 'collectives: { alltoall = "direct"; scatter = "direct"; gather = "direct"; };' >>"$TMP/cf0.conf"
echo 'collectives: { alltoall = "grid3d"; scatter = "orth"; gather = "tree"; };' >>"$TMP/cf1.conf"
for k in 0 1 2 3; do
	daemon_owns "$TMP/cf$k.conf"
	start_daemon "cf_n$k" --config "$TMP/cf$k.conf" --node "$k" || exit 1
done
cluster_up cf 4 || exit 1

# job names whose home is node H (the first of name1, name2, ...)
homed() {
	local h=$1 base=$2 i
	for i in $(seq 200); do
		[ "$(job_home "$(id -u)" "$base$i" 4)" = "$h" ] && { echo "$base$i"; return; }
	done
}
# a2a_counts DIR JOB: the job's all-to-alls per algorithm on that daemon,
# "direct D mesh M grid3d G hypercube H"
a2a_counts() {
	"$BUILD/ferryctl" --runtime-dir "$TMP/$1" stats |
		awk -v j="$2" '$1 == "coll" && $2 == "job" && $3 == j {
			for (i = 4; i < NF; i++)
				if ($i ~ /^(direct|mesh|grid3d|hypercube)$/ && $(i + 1) ~ /^[0-9]+$/) s = s " " $i " " $(i + 1)
			print substr(s, 2) }'
}
# rooted DIR ALG [gather]: the scatters and gathers (or the gathers) that
# daemon ran with ALG, all jobs
rooted() {
	"$BUILD/ferryctl" --runtime-dir "$TMP/$1" stats | awk -v k="${3:-rooted}_$2" '$1 == "coll" && $2 ~ /^rooted_/ {
		for (i = 2; i < NF; i++) if ($i == k) print $(i + 1) }'
}
where="cf_n0 cf_n1 cf_n2 cf_n3 cf_n0 cf_n1"

# --- all-to-all ------------------------------------------------------------------
J2=$(homed 2 a2a) J0=$(homed 0 a2a) J3=$(homed 3 a2a) J2r=$(homed 2 a2ar)
# shellcheck disable=SC2086
coll_job "$J2" 6 2 $where -- --alltoall 64 --linger 3000
wait_for "grep -q ok: '$TMP/$J2.0.log'"
for k in 0 1 3; do
	expect "home node 2 forces the hypercube: node $k ran the job's 2 all-to-alls by it" \
		test "$(a2a_counts "cf_n$k" "$J2")" = "direct 0 mesh 0 grid3d 0 hypercube 2"
done
expect "... and the job completes" wait_job "$J2"
# shellcheck disable=SC2086
coll_job "$J0" 6 2 $where -- --alltoall 64 --linger 3000
wait_for "grep -q ok: '$TMP/$J0.0.log'"
expect "home node 0 forces direct, node 2 too runs it" \
	test "$(a2a_counts cf_n2 "$J0")" = "direct 2 mesh 0 grid3d 0 hypercube 0"
expect "... and the job completes" wait_job "$J0"
# a rank's choice wins over the home's
# shellcheck disable=SC2086
coll_job "$J2r" 6 2 $where -- --alltoall 64 --strategy mesh --linger 3000
wait_for "grep -q ok: '$TMP/$J2r.0.log'"
expect "ferry_coll_strategy wins over collectives.alltoall" \
	test "$(a2a_counts cf_n1 "$J2r")" = "direct 0 mesh 2 grid3d 0 hypercube 0"
expect "... and the job completes" wait_job "$J2r"
# node 3's file says nothing: the cost model chooses, the same on every node
# shellcheck disable=SC2086
coll_job "$J3" 6 2 $where -- --alltoall 64 --linger 3000
wait_for "grep -q ok: '$TMP/$J3.0.log'"
same3() {
	local k c0
	c0=$(a2a_counts cf_n0 "$J3")
	echo "# node 0: $c0"
	for k in 1 2 3; do [ "$(a2a_counts "cf_n$k" "$J3")" = "$c0" ] || { echo "# node $k: $(a2a_counts "cf_n$k" "$J3")"; return 1; }; done
	# two all-to-alls, by one algorithm
	[ "$(echo "$c0" | awk '{ print $2 + $4 + $6 + $8 }')" = 2 ] && echo "$c0" | grep -qw 2
}
expect "a home without collectives.alltoall lets the cost model choose, alike on every node" same3
expect "... and the job completes" wait_job "$J3"

# --- scatter and gather ---------------------------------------------------------
S2=$(homed 2 sg) S2r=$(homed 2 sgr)
for a in direct orth tree; do eval "b_$a=\$(rooted cf_n3 $a)"; done
# shellcheck disable=SC2086
spread_job ft_sg "$S2" 6 $where -- --job-only
expect "home node 2 forces tree scatters and orth gathers: every byte right" wait_job "$S2"
expect "... node 3 ran no scatter or gather direct ($b_direct -> $(rooted cf_n3 direct))" \
	test "$(rooted cf_n3 direct)" = "$b_direct"
expect "... it ran tree ones ($b_tree -> $(rooted cf_n3 tree)) and orth ones ($b_orth -> $(rooted cf_n3 orth))" \
	test "$(rooted cf_n3 tree)" -gt "$b_tree" -a "$(rooted cf_n3 orth)" -gt "$b_orth"
expect "... the scatters by the tree, the gathers orth ($(rooted cf_n3 orth gather) of $(rooted cf_n3 orth))" \
	test "$(rooted cf_n3 tree gather)" = 0 -a "$(rooted cf_n3 orth gather)" = "$(rooted cf_n3 orth)"
b_tree=$(rooted cf_n3 tree) b_direct=$(rooted cf_n3 direct) b_orth=$(rooted cf_n3 orth)
# shellcheck disable=SC2086
spread_job ft_sg "$S2r" 6 $where -- --job-only --strategy direct
expect "FERRY_COLL_SCATTER/GATHER's choice (ft_sg --strategy direct) wins over the home's" wait_job "$S2r"
expect "... node 3 ran them direct ($b_direct -> $(rooted cf_n3 direct)), no tree or orth" \
	test "$(rooted cf_n3 direct)" -gt "$b_direct" -a "$(rooted cf_n3 tree)" = "$b_tree" -a \
	"$(rooted cf_n3 orth)" = "$b_orth"

# --- a file that forces what the topology cannot run ----------------------------
echo 'collectives: { scatter = "opt"; };' >"$TMP/opt.conf"
daemon_owns "$TMP/opt.conf"
refuses_opt() {
	local out
	out=$("$BUILD/ferryd" --check-config "$TMP/opt.conf" 2>&1) && return 1
	echo "# $out"
	grep -q "opt.conf:1: 'collectives.scatter' is \"opt\", which needs 'topology.physical' = \"torus\"" <<<"$out"
}
expect "ferryd refuses collectives.scatter = \"opt\" on a switched network" refuses_opt

stop_cluster cf 4 >/dev/null
finish
