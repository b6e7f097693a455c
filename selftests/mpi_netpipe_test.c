// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A distributed engine nobody here wrote (issue 11): Open MPI's NetPIPE
 * (NPopenmpi) between the two guests of tools/vm/run --hosts 2, one rank on
 * each kernel, over rxe0, through each of Open MPI's RDMA engines: libfabric
 * (the ofi MTL on verbs;ofi_rxm) and UCX (pml ucx). Three ways of getting
 * registered memory each:
 *
 *   direct  the engine registers every message (libfabric:
 *           FI_MR_CACHE_MAX_COUNT=0; UCX: UCX_RCACHE_ENABLE=n
 *           UCX_IB_REG_METHODS=direct): the per-message cost mrpool removes
 *   shim    the same, each rank under mrpool-run: NetPIPE's buffers come
 *           from the pool and the engine's registrations of them are
 *           served there
 *   cache   the engine's own registration cache (its default)
 *
 * Host 1 runs mpirun; host 2 runs the launcher's server (mpi_rsh: the
 * guests have no sshd) until host 1 says done. Asserted: NetPIPE's
 * integrity mode (-i: it checks every byte received) passes under the
 * shim, and each rank's shim report shows registrations served from the
 * pool on the kernel backend. With MRPOOL_MPI_MEASURE=1 (make bench; make
 * check proves the above only: the three measured runs took most of this
 * test's time), NetPIPE then measures each mode, every run must end well,
 * and the figures are printed with the ratios between the three (TCG:
 * ratios, never asserted).
 *
 * UCX 1.13 (Debian 12) cannot connect on rxe: its wire-up needs ud_verbs
 * beside rc_verbs, and its UD endpoints resend their first packet until
 * "UD endpoint ... unhandled timeout error" (in one guest and between two;
 * ibv_ud_pingpong between the same guests works). The UCX test tries each
 * run and says SKIP only when UCX fails that way with and without the shim.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "sh_util.h"

#define RSH		"selftests/mpi_rsh"
#define RUN		"tools/run/mrpool-run"
#define RUN_S		900	/* per mpirun: a hang catcher */
#define RUNS		5	/* mpiruns per engine at most */
#define SERVE_S		(RUNS * RUN_S + 300)	/* host 2's wait for "done", per test */
/*
 * 8 KiB .. 2 MiB, doubling. NetPIPE stops after the first size whose
 * transfer takes over a second, which over this emulated link (~25 Mbit/s)
 * is 3 or 4 MiB; the bound is above that, so it runs as far as it will.
 */
#define NSIZES		9
/*
 * How far a run must get: 8..64 KiB. How far it gets is a matter of speed
 * (NetPIPE's one-second stop), which a busy host or a slower emulated link
 * halves; 64 KiB at the one-second stop is 0.5 Mbit/s, a tenth of the
 * slowest run seen here (4 Mbit/s, the host loaded).
 */
#define MIN_SIZES	4
#define LO		8192
#define UPPER		(6 << 20)
#define NP		"NPopenmpi -p 0"	/* no perturbation: steps of 1.5x and 2x */

static const char *const modes[] = { "direct", "shim", "cache" };

/* One of Open MPI's RDMA engines: its mpirun options per mode. */
struct engine {
	const char *name;
	const char *common;	/* every mode */
	const char *direct;	/* no registration cache */
};

/*
 * rxm's CQ for 256 peers (its default universe) exceeds rxe's max_cqe.
 * FI_OFI_RXM_USE_SRX=1: libfabric 1.17's rxm_close_conn() closes a
 * connection's msg endpoint and only then flushes the shared CQ, where a
 * receive completion still queued reposts its buffer on the closed
 * endpoint: fi_recv() through freed ops, SIGSEGV at 0x8 in MPI_Finalize
 * (seen once here: libfabric.so.1+0xb7882 is rxm_post_recv()'s call;
 * fixed upstream by flushing first, ofiwg/libfabric#12674). With a shared
 * receive context the buffers are reposted on it, which outlives every
 * connection. FI_LOG_LEVEL=warn: the ofi MTL reports a failed send or
 * completion as MPI_ERR_INTERN only (seen once here, at 48 KiB under the
 * shim); libfabric's own warning says which call failed and why.
 */
static const struct engine ofi = {
	"ofi",
	"--mca pml cm --mca mtl ofi -x FI_PROVIDER=verbs\\;ofi_rxm -x FI_UNIVERSE_SIZE=4 "
	"-x FI_OFI_RXM_USE_SRX=1 -x FI_LOG_LEVEL=warn",
	"-x FI_MR_CACHE_MAX_COUNT=0",
};

static const struct engine ucx = {
	"ucx",
	"--mca pml ucx -x UCX_NET_DEVICES=rxe0:1 -x UCX_TLS=rc_verbs,ud_verbs,self "
	"-x UCX_IB_GID_INDEX=1 -x UCX_UD_TIMEOUT=30s",
	"-x UCX_RCACHE_ENABLE=n -x UCX_IB_REG_METHODS=direct",
};

/* sh -c CMD with output to LOG; its status, or -1 after secs (killed). */
static int run(const char *cmd, const char *log, int secs)
{
	return sh_reap(sh_spawn(cmd, log), secs);
}

/* A file's text (its last 8 KiB), for messages; static. */
static const char *slurp(const char *path)
{
	static char buf[8192];
	ssize_t n = 0;
	off_t size;
	int fd = open(path, O_RDONLY);

	buf[0] = 0;
	if (fd < 0)
		return buf;
	size = lseek(fd, 0, SEEK_END);
	lseek(fd, size > (off_t)sizeof(buf) - 1 ? size - (off_t)sizeof(buf) + 1 : 0, SEEK_SET);
	n = read(fd, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = 0;
	close(fd);
	return buf;
}

/* A log in the TAP output, each line a comment (TH_LOG prints one line). */
static const char *show(const char *path)
{
	const char *text = slurp(path);

	for (const char *l = text; *l; ) {
		const char *nl = strchr(l, '\n');
		int len = nl ? (int)(nl - l) : (int)strlen(l);

		fprintf(stderr, "#   %.*s\n", len, l);
		l += len + (nl != NULL);
	}
	return path;
}

/* Each rank's shim report: one file per guest and engine, the same path on both. */
static void report_path(char *buf, size_t len, const struct engine *e)
{
	snprintf(buf, len, "/tmp/mrp_mpi_%s.report", e->name);
}

/* mpirun of NetPIPE with np_args, engine e in mode; its status, -2: no room */
static int mpirun(const char *peer, const struct engine *e, const char *mode,
		  const char *np_args, const char *log)
{
	char cmd[4096], cwd[1024], rep[64], run_path[1100];
	bool shim = !strcmp(mode, "shim");
	int n;

	/* absolute paths: the remote side's working directory is not ours to assume */
	if (!getcwd(cwd, sizeof(cwd)))
		return -2;
	snprintf(run_path, sizeof(run_path), "%s/" RUN, cwd);
	report_path(rep, sizeof(rep), e);
	n = snprintf(cmd, sizeof(cmd),
		 "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
		 "mpirun --host %s,%s -np 2 --mca plm_rsh_agent %s/" RSH " "
		 "--mca oob_tcp_if_include 10.78.0.0/24 --mca btl self "
		 "%s %s %s%s%s%s " NP " %s",
		 getenv("MRPOOL_HOST_IP"), peer, cwd,
		 e->common, strcmp(mode, "cache") ? e->direct : "",
		 shim ? "-x MRPOOL_PRELOAD_MIN=8192 -x MRPOOL_PRELOAD_REPORT=" : "",
		 shim ? rep : "", shim ? " " : "", shim ? run_path : "", np_args);
	if (n < 0 || n >= (int)sizeof(cmd))
		return -2;
	return run(cmd, log, RUN_S);
}

/* NetPIPE's output file: bytes, Mbit/s, seconds per one-way message. */
static int read_np(const char *path, double us[NSIZES], double mbps_out[NSIZES])
{
	FILE *f = fopen(path, "r");
	double bytes, mbps, secs;
	int n = 0;

	if (!f)
		return 0;
	while (fscanf(f, " %lf %lf %lf", &bytes, &mbps, &secs) == 3) {
		for (int i = 0; i < NSIZES; i++)
			if ((long)bytes == (long)LO << i)
				us[i] = secs * 1e6, mbps_out[i] = mbps, n++;
	}
	fclose(f);
	return n;
}

FIXTURE(mpi) {
	int index;	/* 0: set up skipped, nothing to run */
	const char *peer;
};

FIXTURE_SETUP(mpi)
{
	const char *idx = getenv("MRPOOL_HOST_INDEX");

	self->index = 0;
	self->peer = getenv("MRPOOL_PEER_IP");
	if (!idx || !self->peer || !getenv("MRPOOL_HOST_IP"))
		SKIP(return, "MRPOOL_HOST_INDEX/MRPOOL_PEER_IP unset: needs tools/vm/run --hosts 2");
	/* in the run made for it, a missing program is a failure, not a SKIP */
	ASSERT_TRUE(!access("/usr/bin/NPopenmpi", X_OK) && !access("/usr/bin/mpirun", X_OK))
		TH_LOG("needs openmpi-bin and netpipe-openmpi (tools/deps.sh)");
	ASSERT_EQ(0, access(RSH, X_OK));
	ASSERT_TRUE(!strcmp(idx, "1") || !strcmp(idx, "2"));
	self->index = atoi(idx);
}

/*
 * Host 1, after each test however it ended (the harness runs the teardown
 * unless the test itself timed out): host 2's server for that test stops,
 * and host 2 checks its ranks' reports. A host 1 that never gets here
 * leaves host 2 to its deadline (SERVE_S).
 */
FIXTURE_TEARDOWN(mpi)
{
	char cmd[128];

	if (self->index != 1)
		return;
	snprintf(cmd, sizeof(cmd), RSH " done %s", self->peer);
	if (run(cmd, "/tmp/mrp_mpi_done.log", 60))
		TH_LOG("host 2's server did not take \"done\": %s", show("/tmp/mrp_mpi_done.log"));
}

/* make bench's runs: NetPIPE measures each mode after the integrity run. */
static bool measure(void)
{
	const char *m = getenv("MRPOOL_MPI_MEASURE");

	return m && !strcmp(m, "1");
}

/*
 * This guest's shimmed ranks of engine e, one report line per run (the
 * integrity run, and the measured one with measure()): each on the kernel
 * backend, each with registrations served from the pool.
 */
static void check_report(struct __test_metadata *_metadata, const struct engine *e)
{
	char rep[64], line[512];
	int lines = 0;
	FILE *f;

	report_path(rep, sizeof(rep), e);
	TH_LOG("%s, this host's shimmed ranks:", e->name);
	show(rep);
	f = fopen(rep, "r");
	ASSERT_NE(NULL, f) TH_LOG("no shim report %s", rep);
	while (fgets(line, sizeof(line), f)) {
		const char *served = strstr(line, "registrations served ");

		lines++;
		EXPECT_NE(NULL, strstr(line, "backend kernel")) TH_LOG("%s", line);
		EXPECT_TRUE(served && atoll(served + strlen("registrations served ")) > 0)
			TH_LOG("%s", line);
	}
	fclose(f);
	EXPECT_EQ(measure() ? 2 : 1, lines);
}

/* The peer's server: it may boot later than this guest (10 minutes at most). */
static bool peer_up(const char *peer)
{
	char cmd[128];
	time_t end = time(NULL) + 600;

	snprintf(cmd, sizeof(cmd), RSH " %s true", peer);
	while (time(NULL) < end) {
		if (run(cmd, "/tmp/mrp_mpi_probe.log", 10) == 0)
			return true;
		sleep(1);
	}
	return false;
}

/* UCX's known failure on rxe, in a run's log. */
static bool ucx_ud_timeout(const char *log)
{
	return strstr(slurp(log), "UD endpoint") && strstr(slurp(log), "unhandled timeout error");
}

/*
 * libfabric's reason (FI_LOG_LEVEL=warn) for a failed send in rxm: the
 * peer's rxe refused a SEND longer than its posted receive.
 */
static bool ofi_rxm_length_error(const char *log)
{
	return strstr(slurp(log), "rxm_handle_comp_error") &&
	       strstr(slurp(log), "prov_err: remote invalid request error") &&
	       !strstr(slurp(log), "Integrity check failed");
}

/*
 * rxe's own counters on both guests (`rdma statistic show`: packets sent
 * and received, out-of-sequence and duplicate requests, retries, RNR and
 * send errors), into the TAP output after each ofi integrity run: whether
 * a failed SEND came with rxe's retransmissions (a lost packet re-sent
 * under load) or on a clean link (rxm's own length). Why the ofi run
 * fails now and then is not yet known (see the retry below).
 */
static void rxe_counters(const char *peer, const char *when)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd),
		 "echo host 1; rdma statistic show; echo host 2; " RSH " %s rdma statistic show",
		 peer);
	if (run(cmd, "/tmp/mrp_mpi_rxe_counters.log", 60))
		fprintf(stderr, "# rxe counters %s: not all read\n", when);
	else
		fprintf(stderr, "# rxe counters %s:\n", when);
	show("/tmp/mrp_mpi_rxe_counters.log");
}

/* Host 1: NetPIPE on engine e, integrity under the shim, then (measure()) each mode. */
static void netpipe(struct __test_metadata *_metadata, FIXTURE_DATA(mpi) *self,
		    const struct engine *e)
{
	double us[3][NSIZES], mbps[3][NSIZES];
	char log[64], out[64], args[256], rep[64], cmd[256];
	int st, n;

	ASSERT_TRUE(peer_up(self->peer)) TH_LOG("host 2's launcher server never answered");
	report_path(rep, sizeof(rep), e);
	unlink(rep);

	/* NetPIPE checks every byte it receives (-i), on pool memory */
	snprintf(log, sizeof(log), "/tmp/mrp_mpi_%s_integrity.log", e->name);
	snprintf(out, sizeof(out), "/tmp/mrp_mpi_%s_integrity.np", e->name);
	snprintf(args, sizeof(args), "-i -n 2 -l %d -u %d -o %s", LO, UPPER, out);
	if (e == &ofi)
		rxe_counters(self->peer, "before the ofi integrity run");
	st = mpirun(self->peer, e, "shim", args, log);
	if (e == &ofi)
		rxe_counters(self->peer, "after it");
	if (st && e == &ofi && ofi_rxm_length_error(log)) {
		/*
		 * rxm's own protocol, not the bytes: a SEND longer than the
		 * receive the peer's rxm posted (rxe's length error, NAKed as
		 * an invalid request), seen in about one run in five between
		 * these guests, at 48 KiB to 192 KiB, always in MPI_Send.
		 * Once more, from clean reports; a corrupted byte is never
		 * retried (NetPIPE says "Integrity check failed").
		 */
		show(log);
		TH_LOG("ofi: rxm's SEND overran the peer's posted receive (above): the integrity run once more");
		unlink(rep);
		snprintf(cmd, sizeof(cmd), RSH " %s rm -f %s", self->peer, rep);
		ASSERT_EQ(0, run(cmd, "/tmp/mrp_mpi_rm.log", 60));
		snprintf(log, sizeof(log), "/tmp/mrp_mpi_%s_integrity2.log", e->name);
		st = mpirun(self->peer, e, "shim", args, log);
	}
	if (st && e == &ucx && ucx_ud_timeout(log)) {
		/*
		 * UCX's own failure, or the shim's? The same without the shim
		 * must fail the same way for a SKIP.
		 */
		show(log);
		snprintf(log, sizeof(log), "/tmp/mrp_mpi_%s_noshim.log", e->name);
		snprintf(args, sizeof(args), "-n 2 -l %d -u %d -o %s", LO, LO * 2, out);
		st = mpirun(self->peer, e, "direct", args, log);
		show(log);
		ASSERT_TRUE(st && ucx_ud_timeout(log))
			TH_LOG("UCX connects without the shim (status %d) but not with it", st);
		SKIP(return, "UCX 1.13 on rxe: its UD wire-up timed out, with and without the shim (\"UD endpoint ... unhandled timeout error\", above; ibv_ud_pingpong works between these guests)");
	}
	ASSERT_EQ(0, st) TH_LOG("%s integrity run: %s", e->name, show(log));
	ASSERT_NE(NULL, strstr(slurp(log), "Integrity check passed")) TH_LOG("%s", show(log));
	ASSERT_EQ(NULL, strstr(slurp(log), "Integrity check failed")) TH_LOG("%s", show(log));
	if (!measure()) {
		check_report(_metadata, e);
		return;
	}

	for (int m = 0; m < 3; m++) {
		snprintf(log, sizeof(log), "/tmp/mrp_mpi_%s_%s.log", e->name, modes[m]);
		snprintf(out, sizeof(out), "/tmp/mrp_mpi_%s_%s.np", e->name, modes[m]);
		snprintf(args, sizeof(args), "-l %d -u %d -n 5 -o %s", LO, UPPER, out);
		unlink(out);
		memset(us[m], 0, sizeof(us[m]));
		memset(mbps[m], 0, sizeof(mbps[m]));
		st = mpirun(self->peer, e, modes[m], args, log);
		EXPECT_EQ(0, st) TH_LOG("%s %s: %s", e->name, modes[m], show(log));
		n = read_np(out, us[m], mbps[m]);
		EXPECT_LE(MIN_SIZES, n) TH_LOG("%s %s: %s", e->name, modes[m], show(out));
		/* sizes in order, none skipped: NetPIPE stops, never jumps */
		for (int i = 0; i < n && i < NSIZES; i++) {
			EXPECT_LT(0, us[m][i]) TH_LOG("%s %s: no %d bytes", e->name,
						      modes[m], LO << i);
		}
	}
	check_report(_metadata, e);

	TH_LOG("%s: NetPIPE one-way time per message (us), Mbit/s, and rate vs direct", e->name);
	TH_LOG("%8s %10s %10s %10s %7s %7s %7s %9s %9s", "bytes", "direct", "shim", "cache",
	       "Mb/dir", "Mb/shim", "Mb/cach", "shim/dir", "cache/dir");
	for (int i = 0; i < NSIZES; i++) {
		/*
		 * A size no mode reached (NetPIPE's one-second stop, 1 to 3
		 * MiB on this link) is said, not printed as a row of zeros.
		 */
		if (us[0][i] <= 0 && us[1][i] <= 0 && us[2][i] <= 0) {
			TH_LOG("%8d (no mode reached it: NetPIPE stops after a size that takes over a second)",
			       LO << i);
			continue;
		}
		TH_LOG("%8d %10.1f %10.1f %10.1f %7.2f %7.2f %7.2f %8.2fx %8.2fx", LO << i,
		       us[0][i], us[1][i], us[2][i], mbps[0][i], mbps[1][i], mbps[2][i],
		       us[1][i] > 0 && us[0][i] > 0 ? us[0][i] / us[1][i] : 0,
		       us[2][i] > 0 && us[0][i] > 0 ? us[0][i] / us[2][i] : 0);
	}
}

/*
 * Host 2: the launcher's server until host 1's test of engine e is done;
 * then its ranks' reports, or SKIP where host 1 skipped the engine.
 */
static void host2(struct __test_metadata *_metadata, FIXTURE_DATA(mpi) *self,
		  const struct engine *e)
{
	char cmd[256], rep[64];

	report_path(rep, sizeof(rep), e);
	unlink(rep);
	unlink("/tmp/mrp_mpi_skip");
	snprintf(cmd, sizeof(cmd), RSH " serve %s %s %d", getenv("MRPOOL_HOST_IP"),
		 self->peer, SERVE_S);
	ASSERT_EQ(0, run(cmd, "/tmp/mrp_mpi_rsh.log", SERVE_S + 60))
		TH_LOG("launcher server: %s", show("/tmp/mrp_mpi_rsh.log"));
	if (!access("/tmp/mrp_mpi_skip", F_OK))
		SKIP(return, "host 1 skipped %s: %s", e->name, slurp("/tmp/mrp_mpi_skip"));
	check_report(_metadata, e);
}

/* Open MPI's ofi MTL on libfabric's verbs;ofi_rxm: the measured engine. */
TEST_F_TIMEOUT(mpi, netpipe_ofi, SERVE_S + 120)
{
	if (self->index == 1)
		netpipe(_metadata, self, &ofi);
	else if (self->index == 2)
		host2(_metadata, self, &ofi);
}

/* Open MPI's UCX PML: tried each run, measured the day it connects on rxe. */
TEST_F_TIMEOUT(mpi, netpipe_ucx, SERVE_S + 120)
{
	char cmd[256];

	if (self->index == 2) {
		host2(_metadata, self, &ucx);
		return;
	}
	if (self->index != 1)
		return;
	netpipe(_metadata, self, &ucx);
	if (_metadata->skip) {
		/* host 2's test of this engine says SKIP too */
		snprintf(cmd, sizeof(cmd), RSH " %s 'echo UD wire-up timed out > /tmp/mrp_mpi_skip'",
			 self->peer);
		EXPECT_EQ(0, run(cmd, "/tmp/mrp_mpi_probe.log", 60));
	}
}

TEST_HARNESS_MAIN
