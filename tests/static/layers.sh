#!/bin/bash
# tests/static/layers.sh [ROOT] - checks every #include of ferry's C code
# against daemon/LAYERS: includes point down the layers (or stay in their
# folder), files keep to their "only" rules, system libraries are included
# only where LAYERS says, every file under daemon/ belongs to a layer, and no
# modules (x.c with x.h) include each other in a circle.
#
# Prints "ok - ..." / "not ok - ..." lines (tests/run.sh counts them), and
# each violation as "#   file: what is wrong".  ROOT defaults to the
# checkout this script is in; pointing it at another tree checks that tree
# against its own daemon/LAYERS, or against this one's if it has none.
set -u
HERE=$(cd "$(dirname "$0")/../.." && pwd)
ROOT=$(cd "${1:-$HERE}" && pwd)
RULES=$ROOT/daemon/LAYERS
[ -f "$RULES" ] || RULES=$HERE/daemon/LAYERS

cd "$ROOT" || exit 1
files=$(find proto client daemon -name '*.[ch]' 2>/dev/null | sort)

# One line per include: "file<TAB>"header" or "file<TAB><header>".
includes=$(for f in $files; do
	sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*\([<"][^>"]*[>"]\).*/\1/p' "$f" |
		while read -r h; do printf '%s\t%s\n' "$f" "$h"; done
done)

awk -F'\t' -v rules="$RULES" -v filelist="$files" -v nfiles="$(echo "$files" | wc -w)" -f "$HERE/tests/static/layers.awk" -f <(printf '%s\n' '
function norm(path,   n, i, parts, out, k) {
	n = split(path, parts, "/")
	k = 0
	for (i = 1; i <= n; i++) {
		if (parts[i] == "." || parts[i] == "")
			continue
		if (parts[i] == ".." && k > 0 && out[k] != "..") { k--; continue }
		out[++k] = parts[i]
	}
	path = ""
	for (i = 1; i <= k; i++)
		path = path (i > 1 ? "/" : "") out[i]
	return path
}
function dir(path) { return path ~ /\// ? substr(path, 1, match(path, /\/[^\/]*$/)) : "" }
function module(path) { sub(/\.[ch]$/, "", path); return path }
function bad(check, msg) { fails[check] = fails[check] "#   " msg "\n"; nbad[check]++ }
function visit(m,   i, n, t, list) {
	state[m] = 1
	stack[++depth] = m
	n = split(edges[m], list, " ")
	for (i = 1; i <= n; i++) {
		t = list[i]
		if (t == "")
			continue
		if (state[t] == 1) {
			cyc = ""
			for (k = depth; k >= 1; k--) {
				cyc = stack[k] (cyc == "" ? "" : " -> ") cyc
				if (stack[k] == t)
					break
			}
			bad("cycles", cyc " -> " t)
		} else if (state[t] == 0) {
			visit(t)
		}
	}
	depth--
	state[m] = 2
}
BEGIN {
	read_rules(rules)
	checks = "layers only libs cycles unplaced"
}
{
	file = $1
	inc = $2
	ninc++
	if (inc ~ /^</) {
		h = substr(inc, 2, length(inc) - 2)
		for (i = 1; i <= nlib; i++) {
			if (index(h, lib_header[i]) != 1)
				continue
			ok = 0
			n = split(lib_allow[i], a, " ")
			for (j = 1; j <= n; j++)
				if (index(file, a[j]) == 1)
					ok = 1
			if (!ok)
				bad("libs", file ": includes <" h ">, which only" lib_allow[i] " may")
		}
		next
	}
	target = norm(dir(file) substr(inc, 2, length(inc) - 2))
	# only rules: the first that matches the file
	for (i = 1; i <= no; i++) {
		if (index(file, only_prefix[i]) != 1)
			continue
		ok = 0
		n = split(only_allow[i], a, " ")
		for (j = 1; j <= n; j++)
			if (index(target, a[j]) == 1)
				ok = 1
		if (!ok)
			bad("only", file ": includes " target "; files under " only_prefix[i] " may include only" only_allow[i])
		break
	}
	lf = layer_of(file)
	lt = layer_of(target)
	if (lf != "" && lt != "" && lf != lt && rank[lt] >= rank[lf])
		bad("layers", file " (" lf ") includes " target " (" lt "), which is " \
		    (rank[lt] == rank[lf] ? "a sibling layer" : "a higher layer"))
	if (lf != "" && lt == "" && target !~ /^(proto|daemon)\//)
		bad("layers", file " (" lf ") includes " target ", which is outside every layer")
	mf = module(file)
	mt = module(target)
	if (mf != mt && index(" " edges[mf] " ", " " mt " ") == 0) {
		edges[mf] = edges[mf] " " mt
		mods[mf] = 1
		mods[mt] = 1
	}
}
END {
	n = split(filelist, all, /[ \n]+/)
	for (i = 1; i <= n; i++)
		if (all[i] ~ /^daemon\// && layer_of(all[i]) == "")
			bad("unplaced", all[i] ": not in any layer of daemon/LAYERS")
	for (m in mods)
		state[m] = 0
	for (m in mods)
		if (state[m] == 0)
			visit(m)
	desc["layers"] = "every include points down daemon/LAYERS or stays in its folder"
	desc["only"] = "libferry, ferryctl, transports and plan/ include only what LAYERS allows them"
	desc["libs"] = "each system library is included only by its own module"
	desc["cycles"] = "no modules include each other in a circle"
	desc["unplaced"] = "every file under daemon/ belongs to a layer"
	n = split(checks, c, " ")
	rc = 0
	for (i = 1; i <= n; i++) {
		if (nbad[c[i]]) {
			printf "not ok - layers: %s (%d violations)\n%s", desc[c[i]], nbad[c[i]], fails[c[i]]
			rc = 1
		} else {
			printf "ok - layers: %s (%d files, %d includes)\n", desc[c[i]], nfiles, ninc
		}
	}
	exit rc
}') <<<"$includes"
