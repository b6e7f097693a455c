// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NUMA placement in a guest with two nodes (tools/vm/run --numa 2, see
 * selftests/vm-runs): ALLOC's node hint is served from that node (debugfs
 * chunk nodes and move_pages(2) on the mapping agree), a strict request
 * fails with -ENOMEM when only the other node has memory for it while a
 * plain hint falls back there, counted in stats/node_fallbacks, and the
 * numa_node parameter places the preallocation; libmrpool's numa_node
 * attribute places its arenas through the hint. Skips on one node.
 *
 * Tests reload kmod/mrpool.ko and restore the parameters they found.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop
#pragma GCC diagnostic ignored "-Wclobbered"

#include "pool_util.h"
#include "mrpool.h"

#define MAX_CHUNKS	64

FIXTURE(numa) {
	int fd;
	uint64_t chunk;
	char params[512];	/* the module's parameters at setup */
};

/* A node with memory, from sysfs. */
static int node_has_memory(int node)
{
	char path[96], line[256];
	long long kb = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/meminfo",
		 node);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "MemTotal:"))
			sscanf(strstr(line, "MemTotal:") + 9, "%lld", &kb);
	fclose(f);
	return kb > 0;
}

/* Every parameter as "k=v ..." for a reload that restores them. */
static void save_params(char *buf, size_t len)
{
	static const char *const names[] = {
		"pool_mb", "max_mb", "chunk_kb", "numa_node", "pmd_map",
		"shmem_chunks", "idle_trim_sec", "max_user_mb",
	};
	char v[64];
	size_t n = 0, i;

	buf[0] = '\0';
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		pool_param_str(names[i], v, sizeof(v));
		if (v[0])
			n += snprintf(buf + n, len - n, "%s=%s ", names[i], v);
	}
}

/* Reload the module with @params; 0 on success. */
static int reload(const char *params)
{
	char cmd[700];

	if (system("rmmod mrpool"))
		return -1;
	snprintf(cmd, sizeof(cmd), "insmod kmod/mrpool.ko %s", params);
	return system(cmd) ? -2 : 0;
}

/* Collects the nodes of the used chunks of one slice. */
struct slice_nodes {
	uint64_t id;
	int *nodes;
	int max;
	int n;
};

static bool chunk_of_slice(const struct pool_chunk_row *r, void *arg)
{
	struct slice_nodes *sn = arg;

	if (r->owner != sn->id || strcmp(r->state, "used") || sn->n >= sn->max)
		return false;
	sn->nodes[sn->n++] = r->node;
	return true;
}

/* Nodes of the chunks of slice @id (debugfs), in @nodes; how many. */
static int slice_chunk_nodes(uint64_t id, int *nodes, int max)
{
	struct slice_nodes sn = { .id = id, .nodes = nodes, .max = max };

	return pool_chunks_scan(chunk_of_slice, &sn);
}

static bool chunk_on_node(const struct pool_chunk_row *r, void *node)
{
	return r->node == *(int *)node;
}

/* How many chunks of the pool debugfs lists on @want. */
static int pool_chunks_on(int want)
{
	return pool_chunks_scan(chunk_on_node, &want);
}

/*
 * The node of every 64th page of a mapping, by move_pages(2) with no
 * target (a query): the kernel's own view of the pages, independent of
 * the module's debugfs. Returns the first page not on @want, or -1.
 */
static long pages_not_on(void *p, size_t len, int want, int *got)
{
	enum { STEP = 64 };
	size_t i, n = len / 4096 / STEP;
	void *pages[MAX_CHUNKS * 512 / STEP];
	int status[MAX_CHUNKS * 512 / STEP];

	if (n > sizeof(pages) / sizeof(pages[0]))
		n = sizeof(pages) / sizeof(pages[0]);
	for (i = 0; i < n; i++)
		pages[i] = (char *)p + i * STEP * 4096;
	if (syscall(SYS_move_pages, 0, n, pages, NULL, status, 0)) {
		*got = -errno;
		return 0;
	}
	for (i = 0; i < n; i++)
		if (status[i] != want) {
			*got = status[i];
			return (long)i;
		}
	return -1;
}

static int alloc_on(int fd, uint64_t bytes, int node, uint32_t flags,
		    struct mrpool_alloc *a)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->bytes = bytes;
	a->node = node;
	a->flags = flags;
	return pool_ioctl(fd, MRPOOL_IOC_ALLOC, a);
}

FIXTURE_SETUP(numa)
{
	struct mrpool_query q;

	self->fd = -1;
	if (access(POOL_DEV, F_OK))
		POOL_SETUP_SKIP(POOL_DEV " missing: mrpool.ko not loaded");
	if (!node_has_memory(0) || !node_has_memory(1))
		POOL_SETUP_SKIP("needs two NUMA nodes with memory (tools/vm/run --numa 2)");
	save_params(self->params, sizeof(self->params));
	self->fd = pool_open();
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, pool_query(self->fd, &q));
	self->chunk = q.chunk_size;
}

FIXTURE_TEARDOWN(numa)
{
	if (self->fd < 0)
		return;
	close(self->fd);
	/* Back to what the run loaded, whatever the test did. */
	if (reload(self->params))
		TH_LOG("could not restore mrpool.ko with '%s'", self->params);
}

struct node_backing {
	int node;
	int shmem, other;
};

static bool count_node_backing(const struct pool_chunk_row *r, void *arg)
{
	struct node_backing *b = arg;

	if (r->node != b->node)
		return false;
	if (!strcmp(r->backing, "shmem"))
		b->shmem++;
	else
		b->other++;
	return true;
}

/*
 * Strict and plain hints land on the node asked, growth included; with
 * shmem_chunks=Y each node's whole chunks come from that node's tmpfs
 * mount (mpol=prefer:N), so they are shmem on both nodes.
 */
TEST_F(numa, hint_places_chunks)
{
	long long fallbacks = pool_attr("stats/node_fallbacks");
	int nodes[MAX_CHUNKS], node, n, i, got = 0;
	uint32_t flags;
	char shm[8];
	struct mrpool_alloc a;
	long bad;
	void *p;

	POOL_SETUP_SKIPPED();

	for (node = 0; node < 2; node++) {
		for (flags = 0; flags <= MRPOOL_ALLOC_NODE_STRICT;
		     flags += MRPOOL_ALLOC_NODE_STRICT) {
			/* More than the preallocation: some are grown. */
			ASSERT_EQ(0, alloc_on(self->fd, 6 * self->chunk, node,
					      flags, &a));
			n = slice_chunk_nodes(a.slice_id, nodes, MAX_CHUNKS);
			ASSERT_EQ(6, n);
			for (i = 0; i < n; i++)
				EXPECT_EQ(node, nodes[i]) TH_LOG("chunk %d", i);
			p = mmap(NULL, a.length, PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_POPULATE, self->fd,
				 (off_t)a.mmap_offset);
			ASSERT_NE(MAP_FAILED, p);
			bad = pages_not_on(p, a.length, node, &got);
			EXPECT_EQ(-1, bad) TH_LOG("page %ld on node %d", bad,
						  got);
			EXPECT_EQ(0, munmap(p, a.length));
			EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
		}
	}
	EXPECT_EQ(fallbacks, pool_attr("stats/node_fallbacks"));
	/* Both nodes now hold chunks: the pool keeps per-node free lists. */
	EXPECT_LE(6, pool_chunks_on(0));
	EXPECT_LE(6, pool_chunks_on(1));
	pool_param_str("shmem_chunks", shm, sizeof(shm));
	for (node = 0; node < 2 && shm[0] == 'Y' && self->chunk == 2 * MIB;
	     node++) {
		struct node_backing b = { .node = node };

		ASSERT_LE(6, pool_chunks_scan(count_node_backing, &b));
		TH_LOG("node %d: %d shmem chunks, %d plain", node, b.shmem,
		       b.other);
		EXPECT_LE(6, b.shmem);
	}
}

/*
 * A pool that cannot grow and has free chunks on node 0 only: a strict
 * request for node 1 fails, a plain one falls back to node 0 (counted),
 * and numa_node placed the preallocation and is the pool's node.
 */
TEST_F(numa, strict_fails_where_only_other_node_has_memory)
{
	long long fallbacks, nomem;
	struct mrpool_alloc a, b, c;
	struct mrpool_query q;
	int nodes[4];

	POOL_SETUP_SKIPPED();

	close(self->fd);
	self->fd = -1;
	ASSERT_EQ(0, reload("numa_node=0 pool_mb=4 max_mb=4 idle_trim_sec=0"));
	self->fd = pool_open();
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, pool_query(self->fd, &q));
	ASSERT_EQ(4 * MIB, q.total_bytes);
	ASSERT_EQ(q.total_bytes, q.max_bytes);
	EXPECT_EQ(0, q.node);
	EXPECT_EQ(0, pool_attr("node"));
	EXPECT_EQ((int)(q.total_bytes / q.chunk_size), pool_chunks_on(0));
	fallbacks = pool_attr("stats/node_fallbacks");
	nomem = pool_attr("stats/fail_nomem");

	EXPECT_EQ(-ENOMEM, alloc_on(self->fd, 1, 1, MRPOOL_ALLOC_NODE_STRICT,
				    &a));
	EXPECT_EQ(nomem + 1, pool_attr("stats/fail_nomem"));
	EXPECT_EQ(fallbacks, pool_attr("stats/node_fallbacks"));

	ASSERT_EQ(0, alloc_on(self->fd, 1, 1, 0, &b));
	ASSERT_EQ(1, slice_chunk_nodes(b.slice_id, nodes, 4));
	EXPECT_EQ(0, nodes[0]);
	EXPECT_EQ(fallbacks + 1, pool_attr("stats/node_fallbacks"));

	/* Node 0's last chunk, strict; then nothing is left anywhere. */
	ASSERT_EQ(0, alloc_on(self->fd, 1, 0, MRPOOL_ALLOC_NODE_STRICT, &c));
	EXPECT_EQ(-ENOMEM, alloc_on(self->fd, 1, 1, 0, &a));
	EXPECT_EQ(fallbacks + 1, pool_attr("stats/node_fallbacks"));
	EXPECT_EQ(0, pool_free(self->fd, b.slice_id));
	EXPECT_EQ(0, pool_free(self->fd, c.slice_id));
}

/* numa_node=1: the preallocation and node-less requests go to node 1. */
TEST_F(numa, numa_node_param_is_the_default)
{
	long long fallbacks;
	struct mrpool_alloc a;
	struct mrpool_query q;
	int nodes[8], n, i;

	POOL_SETUP_SKIPPED();

	close(self->fd);
	self->fd = -1;
	ASSERT_EQ(0, reload("numa_node=1 pool_mb=8"));
	self->fd = pool_open();
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(1, q.node);
	EXPECT_EQ((int)(q.total_bytes / q.chunk_size), pool_chunks_on(1));
	EXPECT_EQ(0, pool_chunks_on(0));
	fallbacks = pool_attr("stats/node_fallbacks");

	ASSERT_EQ(0, alloc_on(self->fd, 6 * q.chunk_size, MRPOOL_NODE_ANY, 0,
			      &a));
	n = slice_chunk_nodes(a.slice_id, nodes, 8);
	ASSERT_EQ(6, n);
	for (i = 0; i < n; i++)
		EXPECT_EQ(1, nodes[i]);
	EXPECT_EQ(fallbacks, pool_attr("stats/node_fallbacks"));
	EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
}

/* libmrpool's numa_node: each pool's arenas on the node it names. */
TEST_F(numa, library_places_arenas)
{
	struct mrp_pool_attr attr = {
		.comp_mask = MRP_POOL_ATTR_BACKEND | MRP_POOL_ATTR_ARENA_SIZE |
			     MRP_POOL_ATTR_NUMA_NODE | MRP_POOL_ATTR_BACKGROUND,
		.backend = MRP_BACKEND_KERNEL, .arena_size = 2 << 20,
		.background = 0,
	};
	struct mrp_stats st;
	struct mrp_pool *pool;
	struct mrp_buf b;
	int node, got = 0;
	long bad;

	POOL_SETUP_SKIPPED();

	for (node = 1; node >= 0; node--) {
		attr.numa_node = node;
		pool = mrp_pool_open(&attr);
		ASSERT_NE(NULL, pool);
		ASSERT_EQ(0, mrp_stats(pool, &st, sizeof(st)));
		EXPECT_EQ(node, st.numa_node);
		EXPECT_EQ(MRP_KIND_KERNEL, st.backend);
		ASSERT_EQ(0, mrp_alloc(pool, 1 << 20, NULL, &b));
		memset(b.addr, 1, b.size);
		/* the whole 2 MiB arena, the buffer's half included */
		bad = pages_not_on((void *)((uintptr_t)b.addr & ~(uintptr_t)((2 << 20) - 1)),
				   2 << 20, node, &got);
		EXPECT_EQ(-1, bad) TH_LOG("page %ld on node %d, asked %d", bad, got, node);
		EXPECT_EQ(0, mrp_free(pool, b.addr));
		EXPECT_EQ(0, mrp_pool_close(pool));
	}
}

TEST_HARNESS_MAIN
