/* tests/mpi/fm_err.c OUT - errors through libferry-mpi, on communicators
 * whose error handler returns (a handler of the test's that counts its
 * calls and keeps the error class); MPI_COMM_WORLD keeps
 * MPI_ERRORS_ARE_FATAL, so an error raised there ends the run.
 *   - an argument only rank 1 finds wrong (a negative count in a gather):
 *     rank 1's call says MPI_ERR_COUNT at once, the other ranks' gather
 *     fails instead of waiting for ever, and so does the communicator's
 *     next operation on every rank (the group is broken);
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
	expect_err("gather, rank 1's count negative", ret, fm_rank == 1 ? MPI_ERR_COUNT : 0);
	ret = MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_INT, MPI_SUM, a);
	expect_err("the next operation on that communicator", ret, 0);
	MPI_Comm_free(&a);

	fm_fini();
	return 0;
}
