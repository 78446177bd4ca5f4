#!/bin/bash
# tests/bench/security.sh BUILD OUT [quick] - what frame integrity and
# encryption (security.integrity, security.encrypt; daemon/net/auth.h) cost.
# make bench and make bench-security run it (tests/bench/run.sh); it also
# runs alone.  Layout: shared (every process may run on both cores; lib.sh).
#
# Three 2-node clusters on loopback TCP, all with a cluster key: frames not
# authenticated (integrity = false), authenticated (the default) and
# encrypted.  They run side by side and take turns within each run, so that
# ratios compare runs made close together.  Per setting: 16-byte items from
# one process to one on the other node (items/s, and the daemons' CPU time per
# item), a fine-grained all-to-all of 2 processes per node, and 1 MiB items
# (GB/s).  Beside them raw TCP between two processes with the same frames
# sealed and checked the same way (raw_tcp frames), and the crypto alone per
# frame on one core (raw_tcp seal; AES-256-GCM too, the alternative).  Writes
# OUT/security.csv and OUT/security.md, which report.sh adds to summary.md.
set -u
BUILD=$(cd "$1" && pwd)
OUT=$2
QUICK=${3:-}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
RUNS=5 NI=1000000 K=4096 MB=256 SEALS=20000
[ -n "$QUICK" ] && RUNS=1 NI=300000 K=1024 MB=64 SEALS=5000

. "$ROOT/tests/integration/lib.sh"
B=$BUILD/bench
CSV=$OUT/security.csv
echo "variant,measure,run,value,unit" >"$CSV"
log() { echo "# $*" >&2; }
val() { sed -n "s/.*$1 \([0-9.e+-]*\).*/\1/p" | head -n 1; }
row() { echo "$1,$2,$3,${4:-nan},$5" >>"$CSV"; }
cpu_ns() { cut -d' ' -f1 "/proc/$(dpid "$1")/schedstat"; }

log "security: three 2-node clusters (frames plain, authenticated, encrypted)"
"$BUILD/ferryctl" keygen >"$TMP/bench.key"
chmod 600 "$TMP/bench.key"
daemon_owns "$TMP/bench.key"    # (run as root, the daemons run as a user of their own)
VARIANTS="off mac encrypt"
for v in $VARIANTS; do
	case $v in
	off) sec="integrity = false;" ;;
	mac) sec="" ;;
	encrypt) sec="encrypt = true;" ;;
	esac
	start_cluster "s$v" 2 'topology: { virtual = "direct"; };' 'logging: { level = "warning"; };' \
		'limits: { ring_bytes = 67108864; };' "security: { key_file = \"$TMP/bench.key\"; $sec };" ||
		{ log "cluster s$v did not start"; exit 1; }
done

JOBN=0
for run in $(seq "$RUNS"); do
	for v in $VARIANTS; do
		JOBN=$((JOBN + 1))
		# 16-byte items, one sender to one receiver on the other node.
		c0=$(cpu_ns "s${v}_n0") c1=$(cpu_ns "s${v}_n1")
		FERRY_JOB=r$JOBN FERRY_RANK=1 FERRY_SIZE=2 FERRY_RUNTIME_DIR=$TMP/s${v}_n1 \
			"$B/fb_rate" --items $NI >"$TMP/rate.recv" 2>&1 &
		peer=$!
		FERRY_JOB=r$JOBN FERRY_RANK=0 FERRY_SIZE=2 FERRY_RUNTIME_DIR=$TMP/s${v}_n0 "$B/fb_rate" --items $NI \
			>/dev/null 2>&1
		wait $peer
		row "ferry-$v" items_per_s_16B "$run" "$(val recv_items_per_s <"$TMP/rate.recv")" items/s
		row "ferry-$v" daemon_cpu_ns_per_item_send "$run" $(( ($(cpu_ns "s${v}_n0") - c0) / NI )) ns
		row "ferry-$v" daemon_cpu_ns_per_item_recv "$run" $(( ($(cpu_ns "s${v}_n1") - c1) / NI )) ns
		# Fine-grained all-to-all, 2 processes per node, 16-byte items.
		pids="" worst=0
		for r in 0 1 2 3; do
			FERRY_JOB=a$JOBN FERRY_RANK=$r FERRY_SIZE=4 FERRY_RUNTIME_DIR=$TMP/s${v}_n$((r / 2)) \
				"$B/fb_a2a" --items $K --len 16 >"$TMP/a2a.$r" 2>&1 &
			pids="$pids $!"
		done
		for p in $pids; do wait "$p"; done
		for r in 0 1 2 3; do
			e=$(val elapsed_s <"$TMP/a2a.$r")
			worst=$(awk -v a="$worst" -v b="${e:-nan}" 'BEGIN { print (b == "nan" || a == "nan") ? "nan" : (b > a ? b : a) }')
		done
		row "ferry-$v" a2a_items_per_s "$run" "$(awk -v t="$worst" -v n=$((4 * 3 * K)) \
			'BEGIN { print (t == "nan" || t <= 0) ? "nan" : n / t }')" items/s
		# 1 MiB items (16 pieces of 64 KiB each).
		FERRY_JOB=w$JOBN FERRY_RANK=0 FERRY_SIZE=2 FERRY_RUNTIME_DIR=$TMP/s${v}_n0 "$B/fb_bw" 1048576 $MB \
			>/dev/null 2>&1 &
		peer=$!
		row "ferry-$v" gbytes_per_s_1MiB "$run" "$(FERRY_JOB=w$JOBN FERRY_RANK=1 FERRY_SIZE=2 \
			FERRY_RUNTIME_DIR=$TMP/s${v}_n1 "$B/fb_bw" 1048576 $MB | val gbytes_per_s)" GB/s
		wait $peer
	done
	for m in none mac encrypt; do
		row "raw-tcp-$m" gbytes_per_s_16K_frames "$run" "$("$B/raw_tcp" frames $MB 16384 $m | val gbytes_per_s)" GB/s
		row "raw-tcp-$m" gbytes_per_s_64K_frames "$run" "$("$B/raw_tcp" frames $MB 65560 $m | val gbytes_per_s)" GB/s
	done
	for m in mac encrypt aesgcm-mac aesgcm-encrypt; do
		for body in 64 16384 65560; do
			out=$("$B/raw_tcp" seal $body $m $SEALS)
			row "seal-$m" "ns_per_frame_$body" "$run" "$(val seal_open_ns_per_frame <<<"$out")" ns
		done
	done
done
for v in $VARIANTS; do stop_cluster "s$v" 2 >/dev/null; done

# --- security.md ---
# stats FILTER: "median min max" of the value column of matching rows.
stats() {
	awk -F, "NR > 1 && ($1) && \$4 != \"nan\" { print \$4 }" "$CSV" | sort -g | awk '
		{ v[NR] = $1 } END {
			if (NR == 0) { print "nan nan nan"; exit }
			print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), v[1], v[NR] }'
}
# ratio VARIANT BASE MEASURE: median over runs of VARIANT's value / BASE's.
ratio() {
	awk -F, -v a="$1" -v b="$2" -v m="$3" 'NR > 1 && $2 == m && $4 != "nan" {
		if ($1 == a) x[$3] = $4; if ($1 == b) y[$3] = $4 }
		END { for (r in x) if ((r in y) && y[r] > 0) print x[r] / y[r] }' "$CSV" | sort -g | awk '
		{ v[NR] = $1 } END { if (NR == 0) print "nan"; else print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
fmt() { awk -v x="$1" -v s="$2" 'BEGIN { if (x == "nan") print "n/a"; else if (s == "M") printf "%.2f M", x / 1e6;
	else if (s == "G") printf "%.2f", x; else printf "%.0f", x }'; }
cell() {        # cell VARIANT MEASURE SCALE [BASE]
	local s r
	read -r s1 s2 s3 <<<"$(stats "\$1 == \"$1\" && \$2 == \"$2\"")"
	s="$(fmt "$s1" "${3:-}") [$(fmt "$s2" "${3:-}")..$(fmt "$s3" "${3:-}")]"
	if [ -n "${4:-}" ] && [ "$1" != "$4" ]; then
		r=$(ratio "$1" "$4" "$2")
		s="$s, $(awk -v x="$r" 'BEGIN { if (x == "nan") print "n/a"; else printf "%.2f×", x }')"
	fi
	echo "$s"
}
{
	echo "## Frame integrity and encryption: what they cost"
	echo
	echo "Two ferryd on loopback TCP on this machine ($(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'),"
	echo "AES-NI $(grep -qw aes /proc/cpuinfo && echo yes || echo no)), one process per node unless said, libsodium $(pkg-config --modversion libsodium 2>/dev/null);"
	echo "all three with a cluster key: *off* is \`security.integrity = false\`, *integrity* the default,"
	echo "*encrypt* \`security.encrypt = true\` (ChaCha20-Poly1305: a tag per frame; encrypted bodies)."
	echo "Layout: shared (daemons and processes on both cores, as the kernel decides); TCP on loopback."
	echo "Medians of $RUNS runs [min..max]; after the comma, the ratio to *off*, run by run."
	echo
	echo "| figure | off | integrity | encrypt |"
	echo "|---|---|---|---|"
	echo "| 16-byte items, one sender to one receiver on the other node (items/s) | $(cell ferry-off items_per_s_16B M) | $(cell ferry-mac items_per_s_16B M ferry-off) | $(cell ferry-encrypt items_per_s_16B M ferry-off) |"
	echo "| ... daemon CPU per item, sending side (ns) | $(cell ferry-off daemon_cpu_ns_per_item_send) | $(cell ferry-mac daemon_cpu_ns_per_item_send "" ferry-off) | $(cell ferry-encrypt daemon_cpu_ns_per_item_send "" ferry-off) |"
	echo "| ... daemon CPU per item, receiving side (ns) | $(cell ferry-off daemon_cpu_ns_per_item_recv) | $(cell ferry-mac daemon_cpu_ns_per_item_recv "" ferry-off) | $(cell ferry-encrypt daemon_cpu_ns_per_item_recv "" ferry-off) |"
	echo "| all-to-all, 2 nodes × 2 processes, K=$K, 16-byte items (items/s) | $(cell ferry-off a2a_items_per_s M) | $(cell ferry-mac a2a_items_per_s M ferry-off) | $(cell ferry-encrypt a2a_items_per_s M ferry-off) |"
	echo "| 1 MiB items between the two nodes (GB/s) | $(cell ferry-off gbytes_per_s_1MiB G) | $(cell ferry-mac gbytes_per_s_1MiB G ferry-off) | $(cell ferry-encrypt gbytes_per_s_1MiB G ferry-off) |"
	echo "| raw TCP, 16 KiB frames sealed the same way (GB/s) | $(cell raw-tcp-none gbytes_per_s_16K_frames G) | $(cell raw-tcp-mac gbytes_per_s_16K_frames G raw-tcp-none) | $(cell raw-tcp-encrypt gbytes_per_s_16K_frames G raw-tcp-none) |"
	echo "| raw TCP, 64 KiB frames sealed the same way (GB/s) | $(cell raw-tcp-none gbytes_per_s_64K_frames G) | $(cell raw-tcp-mac gbytes_per_s_64K_frames G raw-tcp-none) | $(cell raw-tcp-encrypt gbytes_per_s_64K_frames G raw-tcp-none) |"
	echo
	echo "(raw TCP: two processes, the sender seals each frame just before writing it, the receiver"
	echo "checks it, as ferry's daemons do; its ratios are to raw TCP with the same frames unsealed.)"
	echo
	echo "The crypto alone, one core, sealing and opening one frame (ns; a 64-byte body is an ACK or"
	echo "a frame with one small item: what a hop adds to latency, twice per round trip):"
	echo
	echo "| frame body | ChaCha20-Poly1305 tag (integrity) | ChaCha20-Poly1305 encrypt | AES-256-GCM tag | AES-256-GCM encrypt |"
	echo "|---|---|---|---|---|"
	for body in 64 16384 65560; do
		echo "| $body B | $(cell seal-mac ns_per_frame_$body) | $(cell seal-encrypt ns_per_frame_$body) | $(cell seal-aesgcm-mac ns_per_frame_$body) | $(cell seal-aesgcm-encrypt ns_per_frame_$body) |"
	done
} >"$OUT/security.md"
log "security: $OUT/security.md"
