// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libmrpool against the module and Soft-RoCE (run inside the VM): a pool on
 * /dev/mrpool attached to two PDs on rxe0, buffers from several arenas
 * moved with RDMA WRITE and READ using the keys the library returned, bytes
 * checked (also across a chunk boundary of a large buffer); keys are per
 * PD; trim with live buffers keeps them registered; fallback buffers and
 * arenas grown in the background come registered; a forked child gets
 * -ECHILD; a process exit gives every slice back; buffers of the fine
 * size classes move intact, none overlapping another.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/wait.h>
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

#include "mrpool.h"
#include "pool_util.h"
#include "rdmatest.h"

#define ACCESS	RDT_ACCESS_ALL

FIXTURE(lib) {
	struct rdt_dev dev[2];
	struct rdt_loop lp[2];
	struct mrp_pool *pool;
	const char *skip;
};

/* Query the module on a file of our own (-errno on failure). */
static int query(struct mrpool_query *q)
{
	int fd = open("/dev/mrpool", O_RDWR | O_CLOEXEC), ret;

	if (fd < 0)
		return -errno;
	memset(q, 0, sizeof(*q));
	q->size = sizeof(*q);
	ret = ioctl(fd, MRPOOL_IOC_QUERY, q) ? -errno : 0;
	close(fd);
	return ret;
}

FIXTURE_SETUP(lib)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_BACKEND | MRP_POOL_ATTR_ARENA_SIZE |
			     MRP_POOL_ATTR_BACKGROUND,
		.backend = MRP_BACKEND_KERNEL, .arena_size = 2 << 20, .background = 0,
	};
	struct mrpool_query q;

	memset(self->dev, 0, sizeof(self->dev));
	memset(self->lp, 0, sizeof(self->lp));
	self->pool = NULL;
	self->skip = NULL;
	if (query(&q)) {
		self->skip = "/dev/mrpool missing or QUERY unsupported";
		return;
	}
	self->pool = mrp_pool_open(&a);
	if (!self->pool) {
		self->skip = "kernel backend unusable (mrp_pool_open failed)";
		return;
	}
	/* two contexts on rxe0, each with its own PD and QP loop */
	for (int i = 0; i < 2; i++) {
		if (rdt_dev_open(&self->dev[i], NULL, NULL)) {
			self->skip = "no RDMA device (rxe0)";
			return;
		}
		ASSERT_EQ(0, rdt_loop_create(&self->lp[i], &self->dev[i]));
		ASSERT_EQ(0, mrp_attach_pd(self->pool, self->dev[i].pd, ACCESS));
	}
}

FIXTURE_TEARDOWN(lib)
{
	/* keys_are_per_pd and others keep buffers: a teardown forces. */
	if (self->pool)
		EXPECT_EQ(0, mrp_pool_close_flags(self->pool, MRP_CLOSE_FORCE));
	for (int i = 0; i < 2; i++) {
		rdt_loop_destroy(&self->lp[i]);
		if (self->dev[i].ctx)
			rdt_dev_close(&self->dev[i]);
	}
}

#define SKIP_IF_NEEDED() do { if (self->skip) POOL_SKIP("%s", self->skip); } while (0)

/*
 * The kernel backend is chosen and reported; its memory is pinned. Each
 * arena is offered to each PD through the slice's dma-buf first: rxe
 * takes no dma-buf MRs (EOPNOTSUPP, so the export worked: a failed export
 * would leave its own errno), and ibv_reg_mr registers it instead, once.
 */
TEST_F(lib, kernel_backend)
{
	struct mrp_pd_stats ps;
	struct mrp_stats st;
	struct mrp_buf b;

	SKIP_IF_NEEDED();
	ASSERT_EQ(0, mrp_alloc(self->pool, 8192, self->dev[0].pd, &b));
	ASSERT_EQ(0, mrp_stats(self->pool, &st, sizeof(st)));
	EXPECT_EQ(MRP_KIND_KERNEL, st.backend);
	EXPECT_EQ(2 << 20, st.bytes_mapped);
	EXPECT_EQ(st.bytes_mapped, st.bytes_locked);
	EXPECT_EQ(2, st.pds);
	EXPECT_EQ(2, st.registrations);	/* one arena, two PDs */
	EXPECT_NE(0, b.lkey);
	for (int i = 0; i < 2; i++) {
		ASSERT_EQ(0, mrp_pd_stats(self->pool, self->dev[i].pd, &ps, sizeof(ps)));
		EXPECT_EQ(EOPNOTSUPP, ps.dmabuf_error);
		EXPECT_EQ(0, ps.dmabuf_regs);
		EXPECT_EQ(0, ps.reg_failures);
		EXPECT_EQ(1, ps.arenas);
	}
	EXPECT_EQ(0, mrp_free(self->pool, b.addr));
}

/* WRITE and READ between buffers of different arenas, in both PDs. */
TEST_F(lib, write_read_across_arenas)
{
	enum { LEN = 256 << 10 };
	struct mrp_buf src, dst, back, big;
	struct mrp_stats st;
	int status;

	SKIP_IF_NEEDED();
	for (int i = 0; i < 2; i++) {
		struct ibv_pd *pd = self->dev[i].pd;

		/* 1 MiB buffers: two per 2 MiB arena, so three arenas at least */
		ASSERT_EQ(0, mrp_alloc(self->pool, 1 << 20, pd, &src));
		ASSERT_EQ(0, mrp_alloc(self->pool, 1 << 20, pd, &back));
		ASSERT_EQ(0, mrp_alloc(self->pool, 1 << 20, pd, &dst));
		ASSERT_EQ(0, mrp_alloc(self->pool, 3 << 20, pd, &big));	/* own arena */
		rdt_pattern_fill(src.addr, LEN, 11 + i);
		memset(dst.addr, 0, LEN);
		memset(back.addr, 0, LEN);

		ASSERT_EQ(0, rdt_write(&self->lp[i], src.addr, src.lkey,
				       (uintptr_t)dst.addr, dst.rkey, LEN, &status));
		EXPECT_EQ(IBV_WC_SUCCESS, status);
		EXPECT_TRUE(rdt_pattern_same(dst.addr, LEN, 11 + i));
		ASSERT_EQ(0, rdt_read(&self->lp[i], back.addr, back.lkey,
				      (uintptr_t)dst.addr, dst.rkey, LEN, &status));
		EXPECT_TRUE(rdt_pattern_same(back.addr, LEN, 11 + i));
		/* the large arena (two chunks), across its 2 MiB chunk boundary */
		ASSERT_EQ(0, rdt_write(&self->lp[i], src.addr, src.lkey,
				       (uintptr_t)big.addr + (2 << 20) - LEN / 2, big.rkey,
				       LEN, &status));
		EXPECT_TRUE(rdt_pattern_same((unsigned char *)big.addr + (2 << 20) - LEN / 2, LEN, 11 + i));

		ASSERT_EQ(0, mrp_free(self->pool, src.addr));
		ASSERT_EQ(0, mrp_free(self->pool, dst.addr));
		ASSERT_EQ(0, mrp_free(self->pool, back.addr));
		ASSERT_EQ(0, mrp_free(self->pool, big.addr));
	}
	ASSERT_EQ(0, mrp_stats(self->pool, &st, sizeof(st)));
	EXPECT_LE(3, st.arenas);
	/* registrations happen per arena per PD, never per buffer */
	EXPECT_EQ(st.arenas * 2, st.registrations);
}

/*
 * Fine size classes (lib 1.6, attribute classes = MRP_CLASSES_FINE): the
 * 25 buffers of an 80 KiB arena (2 MiB; the last one ends where the 48 KiB
 * tail no buffer takes begins) each written through RDMA with a pattern of
 * its own, then all checked: no buffer overlaps another; the last one read
 * back with RDMA READ. Then one buffer of each fine class, written whole.
 */
TEST_F(lib, fine_classes_rdma)
{
	static const size_t fine[] = {
		80 << 10, 96 << 10, 112 << 10, 160 << 10, 192 << 10,
		224 << 10, 320 << 10, 384 << 10, 448 << 10,
	};
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_BACKEND | MRP_POOL_ATTR_ARENA_SIZE |
			     MRP_POOL_ATTR_BACKGROUND | MRP_POOL_ATTR_CLASSES,
		.backend = MRP_BACKEND_KERNEL, .arena_size = 2 << 20,
		.background = 0, .classes = MRP_CLASSES_FINE,
	};
	enum { SZ = 80 << 10, N = (2 << 20) / SZ };
	struct mrp_buf b[N], src, back, f;
	uintptr_t base = 0, end;
	struct mrp_pool *p;
	struct ibv_pd *pd;
	int status, last = 0;

	SKIP_IF_NEEDED();
	pd = self->dev[0].pd;
	p = mrp_pool_open(&a);
	ASSERT_NE(NULL, p);
	ASSERT_EQ(0, mrp_attach_pd(p, pd, ACCESS));
	/* the source first: its own arena of the largest fine class */
	ASSERT_EQ(0, mrp_alloc(p, 448 << 10, pd, &src));
	ASSERT_EQ(448 << 10, src.size);
	for (int i = 0; i < N; i++) {
		ASSERT_EQ(0, mrp_alloc(p, SZ - 100, pd, &b[i]));
		ASSERT_EQ(SZ, b[i].size);
		if (!i)
			base = (uintptr_t)b[0].addr & ~(uintptr_t)((2 << 20) - 1);
		/* one arena, each buffer at a multiple of 80 KiB in it */
		ASSERT_EQ(base, (uintptr_t)b[i].addr & ~(uintptr_t)((2 << 20) - 1));
		ASSERT_EQ(0, ((uintptr_t)b[i].addr - base) % SZ);
		if ((uintptr_t)b[i].addr > (uintptr_t)b[last].addr)
			last = i;
	}
	end = (uintptr_t)b[last].addr + SZ;
	EXPECT_EQ(base + (uintptr_t)N * SZ, end);
	for (int i = 0; i < N; i++) {
		rdt_pattern_fill(src.addr, SZ, 100 + i);
		ASSERT_EQ(0, rdt_write(&self->lp[0], src.addr, src.lkey,
				       (uintptr_t)b[i].addr, b[i].rkey, SZ, &status));
		ASSERT_EQ(IBV_WC_SUCCESS, status);
	}
	for (int i = 0; i < N; i++) {
		EXPECT_TRUE(rdt_pattern_same(b[i].addr, SZ, 100 + i)) TH_LOG("buffer %d", i);
	}
	ASSERT_EQ(0, mrp_alloc(p, SZ, pd, &back));
	memset(back.addr, 0, SZ);
	ASSERT_EQ(0, rdt_read(&self->lp[0], back.addr, back.lkey,
			      (uintptr_t)b[last].addr, b[last].rkey, SZ, &status));
	EXPECT_TRUE(rdt_pattern_same(back.addr, SZ, 100 + last));
	for (int i = 0; i < N; i++)
		ASSERT_EQ(0, mrp_free(p, b[i].addr));
	ASSERT_EQ(0, mrp_free(p, back.addr));

	for (unsigned int c = 0; c < sizeof(fine) / sizeof(fine[0]); c++) {
		ASSERT_EQ(0, mrp_alloc(p, fine[c] - 1, pd, &f));
		ASSERT_EQ(fine[c], f.size);
		memset(f.addr, 0, f.size);
		rdt_pattern_fill(src.addr, f.size, 200 + c);
		ASSERT_EQ(0, rdt_write(&self->lp[0], src.addr, src.lkey,
				       (uintptr_t)f.addr, f.rkey, f.size, &status));
		EXPECT_EQ(IBV_WC_SUCCESS, status);
		EXPECT_TRUE(rdt_pattern_same(f.addr, f.size, 200 + c)) TH_LOG("%zu", fine[c]);
		ASSERT_EQ(0, mrp_free(p, f.addr));
	}
	ASSERT_EQ(0, mrp_free(p, src.addr));
	EXPECT_EQ(0, mrp_pool_close(p));
}

/* Keys are per PD: the other PD's rkey is refused and changes nothing. */
TEST_F(lib, keys_are_per_pd)
{
	enum { LEN = 4096 };
	struct mrp_buf src, dst, dst1;
	int status = 0;

	SKIP_IF_NEEDED();
	ASSERT_EQ(0, mrp_alloc(self->pool, LEN, self->dev[0].pd, &src));
	ASSERT_EQ(0, mrp_alloc(self->pool, LEN, self->dev[0].pd, &dst));
	ASSERT_EQ(0, mrp_lookup(self->pool, dst.addr, self->dev[1].pd, &dst1));
	ASSERT_NE(dst.rkey, dst1.rkey);
	rdt_pattern_fill(src.addr, LEN, 3);
	memset(dst.addr, 0x77, LEN);
	EXPECT_EQ(-EIO, rdt_write(&self->lp[0], src.addr, src.lkey,
				  (uintptr_t)dst.addr, dst1.rkey, LEN, &status));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, status);
	for (int i = 0; i < LEN; i++)
		ASSERT_EQ(0x77, ((unsigned char *)dst.addr)[i]);
	ASSERT_EQ(0, rdt_loop_reconnect(&self->lp[0]));
	ASSERT_EQ(0, rdt_write(&self->lp[0], src.addr, src.lkey,
			       (uintptr_t)dst.addr, dst.rkey, LEN, &status));
	EXPECT_TRUE(rdt_pattern_same(dst.addr, LEN, 3));
}

/* Trim while buffers are live: their arena stays mapped and registered. */
TEST_F(lib, trim_with_live_buffers)
{
	enum { LEN = 64 << 10 };
	struct mrp_buf live, peer, gone;
	struct mrpool_query q0, q1;
	struct mrp_stats st;
	int status;

	SKIP_IF_NEEDED();
	ASSERT_EQ(0, mrp_alloc(self->pool, LEN, self->dev[0].pd, &live));
	ASSERT_EQ(0, mrp_alloc(self->pool, LEN, self->dev[0].pd, &peer));
	ASSERT_EQ(0, mrp_alloc(self->pool, 2 << 20, self->dev[0].pd, &gone));
	ASSERT_EQ(0, mrp_free(self->pool, gone.addr));
	ASSERT_EQ(0, query(&q0));
	EXPECT_EQ(1, mrp_trim(self->pool, MRP_TRIM_FLUSH));
	ASSERT_EQ(0, mrp_stats(self->pool, &st, sizeof(st)));
	EXPECT_EQ(1, st.arenas);
	/* the slice went back to the module */
	ASSERT_EQ(0, query(&q1));
	EXPECT_EQ(q0.used_bytes - (2 << 20), q1.used_bytes);
	rdt_pattern_fill(live.addr, LEN, 5);
	ASSERT_EQ(0, rdt_write(&self->lp[0], live.addr, live.lkey,
			       (uintptr_t)peer.addr, peer.rkey, LEN, &status));
	EXPECT_TRUE(rdt_pattern_same(peer.addr, LEN, 5));
	EXPECT_EQ(0, mrp_free(self->pool, live.addr));
	EXPECT_EQ(0, mrp_free(self->pool, peer.addr));
}

/* Past max_bytes, a fallback buffer is registered per buffer and works. */
TEST_F(lib, fallback_buffer_rdma)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_BACKEND | MRP_POOL_ATTR_ARENA_SIZE |
			     MRP_POOL_ATTR_MAX_BYTES | MRP_POOL_ATTR_FALLBACK,
		.backend = MRP_BACKEND_KERNEL, .arena_size = 2 << 20,
		.max_bytes = 2 << 20, .fallback = 1,
	};
	struct mrp_buf full, fb, src;
	struct mrp_pool *p;
	struct mrp_stats st;
	int status;

	SKIP_IF_NEEDED();
	p = mrp_pool_open(&a);
	ASSERT_NE(NULL, p);
	ASSERT_EQ(0, mrp_attach_pd(p, self->dev[0].pd, ACCESS));
	ASSERT_EQ(0, mrp_alloc(p, 2 << 20, self->dev[0].pd, &full));
	ASSERT_EQ(0, mrp_alloc(p, 65536, self->dev[0].pd, &fb));
	ASSERT_EQ(0, mrp_stats(p, &st, sizeof(st)));
	EXPECT_EQ(1, st.fallbacks);
	EXPECT_EQ(65536, st.fallback_bytes);
	EXPECT_EQ(2, st.registrations);	/* the arena, and the fallback buffer */
	/* bytes move from the arena buffer into the fallback one */
	src = full;
	rdt_pattern_fill(src.addr, 65536, 21);
	memset(fb.addr, 0, 65536);
	ASSERT_EQ(0, rdt_write(&self->lp[0], src.addr, src.lkey,
			       (uintptr_t)fb.addr, fb.rkey, 65536, &status));
	EXPECT_TRUE(rdt_pattern_same(fb.addr, 65536, 21));
	EXPECT_EQ(0, mrp_free(p, fb.addr));
	EXPECT_EQ(0, mrp_free(p, full.addr));
	EXPECT_EQ(0, mrp_pool_close(p));
}

/* Arenas the pool thread adds ahead of demand come registered. */
TEST_F(lib, background_growth_registered)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_BACKEND | MRP_POOL_ATTR_ARENA_SIZE |
			     MRP_POOL_ATTR_BACKGROUND,
		.backend = MRP_BACKEND_KERNEL, .arena_size = 2 << 20, .background = 1,
	};
	enum { N = 600 };	/* 512 buffers of 4 KiB per arena */
	struct mrp_buf *b = calloc(N, sizeof(*b));
	struct mrp_stats st;
	struct mrp_pool *p;
	int status, waited = 0;

	SKIP_IF_NEEDED();
	ASSERT_NE(NULL, b);
	p = mrp_pool_open(&a);
	ASSERT_NE(NULL, p);
	ASSERT_EQ(0, mrp_attach_pd(p, self->dev[0].pd, ACCESS));
	for (int i = 0; i < 300; i++)
		ASSERT_EQ(0, mrp_alloc(p, 4096, self->dev[0].pd, &b[i]));
	/* below the low-water mark (half an arena): the pool thread grows */
	do {
		ASSERT_EQ(0, mrp_stats(p, &st, sizeof(st)));
		if (st.bg_growths)
			break;
		usleep(20000);
		waited += 20;
	} while (waited < 10000);
	ASSERT_LE(1, st.bg_growths);
	for (int i = 300; i < N; i++)
		ASSERT_EQ(0, mrp_alloc(p, 4096, self->dev[0].pd, &b[i]));
	ASSERT_EQ(0, mrp_stats(p, &st, sizeof(st)));
	EXPECT_EQ(1, st.sync_growths);	/* only the very first arena */
	EXPECT_LE(2, st.arenas);
	EXPECT_EQ(st.arenas, st.registrations);
	/* the last buffer lives in a background arena: its keys work */
	rdt_pattern_fill(b[0].addr, 4096, 8);
	memset(b[N - 1].addr, 0, 4096);
	ASSERT_EQ(0, rdt_write(&self->lp[0], b[0].addr, b[0].lkey,
			       (uintptr_t)b[N - 1].addr, b[N - 1].rkey, 4096, &status));
	EXPECT_TRUE(rdt_pattern_same(b[N - 1].addr, 4096, 8));
	for (int i = 0; i < N; i++)
		ASSERT_EQ(0, mrp_free(p, b[i].addr));
	EXPECT_EQ(0, mrp_pool_close(p));
	free(b);
}

/* A forked child gets -ECHILD and does not have the slices mapped. */
TEST_F(lib, fork_child_error)
{
	struct mrp_buf b, c;
	unsigned char vec;
	int status;
	pid_t pid;

	SKIP_IF_NEEDED();
	ASSERT_EQ(0, mrp_alloc(self->pool, 8192, self->dev[0].pd, &b));
	memset(b.addr, 9, 8192);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int bad = 0;

		bad |= mrp_alloc(self->pool, 8192, NULL, &c) != -ECHILD;
		bad |= (mrp_free(self->pool, b.addr) != -ECHILD) << 1;
		bad |= (mincore(b.addr, 4096, &vec) != -1 || errno != ENOMEM) << 2;
		bad |= (mrp_pool_close(self->pool) != 0) << 3;
		_exit(bad);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	/* the child's close did not free the parent's slices */
	EXPECT_EQ(9, ((unsigned char *)b.addr)[8191]);
	ASSERT_EQ(0, rdt_write(&self->lp[0], b.addr, b.lkey, (uintptr_t)b.addr + 4096,
			       b.rkey, 16, &status));
	EXPECT_EQ(0, mrp_free(self->pool, b.addr));
}

/*
 * A child forked after the pool was opened does not keep the parent's
 * slices: the library closes the pool's file in the child at fork, so the
 * parent's crash returns them while the child lives on.
 */
TEST_F(lib, fork_child_does_not_keep_slices)
{
	struct mrpool_query q0, q1;
	int pfd[2], life[2], status;
	pid_t pid, grandchild;

	SKIP_IF_NEEDED();
	ASSERT_EQ(0, query(&q0));
	ASSERT_EQ(0, pipe(pfd));
	ASSERT_EQ(0, pipe(life));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct mrp_pool_attr a = {
			.comp_mask = MRP_POOL_ATTR_BACKEND | MRP_POOL_ATTR_ARENA_SIZE,
			.backend = MRP_BACKEND_KERNEL, .arena_size = 2 << 20,
		};
		struct mrp_pool *p = mrp_pool_open(&a);
		struct mrp_buf b;
		pid_t g;

		if (!p || mrp_alloc(p, 2 << 20, NULL, &b))
			_exit(1);
		g = fork();
		if (g == 0) {
			pool_child_wait(life);	/* lives on with what it inherited */
			_exit(0);
		}
		if (g < 0 || write(pfd[1], &g, sizeof(g)) != sizeof(g))
			_exit(2);
		pool_child_wait(life);	/* killed by the test */
		_exit(3);
	}
	close(pfd[1]);
	ASSERT_EQ(sizeof(grandchild), read(pfd[0], &grandchild, sizeof(grandchild)));
	ASSERT_EQ(0, query(&q1));
	EXPECT_LE(q0.used_bytes + (2 << 20), q1.used_bytes);
	kill(pid, SIGKILL);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	/* The grandchild is alive, and holds no file of the dead process. */
	EXPECT_EQ(0, kill(grandchild, 0));
	EXPECT_TRUE(POOL_WAIT(!query(&q1) && q1.used_bytes == q0.used_bytes,
			      10000));
	kill(grandchild, SIGKILL);
	close(pfd[0]);
}

/* A process that exits without closing gives every slice back. */
TEST_F(lib, exit_returns_slices)
{
	struct mrpool_query q0, q1;
	int pfd[2], life[2], status, waited = 0;
	char c;
	pid_t pid;

	SKIP_IF_NEEDED();
	ASSERT_EQ(0, query(&q0));
	ASSERT_EQ(0, pipe(pfd));
	ASSERT_EQ(0, pipe(life));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		/*
		 * No pool thread: it grows an arena ahead of demand after a
		 * refill, whenever it gets to run, so the slices counted
		 * below would be four or five.
		 */
		struct mrp_pool_attr a = {
			.comp_mask = MRP_POOL_ATTR_BACKEND | MRP_POOL_ATTR_ARENA_SIZE |
				     MRP_POOL_ATTR_BACKGROUND,
			.backend = MRP_BACKEND_KERNEL, .arena_size = 2 << 20,
			.background = 0,
		};
		struct rdt_dev dev;
		struct mrp_pool *p = mrp_pool_open(&a);
		struct mrp_buf b;

		if (!p || rdt_dev_open(&dev, NULL, NULL) ||
		    mrp_attach_pd(p, dev.pd, ACCESS))
			_exit(1);
		for (int i = 0; i < 4; i++)
			if (mrp_alloc(p, 2 << 20, dev.pd, &b))
				_exit(2);
		if (write(pfd[1], "x", 1) != 1)
			_exit(3);
		pool_child_wait(life);	/* killed by the parent, pool and MRs still live */
		_exit(4);
	}
	close(pfd[1]);
	ASSERT_EQ(1, read(pfd[0], &c, 1));
	ASSERT_EQ(0, query(&q1));
	EXPECT_EQ(q0.used_bytes + (8 << 20), q1.used_bytes);
	kill(pid, SIGKILL);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFSIGNALED(status));
	do {
		ASSERT_EQ(0, query(&q1));
		if (q1.used_bytes == q0.used_bytes)
			break;
		usleep(50000);
		waited += 50;
	} while (waited < 5000);
	EXPECT_EQ(q0.used_bytes, q1.used_bytes);
	close(pfd[0]);
}

TEST_HARNESS_MAIN
