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

/* Until no unlocked (de)registration in slot is in flight; pool->lock held. */
static void mrp_detach_wait(struct mrp_pool *pool, int slot)
{
	if (pool->reg_busy[slot])
		mrp_add(&pool->detach_waits, 1);
	while (pool->reg_busy[slot])
		pthread_cond_wait(&pool->created, &pool->lock);
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
 * Fallback buffers (MRPOOL_FALLBACK: arenas ran out) are made, registered,
 * deregistered and unmapped without pool->lock, as arenas are (arena.c,
 * above), and by the same rules, so that a large free, mrp_stats,
 * mrp_pd_dead, attach and fork do not wait for them either: one scheme
 * for both, rather than a second one to reason about.
 *
 *  - Made (mrp_fallback_alloc()): mapped and marked DONTFORK unlocked,
 *    then on pool->fb_flight (the fork child handler unmaps its range,
 *    close waits for it) with the PD slots it is registered in counted in
 *    reg_busy[] (fb->slots: a detach waits for them, as for a creation's),
 *    registered unlocked, PDs attached meanwhile caught up with
 *    (mrp_reg_arena_missing()), and published on pool->fallbacks with its
 *    MRs in the section that releases the slots.
 *  - Registered later (an attach, a lookup's lazy registration): under
 *    the lock the listed buffer is held (fb->busy, as mrp_arena_hold())
 *    and its slot marked reg_pending (a second lookup waits for that MR);
 *    the MR is made unlocked and stored under the lock after.
 *  - Freed (mrp_fallback_free()): claimed under the lock, off
 *    pool->fallbacks onto pool->fb_flight, so no attach nor lookup finds
 *    it any more; the free waits for the holders in flight (their MRs are
 *    then stored in it), takes every MR, counts their slots busy (a
 *    detach waits for those deregistrations), deregisters them unlocked,
 *    and unmaps after leaving fb_flight (mrp_fb_release()).
 *  - Detached (mrp_unreg_slot()): the MR is taken under the lock, the
 *    buffer held, and deregistered unlocked, wherever the buffer is listed
 *    (pool->fallbacks, or fb_flight while its free waits).
 *
 * An MR is always taken out of fb->mr[] under the lock by whoever
 * deregisters it, so no MR goes twice, none is left behind, and the
 * struct is freed only by the free once nobody holds it.
 */

/* Count slots busy for fb (those not counted yet); pool->lock held. */
static void mrp_fb_busy(struct mrp_pool *pool, struct mrp_fallback *fb, uint32_t slots)
{
	for (int s = 0; s < MRP_MAX_PDS; s++)
		if ((slots & ~fb->slots) & (1u << s))
			pool->reg_busy[s]++;
	fb->slots |= slots;
}

/* Release fb's busy slots; pool->lock held. Wakes a detach waiting for them. */
static void mrp_fb_idle(struct mrp_pool *pool, struct mrp_fallback *fb)
{
	for (int s = 0; s < MRP_MAX_PDS; s++)
		if (fb->slots & (1u << s))
			pool->reg_busy[s]--;
	fb->slots = 0;
	pthread_cond_broadcast(&pool->created);
}

static void mrp_fb_unlink(struct mrp_fallback **head, struct mrp_fallback *fb)
{
	struct mrp_fallback **pp;

	for (pp = head; *pp; pp = &(*pp)->next)
		if (*pp == fb) {
			*pp = fb->next;
			break;
		}
	fb->next = NULL;
}

static void mrp_fb_push(struct mrp_fallback **head, struct mrp_fallback *fb)
{
	fb->next = *head;
	*head = fb;
}

/*
 * A fallback buffer with an MR in slot, listed or being freed (not one
 * being made: its slots are counted busy until it is published, so a
 * detach has waited for them); pool->lock held.
 */
static struct mrp_fallback *mrp_fb_with_mr(struct mrp_pool *pool, int slot)
{
	struct mrp_fallback *fb;

	for (fb = pool->fallbacks; fb; fb = fb->next)
		if (fb->mr[slot])
			return fb;
	for (fb = pool->fb_flight; fb; fb = fb->next)
		if (fb->mr[slot])
			return fb;
	return NULL;
}

/* Its MR in the PD of slot, made without pool->lock (the slot kept attached). */
static struct ibv_mr *mrp_fb_reg(struct mrp_pool *pool, struct ibv_pd *pd,
				 struct mrp_fallback *fb, int slot)
{
	return mrp_reg(pool, pd, slot, fb->addr, fb->size, -1, (int)pool->access[slot]);
}

/*
 * The end of a fallback buffer nobody holds (fb->busy 0), on
 * pool->fb_flight: pool->lock held, dropped on return. Every MR is taken
 * in that section and its slot counted busy, deregistered unlocked (a
 * failure in a live PD leaves the memory mapped: the device may still
 * reach it), then DONTFORK set again while the buffer is still on
 * fb_flight (libibverbs' fork support may have cleared it at the
 * deregistration: until the munmap no child must get the range), then off
 * the list and its slots released, and unmapped unlocked.
 */
static void mrp_fb_release(struct mrp_pool *pool, struct mrp_fallback *fb)
{
	struct ibv_mr *mr[MRP_MAX_PDS];
	bool leak = fb->leak;
	uint32_t taken = 0;

	for (int s = 0; s < MRP_MAX_PDS; s++) {
		mr[s] = fb->mr[s];
		fb->mr[s] = NULL;
		if (mr[s])
			taken |= 1u << s;
	}
	mrp_fb_busy(pool, fb, taken);
	pthread_mutex_unlock(&pool->lock);
	for (int s = 0; s < MRP_MAX_PDS; s++)
		if (mr[s] && mrp_dereg_mr(pool, mr[s], s) && !mrp_slot_dead(pool, s))
			leak = true;
	/*
	 * Whether or not this free took an MR: a detach that deregistered
	 * the buffer's last one may have left it DOFORK too.
	 */
	if (!leak)
		madvise(fb->addr, fb->len, MADV_DONTFORK);
	pthread_mutex_lock(&pool->lock);
	mrp_fb_unlink(&pool->fb_flight, fb);
	mrp_fb_idle(pool, fb);
	pthread_mutex_unlock(&pool->lock);
	fb->leak = leak;
	mrp_fb_unmap(fb);
}

/*
 * Every MR of slot, of arenas and fallback buffers, for a detach or a
 * failed attach: each taken under pool->lock (held on entry and on
 * return, dropped meanwhile) and deregistered without it (an ibv_dereg_mr
 * unpins a whole arena), the arena held against trim, the buffer against
 * its free; then a wait for deregistrations in slot others have in
 * flight (a trim's, a fallback buffer's free). The slot stays taken
 * meanwhile (pd_detaching or attaching[]), so nothing registers in it.
 *
 * An MR that fails to go retires its arena, or leaves its fallback buffer
 * mapped for good: the PD's rkey may still reach that memory, so it must
 * not carry other buffers. Not so for a PD marked dead: its device
 * reaches nothing any more (dereg_errors counts what failed).
 */
static void mrp_unreg_slot(struct mrp_pool *pool, int slot)
{
	for (;;) {
		struct ibv_mr *mr, *bind_mr = NULL;
		struct mrp_fallback *fb = NULL;
		struct mrp_arena *a;
		bool held = false;
		int err = 0;

		for (a = pool->arenas; a && !a->mr[slot]; a = a->next)
			;
		if (a) {
			/* not held: retired by a failed trim, listed until the close */
			held = mrp_arena_hold(a);
			/* the bit goes first: no fast path hands out these keys from now */
			atomic_fetch_and_explicit(&a->reg_mask, ~(1u << slot),
						  memory_order_release);
			mr = a->mr[slot];
			bind_mr = a->bind_mr[slot];
			a->mr[slot] = NULL;
			a->bind_mr[slot] = NULL;
			a->keys[slot].lkey = 0;
			a->keys[slot].rkey = 0;
		} else {
			fb = mrp_fb_with_mr(pool, slot);
			if (!fb)
				break;
			fb->busy++;
			mr = fb->mr[slot];
			fb->mr[slot] = NULL;
		}
		pthread_mutex_unlock(&pool->lock);
		if (bind_mr)
			err = mrp_dereg_mr(pool, bind_mr, slot);
		if (mrp_dereg_mr(pool, mr, slot))
			err = -EIO;
		pthread_mutex_lock(&pool->lock);
		if (fb) {
			if (err && !mrp_slot_dead(pool, slot))
				fb->leak = true;
			fb->busy--;
			/* its free may be waiting for it */
			pthread_cond_broadcast(&pool->created);
			continue;
		}
		if (err && !mrp_slot_dead(pool, slot))
			mrp_arena_retire(pool, a);
		if (held)
			mrp_arena_unhold(a);
		mrp_add(&pool->detach_unlocked_deregs, 1);
	}
	mrp_detach_wait(pool, slot);
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
 * growth are found by the next walk. Listed fallback buffers are
 * registered the same way, each held against its free (see above). The
 * slot is published in the same section as the walk that found every
 * arena and fallback buffer registered. A failure takes back what the
 * attach registered, unlocked as a detach does (mrp_unreg_slot()). Not a
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
		if (!a) {
			for (fb = pool->fallbacks; fb && fb->mr[slot]; fb = fb->next)
				;
			if (!fb)
				break;
			/* held: its free waits for this MR, then takes it */
			fb->busy++;
			fb->reg_pending |= bit;
			pthread_mutex_unlock(&pool->lock);
			mr = mrp_fb_reg(pool, pd, fb, slot);
			ret = mr ? 0 : errno ? -errno : -EIO;
			pthread_mutex_lock(&pool->lock);
			fb->reg_pending &= ~bit;
			fb->busy--;
			fb->mr[slot] = mr;
			pthread_cond_broadcast(&pool->created);
			if (ret)
				break;
			mrp_add(&pool->attach_unlocked_regs, 1);
			continue;
		}
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
	if (ret) {
		/* the failure path: what it made goes unlocked, the slot still taken */
		mrp_unreg_slot(pool, slot);
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

MRP_EXPORT int mrp_detach_pd(struct mrp_pool *pool, struct ibv_pd *pd)
{
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
	 * pool->lock (arena.c, mrp_reg_lazy(), fallback buffers being made
	 * or looked up), and trims deregistering from it (depot.c), end
	 * first: the caller may deallocate the PD once this returns, and the
	 * MRs made, published by then, go below with the others. No new
	 * registration starts meanwhile (pd_detaching), so the wait is for
	 * the calls in flight only; the slot stays taken through it.
	 */
	pool->pd_detaching |= 1u << slot;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	mrp_detach_wait(pool, slot);
	atomic_store(&pool->pds[slot], NULL);
	mrp_pdh_detach(pool, slot);
	mrp_mw_release_pd_locked(pool, pd);
	/*
	 * Each arena's and fallback buffer's MRs go without pool->lock
	 * (mrp_unreg_slot()); the slot stays taken (pd_detaching: no attach
	 * reuses it, no creation registers in it) until the last is gone,
	 * those a trim or a fallback buffer's free deregisters meanwhile
	 * included. The detach itself completes (dereg_errors counts what
	 * failed).
	 */
	mrp_unreg_slot(pool, slot);
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
 * PD slots a fallback buffer is made in: attached, neither dead nor being
 * detached. pool->lock held.
 */
static uint32_t mrp_fb_slots(struct mrp_pool *pool)
{
	uint32_t skip = atomic_load(&pool->pd_dead) | pool->pd_detaching;
	uint32_t slots = 0;

	for (int s = 0; s < MRP_MAX_PDS; s++)
		if (atomic_load(&pool->pds[s]) && !(skip & (1u << s)))
			slots |= 1u << s;
	return slots;
}

/*
 * A new fallback buffer's MRs in slots, without pool->lock (the slots
 * counted busy), into mr[]: first (the caller's PD, if in slots) must take
 * it, else its error and no other is tried; the others best effort, as
 * for arenas (a PD refusing lacks its keys, tried again on lookup).
 */
static int mrp_fb_reg_slots(struct mrp_pool *pool, struct mrp_fallback *fb,
			    uint32_t slots, int first, struct ibv_mr *mr[MRP_MAX_PDS])
{
	if (first >= 0 && (slots & (1u << first))) {
		mr[first] = mrp_fb_reg(pool, atomic_load(&pool->pds[first]), fb, first);
		if (!mr[first])
			return errno ? -errno : -EIO;
	}
	for (int s = 0; s < MRP_MAX_PDS; s++)
		if (s != first && (slots & (1u << s)) && !mrp_slot_dead(pool, s))
			mr[s] = mrp_fb_reg(pool, atomic_load(&pool->pds[s]), fb, s);
	return 0;
}

/*
 * Arenas ran out and the caller allows it: a mapping of its own +
 * registration, counted. Like arenas, not inherited by a child, and made
 * without pool->lock (see above). Not a cancellation point: a caller
 * cancelled inside would leave its slots busy for ever.
 */
int mrp_fallback_alloc(struct mrp_pool *pool, size_t size, size_t align,
		       int slot, struct mrp_buf *buf)
{
	size_t page = mrp_os_page_size();
	size_t al = align > page ? align : page;
	struct mrp_fallback *fb;
	int ret = 0, cancel;

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
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	pthread_mutex_lock(&pool->lock);
	/* Dead, or detached since the caller looked it up: no keys to give. */
	if (slot >= 0 && mrp_slot_dead(pool, slot))
		ret = -ENODEV;
	else if (slot >= 0 && !(mrp_fb_slots(pool) & (1u << slot)))
		ret = -EINVAL;
	if (ret) {
		pthread_mutex_unlock(&pool->lock);
		pthread_setcancelstate(cancel, NULL);
		mrp_fb_unmap(fb);
		return ret;
	}
	mrp_fb_push(&pool->fb_flight, fb);
	mrp_fb_busy(pool, fb, mrp_fb_slots(pool));
	/*
	 * Registered unlocked; PDs attached meanwhile too, counted busy as
	 * the first ones, until a look under the lock finds none left (an
	 * attach publishes its PD in the section that found every listed
	 * buffer registered: this one is not listed yet).
	 */
	for (uint32_t more = fb->slots; more;) {
		struct ibv_mr *mr[MRP_MAX_PDS] = { NULL };

		pthread_mutex_unlock(&pool->lock);
		ret = mrp_fb_reg_slots(pool, fb, more, slot, mr);
		pthread_mutex_lock(&pool->lock);
		for (int s = 0; s < MRP_MAX_PDS; s++)
			if (mr[s])
				fb->mr[s] = mr[s];
		if (ret)
			break;
		more = mrp_reg_arena_missing(pool, fb->slots);
		mrp_fb_busy(pool, fb, more);
	}
	/* marked dead meanwhile: its MR stays for the detach, as in arenas */
	if (!ret && slot >= 0 && mrp_slot_dead(pool, slot))
		ret = -ENODEV;
	if (ret) {
		mrp_fb_release(pool, fb);
		pthread_setcancelstate(cancel, NULL);
		return ret;
	}
	mrp_fb_unlink(&pool->fb_flight, fb);
	mrp_fb_idle(pool, fb);
	mrp_fb_push(&pool->fallbacks, fb);
	buf->addr = fb->addr;
	buf->size = size;
	buf->lkey = slot >= 0 ? fb->mr[slot]->lkey : 0;
	buf->rkey = slot >= 0 ? mrp_rkey(pool, slot, fb->mr[slot]) : 0;
	pthread_mutex_unlock(&pool->lock);
	pthread_setcancelstate(cancel, NULL);
	mrp_add(&pool->fb_allocs, 1);
	mrp_add(&pool->fb_bytes, size);
	return 0;
}

/*
 * Claimed under pool->lock (of two frees of one buffer exactly one finds
 * it), then released without it once no attach or lookup registering it
 * holds it (see above). Not a cancellation point.
 */
int mrp_fallback_free(struct mrp_pool *pool, void *addr)
{
	struct mrp_fallback *fb;
	int cancel;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	pthread_mutex_lock(&pool->lock);
	for (fb = pool->fallbacks; fb; fb = fb->next)
		if (fb->addr == addr)
			break;
	if (!fb) {
		pthread_mutex_unlock(&pool->lock);
		pthread_setcancelstate(cancel, NULL);
		return -EINVAL;
	}
	mrp_fb_unlink(&pool->fallbacks, fb);
	mrp_fb_push(&pool->fb_flight, fb);
	if (fb->busy)
		mrp_add(&pool->fb_free_waits, 1);
	while (fb->busy)
		pthread_cond_wait(&pool->created, &pool->lock);
	atomic_fetch_sub(&pool->fb_bytes, fb->size);
	mrp_add(&pool->fb_frees, 1);
	mrp_fb_release(pool, fb);
	pthread_setcancelstate(cancel, NULL);
	return 0;
}

/*
 * Fallback buffers are rare: a list walk, not the O(1) map. Keys it lacks
 * are registered now, without pool->lock, as mrp_reg_lazy() does for an
 * arena: the buffer held against its free, the slot counted busy against
 * a detach and marked reg_pending (a second caller waits for this MR and
 * looks again); a PD marked dead meanwhile gets no keys (its MR stays for
 * the detach). Not a cancellation point.
 */
int mrp_fallback_lookup(struct mrp_pool *pool, const void *addr, int slot,
			struct mrp_buf *buf)
{
	uintptr_t p = (uintptr_t)addr;
	struct ibv_pd *pd = NULL;
	struct mrp_fallback *fb;
	struct ibv_mr *mr;
	int ret, cancel;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	pthread_mutex_lock(&pool->lock);
	for (;;) {
		for (fb = pool->fallbacks; fb; fb = fb->next)
			if (p >= (uintptr_t)fb->addr && p - (uintptr_t)fb->addr < fb->size)
				break;
		ret = -ENOENT;
		if (!fb)
			break;
		buf->addr = fb->addr;
		buf->size = fb->size;
		buf->lkey = 0;
		buf->rkey = 0;
		ret = 0;
		if (slot < 0)
			break;
		pd = atomic_load(&pool->pds[slot]);
		if (mrp_slot_dead(pool, slot))
			ret = -ENODEV;
		else if (!pd || (pool->pd_detaching & (1u << slot)))
			ret = -EINVAL;
		if (ret || fb->mr[slot])
			break;
		if (!(fb->reg_pending & (1u << slot)))
			break;
		/* another caller is registering it: its MR serves this one */
		mrp_add(&pool->lazy_waits, 1);
		pthread_cond_wait(&pool->created, &pool->lock);
	}
	if (!ret && slot >= 0 && !fb->mr[slot]) {
		fb->busy++;
		fb->reg_pending |= 1u << slot;
		pool->reg_busy[slot]++;
		pthread_mutex_unlock(&pool->lock);
		mr = mrp_fb_reg(pool, pd, fb, slot);
		ret = mr ? 0 : errno ? -errno : -EIO;
		pthread_mutex_lock(&pool->lock);
		fb->mr[slot] = mr;
		fb->reg_pending &= ~(1u << slot);
		fb->busy--;
		pool->reg_busy[slot]--;
		if (!ret && mrp_slot_dead(pool, slot))
			ret = -ENODEV;
		/* its free, a detach, callers waiting for this MR */
		pthread_cond_broadcast(&pool->created);
	}
	if (!ret && slot >= 0) {
		buf->lkey = fb->mr[slot]->lkey;
		buf->rkey = mrp_rkey(pool, slot, fb->mr[slot]);
	}
	pthread_mutex_unlock(&pool->lock);
	pthread_setcancelstate(cancel, NULL);
	return ret;
}

/*
 * Pool close, after the buffers in flight are done (mrp_arenas_creating_wait()).
 * In a forked child the MRs belong to the parent and the buffers were not
 * inherited (their range may hold something else now): just forget, those
 * the parent's threads were making or freeing too.
 */
void mrp_fallback_release_all(struct mrp_pool *pool, bool forked)
{
	struct mrp_fallback *fb, *next;

	for (fb = pool->fb_flight; fb; fb = next) {
		next = fb->next;
		free(fb);
	}
	pool->fb_flight = NULL;
	for (fb = pool->fallbacks; fb; fb = next) {
		next = fb->next;
		if (forked) {
			free(fb);
			continue;
		}
		for (int s = 0; s < MRP_MAX_PDS; s++)
			if (fb->mr[s] && mrp_dereg_mr(pool, fb->mr[s], s) &&
			    !mrp_slot_dead(pool, s))
				fb->leak = true;
		mrp_fb_unmap(fb);
	}
	pool->fallbacks = NULL;
}
