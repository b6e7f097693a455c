// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Registrations. One of a range inside one pool buffer, in the pool's
 * address space (iova = addr), asking for local write alone is served:
 * the PD is attached to the pool on first use (every arena registered in
 * it once, as any libmrpool PD, for local write: the arenas' rkeys grant
 * a peer nothing), and the caller gets an ibv_mr of the shim's own with
 * its range, the arena's lkey and rkey 0. Nothing is pinned; dereg gives
 * the struct back. Anything else goes to libibverbs: ranges across
 * buffers or arenas, memory not from the pool, access without
 * IBV_ACCESS_LOCAL_WRITE (the arena's lkey would let the device write
 * where the program said it may not), other flags (on-demand paging,
 * memory windows, zero-based), and by default any remote access: an
 * arena's rkey would reach the whole arena (every pool buffer of the
 * process in it), and would outlive the MR.
 *
 * MRPOOL_PRELOAD_REMOTE=arena serves registrations of local write and
 * remote rights too, each with a type 1 memory window of its own bound
 * over exactly its range with exactly those rights on the arena in the
 * PD (mw.c, struct mrp_binder: bound on a private RC QP of the PD,
 * connected to itself, made when the PD is attached, whose arenas then
 * get a second MR each with IBV_ACCESS_MW_BIND, the bind MR, whose lkey
 * is never handed out, so that no program binds a window of its own over
 * the arena through a served MR): the MR carries the lkey of the
 * arena's local-write MR and the window's rkey, and ibv_dereg_mr()
 * deallocates the window, so the rkey is dead once it returns, as a real
 * MR's (a late or replayed RDMA WRITE gets a remote access error, never
 * the bytes the program put there since). Such MRs live in a region of
 * their own (struct mrp_pl_wmr), so that the served local pair below is
 * not one instruction longer for them: their dereg is the slow path's. A
 * device without type 1 windows (IBV_DEVICE_MEM_WINDOW), a PD whose QP
 * could not be made, or whose binds failed once (a post, a completion, or
 * none within 10 s): remote registrations are passed on, never served
 * with the arena's rkey. A forked child's ibv_dealloc_pd() and
 * ibv_close_device() make no verbs call on the parent's binder. A window reaches only its range
 * where the device enforces window bounds; rxe checks the MR's range
 * (mrpool-run(1)). A PD whose attach failed is passed on from then on,
 * without retrying.
 *
 * A served MR holds its arena (mrp_arena_hold()): trim leaves the arena
 * mapped and registered until the MR is deregistered, even once the
 * buffer under it was freed (mrpool-run(1), Lifetime).
 *
 * The served pair takes no lock (tools/bench/served.sh counts it): the PD
 * is found in a table read without one (an entry is published by a release
 * store of its PD), the keys are read from the arena as the library's
 * allocation fast path reads them, the MR's struct comes from the thread's
 * own list of free slots, and the counters are the thread's, summed when
 * they are shown. ibv_dereg_mr() takes the slot's arena pointer with one
 * atomic exchange: of two deregistrations of one MR, even from two threads
 * at once, exactly one gets it and the other EINVAL (the slot is not put on
 * a free list twice).
 *
 * Served MRs live in a region of the shim's (one mapping of fixed-size
 * slots), so ibv_dereg_mr() and ibv_rereg_mr() know them by address;
 * ibv_rereg_mr() of one fails as on a device without rereg.
 * ibv_dealloc_pd() refuses a PD with served MRs live with EBUSY, as
 * libibverbs would for real MRs, and detaches the PD from the pool first
 * otherwise (the arenas' MRs in it would make the real call fail with
 * EBUSY), and its binder's QP goes; ibv_close_device() detaches the PDs
 * of that context, deallocating the windows of served MRs left in them.
 *
 * A registration passed on, ibv_get_device_list() finding a device and
 * ibv_open_device() wake a dormant shim (shim.c, mrp_pl_activate()): no
 * served registration can come first, as nothing is the pool's before.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <infiniband/verbs.h>

#include "preload.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#define MRP_PL_EXPORT	__attribute__((visibility("default")))
#define MRP_PL_MAX_MRS	(1u << 16)	/* served MRs alive at once; more: real ones */
#define MRP_PL_MAX_WMRS	(1u << 14)	/* those with a window; more: real ones */
#define MRP_PL_LOCAL	IBV_ACCESS_LOCAL_WRITE
#define MRP_PL_REMOTE_ALL	(IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | \
				 IBV_ACCESS_REMOTE_ATOMIC)
/* Free slots a thread keeps; past that it gives back a batch. */
#define MRP_PL_THR_MAX		64
#define MRP_PL_THR_BATCH	32

/*
 * A PD the shim attached to its pool. Written under mrp_pl_lock, pd last
 * with release; read without it by the served path, which finds the entry
 * by pd with acquire (then the rest is as written before).
 */
struct mrp_pl_pd {
	struct ibv_pd *_Atomic pd;	/* NULL: free entry */
	struct ibv_context *ctx;	/* its context, for ibv_close_device() */
	int slot;			/* its slot in the pool (keys[slot]), -1: the
					 * attach failed: never served, not retried */
	struct mrp_binder *binder;	/* type 1 windows (MRPOOL_PRELOAD_REMOTE=arena),
					 * NULL: remote access passed on */
	struct mrp_pool *pool;		/* attached to (mrp_forked(): a child's copy) */
};

/*
 * Bytes after the verbs_mr part that are never written while the MR is
 * the program's: a provider's own MR struct begins with a verbs_mr and
 * goes on (mlx5_mr's alloc_flags, efa_mr's interconnect ids, read by
 * direct-verbs calls such as efadv_query_mr() on whatever ibv_mr they are
 * given); on a served MR they read as 0 (nothing set), not as the shim's
 * pointers. While the slot is free its first word links the free list.
 */
#define MRP_PL_PROVIDER_PAD	64

/*
 * A served MR: the program holds &mr. It begins as rdma-core's struct
 * verbs_mr does (ibv_mr, then the MR type and the access flags), which
 * libibverbs and providers reach with container_of from an ibv_mr. 128
 * bytes: a slot's index is a shift.
 */
struct mrp_pl_mr {
	struct ibv_mr mr;
	int mr_type;			/* verbs_mr's: IBV_MR_TYPE_MR (0) */
	int access;			/* verbs_mr's: as registered */
	union {
		unsigned char provider[MRP_PL_PROVIDER_PAD];	/* zero, see above */
		struct mrp_pl_mr *next;	/* free: the next free slot */
	};
	/*
	 * The arena the MR holds while the program has it, NULL while the
	 * slot is free: ibv_dereg_mr() exchanges it for NULL.
	 */
	struct mrp_arena *_Atomic arena;
};
_Static_assert(sizeof(struct mrp_pl_mr) == 128, "a slot's index is a shift");

/*
 * A served MR with remote access: its rkey is its window's. A region of
 * their own, so that ibv_dereg_mr()'s served path, which knows the other
 * region by address, is not one instruction longer for them: their
 * deregistration is the slow path's, which deallocates the window.
 */
struct mrp_pl_wmr {
	struct mrp_pl_mr m;		/* as a served MR's; m.next links the free ones */
	/*
	 * Its window; MRP_PL_MW_GONE once ibv_close_device() deallocated it
	 * (the MR still the program's); NULL while a deregistration, which
	 * took it by exchange, deallocates it, and while the slot is free.
	 */
	struct ibv_mw *_Atomic mw;
};
#define MRP_PL_MW_GONE	((struct ibv_mw *)1)

/*
 * A thread's state: its free slots and counters. Blocks are never freed:
 * one is claimed by a thread at its first registration, given up at its
 * exit with its free slots and counters, and claimed by a later thread
 * as it is. Counters only grow, whoever owns the block (but in a forked
 * child, which starts them at 0): their sum over every block is the
 * process's.
 */
struct mrp_pl_thr {
	struct mrp_pl_mr *free;		/* the owner's free slots */
	uint32_t nfree;
	_Atomic bool owned;
	_Atomic uint64_t served, passed;	/* written by the owner only */
	struct mrp_pl_thr *next;	/* mrp_pl_thrs, never unlinked */
};

/*
 * The thread's block, or the empty one until it claims one: its list has
 * no slot, so the first registration falls into the slow path, which
 * claims (no "initialised?" test on the served path).
 */
static struct mrp_pl_thr mrp_pl_thr_empty;
static __thread struct mrp_pl_thr *mrp_pl_self __attribute__((tls_model("initial-exec"))) =
	&mrp_pl_thr_empty;
static struct mrp_pl_thr *_Atomic mrp_pl_thrs;	/* every block, pushed at the head */
static pthread_key_t mrp_pl_thr_key;		/* its destructor gives the block up */
static bool mrp_pl_thr_key_ok;			/* set with mrp_pl_verbs, below */

/*
 * mrp_pl_lock: the PD table's writers, ibv_dealloc_pd() and
 * ibv_close_device(). Lock order: mrp_pl_lock, then the library's
 * pool->lock (attach, detach, lazy registration). mrp_pl_slot_lock, a
 * leaf: the shared free lists and the regions. Both held across fork
 * (prepare, parent, child). A binder's lock (mw.c), taken around a bind,
 * is a leaf too, never held with these (a child never binds).
 */
static pthread_mutex_t mrp_pl_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t mrp_pl_slot_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mrp_pl_pd mrp_pl_pds[MRP_MAX_PDS];
static struct mrp_pl_mr *_Atomic mrp_pl_mrs;	/* the region, mapped on first use */
static uint32_t mrp_pl_mr_used;			/* slots ever handed out, slot lock */
static struct mrp_pl_mr *mrp_pl_mr_free;	/* shared free list, slot lock */
static struct mrp_pl_wmr *_Atomic mrp_pl_wmrs;	/* with windows: their region */
static uint32_t mrp_pl_wmr_used;		/* slot lock, as above */
static struct mrp_pl_wmr *mrp_pl_wmr_free;	/* slot lock */

/*
 * Registrations passed on by a thread that got no block (out of memory):
 * nothing is served without one.
 */
static _Atomic uint64_t mrp_pl_orphan_passed;

/*
 * libibverbs' functions, found once with the allocator's (real.c), by the
 * process's first allocation or registration call, whichever comes first:
 * a program's libraries' constructors run before the shim's, and may
 * register (or start a thread that does) before anything else. That is
 * before the pool can open: never when the caller may hold a lock (the
 * library registers arenas under pool->lock, through the shim's
 * ibv_reg_mr) that a thread in dlopen(), holding the dynamic linker's lock
 * dlsym() needs, may be waiting for. Written inside that pthread_once,
 * published by mrp_pl_ready()'s release and acquire, then read-only; read
 * only after mrp_pl_setup() (each exported function's slow path calls it
 * before it takes a lock). NULL if this libibverbs lacks one (ENOSYS then).
 *
 * The served pair needs none of it: it serves only inside an arena, which
 * exists once the pool opened, after mrp_pl_setup(); before, it finds no
 * arena and falls into a slow path.
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
	struct ibv_device **(*get_device_list)(int *);
	struct ibv_context *(*open_device)(struct ibv_device *);
} mrp_pl_verbs;

static void mrp_pl_thr_exit(void *arg);

/* From real.c's resolution, with the allocator's functions. */
void mrp_pl_verbs_resolve(void)
{
	*(void **)&mrp_pl_verbs.reg_mr = mrp_pl_verbs_sym("ibv_reg_mr");
	*(void **)&mrp_pl_verbs.reg_mr_iova = mrp_pl_verbs_sym("ibv_reg_mr_iova");
	*(void **)&mrp_pl_verbs.reg_mr_iova2 = mrp_pl_verbs_sym("ibv_reg_mr_iova2");
	*(void **)&mrp_pl_verbs.dereg_mr = mrp_pl_verbs_sym("ibv_dereg_mr");
	*(void **)&mrp_pl_verbs.rereg_mr = mrp_pl_verbs_sym("ibv_rereg_mr");
	*(void **)&mrp_pl_verbs.dealloc_pd = mrp_pl_verbs_sym("ibv_dealloc_pd");
	*(void **)&mrp_pl_verbs.close_device = mrp_pl_verbs_sym("ibv_close_device");
	*(void **)&mrp_pl_verbs.get_device_list = mrp_pl_verbs_sym("ibv_get_device_list");
	*(void **)&mrp_pl_verbs.open_device = mrp_pl_verbs_sym("ibv_open_device");
	/* without the key a thread's block is not given up at its exit */
	mrp_pl_thr_key_ok = !pthread_key_create(&mrp_pl_thr_key, mrp_pl_thr_exit);
}

/* A missing libibverbs function fails as ENOSYS, with ret. */
#define MRP_PL_REAL(fn, ret, ...) \
	(mrp_pl_verbs.fn ? mrp_pl_verbs.fn(__VA_ARGS__) : (errno = ENOSYS, (ret)))

void mrp_pl_verbs_fork_prepare(void)
{
	pthread_mutex_lock(&mrp_pl_lock);
	pthread_mutex_lock(&mrp_pl_slot_lock);
}

void mrp_pl_verbs_fork_parent(void)
{
	pthread_mutex_unlock(&mrp_pl_slot_lock);
	pthread_mutex_unlock(&mrp_pl_lock);
}

/*
 * The child's only thread: the blocks of the parent's other threads have
 * no owner here, a later thread of the child's may claim them (with their
 * free slots, which the child inherited with the region). Every block's
 * counters start again at 0, this thread's too: they are the parent's
 * registrations, which the child's report must not repeat; no other
 * thread writes them here.
 */
void mrp_pl_verbs_fork_child(void)
{
	for (struct mrp_pl_thr *t = atomic_load(&mrp_pl_thrs); t; t = t->next) {
		if (t != mrp_pl_self)
			atomic_store_explicit(&t->owned, false, memory_order_release);
		atomic_store_explicit(&t->served, 0, memory_order_relaxed);
		atomic_store_explicit(&t->passed, 0, memory_order_relaxed);
	}
	atomic_store_explicit(&mrp_pl_orphan_passed, 0, memory_order_relaxed);
	pthread_mutex_unlock(&mrp_pl_slot_lock);
	pthread_mutex_unlock(&mrp_pl_lock);
}

/*
 * A block for this thread: an unowned one, else a new one; NULL without
 * memory (the caller then does without). Off the fast paths.
 */
static MRP_NOINLINE struct mrp_pl_thr *mrp_pl_thr_claim(void)
{
	struct mrp_pl_thr *t, *head;
	uintptr_t outer;

	for (t = atomic_load_explicit(&mrp_pl_thrs, memory_order_acquire); t; t = t->next) {
		bool no = false;

		if (!atomic_load_explicit(&t->owned, memory_order_relaxed) &&
		    atomic_compare_exchange_strong_explicit(&t->owned, &no, true,
							    memory_order_acquire,
							    memory_order_relaxed))
			break;
	}
	if (!t) {
		outer = mrp_pl_enter();		/* the real allocator's, not the pool's */
		t = aligned_alloc(64, 64 * ((sizeof(*t) + 63) / 64));
		mrp_pl_leave(outer);
		if (!t)
			return NULL;
		memset(t, 0, sizeof(*t));
		atomic_init(&t->owned, true);
		head = atomic_load_explicit(&mrp_pl_thrs, memory_order_relaxed);
		do {
			t->next = head;
		} while (!atomic_compare_exchange_weak_explicit(&mrp_pl_thrs, &head, t,
								memory_order_release,
								memory_order_relaxed));
	}
	mrp_pl_self = t;
	/* any non-NULL value runs the destructor at the thread's exit */
	if (mrp_pl_thr_key_ok)
		pthread_setspecific(mrp_pl_thr_key, t);
	return t;
}

/* This thread's block, claimed on first use; NULL without memory. */
static inline struct mrp_pl_thr *mrp_pl_thr_get(void)
{
	struct mrp_pl_thr *t = mrp_pl_self;

	return likely(t != &mrp_pl_thr_empty) ? t : mrp_pl_thr_claim();
}

/*
 * Thread exit: the block, its free slots and counters with it, is left
 * for another thread. A later call in this thread (another key's
 * destructor) claims one again, and the key's destructor runs again.
 */
static void mrp_pl_thr_exit(void *arg)
{
	struct mrp_pl_thr *t = arg;

	mrp_pl_self = &mrp_pl_thr_empty;
	atomic_store_explicit(&t->owned, false, memory_order_release);
}

/* Sum of the counters of every block: what the report and stats show. */
void mrp_pl_verbs_counts(uint64_t *served, uint64_t *passed)
{
	*served = 0;
	*passed = mrp_get(&mrp_pl_orphan_passed);
	for (struct mrp_pl_thr *t = atomic_load_explicit(&mrp_pl_thrs, memory_order_acquire);
	     t; t = t->next) {
		*served += mrp_get(&t->served);
		*passed += mrp_get(&t->passed);
	}
}

/* The pool's stats page shows the sums (mrp_publish() calls this first). */
void mrp_pl_verbs_publish(struct mrp_pool *pool)
{
	uint64_t served, passed;

	mrp_pl_verbs_counts(&served, &passed);
	atomic_store_explicit(&pool->preload_served, served, memory_order_relaxed);
	atomic_store_explicit(&pool->preload_passed, passed, memory_order_relaxed);
}

/*
 * Is mr in the region (a served MR's address, live or not)? Its offset
 * there through *off.
 */
static inline bool mrp_pl_served_mr(const struct ibv_mr *mr, uintptr_t *off)
{
	uintptr_t base = (uintptr_t)atomic_load_explicit(&mrp_pl_mrs, memory_order_acquire);

	*off = (uintptr_t)mr - base;
	return base && *off < MRP_PL_MAX_MRS * sizeof(struct mrp_pl_mr);
}

/* The same for the region of those with windows. */
static bool mrp_pl_window_mr(const struct ibv_mr *mr, uintptr_t *off)
{
	uintptr_t base = (uintptr_t)atomic_load_explicit(&mrp_pl_wmrs, memory_order_acquire);

	*off = (uintptr_t)mr - base;
	return base && *off < MRP_PL_MAX_WMRS * sizeof(struct mrp_pl_wmr);
}

/*
 * A slot for an MR with a window (the region mapped on first use), or
 * NULL when every one is taken. No thread lists: each costs a bind anyway.
 */
static struct mrp_pl_wmr *mrp_pl_wmr_get(void)
{
	struct mrp_pl_wmr *w = NULL, *region;

	pthread_mutex_lock(&mrp_pl_slot_lock);
	region = atomic_load_explicit(&mrp_pl_wmrs, memory_order_relaxed);
	if (!region) {
		region = mmap(NULL, MRP_PL_MAX_WMRS * sizeof(*region), PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (region == MAP_FAILED)
			goto out;
		atomic_store_explicit(&mrp_pl_wmrs, region, memory_order_release);
	}
	if (mrp_pl_wmr_free) {
		w = mrp_pl_wmr_free;
		mrp_pl_wmr_free = (struct mrp_pl_wmr *)w->m.next;
	} else if (mrp_pl_wmr_used < MRP_PL_MAX_WMRS) {
		w = &region[mrp_pl_wmr_used++];
	}
out:
	pthread_mutex_unlock(&mrp_pl_slot_lock);
	return w;
}

static void mrp_pl_wmr_put(struct mrp_pl_wmr *w)
{
	pthread_mutex_lock(&mrp_pl_slot_lock);
	w->m.next = (struct mrp_pl_mr *)mrp_pl_wmr_free;
	mrp_pl_wmr_free = w;
	pthread_mutex_unlock(&mrp_pl_slot_lock);
}

/*
 * Slots for an empty thread list: a batch from the shared list, else new
 * ones from the region (mapped now if it is not yet). One slot, the rest
 * on t's list; NULL when every slot is taken (the caller passes on).
 */
static MRP_NOINLINE struct mrp_pl_mr *mrp_pl_mr_refill(struct mrp_pl_thr *t)
{
	struct mrp_pl_mr *m = NULL, *region;
	uint32_t n = 0;

	pthread_mutex_lock(&mrp_pl_slot_lock);
	region = atomic_load_explicit(&mrp_pl_mrs, memory_order_relaxed);
	if (!region) {
		region = mmap(NULL, MRP_PL_MAX_MRS * sizeof(*region), PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (region == MAP_FAILED)
			goto out;
		atomic_store_explicit(&mrp_pl_mrs, region, memory_order_release);
	}
	while (n <= MRP_PL_THR_BATCH) {
		struct mrp_pl_mr *s;

		if (mrp_pl_mr_free) {
			s = mrp_pl_mr_free;
			mrp_pl_mr_free = s->next;
		} else if (mrp_pl_mr_used < MRP_PL_MAX_MRS) {
			s = &region[mrp_pl_mr_used++];
		} else {
			break;
		}
		if (!m) {
			m = s;
		} else {
			s->next = t->free;
			t->free = s;
			t->nfree++;
		}
		n++;
	}
out:
	pthread_mutex_unlock(&mrp_pl_slot_lock);
	return m;
}

/* t keeps too many free slots (it deregisters what others register): a batch back. */
static MRP_NOINLINE void mrp_pl_mr_flush(struct mrp_pl_thr *t)
{
	pthread_mutex_lock(&mrp_pl_slot_lock);
	for (int i = 0; i < MRP_PL_THR_BATCH && t->free; i++) {
		struct mrp_pl_mr *s = t->free;

		t->free = s->next;
		t->nfree--;
		s->next = mrp_pl_mr_free;
		mrp_pl_mr_free = s;
	}
	pthread_mutex_unlock(&mrp_pl_slot_lock);
}

/*
 * A slot deregistered by a thread without a block yet: onto the block it
 * claims now, or the shared list.
 */
static MRP_NOINLINE void mrp_pl_mr_put_slow(struct mrp_pl_mr *m)
{
	struct mrp_pl_thr *t;

	mrp_pl_setup();		/* the thread key */
	t = mrp_pl_thr_get();
	if (t) {
		m->next = t->free;
		t->free = m;
		t->nfree++;
		return;
	}
	pthread_mutex_lock(&mrp_pl_slot_lock);
	m->next = mrp_pl_mr_free;
	mrp_pl_mr_free = m;
	pthread_mutex_unlock(&mrp_pl_slot_lock);
}

/*
 * A served MR with a window: the window deallocated (the rkey is dead once
 * ibv_dealloc_mw() returns), then as ibv_dereg_mr() below. If that fails
 * the MR stays the program's, as a real one whose dereg failed. In a
 * forked child the window is the parent's, only forgotten here.
 *
 * The window, exchanged for NULL, is the claim: of two deregistrations of
 * one MR exactly one gets it, the other EINVAL. The slot's arena stays
 * until the window is deallocated, so that mrp_pl_pd_busy() counts the MR
 * meanwhile and ibv_dealloc_pd() does not detach the PD under the window
 * (its MRs would then fail to go, and the PD with them, for good).
 * Cancellation is off throughout: ibv_dealloc_mw() writes to the device.
 */
static int mrp_pl_dereg_window(struct mrp_pl_wmr *w)
{
	struct mrp_arena *a;
	struct ibv_mw *mw;
	uintptr_t outer;
	int ret = 0, cancel;

	if (!atomic_load_explicit(&w->m.arena, memory_order_acquire))
		return EINVAL;
	mw = atomic_exchange_explicit(&w->mw, NULL, memory_order_acq_rel);
	if (!mw)
		return EINVAL;
	a = atomic_load_explicit(&w->m.arena, memory_order_relaxed);
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	if (mw != MRP_PL_MW_GONE && !mrp_forked(a->pool)) {
		outer = mrp_pl_enter();
		ret = ibv_dealloc_mw(mw);
		mrp_pl_leave(outer);
	}
	if (ret) {
		atomic_store_explicit(&w->mw, mw, memory_order_release);
	} else {
		atomic_store_explicit(&w->m.arena, NULL, memory_order_release);
		mrp_arena_unhold(a);
		mrp_pl_wmr_put(w);
	}
	pthread_setcancelstate(cancel, NULL);
	return ret;
}

/* Not in the served MRs' region: one with a window, or a real MR. */
static MRP_NOINLINE int mrp_pl_dereg_real(struct ibv_mr *mr)
{
	uintptr_t off;

	mrp_pl_setup();
	if (mrp_pl_window_mr(mr, &off))
		return off % sizeof(struct mrp_pl_wmr) ? EINVAL :
		       mrp_pl_dereg_window((struct mrp_pl_wmr *)mr);
	return MRP_PL_REAL(dereg_mr, ENOSYS, mr);
}

/* pd's entry, or NULL (pd NULL: a free entry). No lock: see mrp_pl_pd. */
static inline struct mrp_pl_pd *mrp_pl_pd_find(const struct ibv_pd *pd)
{
	for (int i = 0; i < MRP_MAX_PDS; i++)
		if (atomic_load_explicit(&mrp_pl_pds[i].pd, memory_order_acquire) == pd)
			return &mrp_pl_pds[i];
	return NULL;
}

/*
 * pd's entry, attaching pd to the pool on first use. The arenas' access
 * is local write, which no rkey reaches; with MRPOOL_PRELOAD_REMOTE=arena,
 * where pd gets a binder (mw.c: its device has type 1 windows and the
 * binder's QP could be made), each arena also gets a bind MR in pd, with
 * local write and memory window binding, for the windows of registrations
 * with remote access; without a binder, or if the device refuses the
 * bind MRs, the arenas are attached without them and registrations with
 * remote access are passed on. A failed attach is remembered (slot -1)
 * and not retried: every later registration in pd is passed on without
 * another try, until pd is deallocated. NULL when the table is full.
 */
static MRP_NOINLINE struct mrp_pl_pd *mrp_pl_pd_attach(struct mrp_pool *pool,
						       struct ibv_pd *pd)
{
	struct mrp_pl_pd *e;
	uintptr_t outer;
	int ret = -1, cancel;

	/* its system calls are cancellation points, and mrp_pl_lock is held */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	pthread_mutex_lock(&mrp_pl_lock);
	e = mrp_pl_pd_find(pd);
	if (e || !(e = mrp_pl_pd_find(NULL)))
		goto out;
	outer = mrp_pl_enter();
	e->binder = NULL;
	if (mrp_pl_cfg.remote == MRP_PL_REMOTE_ARENA)
		e->binder = mrp_binder_create(pd);
	if (e->binder) {
		ret = mrp_attach_pd_bind(pool, pd, MRP_PL_LOCAL,
					 MRP_PL_LOCAL | IBV_ACCESS_MW_BIND);
		if (ret) {
			mrp_binder_destroy(e->binder, false);
			e->binder = NULL;
		}
	}
	if (ret)
		ret = mrp_attach_pd(pool, pd, MRP_PL_LOCAL);
	e->slot = ret ? -1 : mrp_pd_slot(pool, pd);
	e->pool = pool;
	mrp_pl_leave(outer);
	e->ctx = pd->context;
	atomic_store_explicit(&e->pd, pd, memory_order_release);
out:
	pthread_mutex_unlock(&mrp_pl_lock);
	pthread_setcancelstate(cancel, NULL);
	return e;
}

/*
 * mrp_pl_lock held: the entry is free again, the PD detached from the pool,
 * its binder gone (no window of it is left: see the callers). In a forked
 * child the PD's objects are the parent's, reached through the inherited
 * device file: no verbs call (the library's detach refuses, -ECHILD), the
 * binder's struct alone is freed.
 */
static void mrp_pl_pd_detach(struct mrp_pl_pd *e)
{
	struct mrp_pool *pool = mrp_pl_pool();	/* NULL in a forked child */
	uintptr_t outer;

	outer = mrp_pl_enter();
	/* first: a window of a bind that never completed goes with its QP */
	mrp_binder_destroy(e->binder, mrp_forked(e->pool));
	e->binder = NULL;
	if (pool && e->slot >= 0)
		mrp_detach_pd(pool, atomic_load_explicit(&e->pd, memory_order_relaxed));
	mrp_pl_leave(outer);
	atomic_store_explicit(&e->pd, NULL, memory_order_release);
}

/*
 * The arena lacks keys in the PD's slot (registered lazily, or the PD is
 * dead): the library's lookup registers it there now, or fails.
 */
static MRP_NOINLINE int mrp_pl_keys_slow(struct mrp_pool *pool, struct ibv_pd *pd,
					 void *addr, struct mrp_key *k)
{
	struct mrp_buf b;
	uintptr_t outer;
	int ret;

	outer = mrp_pl_enter();
	ret = mrp_lookup(pool, addr, pd, &b);
	mrp_pl_leave(outer);
	if (ret)
		return ret;
	k->lkey = b.lkey;
	k->rkey = b.rkey;
	return 0;
}

/* A served MR's fields (m not yet live). */
static inline __attribute__((always_inline))
void mrp_pl_mr_fill(struct mrp_pl_mr *m, struct ibv_pd *pd, void *addr, size_t len,
		    uint32_t lkey, uint32_t rkey, unsigned int access)
{
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = len;
	m->mr.handle = UINT32_MAX;	/* no kernel object behind it */
	m->mr.lkey = lkey;
	m->mr.rkey = rkey;
	m->mr_type = 0;
	m->access = (int)access;
	m->next = NULL;			/* the provider bytes all zero again */
}

/* mrp_pl_serve_window()'s work, cancellation disabled. */
static struct ibv_mr *mrp_pl_serve_window_nocancel(struct ibv_pd *pd, struct mrp_arena *a,
						   void *addr, size_t len, unsigned int access)
{
	unsigned int remote = access & MRP_PL_REMOTE_ALL;
	struct mrp_pool *pool = a->pool;
	struct mrp_pl_thr *t;
	struct mrp_pl_wmr *w;
	struct mrp_pl_pd *e;
	struct ibv_mw *mw;
	struct mrp_key k;
	uintptr_t outer;
	int ret;

	e = mrp_pl_pd_find(pd);
	if (!e && !(e = mrp_pl_pd_attach(pool, pd)))
		return NULL;
	if (e->slot < 0 || !e->binder)
		return NULL;
	if (mrp_arena_has(a, e->slot))
		k = a->keys[e->slot];
	else if (mrp_pl_keys_slow(pool, pd, addr, &k))
		return NULL;
	t = mrp_pl_thr_get();
	if (!t || !mrp_arena_hold(a))
		return NULL;
	w = mrp_pl_wmr_get();
	if (!w)
		goto unhold;
	outer = mrp_pl_enter();
	ret = mrp_binder_bind(e->binder, a, e->slot, addr, len, remote, &mw);
	mrp_pl_leave(outer);
	if (ret)
		goto put;
	mrp_pl_mr_fill(&w->m, pd, addr, len, k.lkey, mw->rkey, access);
	atomic_store_explicit(&w->mw, mw, memory_order_relaxed);
	/* the fields above before the slot reads as live (ibv_dealloc_pd) */
	atomic_store_explicit(&w->m.arena, a, memory_order_release);
	mrp_inc(&t->served);
	return &w->m.mr;

put:
	mrp_pl_wmr_put(w);
unhold:
	mrp_arena_unhold(a);
	return NULL;
}

/*
 * A registration with remote access, with MRPOOL_PRELOAD_REMOTE=arena, of
 * local write and remote rights and nothing else: served with a type 1
 * window over exactly its range, with exactly those rights, bound on the
 * PD's binder (the arena's lkey, the window's rkey). NULL (passed on) by
 * default, for other flags, without a binder in the PD, and when the bind
 * fails. From the slow path only: the binder and the PD's attach make
 * system calls, which are cancellation points; a cancellation acted on
 * among them would leave mrp_pl_lock held, or the arena held and the
 * slot taken, so it waits until the registration returns.
 */
static MRP_NOINLINE struct ibv_mr *mrp_pl_serve_window(struct ibv_pd *pd, struct mrp_arena *a,
						       void *addr, size_t len,
						       unsigned int access)
{
	unsigned int remote = access & MRP_PL_REMOTE_ALL;
	struct ibv_mr *mr;
	int cancel;

	if (mrp_pl_cfg.remote != MRP_PL_REMOTE_ARENA || !remote ||
	    access != (MRP_PL_LOCAL | remote))
		return NULL;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	mr = mrp_pl_serve_window_nocancel(pd, a, addr, len, access);
	pthread_setcancelstate(cancel, NULL);
	return mr;
}

/*
 * A served MR, or NULL: the caller registers for real (see the top of the
 * file for which are served). The pool is the arena's: the shim's map
 * holds its own pool's arenas only, and an arena exists only in a pool
 * that opened; in a forked child the pool is the parent's, and nothing is
 * served. Inlined twice: with slow false (the exported functions' own
 * path) it makes no call and takes no lock, and gives up (NULL) where a
 * slow path would be needed: a PD not attached yet, an arena without its
 * keys in the PD, the thread without a free slot; the caller then tail
 * calls the copy with slow true, which takes those paths, or passes on.
 */
static inline __attribute__((always_inline))
struct ibv_mr *mrp_pl_serve(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
			    unsigned int access, const bool slow)
{
	struct mrp_arena *a = mrp_pl_arena(addr);
	struct mrp_pl_thr *t;
	struct mrp_pool *pool;
	struct mrp_pl_pd *e;
	struct mrp_pl_mr *m;
	struct mrp_key k;

	/*
	 * From inside the library: passed on. The copy without slow paths
	 * leaves any thread not plainly outside (in not 0: see struct
	 * mrp_pl_tls) to the other, which tells inside from a call left
	 * behind, making no call itself.
	 */
	if (!a || !pd || !len || iova != (uintptr_t)addr ||
	    (slow ? mrp_pl_internal() : mrp_pl_tls.in || mrp_bg_self))
		return NULL;
	pool = a->pool;
	if (unlikely(mrp_forked(pool)) || len > mrp_pl_buf_left(a, addr))
		return NULL;
	access &= ~(unsigned int)IBV_ACCESS_OPTIONAL_RANGE;
	/*
	 * Exactly the rights asked for: local write alone here (the arena's
	 * lkey, no rkey); remote access with a window, or passed on.
	 */
	if (access != MRP_PL_LOCAL)
		return slow ? mrp_pl_serve_window(pd, a, addr, len, access) : NULL;
	e = mrp_pl_pd_find(pd);
	if (unlikely(!e) && (!slow || !(e = mrp_pl_pd_attach(pool, pd))))
		return NULL;
	/* no attach failure either (slot -1), which no arena's reg_mask has */
	if (likely(e->slot >= 0 && mrp_arena_has(a, e->slot)))
		k = a->keys[e->slot];
	else if (!slow || e->slot < 0 || mrp_pl_keys_slow(pool, pd, addr, &k))
		return NULL;
	if (unlikely(!mrp_arena_hold(a)))
		return NULL;		/* trim took it: the buffer is not the program's */
	t = mrp_pl_self;
	m = t->free;
	if (likely(m)) {
		t->free = m->next;
		t->nfree--;
	} else if (!slow || !(t = mrp_pl_thr_get()) || !(m = mrp_pl_mr_refill(t))) {
		mrp_arena_unhold(a);
		return NULL;
	}
	mrp_pl_mr_fill(m, pd, addr, len, k.lkey, 0, MRP_PL_LOCAL);
	/* the fields above before the slot reads as live (ibv_dealloc_pd) */
	atomic_store_explicit(&m->arena, a, memory_order_release);
	mrp_inc(&t->served);
	return &m->mr;
}

/*
 * A registration passed on is counted, if it is the program's: not the
 * library's own, nor those libibverbs makes inside a call passed on to it
 * (its ibv_reg_mr calls ibv_reg_mr_iova2, which reaches the shim again:
 * the pass-throughs run between mrp_pl_enter() and mrp_pl_leave()).
 */
static void mrp_pl_count_passed(void)
{
	struct mrp_pl_thr *t;

	if (mrp_pl_internal())
		return;
	t = mrp_pl_self;
	if (unlikely(t == &mrp_pl_thr_empty)) {
		/*
		 * A thread's first: the program's first registration opens the
		 * pool, as its first large allocation does (the stats page shows
		 * it with MRPOOL_PRELOAD_MIN=0 too).
		 */
		(void)mrp_pl_pool();
		t = mrp_pl_thr_claim();
	}
	if (t)
		mrp_inc(&t->passed);
	else
		mrp_add(&mrp_pl_orphan_passed, 1);
}

/*
 * The three registration calls: served without a call, else (noinline)
 * served by the slow paths, or counted and passed on.
 */
static MRP_NOINLINE struct ibv_mr *mrp_pl_pass_reg_mr(struct ibv_pd *pd, void *addr,
						      size_t length, int access)
{
	struct ibv_mr *mr;
	uintptr_t outer;

	mrp_pl_setup();		/* before any lock: an attach takes them */
	mrp_pl_activate();	/* the program registers: it uses RDMA */
	mr = mrp_pl_serve(pd, addr, length, (uintptr_t)addr, (unsigned int)access, true);
	if (mr)
		return mr;
	mrp_pl_count_passed();
	outer = mrp_pl_enter();
	mr = MRP_PL_REAL(reg_mr, NULL, pd, addr, length, access);
	mrp_pl_leave(outer);
	return mr;
}

MRP_PL_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
					int access)
{
	struct ibv_mr *mr = mrp_pl_serve(pd, addr, length, (uintptr_t)addr,
					 (unsigned int)access, false);

	return likely(mr) ? mr : mrp_pl_pass_reg_mr(pd, addr, length, access);
}

static MRP_NOINLINE struct ibv_mr *mrp_pl_pass_reg_mr_iova(struct ibv_pd *pd, void *addr,
							   size_t length, uint64_t iova,
							   int access)
{
	struct ibv_mr *mr;
	uintptr_t outer;

	mrp_pl_setup();		/* before any lock: an attach takes them */
	mrp_pl_activate();	/* the program registers: it uses RDMA */
	mr = mrp_pl_serve(pd, addr, length, iova, (unsigned int)access, true);
	if (mr)
		return mr;
	mrp_pl_count_passed();
	outer = mrp_pl_enter();
	mr = MRP_PL_REAL(reg_mr_iova, NULL, pd, addr, length, iova, access);
	mrp_pl_leave(outer);
	return mr;
}

MRP_PL_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
					     uint64_t iova, int access)
{
	struct ibv_mr *mr = mrp_pl_serve(pd, addr, length, iova, (unsigned int)access, false);

	return likely(mr) ? mr : mrp_pl_pass_reg_mr_iova(pd, addr, length, iova, access);
}

static MRP_NOINLINE struct ibv_mr *mrp_pl_pass_reg_mr_iova2(struct ibv_pd *pd, void *addr,
							    size_t length, uint64_t iova,
							    unsigned int access)
{
	struct ibv_mr *mr;
	uintptr_t outer;

	mrp_pl_setup();		/* before any lock: an attach takes them */
	mrp_pl_activate();	/* the program registers: it uses RDMA */
	mr = mrp_pl_serve(pd, addr, length, iova, access, true);
	if (mr)
		return mr;
	mrp_pl_count_passed();
	outer = mrp_pl_enter();
	mr = MRP_PL_REAL(reg_mr_iova2, NULL, pd, addr, length, iova, access);
	mrp_pl_leave(outer);
	return mr;
}

MRP_PL_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
					      uint64_t iova, unsigned int access)
{
	struct ibv_mr *mr = mrp_pl_serve(pd, addr, length, iova, access, false);

	return likely(mr) ? mr : mrp_pl_pass_reg_mr_iova2(pd, addr, length, iova, access);
}

/*
 * A served MR: its slot's arena exchanged for NULL. A slot already free
 * (deregistered before, or by another thread at the same time) or an
 * address inside one: EINVAL.
 */
MRP_PL_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct mrp_pl_mr *m = (struct mrp_pl_mr *)mr;
	struct mrp_pl_thr *t;
	struct mrp_arena *a;
	uintptr_t off;

	if (unlikely(!mrp_pl_served_mr(mr, &off)))
		return mrp_pl_dereg_real(mr);
	if (unlikely(off % sizeof(*m)))
		return EINVAL;
	a = atomic_exchange_explicit(&m->arena, NULL, memory_order_acq_rel);
	if (unlikely(!a))
		return EINVAL;
	mrp_arena_unhold(a);
	/* onto this thread's free slots */
	t = mrp_pl_self;
	if (unlikely(t == &mrp_pl_thr_empty)) {
		mrp_pl_mr_put_slow(m);
		return 0;
	}
	m->next = t->free;
	t->free = m;
	if (unlikely(++t->nfree > MRP_PL_THR_MAX))
		mrp_pl_mr_flush(t);
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
	uintptr_t off;

	mrp_pl_setup();
	if (!mrp_pl_served_mr(mr, &off) && !mrp_pl_window_mr(mr, &off))
		return MRP_PL_REAL(rereg_mr, IBV_REREG_MR_ERR_INPUT, mr, flags, pd,
					   addr, length, access);
	errno = EOPNOTSUPP;
	return IBV_REREG_MR_ERR_INPUT;
}

/*
 * Does pd have served MRs the program holds, or one with a window whose
 * deregistration has not deallocated it yet (mrp_pl_dereg_window())?
 * Every slot ever handed out is looked at: ibv_dealloc_pd() is rare, the served pair frequent (it
 * keeps no count per PD). A registration in pd racing this is the
 * program's race, as with real MRs.
 */
static bool mrp_pl_pd_busy(const struct ibv_pd *pd)
{
	struct mrp_pl_mr *region = atomic_load_explicit(&mrp_pl_mrs, memory_order_acquire);
	struct mrp_pl_wmr *wregion = atomic_load_explicit(&mrp_pl_wmrs, memory_order_acquire);
	uint32_t used, wused;

	pthread_mutex_lock(&mrp_pl_slot_lock);
	used = mrp_pl_mr_used;
	wused = mrp_pl_wmr_used;
	pthread_mutex_unlock(&mrp_pl_slot_lock);
	for (uint32_t i = 0; region && i < used; i++)
		if (atomic_load_explicit(&region[i].arena, memory_order_acquire) &&
		    region[i].mr.pd == pd)
			return true;
	for (uint32_t i = 0; wregion && i < wused; i++)
		if (atomic_load_explicit(&wregion[i].m.arena, memory_order_acquire) &&
		    wregion[i].m.mr.pd == pd)
			return true;
	return false;
}

/*
 * ibv_close_device() with served MRs of pd left: their windows go (the
 * program's leak keeps its MRs, whose rkeys die as a real MR's do with its
 * device), before the arenas' MRs they are bound to. mrp_pl_lock held.
 */
static void mrp_pl_pd_windows_drop(const struct ibv_pd *pd)
{
	struct mrp_pl_wmr *wregion = atomic_load_explicit(&mrp_pl_wmrs, memory_order_acquire);
	uint32_t wused;
	uintptr_t outer;

	pthread_mutex_lock(&mrp_pl_slot_lock);
	wused = mrp_pl_wmr_used;
	pthread_mutex_unlock(&mrp_pl_slot_lock);
	for (uint32_t i = 0; wregion && i < wused; i++) {
		struct mrp_pl_wmr *w = &wregion[i];
		struct mrp_arena *a = atomic_load_explicit(&w->m.arena, memory_order_acquire);
		struct ibv_mw *mw;

		if (!a || w->m.mr.pd != pd || mrp_forked(a->pool))
			continue;
		/* not one a deregistration took (NULL), nor gone already */
		mw = atomic_load_explicit(&w->mw, memory_order_acquire);
		while (mw && mw != MRP_PL_MW_GONE &&
		       !atomic_compare_exchange_weak_explicit(&w->mw, &mw, MRP_PL_MW_GONE,
							      memory_order_acq_rel,
							      memory_order_acquire))
			;
		if (mw && mw != MRP_PL_MW_GONE) {
			outer = mrp_pl_enter();
			ibv_dealloc_mw(mw);
			mrp_pl_leave(outer);
		}
	}
}

MRP_PL_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct mrp_pl_pd *e;
	bool busy;
	int cancel;

	mrp_pl_setup();
	/* the detach's system calls are cancellation points: mrp_pl_lock is held */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	pthread_mutex_lock(&mrp_pl_lock);
	e = pd ? mrp_pl_pd_find(pd) : NULL;
	busy = e && mrp_pl_pd_busy(pd);
	if (e && !busy)
		mrp_pl_pd_detach(e);
	pthread_mutex_unlock(&mrp_pl_lock);
	pthread_setcancelstate(cancel, NULL);
	if (busy)
		return EBUSY;
	return MRP_PL_REAL(dealloc_pd, ENOSYS, pd);
}

/*
 * The context's PDs are detached; served MRs left in them are the
 * program's leak: their keys are gone with the arenas' MRs and windows
 * there, their arenas stay held until they are deregistered.
 */
MRP_PL_EXPORT int ibv_close_device(struct ibv_context *ctx)
{
	int cancel;

	mrp_pl_setup();
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);	/* as above */
	pthread_mutex_lock(&mrp_pl_lock);
	for (int i = 0; ctx && i < MRP_MAX_PDS; i++) {
		struct mrp_pl_pd *e = &mrp_pl_pds[i];
		struct ibv_pd *pd = atomic_load_explicit(&e->pd, memory_order_relaxed);

		if (pd && e->ctx == ctx) {
			mrp_pl_pd_windows_drop(pd);
			mrp_pl_pd_detach(e);
		}
	}
	pthread_mutex_unlock(&mrp_pl_lock);
	pthread_setcancelstate(cancel, NULL);
	return MRP_PL_REAL(close_device, ENOSYS, ctx);
}

/*
 * The two calls by which a program shows it uses RDMA before it registers
 * anything (shim.c: the shim is dormant until then): a device list with a
 * device in it (a probe that finds none, as a launcher or a library
 * choosing its transport makes, leaves the process dormant) and a device
 * opened. The calls themselves are libibverbs'.
 */
MRP_PL_EXPORT struct ibv_device **ibv_get_device_list(int *num_devices)
{
	struct ibv_device **list;
	int n = 0;

	mrp_pl_setup();
	if (!mrp_pl_verbs.get_device_list) {
		errno = ENOSYS;
		return NULL;
	}
	list = mrp_pl_verbs.get_device_list(&n);
	if (num_devices)
		*num_devices = n;
	if (list && n > 0)
		mrp_pl_activate();
	return list;
}

MRP_PL_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct ibv_context *ctx;

	mrp_pl_setup();
	ctx = MRP_PL_REAL(open_device, NULL, device);
	if (ctx)
		mrp_pl_activate();
	return ctx;
}
