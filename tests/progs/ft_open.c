/* tests/progs/ft_open.c - calls ferry_open (and optionally ferry_send) with the
 * given arguments and prints the outcome, for tests of error handling.
 *
 *   ft_open [--job J] [--rank R] [--size P] [--timeout MS] [--send-to D]
 *           [--send-len L] [--channel C] [--hold MS]
 *
 * Prints "open ok rank R size P" or "open error -E (name): message" and,
 * with --send-to, "send ok" or "send error ...".  Exits 0 if everything it
 * was asked to do succeeded, 1 otherwise.
 */
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <unistd.h>

static const char *errname(int e)
{
	switch (-e) {
#define E(x) case x: return #x
	E(ENOENT); E(ECONNREFUSED); E(ETIMEDOUT); E(EINVAL); E(EADDRINUSE); E(EMSGSIZE);
	E(EAGAIN); E(ECONNRESET); E(EPROTO); E(EUSERS); E(EDQUOT); E(ENOBUFS); E(EMFILE); E(ENOMEM);
	E(EBUSY);
#undef E
	}
	return "other";
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "job", required_argument, NULL, 'j' }, { "rank", required_argument, NULL, 'r' },
		{ "size", required_argument, NULL, 'p' }, { "timeout", required_argument, NULL, 't' },
		{ "send-to", required_argument, NULL, 'd' }, { "send-len", required_argument, NULL, 'l' },
		{ "channel", required_argument, NULL, 'c' }, { "hold", required_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ferry_opts fo = { 0 };
	long dst = -1, len = 16, channel = 0, hold = 0;
	int opt, ret;
	ferry_t *f;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'j': fo.job = optarg; break;
		case 'r': fo.rank = (int)arg_long("--rank", optarg); break;
		case 'p': fo.size = (int)arg_long("--size", optarg); break;
		case 't': fo.timeout_ms = (int)arg_long("--timeout", optarg); break;
		case 'd': dst = arg_long("--send-to", optarg); break;
		case 'l': len = arg_long("--send-len", optarg); break;
		case 'c': channel = arg_long("--channel", optarg); break;
		case 'h': hold = arg_long("--hold", optarg); break;
		default: return 2;
		}
	}
	ret = ferry_open(&f, &fo);
	if (ret < 0) {
		printf("open error %d (%s): %s\n", ret, errname(ret), ferry_last_error());
		return 1;
	}
	printf("open ok rank %d size %d\n", ferry_rank(f), ferry_size(f));
	fflush(stdout);
	if (dst >= 0) {
		char *buf = calloc(1, (size_t)len + 1);

		ret = ferry_send(f, (uint32_t)dst, (uint32_t)channel, buf, (size_t)len);
		free(buf);
		if (ret < 0)
			printf("send error %d (%s): %s\n", ret, errname(ret), ferry_last_error());
		else
			printf("send ok\n");
	}
	fflush(stdout);
	if (hold)
		usleep((useconds_t)hold * 1000);
	ferry_close(f);
	return ret < 0 ? 1 : 0;
}
