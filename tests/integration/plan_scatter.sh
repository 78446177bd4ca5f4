#!/bin/bash
# ferryctl plan scatter|gather (offline, no daemon): the schedule it prints
# (--format schedule, one line per message hop "node step from to") checked
# here with awk, independently of the planner: every node but the root gets
# its message, every hop joins two neighbours of the torus and lies on a
# path from the root (to it, for gather) whose steps increase, no directed
# link carries two messages in a step, and OPT takes the printed bound
# (SDF at least as many steps).  Then the JSON schema and refusals.
. "$(dirname "$0")/lib.sh"

plan() { "$BUILD/ferryctl" plan "$@"; }
# holds FILTER JSON: the jq filter is true of the JSON (which therefore parses).
holds() { jq -e "$1" <<<"$2" >/dev/null; }

# check DIMS ROOT GATHER ALGO: reads a schedule on stdin; prints "ok" or what
# is wrong.
check() {
	awk -v dims="$1" -v root="$2" -v gather="$3" -v algo="$4" '
	function coords(id, c,   d) { for (d = nd; d >= 1; d--) { c[d] = id % side[d]; id = int(id / side[d]) } }
	function peers(a, b,   ca, cb, d, diff, x) {
		coords(a, ca); coords(b, cb); diff = 0
		for (d = 1; d <= nd; d++) {
			if (ca[d] == cb[d]) continue
			x = (ca[d] - cb[d] + side[d]) % side[d]
			if (x != 1 && x != side[d] - 1) return 0
			diff++
		}
		return diff == 1
	}
	function fail(what) { if (!bad) print what; bad = 1 }
	BEGIN { nd = split(dims, side, "x"); n = 1; for (d = 1; d <= nd; d++) n *= side[d] }
	/^# / && $2 != "dest" && $2 != "source" { for (i = 1; i < NF; i++) if ($i == "bound") bound = $(i + 1); else if ($i == "steps") steps = $(i + 1); next }
	/^#/ { next }
	{
		v = $1; s = $2; f = $3; t = $4
		if (!peers(f, t)) fail("hop " f " -> " t " is no link")
		if ((s SUBSEP f SUBSEP t) in used) fail("link " f " -> " t " twice at step " s)
		used[s, f, t] = 1
		if (!(v in last)) {
			if (f != (gather ? v : root)) fail("message " v " starts at " f)
		} else if (f != at[v] || s <= last[v]) {
			fail("message " v ": hop " f " -> " t " at step " s " does not follow on")
		}
		at[v] = t; last[v] = s
		if (s > maxstep) maxstep = s
	}
	END {
		if (root in at) fail("the root has a message")
		for (v = 0; v < n; v++)
			if (v != root && at[v] != (gather ? root : v)) fail("message " v " ends at " at[v])
		if (maxstep != steps) fail("last hop at step " maxstep ", steps " steps)
		if (algo == "opt" ? steps != bound : steps < bound) fail(algo " " steps " steps, bound " bound)
		if (!bad) print "ok"
	}'
}

for args in "8x8 0 opt" "7x5 11 opt" "4x8x8 0 opt" "3x4x5 17 opt" "2x6x3 5 opt" "8x8 0 sdf" "4x8x8 200 sdf"; do
	set -- $args
	for op in scatter gather; do
		g=0
		[ $op = gather ] && g=1
		out=$(plan $op --dims "$1" --torus --root "$2" --algo "$3" --format schedule | check "$1" "$2" $g "$3")
		expect "$op $1 from root $2 ($3): the schedule checks out ($out)" test "$out" = ok
	done
done
b=$(plan scatter --dims 4x8x8 --torus --format schedule | awk '/^# scatter/ { for (i = 1; i < NF; i++) if ($i == "steps") s = $(i + 1); else if ($i == "bound") b = $(i + 1); print s, b }')
expect "4x8x8 (the paper's cluster): opt takes the bound, 43 steps ($b)" test "$b" = "43 43"
b=$(plan scatter --dims 8x8 --torus --format schedule | awk '/^# scatter/ { for (i = 1; i < NF; i++) if ($i == "steps") print $(i + 1) }')
expect "8x8: 16 steps ($b)" test "$b" = 16

j=$(plan scatter --dims 7x5 --torus --root 3 --format json)
expect "--format json: DESIGN.md's schema plus bound, steps and regions" \
	holds '(["schema_version", "collective", "nodes", "ppn", "bytes", "chosen", "strategies", "bound", "steps",
		 "regions"] - keys == []) and .collective == "scatter" and .nodes == 35 and .bound == 9 and .steps == 9 and
		.chosen == "opt" and ([.regions[].size] | add) == 34 and (.regions | length) == 4 and
		([.strategies[].name] | sort) == ["opt", "sdf"] and
		all(.strategies[]; (["name", "phases", "sends_max", "sends_mean", "recvs_max", "bytes_sent_max",
				     "predicted_us"] - keys) == [])' "$j"
expect "plan gather --format json says gather" \
	holds '.collective == "gather" and .steps == .bound' "$(plan gather --dims 4x4 --format json)"
t=$(plan scatter --dims 7x5 --torus)
expect "the text form draws the partition: 7 rows of 5, the root marked" \
	test "$(grep -cE '^   ([*A-D] ){4}[*A-D]$' <<<"$t")" = 7 -a "$(grep -o '\*' <<<"$t" | wc -l)" -ge 1

# --simulate (daemon/plan/sg_sim.c): the alpha-beta simulation at 64 KiB
# blocks, alpha 50 us, beta 0.01 us/B.  opt <= sdf <= naive holds on the
# paper's tori (checked by hand first: 16, 20, 32 hop times on 8x8; 43, 51,
# 128 on 4x8x8), a plan is never slower than step by step, opt takes the bound.
sim() { plan "$1" --dims "$2" --torus --simulate --block 65536 --alpha-us 50 --beta-ns-per-byte 10 --format json; }
for args in "scatter 8x8" "gather 8x8" "scatter 4x8x8" "gather 4x8x8"; do
	set -- $args
	j=$(sim "$1" "$2")
	expect "$1 $2 --simulate --format json: opt <= sdf <= naive at 64 KiB, plans within steps x (alpha + m beta)" \
		holds '.collective == "'"$1"'" and .block == 65536 and (.hop_us - 705.36 | fabs) < 1e-6 and
			([.algorithms[].name] == ["opt", "sdf", "naive"]) and
			(.algorithms | map({(.name): .}) | add) as $a |
			$a.opt.makespan_us <= $a.sdf.makespan_us and $a.sdf.makespan_us <= $a.naive.makespan_us and
			$a.opt.rounds == .bound and
			all(.algorithms[]; (.makespan_us - .rounds * $a.opt.makespan_us / $a.opt.rounds | fabs) < 1e-3 and
				(.name == "naive" or .makespan_us <= .step_sync_us + 1e-6))' "$j"
done
j=$(plan scatter --dims 8x8 --torus --simulate --format json)
expect "--simulate --format json: its fields (defaults: the block --bytes x --ppn, 8 B)" \
	holds '(["schema_version", "collective", "dims", "nodes", "root", "block", "alpha_us", "beta_ns_per_byte",
		 "hop_us", "bound", "algorithms"] - keys == []) and .block == 8 and .nodes == 64 and
		all(.algorithms[]; (["name", "makespan_us", "rounds", "steps", "step_sync_us", "hops", "link_max",
				     "queue_max", "relay_queue_max"] - keys) == [])' "$j"
t=$(plan scatter --dims 8x8 --torus --simulate --algo naive)
expect "--simulate --algo naive: naive only, 32 hop times on 8x8" \
	test "$(grep -c '^  [a-z]* .* hop times' <<<"$t")" = 1 -a "$(grep -c '^  naive .* 32 hop times' <<<"$t")" = 1
expect "--algo naive without --simulate: refused" bash -c "! '$BUILD/ferryctl' plan scatter --dims 4x4 --algo naive 2>/dev/null"
expect "--simulate --format schedule: refused" \
	bash -c "! '$BUILD/ferryctl' plan scatter --dims 4x4 --simulate --format schedule 2>/dev/null"

expect "--mesh: refused (a physical torus only)" bash -c "! '$BUILD/ferryctl' plan scatter --dims 4x4 --mesh 2>/dev/null"
expect "a root outside the torus: refused" bash -c "! '$BUILD/ferryctl' plan scatter --dims 4x4 --root 16 2>/dev/null"
expect "an unknown algorithm: refused" bash -c "! '$BUILD/ferryctl' plan scatter --dims 4x4 --algo best 2>/dev/null"
expect "without --dims: refused" bash -c "! '$BUILD/ferryctl' plan gather --torus 2>/dev/null"
finish
