// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The preload shim's registrations with remote access under
 * MRPOOL_PRELOAD_REMOTE=arena on rxe0 (issue 32, review lib-2026-12-04 row
 * 8): this binary runs itself again under lib/libmrpool-preload.so, which
 * serves ibv_reg_mr(REMOTE_WRITE) of a malloc()ed pool buffer (its report
 * counts it served, its struct has no kernel handle); a peer QP's RDMA
 * WRITE with the MR's rkey lands; after ibv_dereg_mr() the same WRITE
 * fails with a remote access error and the bytes there stay as they were,
 * as with a real MR. A WRITE one byte past the registered range fails on
 * a device that enforces memory window bounds; rxe does not (its
 * responder checks the MR's range, not the window's: check_rkey() in
 * rxe_resp.c of 6.1), so that test skips there. The shimmed run also
 * times served remote pairs (ibv_reg_mr + ibv_dereg_mr) against real ones
 * of a glibc buffer, in the same run, and prints both (a ratio, nothing
 * asserted: the guest runs under TCG).
 *
 * VM kernels: one (the shim's behaviour; the kernel paths under it are
 * lib_rdma_test's and pool_rdma_test's on every kernel)
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "kselftest_harness.h"
#include "rdmatest.h"

#define SHIM		"lib/libmrpool-preload.so"
#define ENV_MODE	"MRP_MW_TEST_MODE"
#define LEN		(16 << 10)	/* the registered range */
#define BUF		(256 << 10)	/* the malloc()ed buffer: the pool's */
#define OFF		4096		/* where the range starts in it */
#define PAIRS		200		/* timed pairs per round */
#define ROUNDS		5

/* The shimmed run's outcomes (its exit status). */
enum {
	MW_OK,
	MW_NO_DEVICE = 4,	/* skip: no rxe0 */
	MW_SETUP,		/* the loop, a buffer or a registration failed */
	MW_NOT_SERVED,		/* the registration was passed on, or has no rkey */
	MW_WRITE_FAILED,	/* the WRITE with the live rkey failed */
	MW_NOT_LANDED,		/* ... or its bytes are not there */
	MW_DEREG,		/* ibv_dereg_mr() failed */
	MW_REVOKED_NOT,		/* the WRITE after dereg did not fail as a real MR's */
	MW_CHANGED,		/* ... and changed the bytes */
	MW_RECONNECT,		/* the loop did not come back */
	MW_PAST_NOT,		/* a WRITE past the range was not refused */
	MW_PAST_CHANGED,	/* ... and changed the byte after the range */
	MW_TIMING,		/* a timed pair failed */
};

static bool all_bytes(const unsigned char *p, int c, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != c)
			return false;
	return true;
}

/* ns per ibv_reg_mr + ibv_dereg_mr pair of [p, p + LEN), over PAIRS pairs. */
static long long pair_ns(struct ibv_pd *pd, void *p, bool *served)
{
	uint64_t t0 = rdt_now_ns();

	for (int i = 0; i < PAIRS; i++) {
		struct ibv_mr *mr = ibv_reg_mr(pd, p, LEN, IBV_ACCESS_LOCAL_WRITE |
					       IBV_ACCESS_REMOTE_WRITE);

		if (!mr)
			return -1;
		*served = mr->handle == UINT32_MAX;
		if (ibv_dereg_mr(mr))
			return -1;
	}
	return (long long)(rdt_now_ns() - t0) / PAIRS;
}

/* Under the shim: the registration, the WRITEs, the timing. */
static int shimmed(bool past)
{
	struct rdt_dev dev = { 0 };
	struct rdt_loop lp = { 0 };
	unsigned char *dst, *src, *real;
	struct ibv_mr *smr, *mr;
	long long served_ns, real_ns;
	bool s_served, r_served;
	int status = 0, ret;

	if (rdt_dev_open(&dev, NULL, NULL))
		return MW_NO_DEVICE;
	if (rdt_loop_create(&lp, &dev))
		return MW_SETUP;
	dst = malloc(BUF);
	src = malloc(LEN + 1);
	real = malloc(LEN);		/* below MRPOOL_PRELOAD_MIN: glibc's */
	if (!dst || !src || !real)
		return MW_SETUP;
	memset(src, 0xab, LEN + 1);
	memset(dst, 0x11, BUF);
	smr = ibv_reg_mr(dev.pd, src, LEN + 1, IBV_ACCESS_LOCAL_WRITE);
	mr = ibv_reg_mr(dev.pd, dst + OFF, LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!smr || !mr)
		return MW_SETUP;
	if (mr->handle != UINT32_MAX || !mr->rkey)
		return MW_NOT_SERVED;
	if (past) {
		/* one byte past the range, with the live rkey */
		ret = rdt_write(&lp, src, smr->lkey, (uintptr_t)dst + OFF + LEN, mr->rkey, 1,
				&status);
		printf("# past the range: %d, status %d\n", ret, status);
		if (ret != -EIO || status != IBV_WC_REM_ACCESS_ERR)
			return MW_PAST_NOT;
		return all_bytes(dst + OFF + LEN, 0x11, 1) ? MW_OK : MW_PAST_CHANGED;
	}
	if (rdt_write(&lp, src, smr->lkey, (uintptr_t)dst + OFF, mr->rkey, LEN, &status))
		return MW_WRITE_FAILED;
	if (!all_bytes(dst + OFF, 0xab, LEN) || !all_bytes(dst, 0x11, OFF))
		return MW_NOT_LANDED;
	if (ibv_dereg_mr(mr))
		return MW_DEREG;
	/* what the program puts there next */
	memset(dst + OFF, 0x33, LEN);
	ret = rdt_write(&lp, src, smr->lkey, (uintptr_t)dst + OFF, mr->rkey, LEN, &status);
	printf("# WRITE with the deregistered rkey %#x: %d, status %d (%s)\n", mr->rkey, ret,
	       status, ibv_wc_status_str(status));
	if (ret != -EIO || status != IBV_WC_REM_ACCESS_ERR)
		return all_bytes(dst + OFF, 0x33, LEN) ? MW_REVOKED_NOT : MW_CHANGED;
	if (!all_bytes(dst + OFF, 0x33, LEN))
		return MW_CHANGED;
	if (rdt_loop_reconnect(&lp))
		return MW_RECONNECT;

	/* the best of ROUNDS rounds each, taken in turn */
	served_ns = real_ns = LLONG_MAX;
	for (int r = 0; r < ROUNDS; r++) {
		long long s_ns = pair_ns(dev.pd, dst + OFF, &s_served);
		long long r_ns = pair_ns(dev.pd, real, &r_served);

		if (s_ns <= 0 || r_ns <= 0 || !s_served || r_served)
			return MW_TIMING;
		served_ns = s_ns < served_ns ? s_ns : served_ns;
		real_ns = r_ns < real_ns ? r_ns : real_ns;
	}
	printf("# ibv_reg_mr(REMOTE_WRITE) + ibv_dereg_mr of %d KiB: served (a window) %lld ns, "
	       "real %lld ns, served/real %.2f\n", LEN >> 10, served_ns, real_ns,
	       (double)served_ns / (double)real_ns);
	fflush(stdout);
	ibv_dereg_mr(smr);
	rdt_loop_destroy(&lp);
	rdt_dev_close(&dev);
	free(dst);
	free(src);
	free(real);
	return MW_OK;
}

/* The value after name in the report line, or -1. */
static long long field(const char *line, const char *name)
{
	const char *p = strstr(line, name);

	return p ? strtoll(p + strlen(name), NULL, 10) : -1;
}

/* This binary in mode under the shim; its exit status, its report in line. */
static int run_shimmed(const char *mode, char *line, size_t len)
{
	char shim[PATH_MAX], report[] = "/tmp/preload_mw_report.XXXXXX";
	int fd = mkstemp(report), st = -1;
	pid_t pid;
	FILE *f;

	line[0] = 0;
	if (fd < 0 || !realpath(SHIM, shim))
		return -1;
	close(fd);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		setenv("LD_PRELOAD", shim, 1);
		setenv("MRPOOL_PRELOAD_REMOTE", "arena", 1);
		setenv("MRPOOL_PRELOAD_INHERIT", "all", 1);
		setenv("MRPOOL_PRELOAD_REPORT", report, 1);
		setenv(ENV_MODE, mode, 1);
		execl("/proc/self/exe", "preload_mw_test", (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		st = -1;
	f = fopen(report, "r");
	if (f) {
		if (!fgets(line, (int)len, f))
			line[0] = 0;
		fclose(f);
	}
	unlink(report);
	return st;
}

/*
 * Served with a window's rkey: a WRITE lands; after dereg the same WRITE
 * fails with a remote access error, the bytes intact.
 */
TEST(served_remote_rkey_dies_at_dereg)
{
	char line[1024];
	int st = run_shimmed("dereg", line, sizeof(line));

	if (WIFEXITED(st) && WEXITSTATUS(st) == MW_NO_DEVICE)
		SKIP(return, "no RDMA device (rxe0)");
	ASSERT_TRUE(WIFEXITED(st)) TH_LOG("status %#x", st);
	EXPECT_EQ(MW_OK, WEXITSTATUS(st)) TH_LOG("see enum: %d", WEXITSTATUS(st));
	/* the test's MR and the timed ones (ROUNDS * PAIRS) served */
	EXPECT_EQ(1 + ROUNDS * PAIRS, field(line, "registrations served ")) TH_LOG("%s", line);
}

/* A WRITE one byte past the registered range fails (not on rxe). */
TEST(served_remote_range_only)
{
	struct rdt_dev dev = { 0 };
	char line[1024];
	bool rxe;
	int st;

	if (rdt_dev_open(&dev, NULL, NULL))
		SKIP(return, "no RDMA device (rxe0)");
	rxe = !strncmp(dev.name, "rxe", 3);
	rdt_dev_close(&dev);
	if (rxe)
		SKIP(return, "rxe (6.1, 6.12 and 7.3) checks the MR's range, not the window's (check_rkey in rxe_resp.c)");
	st = run_shimmed("past", line, sizeof(line));
	ASSERT_TRUE(WIFEXITED(st)) TH_LOG("status %#x", st);
	EXPECT_EQ(MW_OK, WEXITSTATUS(st)) TH_LOG("see enum: %d", WEXITSTATUS(st));
}

/* The shimmed run: a mode, not the harness. */
__attribute__((constructor)) static void mode_main(void)
{
	const char *mode = getenv(ENV_MODE);

	if (mode)
		exit(shimmed(!strcmp(mode, "past")));
}

TEST_HARNESS_MAIN
