// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * tools/mrpoolctl/mrpoolctl against the live module: what status, metrics
 * and the debugfs views print must follow a slice this test allocates
 * through the ioctl (used bytes by exactly its length, allocs by one),
 * set must change a writable parameter and refuse the rest with exit 1,
 * a missing module is exit 1 with the errno text, usage errors exit 2. The tool runs through popen(), as an operator
 * or a monitoring agent would run it.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop
/* Test bodies read no local again after the harness longjmps out. */
#pragma GCC diagnostic ignored "-Wclobbered"

#include "pool_util.h"

#define CTL_OUT_MAX	65536

/* The tool: $MRPOOLCTL, else relative to the repository top or selftests/. */
static const char *ctl_tool(void)
{
	static const char *const tries[] = {
		"tools/mrpoolctl/mrpoolctl", "../tools/mrpoolctl/mrpoolctl",
	};
	const char *env = getenv("MRPOOLCTL");
	size_t i;

	if (env && *env)
		return env;
	for (i = 0; i < ARRAY_SIZE(tries); i++)
		if (!access(tries[i], X_OK))
			return tries[i];
	return NULL;
}

/*
 * Run "mrpoolctl ARGS"; stdout (and stderr too when @with_stderr) into
 * @out. Returns the exit status, or -1 if it did not exit normally.
 */
static int ctl_run(const char *args, bool with_stderr, char *out, size_t len)
{
	const char *tool = ctl_tool();
	char cmd[512];
	size_t got = 0, n;
	FILE *p;
	int st;

	out[0] = '\0';
	if (!tool)
		return -1;
	snprintf(cmd, sizeof(cmd), "%s %s %s", tool, args,
		 with_stderr ? "2>&1" : "2>/dev/null");
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (got + 1 < len && (n = fread(out + got, 1, len - 1 - got, p)))
		got += n;
	out[got] = '\0';
	st = pclose(p);
	return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

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
};

FIXTURE_SETUP(ctl)
{
	self->fd = -1;
	self->out = malloc(CTL_OUT_MAX);
	ASSERT_NE(NULL, self->out);
	/* The build makes it: a missing tool is a failure, not a skip. */
	ASSERT_NE(NULL, ctl_tool()) {
		TH_LOG("tools/mrpoolctl/mrpoolctl not built (run make)");
	}
	if (access(POOL_DEV, F_OK))
		POOL_SETUP_SKIP(CTL_NO_POOL);
	self->fd = pool_open();
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, pool_query(self->fd, &self->q));
}

FIXTURE_TEARDOWN(ctl)
{
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

TEST_HARNESS_MAIN
