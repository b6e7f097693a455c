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
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "helpers.h"

#undef ibv_reg_mr

static struct ibv_device fake_device;
static struct ibv_mw *fake_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
static int fake_dealloc_mw(struct ibv_mw *mw);
static int fake_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind);
static int fake_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
/* The fake device's context: memory windows through its ops (below). */
static struct ibv_context fake_context = {
	.device = &fake_device,
	.ops = {
		.alloc_mw = fake_alloc_mw,
		.dealloc_mw = fake_dealloc_mw,
		.bind_mw = fake_bind_mw,
		.poll_cq = fake_poll_cq,
	},
};
struct ibv_context *fake_mw_context = &fake_context;
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
 * Set: every ibv_dereg_mr marks its pages MADV_DOFORK after it, as
 * libibverbs' fork support (ibv_fork_init(), RDMAV_FORK_SAFE) does.
 */
int fake_dofork_on_dereg;
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
static struct ibv_pd *fake_hold_pd, *fake_hold_dereg_pd;
static size_t fake_hold_len;
static int fake_waiting;

/*
 * Only calls over exactly len bytes are held from now on (0: any), so
 * that a test holds a fallback buffer's call and not the arenas' beside
 * it (attach_test); fake_release() clears it.
 */
void fake_hold_only_len(size_t len)
{
	pthread_mutex_lock(&fake_hold_lock);
	__atomic_store_n(&fake_hold_len, len, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&fake_hold_lock);
}

void fake_hold(struct ibv_pd *pd)
{
	pthread_mutex_lock(&fake_hold_lock);
	__atomic_store_n(&fake_hold_pd, pd, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&fake_hold_lock);
}

/* The same for every ibv_dereg_mr of an MR in pd (attach_test: trim). */
void fake_hold_dereg(struct ibv_pd *pd)
{
	pthread_mutex_lock(&fake_hold_lock);
	__atomic_store_n(&fake_hold_dereg_pd, pd, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&fake_hold_lock);
}

void fake_release(void)
{
	pthread_mutex_lock(&fake_hold_lock);
	__atomic_store_n(&fake_hold_pd, NULL, __ATOMIC_RELEASE);
	__atomic_store_n(&fake_hold_dereg_pd, NULL, __ATOMIC_RELEASE);
	__atomic_store_n(&fake_hold_len, 0, __ATOMIC_RELEASE);
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

static void fake_hold_at(struct ibv_pd *pd, size_t len, struct ibv_pd **held)
{
	/* nothing held (the benchmarks' case): no lock taken */
	if (!__atomic_load_n(held, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&fake_hold_lock);
	if (pd == *held && (!fake_hold_len || len == fake_hold_len)) {
		fake_waiting++;
		pthread_cond_broadcast(&fake_hold_cond);
		while (*held && pd == *held)
			pthread_cond_wait(&fake_hold_cond, &fake_hold_lock);
		fake_waiting--;
	}
	pthread_mutex_unlock(&fake_hold_lock);
}

static void fake_hold_point(struct ibv_pd *pd, size_t len)
{
	fake_hold_at(pd, len, &fake_hold_pd);
}

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	struct fake_mr *f;

	fake_hold_point(pd, length);
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

	fake_hold_at(mr->pd, mr->length, &fake_hold_dereg_pd);
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
	if (__atomic_load_n(&fake_dofork_on_dereg, __ATOMIC_RELAXED)) {
		uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
		uintptr_t s = (uintptr_t)f->mr.addr & ~(pg - 1);
		uintptr_t e = ((uintptr_t)f->mr.addr + f->mr.length + pg - 1) & ~(pg - 1);

		madvise((void *)s, e - s, MADV_DOFORK);
	}
	free(f);
	return ret;
}

/* The access flags of the live MR with this lkey, or -1. */
int fake_lkey_access(uint32_t lkey)
{
	struct fake_mr *f;
	int access = -1;

	pthread_mutex_lock(&fake_lock);
	for (f = fake_mrs; f && access < 0; f = f->next)
		if (f->mr.lkey == lkey)
			access = f->access;
	pthread_mutex_unlock(&fake_lock);
	return access;
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

/*
 * Memory windows of the fake device (fake_context's ops), type 1 bound by
 * ibv_bind_mw() on a QP in RTS, as the preload shim binds them: a bind
 * checks what a device checks (the MR whose lkey bind_info.mr carries, as
 * a provider puts only that in the work request: live, of the window's
 * PD, with IBV_ACCESS_MW_BIND, the range inside it) and completes on the
 * QP's send CQ, with IBV_WC_MW_BIND_ERR if a check fails. FAKE_MW=0: the
 * device has no windows (ibv_query_device() without
 * IBV_DEVICE_MEM_WINDOW); FAKE_QP=0: no QP can be made. Other contexts (a
 * test's own) have no windows.
 */
static struct fake_mw {
	struct ibv_mw mw;
	uintptr_t addr;			/* bound range, length 0: unbound */
	size_t length;
	unsigned int access;
	struct fake_mw *next;
} *fake_mws;
int fake_mw_live, fake_mw_binds, fake_mw_deallocs, fake_qps_live, fake_cqs_live;
/* QPs moved to the error state */
int fake_qp_errs;
/* the next n binds complete with an error */
int fake_bind_fail_next;
/* the next n binds fail at their post (a full send queue), nothing posted */
int fake_bind_post_fail_next;
/* the next n binds are posted and never complete (a device gone quiet) */
int fake_bind_withhold_next;

/*
 * The device's side of QPs and CQs, shared with forked children as the
 * kernel's objects are through the inherited device file: one destroyed by
 * a process that did not create it (a child) is gone for its creator too,
 * where a bind on it then fails at its post. fake_foreign_destroys()
 * counts them.
 */
static struct fake_kern {
	_Atomic int foreign_destroys;
	_Atomic unsigned char qp_gone[4096];	/* by qp_num */
} *fake_kern;
static pthread_once_t fake_kern_once = PTHREAD_ONCE_INIT;

static void fake_kern_map(void)
{
	void *p = mmap(NULL, sizeof(*fake_kern), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		abort();
	fake_kern = p;
}

int fake_foreign_destroys(void)
{
	pthread_once(&fake_kern_once, fake_kern_map);
	return atomic_load(&fake_kern->foreign_destroys);
}

struct fake_cq {
	struct ibv_cq cq;
	int done;			/* completions to poll */
	enum ibv_wc_status status;	/* of the last one */
	pid_t pid;			/* its creator */
};

struct fake_qp {
	struct ibv_qp qp;
	pid_t pid;			/* its creator */
};

static bool fake_env_off(const char *name)
{
	const char *s = getenv(name);

	return s && !strcmp(s, "0");
}

int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
	memset(attr, 0, sizeof(*attr));
	attr->phys_port_cnt = 1;
	attr->max_mw = 1 << 16;
	if (ctx == &fake_context && !fake_env_off("FAKE_MW"))
		attr->device_cap_flags = IBV_DEVICE_MEM_WINDOW;
	return 0;
}

/* verbs.h's ibv_query_port() calls this for a context without extended ops */
#undef ibv_query_port
int ibv_query_port(struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *attr)
{
	struct ibv_port_attr *pa = (struct ibv_port_attr *)attr;

	(void)ctx;
	if (port != 1)
		return EINVAL;
	memset(pa, 0, sizeof(*pa));
	pa->state = IBV_PORT_ACTIVE;
	pa->link_layer = IBV_LINK_LAYER_ETHERNET;
	pa->gid_tbl_len = 2;
	return 0;
}

/* Index 1 is a RoCE v2 GID, 0 a v1 one. */
int _ibv_query_gid_ex(struct ibv_context *ctx, uint32_t port, uint32_t index,
		      struct ibv_gid_entry *entry, uint32_t flags, size_t size)
{
	(void)flags;
	(void)size;
	if (port != 1 || index > 1)
		return ENODATA;
	memset(entry, 0, sizeof(*entry));
	entry->gid.raw[15] = (uint8_t)(index + 1);
	entry->gid_index = index;
	entry->port_num = port;
	entry->gid_type = index ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_IB;
	(void)ctx;
	return 0;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
			     struct ibv_comp_channel *channel, int comp_vector)
{
	struct fake_cq *c;

	(void)cqe;
	(void)cq_context;
	(void)channel;
	(void)comp_vector;
	c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	c->cq.context = ctx;
	c->pid = getpid();
	pthread_once(&fake_kern_once, fake_kern_map);
	__atomic_fetch_add(&fake_cqs_live, 1, __ATOMIC_RELAXED);
	return &c->cq;
}

int ibv_destroy_cq(struct ibv_cq *cq)
{
	if (((struct fake_cq *)cq)->pid != getpid())
		atomic_fetch_add(&fake_kern->foreign_destroys, 1);
	__atomic_fetch_sub(&fake_cqs_live, 1, __ATOMIC_RELAXED);
	free(cq);
	return 0;
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init)
{
	static uint32_t qpn = 0x11;
	struct fake_qp *f;
	struct ibv_qp *qp;

	/* a provider's create writes to the device: a cancellation point */
	pthread_testcancel();
	if (fake_env_off("FAKE_QP")) {
		errno = ENOMEM;
		return NULL;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_once(&fake_kern_once, fake_kern_map);
	f->pid = getpid();
	qp = &f->qp;
	qp->context = pd->context;
	qp->pd = pd;
	qp->send_cq = init->send_cq;
	qp->recv_cq = init->recv_cq;
	qp->qp_type = init->qp_type;
	qp->qp_num = __atomic_fetch_add(&qpn, 1, __ATOMIC_RELAXED);
	qp->state = IBV_QPS_RESET;
	__atomic_fetch_add(&fake_qps_live, 1, __ATOMIC_RELAXED);
	return qp;
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	if (mask & IBV_QP_STATE)
		qp->state = attr->qp_state;
	if ((mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_ERR)
		__atomic_fetch_add(&fake_qp_errs, 1, __ATOMIC_RELAXED);
	return 0;
}

int ibv_destroy_qp(struct ibv_qp *qp)
{
	if (((struct fake_qp *)qp)->pid != getpid()) {
		atomic_fetch_add(&fake_kern->foreign_destroys, 1);
		atomic_store(&fake_kern->qp_gone[qp->qp_num % 4096], 1);
	}
	__atomic_fetch_sub(&fake_qps_live, 1, __ATOMIC_RELAXED);
	free(qp);
	return 0;
}

static struct ibv_mw *fake_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct fake_mw *w = calloc(1, sizeof(*w));

	if (!w) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&fake_lock);
	w->mw.context = pd->context;
	w->mw.pd = pd;
	w->mw.type = type;
	w->mw.rkey = (fake_next_key++ << 8) | 0x40000000u;
	w->next = fake_mws;
	fake_mws = w;
	fake_mw_live++;
	pthread_mutex_unlock(&fake_lock);
	return &w->mw;
}

static int fake_dealloc_mw(struct ibv_mw *mw)
{
	struct fake_mw **pp, *w;

	/* held while fake_hold() names its PD (preload_test), a cancellation point */
	fake_hold_point(mw->pd, 0);
	pthread_testcancel();
	pthread_mutex_lock(&fake_lock);
	for (pp = &fake_mws; (w = *pp); pp = &w->next)
		if (&w->mw == mw)
			break;
	if (w) {
		*pp = w->next;
		fake_mw_live--;
		fake_mw_deallocs++;
	}
	pthread_mutex_unlock(&fake_lock);
	if (!w)
		abort();	/* never allocated, or deallocated twice */
	free(w);
	return 0;
}

static int fake_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind)
{
	const struct ibv_mw_bind_info *bi = &bind->bind_info;
	struct fake_cq *c = (struct fake_cq *)qp->send_cq;
	struct fake_mw *w = (struct fake_mw *)mw;
	struct fake_mr *f;
	bool ok;

	pthread_once(&fake_kern_once, fake_kern_map);
	if (qp->state != IBV_QPS_RTS || qp->pd != mw->pd ||
	    atomic_load(&fake_kern->qp_gone[qp->qp_num % 4096]))
		return EINVAL;
	pthread_mutex_lock(&fake_lock);
	if (fake_bind_post_fail_next) {
		fake_bind_post_fail_next--;
		pthread_mutex_unlock(&fake_lock);
		return ENOMEM;
	}
	if (fake_bind_withhold_next) {
		fake_bind_withhold_next--;
		pthread_mutex_unlock(&fake_lock);
		return 0;
	}
	for (f = fake_mrs; f && (!bi->mr || f->mr.lkey != bi->mr->lkey); f = f->next)
		;
	ok = f && f->mr.pd == mw->pd && (f->access & IBV_ACCESS_MW_BIND) &&
	     bi->addr >= (uintptr_t)f->mr.addr &&
	     bi->addr + bi->length <= (uintptr_t)f->mr.addr + f->mr.length;
	if (fake_bind_fail_next) {
		fake_bind_fail_next--;
		ok = false;
	}
	mw->rkey = ibv_inc_rkey(mw->rkey);
	if (ok) {
		w->addr = bi->addr;
		w->length = bi->length;
		w->access = bi->mw_access_flags;
		fake_mw_binds++;
	}
	if (bind->send_flags & IBV_SEND_SIGNALED) {
		c->done++;
		c->status = ok ? IBV_WC_SUCCESS : IBV_WC_MW_BIND_ERR;
	}
	pthread_mutex_unlock(&fake_lock);
	return 0;
}

static int fake_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	struct fake_cq *c = (struct fake_cq *)cq;
	int got = 0;

	pthread_mutex_lock(&fake_lock);
	if (n > 0 && c->done) {
		c->done--;
		memset(wc, 0, sizeof(*wc));
		wc->status = c->status;
		wc->opcode = IBV_WC_BIND_MW;
		got = 1;
	}
	pthread_mutex_unlock(&fake_lock);
	return got;
}

/*
 * What a peer's RDMA with rkey reaches in pd: the access of the live
 * window or the live MR with remote access that rkey names, if it covers
 * [addr, addr + len), else 0 (a remote access error). A window's bounds
 * are its range, as on a device that enforces them.
 */
int fake_rkey_access(struct ibv_pd *pd, uint32_t rkey, const void *addr, size_t len)
{
	const int remote = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_ATOMIC;
	uintptr_t a = (uintptr_t)addr;
	struct fake_mw *w;
	struct fake_mr *f;
	int access = 0;

	pthread_mutex_lock(&fake_lock);
	for (w = fake_mws; w && !access; w = w->next)
		if (w->mw.pd == pd && w->mw.rkey == rkey && w->length &&
		    a >= w->addr && a + len <= w->addr + w->length)
			access = (int)w->access;
	for (f = fake_mrs; f && !access; f = f->next)
		if (f->mr.pd == pd && (f->access & remote) && f->mr.rkey == rkey &&
		    a >= (uintptr_t)f->mr.addr && a + len <= (uintptr_t)f->mr.addr + f->mr.length)
			access = f->access & remote;
	pthread_mutex_unlock(&fake_lock);
	return access;
}
