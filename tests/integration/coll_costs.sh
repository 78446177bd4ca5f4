#!/bin/bash
# The runtime functions of the collectives (daemon/plan/cost.h,
# daemon/cluster/costs.h; seed 004 §4): the daemons measure every operation
# that completes and fit a function per family and algorithm, in a table
# per user; ferryctl costs shows a user's own; they survive a restart
# (daemon.state_dir/costs.UID); a job's nodes choose with its home's
# functions of its user (root's where the user has none), sent in GO, even
# where their own differ, and what those say is what runs; one user's
# operations never reach another's table; ferryctl plan --costs predicts
# with them; a file that is not one is set aside, not fatal.
. "$(dirname "$0")/lib.sh"

# red JOB SIZE NODE_OF... -- ft_red options
red() { spread_job ft_red "$@"; }
costs() { "$BUILD/ferryctl" --runtime-dir "$TMP/$1" costs; }
# last_alg NODE JOB: the algorithm JOB's last operation ran on NODE.
last_alg() {
	"$BUILD/ferryctl" --runtime-dir "$TMP/$1" stats 2>/dev/null | sed -n "s/^coll job $2 .* alg \([a-z0-9]*\) .*$/\1/p"
}
fitted() {
	"$BUILD/ferryctl" --runtime-dir "$TMP/$1" stats 2>/dev/null | sed -n "s/^coll job $2 .* fitted \([0-9]*\) .*$/\1/p"
}
# a job name of uid $(id -u)'s whose home is node $1 of 4
name_homed() {
	local k
	for k in $(seq 100); do
		[ "$(job_home "$(id -u)" "$2$k" 4)" = "$1" ] && { echo "$2$k"; return; }
	done
}

ME=$(id -u)
start_cluster cc 4 || exit 1
all="cc_n0 cc_n1 cc_n2 cc_n3"

# --- measured on-line -------------------------------------------------------------
red cal 4 $all -- --strategy orth --ops allreduce --counts 7,1000
expect "an allreduce job (orth forced, 7 and 1000 elements) succeeds" wait_job cal
for n in $all; do
	out=$(costs "$n")
	# every node measured its part: allreduce orth over 4 nodes x 1 rank,
	# 28 and 4000 bytes (int32 sums among the pairs), each 3 runs or more
	pts=$(echo "$out" | awk '$1 == "point" && $2 == "allreduce" && $3 == "orth" && $4 == 4 && $5 == 1 &&
		($6 == 28 || $6 == 4000) && NF >= 11 + 3' | wc -l)
	expect "$n: ferryctl costs has the allreduce's orth points at 28 and 4000 bytes ($pts)" test "$pts" -ge 2
	expect "$n: ... and a function fitted to them" grep -q "^# fn allreduce orth tau_us [0-9.]* tc_ns_per_byte" \
		<<<"$out"
done
expect "the header of the file format" grep -qx "ferry-costs 1" <<<"$(costs cc_n0)"
# the samples are the ranks' own times, reported with their next posts
# (coll.c "Runtime functions"): most of them plausible
coll_stat() {
	"$BUILD/ferryctl" --runtime-dir "$TMP/$1" stats |
		awk -v k="$2" '$1 == "coll" && $2 != "job" { for (i = 2; i < NF; i++) if ($i == k) print $(i + 1) }'
}
samples=$(coll_stat cc_n0 cost_samples) own=$(coll_stat cc_n0 cost_samples_own)
expect "the ranks reported their times: $samples samples on node 0, $own of them the daemon's own" \
	test "${samples:-0}" -gt 0 -a "${own:-0}" -lt "${samples:-0}"

# --- a table per user -------------------------------------------------------------
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	as_two_users 64141 64142
	before=$(costs cc_n0 | grep -c '^point')
	for r in 0 1 2 3; do
		asbg "ua.$r.log" "$USER_A" "cc_n$r" ft_red --job ua --rank "$r" --size 4 --strategy hier --ops allreduce \
			--counts 7,1000
	done
	expect "user A's allreduce job (hier forced) succeeds" wait_for 'grep -q "ok:" "$TMP/ua.0.log" &&
		grep -q "ok:" "$TMP/ua.3.log"'
	wait_for '"$BUILD/ferryctl" --runtime-dir "$TMP/cc_n0" costs --uid '"$USER_A"' | grep -q "^point allreduce hier"'
	expect "... its points are in user A's table (ferryctl costs --uid, as root)" \
		bash -c "'$BUILD/ferryctl' --runtime-dir '$TMP/cc_n0' costs --uid $USER_A | grep -q '^point allreduce hier 4 1 '"
	expect "... and not in root's: $(costs cc_n0 | grep -c '^point') points, as before ($before)" \
		test "$(costs cc_n0 | grep -c '^point allreduce hier')" = 0 -a "$(costs cc_n0 | grep -c '^point')" = "$before"
	b=$(setpriv --reuid="$USER_B" --regid="$USER_B" --clear-groups "$BUILD/ferryctl" --runtime-dir "$TMP/cc_n0" costs 2>&1)
	expect "user B's ferryctl costs: no points of anyone's, root's functions as root's" \
		bash -c '! grep -q "^point" <<<"$1" && grep -q "^# fn allreduce orth .* root'"'"'s$" <<<"$1"' _ "$b"
	refused=$(setpriv --reuid="$USER_B" --regid="$USER_B" --clear-groups "$BUILD/ferryctl" --runtime-dir "$TMP/cc_n0" \
		costs --uid "$USER_A" 2>&1)
	expect "user B asking for user A's table is refused ($refused)" \
		bash -c '! grep -q "^point" <<<"$1" && grep -qi "not permitted" <<<"$1"' _ "$refused"
else
	USER_A=""
	echo "ok - $TEST: # SKIP a table per user: needs root and setpriv"
fi

# --- kept across a restart --------------------------------------------------------
before=$(costs cc_n1 | grep '^point' | sort)
expect "cc_n1 stops cleanly (and writes its file)" stop_daemon cc_n1
expect "... its file is there" test -s "$TMP/cc_n1/costs.$ME"
start_daemon cc_n1 --config "$TMP/cc.conf" --node 1 || exit 1
cluster_up cc 4 || exit 1
after=$(costs cc_n1 | grep '^point' | sort)
expect "... and after a restart its points are the same" test "$before" = "$after"
expect "... and so is its function" grep -q "^# fn allreduce orth" <<<"$(costs cc_n1)"

# --- a job chooses with its home's functions ---------------------------------------
# The home's file says: for bcast, reduce, allreduce and allgather, hier
# costs 1 us a start-up, single and orth 1000 (one point each: t_c is the
# links' beta).  The links alone never choose hier here (4 nodes: orth
# ties with it and the lower wins, ferryctl plan says so), so hier running
# on every node means every node took the home's functions.  The other
# nodes' own files are empty.
home=2
job=$(name_homed $home fit)
expect "ferryctl plan (the links alone) does not choose hier for a 4-node allreduce" \
	bash -c "! '$BUILD/ferryctl' plan allreduce --nodes 4 --bytes 28 | grep -q '^hier .*chosen'"
for n in 0 1 2 3; do stop_daemon "cc_n$n" >/dev/null || exit 1; done
if [ -n "$USER_A" ]; then
	expect "the daemons wrote user A's table to a file of its own, root's has none of its points" \
		bash -c "grep -q '^point allreduce hier 4 1 ' '$TMP/cc_n0/costs.$USER_A' &&
			! grep -q '^point allreduce hier' '$TMP/cc_n0/costs.0'"
fi
rm -f "$TMP"/cc_n*/costs.*
{
	echo "ferry-costs 1"
	for fam in bcast reduce allreduce allgather; do
		echo "point $fam single 4 1 9999 1 0 0 0.1 0.4 1000 1000 1000"
		echo "point $fam orth 4 1 9999 1 0 0 0.1 0.4 1000 1000 1000"
		echo "point $fam hier 4 1 9999 1 0 0 0.1 0.4 1 1 1"
	done
} >"$TMP/cc_n$home/costs.$ME"
chmod a+r "$TMP/cc_n$home/costs.$ME"
for n in 0 1 2 3; do start_daemon "cc_n$n" --config "$TMP/cc.conf" --node "$n" || exit 1; done
cluster_up cc 4 || exit 1
expect "ferryctl plan --costs (the home's file) chooses hier" \
	bash -c "'$BUILD/ferryctl' plan allreduce --nodes 4 --bytes 28 --costs '$TMP/cc_n$home/costs.$ME' |
		grep -q '^hier .*(fitted)  <- chosen'"
red "$job" 4 $all -- --ops allreduce --counts 7 --linger 3000
for n in $all; do
	expect "$n: job $job (home node $home) ran hier, as its home's functions say" \
		wait_for '[ "$(last_alg '"$n"' '"$job"')" = hier ]'
	expect "$n: ... with the home's 12 functions" test "$(fitted "$n" "$job")" = 12
done
expect "... and every rank succeeded" wait_job "$job"
# a job homed elsewhere gets that home's functions: node 0 learnt hier's
# from the job above (its own times of it, not the file's 1 us), and no
# others, so the links' prediction of single and orth (a few us) wins
other=$(name_homed 0 links)
nfn=$(costs cc_n0 | grep -c '^# fn ')
expect "node 0 learnt functions from that job's operations ($nfn)" test "$nfn" -gt 0
red "$other" 4 $all -- --ops allreduce --counts 7 --linger 2000
expect "a job homed on node 0 does not run hier" \
	wait_for '[ -n "$(last_alg cc_n1 '"$other"')" ] && [ "$(last_alg cc_n1 '"$other"')" != hier ]'
expect "... with node 0's functions agreed ($(fitted cc_n1 "$other"))" test "$(fitted cc_n1 "$other")" = "$nfn"
expect "... and succeeds" wait_job "$other"

# --- a file that is not one ------------------------------------------------------
stop_daemon cc_n3 >/dev/null || exit 1
printf 'not a costs file\n' >"$TMP/cc_n3/costs.0"
start_daemon cc_n3 --config "$TMP/cc.conf" --node 3 || exit 1
cluster_up cc 4 || exit 1
expect "a bad file: the daemon starts without it, and sets it aside" test -f "$TMP/cc_n3/costs.0.bad"
expect "... saying so" grep -q "moved to .*costs.0.bad" "$TMP/cc_n3.log"
expect "... its table is empty" test "$(costs cc_n3 | grep -c '^point')" = 0

for n in 0 1 2 3; do expect "cc_n$n exits cleanly" stop_daemon "cc_n$n"; done
finish
