/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Runs tests/prefork_server.c once without libmrpool-preload and once
 * under it and compares the two, for the host's preload_prog_test
 * (anonymous backend, the shim preloaded directly) and the guest's
 * selftests/preload_prefork_test (the kernel's pool, through
 * mrpool-run): each harness says only how its child starts the program.
 * Needs kselftest_harness.h included first.
 */
#ifndef MRP_PREFORK_RUNNER_H
#define MRP_PREFORK_RUNNER_H

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct prefork_run {
	int status;		/* waitpid()'s, -1 if it did not start */
	char out[1024];		/* the program's stdout */
	char report[1 << 16];	/* the shim's report, a line per process (sh, cat too) */
};

/*
 * The child's side of prefork_run(): stdout already redirected, start the
 * program in @mode, under the shim (its report to @report) when @shim.
 * Returns only if the exec failed.
 */
typedef void prefork_exec_fn(const char *mode, bool shim, const char *report);

/* @path's text into @buf (cut at @len), then @path removed. */
static inline void prefork_slurp(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n = fd < 0 ? 0 : read(fd, buf, len - 1);

	buf[n > 0 ? n : 0] = 0;
	if (fd >= 0)
		close(fd);
	unlink(path);
}

/* The program in @mode through @exec, with @env ("K=V", or NULL) added. */
static inline void prefork_run(prefork_exec_fn *exec, const char *mode,
			       bool shim, const char *env, struct prefork_run *r)
{
	char out[] = "/tmp/mrp_prog_out.XXXXXX", rep[] = "/tmp/mrp_prog_rep.XXXXXX";
	int ofd = mkstemp(out), rfd = mkstemp(rep);
	pid_t pid;

	r->status = -1;
	r->out[0] = 0;
	r->report[0] = 0;
	if (ofd < 0 || rfd < 0)
		return;
	close(rfd);
	pid = fork();
	if (pid == 0) {
		dup2(ofd, STDOUT_FILENO);
		if (env)
			putenv((char *)env);
		exec(mode, shim, rep);
		_exit(127);
	}
	close(ofd);
	if (pid > 0)
		waitpid(pid, &r->status, 0);
	prefork_slurp(out, r->out, sizeof(r->out));
	prefork_slurp(rep, r->report, sizeof(r->report));
}

/* The sum of a report field over every process's line. */
static inline unsigned long long prefork_report_sum(const char *report, const char *name)
{
	unsigned long long sum = 0;

	for (const char *s = report; (s = strstr(s, name)); s += strlen(name))
		sum += strtoull(s + strlen(name), NULL, 10);
	return sum;
}

/* The two runs printed the same first line (the program's result). */
static inline void prefork_expect_same_line(struct __test_metadata *_metadata,
					    const struct prefork_run *plain,
					    const struct prefork_run *shim)
{
	size_t na = strcspn(plain->out, "\n"), nb = strcspn(shim->out, "\n");
	char a[512], b[512];

	snprintf(a, sizeof(a), "%.*s", (int)na, plain->out);
	snprintf(b, sizeof(b), "%.*s", (int)nb, shim->out);
	EXPECT_STREQ(a, b);
}

/*
 * Two runs that both exited 0: the same result line; the blocks were
 * glibc's in the plain run and the pool's under the shim (@pool_line,
 * "pool-like blocks N of N"), whose report names @backend (": backend
 * anon,") and counts at least @min_forks forks with pool blocks live.
 */
static inline void prefork_expect_same(struct __test_metadata *_metadata,
				       const struct prefork_run *plain,
				       const struct prefork_run *shim,
				       const char *pool_line, const char *backend,
				       unsigned long long min_forks)
{
	prefork_expect_same_line(_metadata, plain, shim);
	EXPECT_NE(NULL, strstr(plain->out, "pool-like blocks 0 of")) TH_LOG("%s", plain->out);
	EXPECT_NE(NULL, strstr(shim->out, pool_line)) TH_LOG("%s", shim->out);
	EXPECT_NE(NULL, strstr(shim->report, backend)) TH_LOG("%s", shim->report);
	EXPECT_LE(min_forks, prefork_report_sum(shim->report, "forks with pool blocks "))
		TH_LOG("%s", shim->report);
}

#endif /* MRP_PREFORK_RUNNER_H */
