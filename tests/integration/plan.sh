#!/bin/bash
# ferryctl plan alltoall (offline, the planner code ferryd will run): the
# JSON schema of DESIGN.md, the paper's message counts on a square, a cube
# and a power of two, dummy messages in the many-to-many, the choice moving
# from indirect to direct as blocks grow, and clear refusals.
. "$(dirname "$0")/lib.sh"

plan() { "$BUILD/ferryctl" plan alltoall "$@"; }
# field JSON STRATEGY KEY: a strategy's value; top JSON KEY: a top-level one
# (jq reads the JSON, so every use also checks that it parses).
field() { jq -r --arg s "$2" --arg k "$3" '.strategies[] | select(.name == $s) | .[$k]' <<<"$1"; }
top() { jq -r --arg k "$2" '.[$k]' <<<"$1"; }
# holds FILTER JSON: the jq filter is true of the JSON.
holds() { jq -e "$1" <<<"$2" >/dev/null; }

j=$(plan --nodes 64 --ppn 2 --bytes 8 --format json)
expect "plan alltoall --format json parses, with the schema's fields" \
	holds '(["schema_version", "collective", "nodes", "ppn", "bytes", "chosen", "strategies", "degree",
		 "alpha_us", "beta_ns_per_byte"] - keys == []) and .collective == "alltoall" and .nodes == 64 and
		.ppn == 2 and .bytes == 8 and ([.strategies[].name] | sort) == ["direct", "grid3d", "hypercube", "mesh"] and
		all(.strategies[]; (["name", "phases", "sends_max", "sends_mean", "recvs_max", "bytes_sent_max",
				     "predicted_us"] - keys) == [])' "$j"
expect "... 64 nodes: direct sends 63 messages a node, mesh 2(8-1) = 14, grid 3(4-1) = 9, hypercube 6" \
	test "$(field "$j" direct sends_max) $(field "$j" mesh sends_max) $(field "$j" grid3d sends_max) $(field "$j" hypercube sends_max)" = "63 14 9 6"
expect "... in 1, 2, 3 and 6 phases" \
	test "$(field "$j" direct phases) $(field "$j" mesh phases) $(field "$j" grid3d phases) $(field "$j" hypercube phases)" = "1 2 3 6"
expect "... 8-byte blocks: an indirect strategy is chosen ($(top "$j" chosen))" test "$(top "$j" chosen)" != direct
big=$(plan --nodes 64 --bytes 1048576 --format json)
expect "... 1 MiB blocks: direct ($(top "$big" chosen))" test "$(top "$big" chosen)" = direct
expect "... bytes per node: direct 63 blocks of ppn^2 x 8 bytes" test "$(field "$j" direct bytes_sent_max)" = $((63 * 4 * 8))

m=$(plan --nodes 16 --bytes 100 --degree 1 --format json)
expect "many-to-many, each node to the next: direct sends its 15 messages, the mesh its 2(4-1) = 6, dummies included" \
	test "$(field "$m" direct sends_max) $(field "$m" mesh sends_max)" = "15 6"
h=$(plan --nodes 17 --bytes 100 --format json)
expect "17 nodes: the hypercube of 16 plus one takes 4 + 2 phases" test "$(field "$h" hypercube phases)" = 6
expect "--dims 4x4 --torus plans 16 nodes" test "$(top "$(plan --dims 4x4 --torus --bytes 8 --format json)" nodes)" = 16
expect "the text form marks the chosen strategy" bash -c "'$BUILD/ferryctl' plan alltoall --nodes 8 --bytes 16 | grep -q '<- chosen'"
expect "one node: nothing to send" test "$(field "$(plan --nodes 1 --bytes 8 --format json)" mesh sends_max)" = 0

expect "without --bytes: refused" bash -c "! '$BUILD/ferryctl' plan alltoall --nodes 8 2>/dev/null"
expect "... saying what it needs" \
	bash -c "'$BUILD/ferryctl' plan alltoall --nodes 8 2>&1 | grep -q 'needs --nodes (or --dims) and --bytes'"
expect "a number that is not one: refused naming the option" \
	bash -c "'$BUILD/ferryctl' plan alltoall --nodes 8 --bytes 1x 2>&1 | grep -q -- '--bytes 1x: not a number'"
expect "--degree beyond the nodes: refused" \
	bash -c "'$BUILD/ferryctl' plan alltoall --nodes 8 --bytes 1 --degree 8 2>&1 | grep -q 'at most nodes - 1'"
expect "an empty or negative number: refused" \
	bash -c "! '$BUILD/ferryctl' plan alltoall --nodes 8 --bytes '' 2>/dev/null && ! '$BUILD/ferryctl' plan alltoall --nodes 8 --bytes -1 2>/dev/null"
expect "an infinite alpha, or one whose prediction overflows: refused, never inf in the JSON" \
	bash -c "! '$BUILD/ferryctl' plan alltoall --nodes 8 --bytes 1 --alpha-us inf --format json 2>/dev/null && ! '$BUILD/ferryctl' plan alltoall --nodes 8 --bytes 1 --alpha-us 1e308 --format json 2>/dev/null"
expect "--nodes and --dims together: refused" \
	bash -c "! '$BUILD/ferryctl' plan alltoall --nodes 4 --dims 2x2 --bytes 1 2>/dev/null"
expect "--dims beyond what the planner simulates: refused, not wrapped around" \
	bash -c "'$BUILD/ferryctl' plan alltoall --dims 65536x65536x65536x65536 --bytes 1 2>&1 | grep -q '1 to 2048'"
expect "a collective with no planner: refused" \
	bash -c "! '$BUILD/ferryctl' plan barrier --nodes 8 --bytes 1 2>/dev/null"

# bcast .. scan (plan/orth.c, plan/rs.c): the same planners and cost model
# as the daemons; message counts from the schedules themselves
po() { "$BUILD/ferryctl" plan "$@" --format json; }
b=$(po bcast --nodes 16 --bytes 64)
expect "bcast over 16 nodes: the binomial tree's root sends log2 16 = 4 (single: $(field "$b" single sends_max))" \
	test "$(field "$b" single sends_max)" = 4
expect "... the orthogonal one's root r-1 + c-1 = 6 on a 4x4 grid" test "$(field "$b" orth sends_max)" = 6
expect "... and the choice is the least predicted time" \
	holds '.chosen as $c | (.strategies | min_by(.predicted_us) | .predicted_us) == (.strategies[] | select(.name == $c) | .predicted_us)' "$b"
a=$(po allreduce --nodes 16 --ppn 2 --bytes 4096)
expect "allreduce over 16 nodes: hier (2x2x2x2, recursive doubling) sends 4 per node" \
	test "$(field "$a" hier sends_max) $(field "$a" hier phases)" = "4 4"
expect "... and is chosen at 4 KiB ($(top "$a" chosen))" test "$(top "$a" chosen)" = hier
g=$(po allgather --nodes 12 --bytes 100)
expect "allgather over 12 nodes: the direct exchange sends 11, the 3x4 grid (4-1)+(3-1) = 5" \
	test "$(field "$g" single sends_max) $(field "$g" orth sends_max)" = "11 5"
r=$(po reduce_scatter --nodes 8 --bytes 8192)
expect "reduce_scatter over 8 nodes: the ring sends 7 per node, its words besides (long: $(field "$r" long sends_max))" \
	test "$(field "$r" long sends_max)" = 8
expect "... three candidates: short, long, hybrid" test "$(jq -r '[.strategies[].name] | join(",")' <<<"$r")" = "short,long,hybrid"
e=$(po scan --nodes 5 --ppn 3 --bytes 64)
expect "scan over 5 nodes: a chain, each node sends at most one message per chunk" \
	holds '.chosen == "chain" and .strategies[0].sends_max >= 1' "$e"
expect "plan bcast without --bytes: refused" bash -c "! '$BUILD/ferryctl' plan bcast --nodes 8 2>/dev/null"
# layouts (seed 004 §3.7): orth over the 2-D layout the model predicts
# fastest, hier over the prime factors; --layout forces them
l=$(po allgather --nodes 12 --bytes 64)
expect "allgather over 12 nodes: orth's layout is a 2-D one of 12 ($(field "$l" orth layout)), hier's 3x2x2" \
	holds '(.strategies[] | select(.name == "orth") | .layout | split("x") | length == 2 and
		(map(tonumber) | .[0] * .[1] >= 12)) and (.strategies[] | select(.name == "hier") | .layout == "3x2x2")' "$l"
l=$(po allgather --nodes 12 --bytes 64 --layout 2x6)
expect "--layout 2x6: orth and hier run over it, 1 + 5 messages per node" \
	holds '[.strategies[] | select(.name != "single") | .layout == "2x6" and .sends_max == 6] | all' "$l"
l=$(po bcast --nodes 8 --bytes 64 --layout 2x2x2)
expect "--layout 2x2x2: hier over it, three phases" \
	holds '.strategies[] | select(.name == "hier") | .layout == "2x2x2" and .phases == 3' "$l"
expect "--layout smaller than the nodes: refused" \
	bash -c "! '$BUILD/ferryctl' plan bcast --nodes 8 --bytes 64 --layout 2x3 2>/dev/null"
expect "--layout for reduce_scatter: refused" \
	bash -c "! '$BUILD/ferryctl' plan reduce_scatter --nodes 8 --bytes 64 --layout 2x4 2>/dev/null"
finish
