// SPDX-License-Identifier: GPL-2.0
/*
 * Per-client stats page: one zeroed page per open file, allocated on the
 * first mmap() of MRPOOL_STATS_MMAP_OFFSET, where the library publishes its
 * counters (struct mrpool_client_stats) so that debugfs clients shows every
 * process's allocator without a server in the application.
 *
 * Userspace writes the page, the kernel only reads it: the values are
 * printed, never used for anything. It is not pool memory, nor pinned
 * memory charged to RLIMIT_MEMLOCK: one ordinary page per open file.
 *
 * Lifetime: the client holds a page reference from the first mmap() until
 * it is freed; each PTE holds its own, so the page outlives the client if
 * it has to. Every VMA holds the client's map file, hence the client (and
 * the page vm_private_data points at) whenever the fault handler runs.
 */
#include "mrpool.h"

#include <linux/mm.h>
#include <linux/gfp.h>
#include <linux/seq_file.h>
#include <linux/math64.h>
#include <linux/stddef.h>

/* Fields a writer must cover for the kernel to show them. */
#define MRPOOL_CLIENT_STATS_SIZE_V1 \
	offsetofend(struct mrpool_client_stats, reg_ns_total)
/* ...and the preload shim's counters (a writer that knows them fills them). */
#define MRPOOL_CLIENT_STATS_SIZE_V2 \
	offsetofend(struct mrpool_client_stats, preload_passed)
/* Reads of a page being rewritten: the writer is quick, or misbehaving. */
#define MRPOOL_CLIENT_STATS_TRIES 4

/* Only in the opener's mm: a MADV_DOFORK child inherits no page. */
static vm_fault_t mrpool_stats_fault(struct vm_fault *vmf)
{
	struct mrpool_client *client = vmf->vma->vm_private_data;

	if (vmf->pgoff != MRPOOL_STATS_MMAP_OFFSET >> PAGE_SHIFT ||
	    vmf->vma->vm_mm != client->mm)
		return VM_FAULT_SIGBUS;
	vmf->page = client->stats_page;
	get_page(vmf->page);
	return 0;
}

static const struct vm_operations_struct mrpool_stats_vm_ops = {
	.fault = mrpool_stats_fault,
};

/**
 * mrpool_client_stats_mmap - map the calling file's stats page
 * @client: the mapping file, its opener checked by the caller
 * @vma: shared and writable (checked by the caller), offset
 *	MRPOOL_STATS_MMAP_OFFSET
 *
 * Return: 0; -EINVAL for a length other than one page; -ENOMEM.
 */
int mrpool_client_stats_mmap(struct mrpool_client *client,
			     struct vm_area_struct *vma)
{
	struct page *page;

	if (vma->vm_end - vma->vm_start != PAGE_SIZE)
		return -EINVAL;

	mutex_lock(&client->lock);
	page = client->stats_page;
	if (!page) {
		page = alloc_page(GFP_KERNEL_ACCOUNT | __GFP_ZERO);
		if (!page) {
			mutex_unlock(&client->lock);
			return -ENOMEM;
		}
		client->stats_page = page;
	}
	mutex_unlock(&client->lock);

	mrpool_vm_flags_set(vma, VM_DONTCOPY | VM_DONTEXPAND | VM_DONTDUMP);
	/*
	 * No reference of its own: the VMA holds the map file, the client it,
	 * and the client the page, set once and kept until the client goes.
	 */
	vma->vm_private_data = client;
	vma->vm_ops = &mrpool_stats_vm_ops;
	return 0;
}

/* The client is freed: drop its reference; PTEs keep theirs. */
void mrpool_client_stats_release(struct mrpool_client *client)
{
	if (client->stats_page)
		put_page(client->stats_page);
	client->stats_page = NULL;
}

/* Columns mrpool_client_stats_show() prints, after those of debugfs.c. */
static const char *const mrpool_client_stats_cols[] = {
	"allocs", "frees", "tc_hits", "tc_misses", "hit_pct", "fallbacks",
	"fallback_bytes", "in_use", "mapped", "regs", "reg_ns",
	"mr_served", "mr_passed",
};

#define MRPOOL_CLIENT_STATS_COLS ARRAY_SIZE(mrpool_client_stats_cols)

/* Their names, each after a blank, for debugfs clients' header line. */
void mrpool_client_stats_show_header(struct seq_file *m)
{
	unsigned int i;

	for (i = 0; i < MRPOOL_CLIENT_STATS_COLS; i++)
		seq_printf(m, " %s", mrpool_client_stats_cols[i]);
}

/* A percentage with one decimal, or "-"; @hits and @misses are untrusted. */
static void mrpool_show_pct(struct seq_file *m, u64 hits, u64 misses)
{
	u64 total = hits + misses;
	unsigned int pm;

	if (!total || total < hits) {
		seq_puts(m, " -");
		return;
	}
	while (total > U64_MAX / 1000) {
		hits >>= 1;
		total >>= 1;
	}
	pm = (unsigned int)div64_u64(hits * 1000, total);
	seq_printf(m, " %u.%u", pm / 10, pm % 10);
}

/*
 * A consistent copy of the published counters: the sequence count is even
 * and did not move across the reads. False if the page was never written,
 * by a writer too old to fill the fields shown, or kept changing.
 */
static bool mrpool_client_stats_read(const struct mrpool_client_stats *p,
				     struct mrpool_client_stats *out)
{
	unsigned int i;
	u32 seq;

	for (i = 0; i < MRPOOL_CLIENT_STATS_TRIES; i++) {
		seq = READ_ONCE(p->seq);
		if (seq & 1) {
			cpu_relax();
			continue;
		}
		smp_rmb();	/* the fields after the first sequence read */
		out->size = READ_ONCE(p->size);
		out->allocs = READ_ONCE(p->allocs);
		out->frees = READ_ONCE(p->frees);
		out->tcache_hits = READ_ONCE(p->tcache_hits);
		out->tcache_misses = READ_ONCE(p->tcache_misses);
		out->fallbacks = READ_ONCE(p->fallbacks);
		out->fallback_bytes = READ_ONCE(p->fallback_bytes);
		out->bytes_in_use = READ_ONCE(p->bytes_in_use);
		out->bytes_mapped = READ_ONCE(p->bytes_mapped);
		out->registrations = READ_ONCE(p->registrations);
		out->reg_ns_total = READ_ONCE(p->reg_ns_total);
		out->preload_served = READ_ONCE(p->preload_served);
		out->preload_passed = READ_ONCE(p->preload_passed);
		smp_rmb();	/* ...before the second */
		if (READ_ONCE(p->seq) == seq)
			return out->size >= MRPOOL_CLIENT_STATS_SIZE_V1;
	}
	return false;
}

/**
 * mrpool_client_stats_show - print @client's published counters
 * @m: debugfs clients
 * @client: a client, with client->lock held
 *
 * One blank-separated cell per column of mrpool_client_stats_cols, "-"
 * in each when nothing consistent was published.
 */
void mrpool_client_stats_show(struct seq_file *m, struct mrpool_client *client)
{
	struct mrpool_client_stats st;
	unsigned int i;

	lockdep_assert_held(&client->lock);
	if (!client->stats_page ||
	    !mrpool_client_stats_read(page_address(client->stats_page), &st)) {
		for (i = 0; i < MRPOOL_CLIENT_STATS_COLS; i++)
			seq_puts(m, " -");
		return;
	}
	seq_printf(m, " %llu %llu %llu %llu", st.allocs, st.frees,
		   st.tcache_hits, st.tcache_misses);
	mrpool_show_pct(m, st.tcache_hits, st.tcache_misses);
	seq_printf(m, " %llu %llu %llu %llu %llu %llu", st.fallbacks,
		   st.fallback_bytes, st.bytes_in_use, st.bytes_mapped,
		   st.registrations, st.reg_ns_total);
	if (st.size >= MRPOOL_CLIENT_STATS_SIZE_V2)
		seq_printf(m, " %llu %llu", st.preload_served, st.preload_passed);
	else
		seq_puts(m, " - -");
}
