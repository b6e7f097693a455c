// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Memory windows: a narrow rkey for one buffer. An arena's rkey reaches
 * every buffer in the arena; a type 2 window bound over one buffer reaches
 * only that buffer (on devices that enforce window bounds), and dies when
 * the buffer is freed or the caller invalidates it.
 *
 * The bind is a work request on the caller's QP (type 2 windows are bound
 * through a QP, and a device accepts the window's rkey on that QP only), so
 * its completion arrives on the caller's CQ. Invalidation is
 * ibv_dealloc_mw(): synchronous, needs no QP, and the rkey is dead when it
 * returns. While an arena has windows, its block_mask is all ones so that
 * frees of it take the slow path, which invalidates; arenas without
 * windows pay nothing.
 *
 * Windows are listed per buffer (arena->mw_index) and pool-wide (for PD
 * detach and close), both under pool->lock, which is held only to link
 * and unlink: the bind is posted without it, so a slow or busy QP never
 * stalls the pool. A window is freed by whoever drops its last reference:
 * one for being listed, one for the bind being posted. So a free of the
 * buffer racing its bind (a misuse: the application still holds the
 * buffer it is binding) unlists the window, and the binder deallocates it
 * once its post returned, never while the post reads it.
 *
 * Type 1 windows (struct mrp_binder, below) are the preload shim's: one
 * per registration it serves with remote access (preload/verbs.c), bound
 * on a private QP of the PD, living until the MR's deregistration rather
 * than the buffer's free, as a real MR does.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "internal.h"

struct mrp_mw {
	struct mrp_mw *next, **pprev;		/* pool->mws */
	struct mrp_mw *buf_next, **buf_pprev;	/* arena->mw_index[buffer] */
	uintptr_t buf;			/* start of the buffer it covers */
	struct mrp_arena *arena;
	struct ibv_mw *mw;
	_Atomic uint32_t refs;		/* listed + bind being posted */
};

static void mrp_mw_count(struct mrp_arena *a, int delta)
{
	uint32_t n = atomic_load(&a->nmw) + (uint32_t)delta;

	atomic_store(&a->nmw, n);
	atomic_store(&a->block_mask, mrp_fast_mask(a));
}

static struct mrp_mw **mrp_mw_head(struct mrp_arena *a, uintptr_t buf)
{
	return &a->mw_index[a->cls == MRP_LARGE ? 0 : mrp_buf_index(a, buf)];
}

/* List w in the pool and under its buffer. pool->lock held. */
static int mrp_mw_link(struct mrp_pool *pool, struct mrp_mw *w)
{
	struct mrp_arena *a = w->arena;
	struct mrp_mw **head;

	if (!a->mw_index) {
		a->mw_index = calloc(a->nblocks, sizeof(*a->mw_index));
		if (!a->mw_index)
			return -ENOMEM;
	}
	head = mrp_mw_head(a, w->buf);
	w->buf_next = *head;
	if (*head)
		(*head)->buf_pprev = &w->buf_next;
	*head = w;
	w->buf_pprev = head;
	w->next = pool->mws;
	if (pool->mws)
		pool->mws->pprev = &w->next;
	pool->mws = w;
	w->pprev = &pool->mws;
	mrp_mw_count(a, 1);
	return 0;
}

/* Take w off both lists; false if it was not listed. pool->lock held. */
static bool mrp_mw_unlink(struct mrp_mw *w)
{
	if (!w->pprev)
		return false;
	*w->pprev = w->next;
	if (w->next)
		w->next->pprev = w->pprev;
	*w->buf_pprev = w->buf_next;
	if (w->buf_next)
		w->buf_next->buf_pprev = w->buf_pprev;
	w->pprev = NULL;
	w->buf_pprev = NULL;
	mrp_mw_count(w->arena, -1);
	return true;
}

static void mrp_mw_put(struct mrp_mw *w)
{
	if (atomic_fetch_sub(&w->refs, 1) == 1) {
		ibv_dealloc_mw(w->mw);
		free(w);
	}
}

/*
 * The arena's MR in the PD of slot, which a window binds to: registered
 * now if the PD refused the arena at growth. 0 or -errno (-ENODEV: the PD
 * is dead).
 */
static int mrp_mw_arena_mr(struct mrp_pool *pool, struct mrp_arena *a, int slot)
{
	if (mrp_slot_dead(pool, slot))
		return -ENODEV;
	return mrp_arena_has(a, slot) ? 0 : mrp_reg_lazy(pool, a, slot);
}

/* A window over [p, p + len) of mr (an arena's), with access. */
static struct ibv_mw_bind_info mrp_mw_info(struct ibv_mr *mr, uintptr_t p, size_t len,
					   unsigned int access)
{
	return (struct ibv_mw_bind_info){
		.mr = mr,
		.addr = p,
		.length = len,
		.mw_access_flags = access,
	};
}

MRP_EXPORT int mrp_mw_bind(struct mrp_pool *pool, struct ibv_qp *qp, void *addr,
			   size_t len, unsigned int access, uint64_t wr_id,
			   unsigned int send_flags, uint32_t *rkey)
{
	uintptr_t p = (uintptr_t)addr, start, end;
	struct ibv_send_wr wr = { 0 }, *bad;
	struct mrp_arena *a;
	struct mrp_mw *w;
	int slot, ret;

	if (!pool || !qp || !addr || !len || !rkey)
		return -EINVAL;
	if (mrp_forked(pool))
		return -ECHILD;
	a = mrp_arena_of(p);
	if (!a || a->pool != pool)
		return -EINVAL;
	slot = mrp_pd_slot(pool, qp->pd);
	if (slot < 0 || !(pool->access[slot] & IBV_ACCESS_MW_BIND))
		return -EINVAL;
	ret = mrp_mw_arena_mr(pool, a, slot);
	if (ret)
		return ret;
	if (a->cls == MRP_LARGE) {
		start = a->base;
		end = a->base + a->size;
	} else {
		start = mrp_buf_start(a, p);
		if (!start)	/* a fine class's tail */
			return -EINVAL;
		end = start + a->bsize;
	}
	if (len > end - p)
		return -EINVAL;	/* one window covers one buffer at most */
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->mw = ibv_alloc_mw(qp->pd, IBV_MW_TYPE_2);
	if (!w->mw) {
		ret = errno ? -errno : -ENOMEM;
		free(w);
		return ret;
	}
	w->buf = start;
	w->arena = a;
	atomic_init(&w->refs, 2);

	wr.wr_id = wr_id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = send_flags;
	wr.bind_mw.mw = w->mw;
	wr.bind_mw.rkey = ibv_inc_rkey(w->mw->rkey);
	wr.bind_mw.bind_info = mrp_mw_info(a->mr[slot], p, len, access);

	/* listed before the post, so that a free from now on invalidates it */
	pthread_mutex_lock(&pool->lock);
	ret = mrp_mw_link(pool, w);
	pthread_mutex_unlock(&pool->lock);
	if (ret) {
		ibv_dealloc_mw(w->mw);
		free(w);
		return ret;
	}
	ret = ibv_post_send(qp, &wr, &bad);
	if (ret) {
		pthread_mutex_lock(&pool->lock);
		if (mrp_mw_unlink(w))
			mrp_mw_put(w);	/* the list's reference */
		pthread_mutex_unlock(&pool->lock);
		mrp_mw_put(w);
		return -ret;
	}
	mrp_mw_put(w);
	*rkey = wr.bind_mw.rkey;
	return 0;
}

/* Invalidate the windows over the buffer starting at start; how many. */
int mrp_mw_release_buf(struct mrp_pool *pool, struct mrp_arena *a, uintptr_t start)
{
	struct mrp_mw *w, *dead = NULL;
	int n = 0;

	pthread_mutex_lock(&pool->lock);
	while (a->mw_index && (w = *mrp_mw_head(a, start))) {
		mrp_mw_unlink(w);
		w->buf_next = dead;
		dead = w;
	}
	pthread_mutex_unlock(&pool->lock);
	for (w = dead; w; w = dead) {
		dead = w->buf_next;
		mrp_mw_put(w);
		n++;
	}
	return n;
}

MRP_EXPORT int mrp_mw_invalidate(struct mrp_pool *pool, void *addr)
{
	uintptr_t p = (uintptr_t)addr, start;
	struct mrp_arena *a;

	if (!pool || !addr)
		return -EINVAL;
	if (mrp_forked(pool))
		return -ECHILD;
	a = mrp_arena_of(p);
	if (!a || a->pool != pool)
		return -EINVAL;
	start = a->cls == MRP_LARGE ? a->base : mrp_buf_start(a, p);
	if (!start)	/* a fine class's tail */
		return -EINVAL;
	if (!atomic_load(&a->nmw) || !mrp_mw_release_buf(pool, a, start))
		return -ENOENT;
	return 0;
}

/*
 * Pool close (nothing else runs on the pool); a forked child only forgets
 * the parent's windows.
 */
void mrp_mw_release_all(struct mrp_pool *pool, bool forked)
{
	struct mrp_mw *w, *next;

	for (w = pool->mws; w; w = next) {
		next = w->next;
		if (!forked)
			ibv_dealloc_mw(w->mw);
		free(w);
	}
	pool->mws = NULL;
}

/*
 * PD detach: windows of pd go before its MRs. pool->lock held; no bind
 * naming pd runs (the detach must not race with calls naming it), so each
 * reference dropped here is the last.
 */
void mrp_mw_release_pd_locked(struct mrp_pool *pool, struct ibv_pd *pd)
{
	struct mrp_mw *w, *next;

	for (w = pool->mws; w; w = next) {
		next = w->next;
		if (w->mw->pd != pd)
			continue;
		mrp_mw_unlink(w);
		mrp_mw_put(w);
	}
}

/*
 * Type 1 windows, for the preload shim's served registrations with remote
 * access. A type 1 window belongs to its PD, not to a QP: the device takes
 * its rkey on any QP of the PD, so it is bound on a QP of the shim's own,
 * on which no program posts: an RC QP connected to itself (a bind is a
 * local operation and nothing goes on the wire, but a QP posts only in
 * RTS), with a CQ of its own on which only binds complete. One bind at a
 * time (lock): post, then poll until its completion, so that the rkey
 * works once the registration returns. A bind that fails (its post, or
 * its completion) or never completes (10 s: a device gone) breaks the
 * binder for good: the PD's later registrations with remote access are
 * passed on. One that never completed may still be queued: its QP is
 * moved to the error state, and its window is kept (b->stuck), never
 * deallocated while the QP may yet read it, until the binder's QP is
 * destroyed.
 *
 * The windows are bound on an MR of each arena of their own
 * (a->bind_mr[slot], the only one with IBV_ACCESS_MW_BIND, reg.c), whose
 * lkey is never handed out: a provider binds a window on whatever MR has
 * the lkey of bind_info.mr, so a program given that lkey (in any served
 * MR) could bind a window of its own over the whole arena.
 *
 * Invalidation is the window's deallocation, ibv_dealloc_mw() (the
 * caller's): synchronous, without a QP or the lock, and the rkey is dead
 * once it returns. One window per registration rather than a cache of
 * windows rebound each time: an unbind would cost a post and a wait under
 * the lock at every deregistration, and a type 1 rebind changes only the
 * rkey's low 8 bits, so a cached window would give a deregistered MR's
 * rkey to a later registration 256 binds on, where a new window has an
 * index of its own (rxe hands them out cyclically).
 */
struct mrp_binder {
	pthread_mutex_t lock;		/* the bind in flight, broken, stuck */
	struct ibv_cq *cq;		/* the binds' completions only */
	struct ibv_qp *qp;		/* connected to itself, in RTS */
	bool broken;			/* a bind failed: no more binds */
	struct ibv_mw *stuck;		/* of a bind never completed, see above */
	uint64_t wait_ns;		/* for a bind's completion */
};

#define MRP_BINDER_SPINS	1000	/* polls before yielding between them */
#define MRP_BINDER_WAIT_NS	10000000000ull

/*
 * How long a bind's completion is waited for. The test build alone
 * (MRP_TEST_HOOKS) takes MRP_TEST_BIND_WAIT_MS, so that preload_test
 * sees a bind that never completes given up without waiting 10 s.
 */
static uint64_t mrp_binder_wait_ns(void)
{
#ifdef MRP_TEST_HOOKS
	const char *s = getenv("MRP_TEST_BIND_WAIT_MS");

	if (s)
		return strtoull(s, NULL, 10) * 1000000ull;
#endif
	return MRP_BINDER_WAIT_NS;
}

/*
 * Where the QP sends: its own port, by LID, or on RoCE by a GID of the
 * port (RoCE v2 if it has one, else the first).
 */
static int mrp_binder_self_ah(struct ibv_context *ctx, uint8_t port,
			      const struct ibv_port_attr *pa, struct ibv_ah_attr *ah)
{
	struct ibv_gid_entry ge;
	int idx = -1;

	memset(ah, 0, sizeof(*ah));
	ah->port_num = port;
	if (pa->link_layer != IBV_LINK_LAYER_ETHERNET) {
		ah->dlid = pa->lid;
		return 0;
	}
	for (int i = 0; i < pa->gid_tbl_len; i++) {
		if (ibv_query_gid_ex(ctx, port, (uint32_t)i, &ge, 0))
			continue;
		if (idx < 0 || ge.gid_type == IBV_GID_TYPE_ROCE_V2) {
			idx = i;
			ah->grh.dgid = ge.gid;
		}
		if (ge.gid_type == IBV_GID_TYPE_ROCE_V2)
			break;
	}
	if (idx < 0)
		return -ENOENT;
	ah->is_global = 1;
	ah->grh.sgid_index = (uint8_t)idx;
	ah->grh.hop_limit = 1;
	return 0;
}

/* RESET -> INIT -> RTR -> RTS, towards the QP itself. */
static int mrp_binder_connect(struct ibv_qp *qp, uint8_t port, const struct ibv_ah_attr *ah)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = port,
	};
	int ret;

	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			    IBV_QP_ACCESS_FLAGS);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr = *ah;
	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			    IBV_QP_MIN_RNR_TIMER);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

/*
 * A binder for pd, or NULL: its device has no type 1 windows
 * (IBV_DEVICE_MEM_WINDOW), no active port, or the QP cannot be made.
 */
struct mrp_binder *mrp_binder_create(struct ibv_pd *pd)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_RC,
		.cap = {
			.max_send_wr = 1,
			.max_recv_wr = 1,
			.max_send_sge = 1,
			.max_recv_sge = 1,
		},
	};
	struct ibv_context *ctx = pd->context;
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	struct ibv_ah_attr ah;
	struct mrp_binder *b;
	uint8_t port = 0;

	if (ibv_query_device(ctx, &da) || !(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW))
		return NULL;
	for (uint8_t p = 1; p <= da.phys_port_cnt && !port; p++)
		if (!ibv_query_port(ctx, p, &pa) && pa.state == IBV_PORT_ACTIVE)
			port = p;
	if (!port || mrp_binder_self_ah(ctx, port, &pa, &ah))
		return NULL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	pthread_mutex_init(&b->lock, NULL);
	b->wait_ns = mrp_binder_wait_ns();
	b->cq = ibv_create_cq(ctx, 2, NULL, NULL, 0);
	if (!b->cq)
		goto destroy;
	init.send_cq = b->cq;
	init.recv_cq = b->cq;
	b->qp = ibv_create_qp(pd, &init);
	if (!b->qp || mrp_binder_connect(b->qp, port, &ah))
		goto destroy;
	return b;

destroy:
	mrp_binder_destroy(b, false);
	return NULL;
}

/*
 * No bind runs, and no window bound through it is left to bind again. A
 * forked child's binder is its parent's: the QP and CQ, reached through
 * the inherited device file, are the parent's objects, which a destroy
 * here would take from it; the child only forgets (nor does it touch the
 * lock, which a parent's thread may have held at the fork).
 */
void mrp_binder_destroy(struct mrp_binder *b, bool forked)
{
	if (!b)
		return;
	if (forked) {
		free(b);
		return;
	}
	/* the QP gone, no stuck bind can read its window any more */
	if (b->qp && !ibv_destroy_qp(b->qp) && b->stuck)
		ibv_dealloc_mw(b->stuck);
	if (b->cq)
		ibv_destroy_cq(b->cq);
	pthread_mutex_destroy(&b->lock);
	free(b);
}

/* The completion of the bind just posted: 0, -EIO or -ETIMEDOUT. b->lock held. */
static int mrp_binder_wait(struct mrp_binder *b)
{
	uint64_t end = 0;
	struct ibv_wc wc;

	for (unsigned int i = 0;; i++) {
		int n = ibv_poll_cq(b->cq, 1, &wc);

		if (n)
			return n == 1 && wc.status == IBV_WC_SUCCESS ? 0 : -EIO;
		if (i < MRP_BINDER_SPINS)
			continue;
		if (!end)
			end = mrp_now_ns() + b->wait_ns;
		else if (mrp_now_ns() > end)
			return -ETIMEDOUT;
		sched_yield();
	}
}

/*
 * A bind posted on b never completed (b->lock held): the QP goes to the
 * error state, which flushes it where the device still works, and the
 * window stays b's until the QP is destroyed (mrp_binder_destroy()).
 */
static void mrp_binder_stuck(struct mrp_binder *b, struct ibv_mw *mw)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	ibv_modify_qp(b->qp, &a, IBV_QP_STATE);
	b->stuck = mw;
}

/*
 * A new type 1 window over exactly [addr, addr + len) of arena a's bind
 * MR in the PD of slot (b's PD), with access (remote rights), bound once
 * this returns 0: *mwp, whose rkey is the window's. The caller checked
 * that the range is inside one buffer of a, and holds a. -errno
 * otherwise, the binder broken if the bind was tried and failed.
 */
int mrp_binder_bind(struct mrp_binder *b, struct mrp_arena *a, int slot, void *addr,
		    size_t len, unsigned int access, struct ibv_mw **mwp)
{
	struct ibv_mw_bind bind = { .send_flags = IBV_SEND_SIGNALED };
	struct ibv_mw *mw;
	int ret, cancel;

	ret = mrp_mw_arena_mr(a->pool, a, slot);
	if (ret)
		return ret;
	if (!a->bind_mr[slot])
		return -EINVAL;	/* the PD was attached without bind MRs */
	bind.bind_info = mrp_mw_info(a->bind_mr[slot], (uintptr_t)addr, len, access);
	errno = 0;
	mw = ibv_alloc_mw(b->qp->pd, IBV_MW_TYPE_1);
	if (!mw)
		return errno ? -errno : -ENOMEM;
	/* the post may write() to the device: a cancellation point */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	pthread_mutex_lock(&b->lock);
	if (b->broken) {
		ret = -EIO;
	} else {
		ret = ibv_bind_mw(b->qp, mw, &bind);	/* nothing posted if it fails */
		if (ret)
			ret = ret > 0 ? -ret : -EIO;
		else
			ret = mrp_binder_wait(b);
		if (ret == -ETIMEDOUT) {
			mrp_binder_stuck(b, mw);
			mw = NULL;
		}
		b->broken = ret != 0;
	}
	pthread_mutex_unlock(&b->lock);
	pthread_setcancelstate(cancel, NULL);
	if (ret) {
		if (mw)
			ibv_dealloc_mw(mw);
		return ret;
	}
	*mwp = mw;
	return 0;
}
