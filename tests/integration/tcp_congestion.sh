#!/bin/bash
# transport.tcp_congestion: the TCP links between daemons use the congestion
# control it names, as the kernel reports for both ends of each connection
# (ss -ti); unset or "", the system's default; a name the kernel does not
# have is said once, and the links keep the system's default and carry
# jobs.  Names that cannot be one are refused: config.sh.
. "$(dirname "$0")/lib.sh"

SYS=$(sysctl -n net.ipv4.tcp_congestion_control)

expect "unset: two daemons link up" start_cluster df 2
expect "... both ends use the system's default, $SYS ($(link_ccs df))" test "$(link_ccs df)" = "$SYS $SYS "
expect "... and the log says it is the system's" \
	grep -q "^<6>ferryd: TCP links: congestion control $SYS (the system's: transport.tcp_congestion names none)$" \
	"$TMP/df_n0.log"
expect "unset: daemons exit cleanly" stop_cluster df 2

# One that is not the system's, unless the system's is reno already.
OTHER=reno
[ "$SYS" = reno ] && OTHER=cubic
expect "$OTHER: two daemons link up" start_cluster ot 2 "transport: { tcp_congestion = \"$OTHER\"; };"
expect "... both ends use $OTHER ($(link_ccs ot))" test "$(link_ccs ot)" = "$OTHER $OTHER "
expect "... and the log says so" \
	grep -q "^<6>ferryd: TCP links: congestion control $OTHER (transport.tcp_congestion)$" "$TMP/ot_n0.log"
expect "... and a job runs across them" run_cluster_job ot a2a 2 1 --items 500 --sync
expect "$OTHER: daemons exit cleanly" stop_cluster ot 2

expect '"": two daemons link up' start_cluster sy 2 'transport: { tcp_congestion = ""; };'
expect "... both ends use the system's default, $SYS ($(link_ccs sy))" test "$(link_ccs sy)" = "$SYS $SYS "
expect "... and the log says it is the system's" \
	grep -q "^<6>ferryd: TCP links: congestion control $SYS (the system's" "$TMP/sy_n0.log"
expect '"": daemons exit cleanly' stop_cluster sy 2

expect "no such module: two daemons link up all the same" \
	start_cluster nx 2 'transport: { tcp_congestion = "nosuchcc"; };'
expect "... on the system's default ($(link_ccs nx))" test "$(link_ccs nx)" = "$SYS $SYS "
expect "... said once, as a warning, with the reason" test "$(grep -c \
	"^<4>ferryd: TCP links: transport.tcp_congestion \"nosuchcc\": No such file or directory (no such module loaded); keeping the system's ($SYS)$" \
	"$TMP/nx_n0.log")" = 1
expect "... and a job runs across them" run_cluster_job nx a2a 2 1 --items 500 --sync
expect "no such module: daemons exit cleanly" stop_cluster nx 2
finish
