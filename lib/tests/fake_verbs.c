// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A recording stand-in for the verbs calls libmrpool makes, for host tests
 * (no RDMA device here): every MR gets unique keys and stays on a list the
 * tests inspect. Linked before libmrpool.a, so these definitions win.
 * One fake device, listed and opened as a program using RDMA would (the
 * preload shim wakes up at that: preload_test).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "helpers.h"

#undef ibv_reg_mr

static struct ibv_device fake_device;
static struct ibv_context fake_context = { .device = &fake_device };
char *fake_device_path = fake_device.ibdev_path;
struct ibv_pd fake_pds[FAKE_PDS] = {
	[0 ... FAKE_PDS - 1] = { .context = &fake_context },
};

static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fake_mr {
	struct ibv_mr mr;
	int access;
	struct fake_mr *next;
} *fake_mrs;
static uint32_t fake_next_key = 0x100;
int fake_live, fake_regs, fake_fail_next;
/* every ibv_reg_mr call, failed ones too */
int fake_reg_calls;
/* the next n ibv_dereg_mr calls fail with EBUSY, the MR staying live */
int fake_dereg_fail_next;
/*
 * A device gone: every registration in fake_fail_pd fails with EIO, and
 * every deregistration in fake_dereg_fail_pd fails with EIO, the MR gone
 * with its device all the same.
 */
struct ibv_pd *fake_fail_pd, *fake_dereg_fail_pd;

/*
 * FAKE_FORK=init: ibv_fork_init() ran (RDMAV_FORK_SAFE, UCX by default),
 * so libibverbs marks each range it registers MADV_DONTFORK, even on a
 * kernel that copies pinned pages at fork, where ibv_is_fork_initialized()
 * still says IBV_FORK_UNNEEDED (preload_fake.c): rdma-core 44 does both.
 */
static void fake_dontfork_range(void *addr, size_t length)
{
	const char *s = getenv("FAKE_FORK");
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), start, end;

	if (!s || strcmp(s, "init") || !length)
		return;
	start = (uintptr_t)addr & ~(page - 1);
	end = ((uintptr_t)addr + length + page - 1) & ~(page - 1);
	madvise((void *)start, end - start, MADV_DONTFORK);
}

/*
 * The device list: the fake device, or none with FAKE_DEVICES=0 (a host
 * without RDMA, where a program's probe finds nothing). Each call returns
 * a list of its own, as libibverbs does.
 */
struct ibv_device **ibv_get_device_list(int *num_devices)
{
	const char *s = getenv("FAKE_DEVICES");
	int n = s && !strcmp(s, "0") ? 0 : 1;
	struct ibv_device **list = calloc((size_t)n + 1, sizeof(*list));

	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	if (n)
		list[0] = &fake_device;
	if (num_devices)
		*num_devices = n;
	return list;
}

void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

/* The fake device's one context (fake_pds' context); any other: ENODEV. */
struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	if (device != &fake_device) {
		errno = ENODEV;
		return NULL;
	}
	return &fake_context;
}

/*
 * A registration held up (growth_test): while fake_hold_pd is set, every
 * ibv_reg_mr in it waits, outside fake_lock, until fake_release(). The
 * library makes an arena's registrations without pool->lock, so a test
 * holds a creation in the middle and sees what other threads get through
 * meanwhile; fake_held() says how many wait, so that a test knows the
 * creation has not ended, without timing anything.
 */
static pthread_mutex_t fake_hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fake_hold_cond = PTHREAD_COND_INITIALIZER;
static struct ibv_pd *fake_hold_pd;
static int fake_waiting;

void fake_hold(struct ibv_pd *pd)
{
	pthread_mutex_lock(&fake_hold_lock);
	fake_hold_pd = pd;
	pthread_mutex_unlock(&fake_hold_lock);
}

void fake_release(void)
{
	pthread_mutex_lock(&fake_hold_lock);
	fake_hold_pd = NULL;
	pthread_cond_broadcast(&fake_hold_cond);
	pthread_mutex_unlock(&fake_hold_lock);
}

int fake_held(void)
{
	int n;

	pthread_mutex_lock(&fake_hold_lock);
	n = fake_waiting;
	pthread_mutex_unlock(&fake_hold_lock);
	return n;
}

/* Until n registrations wait: 0, or -1 after timeout_ms (a hang, not a time). */
int fake_wait_held(int n, int timeout_ms)
{
	struct timespec ts;
	int ret = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += timeout_ms / 1000;
	ts.tv_nsec += (timeout_ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&fake_hold_lock);
	while (fake_waiting < n && !ret)
		ret = pthread_cond_timedwait(&fake_hold_cond, &fake_hold_lock, &ts);
	if (fake_waiting >= n)
		ret = 0;
	pthread_mutex_unlock(&fake_hold_lock);
	return ret ? -1 : 0;
}

static void fake_hold_point(struct ibv_pd *pd)
{
	pthread_mutex_lock(&fake_hold_lock);
	if (pd == fake_hold_pd) {
		fake_waiting++;
		pthread_cond_broadcast(&fake_hold_cond);
		while (fake_hold_pd && pd == fake_hold_pd)
			pthread_cond_wait(&fake_hold_cond, &fake_hold_lock);
		fake_waiting--;
	}
	pthread_mutex_unlock(&fake_hold_lock);
}

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	struct fake_mr *f;

	fake_hold_point(pd);
	fake_dontfork_range(addr, length);
	pthread_mutex_lock(&fake_lock);
	fake_reg_calls++;
	if (fake_fail_next) {
		fake_fail_next--;
		pthread_mutex_unlock(&fake_lock);
		errno = EFAULT;
		return NULL;
	}
	if (fake_fail_pd && pd == fake_fail_pd) {
		pthread_mutex_unlock(&fake_lock);
		errno = EIO;
		return NULL;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		pthread_mutex_unlock(&fake_lock);
		errno = ENOMEM;
		return NULL;
	}
	f->mr.pd = pd;
	f->mr.addr = addr;
	f->mr.length = length;
	f->mr.lkey = fake_next_key++;
	f->mr.rkey = f->mr.lkey | 0x80000000u;
	f->access = access;
	f->next = fake_mrs;
	fake_mrs = f;
	fake_live++;
	fake_regs++;
	pthread_mutex_unlock(&fake_lock);
	return &f->mr;
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
				uint64_t iova, unsigned int access)
{
	(void)iova;
	return ibv_reg_mr(pd, addr, length, (int)access);
}

/* dma-buf MRs: refused with fake_dmabuf_errno when set, else counted */
int fake_dmabuf_errno, fake_dmabuf_regs;

struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
				 uint64_t iova, int fd, int access)
{
	(void)offset;
	if (fd < 0)
		abort();
	if (fake_dmabuf_errno) {
		errno = fake_dmabuf_errno;
		return NULL;
	}
	__atomic_fetch_add(&fake_dmabuf_regs, 1, __ATOMIC_RELAXED);
	return ibv_reg_mr(pd, (void *)(uintptr_t)iova, length, access);
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct fake_mr **pp, *f;
	int ret = 0;

	pthread_mutex_lock(&fake_lock);
	if (fake_dereg_fail_next) {
		fake_dereg_fail_next--;
		pthread_mutex_unlock(&fake_lock);
		return EBUSY;
	}
	for (pp = &fake_mrs; (f = *pp); pp = &f->next)
		if (&f->mr == mr)
			break;
	if (f) {
		*pp = f->next;
		fake_live--;
		if (fake_dereg_fail_pd && f->mr.pd == fake_dereg_fail_pd)
			ret = EIO;
	}
	pthread_mutex_unlock(&fake_lock);
	if (!f)
		abort();	/* deregistering something never registered */
	free(f);
	return ret;
}

/* The access flags of the live MR of pd covering addr, or -1. */
int fake_mr_access(struct ibv_pd *pd, const void *addr)
{
	uintptr_t a = (uintptr_t)addr;
	struct fake_mr *f;
	int access = -1;

	pthread_mutex_lock(&fake_lock);
	for (f = fake_mrs; f && access < 0; f = f->next)
		if (f->mr.pd == pd && a >= (uintptr_t)f->mr.addr &&
		    a < (uintptr_t)f->mr.addr + f->mr.length)
			access = f->access;
	pthread_mutex_unlock(&fake_lock);
	return access;
}

/*
 * 1 if a live MR of pd with these keys covers [addr, addr + len): its lkey,
 * and its rkey if it was registered with remote access, else 0 (the library
 * hands out no rkey for a PD without remote access).
 */
int fake_mr_covers(struct ibv_pd *pd, const void *addr, size_t len,
		   uint32_t lkey, uint32_t rkey)
{
	const int remote = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_ATOMIC;
	uintptr_t a = (uintptr_t)addr;
	struct fake_mr *f;
	int ok = 0;

	pthread_mutex_lock(&fake_lock);
	for (f = fake_mrs; f && !ok; f = f->next)
		ok = f->mr.pd == pd && f->mr.lkey == lkey &&
		     rkey == (f->access & remote ? f->mr.rkey : 0) &&
		     a >= (uintptr_t)f->mr.addr &&
		     a + len <= (uintptr_t)f->mr.addr + f->mr.length;
	pthread_mutex_unlock(&fake_lock);
	return ok;
}
