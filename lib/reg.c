// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Registration: each arena once in each attached PD (ibv_reg_dmabuf_mr of
 * the slice's dma-buf where the device takes it, else ibv_reg_mr), and the
 * counted fallback of malloc + per-buffer registration when arenas run out.
 *
 * Growth registers best effort per PD: one PD whose device fails (or went
 * away) must not take pd NULL and the other PDs down with it. A PD that
 * refused an arena is counted (reg_failures) and tried again when a caller
 * asks for its keys (mrp_reg_lazy); a PD marked dead (mrp_pd_dead) is no
 * longer registered in and its keys are never handed out again.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "internal.h"

/*
 * ibv_reg_dmabuf_mr() came with rdma-core 34 (IBVERBS_1.12): a direct
 * call would make the library need that version of libibverbs to load at
 * all, where it only ever needs it for the kernel backend's slices on a
 * device that takes dma-bufs. So it is looked up, once, at the first pool
 * open (where the library holds no lock: dlsym() takes the dynamic
 * linker's, see os.c), in the global scope, else in the libibverbs the
 * library was loaded with (a dlopen() with RTLD_LOCAL keeps it out of the
 * global scope). Without it every arena takes ibv_reg_mr, as for a device
 * that refuses dma-bufs. Read with acquire after the once: constant then.
 */
typedef struct ibv_mr *mrp_reg_dmabuf_fn(struct ibv_pd *pd, uint64_t offset,
					 size_t length, uint64_t iova, int fd,
					 int access);
static mrp_reg_dmabuf_fn *_Atomic mrp_reg_dmabuf;
static pthread_once_t mrp_reg_dmabuf_once = PTHREAD_ONCE_INIT;

static void mrp_reg_dmabuf_lookup(void)
{
	mrp_reg_dmabuf_fn *fn;
	void *h;

	*(void **)&fn = dlsym(RTLD_DEFAULT, "ibv_reg_dmabuf_mr");
	if (!fn) {
		h = dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_NOLOAD);
		if (h) {
			*(void **)&fn = dlsym(h, "ibv_reg_dmabuf_mr");
			dlclose(h);
		}
	}
	atomic_store_explicit(&mrp_reg_dmabuf, fn, memory_order_release);
}

void mrp_reg_resolve(void)
{
	pthread_once(&mrp_reg_dmabuf_once, mrp_reg_dmabuf_lookup);
}

/* Can the PD's registrations go through dma-bufs at all (see above)? */
static bool mrp_reg_dmabuf_ok(void)
{
	return atomic_load_explicit(&mrp_reg_dmabuf, memory_order_acquire) != NULL;
}

/*
 * Register [addr, addr + len) in the PD of slot with access (through
 * dmabuf_fd when it is >= 0), counted and timed into the stats; a failure
 * leaves its errno set and is counted for the PD. A refused dma-buf
 * attempt counts for nothing: ibv_reg_mr follows it.
 */
static struct ibv_mr *mrp_reg(struct mrp_pool *pool, struct ibv_pd *pd, int slot,
			      void *addr, size_t len, int dmabuf_fd, int access)
{
	uint64_t t0 = mrp_now_ns(), dt, max;
	struct ibv_mr *mr;
	int err;

	errno = 0;
	if (dmabuf_fd >= 0)
		mr = atomic_load_explicit(&mrp_reg_dmabuf, memory_order_acquire)
			(pd, 0, len, (uintptr_t)addr, dmabuf_fd, access);
	else
		mr = ibv_reg_mr(pd, addr, len, access);
	err = errno;
	if (!mr && dmabuf_fd >= 0) {
		errno = err;
		return NULL;
	}
	if (!mr)
		mrp_add(&pool->pd_reg_failures[slot], 1);
	dt = mrp_now_ns() - t0;
	mrp_add(&pool->regs, 1);
	mrp_add(&pool->reg_ns, dt);
	max = mrp_get(&pool->reg_ns_max);
	while (dt > max && !atomic_compare_exchange_weak(&pool->reg_ns_max, &max, dt))
		;
	errno = err;
	return mr;
}

/*
 * The rkey handed out with buffers: the MR's where the PD was attached
 * with remote access, else 0. An arena's rkey reaches every buffer of the
 * arena, so it is not given where no peer is meant to have one.
 */
static uint32_t mrp_rkey(const struct mrp_pool *pool, int slot,
			 const struct ibv_mr *mr)
{
	return pool->access[slot] & (IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |
				     IBV_ACCESS_REMOTE_ATOMIC) ? mr->rkey : 0;
}

/*
 * An export that failed for want of a resource of the moment (the fd
 * limit, memory) says nothing of the device or the module: that arena
 * takes ibv_reg_mr and the next one tries its dma-buf again.
 */
static bool mrp_export_transient(int err)
{
	return err == EMFILE || err == ENFILE || err == ENOMEM || err == EAGAIN ||
	       err == EINTR;
}

/*
 * An arena's MR in the PD of slot, with access: through the slice's dma-buf where the
 * backend exports one and the device takes it (nothing is pinned again:
 * the module's pages are pinned already), else ibv_reg_mr. The first
 * refusal (of the device, or an export the module cannot do) turns dma-buf
 * registration off for the PD until it is attached again, so a device
 * without it costs one attempt. With pool->lock held (attach, lazy
 * registration) or without it (a creation, arena.c, which keeps pd
 * attached meanwhile): what it reads of the pool is constant while pd is
 * attached, or atomic.
 */
static struct ibv_mr *mrp_reg_arena_mr(struct mrp_pool *pool, struct ibv_pd *pd,
				       struct mrp_arena *a, int slot, unsigned int access)
{
	struct ibv_mr *mr;
	int fd, err, cancel;

	/* a libibverbs older than rdma-core 34: as a device that refuses */
	if (pool->cfg.dmabuf && pool->ops->export_dmabuf && !mrp_reg_dmabuf_ok())
		pool->pd_dmabuf_error[slot] = ENOSYS;
	if (pool->cfg.dmabuf && pool->ops->export_dmabuf &&
	    !pool->pd_dmabuf_error[slot]) {
		/* no fork while the fd exists: a child could map the slice */
		pthread_rwlock_rdlock(&mrp_fork_lock);
		fd = pool->ops->export_dmabuf(pool, a->handle);
		if (fd < 0) {
			pthread_rwlock_unlock(&mrp_fork_lock);
			if (!mrp_export_transient(-fd))
				pool->pd_dmabuf_error[slot] = -fd;
		} else {
			mr = mrp_reg(pool, pd, slot, (void *)a->base, a->size, fd, (int)access);
			err = errno;
			/*
			 * The MR holds the dma-buf. close() is a cancellation
			 * point, and mrp_fork_lock (and maybe pool->lock) is
			 * held.
			 */
			pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
			close(fd);
			pthread_setcancelstate(cancel, NULL);
			pthread_rwlock_unlock(&mrp_fork_lock);
			if (mr) {
				mrp_add(&pool->pd_dmabuf_regs[slot], 1);
				return mr;
			}
			pool->pd_dmabuf_error[slot] = err ? err : EIO;
		}
	}
	return mrp_reg(pool, pd, slot, (void *)a->base, a->size, -1, (int)access);
}

static int mrp_dereg_mr(struct mrp_pool *pool, struct ibv_mr *mr, int slot);

/*
 * The arena's MR in the PD of slot, and its bind MR where the slot has
 * bind_access (both or neither: a failure of the second takes the first
 * back, its keys never handed out), made and returned, stored nowhere:
 * with or without pool->lock.
 */
static int mrp_reg_make(struct mrp_pool *pool, struct ibv_pd *pd,
			struct mrp_arena *a, int slot, struct ibv_mr **mrp,
			struct ibv_mr **bind_mrp)
{
	struct ibv_mr *mr = mrp_reg_arena_mr(pool, pd, a, slot, pool->access[slot]);
	struct ibv_mr *bind_mr = NULL;
	int ret;

	if (!mr)
		return errno ? -errno : -EIO;
	if (pool->bind_access[slot]) {
		bind_mr = mrp_reg_arena_mr(pool, pd, a, slot, pool->bind_access[slot]);
		if (!bind_mr) {
			ret = errno ? -errno : -EIO;
			mrp_dereg_mr(pool, mr, slot);
			return ret;
		}
	}
	*mrp = mr;
	*bind_mrp = bind_mr;
	return 0;
}

/*
 * Store an arena's MRs of slot; with live, its keys may be handed out
 * (not for a PD marked dead meanwhile: the MRs stay for the detach).
 */
static void mrp_reg_set(struct mrp_pool *pool, struct mrp_arena *a, int slot,
			struct ibv_mr *mr, struct ibv_mr *bind_mr, bool live)
{
	a->mr[slot] = mr;
	a->bind_mr[slot] = bind_mr;
	a->keys[slot].lkey = mr->lkey;
	a->keys[slot].rkey = mrp_rkey(pool, slot, mr);
	/* release: a fast path that sees the bit sees these keys */
	if (live)
		atomic_fetch_or_explicit(&a->reg_mask, 1u << slot, memory_order_release);
}

/* Both, on an arena nobody else writes the slot of (see the callers). */
static int mrp_reg_one(struct mrp_pool *pool, struct ibv_pd *pd,
		       struct mrp_arena *a, int slot)
{
	struct ibv_mr *mr, *bind_mr;
	int ret = mrp_reg_make(pool, pd, a, slot, &mr, &bind_mr);

	if (!ret)
		mrp_reg_set(pool, a, slot, mr, bind_mr, true);
	return ret;
}

/*
 * ibv_dereg_mr, counted when it fails (EBUSY with windows still bound,
 * a device gone): the MR is given up either way, the caller decides what
 * becomes of the memory it covered.
 */
static int mrp_dereg_mr(struct mrp_pool *pool, struct ibv_mr *mr, int slot)
{
	int ret = ibv_dereg_mr(mr);

	if (!ret)
		return 0;
	mrp_add(&pool->dereg_errors, 1);
	mrp_add(&pool->pd_dereg_errors[slot], 1);
	return ret > 0 ? -ret : -EIO;
}

/*
 * The MR of a PD marked dead may fail to go (its device is gone): counted,
 * not an error, since that device reaches no memory any more.
 */
static int mrp_dereg_fb_mr(struct mrp_pool *pool, struct mrp_fallback *fb, int slot)
{
	int ret = mrp_dereg_mr(pool, fb->mr[slot], slot);

	fb->mr[slot] = NULL;
	return mrp_slot_dead(pool, slot) ? 0 : ret;
}

/* The arena's MR in slot, its bind MR first (the windows on it are gone). */
static int mrp_dereg_one(struct mrp_pool *pool, struct mrp_arena *a, int slot)
{
	int ret = 0, err;

	if (!a->mr[slot])
		return 0;
	/* the bit goes first: no fast path hands out these keys from now */
	atomic_fetch_and_explicit(&a->reg_mask, ~(1u << slot), memory_order_release);
	if (a->bind_mr[slot]) {
		ret = mrp_dereg_mr(pool, a->bind_mr[slot], slot);
		a->bind_mr[slot] = NULL;
	}
	err = mrp_dereg_mr(pool, a->mr[slot], slot);
	if (!ret)
		ret = err;
	a->mr[slot] = NULL;
	a->keys[slot].lkey = 0;
	a->keys[slot].rkey = 0;
	return mrp_slot_dead(pool, slot) ? 0 : ret;
}

/*
 * A new arena in the PDs of slots (chosen by its creation, arena.c, which
 * keeps them attached until it ends), best effort: a PD that refuses it
 * (device gone or failing, out of resources) only lacks its keys (counted
 * in its reg_failures, tried again by mrp_reg_lazy()); pd NULL and the
 * other PDs are served. A PD marked dead since is skipped. Without
 * pool->lock: the arena is its creator's alone until published.
 */
void mrp_reg_arena(struct mrp_pool *pool, struct mrp_arena *a, uint32_t slots)
{
	for (int s = 0; s < MRP_MAX_PDS; s++)
		if ((slots & (1u << s)) && !mrp_slot_dead(pool, s))
			mrp_reg_one(pool, atomic_load(&pool->pds[s]), a, s);
}

/*
 * PD slots attached since a creation chose slots, to register its arena
 * in before it is published (arena.c catches up with them unlocked, then
 * asks again): not dead, not being detached. pool->lock held.
 */
uint32_t mrp_reg_arena_missing(struct mrp_pool *pool, uint32_t slots)
{
	uint32_t skip = slots | atomic_load(&pool->pd_dead) | pool->pd_detaching;
	uint32_t more = 0;

	for (int s = 0; s < MRP_MAX_PDS; s++)
		if (atomic_load(&pool->pds[s]) && !(skip & (1u << s)))
			more |= 1u << s;
	return more;
}

/*
 * The same arena being published, pool->lock held: a PD marked dead since
 * it was registered loses its bit, its MR left to the detach as in every
 * arena (mrp_pd_dead()). Every PD attached meanwhile was caught up with
 * unlocked (mrp_reg_arena_missing()), and an attach in flight registers
 * the arena itself once it is listed.
 */
void mrp_reg_arena_publish(struct mrp_pool *pool, struct mrp_arena *a)
{
	atomic_fetch_and_explicit(&a->reg_mask, ~atomic_load(&pool->pd_dead),
				  memory_order_release);
}

/*
 * A caller wants keys of slot from an arena that lacks them: register it
 * now (the slow paths only). Returns 0 with the keys in place, -ENODEV if
 * the PD is dead, -EINVAL if it was detached meanwhile (or is being),
 * -ENOENT if trim took the arena, or the error of the registration
 * (counted, the arena stays without that PD).
 *
 * The registration runs without pool->lock, as a creation's does
 * (arena.c): the slot is counted in reg_busy[] (a detach waits for it),
 * the arena is held (trim leaves it) and marked reg_pending (a second
 * caller for the same keys waits for these instead of making its own),
 * and the MRs are stored under the lock after it, where a PD marked dead
 * meanwhile gets no bit (its MRs go with the detach). Not a cancellation
 * point: a caller cancelled inside would leave the slot busy for ever.
 */
int mrp_reg_lazy(struct mrp_pool *pool, struct mrp_arena *a, int slot)
{
	struct ibv_mr *mr = NULL, *bind_mr = NULL;
	uint32_t bit = 1u << slot;
	struct ibv_pd *pd;
	int ret, cancel;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	pthread_mutex_lock(&pool->lock);
	for (;;) {
		pd = atomic_load(&pool->pds[slot]);
		if (!pd || (pool->pd_detaching & bit)) {
			ret = -EINVAL;
			break;
		}
		if (mrp_slot_dead(pool, slot)) {
			ret = -ENODEV;
			break;
		}
		ret = 0;
		if (mrp_arena_has(a, slot) || a->mr[slot])
			break;
		if (!(a->reg_pending & bit))
			break;
		/* another caller is registering it: its MRs serve this one */
		mrp_add(&pool->lazy_waits, 1);
		pthread_cond_wait(&pool->created, &pool->lock);
	}
	if (ret || mrp_arena_has(a, slot) || a->mr[slot])
		goto unlock;
	if (!mrp_arena_hold(a)) {
		ret = -ENOENT;
		goto unlock;
	}
	a->reg_pending |= bit;
	pool->reg_busy[slot]++;
	pthread_mutex_unlock(&pool->lock);

	ret = mrp_reg_make(pool, pd, a, slot, &mr, &bind_mr);

	pthread_mutex_lock(&pool->lock);
	a->reg_pending &= ~bit;
	pool->reg_busy[slot]--;
	if (!ret) {
		mrp_reg_set(pool, a, slot, mr, bind_mr, !mrp_slot_dead(pool, slot));
		if (mrp_slot_dead(pool, slot))
			ret = -ENODEV;
	}
	mrp_arena_unhold(a);
	/* a detach waiting for the slot, callers waiting for these keys */
	pthread_cond_broadcast(&pool->created);
unlock:
	pthread_mutex_unlock(&pool->lock);
	pthread_setcancelstate(cancel, NULL);
	return ret;
}

/* Every MR of the arena; the first error, after trying them all. */
int mrp_dereg_arena(struct mrp_pool *pool, struct mrp_arena *a)
{
	int ret = 0, err;

	for (int s = 0; s < MRP_MAX_PDS; s++) {
		err = mrp_dereg_one(pool, a, s);
		if (err && !ret)
			ret = err;
	}
	return ret;
}

/* A PD's MR of an arena in use: a failure retires the arena (not for a dead PD). */
static void mrp_dereg_live(struct mrp_pool *pool, struct mrp_arena *a, int slot)
{
	if (mrp_dereg_one(pool, a, slot))
		mrp_arena_retire(pool, a);
}

static int mrp_fb_reg(struct mrp_pool *pool, struct ibv_pd *pd,
		      struct mrp_fallback *fb, int slot)
{
	fb->mr[slot] = mrp_reg(pool, pd, slot, fb->addr, fb->size, -1, (int)pool->access[slot]);
	return fb->mr[slot] ? 0 : (errno ? -errno : -EIO);
}

/* Keys of a fallback buffer in slot, registering it now if it lacks them. */
static int mrp_fb_keys(struct mrp_pool *pool, struct mrp_fallback *fb, int slot,
		       struct mrp_buf *buf)
{
	struct ibv_pd *pd;
	int ret;

	buf->lkey = 0;
	buf->rkey = 0;
	if (slot < 0)
		return 0;
	if (mrp_slot_dead(pool, slot))
		return -ENODEV;
	pd = atomic_load(&pool->pds[slot]);
	if (!pd)
		return -EINVAL;
	if (!fb->mr[slot]) {
		ret = mrp_fb_reg(pool, pd, fb, slot);
		if (ret)
			return ret;
	}
	buf->lkey = fb->mr[slot]->lkey;
	buf->rkey = mrp_rkey(pool, slot, fb->mr[slot]);
	return 0;
}

static int mrp_fb_dereg(struct mrp_pool *pool, struct mrp_fallback *fb)
{
	int ret = 0;

	for (int s = 0; s < MRP_MAX_PDS; s++)
		if (fb->mr[s] && mrp_dereg_fb_mr(pool, fb, s))
			ret = -EBUSY;
	return ret;
}

MRP_EXPORT int mrp_attach_pd(struct mrp_pool *pool, struct ibv_pd *pd,
			     unsigned int access)
{
	return mrp_attach_pd_bind(pool, pd, access, 0);
}

/*
 * mrp_attach_pd(), and with bind_access not 0 each arena gets a second MR
 * in pd with it, the bind MR (struct mrp_arena), for the preload shim's
 * windows: the arenas' keys handed out stay those of access alone.
 *
 * Every listed arena is registered in pd, each without pool->lock (one
 * ibv_reg_mr pins and translates a whole arena): the slot is taken
 * under the lock (attaching[], so a second attach of pd finds it), the
 * PD is not in pds[] yet (no creation, lazy registration, detach nor
 * mrp_pd_dead reaches the slot), each arena is held while its
 * registration runs (trim leaves it), and arenas listed meanwhile by
 * growth are found by the next walk. The slot is published in the same
 * section as the walk that found every arena registered. Fallback buffers
 * (rare: arenas ran out) are registered in that section still. Not a
 * cancellation point.
 */
int mrp_attach_pd_bind(struct mrp_pool *pool, struct ibv_pd *pd, unsigned int access,
		       unsigned int bind_access)
{
	struct ibv_mr *mr, *bind_mr;
	struct mrp_fallback *fb;
	struct mrp_arena *a;
	int slot = -1, ret = 0, cancel;
	uint32_t bit;
	bool held;

	if (!pool || !pd)
		return -EINVAL;
	if (mrp_forked(pool))
		return -ECHILD;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	pthread_mutex_lock(&pool->lock);
	for (int s = 0; s < MRP_MAX_PDS; s++) {
		struct ibv_pd *cur = atomic_load(&pool->pds[s]);

		if (cur == pd || pool->attaching[s] == pd) {
			ret = -EEXIST;
			goto unlock;
		}
		if (!cur && !pool->attaching[s] && !(pool->pd_detaching & (1u << s)) &&
		    slot < 0)
			slot = s;
	}
	if (slot < 0) {
		ret = -ENOSPC;
		goto unlock;
	}
	bit = 1u << slot;
	pool->attaching[slot] = pd;
	/*
	 * The slot is published last (release): whoever finds the PD in
	 * pds[] finds its keys in every arena.
	 */
	pool->access[slot] = access;
	pool->bind_access[slot] = bind_access;
	/* a slot starts live, with counters of its own */
	atomic_fetch_and(&pool->pd_dead, ~bit);
	atomic_store(&pool->pd_reg_failures[slot], 0);
	atomic_store(&pool->pd_dereg_errors[slot], 0);
	atomic_store(&pool->pd_dmabuf_regs[slot], 0);
	pool->pd_dmabuf_error[slot] = 0;
	for (;;) {
		for (a = pool->arenas; a && a->mr[slot]; a = a->next)
			;
		if (!a)
			break;
		/*
		 * Listed and not held only when a failed trim retired it
		 * (claimed for good): then it stays listed until the close.
		 */
		held = mrp_arena_hold(a);
		a->reg_pending |= bit;
		pthread_mutex_unlock(&pool->lock);
		ret = mrp_reg_make(pool, pd, a, slot, &mr, &bind_mr);
		pthread_mutex_lock(&pool->lock);
		a->reg_pending &= ~bit;
		if (!ret)
			mrp_reg_set(pool, a, slot, mr, bind_mr, true);
		if (held)
			mrp_arena_unhold(a);
		if (ret)
			break;
		mrp_add(&pool->attach_unlocked_regs, 1);
	}
	for (fb = pool->fallbacks; fb && !ret; fb = fb->next)
		ret = mrp_fb_reg(pool, pd, fb, slot);
	if (ret) {
		/* the failure path: its deregistrations under the lock */
		for (a = pool->arenas; a; a = a->next)
			mrp_dereg_live(pool, a, slot);
		for (fb = pool->fallbacks; fb; fb = fb->next)
			if (fb->mr[slot] && mrp_dereg_fb_mr(pool, fb, slot))
				fb->leak = true;
	} else {
		atomic_store(&pool->pds[slot], pd);
		mrp_numa_attach(pool, pd);
	}
	pool->attaching[slot] = NULL;
unlock:
	pthread_mutex_unlock(&pool->lock);
	pthread_setcancelstate(cancel, NULL);
	return ret;
}

/* Until no unlocked (de)registration in slot is in flight; pool->lock held. */
static void mrp_detach_wait(struct mrp_pool *pool, int slot)
{
	if (pool->reg_busy[slot])
		mrp_add(&pool->detach_waits, 1);
	while (pool->reg_busy[slot])
		pthread_cond_wait(&pool->created, &pool->lock);
}

MRP_EXPORT int mrp_detach_pd(struct mrp_pool *pool, struct ibv_pd *pd)
{
	struct mrp_fallback *fb;
	struct mrp_arena *a;
	int slot, cancel;

	if (!pool || !pd)
		return -EINVAL;
	if (mrp_forked(pool))
		return -ECHILD;
	pthread_mutex_lock(&pool->lock);
	slot = mrp_pd_slot(pool, pd);
	/* a detach of it already waiting below: this one finds it gone */
	if (slot < 0 || (pool->pd_detaching & (1u << slot))) {
		pthread_mutex_unlock(&pool->lock);
		return -ENOENT;
	}
	/*
	 * Creations and lazy registrations registering in the PD without
	 * pool->lock (arena.c, mrp_reg_lazy()), and trims deregistering from
	 * it (depot.c), end first: the caller may deallocate the PD once this
	 * returns, and the MRs made, published by then, go below with the
	 * others. No new registration starts meanwhile (pd_detaching), so the
	 * wait is for the calls in flight only; the slot stays taken through
	 * it.
	 */
	pool->pd_detaching |= 1u << slot;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	mrp_detach_wait(pool, slot);
	atomic_store(&pool->pds[slot], NULL);
	mrp_pdh_detach(pool, slot);
	mrp_mw_release_pd_locked(pool, pd);
	/*
	 * Each arena's MRs go without pool->lock (an ibv_dereg_mr unpins a
	 * whole arena), the arena held against trim meanwhile; the slot stays
	 * taken (pd_detaching: no attach reuses it, no creation registers in
	 * it) until the last is gone. An arena trim took meanwhile is
	 * deregistered by the trim, counted busy: waited for at the end.
	 *
	 * An MR that fails to go retires its arena: the PD's rkey may still
	 * reach that memory, so it must not carry other buffers. Not so for a
	 * PD marked dead: its device reaches nothing any more. The detach
	 * itself completes (dereg_errors counts what failed).
	 */
	for (;;) {
		struct ibv_mr *mr, *bind_mr;
		bool held;
		int err = 0;

		for (a = pool->arenas; a && !a->mr[slot]; a = a->next)
			;
		if (!a)
			break;
		/* not held: retired by a failed trim, listed until the close */
		held = mrp_arena_hold(a);
		/* the bit goes first: no fast path hands out these keys from now */
		atomic_fetch_and_explicit(&a->reg_mask, ~(1u << slot), memory_order_release);
		mr = a->mr[slot];
		bind_mr = a->bind_mr[slot];
		a->mr[slot] = NULL;
		a->bind_mr[slot] = NULL;
		a->keys[slot].lkey = 0;
		a->keys[slot].rkey = 0;
		pthread_mutex_unlock(&pool->lock);
		if (bind_mr)
			err = mrp_dereg_mr(pool, bind_mr, slot);
		if (mrp_dereg_mr(pool, mr, slot))
			err = -EIO;
		pthread_mutex_lock(&pool->lock);
		if (err && !mrp_slot_dead(pool, slot))
			mrp_arena_retire(pool, a);
		if (held)
			mrp_arena_unhold(a);
		mrp_add(&pool->detach_unlocked_deregs, 1);
	}
	mrp_detach_wait(pool, slot);
	/* fallback buffers (rare: arenas ran out) under the lock */
	for (fb = pool->fallbacks; fb; fb = fb->next)
		if (fb->mr[slot] && mrp_dereg_fb_mr(pool, fb, slot))
			fb->leak = true;
	pool->pd_detaching &= ~(1u << slot);
	pthread_mutex_unlock(&pool->lock);
	pthread_setcancelstate(cancel, NULL);
	return 0;
}

MRP_EXPORT int mrp_pd_dead(struct mrp_pool *pool, struct ibv_pd *pd)
{
	uint32_t bit;
	struct mrp_arena *a;
	int slot;

	if (!pool || !pd)
		return -EINVAL;
	if (mrp_forked(pool))
		return -ECHILD;
	pthread_mutex_lock(&pool->lock);
	slot = mrp_pd_slot(pool, pd);
	if (slot < 0) {
		pthread_mutex_unlock(&pool->lock);
		return -ENOENT;
	}
	bit = 1u << slot;
	/*
	 * Dead first, then every arena's bit (release): a fast path that
	 * finds the bit gone falls to the slow path, which then sees the PD
	 * dead and fails with -ENODEV. The MRs stay until the detach (or the
	 * arena's trim): mrp_mw_bind() may be reading them right now.
	 */
	atomic_fetch_or(&pool->pd_dead, bit);
	for (a = pool->arenas; a; a = a->next)
		atomic_fetch_and_explicit(&a->reg_mask, ~bit, memory_order_release);
	pthread_mutex_unlock(&pool->lock);
	return 0;
}

/*
 * Unmap unless a deregistration of it ever failed: then only forget it.
 * Never under pool->lock, so UCX's hook is looked up here (os.c).
 */
static void mrp_fb_unmap(struct mrp_fallback *fb)
{
	mrp_os_unmap_resolve();
	if (!fb->leak)
		mrp_os_unmap(fb->addr, fb->len);
	free(fb);
}

/*
 * Arenas ran out and the caller allows it: a mapping of its own +
 * registration, counted. Like arenas, not inherited by a child.
 */
int mrp_fallback_alloc(struct mrp_pool *pool, size_t size, size_t align,
		       int slot, struct mrp_buf *buf)
{
	size_t page = mrp_os_page_size();
	size_t al = align > page ? align : page;
	struct mrp_fallback *fb;
	int ret = 0;

	if (size <= MRP_MAX_CLASS && align <= MRP_MAX_CLASS) {
		/*
		 * keep the class size and alignment a pool buffer would have;
		 * an alignment above the classes keeps size (the table ends
		 * at 2 MiB)
		 */
		unsigned int cls = mrp_size_class(pool, size > align ? size : align);

		size = mrp_class_size(cls);
		al = mrp_class_align(cls) > al ? mrp_class_align(cls) : al;
	}
	if (size > SIZE_MAX - page)
		return -ENOMEM;
	fb = calloc(1, sizeof(*fb));
	if (!fb)
		return -ENOMEM;
	fb->size = size;
	fb->len = (size + page - 1) & ~(page - 1);
	fb->addr = mrp_os_map_aligned(fb->len, al, PROT_READ | PROT_WRITE,
				      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!fb->addr) {
		free(fb);
		return -ENOMEM;
	}
	if (madvise(fb->addr, fb->len, MADV_DONTFORK)) {
		ret = -errno;
		mrp_fb_unmap(fb);
		return ret;
	}
	/*
	 * Best effort per PD, as arenas: only the caller's PD must take it;
	 * another refusing (or dead) lacks its keys, tried again on lookup.
	 */
	pthread_mutex_lock(&pool->lock);
	for (int s = 0; s < MRP_MAX_PDS; s++) {
		struct ibv_pd *pd = atomic_load(&pool->pds[s]);
		int err;

		if (!pd || mrp_slot_dead(pool, s))
			continue;
		err = mrp_fb_reg(pool, pd, fb, s);
		if (s == slot)
			ret = err;
	}
	/* Dead, or detached since the caller looked it up: no keys to give. */
	if (!ret && slot >= 0 && !fb->mr[slot])
		ret = mrp_slot_dead(pool, slot) ? -ENODEV : -EINVAL;
	if (ret) {
		pthread_mutex_unlock(&pool->lock);
		if (mrp_fb_dereg(pool, fb))
			fb->leak = true;
		mrp_fb_unmap(fb);
		return ret;
	}
	fb->next = pool->fallbacks;
	pool->fallbacks = fb;
	buf->addr = fb->addr;
	buf->size = size;
	buf->lkey = slot >= 0 ? fb->mr[slot]->lkey : 0;
	buf->rkey = slot >= 0 ? mrp_rkey(pool, slot, fb->mr[slot]) : 0;
	pthread_mutex_unlock(&pool->lock);
	mrp_add(&pool->fb_allocs, 1);
	mrp_add(&pool->fb_bytes, size);
	return 0;
}

int mrp_fallback_free(struct mrp_pool *pool, void *addr)
{
	struct mrp_fallback *fb, **pp;

	pthread_mutex_lock(&pool->lock);
	for (pp = &pool->fallbacks; (fb = *pp); pp = &fb->next)
		if (fb->addr == addr)
			break;
	if (fb)
		*pp = fb->next;
	pthread_mutex_unlock(&pool->lock);
	if (!fb)
		return -EINVAL;
	if (mrp_fb_dereg(pool, fb))
		fb->leak = true;
	atomic_fetch_sub(&pool->fb_bytes, fb->size);
	mrp_add(&pool->fb_frees, 1);
	mrp_fb_unmap(fb);
	return 0;
}

/* Fallback buffers are rare: a list walk, not the O(1) map. */
int mrp_fallback_lookup(struct mrp_pool *pool, const void *addr, int slot,
			struct mrp_buf *buf)
{
	uintptr_t p = (uintptr_t)addr;
	struct mrp_fallback *fb;
	int ret = -ENOENT;

	pthread_mutex_lock(&pool->lock);
	for (fb = pool->fallbacks; fb; fb = fb->next) {
		if (p < (uintptr_t)fb->addr || p - (uintptr_t)fb->addr >= fb->size)
			continue;
		buf->addr = fb->addr;
		buf->size = fb->size;
		ret = mrp_fb_keys(pool, fb, slot, buf);
		break;
	}
	pthread_mutex_unlock(&pool->lock);
	return ret;
}

/*
 * Pool close. In a forked child the MRs belong to the parent and the
 * buffers were not inherited (their range may hold something else now):
 * just forget.
 */
void mrp_fallback_release_all(struct mrp_pool *pool, bool forked)
{
	struct mrp_fallback *fb, *next;

	for (fb = pool->fallbacks; fb; fb = next) {
		next = fb->next;
		if (forked) {
			free(fb);
			continue;
		}
		if (mrp_fb_dereg(pool, fb))
			fb->leak = true;
		mrp_fb_unmap(fb);
	}
	pool->fallbacks = NULL;
}
