/* daemon/net/auth.c - see auth.h. */
#include "auth.h"
#include "../core/log.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static_assert(crypto_auth_BYTES == WIRE_MAC_BYTES, "MAC size");
static_assert(crypto_aead_chacha20poly1305_ietf_ABYTES == WIRE_TAG_BYTES, "tag size");
static_assert(crypto_aead_chacha20poly1305_ietf_KEYBYTES == AUTH_LINK_KEY_BYTES, "link key size");
static_assert(crypto_kdf_KEYBYTES == crypto_generichash_BYTES, "master key size");
static_assert(crypto_generichash_KEYBYTES_MAX >= crypto_auth_KEYBYTES, "cluster key as BLAKE2b key");

static struct {
	unsigned char key[crypto_auth_KEYBYTES];
	int insecure;
} cluster_key;

/* The credential the unit passes: LoadCredential=cluster.key:..., with
 * SetCredential=cluster.key:none for when that file does not exist. */
#define AUTH_CREDENTIAL "cluster.key"

/* Reads the key file at path (what names it, for messages) into the key.
 * Returns 0, -ENOENT if the credential says "none", or another negative
 * errno (logged). */
static int read_key(const char *path, const char *what, int credential)
{
	char text[256];
	size_t n = 0, bin_len = 0;
	struct stat st;
	FILE *f;

	f = fopen(path, "r");
	if (!f) {
		int e = errno;

		log_err("%s %s: %s", what, path, strerror(e));
		return -e;
	}
	if (fstat(fileno(f), &st) == 0 && (st.st_mode & 077))
		log_warn("%s %s can be read by other users (mode %03o); chmod 600 it",
			 what, path, (unsigned)(st.st_mode & 0777));
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	if (credential && strncmp(text, "none", 4) == 0 && strspn(text + 4, " \t\r\n") == n - 4)
		return -ENOENT;
	if (sodium_hex2bin(cluster_key.key, sizeof(cluster_key.key), text, n, " \t\r\n", &bin_len, NULL) != 0 ||
	    bin_len != sizeof(cluster_key.key)) {
		sodium_memzero(text, sizeof(text));
		log_err("%s %s: must hold %zu bytes as %zu hex digits (ferryctl keygen makes one)",
			what, path, sizeof(cluster_key.key), 2 * sizeof(cluster_key.key));
		return -EINVAL;
	}
	sodium_memzero(text, sizeof(text));
	return 0;
}

int auth_init(const char *path)
{
	const char *creds = getenv("CREDENTIALS_DIRECTORY");
	char cred[PATH_MAX];
	int ret;

	if (sodium_init() < 0) {
		log_err("libsodium failed to initialise");
		return -EIO;
	}
	memset(cluster_key.key, 0, sizeof(cluster_key.key));
	cluster_key.insecure = 0;
	/* Under the unit, the key file belongs to root and ferryd, a user of
	 * its own, could not read it: systemd passes a copy. */
	if (creds && creds[0] &&
	    (size_t)snprintf(cred, sizeof(cred), "%s/%s", creds, AUTH_CREDENTIAL) < sizeof(cred) &&
	    access(cred, F_OK) == 0) {
		ret = read_key(cred, "credential", 1);
		if (ret == 0) {
			log_info("cluster key from the credential %s%s%s", AUTH_CREDENTIAL,
				 path[0] ? "; security.key_file is not read: " : "", path);
			return 0;
		}
		if (ret != -ENOENT)
			return ret;
		log_debug("credential %s is \"none\": the key comes from the configuration", AUTH_CREDENTIAL);
	}
	if (!path[0]) {
		cluster_key.insecure = 1;
		log_warn("no security.key_file: INSECURE mode, links are not authenticated; "
			 "daemons with a cluster key will refuse this one");
		return 0;
	}
	return read_key(path, "security.key_file", 0);
}

void auth_fini(void)
{
	sodium_memzero(cluster_key.key, sizeof(cluster_key.key));
}

int auth_insecure(void)
{
	return cluster_key.insecure;
}

void auth_random(void *buf, size_t len)
{
	randombytes_buf(buf, len);
}

static void transcript(unsigned char *out, char role, const void *hello_i, const void *hello_a)
{
	out[0] = (unsigned char)role;
	memcpy(out + 1, hello_i, sizeof(struct wire_hello));
	memcpy(out + 1 + sizeof(struct wire_hello), hello_a, sizeof(struct wire_hello));
}

void auth_mac(uint8_t mac[WIRE_MAC_BYTES], char role, const void *hello_i, const void *hello_a)
{
	unsigned char msg[1 + 2 * sizeof(struct wire_hello)];

	transcript(msg, role, hello_i, hello_a);
	crypto_auth(mac, msg, sizeof(msg), cluster_key.key);
}

int auth_check(const uint8_t mac[WIRE_MAC_BYTES], char role, const void *hello_i, const void *hello_a)
{
	unsigned char msg[1 + 2 * sizeof(struct wire_hello)];

	transcript(msg, role, hello_i, hello_a);
	return crypto_auth_verify(mac, msg, sizeof(msg), cluster_key.key) == 0;
}

/* --- frames --- */

#define HDR_BYTES sizeof(struct wire_frame_hdr)

void auth_link_start(struct auth_link *a, int mode, int outgoing, const void *hello_i, const void *hello_a)
{
	static const char label[] = "ferry frame keys";
	uint8_t master[crypto_kdf_KEYBYTES], k_i[AUTH_LINK_KEY_BYTES], k_a[AUTH_LINK_KEY_BYTES];
	crypto_generichash_state st;

	crypto_generichash_init(&st, cluster_key.key, sizeof(cluster_key.key), sizeof(master));
	crypto_generichash_update(&st, (const unsigned char *)label, sizeof(label) - 1);
	crypto_generichash_update(&st, hello_i, sizeof(struct wire_hello));
	crypto_generichash_update(&st, hello_a, sizeof(struct wire_hello));
	crypto_generichash_final(&st, master, sizeof(master));
	crypto_kdf_derive_from_key(k_i, sizeof(k_i), 1, "ferrylnk", master);
	crypto_kdf_derive_from_key(k_a, sizeof(k_a), 2, "ferrylnk", master);
	a->mode = mode;
	memcpy(a->tx_key, outgoing ? k_i : k_a, sizeof(a->tx_key));
	memcpy(a->rx_key, outgoing ? k_a : k_i, sizeof(a->rx_key));
	a->tx_count = a->rx_count = 0;
	sodium_memzero(master, sizeof(master));
	sodium_memzero(k_i, sizeof(k_i));
	sodium_memzero(k_a, sizeof(k_a));
	sodium_memzero(&st, sizeof(st));
}

void auth_link_stop(struct auth_link *a)
{
	sodium_memzero(a, sizeof(*a));
}

static void nonce(uint8_t n[crypto_aead_chacha20poly1305_ietf_NPUBBYTES], uint64_t count)
{
	/* 2^64 frames would take centuries at a billion per second. */
	memset(n, 0, crypto_aead_chacha20poly1305_ietf_NPUBBYTES);
	for (int i = 0; i < 8; i++)
		n[i] = (uint8_t)(count >> (8 * i));
}

void auth_seal(struct auth_link *a, uint8_t *frame, uint8_t *out, size_t len)
{
	uint8_t n[crypto_aead_chacha20poly1305_ietf_NPUBBYTES], none[1];
	size_t body = len - HDR_BYTES - WIRE_TAG_BYTES;

	assert(len >= HDR_BYTES + (a->mode ? WIRE_TAG_BYTES : 0));
	if (a->mode == AUTH_FRAMES_PLAIN) {
		if (out != frame)
			memcpy(out, frame, len);
		return;
	}
	nonce(n, a->tx_count++);
	if (out != frame)
		memcpy(out, frame, HDR_BYTES);
	if (a->mode == AUTH_FRAMES_MAC) {
		if (out != frame)
			memcpy(out + HDR_BYTES, frame + HDR_BYTES, body);
		/* A MAC: nothing encrypted, all of it associated data. */
		crypto_aead_chacha20poly1305_ietf_encrypt_detached(none, out + len - WIRE_TAG_BYTES, NULL, NULL, 0,
								   out, len - WIRE_TAG_BYTES, NULL, n, a->tx_key);
	} else {
		crypto_aead_chacha20poly1305_ietf_encrypt_detached(out + HDR_BYTES, out + len - WIRE_TAG_BYTES, NULL,
								   frame + HDR_BYTES, body, frame, HDR_BYTES, NULL, n,
								   a->tx_key);
	}
}

int auth_open(struct auth_link *a, uint8_t *frame, size_t len)
{
	uint8_t n[crypto_aead_chacha20poly1305_ietf_NPUBBYTES];
	const uint8_t *tag = frame + len - WIRE_TAG_BYTES;
	int ret;

	if (a->mode == AUTH_FRAMES_PLAIN)
		return 0;
	if (len < HDR_BYTES + WIRE_TAG_BYTES)
		return -EBADMSG;
	nonce(n, a->rx_count);
	if (a->mode == AUTH_FRAMES_MAC)
		ret = crypto_aead_chacha20poly1305_ietf_decrypt_detached(NULL, NULL, tag, 0, tag, frame,
									 len - WIRE_TAG_BYTES, n, a->rx_key);
	else
		ret = crypto_aead_chacha20poly1305_ietf_decrypt_detached(frame + HDR_BYTES, NULL, frame + HDR_BYTES,
									 len - HDR_BYTES - WIRE_TAG_BYTES, tag, frame,
									 HDR_BYTES, n, a->rx_key);
	if (ret != 0)
		return -EBADMSG;
	a->rx_count++;
	return 0;
}
