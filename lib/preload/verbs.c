// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Registrations. One of a range inside one pool buffer, in the pool's
 * address space (iova = addr), whose access is exactly what the arena's
 * registration in that PD grants is served: the PD is attached to the
 * pool on first use (every arena registered in it once, as any libmrpool
 * PD), and the caller gets an ibv_mr of the shim's own with its range and
 * the arena's lkey and rkey.
 * Nothing is pinned; dereg frees the struct. Anything else goes to
 * libibverbs: ranges across buffers or arenas, memory not from the pool,
 * access without IBV_ACCESS_LOCAL_WRITE (the arena's lkey would let the
 * device write where the program said it may not), other flags
 * (on-demand paging, memory windows, zero-based), and by
 * default any remote access: an arena's rkey reaches the whole arena (every
 * pool buffer of the process in it), so a peer would reach more than the
 * range registered. MRPOOL_PRELOAD_REMOTE=arena serves those too: the PD's
 * arenas are registered with the remote rights of the first registration
 * with remote access in it (local ones before it are passed on), and only
 * registrations asking for exactly those, or for local write alone, are
 * served (a peer never gets a right the program did not ask for); a served
 * MR without remote access has rkey 0. A PD whose attach failed is passed
 * on from then on, without retrying.
 *
 * ibv_dereg_mr() of a served MR deregistered already is EINVAL (the slot
 * is not put on the free list twice).
 *
 * Served MRs live in a region of the shim's (one mapping, slots on a free
 * list), so ibv_dereg_mr() and ibv_rereg_mr() know them by address;
 * ibv_rereg_mr() of one fails as on a device without rereg. PDs
 * with served MRs are counted: ibv_dealloc_pd() refuses one with EBUSY as
 * libibverbs would for real MRs, and detaches the PD from the pool first
 * otherwise (the arenas' MRs in it would make the real call fail with
 * EBUSY); ibv_close_device() detaches the PDs of that context.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include <infiniband/verbs.h>

#include "preload.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#define MRP_PL_EXPORT	__attribute__((visibility("default")))
#define MRP_PL_MAX_MRS	(1u << 16)	/* served MRs alive at once; more: real ones */
#define MRP_PL_LOCAL	IBV_ACCESS_LOCAL_WRITE
#define MRP_PL_REMOTE_ALL	(IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | \
				 IBV_ACCESS_REMOTE_ATOMIC)

/* A PD the shim attached to its pool. */
struct mrp_pl_pd {
	struct ibv_pd *pd;		/* NULL: free entry */
	struct ibv_context *ctx;	/* its context, for ibv_close_device() */
	unsigned int access;		/* of the arenas' registrations in it */
	uint64_t live;			/* served MRs in it */
	bool failed;			/* the attach failed: never served, not retried */
};

/*
 * Bytes after the verbs_mr part that are never written: a provider's own MR
 * struct begins with a verbs_mr and goes on (mlx5_mr's alloc_flags, efa_mr's
 * interconnect ids, read by direct-verbs calls such as efadv_query_mr() on
 * whatever ibv_mr they are given); on a served MR they read as 0 (nothing
 * set), not as the shim's pointers.
 */
#define MRP_PL_PROVIDER_PAD	64

/*
 * A served MR: the program holds &mr. It begins as rdma-core's struct
 * verbs_mr does (ibv_mr, then the MR type and the access flags), which
 * libibverbs and providers reach with container_of from an ibv_mr.
 */
struct mrp_pl_mr {
	struct ibv_mr mr;
	int mr_type;			/* verbs_mr's: IBV_MR_TYPE_MR (0) */
	int access;			/* verbs_mr's: as registered */
	unsigned char provider[MRP_PL_PROVIDER_PAD];	/* zero, see above */
	struct mrp_pl_pd *pd;		/* NULL once its PD's device was closed */
	uint32_t next;			/* free list */
	bool live;			/* handed out, not yet deregistered */
};

/*
 * All under mrp_pl_lock, held across fork (prepare/parent/child). Lock
 * order: mrp_pl_lock, then the library's pool->lock (attach, detach).
 */
static pthread_mutex_t mrp_pl_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mrp_pl_pd mrp_pl_pds[MRP_MAX_PDS];
static struct mrp_pl_mr *mrp_pl_mrs;		/* the region, mapped on first use */
static uint32_t mrp_pl_mr_used;			/* slots ever handed out */
static uint32_t mrp_pl_mr_free = UINT32_MAX;	/* free list head */

/*
 * libibverbs' functions, found once by the constructor (mrp_pl_verbs_resolve):
 * never looked up later, when the caller may hold a lock (the library
 * registers arenas under pool->lock, through the shim's ibv_reg_mr) that a
 * thread in dlopen(), holding the dynamic linker's lock dlsym() needs,
 * may be waiting for. Written before any other thread can exist here,
 * then read-only; NULL if this libibverbs lacks one (ENOSYS then).
 */
static struct {
	struct ibv_mr *(*reg_mr)(struct ibv_pd *, void *, size_t, int);
	struct ibv_mr *(*reg_mr_iova)(struct ibv_pd *, void *, size_t, uint64_t, int);
	struct ibv_mr *(*reg_mr_iova2)(struct ibv_pd *, void *, size_t, uint64_t,
				       unsigned int);
	int (*dereg_mr)(struct ibv_mr *);
	int (*rereg_mr)(struct ibv_mr *, int, struct ibv_pd *, void *, size_t, int);
	int (*dealloc_pd)(struct ibv_pd *);
	int (*close_device)(struct ibv_context *);
} mrp_pl_verbs;

void mrp_pl_verbs_resolve(void)
{
	*(void **)&mrp_pl_verbs.reg_mr = mrp_pl_verbs_sym("ibv_reg_mr");
	*(void **)&mrp_pl_verbs.reg_mr_iova = mrp_pl_verbs_sym("ibv_reg_mr_iova");
	*(void **)&mrp_pl_verbs.reg_mr_iova2 = mrp_pl_verbs_sym("ibv_reg_mr_iova2");
	*(void **)&mrp_pl_verbs.dereg_mr = mrp_pl_verbs_sym("ibv_dereg_mr");
	*(void **)&mrp_pl_verbs.rereg_mr = mrp_pl_verbs_sym("ibv_rereg_mr");
	*(void **)&mrp_pl_verbs.dealloc_pd = mrp_pl_verbs_sym("ibv_dealloc_pd");
	*(void **)&mrp_pl_verbs.close_device = mrp_pl_verbs_sym("ibv_close_device");
}

/* A missing libibverbs function fails as ENOSYS, with ret. */
#define MRP_PL_REAL(fn, ret, ...) \
	(mrp_pl_verbs.fn ? mrp_pl_verbs.fn(__VA_ARGS__) : (errno = ENOSYS, (ret)))

void mrp_pl_verbs_fork_prepare(void)
{
	pthread_mutex_lock(&mrp_pl_lock);
}

void mrp_pl_verbs_fork_parent(void)
{
	pthread_mutex_unlock(&mrp_pl_lock);
}

void mrp_pl_verbs_fork_child(void)
{
	pthread_mutex_unlock(&mrp_pl_lock);
}

/* Is mr in the region (a served MR's address, live or not)? */
static bool mrp_pl_served_mr(const struct ibv_mr *mr)
{
	const struct mrp_pl_mr *m = (const struct mrp_pl_mr *)mr;

	return mrp_pl_mrs && m >= mrp_pl_mrs && m < mrp_pl_mrs + MRP_PL_MAX_MRS;
}

/* A served MR the program holds: a slot's start, handed out. mrp_pl_lock held. */
static bool mrp_pl_mr_live(const struct ibv_mr *mr)
{
	uintptr_t off = (uintptr_t)mr - (uintptr_t)mrp_pl_mrs;

	return !(off % sizeof(struct mrp_pl_mr)) &&
	       off / sizeof(struct mrp_pl_mr) < mrp_pl_mr_used &&
	       ((const struct mrp_pl_mr *)mr)->live;
}

/* mrp_pl_lock held. */
static struct mrp_pl_mr *mrp_pl_mr_get(void)
{
	struct mrp_pl_mr *m;

	if (!mrp_pl_mrs) {
		m = mmap(NULL, MRP_PL_MAX_MRS * sizeof(*m), PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (m == MAP_FAILED)
			return NULL;
		mrp_pl_mrs = m;
	}
	if (mrp_pl_mr_free != UINT32_MAX) {
		m = &mrp_pl_mrs[mrp_pl_mr_free];
		mrp_pl_mr_free = m->next;
	} else if (mrp_pl_mr_used < MRP_PL_MAX_MRS) {
		m = &mrp_pl_mrs[mrp_pl_mr_used++];
	} else {
		return NULL;
	}
	m->live = true;
	return m;
}

static void mrp_pl_mr_put(struct mrp_pl_mr *m)
{
	memset(&m->mr, 0, sizeof(m->mr));
	m->pd = NULL;
	m->live = false;
	m->next = mrp_pl_mr_free;
	mrp_pl_mr_free = (uint32_t)(m - mrp_pl_mrs);
}

static struct mrp_pl_pd *mrp_pl_pd_find(struct ibv_pd *pd)
{
	for (int i = 0; i < MRP_MAX_PDS; i++)
		if (mrp_pl_pds[i].pd == pd)
			return &mrp_pl_pds[i];
	return NULL;
}

/*
 * pd's entry, attaching pd to the pool on first use with the arenas'
 * access: local write, plus, with MRPOOL_PRELOAD_REMOTE=arena, exactly the
 * remote rights of this first registration (remote), so that no served
 * MR's rkey grants more than was asked for; registrations in pd asking for
 * other remote rights are passed on. A failed attach is remembered (entry
 * marked failed) and not retried: every later registration in pd is passed
 * on without another try, until pd is deallocated. NULL when the table is
 * full. mrp_pl_lock held.
 */
static struct mrp_pl_pd *mrp_pl_pd_attach(struct mrp_pool *pool, struct ibv_pd *pd,
					  unsigned int remote)
{
	struct mrp_pl_pd *e = mrp_pl_pd_find(pd);
	unsigned int access = MRP_PL_LOCAL | remote;
	int ret;

	if (e)
		return e;
	e = mrp_pl_pd_find(NULL);
	if (!e)
		return NULL;
	mrp_pl_enter();
	ret = mrp_attach_pd(pool, pd, access);
	mrp_pl_leave();
	e->pd = pd;
	e->ctx = pd->context;
	e->access = access;
	e->live = 0;
	e->failed = ret != 0;
	return e;
}

/* mrp_pl_lock held. */
static void mrp_pl_pd_detach(struct mrp_pl_pd *e)
{
	struct mrp_pool *pool = mrp_pl_pool();

	if (pool && !e->failed) {
		mrp_pl_enter();
		mrp_detach_pd(pool, e->pd);
		mrp_pl_leave();
	}
	memset(e, 0, sizeof(*e));
}

/*
 * The keys for [addr, addr + len) in pd if the pool can serve it (see the
 * top of the file), with pd attached and its entry in *out; false if not.
 * mrp_pl_lock held.
 */
static bool mrp_pl_servable(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
			    unsigned int access, struct mrp_pl_pd **out,
			    struct mrp_buf *keys)
{
	struct mrp_arena *a = mrp_pl_arena(addr);
	struct mrp_pool *pool;
	unsigned int remote;
	struct mrp_pl_pd *e;
	int ret;

	access &= ~(unsigned int)IBV_ACCESS_OPTIONAL_RANGE;
	remote = access & MRP_PL_REMOTE_ALL;
	if (!a || !pd || !len || iova != (uintptr_t)addr ||
	    len > mrp_pl_buf_left(a, addr))
		return false;
	if (remote && mrp_pl_cfg.remote != MRP_PL_REMOTE_ARENA)
		return false;
	pool = mrp_pl_pool();
	if (!pool || a->pool != pool)
		return false;
	/* with arena keys for remote access, the first remote registration attaches */
	if (!remote && mrp_pl_cfg.remote == MRP_PL_REMOTE_ARENA && !mrp_pl_pd_find(pd))
		return false;
	e = mrp_pl_pd_attach(pool, pd, remote);
	/*
	 * Exactly the rights asked for: local write alone (the lkey, no
	 * rkey), or all of the arena's (the rkey too). Without local write
	 * the arena's lkey would let the device write where the program said
	 * it may not; other flags (ODP, MW binding, zero-based) are never in
	 * e->access; with fewer remote rights than the arena's, its rkey would
	 * grant more than was asked for.
	 */
	if (!e || e->failed || (access != MRP_PL_LOCAL && access != e->access))
		return false;
	/* the arena's keys in pd, registering it there now if it lacks them */
	mrp_pl_enter();
	ret = mrp_lookup(pool, addr, pd, keys);
	mrp_pl_leave();
	if (ret)
		return false;
	*out = e;
	return true;
}

/* A served MR, or NULL: the caller registers for real. */
static struct ibv_mr *mrp_pl_serve(struct ibv_pd *pd, void *addr, size_t len,
				   uint64_t iova, unsigned int access)
{
	struct mrp_pl_pd *e;
	struct mrp_pl_mr *m = NULL;
	struct mrp_buf keys;

	if (mrp_pl_internal() || !mrp_pl_arena(addr))
		return NULL;
	pthread_mutex_lock(&mrp_pl_lock);
	if (mrp_pl_servable(pd, addr, len, iova, access, &e, &keys))
		m = mrp_pl_mr_get();
	if (m) {
		m->mr.context = pd->context;
		m->mr.pd = pd;
		m->mr.addr = addr;
		m->mr.length = len;
		m->mr.handle = UINT32_MAX;	/* no kernel object behind it */
		m->mr_type = 0;
		m->access = (int)access;
		m->mr.lkey = keys.lkey;
		/* no remote access asked for: no rkey, whatever the arena's */
		m->mr.rkey = access & MRP_PL_REMOTE_ALL ? keys.rkey : 0;
		m->pd = e;
		e->live++;
	}
	pthread_mutex_unlock(&mrp_pl_lock);
	return m ? &m->mr : NULL;
}

/*
 * Calls from the program count; the library's own do not, nor those
 * libibverbs makes inside a call passed on to it (its ibv_reg_mr calls
 * ibv_reg_mr_iova2, which reaches the shim again: the pass-throughs run
 * between mrp_pl_enter() and mrp_pl_leave()).
 */
static void mrp_pl_note(bool served)
{
	if (!mrp_pl_internal())
		mrp_pl_count_reg(served);
}

MRP_PL_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
					int access)
{
	struct ibv_mr *mr = mrp_pl_serve(pd, addr, length, (uintptr_t)addr,
					 (unsigned int)access);

	mrp_pl_note(mr != NULL);
	if (mr)
		return mr;
	mrp_pl_enter();
	mr = MRP_PL_REAL(reg_mr, NULL, pd, addr, length, access);
	mrp_pl_leave();
	return mr;
}

MRP_PL_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
					     uint64_t iova, int access)
{
	struct ibv_mr *mr = mrp_pl_serve(pd, addr, length, iova, (unsigned int)access);

	mrp_pl_note(mr != NULL);
	if (mr)
		return mr;
	mrp_pl_enter();
	mr = MRP_PL_REAL(reg_mr_iova, NULL, pd, addr, length, iova, access);
	mrp_pl_leave();
	return mr;
}

MRP_PL_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
					      uint64_t iova, unsigned int access)
{
	struct ibv_mr *mr = mrp_pl_serve(pd, addr, length, iova, access);

	mrp_pl_note(mr != NULL);
	if (mr)
		return mr;
	mrp_pl_enter();
	mr = MRP_PL_REAL(reg_mr_iova2, NULL, pd, addr, length, iova, access);
	mrp_pl_leave();
	return mr;
}

MRP_PL_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct mrp_pl_mr *m = (struct mrp_pl_mr *)mr;

	if (!mrp_pl_served_mr(mr))
		return MRP_PL_REAL(dereg_mr, ENOSYS, mr);
	pthread_mutex_lock(&mrp_pl_lock);
	/* deregistered already (or not a slot): the free list must not see it twice */
	if (!mrp_pl_mr_live(mr)) {
		pthread_mutex_unlock(&mrp_pl_lock);
		return EINVAL;
	}
	if (m->pd)
		m->pd->live--;
	mrp_pl_mr_put(m);
	pthread_mutex_unlock(&mrp_pl_lock);
	return 0;
}

/*
 * A served MR's struct cannot become a real MR's, nor should the shim
 * invent a rereg the device may not have: the call fails as on a device
 * without rereg (IBV_REREG_MR_ERR_INPUT, errno EOPNOTSUPP, the MR
 * unchanged); a program then registers anew. Real MRs: libibverbs'.
 */
MRP_PL_EXPORT int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd,
			       void *addr, size_t length, int access)
{
	if (!mrp_pl_served_mr(mr))
		return MRP_PL_REAL(rereg_mr, IBV_REREG_MR_ERR_INPUT, mr, flags, pd,
					   addr, length, access);
	errno = EOPNOTSUPP;
	return IBV_REREG_MR_ERR_INPUT;
}

MRP_PL_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct mrp_pl_pd *e;

	pthread_mutex_lock(&mrp_pl_lock);
	e = pd ? mrp_pl_pd_find(pd) : NULL;
	if (e && e->live) {
		pthread_mutex_unlock(&mrp_pl_lock);
		return EBUSY;
	}
	if (e)
		mrp_pl_pd_detach(e);
	pthread_mutex_unlock(&mrp_pl_lock);
	return MRP_PL_REAL(dealloc_pd, ENOSYS, pd);
}

MRP_PL_EXPORT int ibv_close_device(struct ibv_context *ctx)
{
	pthread_mutex_lock(&mrp_pl_lock);
	for (int i = 0; ctx && i < MRP_MAX_PDS; i++) {
		struct mrp_pl_pd *e = &mrp_pl_pds[i];

		if (!e->pd || e->ctx != ctx)
			continue;
		/* served MRs left in it are the program's leak: orphan them */
		for (uint32_t s = 0; e->live && s < mrp_pl_mr_used; s++)
			if (mrp_pl_mrs[s].pd == e)
				mrp_pl_mrs[s].pd = NULL;
		mrp_pl_pd_detach(e);
	}
	pthread_mutex_unlock(&mrp_pl_lock);
	return MRP_PL_REAL(close_device, ENOSYS, ctx);
}
