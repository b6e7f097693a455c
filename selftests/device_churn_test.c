// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Device churn (issue 13): an rxe device is added and deleted at least
 * MRPOOL_CHURN_CYCLES times (default 50), and for as long as the test
 * binaries in MRPOOL_CHURN_WITH (a comma list, paths from the repository
 * top; default the UAPI fuzzer and the kill storm) run beside it, so the
 * pool registers growing chunks with a device that comes and goes under
 * allocations, frees, exits and kills.
 * Each cycle waits for the module to report the new device ready with
 * every chunk, then deletes it and waits for it to leave the module's
 * list. The binaries beside run as they do alone (their own checks, their
 * own end state, their own MRPOOL_* settings) and must pass; afterwards
 * the churned device is gone and rxe0 is ready with every chunk.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop
#pragma GCC diagnostic ignored "-Wclobbered"

#define POOL_TEST_UNBOUNDED
#include "ib_util.h"

#define DEV		"mrch0"

#define MAX_WITH	4

/* A test binary run beside the churn, its output into its own log. */
struct beside {
	const char *path;	/* relative to the repository top, as run.sh runs */
	char log[128];
	pid_t pid;
	int status;
};

static pid_t run_beside(struct beside *b)
{
	const char *base = strrchr(b->path, '/');

	snprintf(b->log, sizeof(b->log), "/tmp/churn-%s.log",
		 base ? base + 1 : b->path);
	b->pid = fork();
	if (b->pid)
		return b->pid;
	if (!freopen(b->log, "w", stdout) || dup2(fileno(stdout), 2) < 0)
		_exit(126);
	/* Pool-wide end states are checked here, once all have finished. */
	setenv("MRPOOL_SHARED_POOL", "1", 1);
	execl(b->path, b->path, (char *)NULL);
	_exit(127);
}

/* Reap @b if it has finished; true while it runs. */
static bool beside_running(struct beside *b)
{
	if (b->pid > 0 && waitpid(b->pid, &b->status, WNOHANG) == b->pid)
		b->pid = 0;
	return b->pid > 0;
}

/*
 * A finished helper's log as TAP comments: all of it when it failed, else
 * the lines that say what it did (calls, kills, seed).
 */
static void show_log(const char *log, bool all)
{
	char line[1024];
	FILE *f = fopen(log, "re");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (all || (strstr(line, ": seed ") || strstr(line, " calls, ") ||
			    strstr(line, " kills, ")))
			fprintf(stderr, "#   %s", line);
	fclose(f);
}

static bool dev_ready(const char *dev)
{
	char state[32];

	dev_str(dev, "state", state, sizeof(state));
	return !strcmp(state, "ready");
}

static bool dev_ready_with_all(const char *dev)
{
	char state[32];

	dev_str(dev, "state", state, sizeof(state));
	return !strcmp(state, "ready") && dev_ll(dev, "chunks") == pool_chunks();
}

FIXTURE(churn) {
	struct beside b[MAX_WITH];
	unsigned int n;
	int fd;
};

FIXTURE_SETUP(churn)
{
	self->n = 0;
	self->fd = -1;
	if (access(IB_SYSFS, F_OK))
		POOL_SETUP_SKIP("mrpool.ko not loaded");
	if (system("command -v rdma >/dev/null 2>&1"))
		POOL_SETUP_SKIP("the rdma tool (iproute2) is missing");
	if (dev_listed(DEV))
		link_del(DEV);
}

/* Whatever failed: no device left behind, nothing left running beside. */
FIXTURE_TEARDOWN(churn)
{
	unsigned int i;

	for (i = 0; i < self->n; i++)
		if (self->b[i].pid > 0) {
			kill(self->b[i].pid, SIGKILL);
			waitpid(self->b[i].pid, NULL, 0);
		}
	if (dev_listed(DEV))
		link_del(DEV);
	if (self->fd >= 0)
		close(self->fd);
}

TEST_F(churn, beside_fuzzer_and_storm)
{
	const char *env = getenv("MRPOOL_CHURN_CYCLES");
	const char *with = getenv("MRPOOL_CHURN_WITH");
	unsigned int cycles = env ? (unsigned int)strtoul(env, NULL, 0) : 50;
	unsigned int c, i, ready = 0, alive;
	struct beside *b = self->b;
	long long avail0;
	struct mrpool_query base, q;
	struct rdma_res res0;
	char list[512], *tok, *save;

	POOL_SETUP_SKIPPED();
	/* The baseline: nothing held (run.sh runs one binary at a time). */
	self->fd = pool_open();
	ASSERT_LE(0, self->fd);
	memset(&base, 0, sizeof(base));
	ASSERT_TRUE(POOL_WAIT(pool_back_to(self->fd, &base, &q), 120000));
	base = q;
	ASSERT_EQ(0, rdma_res_of("rxe0", &res0));
	avail0 = pool_mem_available() + (long long)base.total_bytes;
	snprintf(list, sizeof(list), "%s", with ? with :
		 "selftests/uapi_fuzz_test,selftests/kill_storm_test");
	for (tok = strtok_r(list, ",", &save); tok && self->n < MAX_WITH;
	     tok = strtok_r(NULL, ",", &save)) {
		b[self->n].path = tok;
		ASSERT_EQ(0, access(tok, X_OK)) TH_LOG("%s not built", tok);
		ASSERT_LT(0, run_beside(&b[self->n]));
		self->n++;
	}

	/* At least @cycles, and for as long as anything runs beside. */
	for (c = 0;; c++) {
		for (i = 0, alive = 0; i < self->n; i++)
			alive += beside_running(&b[i]);
		if (c >= cycles && !alive)
			break;
		ASSERT_EQ(0, link_add(DEV)) TH_LOG("cycle %u: rdma link add", c);
		/*
		 * Ready: by the module's word every chunk is registered and
		 * new ones follow (ABI/sysfs-mrpool-devices). While the
		 * fuzzer grows and frees the pool, the device's count trails
		 * the pool's by the chunks in flight, so equality is asked
		 * for once the pool holds still (after the loop). The wait
		 * only catches a hang.
		 */
		if (POOL_WAIT(dev_ready(DEV), 300000))
			ready++;
		/* Returns once the device's users (none but the module) left. */
		ASSERT_EQ(0, link_del(DEV)) TH_LOG("cycle %u: rdma link delete", c);
		ASSERT_TRUE(POOL_WAIT(!dev_listed(DEV), 60000))
			TH_LOG("cycle %u: %s still listed by the module", c, DEV);
	}
	TH_LOG("%u add/delete cycles, %u of them ready, beside %s", c, ready,
	       with ? with : "the fuzzer and the storm");
	EXPECT_EQ(c, ready);
	/* Nothing runs beside now: one more, ready with every chunk. */
	ASSERT_EQ(0, link_add(DEV));
	EXPECT_TRUE(POOL_WAIT(dev_ready_with_all(DEV), 300000))
		TH_LOG("%s: %lld chunks registered, the pool holds %lld", DEV,
		       dev_ll(DEV, "chunks"), pool_chunks());
	ASSERT_EQ(0, link_del(DEV));
	ASSERT_TRUE(POOL_WAIT(!dev_listed(DEV), 60000));
	for (i = 0; i < self->n; i++) {
		bool ok = WIFEXITED(b[i].status) && !WEXITSTATUS(b[i].status);

		TH_LOG("%s: %s", b[i].path, ok ? "passed" : "FAILED");
		show_log(b[i].log, !ok);
		EXPECT_TRUE(ok);
		unlink(b[i].log);
	}
	EXPECT_FALSE(dev_listed(DEV));
	EXPECT_TRUE(POOL_WAIT(dev_ready_with_all("rxe0"), 60000));

	/* Everything beside has exited: the pool is whole, rxe0 holds what it
	 * held, and the kernel has its memory back (as in kill_storm_test). */
	EXPECT_ALL_BACK(self->fd, &base, &res0, avail0);
}

TEST_HARNESS_MAIN
