/* tests/fuzz/fuzz_coll.c - the collective executor (daemon/coll/exec.c) fed
 * by a hostile peer.  At start-up the harness runs an all-to-all through
 * the mesh strategy over 5 nodes (uneven ranks per node and counts) on
 * executors and records the pieces node 4 received, in order.  Each input
 * then replays them to a fresh executor of node 4, as the input says: 4
 * bytes per action, [what, index, pos (2 bytes)], then (for raw pieces) the
 * bytes themselves:
 *   0  deliver recorded piece index (mod their number) as it is
 *   1  the same with one byte at pos flipped (header or data)
 *   2  the same, cut short at pos
 *   3  run the executor (its sends take a piece or say -EAGAIN by pos)
 *   4  a raw piece: the next pos bytes (at most what is left), decoded by
 *      wire_coll_piece_decode first (a group's BREAK, msg
 *      WIRE_COLL_MSG_BREAK, by wire_coll_break_decode: its errno and text
 *      must come out in range and printable)
 * Whatever comes, the executor must not crash, leak or write outside its
 * buffers (ASan), and a failed operation must stay failed. */
#include "../../daemon/coll/exec.h"
#include "../../daemon/plan/a2a.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define P 5
#define VICTIM 4

struct rec {
	uint32_t to;
	struct wire_coll_piece h;
	uint32_t len;
	uint8_t *data;
};

static struct rec *q;                   /* pieces in flight while recording */
static size_t nq, capq, headq;
static struct rec *got;                 /* those node 4 received */
static size_t ngot;

static struct sched s;
static struct sched_mem mem[P];
static uint32_t ppn[P] = { 2, 1, 3, 0, 2 };
static int allow_eagain;
static uint32_t send_budget;

static int rec_send(void *ctx, uint32_t peer, const struct wire_coll_piece *h, const struct iovec *iov, int niov,
		    uint32_t len)
{
	(void)ctx;
	if (nq == capq) {
		capq = capq ? capq * 2 : 256;
		q = realloc(q, capq * sizeof(*q));
	}
	q[nq].to = peer;
	q[nq].h = *h;
	q[nq].h.kind = 2;       /* (the engine names it: send_piece) */
	q[nq].len = len;
	q[nq].data = malloc(len + 1);
	coll_iov_copy(q[nq].data, iov, niov);
	nq++;
	return 0;
}

static int victim_send(void *ctx, uint32_t peer, const struct wire_coll_piece *h, const struct iovec *iov, int niov,
		       uint32_t len)
{
	uint8_t *d = malloc(len + 1);

	(void)ctx;
	(void)peer;
	(void)h;
	/* every part readable (the sanitizers check) */
	coll_iov_copy(d, iov, niov);
	free(d);
	if (allow_eagain && send_budget == 0)
		return -EAGAIN;
	if (send_budget)
		send_budget--;
	return 0;
}

static const struct coll_exec_ops rec_ops = { .send = rec_send };
static const struct coll_exec_ops victim_ops = { .send = victim_send };

static void setup(void)
{
	static uint32_t first[P + 1], rank_at[16];
	static uint64_t cnt[16 * 16], sd[16 * 16], slen[16];
	static struct a2a_rank_args args[16];
	struct a2a_plan p;
	struct coll_exec *x[P];
	uint32_t R = 0;

	for (uint32_t i = 0; i < P; i++) {
		first[i + 1] = first[i] + ppn[i];
		R += ppn[i];
	}
	for (uint32_t r = 0; r < R; r++)
		rank_at[r] = r;
	for (uint32_t a = 0; a < R; a++) {
		for (uint32_t b = 0; b < R; b++) {
			cnt[a * R + b] = (a * 3 + b * 5) % 7;
			sd[a * R + b] = slen[a];
			slen[a] += cnt[a * R + b];
		}
	}
	/* the counts are symmetric in what rank b receives from a: rcount of b
	 * = cnt[a][b], laid out by a */
	static uint64_t rc[16 * 16], rd[16 * 16], rlen[16];
	for (uint32_t b = 0; b < R; b++)
		for (uint32_t a = 0; a < R; a++) {
			rc[b * R + a] = cnt[a * R + b];
			rd[b * R + a] = rlen[b];
			rlen[b] += rc[b * R + a];
		}
	for (uint32_t a = 0; a < R; a++)
		args[a] = (struct a2a_rank_args){ cnt + a * R, sd + a * R, rc + a * R, rd + a * R };
	struct a2a_layout lay = { R, first, rank_at };
	a2a_plan_init(&p, A2A_MESH, P);
	sched_init(&s, P);
	if (a2a_sched(&p, &lay, args, &s))
		abort();
	for (uint32_t i = 0; i < P; i++) {
		struct coll_exec_cfg cfg = { .self = i, .op = 1, .piece_max = 24, .mem_max = 1 << 20 };

		mem[i].send = calloc(ppn[i] + 1, sizeof(void *));
		mem[i].recv = calloc(ppn[i] + 1, sizeof(void *));
		mem[i].send_len = calloc(ppn[i] + 1, 8);
		mem[i].recv_len = calloc(ppn[i] + 1, 8);
		for (uint32_t k = 0; k < ppn[i]; k++) {
			uint32_t a = first[i] + k;

			mem[i].send_len[k] = slen[a];
			mem[i].recv_len[k] = rlen[a];
			mem[i].send[k] = calloc(slen[a] + 1, 1);
			mem[i].recv[k] = calloc(rlen[a] + 1, 1);
			memset(mem[i].send[k], 0x40 + (int)a, slen[a]);
		}
		if (coll_exec_new(&s.node[i], &mem[i], &cfg, &rec_ops, NULL, &x[i], NULL, 0))
			abort();
	}
	for (int round = 0; round < 10000; round++) {
		int all = 1;

		for (uint32_t i = 0; i < P; i++)
			all &= coll_exec_run(x[i]) == 1;
		while (headq < nq) {
			struct rec *r = &q[headq++];

			if (coll_exec_deliver(x[r->to], &r->h, r->data, r->len))
				abort();
			if (r->to == VICTIM) {
				got = realloc(got, (ngot + 1) * sizeof(*got));
				got[ngot++] = *r;
			} else {
				free(r->data);
			}
		}
		if (all)
			break;
	}
	for (uint32_t i = 0; i < P; i++)
		coll_exec_free(x[i]);
	free(q);
	if (!ngot)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	struct coll_exec *x;
	struct coll_exec_cfg cfg = { .self = VICTIM, .op = 1, .piece_max = 24, .mem_max = 1 << 16 };
	int failed = 0;

	if (!ready) {
		setup();
		ready = 1;
	}
	if (coll_exec_new(&s.node[VICTIM], &mem[VICTIM], &cfg, &victim_ops, NULL, &x, NULL, 0))
		abort();
	allow_eagain = 1;
	send_budget = 0;
	for (size_t i = 0; i + 4 <= size;) {
		uint8_t what = data[i] % 5;
		const struct rec *r = &got[data[i + 1] % ngot];
		uint16_t pos = (uint16_t)(data[i + 2] | data[i + 3] << 8);
		uint8_t buf[sizeof(struct wire_coll_piece) + 64 * 1024];
		struct wire_coll_piece h;
		int64_t n;
		int ret = failed;       /* (what no call changes) */

		i += 4;
		switch (what) {
		case 0:
		case 1:
		case 2:
			wire_coll_piece_encode(buf, &r->h);
			memcpy(buf + sizeof(h), r->data, r->len);
			n = (int64_t)(sizeof(h) + r->len);
			if (what == 1)
				buf[pos % n] ^= (uint8_t)(1u << (pos >> 13));
			if (what == 2)
				n = pos % (n + 1);
			n = wire_coll_piece_decode(buf, (size_t)n, &h);
			if (n >= 0)
				ret = coll_exec_deliver(x, &h, buf + sizeof(h), (uint32_t)n);
			break;
		case 3:
			send_budget = pos % 8;
			ret = coll_exec_run(x);
			break;
		case 4:
			n = pos < size - i ? pos : (int64_t)(size - i);
			memcpy(buf, data + i, (size_t)n);
			i += (size_t)n;
			n = wire_coll_piece_decode(buf, (size_t)n, &h);
			if (n >= 0 && h.msg == WIRE_COLL_MSG_BREAK) {
				/* a group's BREAK: the engine decodes it, never
				 * the executor */
				char why[256];
				int err = 0;

				if (wire_coll_break_decode(&h, buf + sizeof(h), (uint64_t)n, &err, why,
							   sizeof(why)) == 0 &&
				    (err <= 0 || err > 4095 || strlen(why) > 255 || strpbrk(why, "\n\r\x1b")))
					abort();
			} else if (n >= 0) {
				ret = coll_exec_deliver(x, &h, buf + sizeof(h), (uint32_t)n);
			}
			break;
		}
		if (failed && ret != failed && ret != 1)
			abort();        /* a failed operation stays failed */
		if (ret < 0)
			failed = ret;
	}
	allow_eagain = 0;
	coll_exec_run(x);
	coll_exec_free(x);
	return 0;
}
