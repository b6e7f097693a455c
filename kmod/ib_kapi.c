// SPDX-License-Identifier: GPL-2.0
/*
 * The exported in-kernel API (include/mrpool_kapi.h): a kernel buffer is one
 * pool chunk lent to another module together with the cached MR of that
 * chunk on one device, re-registered with remote access and a new key byte
 * for the loan and back to local-only with another key byte on return.
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
	bool vmapped;			/* vaddr is ours to vunmap */
};

size_t mrpool_kbuf_max_size(void)
{
	return mrpool_pool.chunk_size;
}
EXPORT_SYMBOL_GPL(mrpool_kbuf_max_size);

/* The chunk's MR on @d, lent with remote access; NULL entry on failure. */
static int mrpool_kbuf_lend(struct mrpool_kbuf_priv *kb)
{
	struct mrpool_ib_dev *d = kb->dev;
	struct mrpool_ib_mr *m = NULL;
	int ret;

	lockdep_assert_held(&mrpool_ib_lock);
	if (d->state != MRPOOL_IB_READY)
		return -ENODEV;
	ret = mrpool_ib_reg_chunk(d, kb->chunk, &m);
	if (ret)
		return ret;
	ret = mrpool_ib_rereg(d, m, MRPOOL_KBUF_ACCESS);
	if (ret) {
		xa_erase(&d->mrs, mrpool_ib_chunk_key(kb->chunk));
		mrpool_ib_unreg(d, m);
		return ret;
	}
	m->lent = true;
	kb->buf.lkey = m->mr->lkey;
	kb->buf.rkey = m->mr->rkey;
	kb->buf.dma_addr = m->mr->iova;
	kb->buf.pd = d->pd;
	return 0;
}

/* Back to local-only under a new key; an entry that cannot be is dropped. */
static void mrpool_kbuf_unlend(struct mrpool_kbuf_priv *kb)
{
	struct mrpool_ib_dev *d = kb->dev;
	unsigned long key = mrpool_ib_chunk_key(kb->chunk);
	struct mrpool_ib_mr *m;

	lockdep_assert_held(&mrpool_ib_lock);
	if (d->state == MRPOOL_IB_REMOVED)
		return;		/* teardown dropped every entry */
	m = xa_load(&d->mrs, key);
	if (!m)
		return;
	m->lent = false;
	if (mrpool_ib_rereg(d, m, IB_ACCESS_LOCAL_WRITE)) {
		xa_erase(&d->mrs, key);
		mrpool_ib_unreg(d, m);
	}
}

static void *mrpool_kbuf_map(struct mrpool_kbuf_priv *kb)
{
	struct mrpool_chunk *c = kb->chunk;

	if (c->blocks[mrpool_pool.chunk_order] == 1)
		return page_address(c->pages[0]);
	kb->vmapped = true;
	return vmap(c->pages, mrpool_pool.chunk_pages, VM_MAP, PAGE_KERNEL);
}

struct mrpool_kbuf *mrpool_kbuf_alloc(struct ib_device *device, size_t size)
{
	struct mrpool_kbuf_priv *kb;
	struct mrpool_ib_dev *d;
	LIST_HEAD(chunks);
	int ret;

	might_sleep();
	if (!device || !size || size > mrpool_pool.chunk_size)
		return ERR_PTR(-EINVAL);
	kb = kzalloc(sizeof(*kb), GFP_KERNEL);
	if (!kb)
		return ERR_PTR(-ENOMEM);

	mutex_lock(&mrpool_ib_lock);
	d = mrpool_ib_dev_find(device);
	if (d && d->state == MRPOOL_IB_READY)
		kobject_get(&d->kobj);
	else
		d = NULL;
	mutex_unlock(&mrpool_ib_lock);
	if (!d) {
		ret = -ENODEV;
		goto free_kb;
	}
	kb->dev = d;

	/* Not under mrpool_ib_lock: growth calls mrpool_ib_chunk_added(). */
	ret = mrpool_pool_take(1, d->node, false, &chunks);
	if (ret)
		goto put_dev;
	kb->chunk = list_first_entry(&chunks, struct mrpool_chunk, link);

	mutex_lock(&mrpool_ib_lock);
	ret = mrpool_kbuf_lend(kb);
	mutex_unlock(&mrpool_ib_lock);
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
	mutex_lock(&mrpool_ib_lock);
	mrpool_kbuf_unlend(kb);
	mutex_unlock(&mrpool_ib_lock);
return_chunk:
	mrpool_pool_return(&chunks);
put_dev:
	kobject_put(&d->kobj);
free_kb:
	kfree(kb);
	return ERR_PTR(ret);
}
EXPORT_SYMBOL_GPL(mrpool_kbuf_alloc);

void mrpool_kbuf_free(struct mrpool_kbuf *buf)
{
	struct mrpool_kbuf_priv *kb;
	struct mrpool_ib_dev *d;
	LIST_HEAD(chunks);

	if (IS_ERR_OR_NULL(buf))
		return;
	might_sleep();
	kb = container_of(buf, struct mrpool_kbuf_priv, buf);
	d = kb->dev;
	if (kb->vmapped)
		vunmap(buf->vaddr);

	mutex_lock(&mrpool_ib_lock);
	mrpool_kbuf_unlend(kb);
	mutex_unlock(&mrpool_ib_lock);

	list_add(&kb->chunk->link, &chunks);
	mrpool_pool_return(&chunks);
	atomic_dec(&d->kbufs);
	atomic_dec(&mrpool_ib_stats.kbufs);
	kobject_put(&d->kobj);
	kfree(kb);
	module_put(THIS_MODULE);
}
EXPORT_SYMBOL_GPL(mrpool_kbuf_free);
