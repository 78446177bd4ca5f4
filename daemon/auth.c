/* daemon/auth.c - see auth.h. */
#include "auth.h"
#include "log.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static_assert(crypto_auth_BYTES == WIRE_MAC_BYTES, "MAC size");

static struct {
	unsigned char key[crypto_auth_KEYBYTES];
	int insecure;
} A;

int auth_init(const char *path)
{
	char text[256];
	size_t n = 0, bin_len = 0;
	struct stat st;
	FILE *f;

	if (sodium_init() < 0) {
		log_err("libsodium failed to initialise");
		return -EIO;
	}
	memset(A.key, 0, sizeof(A.key));
	if (!path[0]) {
		A.insecure = 1;
		log_warn("no security.key_file: INSECURE mode, links are not authenticated; "
			 "daemons with a cluster key will refuse this one");
		return 0;
	}
	A.insecure = 0;
	f = fopen(path, "r");
	if (!f) {
		int e = errno;

		log_err("security.key_file %s: %s", path, strerror(e));
		return -e;
	}
	if (fstat(fileno(f), &st) == 0 && (st.st_mode & 077))
		log_warn("security.key_file %s can be read by other users (mode %03o); chmod 600 it",
			 path, (unsigned)(st.st_mode & 0777));
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	if (sodium_hex2bin(A.key, sizeof(A.key), text, n, " \t\r\n", &bin_len, NULL) != 0 ||
	    bin_len != sizeof(A.key)) {
		sodium_memzero(text, sizeof(text));
		log_err("security.key_file %s: must hold %zu bytes as %zu hex digits (ferryctl keygen makes one)",
			path, sizeof(A.key), 2 * sizeof(A.key));
		return -EINVAL;
	}
	sodium_memzero(text, sizeof(text));
	return 0;
}

void auth_fini(void)
{
	sodium_memzero(A.key, sizeof(A.key));
}

int auth_insecure(void)
{
	return A.insecure;
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
	crypto_auth(mac, msg, sizeof(msg), A.key);
}

int auth_check(const uint8_t mac[WIRE_MAC_BYTES], char role, const void *hello_i, const void *hello_a)
{
	unsigned char msg[1 + 2 * sizeof(struct wire_hello)];

	transcript(msg, role, hello_i, hello_a);
	return crypto_auth_verify(mac, msg, sizeof(msg), A.key) == 0;
}

void auth_keygen(char buf[66])
{
	unsigned char key[crypto_auth_KEYBYTES];

	crypto_auth_keygen(key);
	sodium_bin2hex(buf, 65, key, sizeof(key));
	buf[64] = '\n';
	buf[65] = '\0';
	sodium_memzero(key, sizeof(key));
}
