/* tests/mpi/fm_err.c OUT - errors through libferry-mpi, on communicators
 * whose error handler returns (a handler of the test's that counts its
 * calls and keeps the error class); MPI_COMM_WORLD keeps
 * MPI_ERRORS_ARE_FATAL, so an error raised there ends the run.
 *   - an argument only rank 1 finds wrong (a negative count in a gather):
 *     rank 1's call says MPI_ERR_COUNT at once, the other ranks' gather
 *     fails instead of waiting for ever, and so does the communicator's
 *     next operation on every rank (the group is broken): the gather
 *     says MPI_ERR_ARG there (ferry: the ranks posted different
 *     operations);
 *   - the same non-blocking: rank 1's MPI_Igather says MPI_ERR_COUNT, the
 *     others' MPI_Wait MPI_ERR_ARG, through the handler of the request's
 *     communicator (MPI_COMM_WORLD's would end the run);
 *   - a gather whose root expects fewer ints from rank 1 than it sends:
 *     MPI_ERR_TRUNCATE on every rank, in an MPI_Waitall with a
 *     point-to-point exchange: MPI_ERR_IN_STATUS, the statuses' MPI_ERROR
 *     fields MPI_ERR_TRUNCATE and MPI_SUCCESS;
 *   - that gather in an MPI_Waitany with a receive that only a later send
 *     matches: MPI_ERR_TRUNCATE, raised on the gather's communicator;
 *   - the non-blocking gather again, its communicator freed before the
 *     wait: the error goes through the handler that communicator had;
 *   - and again, its request freed by MPI_Request_free: nothing is raised
 *     (libferry-mpi prints the failure), MPI_COMM_WORLD's fatal handler
 *     least of all;
 *   - a bcast whose ranks name different roots: MPI_ERR_ROOT (blocking, on
 *     a communicator with MPI_ERRORS_RETURN).
 * Each rank writes one line per check to OUT.RANK (fm.h) and fails (MPI_Abort)
 * where a result differs; an alarm ends a hang.
 */
#include "fm.h"

#include <unistd.h>

static int h_calls, h_cls;

static void on_error(MPI_Comm *comm, int *code, ...)
{
	(void)comm;
	h_calls++;
	MPI_Error_class(*code, &h_cls);
}

/* A duplicate of MPI_COMM_WORLD whose errors come back to the caller,
 * through on_error. */
static MPI_Comm returning(void)
{
	static MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
	MPI_Comm c;

	if (eh == MPI_ERRHANDLER_NULL)
		MPI_Comm_create_errhandler(on_error, &eh);
	MPI_Comm_dup(MPI_COMM_WORLD, &c);
	MPI_Comm_set_errhandler(c, eh);
	return c;
}

static const char *cls_name(int cls)
{
	static char s[MPI_MAX_ERROR_STRING];
	int len;

	switch (cls) {
	case MPI_SUCCESS: return "MPI_SUCCESS";
	case MPI_ERR_COUNT: return "MPI_ERR_COUNT";
	case MPI_ERR_ARG: return "MPI_ERR_ARG";
	case MPI_ERR_TRUNCATE: return "MPI_ERR_TRUNCATE";
	case MPI_ERR_OTHER: return "MPI_ERR_OTHER";
	case MPI_ERR_IN_STATUS: return "MPI_ERR_IN_STATUS";
	case MPI_ERR_ROOT: return "MPI_ERR_ROOT";
	default:
		MPI_Error_string(cls, s, &len);
		return s;
	}
}

/* ret (a call's result) is an error of class want (0: any error), and the
 * handler was called once for it with that class. */
static void expect_err(const char *what, int ret, int want)
{
	int cls = MPI_SUCCESS;
	char line[256];

	if (ret != MPI_SUCCESS)
		MPI_Error_class(ret, &cls);
	snprintf(line, sizeof(line), "%s: %s (handler %d call%s, %s)", what, cls_name(cls), h_calls,
		 h_calls == 1 ? "" : "s", cls_name(h_cls));
	fprintf(fm_out, "%s\n", line);
	fprintf(stderr, "fm_err %d: %s\n", fm_rank, line);
	if (cls == MPI_SUCCESS || (want && cls != want) || h_calls != 1 || h_cls != cls)
		fm_fail(what);
	h_calls = 0;
	h_cls = MPI_SUCCESS;
}

int main(int argc, char **argv)
{
	static void *churn[100];
	MPI_Comm a;
	int v[64], g[64 * 4], ret;

	fm_init(&argc, &argv);
	alarm(30);
	if (fm_size < 3 || fm_size > 64)
		fm_fail("3 to 64 ranks");
	for (int i = 0; i < 64; i++)
		v[i] = fm_rank * 100 + i;

	/* rank 1's count is negative: it alone knows */
	a = returning();
	ret = MPI_Gather(v, fm_rank == 1 ? -1 : 1, MPI_INT, g, 1, MPI_INT, 0, a);
	expect_err("gather, rank 1's count negative", ret, fm_rank == 1 ? MPI_ERR_COUNT : MPI_ERR_ARG);
	ret = MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_INT, MPI_SUM, a);
	expect_err("the next operation on that communicator", ret, 0);
	MPI_Comm_free(&a);

	/* the same, non-blocking: rank 1's call fails, the others' wait */
	a = returning();
	{
		MPI_Request q = MPI_REQUEST_NULL;

		ret = MPI_Igather(v, fm_rank == 1 ? -1 : 1, MPI_INT, g, 1, MPI_INT, 0, a, &q);
		if (fm_rank == 1) {
			if (q != MPI_REQUEST_NULL)
				fm_fail("a failed MPI_Igather made a request");
		} else {
			if (ret != MPI_SUCCESS || h_calls)
				fm_fail("MPI_Igather failed at the call");
			ret = MPI_Wait(&q, MPI_STATUS_IGNORE);
		}
		expect_err("igather, rank 1's count negative", ret, fm_rank == 1 ? MPI_ERR_COUNT : MPI_ERR_ARG);
	}
	MPI_Comm_free(&a);

	/* the root expects 1 int from every rank, rank 1 sends 2 */
	a = returning();
	{
		int in = -1, out = fm_rank, left = (fm_rank + fm_size - 1) % fm_size;
		MPI_Request q[3];
		MPI_Status st[3];

		MPI_Igather(v, fm_rank == 1 ? 2 : 1, MPI_INT, g, 1, MPI_INT, 0, a, &q[0]);
		MPI_Irecv(&in, 1, MPI_INT, left, 9, MPI_COMM_WORLD, &q[1]);
		MPI_Isend(&out, 1, MPI_INT, (fm_rank + 1) % fm_size, 9, MPI_COMM_WORLD, &q[2]);
		ret = MPI_Waitall(3, q, st);
		expect_err("igather, rank 1 sends more than the root expects, in a waitall", ret, MPI_ERR_IN_STATUS);
		fprintf(fm_out, "statuses: %s %s %s\n", cls_name(st[0].MPI_ERROR), cls_name(st[1].MPI_ERROR),
			cls_name(st[2].MPI_ERROR));
		if (st[0].MPI_ERROR != MPI_ERR_TRUNCATE || st[1].MPI_ERROR != MPI_SUCCESS ||
		    st[2].MPI_ERROR != MPI_SUCCESS || in != left)
			fm_fail("the statuses of a waitall with a truncated igather");
	}
	MPI_Comm_free(&a);

	/* the truncated gather in an MPI_Waitany with a receive that only a
	 * later send matches: the gather completes first, its error raised
	 * on its communicator (MPICH polls our requests inside the tests
	 * MPI_Waitany makes: one of them must not complete it unseen) */
	a = returning();
	{
		int in = -1, out = fm_rank, idx = -1;
		MPI_Request q[2], s1;

		MPI_Igather(v, fm_rank == 1 ? 2 : 1, MPI_INT, g, 1, MPI_INT, 0, a, &q[0]);
		MPI_Irecv(&in, 1, MPI_INT, fm_rank, 11, MPI_COMM_WORLD, &q[1]);
		ret = MPI_Waitany(2, q, &idx, MPI_STATUS_IGNORE);
		expect_err("igather, rank 1 sends more than the root expects, in a waitany", ret, MPI_ERR_TRUNCATE);
		MPI_Isend(&out, 1, MPI_INT, fm_rank, 11, MPI_COMM_WORLD, &s1);
		MPI_Wait(&s1, MPI_STATUS_IGNORE);
		MPI_Wait(&q[1], MPI_STATUS_IGNORE);
		if (idx != 0 || in != fm_rank)
			fm_fail("a waitany over a failed igather and a receive");
	}
	MPI_Comm_free(&a);

	/* the same, the communicator freed before the wait (valid MPI: its
	 * pending operations complete normally, and their errors go through
	 * its handler); the heap churned, so that freed memory is reused */
	a = returning();
	{
		MPI_Request q = MPI_REQUEST_NULL;

		ret = MPI_Igather(v, fm_rank == 1 ? -1 : 1, MPI_INT, g, 1, MPI_INT, 0, a, &q);
		MPI_Comm_free(&a);
		for (int i = 0; i < 100; i++) {
			void *p = fm_alloc(128);

			memset(p, 0x5a, 128);
			churn[i] = p;
		}
		if (fm_rank != 1) {
			if (ret != MPI_SUCCESS || h_calls)
				fm_fail("MPI_Igather failed at the call");
			ret = MPI_Wait(&q, MPI_STATUS_IGNORE);
		}
		expect_err("igather, its communicator freed before the wait", ret,
			   fm_rank == 1 ? MPI_ERR_COUNT : MPI_ERR_ARG);
		for (int i = 0; i < 100; i++)
			free(churn[i]);
	}

	/* the same, the request freed (MPI_Request_free): nothing is raised
	 * where no call is left to return the error (ferry-mpi prints it) */
	a = returning();
	{
		MPI_Request q = MPI_REQUEST_NULL;

		ret = MPI_Igather(v, fm_rank == 1 ? -1 : 1, MPI_INT, g, 1, MPI_INT, 0, a, &q);
		if (fm_rank == 1)
			expect_err("igather, its request freed", ret, MPI_ERR_COUNT);
		else if (ret != MPI_SUCCESS || h_calls)
			fm_fail("MPI_Igather failed at the call");
		if (q != MPI_REQUEST_NULL)
			MPI_Request_free(&q);
		/* progress points: the operation ends, libferry-mpi frees it */
		MPI_Barrier(MPI_COMM_WORLD);
		MPI_Comm_free(&a);
		MPI_Barrier(MPI_COMM_WORLD);
		fprintf(fm_out, "igather, its request freed: handler %d calls\n", h_calls);
		if (h_calls)
			fm_fail("an error raised for a freed request");
	}

	/* rank 2 names another root; MPI's own MPI_ERRORS_RETURN */
	MPI_Comm_dup(MPI_COMM_WORLD, &a);
	MPI_Comm_set_errhandler(a, MPI_ERRORS_RETURN);
	ret = MPI_Bcast(v, 1, MPI_INT, fm_rank == 2 ? 1 : 0, a);
	h_calls = 1;    /* (not ours to count) */
	h_cls = MPI_ERR_ROOT;
	expect_err("bcast, rank 2 names another root", ret, MPI_ERR_ROOT);
	MPI_Comm_free(&a);

	fm_fini();
	return 0;
}
