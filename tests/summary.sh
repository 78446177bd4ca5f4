#!/bin/bash
# tests/summary.sh LOG - the summary line of a test log, counted as
# tests/run.sh counts: each "ok - ..." line a pass, each "ok - ... # SKIP
# why" line (TAP's directive, any case) skipped instead, each "not ok - ..."
# a failure.  Prints "N passed, N failed", with ", N skipped" when anything
# was skipped (.ci/run reads that line).  For make check-rdma, check-deb and
# check-system.
log=$1
s=$(grep -acE '^ok - .*#[[:space:]]*[Ss][Kk][Ii][Pp]' "$log")
p=$(($(grep -ac '^ok - ' "$log") - s))
f=$(grep -ac '^not ok - ' "$log")
echo "$p passed, $f failed$([ "$s" -gt 0 ] && echo ", $s skipped")"
