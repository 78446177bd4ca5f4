#!/bin/bash
# Daemons authenticate each other with the cluster key: the wrong key, or no
# key against a key, is refused and logged; the right key connects.  The key
# comes from security.key_file, or from the credential systemd passes
# ($CREDENTIALS_DIRECTORY/cluster.key), which the unit uses so that the key
# file can stay root's alone.
. "$(dirname "$0")/lib.sh"

"$BUILD/ferryctl" keygen >"$TMP/a.key"
"$BUILD/ferryctl" keygen >"$TMP/b.key"
chmod 600 "$TMP/a.key" "$TMP/b.key"
# Read by the daemons themselves: theirs, as an admin would make them.
cp -p "$TMP/a.key" "$TMP/root-only.key"
daemon_owns "$TMP/a.key" "$TMP/b.key"
expect "ferryctl keygen makes 64 hex digits" grep -qE '^[0-9a-f]{64}$' "$TMP/a.key"
expect "... a different key each time" bash -c "! cmp -s '$TMP/a.key' '$TMP/b.key'"

cluster_conf k 2 || exit 1
keyed() { sed "\$a security: { key_file = \"$2\"; };" "$TMP/k.conf" >"$TMP/$1.conf"; }
keyed ka "$TMP/a.key"
keyed kb "$TMP/b.key"

start_daemon k0 --config "$TMP/ka.conf" --node 0 || exit 1
start_daemon k1 --config "$TMP/kb.conf" --node 1 || exit 1
# (The connecting daemon retries with backoff, up to 2 s apart: wait for the
# log lines rather than a fixed time.)
expect "different keys: the accepting daemon logs that the key is wrong" \
	wait_for "grep -q 'connection claiming to be node 0 failed authentication: it holds a different cluster key; refused' '$TMP/k1.log'"
expect "... so does the connecting one" grep -q "peer 1 failed authentication" "$TMP/k0.log"
expect "... and the link is not up" not link_up k0 1
stop_daemon k1 >/dev/null

start_daemon k1 --config "$TMP/k.conf" --node 1 || exit 1
expect "a daemon without a key against one with a key: refused" \
	wait_for "grep -q 'connection claiming to be node 0 has a cluster key and this daemon has none' '$TMP/k1.log'"
expect "... and the keyed daemon says the other has none" \
	wait_for "grep -q 'peer 1 has no cluster key (insecure mode); refused' '$TMP/k0.log'"
expect "... and the link is not up" not link_up k0 1
expect "the keyless daemon logged its insecure mode at start" grep -q "INSECURE mode" "$TMP/k1.log"
stop_daemon k1 >/dev/null

keyed ka1 "$TMP/a.key"
start_daemon k1 --config "$TMP/ka1.conf" --node 1 || exit 1
expect "the same key on both: the link comes up" wait_for "link_up k0 1 && link_up k1 0"
expect "status says the link is authenticated" \
	bash -c "'$BUILD/ferryctl' --runtime-dir '$TMP/k0' status | grep -q 'authenticated'"
expect "daemon 0 exits cleanly" stop_daemon k0
expect "daemon 1 exits cleanly" stop_daemon k1

# --- the key as a systemd credential ---
# creds DIR CONTENT...: a credentials directory as systemd makes it for the
# unit's LoadCredential=cluster.key:... (SetCredential=cluster.key:none when
# the file is missing): the service user's, read-only.
creds() {
	local d=$TMP/$1; shift
	mkdir -p "$d"
	cat "$@" >"$d/cluster.key"
	chmod 400 "$d/cluster.key"
	chmod 500 "$d"
	daemon_owns "$d" "$d/cluster.key"
}
creds cred-a "$TMP/a.key"
echo none >"$TMP/none"
creds cred-none "$TMP/none"
keyed kroot "$TMP/root-only.key"
start_daemon k0 --config "$TMP/ka.conf" --node 0 || exit 1
if [ "$(id -u)" = 0 ]; then
	"${FERRYD[@]}" --config "$TMP/kroot.conf" --node 1 --runtime-dir "$TMP/kr" >"$TMP/kr.log" 2>&1
	expect "a key file only root may read stops the daemon, which is not root" \
		bash -c "[ $? -ne 0 ] && grep -q 'security.key_file $TMP/root-only.key: Permission denied' '$TMP/kr.log'"
else
	echo "ok - $TEST: a key file only root may read # SKIP the tests do not run as root"
fi
CREDENTIALS_DIRECTORY=$TMP/cred-a start_daemon k1 --config "$TMP/kroot.conf" --node 1 || exit 1
expect "with the key as a credential, the same daemon starts and its link comes up" \
	wait_for "link_up k0 1 && link_up k1 0"
expect "... and it says where the key came from" \
	grep -q "cluster key from the credential cluster.key; security.key_file is not read" "$TMP/k1.log"
expect "... and the link is authenticated" \
	bash -c "'$BUILD/ferryctl' --runtime-dir '$TMP/k1' status | grep -q 'authenticated'"
stop_daemon k1 >/dev/null
CREDENTIALS_DIRECTORY=$TMP/cred-none start_daemon k1 --config "$TMP/kb.conf" --node 1 || exit 1
expect "a credential that says \"none\" leaves the key to security.key_file (here another key: refused)" \
	wait_for "grep -q 'connection claiming to be node 0 failed authentication: it holds a different cluster key; refused' '$TMP/k1.log'"
stop_daemon k1 >/dev/null
CREDENTIALS_DIRECTORY=$TMP/cred-none start_daemon k1 --config "$TMP/k.conf" --node 1 || exit 1
expect "... and without a key_file that is insecure mode" grep -q "INSECURE mode" "$TMP/k1.log"
expect "daemon 1 exits cleanly" stop_daemon k1
expect "daemon 0 exits cleanly" stop_daemon k0

chmod 644 "$TMP/a.key"
mkdir -p "$TMP/kx" && daemon_owns "$TMP/kx"
"${FERRYD[@]}" --config "$TMP/ka.conf" --node 0 --runtime-dir "$TMP/kx" >"$TMP/kx.log" 2>&1 &
PIDS+=("$!")
wait_for "grep -q 'can be read by other users' '$TMP/kx.log'"
expect "a key file others can read is warned about" grep -q "can be read by other users (mode 644)" "$TMP/kx.log"
echo "not a key" >"$TMP/bad.key"
keyed kbad "$TMP/bad.key"
"${FERRYD[@]}" --config "$TMP/kbad.conf" --node 0 --runtime-dir "$TMP/kbad" >"$TMP/kbad.log" 2>&1
expect "a malformed key file stops ferryd with a clear message" \
	bash -c "[ $? -ne 0 ] && grep -q 'must hold 32 bytes as 64 hex digits' '$TMP/kbad.log'"
finish
