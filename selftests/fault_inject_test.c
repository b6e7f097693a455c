// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Fault injection (issue 13), for the debug guest kernel (VM run 'faults',
 * tools/vm/run --kernel debug): a workload -- another selftest binary --
 * runs while some of the kernel allocations made for it fail, in one of
 * two scopes:
 *
 *   kernel  failslab and fail_page_alloc: any slab or page allocation,
 *           sleeping ones included, made with mrpool.ko's text on the
 *           stack (the stack trace filter's require-start/end: the
 *           module's own calls and what the kernel allocates for them,
 *           in ib_core, rxe, the page allocator, shmem, xarrays), at
 *           MRPOOL_FAULT_PROBABILITY percent (default 20). Without the
 *           filter, most failures landed in the workload's own fork,
 *           exec and page tables and never reached the module.
 *   module  the module's own fault attribute, debugfs mrpool/fail_alloc
 *           (its objects, chunk pages, MRs, netlink messages): every
 *           MRPOOL_MODULE_FAULT_INTERVAL-th (default 4) allocation fails,
 *           so each error path of the module is reached, deterministically.
 *
 * Only the workload's tasks: it starts with /proc/self/make-it-fail set
 * (its children inherit it) and every attribute is filtered by task, so
 * the rest of the guest and its 9p root are spared. Injection starts when
 * the workload starts its first test (its loader and libraries are in by
 * then) and stops when it ends or is killed.
 *
 * The workload may fail its own assertions: allocations fail under it.
 * Its output is kept as comments. What is checked is the kernel's side:
 * failures were injected, and afterwards the pool is whole (nothing used
 * or quarantined, every chunk accounted for) and rxe0 holds what it held
 * before. The VM run checks the rest: no kernel report (KASAN, lockdep,
 * list corruption, ...), rmmod mrpool after the job, and no kmemleak
 * finding (tools/vm/guest.sh on the debug kernel).
 *
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

/* The fault attributes of one scope, under debugfs. */
struct fi_scope {
	const char *name;
	const char *attrs[2];
	unsigned int n;
};

static const struct fi_scope fi_kernel = {
	"kernel", { "failslab", "fail_page_alloc" }, 2,
};

static const struct fi_scope fi_module = {
	"module", { "mrpool/fail_alloc" }, 1,
};

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
 * Every attribute of both scopes armed for tasks with make-it-fail only,
 * at probability 0 until fi_probability(); the kernel's fail sleeping
 * allocations too and spare user pages (highmem-capable allocations),
 * not kernel pages of any order; the module's every @interval-th of its
 * allocations. Returns 0 or the first -errno.
 */
static int fi_setup(const char *interval)
{
	static const char *const knobs[][2] = {
		{ "probability", "0" }, { "space", "0" }, { "verbose", "0" },
		{ "task-filter", "Y" },
	};
	const struct fi_scope *scopes[] = { &fi_kernel, &fi_module };
	unsigned int a, k, i;
	char times[32];
	int ret;

	snprintf(times, sizeof(times), "%d", FI_TIMES);
	for (i = 0; i < ARRAY_SIZE(scopes); i++) {
		for (a = 0; a < scopes[i]->n; a++) {
			const char *attr = scopes[i]->attrs[a];

			for (k = 0; k < ARRAY_SIZE(knobs); k++) {
				ret = fi_set(attr, knobs[k][0], knobs[k][1]);
				if (ret)
					return ret;
			}
			ret = fi_set(attr, "times", times);
			if (!ret)
				ret = fi_set(attr, "interval", scopes[i] ==
					     &fi_module ? interval : "1");
			if (ret)
				return ret;
		}
	}
	ret = fi_set("failslab", "ignore-gfp-wait", "N");
	if (!ret)
		ret = fi_set("failslab", "cache-filter", "N");
	if (!ret)
		ret = fi_set("fail_page_alloc", "ignore-gfp-wait", "N");
	if (!ret)
		ret = fi_set("fail_page_alloc", "ignore-gfp-highmem", "Y");
	if (!ret)
		ret = fi_set("fail_page_alloc", "min-order", "0");
	return ret;
}

/*
 * mrpool.ko's text: from its lowest text symbol in /proc/kallsyms to its
 * lowest data symbol above that (a module's core text comes first, then
 * its read-only data and data; its init text is gone after the load).
 * 0 or -errno.
 */
static int fi_module_text(unsigned long long *start, unsigned long long *end)
{
	char line[512], type, name[256], mod[64];
	unsigned long long a, lo = ~0ULL, data = ~0ULL;
	FILE *f = fopen("/proc/kallsyms", "re");

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx %c %255s %63s", &a, &type, name, mod) != 4 ||
		    strcmp(mod, "[mrpool]") || !a)
			continue;
		if (type == 't' || type == 'T')
			lo = a < lo ? a : lo;
		else if (strchr("rRdDbB", type))
			data = a < data ? a : data;
	}
	fclose(f);
	if (lo == ~0ULL || data == ~0ULL || data <= lo)
		return -ENOENT;
	*start = lo;
	*end = data;
	return 0;
}

/*
 * The kernel scope's attributes fail only allocations with mrpool.ko's
 * text among the stack's innermost 32 return addresses.
 */
static int fi_module_stacks(void)
{
	unsigned long long start, end;
	char val[32];
	unsigned int a;
	int ret = fi_module_text(&start, &end);

	for (a = 0; !ret && a < fi_kernel.n; a++) {
		snprintf(val, sizeof(val), "%llu", start);
		ret = fi_set(fi_kernel.attrs[a], "require-start", val);
		snprintf(val, sizeof(val), "%llu", end);
		if (!ret)
			ret = fi_set(fi_kernel.attrs[a], "require-end", val);
		if (!ret)
			ret = fi_set(fi_kernel.attrs[a], "stacktrace-depth", "32");
	}
	return ret;
}

/* Failures injected by @scope's attributes since fi_setup(). */
static long long fi_injected(const struct fi_scope *scope)
{
	long long n = 0;
	unsigned int a;

	for (a = 0; a < scope->n; a++)
		n += FI_TIMES - fi_get(scope->attrs[a], "times");
	return n;
}

/* @pct for @scope's attributes, 0 for the other scope's. */
static void fi_probability(const struct fi_scope *scope, const char *pct)
{
	const struct fi_scope *scopes[] = { &fi_kernel, &fi_module };
	unsigned int a, i;

	for (i = 0; i < ARRAY_SIZE(scopes); i++)
		for (a = 0; a < scopes[i]->n; a++)
			fi_set(scopes[i]->attrs[a], "probability",
			       scopes[i] == scope ? pct : "0");
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
static int run_workload(const char *path, const char *env,
			const struct fi_scope *scope, const char *pct,
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
			fi_probability(NULL, "0");
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
				fi_probability(scope, pct);
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
	fi_probability(NULL, "0");
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
	bool module;		/* the module's fail_alloc, else the kernel's */
};

/*
 * Each workload in both scopes: the UAPI fuzzer (every ioctl, mmap and
 * teardown path, short form); ALLOC, FREE, QUERY and limits (the slice
 * paths); mappings of slices (fault, split, unmap, fork); chunk
 * registration on rxe0 and RDMA through the pool; processes killed while
 * holding pools, MRs, slices and dma-bufs.
 */
#define FI_VARIANTS(scope, is_module)					\
FIXTURE_VARIANT_ADD(faults, fuzz_##scope) {				\
	.bin = "uapi_fuzz_test", .env = "MRPOOL_FUZZ_CALLS=10000",	\
	.secs = 900, .module = is_module,				\
};									\
FIXTURE_VARIANT_ADD(faults, ioctl_##scope) {				\
	.bin = "pool_ioctl_test", .secs = 900, .module = is_module,	\
};									\
FIXTURE_VARIANT_ADD(faults, mmap_##scope) {				\
	.bin = "pool_mmap_test", .secs = 900, .module = is_module,	\
};									\
FIXTURE_VARIANT_ADD(faults, rdma_##scope) {				\
	.bin = "pool_rdma_test", .secs = 900, .module = is_module,	\
};									\
FIXTURE_VARIANT_ADD(faults, kill_storm_##scope) {			\
	.bin = "kill_storm_test", .env = "MRPOOL_KILLS=20",		\
	.secs = 900, .module = is_module,				\
}

FI_VARIANTS(module, true);
FI_VARIANTS(kernel, false);

FIXTURE_SETUP(faults)
{
	const char *interval = getenv("MRPOOL_MODULE_FAULT_INTERVAL");

	self->fd = -1;
	if (access(FI_DEBUGFS "/failslab", F_OK) ||
	    access(FI_DEBUGFS "/fail_page_alloc", F_OK))
		POOL_SETUP_SKIP("no fault injection in debugfs: use --kernel debug");
	if (access("/proc/self/make-it-fail", F_OK))
		POOL_SETUP_SKIP("no /proc/self/make-it-fail");
	POOL_SETUP_OPEN();
	/* The fault kernel has it: a module built without it is a failure. */
	ASSERT_EQ(0, access(FI_DEBUGFS "/mrpool/fail_alloc", F_OK))
		TH_LOG("mrpool.ko built without CONFIG_FAULT_INJECTION_DEBUG_FS");
	ASSERT_EQ(0, rdma_res_of("rxe0", &self->res0));
	ASSERT_EQ(0, fi_setup(interval && *interval ? interval : "4"));
	/* The fault kernel has the stack trace filter: else a failure. */
	ASSERT_EQ(0, fi_module_stacks())
		TH_LOG("no require-start/end for mrpool.ko's text (CONFIG_FAULT_INJECTION_STACKTRACE_FILTER?)");
	ASSERT_EQ(0, prctl(PR_SET_CHILD_SUBREAPER, 1));
}

FIXTURE_TEARDOWN(faults)
{
	if (self->fd >= 0) {
		fi_probability(NULL, "0");
		close(self->fd);
	}
}

/* The workload under injected failures; the pool and rxe0 whole after. */
TEST_F(faults, workload)
{
	const struct fi_scope *scope = variant->module ? &fi_module : &fi_kernel;
	const char *pct = getenv("MRPOOL_FAULT_PROBABILITY");
	long long injected;
	struct mrpool_query q;
	struct rdma_res r;
	char path[PATH_MAX];
	struct run run;

	POOL_SETUP_SKIPPED();
	if (variant->module)
		pct = "100";	/* every interval-th */
	else if (!pct || !*pct)
		pct = "20";
	pool_beside_self(path, sizeof(path), variant->bin);
	ASSERT_EQ(0, access(path, X_OK)) TH_LOG("%s not built", path);
	TH_LOG("%s%s%s under %s (scope %s) at %s%%, interval %lld",
	       variant->bin, variant->env ? " with " : "",
	       variant->env ?: "", variant->module ? "mrpool/fail_alloc" :
	       "failslab and fail_page_alloc", scope->name, pct,
	       fi_get(scope->attrs[0], "interval"));
	ASSERT_EQ(0, run_workload(path, variant->env, scope, pct,
				  variant->secs, &run));

	injected = fi_injected(scope);
	TH_LOG("workload: %s %d%s; its own results %u ok, %u not ok; "
	       "injected %lld allocation failures (%s)",
	       WIFSIGNALED(run.status) ? "killed by signal" : "exit status",
	       WIFSIGNALED(run.status) ? WTERMSIG(run.status) :
	       WEXITSTATUS(run.status),
	       run.killed ? " (outlived its bound)" : "",
	       run.passed, run.failed, injected, scope->name);
	EXPECT_TRUE(run.started)
		TH_LOG("the workload never started a test: nothing injected");
	EXPECT_LT(0, injected);
	/* The other scope was off: nothing of it counted. */
	EXPECT_EQ(0, fi_injected(variant->module ? &fi_kernel : &fi_module));

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
