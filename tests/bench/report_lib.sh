# shellcheck shell=bash
# tests/bench/report_lib.sh - small helpers of the families' scripts and
# report scripts (sourced by lib.sh, red_report.sh, redtc_report.sh).

# median: the median of the numbers on stdin, one a line ("nan" if none).
median() { spread | cut -d' ' -f1; }

# spread: "median min max" of the numbers on stdin, one a line ("nan nan
# nan" if none).
spread() {
	sort -g | awk '{ v[NR] = $1 } END { if (!NR) { print "nan nan nan"; exit }
		print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), v[1], v[NR] }'
}

# rate_beta_ns RATE: the time per byte (ns) of a link of tc's RATE
# ("100mbit", "1gbit", "500kbit"): the α–β model's β for a shaped link.
rate_beta_ns() {
	awk -v r="$1" 'BEGIN { n = r + 0; u = tolower(r); sub(/^[0-9.]+/, "", u)
		print 8000 / (u == "gbit" ? n * 1000 : u == "kbit" ? n / 1000 : n) }'
}
