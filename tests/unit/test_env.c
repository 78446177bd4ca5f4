/* tests/unit/test_env.c - the job name, rank and size ferry_open takes from
 * a launcher's environment (client/conn.c), in the environments that srun,
 * sbatch, salloc and mpirun make: the variables as tests/launch/ saw them
 * under Slurm 22.05 and Open MPI 4.1 (README, "Launching"). */
#define UNIT "env"
#include "check.h"
#include "../../client/conn.c"
#include "../../client/recv.c"
#include "../../client/send.c"
#include "../../client/poll.c"
#include "../../client/coll.c"      /* conn.c hands COLL_DONE to it */
#include "../../client/mem.c"

#include <stdlib.h>

static const char *const all_vars[] = {
	"FERRY_JOB", "FERRY_RANK", "FERRY_SIZE", "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_PROCID",
	"SLURM_NTASKS", "SLURM_LOCALID", "SLURM_HET_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
	"PMIX_RANK", "PMIX_NAMESPACE", "PMI_RANK", "PMI_SIZE", NULL,
};

/* env("A=1", "B=2", NULL): exactly these of all_vars set. */
static void env(const char *first, ...)
{
	va_list ap;

	for (int i = 0; all_vars[i]; i++)
		unsetenv(all_vars[i]);
	va_start(ap, first);
	for (const char *kv = first; kv; kv = va_arg(ap, const char *))
		putenv((char *)kv);
	va_end(ap);
}

static int rank, size;
static char job[64];

/* ranks: conn_ranks_from_env's result; job: conn_job_from_env's. */
static int ranks(void)
{
	rank = size = -1;
	return conn_ranks_from_env(&rank, &size);
}

static int name(void)
{
	strcpy(job, "?");
	return conn_job_from_env(job, sizeof(job));
}

/* FOUND(R, P, NAME): the environment gives rank R, size P and job NAME. */
#define FOUND(r, p, n) do {                                                      \
	CHECK_EQ(ranks(), 0);                                                    \
	CHECK_EQ(rank, r);                                                       \
	CHECK_EQ(size, p);                                                       \
	CHECK_EQ(name(), 0);                                                     \
	CHECK(strcmp(job, n) == 0);                                              \
} while (0)

TEST(srun_step)
{
	env("SLURM_JOB_ID=7", "SLURM_STEP_ID=2", "SLURM_PROCID=3", "SLURM_NTASKS=8", "SLURM_LOCALID=1", NULL);
	FOUND(3, 8, "slurm-7.2");
}

/* srun's heterogeneous steps (srun A : B): one job id, job-wide ranks. */
TEST(srun_heterogeneous_step)
{
	env("SLURM_JOB_ID=1", "SLURM_STEP_ID=0", "SLURM_PROCID=2", "SLURM_NTASKS=3", "SLURM_HET_SIZE=2", NULL);
	FOUND(2, 3, "slurm-1.0");
}

/* The batch script (and salloc's shell) has SLURM_PROCID 0 and the
 * allocation's SLURM_NTASKS but no step: it is not rank 0 of that many,
 * and not step 0 (whose ranks would have it as a rank twice). */
TEST(batch_script_is_no_step)
{
	env("SLURM_JOB_ID=3", "SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_LOCALID=0", NULL);
	CHECK_EQ(ranks(), -EINVAL);
	CHECK(strstr(ferry_last_error(), "srun") != NULL);
	CHECK_EQ(name(), -EINVAL);
	CHECK(strstr(ferry_last_error(), "SLURM_STEP_ID") != NULL);
	/* Slurm's special steps (here the batch step, 0xfffffffb) neither */
	env("SLURM_JOB_ID=3", "SLURM_STEP_ID=4294967291", "SLURM_PROCID=0", "SLURM_NTASKS=4", NULL);
	CHECK_EQ(ranks(), -EINVAL);
	CHECK_EQ(name(), -EINVAL);
	/* what the user says still goes */
	env("SLURM_JOB_ID=3", "SLURM_PROCID=0", "SLURM_NTASKS=4", "FERRY_JOB=mine", "FERRY_RANK=1",
	    "FERRY_SIZE=2", NULL);
	FOUND(1, 2, "mine");
}

/* mpirun in an allocation starts its daemons with srun: its ranks inherit
 * that step's variables, which count daemons, not ranks. */
TEST(mpirun_inside_slurm)
{
	env("SLURM_JOB_ID=9", "SLURM_STEP_ID=0", "SLURM_PROCID=1", "SLURM_NTASKS=3", "OMPI_COMM_WORLD_RANK=5",
	    "OMPI_COMM_WORLD_SIZE=8", "PMIX_RANK=5", "PMIX_NAMESPACE=prterun-node00-123@1", NULL);
	FOUND(5, 8, "prterun-node00-123@1");
}

TEST(mpirun)
{
	env("OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=1", "PMIX_RANK=0", "PMIX_NAMESPACE=1234@1", NULL);
	FOUND(0, 1, "1234@1");
}

/* srun --mpi=pmix: PMIx's variables beside Slurm's (PMIx has no size in the
 * environment); one name for every rank either way. */
TEST(srun_pmix)
{
	env("SLURM_JOB_ID=1", "SLURM_STEP_ID=0", "SLURM_PROCID=1", "SLURM_NTASKS=2", "PMIX_RANK=1",
	    "PMIX_NAMESPACE=slurm.pmix.1.0", NULL);
	FOUND(1, 2, "slurm-1.0");
}

/* MPICH's hydra under Slurm: its proxies are srun's tasks, the ranks they
 * start carry a proxy's SLURM_PROCID (0 on every rank of its node) and
 * their own PMI_RANK: Slurm's numbers are not theirs. */
TEST(hydra_inside_slurm)
{
	env("SLURM_JOB_ID=4", "SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_NTASKS=2", "PMI_RANK=3", "PMI_SIZE=4", NULL);
	CHECK_EQ(ranks(), -EINVAL);
	CHECK(strstr(ferry_last_error(), "PMI_RANK") != NULL);
	CHECK_EQ(name(), -EINVAL);
	env("SLURM_JOB_ID=4", "SLURM_STEP_ID=0", "SLURM_PROCID=1", "SLURM_NTASKS=2", "PMIX_RANK=7", NULL);
	CHECK_EQ(ranks(), -EINVAL);
	/* ... the same, with FERRY_* set by the user: fine */
	env("FERRY_JOB=h", "FERRY_RANK=3", "FERRY_SIZE=4", "SLURM_JOB_ID=4", "SLURM_STEP_ID=0", "SLURM_PROCID=0",
	    "SLURM_NTASKS=2", "PMI_RANK=3", NULL);
	FOUND(3, 4, "h");
}

/* OMPI_COMM_WORLD_RANK without its size is no Open MPI launch: rank and
 * job name from one launcher (here Slurm's step), never one from each. */
TEST(half_of_open_mpi)
{
	env("SLURM_JOB_ID=5", "SLURM_STEP_ID=1", "SLURM_PROCID=1", "SLURM_NTASKS=2", "OMPI_COMM_WORLD_RANK=1", NULL);
	FOUND(1, 2, "slurm-5.1");
}

TEST(ferry_variables_win)
{
	env("FERRY_JOB=j", "FERRY_RANK=1", "FERRY_SIZE=4", "SLURM_JOB_ID=1", "SLURM_STEP_ID=0", "SLURM_PROCID=0",
	    "SLURM_NTASKS=2", "OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "PMIX_NAMESPACE=x", NULL);
	FOUND(1, 4, "j");
}

TEST(nothing_or_nonsense)
{
	env(NULL);
	CHECK_EQ(ranks(), -EINVAL);
	CHECK(strstr(ferry_last_error(), "FERRY_RANK") != NULL);
	CHECK_EQ(name(), -EINVAL);
	env("SLURM_JOB_ID=1", "SLURM_STEP_ID=0", "SLURM_PROCID=x", "SLURM_NTASKS=2", NULL);
	CHECK_EQ(ranks(), -EINVAL);
	CHECK(strstr(ferry_last_error(), "not a number") != NULL);
	env("SLURM_JOB_ID=1", "SLURM_STEP_ID=x", "SLURM_PROCID=0", "SLURM_NTASKS=2", NULL);
	CHECK_EQ(ranks(), -EINVAL);
	CHECK_EQ(name(), -EINVAL);
}

int main(void)
{
	RUN(srun_step);
	RUN(srun_heterogeneous_step);
	RUN(batch_script_is_no_step);
	RUN(mpirun_inside_slurm);
	RUN(mpirun);
	RUN(srun_pmix);
	RUN(hydra_inside_slurm);
	RUN(half_of_open_mpi);
	RUN(ferry_variables_win);
	RUN(nothing_or_nonsense);
	return check_done();
}
