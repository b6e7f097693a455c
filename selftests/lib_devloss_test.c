// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libmrpool when a device goes away (run inside the VM): a pool on
 * /dev/mrpool attached to a PD on rxe0 and a PD on a second Soft-RoCE
 * device (mrpt0 on "lo", added here), allocator threads running on both
 * PDs and on pd NULL, then `rdma link delete mrpt0`. An async-event thread
 * marks mrpt0's PD dead (mrp_pd_dead) when the device goes; from then on
 * its allocations fail with -ENODEV and no buffer carries its keys, while
 * rxe0's PD keeps allocating and an RDMA WRITE through pool buffers on
 * rxe0 arrives intact; the pool closes cleanly.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/*
 * 6.1's kselftest_harness.h trips -Wextra: an unused handler argument, and
 * its EXPECT_EQ compares an int literal with unsigned counters.
 */
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wsign-compare"
#include "kselftest_harness.h"

#include <uapi/mrpool.h>

#include "ib_util.h"
#include "mrpool.h"
#include "rdmatest.h"

#define DEV		"mrpt0"		/* the device that goes away */
#define ACCESS		RDT_ACCESS_ALL
#define GONE_WAIT_S	120		/* TCG under a busy host is slow */

/* An allocator thread: one PD (or NULL), until told to stop. */
struct worker {
	struct mrp_pool *pool;
	struct ibv_pd *pd;
	atomic_bool *dead_done;		/* set once mrp_pd_dead() returned */
	atomic_bool stop;
	bool dies;			/* pd is the one marked dead */
	pthread_t tid;
	bool started;
	/* results, read after the join; ok and enodev also while it runs */
	atomic_ulong ok, enodev;
	unsigned long errors, late_ok, gone_eio;
	int first_err;
};

/* The device that goes: its own context and PD, watched by a thread. */
struct victim {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	char dev_path[IBV_SYSFS_PATH_MAX];	/* its uverbs sysfs directory */
	struct mrp_pool *pool;
	atomic_bool dead_done;
	atomic_int fatal_events;	/* IBV_EVENT_DEVICE_FATAL seen */
	atomic_bool stop;
	int dead_ret;
	pthread_t tid;
	bool started;
};

/* `rdma link delete` in a thread: it returns only once DEV's users left. */
struct deleter {
	pthread_t tid;
	bool started;
	atomic_bool done;
	int rc;
};

FIXTURE(devloss) {
	struct rdt_dev dev0;
	struct rdt_loop lp0;
	struct victim v;
	struct deleter del;
	struct worker w[3];
	struct mrp_pool *pool;
	bool added;
	const char *skip;
};

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Open a device by name with a PD of its own (no QP: only MRs are needed). */
static int open_named(const char *name, struct victim *v)
{
	struct ibv_device **list;
	int n, ret = -ENODEV;

	list = ibv_get_device_list(&n);
	if (!list)
		return -errno;
	for (int i = 0; i < n; i++) {
		if (strcmp(ibv_get_device_name(list[i]), name))
			continue;
		snprintf(v->dev_path, sizeof(v->dev_path), "%s", list[i]->dev_path);
		v->ctx = ibv_open_device(list[i]);
		if (!v->ctx) {
			ret = -errno;
			break;
		}
		v->pd = ibv_alloc_pd(v->ctx);
		if (!v->pd) {
			ret = -errno;
			ibv_close_device(v->ctx);
			v->ctx = NULL;
			break;
		}
		ret = 0;
		break;
	}
	ibv_free_device_list(list);
	return ret;
}

/*
 * Allocate, touch and free in a ring of 8 held buffers, sizes 4 KiB to
 * 128 KiB and now and then a large one. For the PD that dies, -ENODEV is
 * expected once the device went; an allocation started after
 * mrp_pd_dead() returned must fail (late_ok counts those that did not).
 * Between the removal and mrp_pd_dead() a registration the call needed
 * may fail with the device's own error: a kernel that disassociates the
 * context (7.3 delivers IBV_EVENT_DEVICE_FATAL for rxe) answers every
 * verb with EIO from then on, and the library returns a registration's
 * error as is (mrp_alloc(3)). Counted in gone_eio, never after the mark.
 */
static void *worker_main(void *arg)
{
	struct worker *w = arg;
	void *held[8] = { 0 };
	unsigned long i = 0;

	while (!atomic_load(&w->stop)) {
		bool after = w->dies && atomic_load(w->dead_done);
		size_t size = (size_t)4096 << (i % 6);
		struct mrp_buf b;
		int ret;

		if (i % 97 == 96)
			size = 3 << 20;
		ret = mrp_alloc(w->pool, size, w->pd, &b);
		i++;
		if (!ret) {
			w->ok++;
			w->late_ok += after;
			memset(b.addr, (int)i, 64);
			if (held[i % 8] && mrp_free(w->pool, held[i % 8]))
				w->errors++;
			held[i % 8] = b.addr;
			continue;
		}
		if (ret == -ENODEV && w->dies) {
			w->enodev++;
			sleep_ms(1);
			continue;
		}
		if (ret == -EIO && w->dies && !after) {
			w->gone_eio++;
			sleep_ms(1);
			continue;
		}
		if (!w->errors++)
			w->first_err = ret;
		sleep_ms(1);
	}
	for (int k = 0; k < 8; k++)
		if (held[k] && mrp_free(w->pool, held[k]))
			w->errors++;
	return NULL;
}

/*
 * The application's async-event thread for DEV's context. Soft-RoCE has
 * no disassociate_ucontext: on `rdma link delete` the kernel removes the
 * device's uverbs node, then waits for every open context to close, and
 * delivers no IBV_EVENT_DEVICE_FATAL (drivers that disassociate do). So
 * the thread polls the async fd with a timeout and also watches DEV's
 * uverbs sysfs node: either the fatal event or the node's removal is "the
 * device is gone", answered with mrp_pd_dead().
 */
static void *victim_main(void *arg)
{
	struct victim *v = arg;
	struct pollfd pfd = { .fd = v->ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;
	struct stat st;
	bool gone = false;

	fcntl(pfd.fd, F_SETFL, fcntl(pfd.fd, F_GETFL) | O_NONBLOCK);
	while (!gone && !atomic_load(&v->stop)) {
		if (poll(&pfd, 1, 20) > 0 && !ibv_get_async_event(v->ctx, &ev)) {
			if (ev.event_type == IBV_EVENT_DEVICE_FATAL) {
				atomic_fetch_add(&v->fatal_events, 1);
				gone = true;
			}
			ibv_ack_async_event(&ev);
		}
		if (stat(v->dev_path, &st) && errno == ENOENT)
			gone = true;
	}
	if (gone) {
		v->dead_ret = mrp_pd_dead(v->pool, v->pd);
		atomic_store(&v->dead_done, true);
	}
	return NULL;
}

static void *deleter_main(void *arg)
{
	struct deleter *d = arg;

	d->rc = link_del(DEV);
	atomic_store(&d->done, true);
	return NULL;
}

static void victim_close(struct victim *v)
{
	if (v->pd)
		ibv_dealloc_pd(v->pd);
	v->pd = NULL;
	if (v->ctx)
		ibv_close_device(v->ctx);
	v->ctx = NULL;
}

static void worker_stop(struct worker *w)
{
	atomic_store(&w->stop, true);
	if (w->started)
		pthread_join(w->tid, NULL);
	w->started = false;
}

FIXTURE_SETUP(devloss)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_BACKEND | MRP_POOL_ATTR_ARENA_SIZE,
		.backend = MRP_BACKEND_KERNEL, .arena_size = 2 << 20,
	};

	memset(&self->dev0, 0, sizeof(self->dev0));
	memset(&self->lp0, 0, sizeof(self->lp0));
	memset(&self->v, 0, sizeof(self->v));
	memset(&self->del, 0, sizeof(self->del));
	memset(self->w, 0, sizeof(self->w));
	self->pool = NULL;
	self->added = false;
	self->skip = NULL;
	if (access("/dev/mrpool", R_OK | W_OK)) {
		self->skip = "/dev/mrpool missing";
		return;
	}
	if (system("command -v rdma >/dev/null 2>&1")) {
		self->skip = "the rdma tool (iproute2) is missing";
		return;
	}
	if (dev_listed(DEV))
		link_del(DEV);
	if (link_add(DEV)) {
		self->skip = "cannot add a Soft-RoCE link on lo";
		return;
	}
	self->added = true;
	self->pool = mrp_pool_open(&a);
	if (!self->pool) {
		self->skip = "kernel backend unusable (mrp_pool_open failed)";
		return;
	}
	if (rdt_dev_open(&self->dev0, "rxe0", NULL)) {
		self->skip = "no rxe0";
		return;
	}
	ASSERT_EQ(0, rdt_loop_create(&self->lp0, &self->dev0));
	ASSERT_EQ(0, open_named(DEV, &self->v)) TH_LOG("cannot open %s", DEV);
	ASSERT_EQ(0, mrp_attach_pd(self->pool, self->dev0.pd, ACCESS));
	ASSERT_EQ(0, mrp_attach_pd(self->pool, self->v.pd, ACCESS));
	self->v.pool = self->pool;
}

FIXTURE_TEARDOWN(devloss)
{
	for (int i = 0; i < 3; i++)
		worker_stop(&self->w[i]);
	atomic_store(&self->v.stop, true);
	if (self->v.started)
		pthread_join(self->v.tid, NULL);
	/* a failed ASSERT may leave the victim attached: a forced close goes */
	if (self->pool)
		mrp_pool_close_flags(self->pool, MRP_CLOSE_FORCE);
	victim_close(&self->v);		/* lets a pending link delete finish */
	if (self->del.started)
		pthread_join(self->del.tid, NULL);
	rdt_loop_destroy(&self->lp0);
	if (self->dev0.ctx)
		rdt_dev_close(&self->dev0);
	if (self->added && dev_listed(DEV))
		link_del(DEV);
}

#define SKIP_IF_NEEDED() do { if (self->skip) POOL_SKIP("%s", self->skip); } while (0)

/* WRITE from one pool buffer to another on rxe0, bytes checked. */
static void write_on_rxe0(struct __test_metadata *_metadata,
			  FIXTURE_DATA(devloss) *self, unsigned int seed)
{
	enum { LEN = 64 << 10 };
	struct mrp_buf src, dst;
	int status = -1;

	ASSERT_EQ(0, mrp_alloc(self->pool, LEN, self->dev0.pd, &src));
	ASSERT_EQ(0, mrp_alloc(self->pool, LEN, self->dev0.pd, &dst));
	rdt_pattern_fill(src.addr, LEN, seed);
	memset(dst.addr, 0, LEN);
	ASSERT_EQ(0, rdt_write(&self->lp0, src.addr, src.lkey, (uintptr_t)dst.addr,
			       dst.rkey, LEN, &status));
	EXPECT_EQ(IBV_WC_SUCCESS, status);
	EXPECT_TRUE(rdt_pattern_same(dst.addr, LEN, seed));
	EXPECT_EQ(0, mrp_free(self->pool, src.addr));
	EXPECT_EQ(0, mrp_free(self->pool, dst.addr));
}

/*
 * Delete mrpt0 under running allocators: its PD is marked dead from the
 * async-event thread and fails with -ENODEV, even for buffers cached with
 * its keys; rxe0's PD and pd NULL never fail, new arenas are registered in
 * rxe0 only, WRITEs on rxe0 arrive intact, and the pool closes cleanly.
 */
TEST_F(devloss, delete_device_under_allocators)
{
	struct ibv_pd *pds[3] = { self->dev0.pd, self->v.pd, NULL };
	struct mrp_pd_stats ps0, ps1;
	struct mrp_buf b, cached, big;
	time_t until;

	SKIP_IF_NEEDED();
	/* buffers keyed in both PDs sit in this thread's cache */
	ASSERT_EQ(0, mrp_alloc(self->pool, 8192, self->v.pd, &cached));
	EXPECT_NE(0, cached.rkey);
	ASSERT_EQ(0, mrp_free(self->pool, cached.addr));
	write_on_rxe0(_metadata, self, 5);

	ASSERT_EQ(0, pthread_create(&self->v.tid, NULL, victim_main, &self->v));
	self->v.started = true;
	for (int i = 0; i < 3; i++) {
		struct worker *w = &self->w[i];

		w->pool = self->pool;
		w->pd = pds[i];
		w->dies = i == 1;
		w->dead_done = &self->v.dead_done;
		ASSERT_EQ(0, pthread_create(&w->tid, NULL, worker_main, w));
		w->started = true;
	}
	/* every worker has allocated before the device goes, however slow */
	until = time(NULL) + GONE_WAIT_S;
	while ((!atomic_load(&self->w[0].ok) || !atomic_load(&self->w[1].ok) ||
		!atomic_load(&self->w[2].ok)) && time(NULL) < until)
		sleep_ms(20);
	ASSERT_EQ(0, pthread_create(&self->del.tid, NULL, deleter_main, &self->del));
	self->del.started = true;

	until = time(NULL) + GONE_WAIT_S;
	while (!atomic_load(&self->v.dead_done) && time(NULL) < until)
		sleep_ms(20);
	ASSERT_TRUE(atomic_load(&self->v.dead_done))
		TH_LOG("%s's removal not seen in %d s (link delete %s)", DEV,
		       GONE_WAIT_S, atomic_load(&self->del.done) ? "done" : "pending");
	ASSERT_EQ(0, self->v.dead_ret);
	TH_LOG("device gone: %d IBV_EVENT_DEVICE_FATAL, link delete %s",
	       atomic_load(&self->v.fatal_events),
	       atomic_load(&self->del.done) ? "done" : "waiting for the context");

	/* the victim's PD: -ENODEV, from the cache and for growth alike */
	EXPECT_EQ(-ENODEV, mrp_alloc(self->pool, 8192, self->v.pd, &b));
	EXPECT_EQ(-ENODEV, mrp_alloc(self->pool, 4096, self->v.pd, &b));
	EXPECT_EQ(-ENODEV, mrp_alloc(self->pool, 3 << 20, self->v.pd, &b));
	EXPECT_EQ(-ENODEV, mrp_lookup(self->pool, cached.addr, self->v.pd, &b));
	ASSERT_EQ(0, mrp_pd_stats(self->pool, self->v.pd, &ps1, sizeof(ps1)));
	EXPECT_EQ(MRP_PD_DEAD, ps1.state);
	EXPECT_EQ(0, ps1.arenas);
	/* rxe0 under load meanwhile: a new arena (large) is registered in it only */
	ASSERT_EQ(0, mrp_pd_stats(self->pool, self->dev0.pd, &ps0, sizeof(ps0)));
	EXPECT_EQ(MRP_PD_LIVE, ps0.state);
	ASSERT_EQ(0, mrp_alloc(self->pool, 5 << 20, self->dev0.pd, &big));
	EXPECT_NE(0, big.rkey);
	ASSERT_EQ(0, mrp_pd_stats(self->pool, self->v.pd, &ps1, sizeof(ps1)));
	EXPECT_EQ(0, ps1.arenas);
	write_on_rxe0(_metadata, self, 7);
	EXPECT_EQ(0, mrp_free(self->pool, big.addr));
	sleep_ms(300);		/* the survivors run on past the removal */

	/* the victim's worker has met the mark, however slowly it runs */
	until = time(NULL) + GONE_WAIT_S;
	while (!atomic_load(&self->w[1].enodev) && time(NULL) < until)
		sleep_ms(20);

	/* the application stops using the PD, then detaches and closes it */
	worker_stop(&self->w[1]);
	EXPECT_LT(0, self->w[1].ok);
	EXPECT_LT(0, self->w[1].enodev);
	EXPECT_EQ(0, self->w[1].late_ok);
	EXPECT_EQ(0, self->w[1].errors) TH_LOG("first error %d", self->w[1].first_err);
	TH_LOG("the dying PD's worker: %lu ok, %lu -ENODEV, %lu -EIO before the mark",
	       atomic_load(&self->w[1].ok), atomic_load(&self->w[1].enodev),
	       self->w[1].gone_eio);
	EXPECT_EQ(0, mrp_detach_pd(self->pool, self->v.pd));
	EXPECT_EQ(-EINVAL, mrp_alloc(self->pool, 4096, self->v.pd, &b));
	victim_close(&self->v);
	pthread_join(self->del.tid, NULL);
	self->del.started = false;
	EXPECT_EQ(0, self->del.rc);
	EXPECT_FALSE(dev_listed(DEV));

	/* rxe0 after the device is gone for good */
	sleep_ms(300);
	write_on_rxe0(_metadata, self, 9);
	worker_stop(&self->w[0]);
	worker_stop(&self->w[2]);
	EXPECT_LT(0, self->w[0].ok);
	EXPECT_EQ(0, self->w[0].errors) TH_LOG("rxe0: first error %d", self->w[0].first_err);
	EXPECT_LT(0, self->w[2].ok);
	EXPECT_EQ(0, self->w[2].errors) TH_LOG("NULL: first error %d", self->w[2].first_err);
	EXPECT_EQ(0, mrp_detach_pd(self->pool, self->dev0.pd));
	EXPECT_EQ(0, mrp_pool_close(self->pool));
	self->pool = NULL;
}

TEST_HARNESS_MAIN
