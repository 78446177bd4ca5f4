#!/bin/bash
# tests/static/manpages.sh - the man pages (packaging/man/, plain roff):
# each formats without a warning from groff, as lintian checks them
# (man --warnings), and every function client/ferry.h declares is named in
# the NAME line of a section-3 page (make install links that name to it).
# ferry.conf(5)'s options are checked against the code by
# tests/unit/test_confdoc.c.  Prints "ok - ..." or "not ok - ..." lines.
set -u
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$ROOT" || exit 1
rc=0

if ! command -v man >/dev/null || ! command -v groff >/dev/null; then
	echo "ok - man: pages format without warnings # SKIP man or groff missing (packaging/deps.sh)"
else
	bad=""
	for p in packaging/man/*.[0-9]; do
		out=$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z "$p" 2>&1 >/dev/null)
		[ -n "$out" ] && { bad="$bad $p"; echo "$out" | sed "s|^|#   $p: |"; }
	done
	if [ -z "$bad" ]; then
		echo "ok - man: $(ls packaging/man/*.[0-9] | wc -l) pages format without warnings"
	else
		echo "not ok - man: groff warns about$bad"
		rc=1
	fi
fi

# The functions of ferry.h: "type ferry_x(" at the start of a declaration.
funcs=$(sed -n 's/^[a-z].*[ *]\(ferry_[a-z0-9_]*\)(.*/\1/p' client/ferry.h | sort -u)
named=$(for p in packaging/man/*.3; do
	sed -n '/^\.SH NAME/{n;s/ \\-.*//;s/,//g;p;q}' "$p"
done | tr ' ' '\n' | sort -u)
missing=$(comm -23 <(echo "$funcs") <(echo "$named"))
stale=$(comm -13 <(echo "$funcs") <(echo "$named") | grep -v -x -e ferry -e libferry)
if [ -z "$missing" ] && [ -z "$stale" ]; then
	echo "ok - man: each of the $(echo "$funcs" | wc -l) functions of ferry.h has a page"
else
	[ -n "$missing" ] && echo "#   no page names:" $missing
	[ -n "$stale" ] && echo "#   pages name what ferry.h does not declare:" $stale
	echo "not ok - man: the section-3 pages and ferry.h differ"
	rc=1
fi
exit $rc
