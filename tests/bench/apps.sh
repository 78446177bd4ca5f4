#!/bin/bash
# tests/bench/apps.sh BUILD OUT [quick] - the applications family (make
# bench-apps): tests/apps/run.sh (make apps: HPCC RandomAccess against
# Debian's hpcc, bale's histogram, index-gather and random permutation
# against their MPI versions; README "Applications"), its lines kept in
# OUT/apps.txt beside OUT/apps.csv; apps_report.sh turns them into apps.md
# (the summary's "Applications" table) and apps.png.
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "${2:?usage: apps.sh BUILD OUT [quick]}"
rm -f "$2/apps.csv"
# the wider set: 4 and 8 nodes, 1 and 2 processes per node (one run:
# about 5 minutes here)
export APPS_WIDE=1
# the bale apps 3 times (run.sh: one run is too short to tell 10 %), unless
# quick
[ -n "${3:-}" ] || export BALE_RUNS=${BALE_RUNS:-$((${APPS_RUNS:-1} > 3 ? ${APPS_RUNS:-1} : 3))}
bash "$HERE/../apps/run.sh" "$@" | tee "$2/apps.txt"
rc=${PIPESTATUS[0]}
bash "$HERE/apps_report.sh" "$2"
exit "$rc"
