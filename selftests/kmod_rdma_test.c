// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The kernel MR cache (mrpool's ib_client) in the VM: the in-kernel API
 * moving bytes over kernel QPs (through the test module in kmod_rdma/),
 * devices appearing and going while the pool is in use, growth and trim
 * followed on every device, unusable devices listed with a reason, and
 * add/remove cycles that leave no object behind.
 *
 * Extra devices are Soft-RoCE links on "lo" named mrpt*, removed again by
 * each test. Needs root, mrpool.ko loaded, debugfs, the rdma tool, rxe0
 * and the test module: in the VM a missing one is a failure, not a skip.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>

/* 6.1's kselftest_harness.h trips -Wextra (an unused handler argument). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop

#include "ib_util.h"
#include "rdmatest.h"

/* Tests the module reports once for rxe0 (KTEST_PER_DEV: ib_util.h). */
#define KTEST_FOREIGN	1
#define CYCLES		20

/* Objects that must return to their count when devices come and go. */
struct ib_census {
	long long devices, chunks, pds, mrs, dma_maps, kbufs, lends;
};

static void census(struct ib_census *c)
{
	c->devices = ib_stat("devices");
	c->chunks = ib_stat("chunks");
	c->pds = ib_stat("pds");
	c->mrs = ib_stat("mrs");
	c->dma_maps = ib_stat("dma_maps");
	c->kbufs = ib_stat("kbufs");
	c->lends = ib_stat("lends");
}

static bool chunks_missing(const char *dev, void *chunks)
{
	return dev_ll(dev, "chunks") != *(long long *)chunks;
}

/*
 * Ready devices that lack a chunk of the registry (@chunks registered):
 * 0 when every one has them all, -1 if the list cannot be read.
 */
static int ready_devices_complete(long long chunks)
{
	return ib_ready_scan(chunks_missing, &chunks);
}

static bool order0_in(const struct pool_chunk_row *r, void *want_state)
{
	return !strchr(r->blocks, ',') && !strncmp(r->blocks, "0:", 2) &&
	       (!want_state || !strcmp(r->state, want_state));
}

/* Chunks built of order-0 pages only, in @want_state or any; -errno on error. */
static int fragmented_chunks_in(const char *want_state)
{
	return pool_chunks_scan(order0_in, (void *)want_state);
}

static int fragmented_chunks(void)
{
	return fragmented_chunks_in(NULL);
}

/*
 * Every chunk the pool counts is the registry's and registered on every
 * ready device: no chunk is being built, replaced or trimmed.
 */
static int ib_settled(void)
{
	long long chunks = pool_chunks();

	return chunks == ib_stat("chunks") && !ready_devices_complete(chunks);
}

/*
 * Let the defrag worker finish what an earlier test's fail_high_order
 * left (clearing the knob runs it now): it builds a chunk before the pool
 * counts it, so counts compared while it runs differ by one.
 */
static int pool_settle(void)
{
	pool_set_knob("fail_high_order", 0);
	POOL_WAIT(fragmented_chunks_in("free") == 0, 60000);
	return POOL_WAIT(ib_settled(), 60000) ? 0 : -1;
}

FIXTURE(ib) {
	struct ib_census base;
	long long trim_sec;		/* idle_trim_sec to restore, or -1 */
};

FIXTURE_SETUP(ib)
{
	int settled;

	self->trim_sec = -1;
	ASSERT_EQ(0, access(IB_SYSFS, F_OK))
		TH_LOG("mrpool.ko with the ib client is not loaded");
	ASSERT_EQ(0, access(POOL_DEBUGFS "/ib_stats", F_OK))
		TH_LOG("debugfs is not mounted");
	ASSERT_EQ(0, system("command -v rdma >/dev/null 2>&1"))
		TH_LOG("the rdma tool (iproute2) is missing");
	/*
	 * The tests compare chunk counts across device changes that take
	 * longer than the idle trim delay: keep the pool's size still.
	 */
	self->trim_sec = pool_trim_off();
	ASSERT_LE(0, self->trim_sec);
	settled = pool_settle();
	census(&self->base);
	/* A setup that fails gets no teardown: put the trim back first. */
	if (settled || self->base.mrs < 0)
		pool_trim_restore(self->trim_sec);
	ASSERT_EQ(0, settled)
		TH_LOG("pool %lld chunks, registry %lld, %d fragmented free",
		       pool_chunks(), ib_stat("chunks"),
		       fragmented_chunks_in("free"));
	ASSERT_LE(0, self->base.mrs);
}

FIXTURE_TEARDOWN(ib)
{
	static const char *const extra[] = { "mrpt0", "mrpt1", "mrpt2" };
	unsigned int i;

	pool_set_knob("fail_ib_setup", 0);
	pool_set_knob("fail_ib_reg", 0);
	pool_set_knob("fail_high_order", 0);
	pool_trim_restore(self->trim_sec);
	for (i = 0; i < sizeof(extra) / sizeof(extra[0]); i++)
		if (dev_listed(extra[i]))
			link_del(extra[i]);
}

/* The lkey of chunk @pfn on @dev in mrpool's cache (debugfs mrs); 0 if none. */
static unsigned long cached_lkey(unsigned long want, const char *want_dev)
{
	char line[256], dev[64], iova[64], access_[16];
	unsigned long pfn, lkey, rkey, psz, found = 0;
	int lent;
	FILE *f;

	f = fopen(POOL_DEBUGFS "/mrs", "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx %63s %lx %lx %63s %lu %15s %d", &pfn, dev,
			   &lkey, &rkey, iova, &psz, access_, &lent) == 8 &&
		    pfn == want && !strcmp(dev, want_dev) && !lent)
			found = lkey;
	fclose(f);
	return found;
}

/*
 * Kernel QPs in the buffers' PD move bytes with the buffers' keys, on
 * every device; they reach neither past a buffer's length nor a chunk a
 * process owns (its cached lkey); 300 lends never repeat a key and their
 * key bytes do not count up; two sessions get PDs of their own, and a QP
 * in one (or in the shared PD) cannot read or write the other's buffer
 * with its rkey.
 */
TEST_F_TIMEOUT(ib, kernel_api_rdma, 240)
{
	int ok, not_ok, fd, ready = ib_ready_devices(NULL);
	char path[PATH_MAX], params[256];
	struct mrpool_alloc a;
	unsigned long pfn = 0, lkey;
	long long grown;

	ASSERT_EQ(0, ktest_path(path, sizeof(path)))
		TH_LOG("%s.ko not built (make -C $GUEST_KDIR M=$PWD/selftests/kmod_rdma)",
		       KTEST_NAME);
	ASSERT_LT(0, ready);
	ASSERT_TRUE(dev_listed("rxe0"));
	/* A chunk this process owns, and its lkey in mrpool's cache. */
	fd = pool_open();
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, pool_alloc(fd, pool_attr("chunk_bytes"), &a));
	ASSERT_EQ(1, pool_slice_pfns(a.slice_id, &pfn, 1));
	lkey = cached_lkey(pfn, "rxe0");
	ASSERT_NE(0, lkey);
	snprintf(params, sizeof(params),
		 "foreign_dev=rxe0 foreign_pfn=%lu foreign_lkey=%lu", pfn, lkey);

	ASSERT_EQ(0, ktest_run(path, params, &ok, &not_ok, NULL));
	EXPECT_EQ(0, not_ok);
	EXPECT_LE(KTEST_PER_DEV * ready + KTEST_FOREIGN, ok);
	/* Every buffer went back with its own MR. */
	EXPECT_EQ(0, ib_stat("kbufs"));
	EXPECT_EQ(0, ib_stat("lends"));
	/* Every session went, with its PD and QPs. */
	EXPECT_EQ(0, ib_stat("sessions"));
	EXPECT_EQ(self->base.pds, ib_stat("pds"));
	/* No MR but the cache's, which covers what the buffers grew. */
	grown = pool_chunks() - self->base.chunks;
	EXPECT_EQ(self->base.mrs + grown * ready, ib_stat("mrs"));
	EXPECT_EQ(self->base.dma_maps + grown * ready, ib_stat("dma_maps"));
	close(fd);
}

/* /dev/kmsg positioned at its end, or -1. */
static int kmsg_open_end(void)
{
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd >= 0)
		lseek(fd, 0, SEEK_END);
	return fd;
}

/* Lockdep reports in the kernel log since @fd was opened (each echoed). */
static int kmsg_lockdep_reports(int fd)
{
	char rec[2048];
	ssize_t n;
	int found = 0;

	for (;;) {
		n = read(fd, rec, sizeof(rec) - 1);
		if (n < 0 && errno == EPIPE)
			continue;	/* overwritten records: go on */
		if (n <= 0)
			break;
		rec[n] = 0;
		if (strstr(rec, "possible circular locking") ||
		    strstr(rec, "inconsistent lock state") ||
		    strstr(rec, "possible recursive locking") ||
		    strstr(rec, "lock dependency")) {
			printf("# kmsg: %s", rec);
			found++;
		}
	}
	fflush(stdout);
	return found;
}

/*
 * A borrower on a reclaim path, after a process's ALLOC grew the pool (so
 * the chunk was registered on every device under its lock): the test
 * module takes, uses and frees a buffer of the shared PD and one of a
 * session from reclaim context (fs_reclaim held, PF_MEMALLOC). On a lockdep kernel, an mrpool lock held across an
 * allocation that may reclaim is a circular dependency report; elsewhere
 * the path still runs and the bytes arrive.
 */
TEST_F_TIMEOUT(ib, kernel_api_from_reclaim, 120)
{
	long long chunk = pool_attr("chunk_bytes"), grown;
	char path[PATH_MAX];
	struct mrpool_alloc a;
	int ok, not_ok, fd, kmsg;

	ASSERT_EQ(0, ktest_path(path, sizeof(path)))
		TH_LOG("%s.ko not built", KTEST_NAME);
	ASSERT_TRUE(dev_listed("rxe0"));
	TH_LOG("lockdep %s", access("/proc/lockdep", F_OK) ? "off" : "on");
	kmsg = kmsg_open_end();
	ASSERT_LE(0, kmsg);
	grown = pool_chunks();
	fd = pool_open();
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, pool_alloc(fd, pool_attr("free_bytes") + chunk, &a));
	ASSERT_LT(grown, pool_chunks());
	ASSERT_EQ(0, pool_free(fd, a.slice_id));
	close(fd);

	ASSERT_EQ(0, ktest_run(path, "mode=reclaim dev=rxe0", &ok, &not_ok,
			       NULL));
	EXPECT_EQ(0, not_ok);
	EXPECT_EQ(2, ok);
	EXPECT_EQ(0, kmsg_lockdep_reports(kmsg));
	EXPECT_EQ(0, ib_stat("kbufs"));
	close(kmsg);
}

/*
 * A borrower that keeps a session (in mrpool's PD) and two buffers (one of
 * the session, one of the shared lend PD) through its device's removal,
 * against the API's rule: the removal still completes (mrpool tears the
 * session's QPs, PD and the lends down), the session then refuses a new
 * buffer with -ENODEV, both buffers kept their bytes (their chunks were
 * not handed on while lent), and freeing them and destroying the session
 * afterwards is safe (KASAN on the debug kernel) and leaves no kernel
 * buffer, lend, session or PD behind.
 */
TEST_F_TIMEOUT(ib, session_outlives_device, 120)
{
	char path[PATH_MAX];
	int ok, not_ok, fd;

	ASSERT_EQ(0, ktest_path(path, sizeof(path)))
		TH_LOG("%s.ko not built", KTEST_NAME);
	ASSERT_EQ(0, link_add("mrpt0"));
	ASSERT_EQ(0, ktest_load(path, "mode=session_hold dev=mrpt0"));
	ASSERT_EQ(0, ktest_tap(&ok, &not_ok, NULL));
	EXPECT_EQ(0, not_ok);
	ASSERT_EQ(1, ok);
	EXPECT_EQ(1, ib_stat("sessions"));
	EXPECT_EQ(2, ib_stat("kbufs"));
	EXPECT_EQ(2, ib_stat("lends"));

	/* returns only once every user of mrpt0 let go: mrpool did */
	ASSERT_EQ(0, link_del("mrpt0"));
	EXPECT_FALSE(dev_listed("mrpt0"));
	ASSERT_EQ(0, ktest_tap(&ok, &not_ok, NULL));
	EXPECT_EQ(0, not_ok);
	EXPECT_EQ(2, ok);
	EXPECT_EQ(2, ib_stat("kbufs"));

	fd = open("/sys/kernel/debug/" KTEST_NAME "/release", O_WRONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	EXPECT_EQ(1, write(fd, "1", 1)) TH_LOG("release: %s", strerror(errno));
	close(fd);
	ASSERT_EQ(0, ktest_tap(&ok, &not_ok, NULL));
	EXPECT_EQ(0, not_ok);
	EXPECT_EQ(5, ok);
	EXPECT_EQ(0, ib_stat("kbufs"));
	EXPECT_EQ(0, ib_stat("lends"));
	EXPECT_EQ(0, ib_stat("sessions"));
	EXPECT_EQ(self->base.pds, ib_stat("pds"));
	EXPECT_EQ(self->base.devices, ib_stat("devices"));
	EXPECT_EQ(0, ktest_unload());
}

/* Cached MRs (debugfs mrs) whose page size is below @chunk; -1 on error. */
static int small_page_mrs(long long chunk)
{
	char line[256], dev[64], access_[16];
	unsigned long pfn, lkey, rkey, iova, psz;
	int lent, n = 0;
	FILE *f;

	f = fopen(POOL_DEBUGFS "/mrs", "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx %63s %lx %lx %lx %lu %15s %d", &pfn, dev,
			   &lkey, &rkey, &iova, &psz, access_, &lent) == 8 &&
		    (long long)psz < chunk) {
			printf("# small-page MR: %s", line);
			n++;
		}
	fclose(f);
	fflush(stdout);
	return n;
}

/*
 * The same through chunks assembled from single pages: the MR then maps a
 * page list, the buffer a vmap. The free chunks are held by a slice so each
 * buffer grows the pool while high-order allocations are made to fail.
 */
TEST_F_TIMEOUT(ib, kernel_api_rdma_fragmented, 180)
{
	int ok, not_ok, fd, ready = ib_ready_devices(NULL), frag0;
	long long free_bytes = pool_attr("free_bytes");
	char path[PATH_MAX];
	struct mrpool_alloc a;

	ASSERT_EQ(0, ktest_path(path, sizeof(path)))
		TH_LOG("%s.ko not built", KTEST_NAME);
	if (pool_attr("chunk_bytes") <= 4096)
		SKIP(return, "chunks of one page cannot be fragmented");
	/* rxe maps at most 512 pages per fast-registration MR. */
	if (pool_attr("chunk_bytes") > 2 * MIB)
		SKIP(return, "a chunk of single pages would exceed 512 pages");
	ASSERT_LT(0, ready);
	fd = pool_open();
	ASSERT_LE(0, fd);
	if (free_bytes > 0)
		ASSERT_EQ(0, pool_alloc(fd, free_bytes, &a));
	ASSERT_EQ(0, pool_attr("free_bytes"));
	frag0 = fragmented_chunks();
	ASSERT_EQ(0, pool_set_knob("fail_high_order", 1000));

	ASSERT_EQ(0, ktest_run(path, "", &ok, &not_ok, NULL));
	EXPECT_EQ(0, not_ok);
	EXPECT_LE(KTEST_PER_DEV * ready, ok);
	/*
	 * Counted while the knob still holds: once high orders succeed
	 * again, the defrag worker replaces fragmented free chunks.
	 */
	/* Two buffers per device, each on a chunk grown from single pages. */
	EXPECT_LE(frag0 + 2, fragmented_chunks());
	/* Their MRs map page lists, still cached after the buffers went back. */
	EXPECT_LE(2 * ready, small_page_mrs(pool_attr("chunk_bytes")));
	/* The defrag worker replaces them now, every device following. */
	EXPECT_EQ(0, pool_settle());
	EXPECT_EQ(0, fragmented_chunks_in("free"));
	EXPECT_EQ(0, ib_stat("kbufs"));
	close(fd);
}

/* A device added after load gets every chunk registered, and loses them on delete. */
TEST_F_TIMEOUT(ib, device_added_later, 60)
{
	char state[32];
	long long chunks = pool_chunks();

	ASSERT_EQ(0, link_add("mrpt0"));
	ASSERT_TRUE(dev_listed("mrpt0"));
	dev_str("mrpt0", "state", state, sizeof(state));
	ASSERT_STREQ("ready", state);
	EXPECT_EQ(chunks, dev_ll("mrpt0", "chunks"));
	EXPECT_EQ(chunks, dev_ll("mrpt0", "regs"));
	EXPECT_EQ(0, dev_ll("mrpt0", "reg_failures"));
	EXPECT_EQ(self->base.mrs + chunks, ib_stat("mrs"));
	/* Two PDs: the cache's and the kernel buffers'. */
	EXPECT_EQ(self->base.pds + 2, ib_stat("pds"));

	ASSERT_EQ(0, link_del("mrpt0"));
	EXPECT_FALSE(dev_listed("mrpt0"));
	EXPECT_EQ(self->base.mrs, ib_stat("mrs"));
	EXPECT_EQ(self->base.dma_maps, ib_stat("dma_maps"));
	EXPECT_EQ(self->base.pds, ib_stat("pds"));
}

/* Chunks grown for a slice are registered everywhere; trimmed ones leave everywhere. */
TEST_F_TIMEOUT(ib, growth_and_trim_follow, 90)
{
	long long chunk = pool_attr("chunk_bytes"), before, grown, trim_sec, floor;
	long long inv0;
	struct mrpool_alloc a;
	int fd, trimmed;

	ASSERT_EQ(0, link_add("mrpt1"));
	floor = (pool_param("pool_mb") * MIB + chunk - 1) / chunk;
	before = pool_chunks();
	inv0 = dev_ll("mrpt1", "invalidations");
	trim_sec = pool_param("idle_trim_sec");

	fd = pool_open();
	ASSERT_LE(0, fd);
	/* More than the pool holds: it must grow. */
	ASSERT_EQ(0, pool_alloc(fd, (before + 4) * chunk, &a));
	grown = pool_chunks();
	ASSERT_LT(before, grown);
	EXPECT_EQ(grown, ib_stat("chunks"));
	EXPECT_EQ(0, ready_devices_complete(grown));
	EXPECT_EQ(grown, dev_ll("mrpt1", "chunks"));

	ASSERT_EQ(0, pool_free(fd, a.slice_id));
	close(fd);
	ASSERT_EQ(0, pool_set_param("idle_trim_sec", 1));
	/*
	 * Nothing else holds a chunk: the trim ends at the pool_mb floor,
	 * possibly in several passes, each leaving the pool's totals first
	 * and deregistering after. Wait for that end, not for a state a
	 * pass in between also shows.
	 */
	trimmed = POOL_WAIT(pool_chunks() == floor &&
			    ib_stat("chunks") == floor &&
			    !ready_devices_complete(floor), 20000);
	if (!trimmed) {
		TH_LOG("grown %lld floor %lld total %lld free %lld quarantined %lld used %lld",
		       grown, floor, pool_chunks(), pool_attr("free_bytes") / chunk,
		       pool_attr("quarantined_bytes") / chunk,
		       pool_attr("used_bytes") / chunk);
		TH_LOG("ib chunks %lld rxe0 %lld mrpt1 %lld trims %lld defrags %lld retired %lld",
		       ib_stat("chunks"), dev_ll("rxe0", "chunks"),
		       dev_ll("mrpt1", "chunks"), pool_attr("stats/trims"),
		       pool_attr("stats/defrags"), pool_attr("stats/retired"));
	}
	EXPECT_TRUE(trimmed);
	pool_set_param("idle_trim_sec", trim_sec);
	EXPECT_LE(grown - pool_chunks(), dev_ll("mrpt1", "invalidations") - inv0);
	ASSERT_EQ(0, link_del("mrpt1"));
}

struct xfer {
	struct rdt_loop *lp;
	unsigned char *src, *dst;
	uint32_t lkey, rkey;
	size_t len;
	atomic_int stop;
	atomic_long done;
	atomic_long bad;
};

/* WRITE src -> dst with a new pattern each time and check every byte. */
static void *xfer_loop(void *arg)
{
	struct xfer *x = arg;
	unsigned int seed = 1;

	while (!atomic_load(&x->stop)) {
		memset(x->src, (int)(seed & 0xff), x->len);
		if (rdt_write(x->lp, x->src, x->lkey, (uintptr_t)x->dst, x->rkey,
			      x->len, NULL) ||
		    memcmp(x->src, x->dst, x->len))
			atomic_fetch_add(&x->bad, 1);
		else
			atomic_fetch_add(&x->done, 1);
		seed++;
	}
	return NULL;
}

/*
 * A device whose cache covers a process's slice goes and comes back while
 * the process moves bytes through that slice on another device.
 */
TEST_F_TIMEOUT(ib, remove_while_slice_in_use, 120)
{
	long long chunks, mid;
	struct rdt_dev dev;
	struct rdt_loop lp;
	struct mrpool_alloc a;
	struct ibv_mr *mr;
	struct xfer x = { 0 };
	pthread_t th;
	char state[32];
	void *p;
	int fd;

	ASSERT_EQ(0, link_add("mrpt2"));
	fd = pool_open();
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, pool_alloc(fd, 2 * MIB, &a));
	p = pool_map(fd, &a);
	ASSERT_NE(MAP_FAILED, p);
	chunks = dev_ll("mrpt2", "chunks");
	ASSERT_LT(0, chunks);

	ASSERT_EQ(0, rdt_dev_open(&dev, "rxe0", NULL)) TH_LOG("no rxe0");
	ASSERT_EQ(0, rdt_loop_create(&lp, &dev));
	mr = ibv_reg_mr(dev.pd, p, a.length, RDT_ACCESS_ALL);
	ASSERT_NE(NULL, mr);

	x.lp = &lp;
	x.src = p;
	x.dst = (unsigned char *)p + a.length / 2;
	x.len = 64 * 1024;
	x.lkey = mr->lkey;
	x.rkey = mr->rkey;
	ASSERT_EQ(0, pthread_create(&th, NULL, xfer_loop, &x));
	EXPECT_TRUE(POOL_WAIT(atomic_load(&x.done) > 5, 10000));

	ASSERT_EQ(0, link_del("mrpt2"));
	EXPECT_FALSE(dev_listed("mrpt2"));
	mid = atomic_load(&x.done);
	EXPECT_TRUE(POOL_WAIT(atomic_load(&x.done) > mid + 5, 10000));

	ASSERT_EQ(0, link_add("mrpt2"));
	dev_str("mrpt2", "state", state, sizeof(state));
	EXPECT_STREQ("ready", state);
	EXPECT_EQ(pool_chunks(), dev_ll("mrpt2", "chunks"));
	mid = atomic_load(&x.done);
	EXPECT_TRUE(POOL_WAIT(atomic_load(&x.done) > mid + 5, 10000));

	atomic_store(&x.stop, 1);
	pthread_join(th, NULL);
	EXPECT_EQ(0, atomic_load(&x.bad));
	TH_LOG("%ld transfers across the removal", atomic_load(&x.done));

	ibv_dereg_mr(mr);
	rdt_loop_destroy(&lp);
	rdt_dev_close(&dev);
	munmap(p, a.length);
	close(fd);
	ASSERT_EQ(0, link_del("mrpt2"));
}

/* The netdev under an rxe link, from "rdma link show"; 0 or -1. */
static int link_netdev(const char *dev, char *buf, size_t len)
{
	char cmd[128], line[512], *p;
	int ret = -1;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "rdma link show %s/1 2>/dev/null", dev);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	if (fgets(line, sizeof(line), f)) {
		p = strstr(line, " netdev ");
		if (p && sscanf(p + 8, "%63s", buf) == 1 && len > 64)
			ret = 0;
	}
	pclose(f);
	return ret;
}

/* The device the VM starts with can go and come back with all its chunks. */
TEST_F_TIMEOUT(ib, rxe0_deleted_and_readded, 60)
{
	long long chunks = pool_chunks(), mrs = ib_stat("mrs");
	char netdev[128], cmd[256], state[32];

	ASSERT_TRUE(dev_listed("rxe0"));
	ASSERT_EQ(0, link_netdev("rxe0", netdev, sizeof(netdev)));
	ASSERT_EQ(chunks, dev_ll("rxe0", "chunks"));
	ASSERT_EQ(0, link_del("rxe0"));
	EXPECT_FALSE(dev_listed("rxe0"));
	EXPECT_EQ(mrs - chunks, ib_stat("mrs"));

	snprintf(cmd, sizeof(cmd),
		 "rdma link add rxe0 type rxe netdev %s >/dev/null 2>&1", netdev);
	ASSERT_EQ(0, system(cmd));
	dev_str("rxe0", "state", state, sizeof(state));
	EXPECT_STREQ("ready", state);
	EXPECT_EQ(chunks, dev_ll("rxe0", "chunks"));
	EXPECT_EQ(mrs, ib_stat("mrs"));
}

/* A device that cannot be set up is listed with the reason and gets no keys. */
TEST_F_TIMEOUT(ib, unusable_device_listed, 60)
{
	char state[32], reason[128];

	ASSERT_EQ(0, pool_set_knob("fail_ib_setup", 1));
	ASSERT_EQ(0, link_add("mrpt0"));
	dev_str("mrpt0", "state", state, sizeof(state));
	dev_str("mrpt0", "reason", reason, sizeof(reason));
	EXPECT_STREQ("failed", state);
	EXPECT_NE(NULL, strstr(reason, "injected"));
	EXPECT_EQ(0, dev_ll("mrpt0", "chunks"));
	EXPECT_EQ(self->base.pds, ib_stat("pds"));
	EXPECT_EQ(self->base.mrs, ib_stat("mrs"));
	ASSERT_EQ(0, link_del("mrpt0"));
	EXPECT_FALSE(dev_listed("mrpt0"));
}

/* Chunks that fail to register are counted; the device stays usable. */
TEST_F_TIMEOUT(ib, registration_failure_counted, 60)
{
	long long chunks = pool_chunks();
	char state[32];

	ASSERT_LT(2, chunks);
	ASSERT_EQ(0, pool_set_knob("fail_ib_reg", 2));
	ASSERT_EQ(0, link_add("mrpt0"));
	dev_str("mrpt0", "state", state, sizeof(state));
	EXPECT_STREQ("ready", state);
	EXPECT_EQ(2, dev_ll("mrpt0", "reg_failures"));
	EXPECT_EQ(chunks - 2, dev_ll("mrpt0", "chunks"));
	EXPECT_EQ(self->base.mrs + chunks - 2, ib_stat("mrs"));
	ASSERT_EQ(0, link_del("mrpt0"));
	EXPECT_EQ(self->base.mrs, ib_stat("mrs"));
	EXPECT_EQ(self->base.dma_maps, ib_stat("dma_maps"));
}

/* Twenty add/remove cycles leave every count where it was. */
TEST_F_TIMEOUT(ib, add_remove_cycles, 240)
{
	long long added = ib_stat("devs_added"), removed = ib_stat("devs_removed");
	long long chunks = pool_chunks();
	struct ib_census now;
	int i;

	for (i = 0; i < CYCLES; i++) {
		ASSERT_EQ(0, link_add("mrpt0"));
		ASSERT_EQ(chunks, dev_ll("mrpt0", "chunks"));
		ASSERT_EQ(0, link_del("mrpt0"));
	}
	census(&now);
	EXPECT_EQ(self->base.devices, now.devices);
	EXPECT_EQ(self->base.chunks, now.chunks);
	EXPECT_EQ(self->base.pds, now.pds);
	EXPECT_EQ(self->base.mrs, now.mrs);
	EXPECT_EQ(self->base.dma_maps, now.dma_maps);
	EXPECT_EQ(self->base.kbufs, now.kbufs);
	EXPECT_EQ(added + CYCLES, ib_stat("devs_added"));
	EXPECT_EQ(removed + CYCLES, ib_stat("devs_removed"));
	EXPECT_FALSE(dev_listed("mrpt0"));
}

/*
 * debugfs mrs never shows an MR's iova as it is (on rxe the chunk's kernel
 * address, elsewhere a bus address): only a hashed value of 32 bits.
 */
TEST_F(ib, mrs_hides_addresses)
{
	char line[256], dev[64], iova[64], access_[16];
	unsigned long pfn, lkey, rkey, psz, v;
	int lent, rows = 0;
	FILE *f;

	f = fopen(POOL_DEBUGFS "/mrs", "re");
	ASSERT_NE(NULL, f);
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx %63s %lx %lx %63s %lu %15s %d", &pfn, dev,
			   &lkey, &rkey, iova, &psz, access_, &lent) != 8)
			continue;
		rows++;
		v = strtoul(iova, NULL, 16);
		EXPECT_GT(1UL << 32, v) TH_LOG("raw address: %s", line);
		EXPECT_NE(pfn << 12, v) TH_LOG("physical address: %s", line);
	}
	fclose(f);
	EXPECT_LE(pool_chunks(), rows);
}

TEST_HARNESS_MAIN
