// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Fault injection (issue 13), for the debug guest kernel (VM run 'faults',
 * tools/vm/run --kernel debug): a workload -- another selftest binary --
 * runs while failslab and fail_page_alloc fail some of its kernel
 * allocations, sleeping ones included. Only its own tasks: it starts with
 * /proc/self/make-it-fail set (its children inherit it) and both are
 * filtered by task, so the rest of the guest and its 9p root are spared.
 * Injection starts when the workload starts its first test (its loader
 * and libraries are in by then) and stops when it ends or is killed.
 *
 * The workload may fail its own assertions: allocations fail under it.
 * Its output is kept as comments. What is checked is the kernel's side:
 * failures were injected, and afterwards the pool is whole (nothing used
 * or quarantined, every chunk accounted for) and rxe0 holds what it held
 * before. The VM run checks the rest: no kernel report (KASAN, lockdep,
 * list corruption, ...), rmmod mrpool after the job, and no kmemleak
 * finding (tools/vm/guest.sh on the debug kernel).
 *
 * MRPOOL_FAULT_PROBABILITY (percent, default 5) for both.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop

#define POOL_TEST_UNBOUNDED
#include "ib_util.h"

#define FI_DEBUGFS	"/sys/kernel/debug"
#define FI_TIMES	1000000	/* a budget never spent: what is left counts */

static const char *const fi_attrs[] = { "failslab", "fail_page_alloc" };

static int fi_set(const char *attr, const char *knob, const char *val)
{
	char path[256];

	snprintf(path, sizeof(path), FI_DEBUGFS "/%s/%s", attr, knob);
	return pool_write_str(path, val);
}

static long long fi_get(const char *attr, const char *knob)
{
	char path[256];

	snprintf(path, sizeof(path), FI_DEBUGFS "/%s/%s", attr, knob);
	return pool_read_ll(path);
}

/*
 * Both capabilities armed for tasks with make-it-fail only, failing
 * sleeping allocations too, at probability 0 until fi_on(); user pages
 * (highmem-capable allocations) are spared, kernel pages of any order
 * are not. Returns 0 or the first -errno.
 */
static int fi_setup(void)
{
	static const char *const knobs[][2] = {
		{ "probability", "0" }, { "interval", "1" }, { "space", "0" },
		{ "verbose", "0" }, { "task-filter", "Y" },
		{ "ignore-gfp-wait", "N" },
	};
	char times[32];
	unsigned int a, k;
	int ret;

	snprintf(times, sizeof(times), "%d", FI_TIMES);
	for (a = 0; a < ARRAY_SIZE(fi_attrs); a++) {
		for (k = 0; k < ARRAY_SIZE(knobs); k++) {
			ret = fi_set(fi_attrs[a], knobs[k][0], knobs[k][1]);
			if (ret)
				return ret;
		}
		ret = fi_set(fi_attrs[a], "times", times);
		if (ret)
			return ret;
	}
	ret = fi_set("failslab", "cache-filter", "N");
	if (!ret)
		ret = fi_set("fail_page_alloc", "ignore-gfp-highmem", "Y");
	if (!ret)
		ret = fi_set("fail_page_alloc", "min-order", "0");
	return ret;
}

static void fi_probability(const char *pct)
{
	unsigned int a;

	for (a = 0; a < ARRAY_SIZE(fi_attrs); a++)
		fi_set(fi_attrs[a], "probability", pct);
}

/* The workload binary, beside this one. */
static int bin_path(char *buf, size_t len, const char *name)
{
	char exe[PATH_MAX], *slash;
	ssize_t n;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -1;
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	return snprintf(buf, len, "%s/%s", exe, name) >= (int)len ? -1 : 0;
}

/* The child: make-it-fail, then the workload, its output on @out. */
static void spawn_workload(const char *path, const char *env, int out)
{
	int fd;

	setsid();
	dup2(out, STDOUT_FILENO);
	dup2(out, STDERR_FILENO);
	fd = open("/proc/self/make-it-fail", O_WRONLY);
	if (fd < 0 || write(fd, "1", 1) != 1) {
		dprintf(out, "cannot set /proc/self/make-it-fail: %s\n",
			strerror(errno));
		_exit(126);
	}
	close(fd);
	if (env && putenv((char *)env)) {
		dprintf(out, "putenv %s: %s\n", env, strerror(errno));
		_exit(126);
	}
	execl(path, path, (char *)NULL);
	dprintf(out, "exec %s: %s\n", path, strerror(errno));
	_exit(127);
}

/* SIGKILL to every child of this process (the workload's orphans too). */
static void kill_children(void)
{
	char path[300], line[512], *rp;
	struct dirent *d;
	int ppid;
	DIR *dir;
	FILE *f;

	dir = opendir("/proc");
	while (dir && (d = readdir(dir))) {
		snprintf(path, sizeof(path), "/proc/%s/stat", d->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		/* pid (comm) state ppid: comm may hold spaces */
		rp = fgets(line, sizeof(line), f) ? strrchr(line, ')') : NULL;
		if (rp && sscanf(rp + 1, " %*c %d", &ppid) == 1 &&
		    ppid == getpid())
			kill(atoi(d->d_name), SIGKILL);
		fclose(f);
	}
	if (dir)
		closedir(dir);
}

/*
 * Kills and reaps every child left, for up to a minute: one stuck in the
 * kernel shows in the pool checks that follow.
 */
static void reap_all(void)
{
	int i, st;

	for (i = 0; i < 1200; i++) {
		while (waitpid(-1, &st, WNOHANG) > 0)
			;
		if (waitpid(-1, &st, WNOHANG) < 0 && errno == ECHILD)
			return;
		kill_children();
		usleep(50 * 1000);
	}
}

struct run {
	int status;		/* the workload's wait status */
	int killed;		/* it outlived its bound */
	int started;		/* injection was switched on */
	unsigned int passed, failed;	/* its own results, for the log */
};

/*
 * Runs the workload, copying its output as comments; injection on from
 * its first "#  RUN" line until it exits or @secs elapse (then it is
 * killed). Whatever it leaves running is killed and reaped (this process
 * is a child subreaper), so nothing holds its output open.
 */
static int run_workload(const char *path, const char *env, const char *pct,
			int secs, struct run *r)
{
	time_t end = time(NULL) + secs;
	char buf[4096], *line, *nl;
	int p[2], exited = 0;
	size_t have = 0;
	pid_t pid;

	memset(r, 0, sizeof(*r));
	if (pipe2(p, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (!pid) {
		close(p[0]);
		spawn_workload(path, env, p[1]);
	}
	close(p[1]);
	for (;;) {
		struct pollfd pfd = { .fd = p[0], .events = POLLIN };
		ssize_t n;

		if (!exited && waitpid(pid, &r->status, WNOHANG) == pid)
			exited = 1;
		if (!exited && !r->killed && time(NULL) >= end)
			r->killed = 1;
		if (exited || r->killed) {
			fi_probability("0");
			if (!exited)
				kill(pid, SIGKILL);
			kill_children();
		}
		if (poll(&pfd, 1, 1000) <= 0)
			continue;
		n = read(p[0], buf + have, sizeof(buf) - 1 - have);
		if (n <= 0)
			break;	/* every writer gone */
		have += (size_t)n;
		buf[have] = '\0';
		line = buf;
		while ((nl = strchr(line, '\n')) || have == sizeof(buf) - 1) {
			if (nl)
				*nl = '\0';
			printf("# | %s\n", line);
			if (!r->started && !strncmp(line, "#  RUN", 6)) {
				fi_probability(pct);
				r->started = 1;
			}
			if (!strncmp(line, "ok ", 3))
				r->passed++;
			else if (!strncmp(line, "not ok ", 7))
				r->failed++;
			if (!nl) {
				line = buf + have;
				break;
			}
			line = nl + 1;
		}
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
	}
	fi_probability("0");
	close(p[0]);
	if (!exited)
		waitpid(pid, &r->status, 0);
	reap_all();
	return 0;
}

FIXTURE(faults) {
	int fd;
	struct mrpool_query q0;
	struct rdma_res res0;
};

FIXTURE_VARIANT(faults) {
	const char *bin;
	const char *env;	/* NAME=VALUE for the workload, or NULL */
	int secs;		/* then it is killed (a hang catcher) */
};

/* The UAPI fuzzer: every ioctl, mmap and teardown path, short form. */
FIXTURE_VARIANT_ADD(faults, fuzz) {
	.bin = "uapi_fuzz_test", .env = "MRPOOL_FUZZ_CALLS=10000", .secs = 900,
};

/* ALLOC, FREE, QUERY, limits: the slice paths. */
FIXTURE_VARIANT_ADD(faults, ioctl) {
	.bin = "pool_ioctl_test", .secs = 900,
};

/* Mappings of slices: fault, split, unmap, fork. */
FIXTURE_VARIANT_ADD(faults, mmap) {
	.bin = "pool_mmap_test", .secs = 900,
};

/* Chunk registration on rxe0 and RDMA through the pool. */
FIXTURE_VARIANT_ADD(faults, rdma) {
	.bin = "pool_rdma_test", .secs = 900,
};

/* Processes killed while holding pools, MRs, slices and dma-bufs. */
FIXTURE_VARIANT_ADD(faults, kill_storm) {
	.bin = "kill_storm_test", .env = "MRPOOL_KILLS=20", .secs = 900,
};

FIXTURE_SETUP(faults)
{
	self->fd = -1;
	if (access(FI_DEBUGFS "/failslab", F_OK) ||
	    access(FI_DEBUGFS "/fail_page_alloc", F_OK))
		POOL_SETUP_SKIP("no fault injection in debugfs: use --kernel debug");
	if (access("/proc/self/make-it-fail", F_OK))
		POOL_SETUP_SKIP("no /proc/self/make-it-fail");
	POOL_SETUP_OPEN();
	ASSERT_EQ(0, rdma_res_of("rxe0", &self->res0));
	ASSERT_EQ(0, fi_setup());
	ASSERT_EQ(0, prctl(PR_SET_CHILD_SUBREAPER, 1));
}

FIXTURE_TEARDOWN(faults)
{
	if (self->fd >= 0) {
		fi_probability("0");
		close(self->fd);
	}
}

/* The workload under injected failures; the pool and rxe0 whole after. */
TEST_F(faults, workload)
{
	const char *pct = getenv("MRPOOL_FAULT_PROBABILITY");
	long long slab, page;
	struct mrpool_query q;
	struct rdma_res r;
	char path[PATH_MAX];
	struct run run;

	POOL_SETUP_SKIPPED();
	if (!pct || !*pct)
		pct = "5";
	ASSERT_EQ(0, bin_path(path, sizeof(path), variant->bin));
	ASSERT_EQ(0, access(path, X_OK)) TH_LOG("%s not built", path);
	TH_LOG("%s%s%s under failslab and fail_page_alloc at %s%%",
	       variant->bin, variant->env ? " with " : "",
	       variant->env ?: "", pct);
	ASSERT_EQ(0, run_workload(path, variant->env, pct, variant->secs,
				  &run));

	slab = FI_TIMES - fi_get("failslab", "times");
	page = FI_TIMES - fi_get("fail_page_alloc", "times");
	TH_LOG("workload: %s %d%s; its own results %u ok, %u not ok; "
	       "injected %lld slab and %lld page allocation failures",
	       WIFSIGNALED(run.status) ? "killed by signal" : "exit status",
	       WIFSIGNALED(run.status) ? WTERMSIG(run.status) :
	       WEXITSTATUS(run.status),
	       run.killed ? " (outlived its bound)" : "",
	       run.passed, run.failed, slab, page);
	EXPECT_TRUE(run.started)
		TH_LOG("the workload never started a test: nothing injected");
	EXPECT_LT(0, slab + page);

	/* Nothing of the pool held; the chunks all accounted for. */
	EXPECT_TRUE(POOL_WAIT(!pool_query(self->fd, &q) && !q.used_bytes &&
			      !q.quarantined_bytes &&
			      q.total_bytes == q.free_bytes, 120000))
		TH_LOG("used %llu quarantined %llu free %llu total %llu",
		       (unsigned long long)q.used_bytes,
		       (unsigned long long)q.quarantined_bytes,
		       (unsigned long long)q.free_bytes,
		       (unsigned long long)q.total_bytes);
	EXPECT_TRUE(rdma_res_back("rxe0", &self->res0, &r, 120))
		TH_LOG("rxe0 now: ctx %lld pd %lld cq %lld qp %lld mr %lld; "
		       "before: %lld %lld %lld %lld %lld", r.ctx, r.pd, r.cq,
		       r.qp, r.mr, self->res0.ctx, self->res0.pd,
		       self->res0.cq, self->res0.qp, self->res0.mr);
}

TEST_HARNESS_MAIN
