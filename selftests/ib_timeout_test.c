// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Work requests of the kernel MR cache that never complete, for real:
 * debugfs fail_ib_complete swallows the next N completions of mrpool's
 * internal QPs (after fail_ib_complete_after delivered ones), as if the
 * device never delivered them, and fail_ib_dereg makes ib_dereg_mr()
 * "fail". Checks that a timeout drains the QP before the MR is released,
 * that a chunk an MR may still reach is never freed nor handed out again
 * (retired), that queries never wait for a stuck device, and that the
 * module still unloads. Recovery is off here (recover_ms 0): what a
 * failure leaves behind is checked; ib_recover_test checks what comes
 * after.
 *
 * Each test uses its own Soft-RoCE link on "lo" (mrpt0) so rxe0 stays
 * ready. Needs root, mrpool.ko loaded, debugfs, the rdma tool, and the
 * test module kmod_rdma/mrpool_rdma_ktest.ko: a missing one is a failure.
 * A retired chunk is logged, by its hashed pointer: never a frame number
 * (read back from /dev/kmsg).
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
#include <sys/types.h>

/* 6.1's kselftest_harness.h trips -Wextra (an unused handler argument). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop

#include "ib_util.h"
#include "kmsg_util.h"

#define DEV		"mrpt0"

FIXTURE(tmo) {
	struct ib_fault_env env;	/* the census, the log, the trim */
	long long retired;
};

#define RETIRED_MSG	" retired: an RDMA MR may still reach it"

/* One chunk was retired since setup: the log says so once, by pointer. */
static void expect_retired_log(struct __test_metadata *_metadata, int fd,
			       unsigned long pfn)
{
	kmsg_expect_chunk_line(_metadata, fd, RETIRED_MSG, &pfn, 1);
}

FIXTURE_SETUP(tmo)
{
	/* What a failure leaves is checked here: no recovery (its own test). */
	ib_fault_setup(_metadata, &self->env, DEV, 0);
	self->retired = pool_attr("stats/retired");
	/* A setup that fails gets no teardown: run it first. */
	if (self->retired < 0)
		ib_fault_teardown(&self->env);
	ASSERT_LE(0, self->retired);
}

FIXTURE_TEARDOWN(tmo)
{
	ib_fault_teardown(&self->env);
}

/*
 * DEV is gone and every object it had with it, stuck ones included;
 * @retired cached MRs went with a chunk retired from the pool.
 */
static void expect_dev_gone(struct __test_metadata *_metadata,
			    const struct ib_fault_census *base, int retired)
{
	struct ib_fault_census now;

	ASSERT_EQ(0, link_del(DEV));
	EXPECT_FALSE(dev_listed(DEV));
	ib_fault_census(&now);
	EXPECT_EQ(base->pds, now.pds);
	EXPECT_EQ(base->mrs - retired, now.mrs);
	EXPECT_EQ(base->dma_maps - retired, now.dma_maps);
	EXPECT_EQ(base->stuck, now.stuck);
	EXPECT_EQ(base->kbufs, now.kbufs);
	EXPECT_EQ(base->lends, now.lends);
	EXPECT_EQ(base->sessions, now.sessions);
}

struct adder {
	atomic_int seq;			/* order of events */
	atomic_int added_at;		/* seq when link_add returned */
	int rc;
};

static void *add_dev(void *arg)
{
	struct adder *a = arg;

	a->rc = link_add(DEV);
	atomic_store(&a->added_at, atomic_fetch_add(&a->seq, 1) + 1);
	return NULL;
}

/*
 * A registration whose completion never comes: the QP is drained before
 * the MR goes, the device is failed, and QUERY and DEVICES return while
 * the registering thread is still waiting.
 */
TEST_F_TIMEOUT(tmo, reg_timeout_drains_and_never_blocks_queries, 120)
{
	struct adder a = { .seq = 1 };
	struct mrpool_devices dv;
	struct mrpool_query q;
	char state[32], reason[128];
	int fd, queried_at;
	pthread_t th;

	fd = pool_open();
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, pool_set_knob("fail_ib_complete", 1));
	ASSERT_EQ(0, pthread_create(&th, NULL, add_dev, &a));
	/* DEV's first registration is waiting for its completion. */
	ASSERT_TRUE(POOL_WAIT(ib_stat("wr_waits") >= 1 ||
			      atomic_load(&a.added_at), 60000));
	ASSERT_EQ(0, atomic_load(&a.added_at)) TH_LOG("no wait was seen");

	memset(&dv, 0, sizeof(dv));
	dv.size = sizeof(dv);
	dv.entry_size = sizeof(struct mrpool_device);
	EXPECT_EQ(0, pool_ioctl(fd, MRPOOL_IOC_DEVICES, &dv));
	EXPECT_LE(2, dv.total);
	EXPECT_EQ(0, pool_query(fd, &q));
	EXPECT_LE(1, q.ndevices);
	queried_at = atomic_fetch_add(&a.seq, 1);
	/* Both returned while the wait was still on. */
	EXPECT_LE(1, ib_stat("wr_waits"));

	pthread_join(th, NULL);
	ASSERT_EQ(0, a.rc);
	EXPECT_LT(queried_at, atomic_load(&a.added_at));
	close(fd);

	dev_str(DEV, "state", state, sizeof(state));
	dev_str(DEV, "reason", reason, sizeof(reason));
	EXPECT_STREQ("failed", state);
	EXPECT_NE(NULL, strstr(reason, "timed out, QP drained")) TH_LOG("%s", reason);
	EXPECT_EQ(1, dev_ll(DEV, "wr_timeouts"));
	EXPECT_EQ(1, dev_ll(DEV, "qp_drains"));
	EXPECT_EQ(1, dev_ll(DEV, "reg_failures"));
	EXPECT_EQ(0, dev_ll(DEV, "chunks"));
	/* Drained, so the MR was deregistered and unmapped at once. */
	EXPECT_EQ(self->env.base.stuck, ib_stat("stuck_mrs"));
	EXPECT_EQ(self->env.base.dma_maps, ib_stat("dma_maps"));
	EXPECT_EQ(self->retired, pool_attr("stats/retired"));
	dev_str("rxe0", "state", state, sizeof(state));
	EXPECT_STREQ("ready", state);
	expect_dev_gone(_metadata, &self->env.base, 0);
}

/*
 * A registration that never completes and whose QP cannot be drained
 * either: its MR is kept, and the chunk, once trimmed, is kept out of the
 * pool for good instead of being freed.
 */
TEST_F_TIMEOUT(tmo, undrained_reg_keeps_chunk_from_trim, 120)
{
	struct mrpool_alloc all, one;
	unsigned long pfn = 0;
	char state[32], reason[128];
	long long total;
	int fd;

	ASSERT_EQ(0, link_add(DEV));
	dev_str(DEV, "state", state, sizeof(state));
	ASSERT_STREQ("ready", state);
	fd = pool_open();
	ASSERT_LE(0, fd);
	/* Hold every free chunk: the next slice grows exactly one. */
	if (pool_attr("free_bytes") > 0)
		ASSERT_EQ(0, pool_alloc(fd, pool_attr("free_bytes"), &all));
	ASSERT_EQ(0, pool_attr("free_bytes"));

	ASSERT_EQ(0, pool_set_knob("fail_ib_complete_after", ib_ready_devices(DEV)));
	ASSERT_EQ(0, pool_set_knob("fail_ib_complete", 2));
	ASSERT_EQ(0, pool_alloc(fd, pool_attr("chunk_bytes"), &one));
	ASSERT_EQ(1, pool_slice_pfns(one.slice_id, &pfn, 1));
	EXPECT_EQ(0, ib_stat("wr_waits"));

	dev_str(DEV, "state", state, sizeof(state));
	dev_str(DEV, "reason", reason, sizeof(reason));
	EXPECT_STREQ("failed", state);
	EXPECT_NE(NULL, strstr(reason, "not drained")) TH_LOG("%s", reason);
	EXPECT_EQ(1, dev_ll(DEV, "wr_timeouts"));
	EXPECT_EQ(0, dev_ll(DEV, "qp_drains"));
	EXPECT_EQ(self->env.base.stuck + 1, ib_stat("stuck_mrs"));
	dev_str("rxe0", "state", state, sizeof(state));
	EXPECT_STREQ("ready", state);

	/* The grown chunk is the only free one: the trim takes it. */
	total = pool_chunks();
	ASSERT_EQ(0, pool_free(fd, one.slice_id));
	ASSERT_EQ(0, pool_set_param("idle_trim_sec", 1));
	EXPECT_TRUE(POOL_WAIT(pool_attr("stats/retired") > self->retired,
			      30000));
	ASSERT_EQ(0, pool_set_param("idle_trim_sec", 0));
	EXPECT_EQ(self->retired + 1, pool_attr("stats/retired"));
	EXPECT_EQ(total - 1, pool_chunks());
	EXPECT_EQ(-ENOENT, pool_pfn_state(pfn, state, sizeof(state)));
	EXPECT_EQ(pool_chunks(), ib_stat("chunks"));
	expect_retired_log(_metadata, self->env.kmsg, pfn);

	close(fd);
	/* Once its QPs are destroyed the stuck MR goes too. */
	expect_dev_gone(_metadata, &self->env.base, 0);
}

/*
 * Run the test module with mode=lend_once on DEV (one buffer lent and
 * freed) under armed knobs; returns the lent chunk.
 */
static unsigned long lend_once(struct __test_metadata *_metadata)
{
	unsigned long pfn = 0;
	char path[PATH_MAX];
	int ok, not_ok;

	EXPECT_EQ(0, ktest_path(path, sizeof(path)));
	EXPECT_EQ(0, ktest_run(path, "mode=lend_once dev=" DEV, &ok, &not_ok,
			       &pfn));
	EXPECT_EQ(2, ok);
	EXPECT_EQ(0, not_ok);
	EXPECT_NE(0, pfn);
	return pfn;
}

/*
 * A kernel buffer's invalidation never completes and the QP cannot be
 * drained: its chunk is retired, never handed out again.
 */
TEST_F_TIMEOUT(tmo, undrained_kbuf_free_retires_chunk, 120)
{
	int others;
	long long total, used, grows;
	char state[32];
	unsigned long pfn;

	ASSERT_EQ(0, link_add(DEV));
	/* Its cached MRs elsewhere leave with the retired chunk. */
	others = ib_ready_devices(DEV);
	total = pool_chunks();
	used = pool_attr("used_bytes");
	grows = pool_attr("stats/grows");
	/* The lend's registration completes, its invalidation does not. */
	ASSERT_EQ(0, pool_set_knob("fail_ib_complete_after", 1));
	ASSERT_EQ(0, pool_set_knob("fail_ib_complete", 2));
	pfn = lend_once(_metadata);

	EXPECT_EQ(self->retired + 1, pool_attr("stats/retired"));
	EXPECT_EQ(total - 1 + pool_attr("stats/grows") - grows, pool_chunks());
	EXPECT_EQ(used, pool_attr("used_bytes"));
	EXPECT_EQ(-ENOENT, pool_pfn_state(pfn, state, sizeof(state)));
	EXPECT_EQ(pool_chunks(), ib_stat("chunks"));
	dev_str(DEV, "state", state, sizeof(state));
	EXPECT_STREQ("failed", state);
	EXPECT_EQ(1, dev_ll(DEV, "wr_timeouts"));
	EXPECT_EQ(0, dev_ll(DEV, "qp_drains"));
	EXPECT_EQ(0, dev_ll(DEV, "kbufs"));
	EXPECT_EQ(self->env.base.stuck + 1, ib_stat("stuck_mrs"));
	EXPECT_EQ(self->env.base.lends, ib_stat("lends"));
	expect_retired_log(_metadata, self->env.kmsg, pfn);
	expect_dev_gone(_metadata, &self->env.base, others);
}

/*
 * The same for a buffer of a session (mrpool's PD): the chunk is retired,
 * and the session's loop, destroyed by its borrower, stays parked (its PD
 * holds the stuck MR, its QP may still run the late work request) until
 * the device's teardown, which then frees it with the MR.
 */
TEST_F_TIMEOUT(tmo, undrained_session_free_parks_loop, 120)
{
	unsigned long pfn = 0;
	char path[PATH_MAX], state[32];
	int others, ok, not_ok;

	ASSERT_EQ(0, link_add(DEV));
	others = ib_ready_devices(DEV);
	ASSERT_EQ(0, pool_set_knob("fail_ib_complete_after", 1));
	ASSERT_EQ(0, pool_set_knob("fail_ib_complete", 2));
	ASSERT_EQ(0, ktest_path(path, sizeof(path)));
	ASSERT_EQ(0, ktest_run(path, "mode=session_once dev=" DEV, &ok, &not_ok,
			       &pfn));
	EXPECT_EQ(2, ok);
	EXPECT_EQ(0, not_ok);
	ASSERT_NE(0, pfn);

	EXPECT_EQ(self->retired + 1, pool_attr("stats/retired"));
	EXPECT_EQ(-ENOENT, pool_pfn_state(pfn, state, sizeof(state)));
	dev_str(DEV, "state", state, sizeof(state));
	EXPECT_STREQ("failed", state);
	EXPECT_EQ(1, dev_ll(DEV, "wr_timeouts"));
	EXPECT_EQ(0, dev_ll(DEV, "qp_drains"));
	EXPECT_EQ(self->env.base.stuck + 1, ib_stat("stuck_mrs"));
	EXPECT_EQ(self->env.base.lends, ib_stat("lends"));
	EXPECT_EQ(self->env.base.kbufs, ib_stat("kbufs"));
	/* destroyed by its borrower, kept for the stuck MR */
	EXPECT_EQ(self->env.base.sessions + 1, ib_stat("sessions"));
	expect_retired_log(_metadata, self->env.kmsg, pfn);
	/* the teardown frees the parked loop: sessions and PDs back */
	expect_dev_gone(_metadata, &self->env.base, others);
}

/*
 * A kernel buffer's invalidation never completes but the QP drains: the
 * MR is deregistered after the drain and the chunk goes back to the pool.
 */
TEST_F_TIMEOUT(tmo, drained_kbuf_free_returns_chunk, 120)
{
	char state[32];
	unsigned long pfn;

	ASSERT_EQ(0, link_add(DEV));
	ASSERT_EQ(0, pool_set_knob("fail_ib_complete_after", 1));
	ASSERT_EQ(0, pool_set_knob("fail_ib_complete", 1));
	pfn = lend_once(_metadata);

	EXPECT_EQ(self->retired, pool_attr("stats/retired"));
	EXPECT_EQ(0, pool_pfn_state(pfn, state, sizeof(state)));
	EXPECT_STREQ("free", state);
	dev_str(DEV, "state", state, sizeof(state));
	EXPECT_STREQ("failed", state);
	EXPECT_EQ(1, dev_ll(DEV, "wr_timeouts"));
	EXPECT_EQ(1, dev_ll(DEV, "qp_drains"));
	EXPECT_EQ(self->env.base.stuck, ib_stat("stuck_mrs"));
	EXPECT_EQ(self->env.base.mrs + dev_ll(DEV, "chunks"), ib_stat("mrs"));
	expect_dev_gone(_metadata, &self->env.base, 0);
}

/* A deregistration the device refuses: the chunk is retired too. */
TEST_F_TIMEOUT(tmo, refused_dereg_retires_chunk, 120)
{
	int others;
	char state[32];
	unsigned long pfn;

	ASSERT_EQ(0, link_add(DEV));
	/* Its cached MRs elsewhere leave with the retired chunk. */
	others = ib_ready_devices(DEV);
	ASSERT_EQ(0, pool_set_knob("fail_ib_dereg", 1));
	pfn = lend_once(_metadata);

	EXPECT_EQ(self->retired + 1, pool_attr("stats/retired"));
	EXPECT_EQ(-ENOENT, pool_pfn_state(pfn, state, sizeof(state)));
	EXPECT_EQ(1, dev_ll(DEV, "dereg_failures"));
	EXPECT_EQ(0, dev_ll(DEV, "wr_timeouts"));
	/* No work request failed: the device stays usable. */
	dev_str(DEV, "state", state, sizeof(state));
	EXPECT_STREQ("ready", state);
	EXPECT_EQ(self->env.base.stuck + 1, ib_stat("stuck_mrs"));
	expect_retired_log(_metadata, self->env.kmsg, pfn);
	expect_dev_gone(_metadata, &self->env.base, others);
}

/* After all that the module unloads, and loads again. */
TEST_F_TIMEOUT(tmo, module_unloads_after_timeouts, 120)
{
	ASSERT_EQ(0, link_add(DEV));
	ASSERT_EQ(0, pool_set_knob("fail_ib_complete_after", 1));
	ASSERT_EQ(0, pool_set_knob("fail_ib_complete", 2));
	lend_once(_metadata);
	EXPECT_EQ(self->env.base.stuck + 1, ib_stat("stuck_mrs"));
	pool_trim_restore(self->env.trim_sec);
	self->env.trim_sec = -1;

	/* DEV stays: the module's exit removes it with its stuck MR. */
	ASSERT_EQ(0, syscall(__NR_delete_module, "mrpool", O_NONBLOCK))
		TH_LOG("rmmod mrpool: %s", strerror(errno));
	ASSERT_NE(0, access(IB_SYSFS, F_OK));
	ASSERT_EQ(0, system("insmod kmod/mrpool.ko $MRPOOL_PARAMS"));
	ASSERT_EQ(0, access(IB_SYSFS, F_OK));
	EXPECT_TRUE(dev_listed(DEV));
	EXPECT_EQ(0, ib_stat("stuck_mrs"));
	ASSERT_EQ(0, link_del(DEV));
}

TEST_HARNESS_MAIN
