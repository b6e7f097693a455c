// SPDX-License-Identifier: GPL-2.0
/*
 * The exported in-kernel API (include/mrpool_kapi.h): a kernel buffer is one
 * pool chunk lent to another module together with an MR of its own: a
 * fresh MR over the lent length rounded up to pages, with remote access,
 * deregistered when the buffer is freed. It is made in the device's shared
 * lend PD (mrpool_kbuf_alloc()) or in a session's PD
 * (mrpool_kbuf_session_alloc()); neither holds any other MR of mrpool's.
 * A chunk whose lend MR may outlive the buffer (a work request that never
 * came back, a refused deregistration) is retired from the pool instead of
 * being reused.
 *
 * Every call may come from a reclaim or writeback path: the device's lock
 * is taken with mrpool_ib_dev_lock() (a NOIO scope, see ib.h).
 */
#include "ib.h"

#include <linux/module.h>
#include <linux/slab.h>
#include <linux/mm.h>
#include <linux/vmalloc.h>
#include <linux/err.h>
#include <mrpool_kapi.h>

#define MRPOOL_KBUF_ACCESS	(IB_ACCESS_LOCAL_WRITE | \
				 IB_ACCESS_REMOTE_READ | \
				 IB_ACCESS_REMOTE_WRITE)

struct mrpool_kbuf_priv {
	struct mrpool_kbuf buf;		/* what the borrower sees */
	struct mrpool_chunk *chunk;
	struct mrpool_ib_dev *dev;	/* a kobject reference */
	struct mrpool_ib_mr *lend;	/* the buffer's MR, under dev->lock */
	struct mrpool_ib_loop *session;	/* its session's loop (one of its
					 * users), NULL for the shared PD
					 */
	bool vmapped;			/* vaddr is ours to vunmap */
};

struct mrpool_kbuf_session_priv {
	struct mrpool_kbuf_session s;	/* what the borrower sees */
	struct mrpool_ib_dev *dev;	/* a kobject reference */
	struct mrpool_ib_loop *loop;	/* one user of it */
};

size_t mrpool_kbuf_max_size(void)
{
	return mrpool_pool.chunk_size;
}
EXPORT_SYMBOL_GPL(mrpool_kbuf_max_size);

/*
 * A used chunk an MR may still reach: out of the cache everywhere, then
 * out of the pool for good.
 */
static void mrpool_kbuf_retire(struct mrpool_chunk *c)
{
	list_del_init(&c->link);
	mrpool_ib_chunk_removing(c);
	mrpool_pool_retire(c);
}

static void *mrpool_kbuf_map(struct mrpool_kbuf_priv *kb)
{
	struct mrpool_chunk *c = kb->chunk;

	if (c->blocks[mrpool_pool.chunk_order] == 1)
		return page_address(c->pages[0]);
	kb->vmapped = true;
	return vmap(c->pages, mrpool_pool.chunk_pages, VM_MAP, PAGE_KERNEL);
}

/* The device behind @device with a reference, if READY; else NULL. */
static struct mrpool_ib_dev *mrpool_kbuf_dev_get(struct ib_device *device)
{
	struct mrpool_ib_dev *d;

	mutex_lock(&mrpool_ib_lock);
	d = mrpool_ib_dev_find(device);
	if (d && d->state == MRPOOL_IB_READY)
		kobject_get(&d->kobj);
	else
		d = NULL;
	mutex_unlock(&mrpool_ib_lock);
	return d;
}

/*
 * Lend a chunk with @size bytes registered in the PD of @session's loop,
 * or in the device's shared lend PD (@session NULL). Consumes the caller's
 * reference on @d, which the buffer keeps.
 */
static struct mrpool_kbuf *mrpool_kbuf_lend(struct mrpool_ib_dev *d,
					    struct mrpool_ib_loop *session,
					    size_t size)
{
	struct mrpool_kbuf_priv *kb;
	struct mrpool_ib_loop *l;
	struct mrpool_ib_mr *m;
	LIST_HEAD(chunks);
	unsigned int noio;
	bool safe = true;
	int ret;

	kb = mrpool_kzalloc(sizeof(*kb), GFP_KERNEL);
	if (!kb) {
		ret = -ENOMEM;
		goto put_dev;
	}
	kb->dev = d;

	/* Under no ib lock: growth calls mrpool_ib_chunk_added(). */
	ret = mrpool_pool_take(1, d->node, false, &chunks);
	if (ret)
		goto free_kb;
	kb->chunk = list_first_entry(&chunks, struct mrpool_chunk, link);
	list_del_init(&kb->chunk->link);

	/* Read under the lock: a removal right after frees the PD. */
	noio = mrpool_ib_dev_lock(d);
	l = session ? session : &d->loop[MRPOOL_IB_LEND];
	ret = mrpool_ib_lend(d, l, kb->chunk, size, MRPOOL_KBUF_ACCESS, &m,
			     &safe);
	if (!ret) {
		kb->lend = m;
		kb->buf.lkey = m->lkey;
		kb->buf.rkey = m->rkey;
		kb->buf.dma_addr = m->iova;
		kb->buf.pd = l->pd;
		if (session) {
			session->users++;
			kb->session = session;
		}
	}
	mrpool_ib_dev_unlock(d, noio);
	if (ret)
		goto return_chunk;

	kb->buf.vaddr = mrpool_kbuf_map(kb);
	if (!kb->buf.vaddr) {
		ret = -ENOMEM;
		goto unlend;
	}
	kb->buf.size = size;
	/* The chunk is the borrower's until mrpool_kbuf_free(). */
	__module_get(THIS_MODULE);
	atomic_inc(&d->kbufs);
	atomic_inc(&mrpool_ib_stats.kbufs);
	return &kb->buf;

unlend:
	noio = mrpool_ib_dev_lock(d);
	safe = mrpool_ib_unlend(d, kb->lend);
	if (session)
		mrpool_ib_loop_put(d, session);
	mrpool_ib_dev_unlock(d, noio);
return_chunk:
	if (safe) {
		list_add(&kb->chunk->link, &chunks);
		mrpool_pool_return(&chunks);
	} else {
		mrpool_kbuf_retire(kb->chunk);
	}
free_kb:
	kfree(kb);
put_dev:
	kobject_put(&d->kobj);
	return ERR_PTR(ret);
}

struct mrpool_kbuf *mrpool_kbuf_alloc(struct ib_device *device, size_t size)
{
	struct mrpool_ib_dev *d;

	might_sleep();
	if (!device || !size || size > mrpool_pool.chunk_size)
		return ERR_PTR(-EINVAL);
	d = mrpool_kbuf_dev_get(device);
	if (!d)
		return ERR_PTR(-ENODEV);
	return mrpool_kbuf_lend(d, NULL, size);
}
EXPORT_SYMBOL_GPL(mrpool_kbuf_alloc);

struct mrpool_kbuf *mrpool_kbuf_session_alloc(struct mrpool_kbuf_session *s,
					      size_t size)
{
	struct mrpool_kbuf_session_priv *sp;

	might_sleep();
	if (IS_ERR_OR_NULL(s) || !size || size > mrpool_pool.chunk_size)
		return ERR_PTR(-EINVAL);
	sp = container_of(s, struct mrpool_kbuf_session_priv, s);
	kobject_get(&sp->dev->kobj);
	return mrpool_kbuf_lend(sp->dev, sp->loop, size);
}
EXPORT_SYMBOL_GPL(mrpool_kbuf_session_alloc);

struct mrpool_kbuf_session *
mrpool_kbuf_session_create(struct ib_device *device, struct ib_pd *pd)
{
	struct mrpool_kbuf_session_priv *sp;
	struct rdma_ah_attr ah;
	struct mrpool_ib_loop *l;
	struct mrpool_ib_dev *d;
	unsigned int noio;
	int ret;

	might_sleep();
	if (!device || (pd && pd->device != device))
		return ERR_PTR(-EINVAL);
	sp = mrpool_kzalloc(sizeof(*sp), GFP_KERNEL);
	if (!sp)
		return ERR_PTR(-ENOMEM);
	d = mrpool_kbuf_dev_get(device);
	if (!d) {
		ret = -ENODEV;
		goto free_sp;
	}
	/* Not under the device's lock (see there); @device is the caller's. */
	ret = mrpool_ib_self_ah(device, d->port, &ah);
	if (ret)
		goto put_dev;
	noio = mrpool_ib_dev_lock(d);
	l = mrpool_ib_loop_add(d, pd, &ah);
	if (!IS_ERR(l))
		sp->s.pd = l->pd;
	mrpool_ib_dev_unlock(d, noio);
	if (IS_ERR(l)) {
		ret = PTR_ERR(l);
		goto put_dev;
	}
	sp->s.device = device;
	sp->dev = d;
	sp->loop = l;
	/* Held until mrpool_kbuf_session_destroy(). */
	__module_get(THIS_MODULE);
	return &sp->s;

put_dev:
	kobject_put(&d->kobj);
free_sp:
	kfree(sp);
	return ERR_PTR(ret);
}
EXPORT_SYMBOL_GPL(mrpool_kbuf_session_create);

void mrpool_kbuf_session_destroy(struct mrpool_kbuf_session *s)
{
	struct mrpool_kbuf_session_priv *sp;
	struct mrpool_ib_dev *d;
	unsigned int noio;

	if (IS_ERR_OR_NULL(s))
		return;
	might_sleep();
	sp = container_of(s, struct mrpool_kbuf_session_priv, s);
	d = sp->dev;
	/* Buffers still out keep the loop; the last one frees it. */
	noio = mrpool_ib_dev_lock(d);
	mrpool_ib_loop_put(d, sp->loop);
	mrpool_ib_dev_unlock(d, noio);
	kobject_put(&d->kobj);
	kfree(sp);
	module_put(THIS_MODULE);
}
EXPORT_SYMBOL_GPL(mrpool_kbuf_session_destroy);

void mrpool_kbuf_free(struct mrpool_kbuf *buf)
{
	struct mrpool_kbuf_priv *kb;
	struct mrpool_ib_dev *d;
	LIST_HEAD(chunks);
	unsigned int noio;
	bool safe;

	if (IS_ERR_OR_NULL(buf))
		return;
	might_sleep();
	kb = container_of(buf, struct mrpool_kbuf_priv, buf);
	d = kb->dev;
	if (kb->vmapped)
		vunmap(buf->vaddr);

	noio = mrpool_ib_dev_lock(d);
	safe = mrpool_ib_unlend(d, kb->lend);
	if (kb->session)
		mrpool_ib_loop_put(d, kb->session);
	mrpool_ib_dev_unlock(d, noio);

	if (safe) {
		list_add(&kb->chunk->link, &chunks);
		mrpool_pool_return(&chunks);
	} else {
		pr_warn("%s: a kernel buffer's MR may still be live: its chunk is retired\n",
			d->name);
		mrpool_kbuf_retire(kb->chunk);
	}
	atomic_dec(&d->kbufs);
	atomic_dec(&mrpool_ib_stats.kbufs);
	kobject_put(&d->kobj);
	kfree(kb);
	module_put(THIS_MODULE);
}
EXPORT_SYMBOL_GPL(mrpool_kbuf_free);
