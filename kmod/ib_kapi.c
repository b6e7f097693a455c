// SPDX-License-Identifier: GPL-2.0
/*
 * The exported in-kernel API (include/mrpool_kapi.h): a kernel buffer is one
 * pool chunk lent to another module together with an MR of its own: a
 * fresh MR in the device's lend PD over the lent length rounded up to
 * pages, with remote access, deregistered when the buffer is freed. The
 * lend PD holds nothing but such MRs. A chunk whose lend MR may outlive
 * the buffer (a work request that never came back, a refused
 * deregistration) is retired from the pool instead of being reused.
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
	bool vmapped;			/* vaddr is ours to vunmap */
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

struct mrpool_kbuf *mrpool_kbuf_alloc(struct ib_device *device, size_t size)
{
	struct mrpool_kbuf_priv *kb;
	struct mrpool_ib_dev *d;
	struct mrpool_ib_mr *m;
	LIST_HEAD(chunks);
	unsigned int noio;
	bool safe = true;
	int ret;

	might_sleep();
	if (!device || !size || size > mrpool_pool.chunk_size)
		return ERR_PTR(-EINVAL);
	kb = mrpool_kzalloc(sizeof(*kb), GFP_KERNEL);
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

	/* Under no ib lock: growth calls mrpool_ib_chunk_added(). */
	ret = mrpool_pool_take(1, d->node, false, &chunks);
	if (ret)
		goto put_dev;
	kb->chunk = list_first_entry(&chunks, struct mrpool_chunk, link);
	list_del_init(&kb->chunk->link);

	/* Read under the lock: a removal right after frees the lend PD. */
	noio = mrpool_ib_dev_lock(d);
	ret = mrpool_ib_lend(d, kb->chunk, size, MRPOOL_KBUF_ACCESS, &m, &safe);
	if (!ret) {
		kb->lend = m;
		kb->buf.lkey = m->lkey;
		kb->buf.rkey = m->rkey;
		kb->buf.dma_addr = m->iova;
		kb->buf.pd = d->loop[MRPOOL_IB_LEND].pd;
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
	mrpool_ib_dev_unlock(d, noio);
return_chunk:
	if (safe) {
		list_add(&kb->chunk->link, &chunks);
		mrpool_pool_return(&chunks);
	} else {
		mrpool_kbuf_retire(kb->chunk);
	}
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
