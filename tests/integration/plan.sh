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
expect "a collective not planned yet: refused" \
	bash -c "! '$BUILD/ferryctl' plan bcast --nodes 8 --bytes 1 2>/dev/null"
finish
