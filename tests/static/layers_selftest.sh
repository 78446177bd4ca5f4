#!/bin/bash
# tests/static/layers_selftest.sh - the layer check must be able to fail: on a
# copy of the tree with one planted violation at a time, layers.sh must
# report exactly that violation (and pass on the unchanged copy).
set -u
HERE=$(cd "$(dirname "$0")/../.." && pwd)
TMP=$(mktemp -d /tmp/ferry-layers.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
FAILED=0

fresh() {
	rm -rf "$TMP/tree"
	mkdir -p "$TMP/tree"
	cp -r "$HERE/proto" "$HERE/client" "$HERE/daemon" "$TMP/tree/"
}

# plant NAME FILE LINE EXPECTED: appends LINE to FILE in a fresh copy; the
# check must fail with EXPECTED among its messages.
plant() {
	local name=$1 file=$2 line=$3 expected=$4 out
	fresh
	printf '%s\n' "$line" >>"$TMP/tree/$file"
	out=$(bash "$HERE/tests/static/layers.sh" "$TMP/tree")
	if [ $? -ne 0 ] && grep -qF -- "$expected" <<<"$out"; then
		echo "ok - layers self-test: $name is caught"
	else
		echo "not ok - layers self-test: $name is not caught"
		sed 's/^/#   /' <<<"$out"
		FAILED=1
	fi
}

fresh
if bash "$HERE/tests/static/layers.sh" "$TMP/tree" >/dev/null; then
	echo "ok - layers self-test: the unchanged tree passes"
else
	echo "not ok - layers self-test: the unchanged tree fails"
	FAILED=1
fi
plant "an upward include (net -> cluster)" daemon/net/peer.c '#include "../cluster/cluster.h"' \
	"daemon/net/peer.c (daemon/net/) includes daemon/cluster/cluster.h (daemon/cluster/), which is a higher layer"
plant "a sibling include (local -> net)" daemon/local/endpoint.c '#include "../net/peer.h"' \
	"which is a sibling layer"
plant "a transport reaching into the peer layer" daemon/net/link_tcp.c '#include "peer.h"' \
	"daemon/net/link_tcp.c: includes daemon/net/peer.h"
plant "libferry including daemon code" client/send.c '#include "../daemon/plan/route.h"' \
	"client/send.c: includes daemon/plan/route.h"
plant "plan/ using daemon state" daemon/plan/route.c '#include "../core/loop.h"' \
	"daemon/plan/route.c: includes daemon/core/loop.h"
plant "libconfig outside conf.c" daemon/core/log.c '#include <libconfig.h>' \
	"daemon/core/log.c: includes <libconfig.h>"
plant "a cycle inside one layer" daemon/fwd/agg.h '#include "rx.h"' "daemon/fwd/agg -> daemon/fwd/rx -> daemon/fwd/agg"
plant "a file outside every layer" daemon/stray.c '#include "core/log.h"' "daemon/stray.c: not in any layer"
plant "a file without includes outside every layer" daemon/bare.c 'int bare;' "daemon/bare.c: not in any layer"

# The same on linked symbols (symbols.sh), which a hand-written prototype
# cannot hide: a tree of three tiny files, built here.
symtree() {
	rm -rf "$TMP/sym"
	mkdir -p "$TMP/sym/daemon/net" "$TMP/sym/daemon/cluster" "$TMP/sym/build/obj/daemon/net" \
		"$TMP/sym/build/obj/daemon/cluster"
	cp "$HERE/daemon/LAYERS" "$TMP/sym/daemon/"
	printf 'int cluster_poll(void);\nint cluster_poll(void) { return 0; }\n' >"$TMP/sym/daemon/cluster/cluster.c"
	printf 'void peer_send(void);\nvoid peer_send(void) { }\n' >"$TMP/sym/daemon/net/peer.c"
	printf '%s\n' "$1" >"$TMP/sym/daemon/net/link_tcp.c"
	for f in daemon/cluster/cluster daemon/net/peer daemon/net/link_tcp; do
		cc -c -o "$TMP/sym/build/obj/$f.o" "$TMP/sym/$f.c" || return 1
	done
}
symcheck() {
	local name=$1 code=$2 expected=$3 out rc
	symtree "$code" || { echo "not ok - layers self-test: $name: cannot compile"; FAILED=1; return; }
	out=$(ROOT=$TMP/sym BUILD=build bash "$HERE/tests/static/symbols.sh")
	rc=$?
	if [ -z "$expected" ] && [ $rc -eq 0 ]; then
		echo "ok - layers self-test: symbols: $name passes"
	elif [ -n "$expected" ] && [ $rc -ne 0 ] && grep -qF -- "$expected" <<<"$out"; then
		echo "ok - layers self-test: symbols: $name is caught"
	else
		echo "not ok - layers self-test: symbols: $name"
		sed 's/^/#   /' <<<"$out"
		FAILED=1
	fi
}
symcheck "a transport that keeps to itself" 'int tcp_only(void); int tcp_only(void) { return 1; }' ""
symcheck "a call up the layers behind a hand-written prototype" \
	'int cluster_poll(void); int up(void); int up(void) { return cluster_poll(); }' \
	"daemon/net/link_tcp.c (daemon/net/) uses cluster_poll of daemon/cluster/cluster.c (daemon/cluster/), a higher layer"
symcheck "a transport calling into the peer layer" \
	'void peer_send(void); void in(void); void in(void) { peer_send(); }' \
	"daemon/net/link_tcp.c uses peer_send of daemon/net/peer.c"
exit $FAILED
