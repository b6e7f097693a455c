// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Kill storm (issue 13): victim processes holding everything a process can
 * hold of the pool -- a libmrpool pool with a PD attached (background
 * growth on or off) and buffers of several classes, an extra MR over a
 * pool buffer and one over malloc'd memory, a raw slice mapped, a dma-buf
 * of it, and RDMA WRITEs over a QP loop between pool buffers, checked --
 * are SIGKILLed at random moments, three alive at a time, MRPOOL_KILLS
 * times (default 100, the short form; make stress runs 1000): a random
 * victim, once it reaches a random stage, within a random delay. Each
 * victim notes how far it got, so the report shows where the kills
 * landed.
 *
 * Afterwards: the pool is whole (used and quarantined bytes back to their
 * baseline, free == total), rxe0 holds as many contexts, PDs, CQs, QPs and
 * MRs as before (the kernel's own `rdma resource` counts), and the
 * kernel's available memory plus the pool's is back to its baseline within
 * POOL_MEM_SLACK_MB: one leaked chunk or pinned megabyte per kill would take
 * 100 MiB or more in the short form.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop
#pragma GCC diagnostic ignored "-Wclobbered"

#include "mrpool.h"
#define POOL_TEST_UNBOUNDED
#include "ib_util.h"
#include "rdmatest.h"

#define VICTIMS		3	/* alive at once */
#define MAX_DELAY_MS	20	/* a victim dies within this of its stage */
#define MALLOC_MR	(1UL << 20)
#define XFER		(64UL << 10)

/* How far a victim got: the stage it was in when the SIGKILL came. */
#define STAGES(X)							\
	X(START) X(POOL) X(DEVICE) X(ATTACH) X(BUFFERS) X(EXTRA_MRS)	\
	X(SLICE) X(DMABUF) X(TRANSFER)
#define STAGE_ENUM(n) ST_##n,
#define STAGE_NAME(n) #n,
enum { STAGES(STAGE_ENUM) NSTAGES };
static const char *const stage_name[] = { STAGES(STAGE_NAME) };

/* Shared with the victims: one slot per live victim. */
struct storm {
	volatile int stage[VICTIMS];
	volatile unsigned long transfers[VICTIMS];
	volatile int bad_data;		/* a WRITE delivered wrong bytes */
	volatile int failed;		/* a victim's step failed: its stage + 1 */
	volatile int failed_err;
};

static void victim_fail(struct storm *st, int slot, int err)
{
	st->failed = st->stage[slot] + 1;
	st->failed_err = err;
	_exit(1);
}

/*
 * Take everything a process can hold, then transfer until killed. Every
 * step that fails is reported: in the VM each of them must work.
 */
static void victim(struct storm *st, int slot, unsigned int seed)
{
	struct mrp_pool_attr attr = {
		.comp_mask = MRP_POOL_ATTR_BACKEND | MRP_POOL_ATTR_ARENA_SIZE |
			     MRP_POOL_ATTR_BACKGROUND,
		.backend = MRP_BACKEND_KERNEL,
		.arena_size = 2 << 20,
		.background = (int)(seed & 1),
	};
	static const size_t sizes[] = { 4096, 8192, XFER, XFER, 1 << 20 };
	struct mrp_buf bufs[5];
	struct mrpool_export_dmabuf e = { .size = sizeof(e) };
	struct mrpool_alloc a;
	struct ibv_mr *mr1, *mr2;
	struct mrp_pool *pool;
	struct rdt_loop lp;
	struct rdt_dev dev;
	unsigned int i;
	int fd, ret;
	void *mem, *p;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	st->stage[slot] = ST_POOL;
	pool = mrp_pool_open(&attr);
	if (!pool)
		victim_fail(st, slot, errno);
	st->stage[slot] = ST_DEVICE;
	ret = rdt_dev_open(&dev, NULL, NULL);
	if (!ret)
		ret = rdt_loop_create(&lp, &dev);
	if (ret)
		victim_fail(st, slot, -ret);
	/* A hang catcher: churn and a loaded host slow completions down. */
	lp.timeout_ms = 120000;
	st->stage[slot] = ST_ATTACH;
	ret = mrp_attach_pd(pool, dev.pd, RDT_ACCESS_ALL);
	if (ret)
		victim_fail(st, slot, -ret);
	st->stage[slot] = ST_BUFFERS;
	for (i = 0; i < 5; i++) {
		ret = mrp_alloc(pool, sizes[i], dev.pd, &bufs[i]);
		if (ret)
			victim_fail(st, slot, -ret);
	}
	st->stage[slot] = ST_EXTRA_MRS;
	mr1 = ibv_reg_mr(dev.pd, bufs[4].addr, bufs[4].size,
			 IBV_ACCESS_LOCAL_WRITE);
	mem = malloc(MALLOC_MR);
	if (!mem)
		victim_fail(st, slot, ENOMEM);
	memset(mem, 0x11, MALLOC_MR);
	mr2 = ibv_reg_mr(dev.pd, mem, MALLOC_MR, IBV_ACCESS_LOCAL_WRITE);
	if (!mr1 || !mr2)
		victim_fail(st, slot, errno);
	st->stage[slot] = ST_SLICE;
	fd = pool_open();
	if (fd < 0)
		victim_fail(st, slot, errno);
	ret = pool_alloc(fd, 1, &a);
	if (ret)
		victim_fail(st, slot, -ret);
	p = pool_map(fd, &a);
	if (p == MAP_FAILED)
		victim_fail(st, slot, errno);
	memset(p, 0x22, a.length);
	st->stage[slot] = ST_DMABUF;
	e.slice_id = a.slice_id;
	ret = pool_ioctl(fd, MRPOOL_IOC_EXPORT_DMABUF, &e);
	if (ret)
		victim_fail(st, slot, -ret);
	/* The slice now lives through the mapping and the dma-buf only. */
	pool_free(fd, a.slice_id);
	st->stage[slot] = ST_TRANSFER;
	for (i = 0;; i++) {
		unsigned int pat = seed + i;
		struct mrp_buf *src = &bufs[2 + (i & 1)];
		struct mrp_buf *dst = &bufs[3 - (i & 1)];

		rdt_pattern_fill(src->addr, XFER, pat);
		ret = rdt_write(&lp, src->addr, src->lkey,
				(uintptr_t)dst->addr, dst->rkey, XFER, NULL);
		if (ret)
			victim_fail(st, slot, -ret);
		if (!rdt_pattern_same(dst->addr, XFER, pat))
			st->bad_data = 1;
		st->transfers[slot]++;
		/* Churn the small classes between transfers. */
		mrp_free(pool, bufs[i & 1].addr);
		if (mrp_alloc(pool, sizes[i & 1], dev.pd, &bufs[i & 1]))
			victim_fail(st, slot, ENOMEM);
	}
}

static unsigned long env_ul(const char *name, unsigned long def)
{
	const char *v = getenv(name);

	return v && *v ? strtoul(v, NULL, 0) : def;
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static pid_t spawn(struct storm *st, int slot, unsigned int seed)
{
	pid_t pid;

	st->stage[slot] = ST_START;
	st->transfers[slot] = 0;
	pid = fork();
	if (!pid)
		victim(st, slot, seed);
	return pid;
}

/* One victim through all its stages, killed: libraries cached, pool grown. */
static void warm_up(struct storm *st)
{
	pid_t pid = spawn(st, 0, 1);
	int status;

	POOL_WAIT(st->transfers[0] > 0 || st->failed, 60000);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
}

TEST(kill_storm)
{
	unsigned long kills = env_ul("MRPOOL_KILLS", 100), done = 0;
	uint64_t seed = env_ul("MRPOOL_KILL_SEED", 0);
	unsigned long at[NSTAGES] = { 0 }, transfers = 0;
	long long avail0 = 0;
	struct rdma_res res0;
	struct mrpool_query base, q;
	pid_t pids[VICTIMS] = { 0 };
	int *dead, fd, status, slot, target, wait_ms;
	unsigned long want;
	struct storm *st;
	char line[512];
	size_t n = 0;
	unsigned int i;

	if (access(POOL_DEV, F_OK))
		POOL_SKIP(POOL_DEV " missing: mrpool.ko not loaded");
	/* listed at all (the chunk count need not hold still for this) */
	if (rdma_res_line("rxe0", &res0))
		POOL_SKIP("no rxe0 in `rdma resource show`");
	if (!seed)
		seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	TH_LOG("seed %" PRIu64 " (MRPOOL_KILL_SEED), %lu kills%s", seed, kills,
	       pool_shared() ? ", on a shared pool" : "");
	dead = calloc(kills + 1, sizeof(*dead));
	ASSERT_NE(NULL, dead);
	st = mmap(NULL, sizeof(*st), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, st);
	fd = pool_open();
	ASSERT_LE(0, fd);

	warm_up(st);
	ASSERT_EQ(0, st->failed) TH_LOG("warm-up victim failed in stage %s: errno %d",
					 stage_name[st->failed - 1], st->failed_err);
	/* The baseline: the warm-up's holdings gone, nothing else held. */
	ASSERT_EQ(0, pool_query(fd, &base));
	/*
	 * On a shared pool the end state is the caller's: rxe0's objects
	 * and the pool move with the others' work (a fuzzer growing the
	 * pool keeps the module's chunk count from holding still long
	 * enough to read rxe0 at all), so no baseline of them is taken.
	 */
	if (!pool_shared()) {
		memset(&base, 0, sizeof(base));
		ASSERT_TRUE(POOL_WAIT(pool_back_to(fd, &base, &q), 120000));
		base = q;
		ASSERT_EQ(0, rdma_res_of("rxe0", &res0));
		avail0 = pool_mem_available() + (long long)base.total_bytes;
	}

	while (done < kills && !st->failed) {
		for (slot = 0; slot < VICTIMS; slot++)
			if (!pids[slot]) {
				pids[slot] = spawn(st, slot, (unsigned int)rnd(&seed));
				ASSERT_LT(0, pids[slot]);
			}
		/*
		 * A random victim at a random moment: the stage it must have
		 * reached is drawn first (setup takes most of a victim's life
		 * under TCG, so a plain random delay would rarely reach the
		 * transfers), then a random delay within it.
		 */
		slot = (int)(rnd(&seed) % VICTIMS);
		target = (int)(rnd(&seed) % NSTAGES);
		want = 1 + rnd(&seed) % 4;
		for (wait_ms = 0; wait_ms < 120000 && !st->failed; wait_ms++) {
			if (target < ST_TRANSFER ? st->stage[slot] >= target :
			    st->transfers[slot] >= want)
				break;
			usleep(1000);
		}
		usleep((useconds_t)(rnd(&seed) % (MAX_DELAY_MS * 1000)));
		kill(pids[slot], SIGKILL);
		ASSERT_EQ(pids[slot], waitpid(pids[slot], &status, 0));
		dead[done] = pids[slot];
		pids[slot] = 0;
		if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
			at[st->stage[slot]]++;
			transfers += st->transfers[slot];
			done++;
		}
	}
	for (slot = 0; slot < VICTIMS; slot++)
		if (pids[slot]) {
			kill(pids[slot], SIGKILL);
			waitpid(pids[slot], &status, 0);
		}

	for (i = 0; i < NSTAGES; i++)
		n += snprintf(line + n, sizeof(line) - n, " %s %lu",
			      stage_name[i], at[i]);
	TH_LOG("%lu kills, %lu transfers checked; killed in stage:%s", done,
	       transfers, line);
	EXPECT_EQ(0, st->failed)
		TH_LOG("a victim failed in stage %s: errno %d",
		       stage_name[st->failed - 1], st->failed_err);
	EXPECT_EQ(0, st->bad_data);
	EXPECT_EQ(kills, done);
	/* Every killed victim's files are gone, shared pool or not. */
	EXPECT_TRUE(POOL_WAIT(!pool_clients_of(dead, done), 60000))
		TH_LOG("%d files of killed victims still open",
		       pool_clients_of(dead, done));
	if (pool_shared())
		goto out;	/* the pool-wide end state is the caller's */

	EXPECT_ALL_BACK(fd, &base, &res0, avail0);
out:
	free(dead);
	munmap(st, sizeof(*st));
	close(fd);
}

TEST_HARNESS_MAIN
