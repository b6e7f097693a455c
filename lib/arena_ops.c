// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The application's arena callbacks (mrp_set_arena_ops): a framework that
 * registers memory in a domain of its own hears of every arena before its
 * buffers are handed out and before it is unmapped. Everything here runs
 * under pool->lock, the lock arenas are published and destroyed under
 * (they are made without it, and told of only when whole: arena.c), so a
 * callback never races the arena list it is told about.
 */
#include <errno.h>

#include "internal.h"

/* add() of one arena: 0, or its negative errno (a positive one is -EIO). */
int mrp_arena_announce(struct mrp_pool *pool, struct mrp_arena *a)
{
	int ret;

	if (!pool->arena_ops_set)
		return 0;
	ret = pool->arena_ops.add(pool->arena_ops.ctx, (void *)a->base, a->size);
	if (ret > 0)
		ret = -EIO;
	a->announced = !ret;
	return ret;
}

/* remove() of an arena add() took, once. */
void mrp_arena_unannounce(struct mrp_pool *pool, struct mrp_arena *a)
{
	if (!a->announced)
		return;
	a->announced = false;
	pool->arena_ops.remove(pool->arena_ops.ctx, (void *)a->base, a->size);
}

static void mrp_arena_ops_clear(struct mrp_pool *pool)
{
	for (struct mrp_arena *a = pool->arenas; a; a = a->next)
		mrp_arena_unannounce(pool, a);
	pool->arena_ops_set = false;
}

MRP_EXPORT int mrp_set_arena_ops(struct mrp_pool *pool,
				 const struct mrp_arena_ops *ops)
{
	int ret = 0;

	if (!pool || (ops && (ops->comp_mask || !ops->add || !ops->remove)))
		return -EINVAL;
	if (mrp_forked(pool))
		return -ECHILD;
	pthread_mutex_lock(&pool->lock);
	if (!ops) {
		if (pool->arena_ops_set)
			mrp_arena_ops_clear(pool);
		else
			ret = -ENOENT;
		goto out;
	}
	if (pool->arena_ops_set) {
		ret = -EEXIST;
		goto out;
	}
	/*
	 * Field by field, the fields of 1.4: a struct assignment would copy
	 * this library's sizeof, and once a field is appended, read past
	 * the end of an older caller's struct. A field added later is read
	 * only when its comp_mask bit says the caller has it.
	 */
	pool->arena_ops.comp_mask = ops->comp_mask;
	pool->arena_ops.add = ops->add;
	pool->arena_ops.remove = ops->remove;
	pool->arena_ops.ctx = ops->ctx;
	pool->arena_ops_set = true;
	/* retired arenas hand out no buffer again: nothing to tell */
	for (struct mrp_arena *a = pool->arenas; a; a = a->next) {
		if (atomic_load(&a->retired))
			continue;
		ret = mrp_arena_announce(pool, a);
		if (ret) {
			mrp_arena_ops_clear(pool);
			break;
		}
	}
out:
	pthread_mutex_unlock(&pool->lock);
	return ret;
}
