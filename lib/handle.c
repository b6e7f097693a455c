// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * PD handles: an attached PD named by its key slot instead of its pointer.
 * mrp_alloc() must find the slot of the ibv_pd it is given (pds[0], then a
 * scan); a handle carries the slot, the pool's cache index and the offset
 * of its keys in an arena, so that mrp_alloc_pdh() (alloc.c) goes from the
 * popped buffer to its keys with no compare and no search.
 *
 * Lifetime: a handle belongs to one attachment of a PD. It is created on
 * the first mrp_pd_handle() for that attachment, handed out again until
 * the detach, and freed only when the pool closes: a program that keeps
 * one after the detach holds memory that is still the library's, whose
 * calls fail. The detach clears its bit (mrp_pdh_detach()), which matches
 * no arena's reg_mask, so the fast path falls to the slow path, which
 * finds the handle detached. A PD marked dead needs nothing here: its bit
 * is gone from every arena, and the slow path fails with -ENODEV as
 * mrp_alloc() does.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* A hooked pool's handles' fast_pool: an address no pool has. */
const char mrp_pdh_no_pool;

MRP_EXPORT struct mrp_pdh *mrp_pd_handle(struct mrp_pool *pool, struct ibv_pd *pd)
{
	struct mrp_pdh *h;
	int slot, err = 0;

	if (!pool || !pd) {
		errno = EINVAL;
		return NULL;
	}
	if (mrp_forked(pool)) {
		errno = ECHILD;
		return NULL;
	}
	pthread_mutex_lock(&pool->lock);
	slot = mrp_pd_slot(pool, pd);
	if (slot < 0) {
		err = ENOENT;
		goto unlock;
	}
	h = pool->pdh[slot];
	if (h)
		goto unlock;
	/* a line of its own: read by every allocation through it */
	h = aligned_alloc(64, sizeof(*h));
	if (!h) {
		err = ENOMEM;
		goto unlock;
	}
	memset(h, 0, sizeof(*h));
	h->fast_pool = pool->hooked ? (struct mrp_pool *)&mrp_pdh_no_pool : pool;
	h->idx = pool->idx;
	h->tls_off = pool->tls_off;
	memcpy(h->bin_off, pool->bin_off, sizeof(h->bin_off));
	h->key_off = offsetof(struct mrp_arena, keys) + (size_t)slot * sizeof(struct mrp_key);
	h->pool = pool;
	h->pd = pd;
	atomic_init(&h->bit, 1u << slot);
	h->next = pool->pdhs;
	pool->pdhs = h;
	pool->pdh[slot] = h;
unlock:
	pthread_mutex_unlock(&pool->lock);
	if (err) {
		errno = err;
		return NULL;
	}
	return h;
}

/* The PD of slot is being detached, pool->lock held: its handle stops. */
void mrp_pdh_detach(struct mrp_pool *pool, int slot)
{
	struct mrp_pdh *h = pool->pdh[slot];

	if (!h)
		return;
	atomic_store_explicit(&h->bit, 0, memory_order_relaxed);
	pool->pdh[slot] = NULL;
}

/* Pool close: every handle it handed out. */
void mrp_pdh_free_all(struct mrp_pool *pool)
{
	struct mrp_pdh *h, *next;

	for (h = pool->pdhs; h; h = next) {
		next = h->next;
		free(h);
	}
	pool->pdhs = NULL;
}
