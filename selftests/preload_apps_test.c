// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Software nobody here wrote, unmodified, under mrpool-run (issue 11):
 * ibv_rc_pingpong with its data check and perftest's ib_write_bw and
 * ib_read_bw (-q 1) and ib_send_lat, server and client on rxe0 in this
 * guest. Each must pass, and the shim's report (MRPOOL_PRELOAD_REPORT) must
 * show its registrations served from the pool, on the kernel backend, or,
 * for remote access without MRPOOL_PRELOAD_REMOTE=arena, passed on. While
 * a shimmed server waits, debugfs clients shows its counters. perftest runs
 * without the shim too, and both figures are printed (ratios only: TCG).
 *
 * VM kernels: one (selftests/run.sh: the shim and outside programs; the
 * kernel paths under them, ALLOC, mmap, FREE and registering slices, are
 * lib_rdma_test's and pool_rdma_test's on every kernel)
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "rxe_gid.h"
#include "sh_util.h"

#define RUN		"tools/run/mrpool-run"
#define ADDR		"10.77.0.1"	/* dummy0 under rxe0 (tools/vm/guest.sh) */
#define TMO		600		/* seconds per program: a hang catcher */
/* Per test (TEST_F_TIMEOUT): up to six programs under TCG on a busy host. */

/* Is a TCP socket listening on port (any address)? */
static bool listening(int port)
{
	char line[256], want[16];
	bool found = false;
	FILE *f;

	snprintf(want, sizeof(want), ":%04X ", port);
	for (int v6 = 0; v6 < 2 && !found; v6++) {
		f = fopen(v6 ? "/proc/net/tcp6" : "/proc/net/tcp", "r");
		if (!f)
			continue;
		while (!found && fgets(line, sizeof(line), f)) {
			char *local = strchr(line, ':');

			/* "sl: local rem st": local ends with ":PORT", state 0A */
			if (local && (local = strstr(local + 1, want)) && strstr(local, " 0A "))
				found = true;
		}
		fclose(f);
	}
	return found;
}

static bool wait_listen(int port, pid_t server)
{
	for (int i = 0; i < TMO * 10; i++) {
		if (listening(port))
			return true;
		if (waitpid(server, NULL, WNOHANG) == server) {
			sh_forget(server);
			return false;
		}
		usleep(100000);
	}
	return false;
}

static char *slurp(const char *path)
{
	static char buf[1 << 16];
	FILE *f = fopen(path, "r");
	size_t n = 0;

	buf[0] = 0;
	if (f) {
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
	}
	buf[n] = 0;
	return buf;
}

static unsigned long long field(const char *line, const char *name)
{
	const char *s = strstr(line, name);

	return s ? strtoull(s + strlen(name), NULL, 10) : ~0ull;
}

struct side {
	int status;
	unsigned long long served, passed;
	bool kernel;
	char out[4096];
};

/*
 * Server "SERVER_ARGS" then client "CLIENT_ARGS ADDR", each under ENV
 * (prefix) and, with shim, mrpool-run with its own report file.
 */
static void pair(struct __test_metadata *_metadata, const char *env, bool shim,
		 const char *prog, const char *args, int port, struct side s[2])
{
	char dir[] = "/tmp/mrp_apps.XXXXXX", cmd[1024], log[2][128], rep[2][128];
	pid_t pid[2];

	ASSERT_NE(NULL, mkdtemp(dir));
	for (int i = 0; i < 2; i++) {
		snprintf(log[i], sizeof(log[i]), "%s/%s.log", dir, i ? "client" : "server");
		snprintf(rep[i], sizeof(rep[i]), "%s/%s.report", dir, i ? "client" : "server");
		snprintf(cmd, sizeof(cmd), "%s MRPOOL_PRELOAD_REPORT=%s %s %s %s -p %d %s",
			 env ? env : "env", rep[i], shim ? RUN : "", prog, args, port,
			 i ? ADDR : "");
		pid[i] = sh_spawn(cmd, log[i]);
		if (!i)
			ASSERT_TRUE(wait_listen(port, pid[0])) TH_LOG("%s: %s", prog, slurp(log[0]));
	}
	for (int i = 1; i >= 0; i--) {
		const char *r;

		s[i].status = sh_reap(pid[i], TMO);
		snprintf(s[i].out, sizeof(s[i].out), "%s", slurp(log[i]));
		r = slurp(rep[i]);
		s[i].served = field(r, "registrations served ");
		s[i].passed = field(r, " passed ");
		s[i].kernel = strstr(r, "backend kernel") != NULL;
		unlink(log[i]);
		unlink(rep[i]);
	}
	rmdir(dir);
}

/* The last number on the result line of perftest's table (BW or latency). */
static double perf_figure(const char *out, int col)
{
	const char *l = out, *nl;

	/* the line after the header " #bytes ...", first numeric line */
	while ((l = strstr(l, "\n")) != NULL) {
		double v[8];
		int n;

		l++;
		nl = strchr(l, '\n');
		n = sscanf(l, " %lf %lf %lf %lf %lf %lf %lf %lf", &v[0], &v[1], &v[2],
			   &v[3], &v[4], &v[5], &v[6], &v[7]);
		if (n > col && n >= 4 && v[0] >= 1)
			return v[col];
		if (!nl)
			break;
	}
	return -1;
}

FIXTURE(apps) {
	int gid;
	char gidarg[16];
};

FIXTURE_SETUP(apps)
{
	if (access("/dev/mrpool", R_OK | W_OK) || access("/sys/class/infiniband/rxe0", F_OK))
		SKIP(return, "needs /dev/mrpool and rxe0 (the VM job)");
	if (access("/usr/bin/ib_write_bw", X_OK) || access("/usr/bin/ibv_rc_pingpong", X_OK))
		SKIP(return, "needs perftest and ibverbs-utils (tools/deps.sh)");
	self->gid = roce_v2_gid();
	ASSERT_LE(0, self->gid);
	snprintf(self->gidarg, sizeof(self->gidarg), "%d", self->gid);
}

FIXTURE_TEARDOWN(apps)
{
}

/* ibv_rc_pingpong -c: 64 KiB buffers from the pool, local access: served. */
TEST_F_TIMEOUT(apps, rc_pingpong, 1800)
{
	char args[128];
	struct side s[2];

	snprintf(args, sizeof(args), "-d rxe0 -g %s -s 65536 -n 50 -c", self->gidarg);
	pair(_metadata, NULL, true, "ibv_rc_pingpong", args, 18601, s);
	for (int i = 0; i < 2; i++) {
		EXPECT_EQ(0, s[i].status) TH_LOG("%s", s[i].out);
		EXPECT_NE(NULL, strstr(s[i].out, "iters in")) TH_LOG("%s", s[i].out);
		EXPECT_TRUE(s[i].kernel);
		EXPECT_LE(1, s[i].served) TH_LOG("%s", s[i].out);
		EXPECT_EQ(0, s[i].passed);
	}
	TH_LOG("%s", s[1].out);
}

/*
 * While a shimmed ibv_rc_pingpong server waits for its client, debugfs
 * clients shows its row with mr_served 1 (published by the pool thread).
 */
TEST_F_TIMEOUT(apps, clients_show_counters, 1800)
{
	char cmd[256], line[512];
	bool seen = false;
	pid_t srv, cli;
	FILE *f;

	snprintf(cmd, sizeof(cmd), RUN " ibv_rc_pingpong -d rxe0 -g %s -s 65536 -n 10 -p 18602",
		 self->gidarg);
	srv = sh_spawn(cmd, "/tmp/mrp_apps_clients.log");
	ASSERT_TRUE(wait_listen(18602, srv));
	for (int i = 0; i < 600 && !seen; i++) {
		f = popen("tools/mrpoolctl/mrpoolctl clients 2>&1", "r");
		ASSERT_NE(NULL, f);
		while (fgets(line, sizeof(line), f))
			if (strstr(line, "preload: 1 registrations served from the pool, 0 passed on"))
				seen = true;
		pclose(f);
		if (!seen)
			usleep(100000);
	}
	EXPECT_TRUE(seen) TH_LOG("%s", slurp("/sys/kernel/debug/mrpool/clients"));
	snprintf(cmd, sizeof(cmd), "ibv_rc_pingpong -d rxe0 -g %s -s 65536 -n 10 -p 18602 "
		 ADDR, self->gidarg);
	cli = sh_spawn(cmd, "/tmp/mrp_apps_clients_cli.log");
	EXPECT_EQ(0, sh_reap(cli, TMO));
	EXPECT_EQ(0, sh_reap(srv, TMO));
	unlink("/tmp/mrp_apps_clients.log");
	unlink("/tmp/mrp_apps_clients_cli.log");
}

/*
 * perftest's bandwidth tests register with remote access: real MRs by
 * default (the security default), served with a memory window each with
 * MRPOOL_PRELOAD_REMOTE=arena (its rkey, used by the peer process, is the
 * window's); BW with and without the shim printed.
 */
static void bw(struct __test_metadata *_metadata, const char *prog, const char *gid,
	       int port)
{
	char args[128];
	struct side s[2], plain[2], def[2];

	snprintf(args, sizeof(args), "-d rxe0 -x %s -q 1 -n 1000 -F", gid);
	pair(_metadata, NULL, false, prog, args, port, plain);
	pair(_metadata, "env MRPOOL_PRELOAD_REMOTE=arena", true, prog, args, port + 1, s);
	pair(_metadata, NULL, true, prog, args, port + 2, def);
	for (int i = 0; i < 2; i++) {
		EXPECT_EQ(0, plain[i].status) TH_LOG("%s", plain[i].out);
		EXPECT_EQ(0, s[i].status) TH_LOG("%s", s[i].out);
		EXPECT_EQ(0, def[i].status) TH_LOG("%s", def[i].out);
		EXPECT_TRUE(s[i].kernel);
		EXPECT_LE(1, s[i].served) TH_LOG("%s", s[i].out);
		EXPECT_EQ(0, s[i].passed);
		EXPECT_EQ(0, def[i].served);
		EXPECT_LE(1, def[i].passed);
	}
	/* "#bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]" */
	TH_LOG("%s 64 KiB BW average MB/s: plain %.2f, shim (windows) %.2f, shim (default: real MRs) %.2f",
	       prog, perf_figure(plain[1].out, 3), perf_figure(s[1].out, 3),
	       perf_figure(def[1].out, 3));
}

TEST_F_TIMEOUT(apps, ib_write_bw, 1800)
{
	bw(_metadata, "ib_write_bw", self->gidarg, 18611);
}

TEST_F_TIMEOUT(apps, ib_read_bw, 1800)
{
	bw(_metadata, "ib_read_bw", self->gidarg, 18621);
}

/*
 * ib_send_lat: local access only; 4 KiB threshold so its 8 KiB buffer is
 * the pool's. No -q: perftest's latency tests refuse it, even "-q 1".
 */
TEST_F_TIMEOUT(apps, ib_send_lat, 1800)
{
	char args[128];
	struct side s[2], plain[2];

	snprintf(args, sizeof(args), "-d rxe0 -x %s -n 1000 -F", self->gidarg);
	pair(_metadata, NULL, false, "ib_send_lat", args, 18631, plain);
	pair(_metadata, "env MRPOOL_PRELOAD_MIN=4K", true, "ib_send_lat", args, 18632, s);
	for (int i = 0; i < 2; i++) {
		EXPECT_EQ(0, plain[i].status) TH_LOG("%s", plain[i].out);
		EXPECT_EQ(0, s[i].status) TH_LOG("%s", s[i].out);
		EXPECT_TRUE(s[i].kernel);
		EXPECT_LE(1, s[i].served) TH_LOG("%s", s[i].out);
		EXPECT_EQ(0, s[i].passed);
	}
	/* "#bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%" */
	TH_LOG("ib_send_lat 2 B t_typical usec: plain %.2f, shim %.2f",
	       perf_figure(plain[1].out, 4), perf_figure(s[1].out, 4));
}

TEST_HARNESS_MAIN
