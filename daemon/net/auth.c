/* daemon/net/auth.c - see auth.h. */
#include "auth.h"
#include "../core/log.h"

#include <errno.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static_assert(crypto_auth_BYTES == WIRE_MAC_BYTES, "MAC size");

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
