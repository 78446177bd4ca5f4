#!/bin/bash
# tests/static/symbols.sh - the layering of daemon/LAYERS, checked on what is
# linked rather than on #include lines: every symbol an object of the build
# uses from another object of ours must be defined in its own folder or a
# lower layer, and must keep to the "only" rules (libferry uses nothing of
# the daemon; a transport calls nothing of the peer layer but what link.h
# gives it...).  This catches a call through a hand-written prototype or an
# extern that the include check cannot see.
#
# Environment: BUILD, the build directory (default build) under ROOT (default
# this checkout); objects must be built (make tests).  Objects whose source
# no longer exists (left over from a file that moved) are not looked at.  Prints "ok - ..." or "not ok - ..." with the
# violations.
set -u
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${BUILD:-build}
cd "$ROOT" || exit 1
[ -d "$BUILD/obj/daemon" ] || { echo "not ok - symbols: no objects in $BUILD (make tests first)"; exit 1; }

objs=$(find "$BUILD/obj/daemon" "$BUILD/obj/proto" "$BUILD/obj/client" "$BUILD/pic" -name '*.o' 2>/dev/null | sort |
	while read -r o; do s=${o#"$BUILD"/obj/}; s=${s#"$BUILD"/pic/}; [ -f "${s%.o}.c" ] && echo "$o"; done)
# "D source symbol" for each global definition, "U source symbol" for each use.
table=$(for o in $objs; do
	case $o in "$BUILD"/obj/*) src=${o#"$BUILD"/obj/} ;; *) src=pic/${o#"$BUILD"/pic/} ;; esac
	src=${src%.o}.c
	nm --defined-only -g "$o" 2>/dev/null | awk -v s="$src" 'NF == 3 { print "D", s, $3 }'
	nm -u "$o" 2>/dev/null | awk -v s="$src" '{ print "U", s, $NF }'
done)

awk -v rules="$ROOT/daemon/LAYERS" -v nobjs="$(echo "$objs" | wc -w)" -f "$(dirname "$0")/layers.awk" -f <(printf '%s\n' '
BEGIN { read_rules(rules) }
$1 == "D" {
	# libferry (pic/) and the daemon are separate programs: key by program.
	prog = $2 ~ /^pic\// ? "lib" : ($2 ~ /^client\/ferryctl/ ? "ctl" : "daemon")
	def[prog, $3] = $2
	next
}
{ uses[++nu] = $2 " " $3 }
END {
	for (i = 1; i <= nu; i++) {
		split(uses[i], u, " ")
		user = u[1]
		sym = u[2]
		prog = user ~ /^pic\// ? "lib" : (user ~ /^client\/ferryctl/ ? "ctl" : "daemon")
		if (!((prog, sym) in def) && prog == "ctl" && (("daemon", sym) in def))
			definer = def["daemon", sym]      # ferryctl links proto/ and plan/
		else if ((prog, sym) in def)
			definer = def[prog, sym]
		else
			continue                          # a library of the system
		checked++
		file = user
		sub(/^pic\//, "", file)
		target = definer
		sub(/^pic\//, "", target)
		for (r = 1; r <= no; r++) {
			if (index(file, only_prefix[r]) != 1)
				continue
			ok = 0
			n = split(only_allow[r], a, " ")
			for (j = 1; j <= n; j++) {
				# A header stands for the files that implement it:
				# frame.h for frame.c, verbs.h for verbs_*.c.
				allow = a[j]
				sub(/\.h$/, "", allow)
				if (index(target, allow) == 1)
					ok = 1
			}
			if (!ok)
				bad = bad "#   " file " uses " sym " of " target ", which only" only_allow[r] " may provide it\n"
			break
		}
		lf = layer_of(file)
		lt = layer_of(target)
		if (lf != "" && lt != "" && lf != lt && rank[lt] >= rank[lf])
			bad = bad "#   " file " (" lf ") uses " sym " of " target " (" lt "), " \
			      (rank[lt] == rank[lf] ? "a sibling layer" : "a higher layer") "\n"
	}
	if (bad != "") {
		printf "not ok - symbols: what the objects link points down daemon/LAYERS\n%s", bad
		exit 1
	}
	printf "ok - symbols: what the objects link points down daemon/LAYERS (%d objects, %d uses of our symbols)\n", nobjs, checked
}') <<<"$table"
