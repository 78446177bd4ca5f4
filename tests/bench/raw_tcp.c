/* tests/bench/raw_tcp.c - what loopback TCP itself does, the comparator for
 * ferry's links; and what the frame protection of daemon/net/auth.c costs
 * without ferry around it.
 *
 *   raw_tcp pingpong N     8-byte ping-pong between two processes, both
 *                          busy-polling (non-blocking reads); "oneway_us X"
 *   raw_tcp stream MB      one process streams MB megabytes to the other in
 *                          1 MiB writes; "gbytes_per_s X"
 *   raw_tcp frames MB BODY MODE
 *                          the same in frames as ferry's links carry them: a
 *                          24-byte header, BODY bytes, and with MODE mac or
 *                          encrypt a 16-byte tag, sealed by the sender just
 *                          before each frame goes out and checked (decrypted)
 *                          by the receiver, as ferry does (ChaCha20-Poly1305,
 *                          libsodium; nonce = frame count; MODE none: no
 *                          tag); "gbytes_per_s X" of bodies
 *   raw_tcp seal BODY MODE N
 *                          one process seals and opens N frames of BODY bytes,
 *                          no TCP: the crypto alone, "seal_open_ns_per_frame X
 *                          gbytes_per_s Y"; MODE also aesgcm-mac and
 *                          aesgcm-encrypt (AES-256-GCM, where the CPU has it:
 *                          the alternative ferry did not take; else "n/a")
 *
 * RAW_TCP_CC=NAME in the environment sets that congestion control on both
 * sockets (make bench gives the one ferry's links use, so that both sides of
 * a ratio run the same TCP); unset or empty, the system's default.
 *
 * The ping-pong's busy-polling reads yield the CPU while they find nothing
 * when the process's affinity allows one CPU only (the "pinned" layout of
 * make bench, where both processes share CPU 0), as libferry's spinning
 * loops do.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HDR 24
#define TAG 16

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int one_cpu;     /* our affinity allows one CPU: yield while polling */

/* Reads exactly n bytes, spinning on EAGAIN. */
static void readn(int fd, void *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = recv(fd, (char *)buf + got, n - got, MSG_DONTWAIT);

		if (r > 0)
			got += (size_t)r;
		else if (r == 0 || (errno != EAGAIN && errno != EINTR))
			exit(1);
		else if (one_cpu)
			sched_yield();
	}
}

/* Reads exactly n bytes, blocking. */
static int readall(int fd, void *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, (char *)buf + got, n - got);

		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

static int writeall(int fd, const void *buf, size_t n)
{
	size_t off = 0;

	while (off < n) {
		ssize_t w = write(fd, (const char *)buf + off, n - off);

		if (w <= 0)
			return -1;
		off += (size_t)w;
	}
	return 0;
}

enum mode { NONE, MAC, ENCRYPT, GCM_MAC, GCM_ENCRYPT };

static int mode_of(const char *s)
{
	static const char *const names[] = { "none", "mac", "encrypt", "aesgcm-mac", "aesgcm-encrypt" };

	for (int i = 0; i < 5; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

static void nonce(uint8_t n[12], uint64_t count)
{
	memset(n, 0, 12);
	memcpy(n, &count, 8);
}

/* Seals frame f (HDR + body + TAG bytes) as auth_seal does, in place. */
static void seal(int mode, uint8_t *f, size_t body, uint64_t count, const uint8_t *key)
{
	uint8_t n[12], none[1];
	size_t len = HDR + body + TAG;

	nonce(n, count);
	switch (mode) {
	case MAC:
		crypto_aead_chacha20poly1305_ietf_encrypt_detached(none, f + len - TAG, NULL, NULL, 0, f, len - TAG,
								   NULL, n, key);
		break;
	case ENCRYPT:
		crypto_aead_chacha20poly1305_ietf_encrypt_detached(f + HDR, f + len - TAG, NULL, f + HDR, body, f, HDR,
								   NULL, n, key);
		break;
	case GCM_MAC:
		crypto_aead_aes256gcm_encrypt_detached(none, f + len - TAG, NULL, NULL, 0, f, len - TAG, NULL, n, key);
		break;
	case GCM_ENCRYPT:
		crypto_aead_aes256gcm_encrypt_detached(f + HDR, f + len - TAG, NULL, f + HDR, body, f, HDR, NULL, n,
						       key);
		break;
	}
}

static int open_frame(int mode, uint8_t *f, size_t body, uint64_t count, const uint8_t *key)
{
	uint8_t n[12];
	size_t len = HDR + body + TAG;
	const uint8_t *tag = f + len - TAG;

	nonce(n, count);
	switch (mode) {
	case MAC:
		return crypto_aead_chacha20poly1305_ietf_decrypt_detached(NULL, NULL, tag, 0, tag, f, len - TAG, n,
									  key);
	case ENCRYPT:
		return crypto_aead_chacha20poly1305_ietf_decrypt_detached(f + HDR, NULL, f + HDR, body, tag, f, HDR, n,
									  key);
	case GCM_MAC:
		return crypto_aead_aes256gcm_decrypt_detached(NULL, NULL, tag, 0, tag, f, len - TAG, n, key);
	case GCM_ENCRYPT:
		return crypto_aead_aes256gcm_decrypt_detached(f + HDR, NULL, f + HDR, body, tag, f, HDR, n, key);
	}
	return 0;
}

static int seal_only(size_t body, int mode, long n)
{
	uint8_t key[32], *f = calloc(1, HDR + body + TAG);
	double t0;

	if ((mode == GCM_MAC || mode == GCM_ENCRYPT) && !crypto_aead_aes256gcm_is_available()) {
		printf("seal_open_ns_per_frame n/a\ngbytes_per_s n/a\n");
		return 0;
	}
	randombytes_buf(key, sizeof(key));
	t0 = now();
	for (long i = 0; i < n; i++) {
		seal(mode, f, body, (uint64_t)i, key);
		if (open_frame(mode, f, body, (uint64_t)i, key) != 0)
			return 1;
	}
	t0 = now() - t0;
	printf("seal_open_ns_per_frame %.1f\ngbytes_per_s %.3f\n", t0 * 1e9 / (double)n,
	       (double)body * (double)n / t0 / 1e9);
	free(f);
	return 0;
}

/* RAW_TCP_CC (see the top); exits if the kernel refuses it, so that no
 * figure is taken under another congestion control than the one asked for. */
static void set_cc(int fd)
{
	const char *cc = getenv("RAW_TCP_CC");

	if (cc && cc[0] && setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, (socklen_t)strlen(cc)) < 0) {
		fprintf(stderr, "raw_tcp: congestion control %s: %s\n", cc, strerror(errno));
		exit(2);
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	int lfd, one = 1, fd, mode = NONE;
	long n = argc > 2 ? atol(argv[2]) : 20000;
	size_t body = 0;
	uint8_t key[32];
	pid_t child;
	cpu_set_t cpus;

	if (argc < 2 || sodium_init() < 0)
		return 2;
	one_cpu = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 && CPU_COUNT(&cpus) == 1;
	if (!strcmp(argv[1], "seal")) {
		if (argc < 5 || (mode = mode_of(argv[3])) < 0)
			return 2;
		return seal_only((size_t)atol(argv[2]), mode, atol(argv[4]));
	}
	if (!strcmp(argv[1], "frames")) {
		if (argc < 5 || (mode = mode_of(argv[4])) < 0 || mode > ENCRYPT)
			return 2;
		body = (size_t)atol(argv[3]);
	}
	randombytes_buf(key, sizeof(key));
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd >= 0)
		set_cc(lfd);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 1) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl) < 0)
		return 2;
	child = fork();
	if (child == 0) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		set_cc(fd);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			return 2;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (!strcmp(argv[1], "pingpong")) {
			char b[8];

			for (long i = 0; i < n + 1000; i++) {
				readn(fd, b, 8);
				if (send(fd, b, 8, 0) != 8)
					return 1;
			}
		} else if (!strcmp(argv[1], "frames")) {
			/* The receiving daemon: a frame at a time, checked. */
			size_t tag = mode == NONE ? 0 : TAG, len = HDR + body + tag;
			uint8_t *f = malloc(len + TAG);
			uint64_t frames = ((uint64_t)n << 20) / body;

			for (uint64_t i = 0; i < frames; i++) {
				if (readall(fd, f, len) < 0)
					return 1;
				if (mode != NONE && open_frame(mode, f, body, i, key) != 0) {
					fprintf(stderr, "raw_tcp: frame %llu fails its check\n", (unsigned long long)i);
					return 1;
				}
			}
			if (write(fd, "k", 1) != 1)
				return 1;
		} else {
			char *b = malloc(1 << 20);
			size_t got = 0, want = (size_t)n << 20;

			while (got < want) {
				ssize_t r = read(fd, b, 1 << 20);

				if (r <= 0)
					return 1;
				got += (size_t)r;
			}
			if (write(fd, "k", 1) != 1)
				return 1;
		}
		return 0;
	}
	fd = accept(lfd, NULL, NULL);
	set_cc(fd);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (!strcmp(argv[1], "pingpong")) {
		char b[8] = { 0 };
		double t0 = 0;

		for (long i = 0; i < n + 1000; i++) {
			if (i == 1000)
				t0 = now();
			if (send(fd, b, 8, 0) != 8)
				return 1;
			readn(fd, b, 8);
		}
		printf("oneway_us %.3f\n", (now() - t0) / (double)n / 2 * 1e6);
	} else if (!strcmp(argv[1], "frames")) {
		/* The sending daemon: each frame sealed just before it is
		 * written (encryption: out of place, the frame is kept). */
		size_t tag = mode == NONE ? 0 : TAG, len = HDR + body + tag;
		uint8_t *f = calloc(1, len + TAG), *out = mode == ENCRYPT ? malloc(len + TAG) : f, k;
		uint64_t frames = ((uint64_t)n << 20) / body;
		double t0 = now();

		for (uint64_t i = 0; i < frames; i++) {
			memcpy(f + 8, &i, 8);           /* the frame's seq */
			if (mode == ENCRYPT) {
				uint8_t nn[12];

				nonce(nn, i);
				memcpy(out, f, HDR);
				crypto_aead_chacha20poly1305_ietf_encrypt_detached(out + HDR, out + len - TAG, NULL, f + HDR,
										   body, f, HDR, NULL, nn, key);
			} else if (mode == MAC) {
				seal(mode, f, body, i, key);
			}
			if (writeall(fd, out, len) < 0)
				return 1;
		}
		if (read(fd, &k, 1) != 1)
			return 1;
		printf("gbytes_per_s %.3f\n", (double)frames * (double)body / (now() - t0) / 1e9);
	} else {
		char *b = calloc(1, 1 << 20), k;
		double t0 = now();

		for (long i = 0; i < n; i++) {
			size_t off = 0;

			while (off < (1u << 20)) {
				ssize_t w = write(fd, b + off, (1u << 20) - off);

				if (w <= 0)
					return 1;
				off += (size_t)w;
			}
		}
		if (read(fd, &k, 1) != 1)
			return 1;
		printf("gbytes_per_s %.3f\n", (double)n * (1 << 20) / (now() - t0) / 1e9);
	}
	waitpid(child, NULL, 0);
	return 0;
}
