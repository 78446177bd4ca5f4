#!/bin/bash
# ferryd --check-config: every shipped configuration validates and resolves to
# the right topology; each kind of mistake gets its own "file:line: problem".
. "$(dirname "$0")/lib.sh"
F=$BUILD/ferryd
CONF=$(cd "$(dirname "$0")/../../conf" && pwd)

for f in "$CONF"/*.conf; do
	expect "$(basename "$f") is valid" bash -c "'$F' --check-config '$f' >/dev/null"
done
has() { "$F" --check-config "$1" | grep -qE "$2"; }
expect "8x8 torus: node 9 is (1,1) with peers 1 8 10 17" has "$CONF/torus-8x8.conf" '^node 9 t09:7470 \(1,1\) peers 1 8 10 17$'
expect "4x8x8 torus: node 73 is (1,1,1) with 6 peers" has "$CONF/torus-4x8x8.conf" '^node 73 n073:7470 \(1,1,1\) peers 9 65 72 74 81 137$'
expect "switched 64: 8x8 grid, 14 peers each (not 63)" has "$CONF/switched-64.conf" 'links per node: at most 14;'
expect "localhost demo: 2x2x2, node 7 is (1,1,1), peers 3 5 6" has "$CONF/localhost-8.conf" '^node 7 127.0.0.1:17478 \(1,1,1\) peers 3 5 6$'

# bad NAME LINE MESSAGE-REGEX: the file $TMP/NAME.conf (written just before)
# must be rejected with exit status 1 and "path:LINE: message".
bad() {
	local f=$TMP/$1.conf out rc
	out=$("$F" --check-config "$f" 2>&1); rc=$?
	if [ $rc -ne 0 ] && printf '%s\n' "$out" | grep -qE "^$f:$2: $3"; then t_ok "rejects $1"
	else t_fail "rejects $1 (exit $rc): $out"; fi
}
w() { cat >"$TMP/$1.conf"; }

w syntax <<<$'cluster: {\n  name = "x";\n  port = ;\n};'
bad syntax 3 "syntax error"
w unknown-key <<<$'aggregation: {\n  bufer_bytes = 100;\n};'
bad unknown-key 2 "unknown option 'aggregation.bufer_bytes'"
w unknown-group <<<$'aggregation: { };\nrouting: { };'
bad unknown-group 2 "unknown option 'routing'"
w wrong-type <<<$'aggregation: {\n  flush_us = "soon";\n};'
bad wrong-type 2 "'aggregation.flush_us' must be an integer, not a string"
w out-of-range <<<$'limits: {\n  max_clients = 0;\n};'
bad out-of-range 2 "'limits.max_clients' is 0, must be between 1 and 65536"
w seccomp-mode <<<$'daemon: {\n  seccomp = "no";\n};'
bad seccomp-mode 2 "'daemon.seccomp' is \"no\", must be \"kill\", \"log\" or \"off\""
w not-power-of-two <<<$'limits: { ring_bytes = 300000; };'
bad not-power-of-two 1 "'limits.ring_bytes' is 300000, must be a power of two"
w dims-mismatch <<<$'cluster: { host_pattern = "n%d"; count = 15; };\ntopology: {\n  physical = "torus";\n  dims = [ 4, 4 ];\n};'
bad dims-mismatch 4 "'topology.dims' 4x4 has 16 positions but the cluster has 15 nodes"
w no-dims <<<$'cluster: { host_pattern = "n%d"; count = 4; };\ntopology: { physical = "mesh"; };'
bad no-dims 2 "a mesh needs 'topology.dims'"
w bad-physical <<<$'topology: { physical = "ring"; };'
bad bad-physical 1 "'topology.physical' is \"ring\", must be \"switched\", \"torus\" or \"mesh\""
w duplicate-node <<<$'cluster: { nodes = (\n  { host = "a"; port = 1; },\n  { host = "b"; port = 1; },\n  { host = "a"; port = 1; }\n); };'
bad duplicate-node 4 "node 2 \(a port 1\) duplicates node 0"
w node-no-host <<<$'cluster: { nodes = (\n  { port = 1; }\n); };'
bad node-no-host 2 "node 0 in 'cluster.nodes' has no host"
w bad-pattern <<<$'cluster: { host_pattern = "node%s"; count = 4; };'
bad bad-pattern 1 "'cluster.host_pattern' must contain exactly one %d"
w virtual-too-small <<<$'cluster: { host_pattern = "n%d"; count = 9; };\ntopology: { virtual = [ 2, 4 ]; };'
bad virtual-too-small 2 "'topology.virtual' 2x4 has 8 positions, fewer than the 9 nodes"
w virtual-torus <<<$'cluster: { host_pattern = "n%d"; count = 4; };\ntopology: { physical = "torus"; dims = [2,2]; virtual = "auto"; };'
bad virtual-torus 2 "'topology.virtual' applies to switched networks"
w bad-level <<<$'logging: { level = "loud"; };'
bad bad-level 1 "'logging.level' is \"loud\""
w integrity-no-key <<<$'security: {\n  integrity = true;\n};'
bad integrity-no-key 2 "'security.integrity' needs 'security.key_file'"
w relative-dir <<<$'daemon: { runtime_dir = "run"; };'
bad relative-dir 1 "'daemon.runtime_dir' must be an absolute path"
w cpus-syntax <<<$'daemon: {\n  cpus = "1-";\n};'
bad cpus-syntax 2 "'daemon.cpus' is \"1-\": expected a CPU number at the end"
w cpus-range <<<$'daemon: {\n  cpus = "0,3-2";\n};'
bad cpus-range 2 "'daemon.cpus' is \"0,3-2\": the range 3-2 goes down"
w cpus-empty <<<$'daemon: {\n  cpus = "";\n};'
bad cpus-empty 2 "'daemon.cpus' is \"\": the list is empty; leave 'daemon.cpus' out to run on every CPU"
w cc-name <<<$'transport: {\n  tcp_congestion = "bb r";\n};'
bad cc-name 2 "'transport.tcp_congestion' is \"bb r\", not a congestion control's name"
w cc-long <<<$'transport: { tcp_congestion = "a_congestion_ctrl"; };'
bad cc-long 1 "'transport.tcp_congestion' is longer than 15 characters"
w cpus-setsize <<<$'daemon: {\n  cpus = "0,4096";\n};'
bad cpus-setsize 2 "'daemon.cpus' is \"0,4096\": CPU 4096 is beyond CPU_SETSIZE \(ferryd takes CPUs 0 to 1023\)"
w cpus-number <<<$'daemon: {\n  cpus = 1;\n};'
bad cpus-number 2 "'daemon.cpus' must be a string, not an integer"
w direct-many <<<$'direct: {\n  max_ranks = 65;\n};'
bad direct-many 2 "'direct.max_ranks' is 65, must be between 0 and 64"
w direct-negative <<<$'direct: { max_ranks = -1; };'
bad direct-negative 1 "'direct.max_ranks' is -1, must be between 0 and 64"
w direct-ring-small <<<$'direct: {\n  max_ranks = 4;\n  ring_bytes = 131072;\n};'
bad direct-ring-small 3 "'direct.ring_bytes' is 131072, must be between 262144 and 1073741824"
w direct-ring-large <<<$'direct: { ring_bytes = 2147483648L; };'
bad direct-ring-large 1 "'direct.ring_bytes' is 2147483648, must be between 262144 and 1073741824"
w direct-ring-odd <<<$'direct: {\n  ring_bytes = 393216;\n};'
bad direct-ring-odd 2 "'direct.ring_bytes' is 393216, must be a power of two"
w direct-region-big <<<$'direct: {
  max_ranks = 64;
  ring_bytes = 33554432;
};'
bad direct-region-big 1 "'direct.max_ranks' squared times 'direct.ring_bytes' makes a region of 137455734784 bytes, above the 68736258048"
w direct-unknown <<<$'direct: {\n  max_rank = 4;\n};'
bad direct-unknown 2 "unknown option 'direct.max_rank'"
w direct-not-group <<<$'direct = 4;'
bad direct-not-group 1 "'direct' must be a group"
w direct-type <<<$'direct: { ring_bytes = "256k"; };'
bad direct-type 1 "'direct.ring_bytes' must be an integer, not a string"
w direct-off <<<$'direct: { max_ranks = 0; ring_bytes = 1073741824; };'
expect "direct.max_ranks = 0 and 1 GiB rings are accepted, and printed" \
	has "$TMP/direct-off.conf" '^direct: max_ranks 0, ring_bytes 1073741824$'
expect "the shipped ferry.conf: direct rings up to 16 ranks, of 256 KiB" \
	has "$CONF/ferry.conf" '^direct: max_ranks 16, ring_bytes 262144$'
out=$("$F" --check-config "$TMP/missing.conf" 2>&1)
expect "a missing file is named" bash -c "[[ '$out' == '$TMP/missing.conf:0: cannot open: No such file or directory' ]]"

# Holes: 7 nodes on an explicit 2x4 grid (one empty position) still work.
w holes <<<$'cluster: { host_pattern = "n%d"; count = 7; };\ntopology: { virtual = [ 2, 4 ]; };'
expect "7 nodes on a 2x4 grid: accepted, node 6 is (1,2) with peers 2 4 5" \
	has "$TMP/holes.conf" '^node 6 n6:7470 \(1,2\) peers 2 4 5$'
finish
