// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * tools/mrpoolctl/mrpoolctl against the live module: what status, metrics
 * and the debugfs views print must follow a slice this test allocates
 * through the ioctl (used bytes by exactly its length, allocs by one),
 * set must change a writable parameter and refuse the rest with exit 1,
 * a missing module is exit 1 with the errno text, usage errors exit 2. The tool runs through popen(), as an operator
 * or a monitoring agent would run it.
 *
 * --json: each command's document parses (python3, from the host root the
 * guest shares) and agrees with the sysfs files it came from; monitor
 * sees an rxe device added and removed, failed and recovered, and the
 * pool's exhaustion.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <limits.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop
/* Test bodies read no local again after the harness longjmps out. */
#pragma GCC diagnostic ignored "-Wclobbered"

#include "ctl_util.h"
#include "ib_util.h"

#define CTL_OUT_MAX	65536

/*
 * The number after "KEY " at the start of a line of @out ("used_bytes 4194304
 * (4 MiB)" from status, "mrpool_used_bytes 4194304" from metrics); -1 when
 * there is no such line. A key followed by '{' (a labelled sample) is not it.
 */
static long long ctl_value(const char *out, const char *key)
{
	size_t klen = strlen(key);
	const char *line = out;

	while (line && *line) {
		if (!strncmp(line, key, klen) && line[klen] == ' ') {
			const char *v = line + klen;

			while (*v == ' ')
				v++;
			return strtoll(v, NULL, 0);
		}
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return -1;
}

/* Does some line of @out contain every one of the words in @words? */
static bool ctl_line_has(const char *out, const char *const *words, int n)
{
	const char *line = out, *end;
	char buf[512];
	int i;

	while (*line) {
		end = strchr(line, '\n');
		if (!end)
			end = line + strlen(line);
		/* Blank-delimited, so " word " matches whole cells only. */
		snprintf(buf, sizeof(buf), " %.*s ", (int)(end - line), line);
		for (i = 0; i < n; i++) {
			char w[128];

			snprintf(w, sizeof(w), " %s ", words[i]);
			if (!strstr(buf, w))
				break;
		}
		if (i == n)
			return true;
		line = *end ? end + 1 : end;
	}
	return false;
}

/* Devices whose /sys/module/mrpool/devices/<dev>/state says "ready". */
static long long ctl_ready_devices(void)
{
	char path[512], state[32];
	long long n = 0;
	struct dirent *de;
	DIR *d;
	FILE *f;

	d = opendir("/sys/module/mrpool/devices");
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/module/mrpool/devices/%s/state",
			 de->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fscanf(f, "%31s", state) == 1 && !strcmp(state, "ready"))
			n++;
		fclose(f);
	}
	closedir(d);
	return n;
}

/*
 * Prometheus text format as written by the tool: every sample's family
 * has a TYPE line before it, no family is declared twice, and samples are
 * "mrpool_NAME[{labels}] INTEGER". Returns the number of samples, or -1
 * with the offending line in @bad.
 */
static int ctl_check_exposition(const char *out, char *bad, size_t badlen)
{
	char families[128][96], line[512], name[96], type[32];
	int nfam = 0, samples = 0, i;
	const char *p = out, *end;
	long long v;
	char *tail;

	while (*p) {
		end = strchr(p, '\n');
		if (!end)
			end = p + strlen(p);
		snprintf(line, sizeof(line), "%.*s", (int)(end - p), p);
		p = *end ? end + 1 : end;
		snprintf(bad, badlen, "%s", line);
		if (!strncmp(line, "# HELP ", 7))
			continue;
		if (sscanf(line, "# TYPE %95s %31s", name, type) == 2) {
			if (strncmp(name, "mrpool_", 7) ||
			    (strcmp(type, "gauge") && strcmp(type, "counter")))
				return -1;
			for (i = 0; i < nfam; i++)
				if (!strcmp(families[i], name))
					return -1;
			if (nfam == 128)
				return -1;
			snprintf(families[nfam++], sizeof(families[0]), "%s",
				 name);
			continue;
		}
		if (sscanf(line, "%95[a-z0-9_]", name) != 1 ||
		    strncmp(name, "mrpool_", 7))
			return -1;
		/* A sample belongs to the family declared last. */
		if (!nfam || strcmp(families[nfam - 1], name))
			return -1;
		tail = line + strlen(name);
		if (*tail == '{') {
			tail = strchr(tail, '}');
			if (!tail)
				return -1;
			tail++;
		}
		if (*tail != ' ')
			return -1;
		errno = 0;
		v = strtoll(tail + 1, &tail, 10);
		(void)v;
		if (errno || *tail)
			return -1;
		samples++;
	}
	return samples;
}

/*
 * 6.1's harness runs the test body even after SKIP() in the setup: every
 * body that needs the module checks again.
 */
#define CTL_NO_POOL	POOL_DEV " missing: mrpool.ko not loaded"

FIXTURE(ctl) {
	int fd;
	struct mrpool_query q;
	char *out;
	long long trim_sec;	/* restored by the teardown */
};

FIXTURE_SETUP(ctl)
{
	int ret;

	self->fd = -1;
	self->trim_sec = -1;
	self->out = malloc(CTL_OUT_MAX);
	ASSERT_NE(NULL, self->out);
	/* The build makes it: a missing tool is a failure, not a skip. */
	ASSERT_NE(NULL, ctl_tool()) {
		TH_LOG("tools/mrpoolctl/mrpoolctl not built (run make)");
	}
	if (access(POOL_DEV, F_OK))
		POOL_SETUP_SKIP(CTL_NO_POOL);
	/* The tool's figures are compared with sysfs read after: no trim. */
	self->trim_sec = pool_trim_off();
	ASSERT_LE(0, self->trim_sec);
	self->fd = pool_open();
	ret = self->fd < 0 ? self->fd : pool_query(self->fd, &self->q);
	/* A setup that fails gets no teardown: put the trim back first. */
	if (ret)
		pool_trim_restore(self->trim_sec);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, ret);
}

FIXTURE_TEARDOWN(ctl)
{
	pool_trim_restore(self->trim_sec);
	if (self->fd >= 0)
		close(self->fd);
	free(self->out);
}

/* status reports what QUERY reports: ABI version, geometry, ceiling. */
TEST_F(ctl, status_matches_query)
{
	char *out = self->out;

	if (self->fd < 0)
		POOL_SKIP(CTL_NO_POOL);
	ASSERT_EQ(0, ctl_run("status", false, out, CTL_OUT_MAX));
	TH_LOG("status:\n%s", out);
	EXPECT_NE(NULL, strstr(out, "MRPOOL_IOC_QUERY"));
	EXPECT_EQ(MRPOOL_ABI_VERSION, ctl_value(out, "abi_version"));
	EXPECT_EQ((long long)self->q.chunk_size, ctl_value(out, "chunk_bytes"));
	EXPECT_EQ((long long)self->q.max_bytes, ctl_value(out, "max_bytes"));
	EXPECT_EQ(self->q.node, ctl_value(out, "node"));
	/* One QUERY snapshot: the idle trim cannot skew it, sysfs reads can. */
	EXPECT_EQ(ctl_value(out, "total_bytes"),
		  ctl_value(out, "free_bytes") + ctl_value(out, "used_bytes") +
		  ctl_value(out, "quarantined_bytes"));
	EXPECT_EQ(pool_attr("stats/grows"), ctl_value(out, "grows"));
}

/* A slice moves status's used_bytes by its length and allocs by one. */
TEST_F(ctl, status_follows_a_slice)
{
	long long used0, allocs0, frees0;
	char *out = self->out;
	struct mrpool_alloc a;

	if (self->fd < 0)
		POOL_SKIP(CTL_NO_POOL);
	ASSERT_EQ(0, ctl_run("status", false, out, CTL_OUT_MAX));
	used0 = ctl_value(out, "used_bytes");
	allocs0 = ctl_value(out, "allocs");
	frees0 = ctl_value(out, "frees");
	ASSERT_LE(0, used0);
	ASSERT_LE(0, allocs0);
	ASSERT_LE(0, frees0);

	/* One byte over a chunk: two chunks, so length != what was asked. */
	ASSERT_EQ(0, pool_alloc(self->fd, self->q.chunk_size + 1, &a));
	ASSERT_EQ(2 * self->q.chunk_size, a.length);

	ASSERT_EQ(0, ctl_run("status", false, out, CTL_OUT_MAX));
	TH_LOG("status with a %llu-byte slice:\n%s",
	       (unsigned long long)a.length, out);
	EXPECT_EQ(used0 + (long long)a.length, ctl_value(out, "used_bytes"));
	EXPECT_EQ(allocs0 + 1, ctl_value(out, "allocs"));
	EXPECT_EQ(frees0, ctl_value(out, "frees"));

	ASSERT_EQ(0, pool_free(self->fd, a.slice_id));
	ASSERT_EQ(0, ctl_run("status", false, out, CTL_OUT_MAX));
	EXPECT_EQ(used0, ctl_value(out, "used_bytes"));
	EXPECT_EQ(allocs0 + 1, ctl_value(out, "allocs"));
	EXPECT_EQ(frees0 + 1, ctl_value(out, "frees"));
}

/* metrics is valid exposition text and follows a slice like status. */
TEST_F(ctl, metrics_follow_a_slice)
{
	long long used0, allocs0;
	char *out = self->out, bad[512];
	struct mrpool_alloc a;
	int samples;

	if (self->fd < 0)
		POOL_SKIP(CTL_NO_POOL);
	ASSERT_EQ(0, ctl_run("metrics", false, out, CTL_OUT_MAX));
	samples = ctl_check_exposition(out, bad, sizeof(bad));
	EXPECT_LT(10, samples) {
		TH_LOG("bad exposition line: '%s'", bad);
	}
	EXPECT_EQ((long long)self->q.chunk_size,
		  ctl_value(out, "mrpool_chunk_bytes"));
	EXPECT_EQ(MRPOOL_ABI_VERSION, ctl_value(out, "mrpool_abi_version"));
	used0 = ctl_value(out, "mrpool_used_bytes");
	allocs0 = ctl_value(out, "mrpool_allocs_total");
	ASSERT_LE(0, used0);
	ASSERT_LE(0, allocs0);

	ASSERT_EQ(0, pool_alloc(self->fd, 3 * self->q.chunk_size, &a));
	ASSERT_EQ(0, ctl_run("metrics", false, out, CTL_OUT_MAX));
	TH_LOG("metrics with a %llu-byte slice:\n%s",
	       (unsigned long long)a.length, out);
	EXPECT_EQ(used0 + (long long)a.length,
		  ctl_value(out, "mrpool_used_bytes"));
	EXPECT_EQ(allocs0 + 1, ctl_value(out, "mrpool_allocs_total"));
	EXPECT_EQ(ctl_value(out, "mrpool_total_bytes"),
		  ctl_value(out, "mrpool_free_bytes") +
		  ctl_value(out, "mrpool_used_bytes") +
		  ctl_value(out, "mrpool_quarantined_bytes"));
	EXPECT_LT(0, ctl_check_exposition(out, bad, sizeof(bad)));
	ASSERT_EQ(0, pool_free(self->fd, a.slice_id));
}

/* slices, clients and chunks show the slice with this process as owner. */
TEST_F(ctl, debugfs_views_show_the_owner)
{
	char pid[32], len[32], *out = self->out;
	long long used_chunks;
	struct mrpool_alloc a;
	const char *words[3];

	if (self->fd < 0)
		POOL_SKIP(CTL_NO_POOL);
	if (access(POOL_DEBUGFS "/slices", R_OK))
		SKIP(return, POOL_DEBUGFS " not readable: %s", strerror(errno));
	ASSERT_EQ(0, pool_alloc(self->fd, 2 * self->q.chunk_size, &a));
	snprintf(pid, sizeof(pid), "%d", getpid());
	snprintf(len, sizeof(len), "%llu", (unsigned long long)a.length);
	words[0] = pid;
	words[1] = len;

	ASSERT_EQ(0, ctl_run("slices", false, out, CTL_OUT_MAX));
	TH_LOG("slices:\n%s", out);
	words[2] = "live";
	EXPECT_TRUE(ctl_line_has(out, words, 3));

	ASSERT_EQ(0, ctl_run("clients", false, out, CTL_OUT_MAX));
	TH_LOG("clients:\n%s", out);
	EXPECT_TRUE(ctl_line_has(out, words, 2));

	/* Summary "N chunks: x free, y used": y is every used chunk. */
	ASSERT_EQ(0, pool_query(self->fd, &self->q));
	used_chunks = (long long)(self->q.used_bytes / self->q.chunk_size);
	ASSERT_EQ(0, ctl_run("chunks", false, out, CTL_OUT_MAX));
	snprintf(len, sizeof(len), "%lld used", used_chunks);
	EXPECT_NE(NULL, strstr(out, len)) {
		TH_LOG("no '%s' in chunks:\n%s", len, out);
	}
	EXPECT_EQ(used_chunks, pool_count_state("used"));
	ASSERT_EQ(0, pool_free(self->fd, a.slice_id));
}

/*
 * A task names itself: a comm with a blank, a newline and a backslash (any
 * process may, with PR_SET_NAME) is printed escaped by debugfs, one row of
 * seven fields, and comes back whole from mrpoolctl --json. Before, it
 * added a row and shifted the columns mrpoolctl and scripts split on.
 */
TEST_F(ctl, hostile_comm_stays_in_its_column)
{
	char old[32] = "", line[256], *out = self->out;
	const char *esc = "a\\040b\\012c\\134";
	struct mrpool_alloc a;
	int fd, fields = 0, rows = 0;
	FILE *f;

	if (self->fd < 0)
		POOL_SKIP(CTL_NO_POOL);
	ASSERT_EQ(0, prctl(PR_GET_NAME, old));
	ASSERT_EQ(0, prctl(PR_SET_NAME, "a b\nc\\"));
	fd = pool_open();
	prctl(PR_SET_NAME, old);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, pool_alloc(fd, self->q.chunk_size, &a));

	f = fopen(POOL_DEBUGFS "/slices", "re");
	ASSERT_NE(NULL, f);
	while (fgets(line, sizeof(line), f)) {
		if (!strstr(line, esc))
			continue;
		rows++;
		for (char *t = strtok(line, " \n"); t; t = strtok(NULL, " \n"))
			fields++;
	}
	fclose(f);
	EXPECT_EQ(1, rows);
	EXPECT_EQ(7, fields);

	ASSERT_EQ(0, ctl_run("--json slices", false, out, CTL_OUT_MAX));
	EXPECT_NE(NULL, strstr(out, "\"comm\":\"a b\\nc\\\\\"")) {
		TH_LOG("slices --json:\n%s", out);
	}
	ASSERT_EQ(0, ctl_run("--json clients", false, out, CTL_OUT_MAX));
	EXPECT_NE(NULL, strstr(out, "\"comm\":\"a b\\nc\\\\\"")) {
		TH_LOG("clients --json:\n%s", out);
	}
	EXPECT_EQ(0, pool_free(fd, a.slice_id));
	close(fd);
}

/* devices lists rxe0 (which the VM runner creates) with its state. */
TEST_F(ctl, devices_lists_rxe0)
{
	char *out = self->out, state[64] = "";
	const char *words[2] = { "rxe0", state };
	char path[256];
	FILE *f;

	if (self->fd < 0)
		POOL_SKIP(CTL_NO_POOL);
	if (access("/sys/class/infiniband/rxe0", F_OK))
		SKIP(return, "no rxe0 in this guest");
	snprintf(path, sizeof(path), "/sys/module/mrpool/devices/rxe0/state");
	f = fopen(path, "re");
	if (!f)
		SKIP(return, "%s: %s: module without per-device sysfs", path,
		     strerror(errno));
	ASSERT_EQ(1, fscanf(f, "%63s", state));
	fclose(f);
	ASSERT_EQ(0, ctl_run("devices", false, out, CTL_OUT_MAX));
	TH_LOG("devices:\n%s", out);
	EXPECT_TRUE(ctl_line_has(out, words, 2));

	ASSERT_EQ(0, ctl_run("metrics", false, out, CTL_OUT_MAX));
	snprintf(path, sizeof(path),
		 "mrpool_device_state{device=\"rxe0\",state=\"%s\"} 1", state);
	EXPECT_NE(NULL, strstr(out, path));

	/* QUERY's ndevices counts ready devices, as the sysfs states do. */
	ASSERT_EQ(0, ctl_run("status", false, out, CTL_OUT_MAX));
	EXPECT_EQ(ctl_ready_devices(), ctl_value(out, "devices_ready"));
}

/* set changes a writable parameter, and params shows the new value. */
TEST_F(ctl, set_writes_a_parameter)
{
	long long old = pool_param("max_user_mb");
	char *out = self->out, args[64];
	const char *words[3] = { "max_user_mb", "", "rw" };
	char want[32];

	if (self->fd < 0)
		POOL_SKIP(CTL_NO_POOL);
	ASSERT_LE(0, old);
	snprintf(want, sizeof(want), "%lld", old + 64);
	words[1] = want;
	snprintf(args, sizeof(args), "set max_user_mb %s", want);
	EXPECT_EQ(0, ctl_run(args, true, out, CTL_OUT_MAX));
	TH_LOG("%s", out);
	EXPECT_EQ(old + 64, pool_param("max_user_mb"));

	EXPECT_EQ(0, ctl_run("params", false, out, CTL_OUT_MAX));
	TH_LOG("params:\n%s", out);
	EXPECT_TRUE(ctl_line_has(out, words, 3));
	words[0] = "pool_mb";
	words[1] = "ro";
	EXPECT_TRUE(ctl_line_has(out, words, 2));

	ASSERT_EQ(0, pool_set_param("max_user_mb", old));
}

/* set refuses unknown, read-only and out-of-range values with exit 1. */
TEST_F(ctl, set_refuses_with_exit_1)
{
	long long pool_mb = pool_param("pool_mb");
	long long max_mb = pool_param("max_mb");
	char *out = self->out, args[64];

	if (self->fd < 0)
		POOL_SKIP(CTL_NO_POOL);
	EXPECT_EQ(1, ctl_run("set no_such_param 1", true, out, CTL_OUT_MAX));
	EXPECT_NE(NULL, strstr(out, "no such parameter")) TH_LOG("%s", out);

	snprintf(args, sizeof(args), "set pool_mb %lld", pool_mb + 2);
	EXPECT_EQ(1, ctl_run(args, true, out, CTL_OUT_MAX));
	EXPECT_NE(NULL, strstr(out, "read-only")) TH_LOG("%s", out);
	EXPECT_EQ(pool_mb, pool_param("pool_mb"));

	/* The module's setter says EINVAL; the tool passes its text on. */
	EXPECT_EQ(1, ctl_run("set max_mb 0", true, out, CTL_OUT_MAX));
	EXPECT_NE(NULL, strstr(out, strerror(EINVAL))) TH_LOG("%s", out);
	EXPECT_EQ(max_mb, pool_param("max_mb"));

	EXPECT_EQ(1, ctl_run("set ../parameters/max_mb 1", true, out,
			     CTL_OUT_MAX));
	EXPECT_EQ(max_mb, pool_param("max_mb"));
}

/* Usage errors exit 2, help exits 0; neither needs the module. */
TEST(usage_exits_2)
{
	static char out[CTL_OUT_MAX];

	ASSERT_NE(NULL, ctl_tool());
	EXPECT_EQ(2, ctl_run("no-such-command", true, out, sizeof(out)));
	EXPECT_NE(NULL, strstr(out, "unknown command")) TH_LOG("%s", out);
	EXPECT_EQ(2, ctl_run("", true, out, sizeof(out)));
	EXPECT_EQ(2, ctl_run("--bogus", true, out, sizeof(out)));
	EXPECT_EQ(2, ctl_run("status extra", true, out, sizeof(out)));
	EXPECT_EQ(2, ctl_run("set max_mb", true, out, sizeof(out)));
	EXPECT_EQ(0, ctl_run("-h", false, out, sizeof(out)));
	EXPECT_NE(NULL, strstr(out, "usage:"));
	EXPECT_EQ(0, ctl_run("metrics -h", false, out, sizeof(out)));
	EXPECT_NE(NULL, strstr(out, "metrics"));
}

/* Without the module: exit 1 and the errno text, for every reader. */
TEST(no_module_exits_1)
{
	static const char *const cmds[] = {
		"status", "metrics", "chunks", "devices", "params",
		"set max_mb 64",
	};
	static char out[CTL_OUT_MAX];
	size_t i;

	ASSERT_NE(NULL, ctl_tool());
	/* Each test runs in its own child: the variable dies with it. */
	ASSERT_EQ(0, setenv("MRPOOLCTL_ROOT", "/nonexistent", 1));
	for (i = 0; i < ARRAY_SIZE(cmds); i++) {
		EXPECT_EQ(1, ctl_run(cmds[i], true, out, sizeof(out)));
		EXPECT_NE(NULL, strstr(out, strerror(ENOENT))) {
			TH_LOG("%s: %s", cmds[i], out);
		}
	}
}


/*
 * Python checks of a --json document: argv[1] is the file (one document
 * per line, all parsed into `docs`, `d` the first), argv[2:] are `args`.
 * `S`, `P`, `D` are the pool's sysfs, parameter and device directories,
 * r() reads a file without its newline. An assert that fails exits 1
 * with the traceback, which the test logs.
 */
static const char ctl_py_prelude[] =
	"import json, os, sys\n"
	"docs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]\n"
	"d = docs[0] if docs else None\n"
	"args = sys.argv[2:]\n"
	"S = '/sys/class/misc/mrpool/'\n"
	"P = '/sys/module/mrpool/parameters/'\n"
	"D = '/sys/module/mrpool/devices/'\n"
	"def r(p):\n"
	"    return open(p).read().strip()\n";

/*
 * @check (Python, after the prelude) over @file with @pyargs; @what names
 * the document in the log. 0, or 100 + Python's exit status.
 */
static int ctl_py_check(struct __test_metadata *_metadata, const char *what,
			const char *file, const char *check, const char *pyargs)
{
	char py[] = "/tmp/ctl-py-XXXXXX";
	static char out[CTL_OUT_MAX];
	char cmd[512];
	int pfd, st;
	FILE *f;

	pfd = mkstemp(py);
	if (pfd < 0)
		return -1;
	f = fdopen(pfd, "w");
	fprintf(f, "%s%s\n", ctl_py_prelude, check);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "python3 %s %s %s 2>&1", py, file,
		 pyargs ? pyargs : "");
	f = popen(cmd, "r");
	out[fread(out, 1, sizeof(out) - 1, f)] = '\0';
	st = pclose(f);
	unlink(py);
	if (WIFEXITED(st) && !WEXITSTATUS(st))
		return 0;
	TH_LOG("%s: check failed:\n%s", what, out);
	f = fopen(file, "re");
	if (f) {
		out[fread(out, 1, sizeof(out) - 1, f)] = '\0';
		fclose(f);
		TH_LOG("document:\n%s", out);
	}
	return 100 + (WIFEXITED(st) ? WEXITSTATUS(st) : 99);
}

/*
 * Run "mrpoolctl ARGS --json" into a file, then ctl_py_check() over it.
 * Returns the tool's exit status, or the check's when the tool succeeded.
 */
static int ctl_json_check(struct __test_metadata *_metadata, const char *args,
			  const char *check, const char *pyargs)
{
	char json[] = "/tmp/ctl-json-XXXXXX", cmd[512], what[128];
	const char *tool = ctl_tool();
	int jfd, st;

	jfd = mkstemp(json);
	if (jfd < 0 || !tool)
		return -1;
	close(jfd);
	snprintf(cmd, sizeof(cmd), "%s %s --json >%s", tool, args, json);
	st = system(cmd);
	st = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	snprintf(what, sizeof(what), "mrpoolctl %s --json", args);
	if (st)
		TH_LOG("%s: exit status %d", what, st);
	else
		st = ctl_py_check(_metadata, what, json, check, pyargs);
	unlink(json);
	return st;
}

/* status --json: the sysfs values, the same snapshot arithmetic. */
TEST_F(ctl, json_status_matches_sysfs)
{
	if (self->fd < 0)
		POOL_SKIP(CTL_NO_POOL);
	EXPECT_EQ(0, ctl_json_check(_metadata, "status",
		"assert d['source'] == 'ioctl'\n"
		"for k in ('chunk_bytes', 'max_bytes', 'node', 'total_bytes',\n"
		"          'free_bytes', 'used_bytes', 'quarantined_bytes'):\n"
		"    assert d[k] == int(r(S + k)), k\n"
		"assert d['total_bytes'] == d['free_bytes'] + d['used_bytes'] + d['quarantined_bytes']\n"
		"assert d['allocs'] == int(r(S + 'stats/allocs'))\n"
		"assert d['frees'] == int(r(S + 'stats/frees'))\n"
		"assert d['blocks_per_order'] == [int(t) for t in r(S + 'blocks_per_order').split()]\n"
		"want = set(os.listdir(S + 'stats')) - {'allocs', 'frees'}\n"
		"assert set(d['stats']) == want, (set(d['stats']), want)\n"
		"for k in want - {'trims', 'quarantine_checks', 'defrags'}:\n"
		"    assert d['stats'][k] == int(r(S + 'stats/' + k)), k\n"
		"assert sorted(x['name'] for x in d['devices']) == sorted(os.listdir(D))\n"
		"for x in d['devices']:\n"
		"    assert x['state'] == r(D + x['name'] + '/state'), x\n"
		"assert d['devices_ready'] == sum(x['state'] == 'ready' for x in d['devices'])\n",
		NULL));
}

/* params, set and watch --json: values as in the parameter files. */
TEST_F(ctl, json_params_set_watch)
{
	long long old = pool_param("max_user_mb");
	char args[64], py[256];

	if (self->fd < 0)
		POOL_SKIP(CTL_NO_POOL);
	EXPECT_EQ(0, ctl_json_check(_metadata, "params",
		"assert sorted(p['name'] for p in d['params']) == sorted(os.listdir(P))\n"
		"for p in d['params']:\n"
		"    assert str(p['value']) == r(P + p['name']), p\n"
		"    w = os.stat(P + p['name']).st_mode & 0o222\n"
		"    assert p['access'] == ('rw' if w else 'ro'), p\n",
		NULL));

	snprintf(args, sizeof(args), "set max_user_mb %lld", old + 64);
	snprintf(py, sizeof(py), "%lld %lld", old, old + 64);
	EXPECT_EQ(0, ctl_json_check(_metadata, args,
		"assert d == {'name': 'max_user_mb', 'old': int(args[0]), 'new': int(args[1])}, d\n"
		"assert r(P + 'max_user_mb') == args[1]\n",
		py));
	ASSERT_EQ(0, pool_set_param("max_user_mb", old));

	/* Nothing allocates meanwhile: deltas 0, counters as in sysfs. */
	EXPECT_EQ(0, ctl_json_check(_metadata, "watch 0.2 2",
		"assert len(docs) == 2, docs\n"
		"assert docs[0]['deltas'] is None and docs[0]['rates'] is None\n"
		"w = docs[1]\n"
		"assert w['interval'] > 0\n"
		"assert w['counters']['allocs'] == int(r(S + 'stats/allocs'))\n"
		"assert w['deltas']['allocs'] == 0 and w['rates']['allocs'] == 0\n"
		"assert w['max_bytes'] == int(r(S + 'max_bytes'))\n",
		NULL));
}

/* chunks, slices and clients --json show a slice this process holds. */
TEST_F(ctl, json_debugfs_views)
{
	struct mrpool_alloc a;
	char py[64];

	if (self->fd < 0)
		POOL_SKIP(CTL_NO_POOL);
	if (access(POOL_DEBUGFS "/slices", R_OK))
		POOL_SKIP(POOL_DEBUGFS " not readable: %s", strerror(errno));
	ASSERT_EQ(0, pool_alloc(self->fd, 2 * self->q.chunk_size, &a));
	snprintf(py, sizeof(py), "%d %llu", getpid(),
		 (unsigned long long)a.length);
	EXPECT_EQ(0, ctl_json_check(_metadata, "chunks",
		"c = int(r(S + 'chunk_bytes'))\n"
		"assert d['count'] == len(d['chunks']) == int(r(S + 'total_bytes')) // c\n"
		"used = sum(x['state'] == 'used' for x in d['chunks'])\n"
		"assert used == int(r(S + 'used_bytes')) // c, used\n",
		NULL));
	EXPECT_EQ(0, ctl_json_check(_metadata, "slices",
		"assert d['count'] == len(d['slices'])\n"
		"assert any(x['pid'] == int(args[0]) and x['length'] == int(args[1])\n"
		"           and x['state'] == 'live' for x in d['slices']), d\n",
		py));
	EXPECT_EQ(0, ctl_json_check(_metadata, "clients",
		"assert any(x['pid'] == int(args[0]) for x in d['clients']), d\n",
		py));
	ASSERT_EQ(0, pool_free(self->fd, a.slice_id));
}

/*
 * tenants: root's own user moves by a slice's length, not in
 * RLIMIT_MEMLOCK (CAP_IPC_LOCK), uids in order, the orphans last, the
 * same in metrics; nobody, holding nothing, is shown no line at all.
 */
TEST_F(ctl, tenants_follow_a_slice)
{
	char *out = self->out, py[64], key[64], key2[80];
	struct mrpool_alloc a;
	long long before;
	pid_t pid;
	int st;

	if (self->fd < 0)
		POOL_SKIP(CTL_NO_POOL);
	ASSERT_EQ(0, ctl_run("metrics", false, out, CTL_OUT_MAX));
	snprintf(key, sizeof(key), "mrpool_tenant_bytes{uid=\"%u\"}", getuid());
	before = ctl_value(out, key);
	ASSERT_LE(0, before) TH_LOG("no %s sample:\n%s", key, out);
	ASSERT_EQ(0, pool_alloc(self->fd, 3 * self->q.chunk_size, &a));
	snprintf(py, sizeof(py), "%u %lld %llu", getuid(), before,
		 (unsigned long long)a.length);
	EXPECT_EQ(0, ctl_json_check(_metadata, "tenants",
		"uid, before, length = (int(x) for x in args)\n"
		"t = d['tenants']\n"
		"assert t and t[-1]['uid'] == 'orphans', t\n"
		"uids = [x['uid'] for x in t[:-1]]\n"
		"assert uids == sorted(uids) and len(set(uids)) == len(uids), uids\n"
		"me = [x for x in t if x['uid'] == uid]\n"
		"assert len(me) == 1 and me[0]['bytes'] == before + length, me\n"
		"assert me[0]['memlock_bytes'] == 0 and me[0]['quarantined_bytes'] == 0, me\n"
		"assert me[0]['orphaned_bytes'] == 0, me\n",
		py));
	ASSERT_EQ(0, ctl_run("metrics", false, out, CTL_OUT_MAX));
	EXPECT_EQ(before + (long long)a.length, ctl_value(out, key));
	snprintf(key2, sizeof(key2), "mrpool_tenant_orphaned_bytes{uid=\"%u\"}", getuid());
	EXPECT_EQ(0, ctl_value(out, key2)) TH_LOG("no %s sample:\n%s", key2, out);
	ASSERT_EQ(0, pool_free(self->fd, a.slice_id));

	/* nobody sees neither root's line nor the orphans. */
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		if (setgroups(0, NULL) || setgid(65534) || setuid(65534))
			_exit(90);
		if (ctl_run("tenants", false, out, CTL_OUT_MAX))
			_exit(91);
		_exit(strstr(out, "0 tenants") && !strstr(out, "orphans") ? 0 : 92);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st))
		TH_LOG("nobody's tenants check: status %#x", st);
}

/*
 * devices --json: the module's state per device as in sysfs, joined with
 * rxe0's port as the RDMA subsystem shows it (state, link layer, netdev).
 */
TEST_F(ctl, json_devices_joins_rdma)
{
	if (self->fd < 0)
		POOL_SKIP(CTL_NO_POOL);
	if (access("/sys/class/infiniband/rxe0", F_OK))
		POOL_SKIP("no rxe0 in this guest");
	EXPECT_EQ(0, ctl_json_check(_metadata, "devices",
		"I = '/sys/class/infiniband/'\n"
		"assert d['count'] == len(d['devices']) == len(os.listdir(D))\n"
		"for x in d['devices']:\n"
		"    assert x['state'] == r(D + x['name'] + '/state'), x\n"
		"    assert x['chunks'] == int(r(D + x['name'] + '/chunks')), x\n"
		"x = [x for x in d['devices'] if x['name'] == 'rxe0'][0]\n"
		"p = x['ports']\n"
		"assert len(p) == 1 and p[0]['port'] == 1, p\n"
		"assert p[0]['link_state'] == r(I + 'rxe0/ports/1/state').split(': ')[1], p\n"
		"assert p[0]['link_layer'] == r(I + 'rxe0/ports/1/link_layer'), p\n"
		"assert p[0]['protocol'] == 'roce', p\n"
		"assert p[0]['netdev'] == r(I + 'rxe0/parent'), p\n",
		NULL));
}

/* A running "mrpoolctl --json monitor", its output in a file. */
struct ctl_mon {
	pid_t pid;
	char out[32];
	char err[32];
};

/* Start it and wait (bounded) until it says it listens. */
static int ctl_mon_start(struct ctl_mon *m)
{
	const char *tool = ctl_tool();
	char text[256];
	int ofd, efd;
	FILE *f;

	snprintf(m->out, sizeof(m->out), "/tmp/ctl-mon-XXXXXX");
	snprintf(m->err, sizeof(m->err), "/tmp/ctl-err-XXXXXX");
	ofd = mkstemp(m->out);
	efd = mkstemp(m->err);
	if (ofd < 0 || efd < 0 || !tool)
		return -1;
	m->pid = fork();
	if (!m->pid) {
		dup2(ofd, 1);
		dup2(efd, 2);
		execl(tool, tool, "--json", "monitor", (char *)NULL);
		_exit(127);
	}
	close(ofd);
	close(efd);
	if (m->pid < 0)
		return -1;
	text[0] = '\0';
	POOL_WAIT((f = fopen(m->err, "re")) &&
		  (text[fread(text, 1, sizeof(text) - 1, f)] = '\0',
		   fclose(f), strstr(text, "listening")), 60000);
	return strstr(text, "listening") ? 0 : -1;
}

/* How many times the monitor's output holds @what yet. */
static int ctl_mon_count(const struct ctl_mon *m, const char *what)
{
	static char buf[CTL_OUT_MAX];
	const char *p;
	int n = 0;
	FILE *f;

	f = fopen(m->out, "re");
	if (!f)
		return 0;
	buf[fread(buf, 1, sizeof(buf) - 1, f)] = '\0';
	fclose(f);
	for (p = strstr(buf, what); p; p = strstr(p + 1, what))
		n++;
	return n;
}

static bool ctl_mon_has(const struct ctl_mon *m, const char *what)
{
	return ctl_mon_count(m, what) > 0;
}

/* Does the monitor's stderr say @what yet? */
static bool ctl_mon_said(const struct ctl_mon *m, const char *what)
{
	char text[4096];
	size_t n;
	FILE *f;

	f = fopen(m->err, "re");
	if (!f)
		return false;
	n = fread(text, 1, sizeof(text) - 1, f);
	text[n] = '\0';
	fclose(f);
	return strstr(text, what);
}

/* SIGTERM: it must end with status 0. Returns that status. */
static int ctl_mon_stop(struct ctl_mon *m)
{
	int st;

	if (m->pid <= 0)
		return -1;
	kill(m->pid, SIGTERM);
	waitpid(m->pid, &st, 0);
	m->pid = 0;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void ctl_mon_cleanup(struct ctl_mon *m)
{
	if (m->pid > 0) {
		kill(m->pid, SIGKILL);
		waitpid(m->pid, NULL, 0);
	}
	unlink(m->out);
	unlink(m->err);
}

#define NLDEV	"mrnl0"

FIXTURE(mon) {
	int fd;
	struct mrpool_query q;
	struct ctl_mon m;
	long long max_mb;
	long long trim_sec;
	char ko[PATH_MAX];	/* the module, to load it again */
	char params[512];	/* with the parameters it had */
};

static const char *const mon_params[] = {
	"pool_mb", "max_mb", "chunk_kb", "numa_node", "idle_trim_sec",
	"max_user_mb", "pmd_map", "shmem_chunks", "quarantine_event_pct",
};

static int mon_load(const char *ko, const char *params)
{
	int fd = open(ko, O_RDONLY | O_CLOEXEC), ret;

	if (fd < 0)
		return -errno;
	ret = syscall(SYS_finit_module, fd, params, 0) ? -errno : 0;
	close(fd);
	return ret;
}

static int mon_unload(void)
{
	return syscall(SYS_delete_module, "mrpool", O_NONBLOCK) ? -errno : 0;
}

FIXTURE_SETUP(mon)
{
	size_t i, n = 0;
	char val[64];
	int ret;

	self->ko[0] = '\0';
	self->fd = -1;
	self->m.pid = 0;
	self->max_mb = -1;
	self->trim_sec = -1;
	ASSERT_NE(NULL, ctl_tool());
	if (access(POOL_DEV, F_OK))
		POOL_SETUP_SKIP(CTL_NO_POOL);
	/* Before the parameters are saved: a reload keeps trim off too. */
	self->trim_sec = pool_trim_off();
	ASSERT_LE(0, self->trim_sec);
	self->fd = pool_open();
	ret = self->fd < 0 ? self->fd : pool_query(self->fd, &self->q);
	/* A setup that fails gets no teardown: put the trim back first. */
	if (ret)
		pool_trim_restore(self->trim_sec);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, ret);
	self->max_mb = pool_param("max_mb");
	if (dev_listed(NLDEV))
		link_del(NLDEV);
	/* Not required here: a reload test that needs it fails itself. */
	pool_beside_self(self->ko, sizeof(self->ko), "../kmod/mrpool.ko");
	for (i = 0; i < ARRAY_SIZE(mon_params); i++) {
		pool_param_str(mon_params[i], val, sizeof(val));
		if (val[0])
			n += snprintf(self->params + n, sizeof(self->params) - n,
				      "%s=%s ", mon_params[i], val);
	}
}

/* Parameters, device and monitor back as they were, whatever failed. */
FIXTURE_TEARDOWN(mon)
{
	ctl_mon_cleanup(&self->m);
	pool_set_knob("fail_ib_wc", 0);
	pool_set_knob("fail_ib_wc_after", 0);
	pool_set_knob("recover_ms", 1000);
	/* A reload that failed half-way: the module back as it was. */
	if (self->ko[0] && access("/sys/module/mrpool", F_OK))
		mon_load(self->ko, self->params);
	if (self->max_mb > 0)
		pool_set_param("max_mb", self->max_mb);
	pool_trim_restore(self->trim_sec);
	if (dev_listed(NLDEV))
		link_del(NLDEV);
	if (self->fd >= 0)
		close(self->fd);
}

/* monitor: an rxe device added then deleted is added, ready, removed. */
TEST_F(mon, sees_device_add_and_remove)
{
	char state[32] = "";

	if (self->fd < 0)
		POOL_SKIP(CTL_NO_POOL);
	if (system("command -v rdma >/dev/null 2>&1"))
		POOL_SKIP("the rdma tool (iproute2) is missing");
	ASSERT_EQ(0, ctl_mon_start(&self->m)) TH_LOG("monitor did not start");

	ASSERT_EQ(0, link_add(NLDEV)) TH_LOG("rdma link add " NLDEV);
	/* Registration of every chunk on a TCG guest: allow minutes. */
	EXPECT_TRUE(POOL_WAIT((dev_str(NLDEV, "state", state, sizeof(state)),
			       !strcmp(state, "ready")), 180000))
		TH_LOG(NLDEV " state '%s'", state);
	EXPECT_TRUE(POOL_WAIT(ctl_mon_has(&self->m, "\"dev_ready\""), 60000));
	ASSERT_EQ(0, link_del(NLDEV)) TH_LOG("rdma link delete " NLDEV);
	EXPECT_TRUE(POOL_WAIT(ctl_mon_has(&self->m, "\"dev_removed\""), 60000));
	EXPECT_EQ(0, ctl_mon_stop(&self->m));

	EXPECT_EQ(0, ctl_py_check(_metadata, "monitor", self->m.out,
		"ev = [(x['event'], x['device']['state']) for x in docs\n"
		"      if x.get('device', {}).get('name') == args[0]]\n"
		"assert ev == [('dev_added', 'ready'), ('dev_ready', 'ready'),\n"
		"              ('dev_removed', 'removed')], ev\n"
		"assert all('time' in x for x in docs)\n",
		NLDEV));
}

/*
 * monitor: a device whose registration fails with an error completion is
 * failed, then ready again by itself (its recovery), then removed.
 */
TEST_F(mon, sees_device_fail_and_recover)
{
	struct mrpool_alloc all, one;

	if (self->fd < 0)
		POOL_SKIP(CTL_NO_POOL);
	if (system("command -v rdma >/dev/null 2>&1"))
		POOL_SKIP("the rdma tool (iproute2) is missing");
	ASSERT_EQ(0, ctl_mon_start(&self->m)) TH_LOG("monitor did not start");
	ASSERT_EQ(0, pool_set_knob("recover_ms", 200));
	ASSERT_EQ(0, link_add(NLDEV)) TH_LOG("rdma link add " NLDEV);
	EXPECT_TRUE(POOL_WAIT(ctl_mon_has(&self->m, "\"dev_ready\""), 60000));

	/* The next chunk grows the pool; NLDEV's registration of it fails. */
	if (pool_attr("free_bytes") > 0)
		ASSERT_EQ(0, pool_alloc(self->fd, pool_attr("free_bytes"), &all));
	ASSERT_EQ(0, pool_set_knob("fail_ib_wc_after",
				   ib_ready_devices(NLDEV)));
	ASSERT_EQ(0, pool_set_knob("fail_ib_wc", 1));
	ASSERT_EQ(0, pool_alloc(self->fd, self->q.chunk_size, &one));
	EXPECT_TRUE(POOL_WAIT(ctl_mon_count(&self->m, "\"dev_ready\"") >= 2,
			      60000));
	EXPECT_EQ(1, dev_ll(NLDEV, "recoveries"));
	ASSERT_EQ(0, link_del(NLDEV)) TH_LOG("rdma link delete " NLDEV);
	EXPECT_TRUE(POOL_WAIT(ctl_mon_has(&self->m, "\"dev_removed\""), 60000));
	EXPECT_EQ(0, ctl_mon_stop(&self->m));

	EXPECT_EQ(0, ctl_py_check(_metadata, "monitor", self->m.out,
		"ev = [(x['event'], x['device']['state']) for x in docs\n"
		"      if x.get('device', {}).get('name') == args[0]]\n"
		"assert ev == [('dev_added', 'ready'), ('dev_ready', 'ready'),\n"
		"              ('dev_failed', 'failed'), ('dev_ready', 'ready'),\n"
		"              ('dev_removed', 'removed')], ev\n",
		NLDEV));
}

/*
 * monitor: a request the pool cannot serve at max_mb is an "exhausted"
 * event carrying the chunks asked for and the pool's totals; one larger
 * than max_mb itself is the caller's error and no event. (The second
 * failure may be held back by the rate limit: it comes within a second.)
 */
TEST_F(mon, sees_exhaustion)
{
	long long total, chunk, free_chunks, max_mb;
	struct mrpool_alloc a, all;
	char py[64];

	if (self->fd < 0)
		POOL_SKIP(CTL_NO_POOL);
	ASSERT_EQ(0, ctl_mon_start(&self->m)) TH_LOG("monitor did not start");

	/* No room to grow: max_mb at what the pool holds (>= pool_mb). */
	total = pool_attr("total_bytes");
	chunk = pool_attr("chunk_bytes");
	max_mb = (total + MIB - 1) / MIB;
	ASSERT_EQ(0, pool_set_param("max_mb", max_mb));
	free_chunks = pool_attr("free_bytes") / chunk;
	total = pool_attr("total_bytes");
	ASSERT_LE(total, max_mb * MIB);

	/* Every free chunk taken, one more cannot come from anywhere. */
	all.slice_id = 0;
	if (free_chunks)
		ASSERT_EQ(0, pool_alloc(self->fd, free_chunks * chunk, &all));
	EXPECT_EQ(-ENOMEM, pool_alloc(self->fd, chunk, &a));
	EXPECT_TRUE(POOL_WAIT(ctl_mon_count(&self->m, "\"exhausted\"") == 1,
			      60000));
	/* More than max_mb in one request: refused, no event. */
	EXPECT_EQ(-ENOMEM, pool_alloc(self->fd, max_mb * MIB + chunk, &a));
	/* Two chunks: exhaustion again. */
	EXPECT_EQ(-ENOMEM, pool_alloc(self->fd, 2 * chunk, &a));
	EXPECT_TRUE(POOL_WAIT(ctl_mon_count(&self->m, "\"exhausted\"") == 2,
			      60000));
	if (free_chunks)
		ASSERT_EQ(0, pool_free(self->fd, all.slice_id));
	EXPECT_EQ(0, ctl_mon_stop(&self->m));

	snprintf(py, sizeof(py), "%lld", max_mb * MIB);
	EXPECT_EQ(0, ctl_py_check(_metadata, "monitor", self->m.out,
		"ex = [x for x in docs if x['event'] == 'exhausted']\n"
		"assert [e['chunks'] for e in ex] == [1, 2], docs\n"
		"assert sum(e.get('suppressed', 0) for e in ex) == 0, ex\n"
		"for e in ex:\n"
		"    assert e['max_bytes'] == int(args[0]), e\n"
		"    assert e['total_bytes'] == e['free_bytes'] + e['used_bytes'] + e['quarantined_bytes'], e\n"
		"    assert e['free_bytes'] == 0, e\n",
		py));
}

/*
 * monitor across a module reload: unloading drops every member of the
 * family's groups; nlctrl's NEWFAMILY makes the monitor join again, and
 * the reloaded module's events reach it.
 */
TEST_F(mon, follows_a_reload)
{
	long long chunk, free_chunks, max_mb;
	struct mrpool_alloc a, all;

	if (self->fd < 0)
		POOL_SKIP(CTL_NO_POOL);
	ASSERT_EQ(0, access(self->ko, R_OK)) TH_LOG("no %s", self->ko);
	ASSERT_EQ(0, ctl_mon_start(&self->m)) TH_LOG("monitor did not start");
	close(self->fd);
	self->fd = -1;
	/*
	 * Quarantined chunks hold the module until the worker frees them.
	 * POOL_WAIT evaluates its condition once more at the end: by then
	 * the module is gone.
	 */
	ASSERT_TRUE(POOL_WAIT(!mon_unload() || access("/sys/module/mrpool", F_OK),
			      120000)) TH_LOG("rmmod mrpool");
	EXPECT_TRUE(POOL_WAIT(ctl_mon_said(&self->m, "gone"), 60000));
	ASSERT_EQ(0, mon_load(self->ko, self->params));
	EXPECT_TRUE(POOL_WAIT(ctl_mon_said(&self->m, "listening again"),
			      60000));

	/*
	 * An event of the new module: exhaustion at max_mb, every free
	 * chunk held and one more asked for (a request larger than max_mb
	 * itself would be no event).
	 */
	self->fd = pool_open();
	ASSERT_LE(0, self->fd);
	chunk = pool_attr("chunk_bytes");
	max_mb = (pool_attr("total_bytes") + MIB - 1) / MIB;
	ASSERT_EQ(0, pool_set_param("max_mb", max_mb));
	free_chunks = pool_attr("free_bytes") / chunk;
	if (free_chunks)
		ASSERT_EQ(0, pool_alloc(self->fd, free_chunks * chunk, &all));
	EXPECT_EQ(-ENOMEM, pool_alloc(self->fd, chunk, &a));
	EXPECT_TRUE(POOL_WAIT(ctl_mon_has(&self->m, "\"exhausted\""), 60000));
	EXPECT_EQ(0, ctl_mon_stop(&self->m));
}

TEST_HARNESS_MAIN
