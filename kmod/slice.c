// SPDX-License-Identifier: GPL-2.0
/*
 * Clients (open files) and the slices they own: allocation with its limits
 * (max_user_mb and RLIMIT_MEMLOCK, charged per chunk by tenant.c), ids and
 * mmap tokens, free, close, and release of a slice's chunks once neither
 * its owner nor any VMA or dma-buf refers to it.
 *
 * A client outlives its file while anything of it remains: each slice and
 * the map file (which every VMA holds instead of the device file) hold a
 * client reference. Closing the device file therefore runs even while
 * slices are mapped or exported, and returns every other slice at once.
 */
#include "mrpool.h"

#include <linux/slab.h>
#include <linux/mm.h>
#include <linux/file.h>
#include <linux/nodemask.h>
#include <linux/string.h>

/* Every client, for debugfs; see mrpool.h for the lock order. */
LIST_HEAD(mrpool_clients);
/* Protects mrpool_clients. */
DEFINE_MUTEX(mrpool_clients_lock);

/* Live slices by id; an id is also the slice's mmap token. */
DEFINE_XARRAY_ALLOC1(mrpool_slices);
/*
 * Next id for xa_alloc_cyclic: ids are not reused soon after a free.
 * xa_alloc_cyclic() moves it under the xarray's lock, so debugfs reads and
 * writes it under that lock too; an ALLOC that drops the lock to allocate
 * a node may still overwrite a write made meanwhile (a test knob: fine).
 */
static u32 mrpool_next_slice_id;

u32 mrpool_slice_id_cursor(void)
{
	u32 next;

	xa_lock(&mrpool_slices);
	next = mrpool_next_slice_id;
	xa_unlock(&mrpool_slices);
	return next;
}

/* Tests of the wrap: any value is safe; past the limit, the lowest free id. */
void mrpool_slice_id_cursor_set(u32 next)
{
	xa_lock(&mrpool_slices);
	mrpool_next_slice_id = next;
	xa_unlock(&mrpool_slices);
}

/* Called from open(), by a task with an mm. */
struct mrpool_client *mrpool_client_create(void)
{
	struct mrpool_client *client;
	struct file *map_file;

	client = mrpool_kzalloc(sizeof(*client), GFP_KERNEL_ACCOUNT);
	if (!client)
		return NULL;
	client->tenant = mrpool_tenant_get();
	if (!client->tenant)
		goto free_client;
	kref_init(&client->ref);
	/* Held so that no later process can reuse the address. */
	mmgrab(current->mm);
	client->mm = current->mm;
	mutex_init(&client->lock);
	INIT_LIST_HEAD(&client->slices);
	client->pid = current->tgid;
	get_task_comm(client->comm, current);

	/* It takes a client reference, dropped by its own release. */
	map_file = mrpool_mapfile_create(client);
	if (IS_ERR(map_file))
		goto drop_mm;
	client->map_file = map_file;

	mutex_lock(&mrpool_clients_lock);
	list_add_tail(&client->node, &mrpool_clients);
	mutex_unlock(&mrpool_clients_lock);
	return client;

drop_mm:
	mmdrop(client->mm);
	mrpool_tenant_put(client->tenant);
free_client:
	kfree(client);
	return NULL;
}

static void mrpool_client_free(struct kref *ref)
{
	struct mrpool_client *client = container_of(ref, struct mrpool_client,
						    ref);

	mutex_lock(&mrpool_clients_lock);
	list_del(&client->node);
	mutex_unlock(&mrpool_clients_lock);
	WARN_ON(!list_empty(&client->slices) || client->bytes);
	/* Unlisted and unmapped: nothing reads the stats page any more. */
	mrpool_client_stats_release(client);
	mrpool_tenant_put(client->tenant);
	mmdrop(client->mm);
	kfree(client);
}

void mrpool_client_put(struct mrpool_client *client)
{
	kref_put(&client->ref, mrpool_client_free);
}

/* Chunk list to array, in list order, and tag the chunks with the owner. */
static int mrpool_slice_index(struct mrpool_slice *s)
{
	struct mrpool_chunk *c;
	unsigned int i = 0;

	s->chunkv = mrpool_kvcalloc(s->nr_chunks, sizeof(*s->chunkv),
				    GFP_KERNEL_ACCOUNT);
	if (!s->chunkv)
		return -ENOMEM;
	list_for_each_entry(c, &s->chunks, link) {
		WRITE_ONCE(c->owner, s->id);
		s->chunkv[i++] = c;
	}
	return 0;
}

static int mrpool_alloc_check(const struct mrpool_alloc *arg)
{
	if (arg->flags & ~MRPOOL_ALLOC_VALID_FLAGS)
		return -EINVAL;
	if (arg->pad || memchr_inv(arg->reserved, 0, sizeof(arg->reserved)))
		return -EINVAL;
	if (!arg->bytes)
		return -EINVAL;
	if (arg->node != MRPOOL_NODE_ANY &&
	    (arg->node < 0 || arg->node >= MAX_NUMNODES ||
	     !node_online(arg->node)))
		return -EINVAL;
	return 0;
}

/**
 * mrpool_slice_alloc - ALLOC: take a slice for @client
 * @client: the calling file
 * @arg: the request; out fields filled on success
 *
 * The charge comes first, so a user over its limits never makes the pool
 * grow; the chunks are taken without client->lock (growth registers them
 * on every RDMA device), and published under it.
 *
 * Return: 0; -EINVAL for a bad request; -EDQUOT past max_user_mb or a
 * cgroup's quota (quota.c);
 * -ENOMEM past RLIMIT_MEMLOCK, max_mb or available memory; -ENOSPC when
 * every slice id is in use.
 */
int mrpool_slice_alloc(struct mrpool_client *client, struct mrpool_alloc *arg)
{
	struct mrpool_pool *p = &mrpool_pool;
	struct mrpool_tenant *t = client->tenant;
	struct mrpool_quota_charge *qc;
	struct mrpool_slice *s;
	struct mrpool_chunk *c;
	bool memlock, covered;
	int nid, ret;
	u64 len;

	ret = mrpool_alloc_check(arg);
	if (ret)
		return ret;
	if (arg->bytes > mrpool_max_bytes()) {
		/* The caller's error, not exhaustion: no netlink event. */
		atomic64_inc(&mrpool_stats.fail_nomem);
		return -ENOMEM;
	}
	if (mrpool_should_fail(&mrpool_fail_slice_alloc)) {
		atomic64_inc(&mrpool_stats.fail_injected);
		return -ENOMEM;
	}
	len = round_up(arg->bytes, (u64)p->chunk_size);
	nid = arg->node == MRPOOL_NODE_ANY ? mrpool_pool_node() : arg->node;

	s = mrpool_kzalloc(sizeof(*s), GFP_KERNEL_ACCOUNT);
	if (!s)
		return -ENOMEM;
	kref_init(&s->ref);
	INIT_LIST_HEAD(&s->chunks);
	init_rwsem(&s->mem_sem);
	mutex_init(&s->export_lock);
	INIT_LIST_HEAD(&s->exports);
	INIT_LIST_HEAD(&s->dma_mapv);
	s->length = len;
	s->nr_chunks = div64_u64(len, p->chunk_size);
	s->fork_copy = arg->flags & MRPOOL_ALLOC_FORK_COPY;

	ret = mrpool_quota_charge(s->nr_chunks, &qc, &covered);
	if (ret) {
		atomic64_inc(ret == -EDQUOT ? &mrpool_stats.fail_quota :
			     &mrpool_stats.fail_nomem);
		goto free_slice;
	}
	ret = mrpool_tenant_charge(t, s->nr_chunks, covered, &memlock);
	if (ret) {
		atomic64_inc(ret == -EDQUOT ? &mrpool_stats.fail_quota :
			     &mrpool_stats.fail_memlock);
		goto uncharge_quota;
	}
	ret = mrpool_pool_take(s->nr_chunks, nid,
			       arg->flags & MRPOOL_ALLOC_NODE_STRICT,
			       &s->chunks);
	if (ret) {
		atomic64_inc(&mrpool_stats.fail_nomem);
		goto uncharge_tenant;
	}
	/* From here each chunk carries its share of both charges. */
	list_for_each_entry(c, &s->chunks, link)
		mrpool_chunk_charge(c, t, memlock, qc);

	/* Set before the xarray publishes @s: lookups compare it. */
	s->client = client;
	mutex_lock(&client->lock);
	ret = xa_alloc_cyclic(&mrpool_slices, &s->id, s,
			      XA_LIMIT(1, MRPOOL_MAX_SLICE_ID),
			      &mrpool_next_slice_id, GFP_KERNEL);
	if (ret < 0) {
		/* -EBUSY from the xarray: every id is taken. */
		if (ret == -EBUSY)
			ret = -ENOSPC;
		goto unlock;
	}
	ret = mrpool_slice_index(s);
	if (ret)
		goto erase_id;
	/* Published: the client's list and the xarray now own @s. */
	kref_get(&client->ref);
	list_add_tail(&s->node, &client->slices);
	client->bytes += len;
	mutex_unlock(&client->lock);

	arg->slice_id = s->id;
	arg->mmap_offset = (u64)s->id << MRPOOL_TOKEN_SHIFT;
	arg->length = len;
	atomic64_inc(&mrpool_stats.allocs);
	return 0;

erase_id:
	xa_erase(&mrpool_slices, s->id);
unlock:
	mutex_unlock(&client->lock);
	mrpool_pool_return(&s->chunks);
	goto free_slice;

uncharge_tenant:
	mrpool_tenant_uncharge(t, s->nr_chunks, memlock);
uncharge_quota:
	if (qc)
		mrpool_quota_uncharge(qc, s->nr_chunks, false);
free_slice:
	kfree(s);
	return ret;
}

/*
 * The last reference is gone: no owner, VMA or dma-buf. The slice was
 * revoked when its owner let go (revoke.c), which returned its chunks,
 * or an importer's last unmap did; only a slice whose release comes
 * first (an error path) returns them here, each keeping its charge until
 * it is free (quarantine).
 */
static void mrpool_slice_release(struct kref *ref)
{
	struct mrpool_slice *s = container_of(ref, struct mrpool_slice, ref);
	struct mrpool_client *client = s->client;

	/* Zeroing under the owner's mmap_lock stalls it: see mmap.c. */
	if (!(current->flags & PF_KTHREAD))
		lockdep_assert_not_held(&client->mm->mmap_lock);

	mutex_lock(&client->lock);
	list_del(&s->node);
	if (!s->returned)
		client->bytes -= s->length;
	mutex_unlock(&client->lock);

	if (!s->returned) {
		mrpool_pool_return(&s->chunks);
		atomic64_inc(&mrpool_stats.frees);
	}
	WARN_ON(!list_empty(&s->exports));
	WARN_ON(!list_empty(&s->dma_mapv));
	kvfree(s->chunkv);
	kfree(s);
	mrpool_client_put(client);
}

/* Must not be called with client->lock held (release takes it). */
void mrpool_slice_put(struct mrpool_slice *s)
{
	kref_put(&s->ref, mrpool_slice_release);
}

/*
 * Look up a live slice of @client by id. Caller holds client->lock. The
 * owner check is done under the xarray lock: a slice of another client
 * cannot be freed meanwhile (its erase needs that lock).
 */
static struct mrpool_slice *mrpool_slice_find(struct mrpool_client *client,
					      u64 id, bool erase)
{
	struct mrpool_slice *s;

	if (!id || id > MRPOOL_MAX_SLICE_ID)
		return NULL;
	xa_lock(&mrpool_slices);
	s = xa_load(&mrpool_slices, id);
	if (s && s->client != client)
		s = NULL;
	if (s && erase)
		__xa_erase(&mrpool_slices, id);
	xa_unlock(&mrpool_slices);
	return s;
}

/**
 * mrpool_slice_get_owned - slice for an mmap offset, with a reference
 * @client: the mapping file
 * @pgoff: the mmap offset in pages
 *
 * Return: the slice if @client owns it and has not freed it, else NULL.
 */
struct mrpool_slice *mrpool_slice_get_owned(struct mrpool_client *client,
					    unsigned long pgoff)
{
	const unsigned long mask = (1UL << (MRPOOL_TOKEN_SHIFT - PAGE_SHIFT)) - 1;
	struct mrpool_slice *s;

	if (pgoff & mask)
		return NULL;
	mutex_lock(&client->lock);
	s = mrpool_slice_find(client, pgoff >> (MRPOOL_TOKEN_SHIFT - PAGE_SHIFT),
			      false);
	if (s)
		kref_get(&s->ref);
	mutex_unlock(&client->lock);
	return s;
}

/**
 * mrpool_slice_get_id - a live slice of @client by id, with a reference
 * @client: the calling file
 * @id: the slice id from ALLOC
 *
 * Return: the slice, or NULL if it is not a live slice of @client.
 */
struct mrpool_slice *mrpool_slice_get_id(struct mrpool_client *client, u64 id)
{
	struct mrpool_slice *s;

	mutex_lock(&client->lock);
	s = mrpool_slice_find(client, id, false);
	if (s)
		kref_get(&s->ref);
	mutex_unlock(&client->lock);
	return s;
}

/*
 * FREE: drop ownership and revoke every mapping (revoke.c); the memory
 * goes back now, or where pinned once the pin goes. The map file is not
 * cleared meanwhile: the caller's ioctl holds the device file open.
 */
int mrpool_slice_free(struct mrpool_client *client, u64 id)
{
	struct mrpool_slice *s;

	mutex_lock(&client->lock);
	s = mrpool_slice_find(client, id, true);
	if (s)
		s->freed = true;
	mutex_unlock(&client->lock);
	if (!s)
		return -ENOENT;
	mrpool_slice_revoke(s, client->map_file, false);
	mrpool_slice_put(s);
	return 0;
}

/*
 * The owner process is closing its file on its way out, its mm already
 * gone from it (exit_mm() runs before exit_files()). What stays pinned of
 * its slices after their revocation may outlive the reap: revoke.c moves
 * its charge to the orphans.
 */
static bool mrpool_client_owner_exiting(const struct mrpool_client *client)
{
	return (current->flags & PF_EXITING) && !current->mm &&
	       current->tgid == client->pid;
}

/**
 * mrpool_client_close - the /dev/mrpool file is released
 * @client: its client
 *
 * Drops ownership of every slice and revokes it (revoke.c): every mapping
 * of it, the owner's and its dma-bufs', is zapped and faults with SIGBUS
 * from then on, and its chunks return to the pool now, or where pinned
 * once the pin goes. Then drops the file's reference.
 */
void mrpool_client_close(struct mrpool_client *client)
{
	bool exiting = mrpool_client_owner_exiting(client);
	struct mrpool_slice *s, *tmp;
	struct file *map_file;
	LIST_HEAD(owned);

	mutex_lock(&client->lock);
	client->closed = true;
	map_file = client->map_file;
	client->map_file = NULL;
	list_for_each_entry_safe(s, tmp, &client->slices, node) {
		if (s->freed)
			continue;
		xa_erase(&mrpool_slices, s->id);
		s->freed = true;
		/* The owner's reference moves to @owned until it is put. */
		list_move_tail(&s->node, &owned);
	}
	mutex_unlock(&client->lock);

	/* Back on the client's list before each put: release unlinks it. */
	list_for_each_entry_safe(s, tmp, &owned, node) {
		mutex_lock(&client->lock);
		list_move_tail(&s->node, &client->slices);
		mutex_unlock(&client->lock);
		mrpool_slice_revoke(s, map_file, exiting);
		mrpool_slice_put(s);
	}
	/* VMAs of the file's slices hold their own reference to it. */
	fput(map_file);
	mrpool_client_put(client);
}

/*
 * Slices belong to the file, and the file to the process that opened it:
 * a child that inherited the descriptor, or a process it was passed to,
 * cannot allocate, free or map through it.
 */
bool mrpool_client_is_owner(const struct mrpool_client *client)
{
	return current->mm == client->mm;
}
