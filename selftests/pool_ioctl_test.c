// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * /dev/mrpool ioctls: QUERY, ALLOC and FREE, their struct-size rules and
 * every error path, ownership of ids across files, the counters they move,
 * the debugfs failure knobs, and what a file's open mode allows (issue 33).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop
/*
 * The harness wraps each test in setjmp(); after a longjmp it only runs
 * the teardown, so no local of a test body is read again.
 */
#pragma GCC diagnostic ignored "-Wclobbered"

#include "pool_util.h"

#define NOBODY		65534

FIXTURE(pool) {
	int fd;
	struct mrpool_query q0;
	long long max_mb;		/* restored by the teardown */
	long long trim_sec;		/* likewise */
	long long next_id;		/* likewise: the slice id cursor */
};

FIXTURE_SETUP(pool)
{
	self->trim_sec = -1;
	self->next_id = -1;
	POOL_SETUP_OPEN();
	self->next_id = pool_read_ll(POOL_DEBUGFS "/next_slice_id");
	self->max_mb = pool_param("max_mb");
	/* Totals are compared across calls: no chunk trimmed meanwhile. */
	self->trim_sec = pool_trim_off();
	ASSERT_LE(0, self->trim_sec);
}

FIXTURE_TEARDOWN(pool)
{
	pool_set_knob("fail_slice_alloc", 0);
	pool_trim_restore(self->trim_sec);
	if (self->next_id >= 0)
		pool_set_knob("next_slice_id", self->next_id);
	if (self->fd < 0)
		return;
	close(self->fd);
	pool_set_param("max_mb", self->max_mb);
}

/* QUERY reports the ABI, the geometry and consistent totals. */
TEST_F(pool, query_reports_pool)
{
	struct mrpool_query *q = &self->q0;

	EXPECT_EQ(sizeof(*q), q->size);
	EXPECT_EQ((__u32)MRPOOL_ABI_VERSION, q->abi_version);
	EXPECT_EQ(pool_param("chunk_kb") * 1024, (long long)q->chunk_size);
	EXPECT_EQ(pool_attr("chunk_bytes"), (long long)q->chunk_size);
	EXPECT_EQ(pool_param("max_mb") * (long long)MIB, (long long)q->max_bytes);
	EXPECT_EQ(pool_param("numa_node"), q->node);
	EXPECT_EQ(q->total_bytes,
		  q->free_bytes + q->used_bytes + q->quarantined_bytes);
	EXPECT_LE(pool_param("pool_mb") * (long long)MIB,
		  (long long)q->total_bytes);
	EXPECT_EQ(0ULL, q->file_bytes);
	EXPECT_EQ(pool_attr("stats/allocs"), (long long)q->allocs);
	EXPECT_EQ(pool_attr("stats/frees"), (long long)q->frees);
	/* this module makes fork copies (MRPOOL_ALLOC_FORK_COPY) */
	EXPECT_EQ(MRPOOL_FEATURE_FORK_COPY, q->features);
}

/* The struct's own size field governs the copy, bounded both ways. */
TEST_F(pool, query_size_rules)
{
	struct {
		struct mrpool_query q;
		uint8_t tail[64];
	} big;
	struct mrpool_query q;

	memset(&q, 0, sizeof(q));
	EXPECT_EQ(-EINVAL, pool_ioctl(self->fd, MRPOOL_IOC_QUERY, &q));
	q.size = sizeof(q) - 8;
	EXPECT_EQ(-EINVAL, pool_ioctl(self->fd, MRPOOL_IOC_QUERY, &q));
	q.size = 4097;
	EXPECT_EQ(-EINVAL, pool_ioctl(self->fd, MRPOOL_IOC_QUERY, &q));

	/* A newer, larger struct with a zero tail is accepted... */
	memset(&big, 0, sizeof(big));
	big.q.size = sizeof(big);
	EXPECT_EQ(0, pool_ioctl(self->fd, MRPOOL_IOC_QUERY, &big));
	EXPECT_EQ((__u32)MRPOOL_ABI_VERSION, big.q.abi_version);
	EXPECT_EQ(sizeof(big), big.q.size);
	EXPECT_EQ(0, big.tail[0]);
	/* ...a nonzero tail is a field this kernel does not know. */
	big.tail[10] = 1;
	EXPECT_EQ(-E2BIG, pool_ioctl(self->fd, MRPOOL_IOC_QUERY, &big));

	memset(&q, 0, sizeof(q));
	q.size = sizeof(q);
	q.reserved[0] = 1;
	EXPECT_EQ(-EINVAL, pool_ioctl(self->fd, MRPOOL_IOC_QUERY, &q));
	/* features, once a reserved word, is out only: what is passed in goes */
	memset(&q, 0, sizeof(q));
	q.size = sizeof(q);
	q.features = ~0ULL;
	EXPECT_EQ(0, pool_ioctl(self->fd, MRPOOL_IOC_QUERY, &q));
	EXPECT_EQ(MRPOOL_FEATURE_FORK_COPY, q.features);
	EXPECT_EQ(-EFAULT, pool_ioctl(self->fd, MRPOOL_IOC_QUERY, NULL));
}

/* Commands dispatch on type and number; anything else is -ENOTTY. */
TEST_F(pool, unknown_commands)
{
	struct mrpool_query q;

	memset(&q, 0, sizeof(q));
	q.size = sizeof(q);
	EXPECT_EQ(-ENOTTY, pool_ioctl(self->fd, _IO(MRPOOL_IOC_MAGIC, 0x0f),
				      &q));
	EXPECT_EQ(-ENOTTY, pool_ioctl(self->fd,
				      _IOWR('X', 0x00, struct mrpool_query),
				      &q));
	/* The old soundcard.h-range code of the first version is gone. */
	EXPECT_EQ(-ENOTTY, pool_ioctl(self->fd,
				      _IOWR('M', 0xd0, struct mrpool_query),
				      &q));
	/* Other size bits in the command do not matter: the struct says. */
	EXPECT_EQ(0, pool_ioctl(self->fd,
				_IOC(_IOC_READ | _IOC_WRITE, MRPOOL_IOC_MAGIC,
				     0x00, 16), &q));
	EXPECT_EQ((__u32)MRPOOL_ABI_VERSION, q.abi_version);
}

/* ALLOC rounds up to whole chunks and moves every counter; FREE undoes. */
TEST_F(pool, alloc_free_accounting)
{
	struct mrpool_query q;
	struct mrpool_alloc a;

	ASSERT_EQ(0, pool_alloc(self->fd, 1, &a));
	EXPECT_NE(0ULL, a.slice_id);
	EXPECT_EQ(self->q0.chunk_size, a.length);
	EXPECT_EQ(0ULL, a.mmap_offset % (2 * MIB));
	EXPECT_NE(0ULL, a.mmap_offset);

	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(a.length, q.file_bytes);
	EXPECT_EQ(self->q0.used_bytes + a.length, q.used_bytes);
	EXPECT_EQ(self->q0.allocs + 1, q.allocs);
	EXPECT_EQ(q.total_bytes,
		  q.free_bytes + q.used_bytes + q.quarantined_bytes);

	ASSERT_EQ(0, pool_free(self->fd, a.slice_id));
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(0ULL, q.file_bytes);
	EXPECT_EQ(self->q0.used_bytes, q.used_bytes);
	EXPECT_EQ(self->q0.frees + 1, q.frees);

	/* Several chunks in one slice. */
	ASSERT_EQ(0, pool_alloc(self->fd, 2 * self->q0.chunk_size + 1, &a));
	EXPECT_EQ(3 * self->q0.chunk_size, a.length);
	EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
}

/* Malformed ALLOC requests are -EINVAL and change nothing. */
TEST_F(pool, alloc_invalid)
{
	struct mrpool_query q;
	struct mrpool_alloc a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.bytes = 4096;
	a.flags = 1U << 7;
	EXPECT_EQ(-EINVAL, pool_ioctl(self->fd, MRPOOL_IOC_ALLOC, &a));
	/* the first flag above the known ones, alone and with them */
	a.flags = MRPOOL_ALLOC_VALID_FLAGS + 1;
	EXPECT_EQ(4U, a.flags);
	EXPECT_EQ(-EINVAL, pool_ioctl(self->fd, MRPOOL_IOC_ALLOC, &a));
	a.flags = MRPOOL_ALLOC_VALID_FLAGS | (MRPOOL_ALLOC_VALID_FLAGS + 1);
	EXPECT_EQ(-EINVAL, pool_ioctl(self->fd, MRPOOL_IOC_ALLOC, &a));
	a.flags = 0;
	a.pad = 1;
	EXPECT_EQ(-EINVAL, pool_ioctl(self->fd, MRPOOL_IOC_ALLOC, &a));
	a.pad = 0;
	a.reserved[2] = 5;
	EXPECT_EQ(-EINVAL, pool_ioctl(self->fd, MRPOOL_IOC_ALLOC, &a));
	a.reserved[2] = 0;
	a.bytes = 0;
	EXPECT_EQ(-EINVAL, pool_ioctl(self->fd, MRPOOL_IOC_ALLOC, &a));
	a.bytes = 4096;
	a.node = 4000;
	EXPECT_EQ(-EINVAL, pool_ioctl(self->fd, MRPOOL_IOC_ALLOC, &a));
	a.node = -2;
	EXPECT_EQ(-EINVAL, pool_ioctl(self->fd, MRPOOL_IOC_ALLOC, &a));
	a.node = MRPOOL_NODE_ANY;
	a.size = 8;
	EXPECT_EQ(-EINVAL, pool_ioctl(self->fd, MRPOOL_IOC_ALLOC, &a));
	EXPECT_EQ(-EFAULT, pool_ioctl(self->fd, MRPOOL_IOC_ALLOC, NULL));

	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(self->q0.used_bytes, q.used_bytes);
	EXPECT_EQ(self->q0.allocs, q.allocs);
	EXPECT_EQ(self->q0.alloc_failures, q.alloc_failures);
}

/* ALLOC whose result cannot be written back is undone, not leaked. */
TEST_F(pool, alloc_efault_undone)
{
	struct mrpool_query q, *rq;
	struct mrpool_alloc *ro;

	ro = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, ro);
	memset(ro, 0, sizeof(*ro));
	ro->size = sizeof(*ro);
	ro->bytes = 1;
	ro->node = MRPOOL_NODE_ANY;
	rq = (struct mrpool_query *)((char *)ro + 2048);
	memset(rq, 0, sizeof(*rq));
	rq->size = sizeof(*rq);
	ASSERT_EQ(0, mprotect(ro, 4096, PROT_READ));
	EXPECT_EQ(-EFAULT, pool_ioctl(self->fd, MRPOOL_IOC_ALLOC, ro));
	EXPECT_EQ(-EFAULT, pool_ioctl(self->fd, MRPOOL_IOC_QUERY, rq));
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(0ULL, q.file_bytes);
	EXPECT_EQ(self->q0.used_bytes, q.used_bytes);
	EXPECT_EQ(q.allocs - self->q0.allocs, q.frees - self->q0.frees);
	munmap(ro, 4096);
}

/* More than max_mb is -ENOMEM at once, counted as a failure. */
TEST_F(pool, alloc_over_max)
{
	long long nomem = pool_attr("stats/fail_nomem");
	struct mrpool_query q;
	struct mrpool_alloc a;

	EXPECT_EQ(-ENOMEM, pool_alloc(self->fd, self->q0.max_bytes + 1, &a));
	EXPECT_EQ(-ENOMEM, pool_alloc(self->fd, UINT64_MAX, &a));
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(self->q0.alloc_failures + 2, q.alloc_failures);
	EXPECT_EQ(nomem + 2, pool_attr("stats/fail_nomem"));
	EXPECT_EQ(self->q0.total_bytes, q.total_bytes);
}

/* The pool grows on demand up to max_mb, then says -ENOMEM. */
TEST_F(pool, grow_to_max)
{
	long long grows = pool_attr("stats/grows");
	uint64_t chunk = self->q0.chunk_size;
	uint64_t room = self->q0.total_bytes + 4 * chunk;
	struct mrpool_query q;
	struct mrpool_alloc a;
	uint64_t *ids;
	int n = 0, i, ret, max;

	/* Room for a few chunks beyond what is held now. */
	ASSERT_EQ(0, pool_set_param("max_mb", (room + MIB - 1) / MIB));
	max = (int)((room + MIB) / chunk) + 1;
	ids = calloc(max, sizeof(*ids));
	ASSERT_NE(NULL, ids);
	for (;;) {
		ret = pool_alloc(self->fd, chunk, &a);
		if (ret)
			break;
		ASSERT_LT(n, max);
		ids[n++] = a.slice_id;
	}
	EXPECT_EQ(-ENOMEM, ret);
	ASSERT_EQ(0, pool_query(self->fd, &q));
	/* Full: nothing free, and no room for one more chunk. */
	EXPECT_EQ(0ULL, q.free_bytes);
	EXPECT_LT(q.max_bytes - chunk, q.total_bytes);
	EXPECT_LE(grows + 4, pool_attr("stats/grows"));
	for (i = 0; i < n; i++)
		EXPECT_EQ(0, pool_free(self->fd, ids[i]));
	free(ids);
	/* Lowering max_mb below pool_mb (or to 0) is refused. */
	EXPECT_EQ(-EINVAL, pool_set_param("max_mb", 0));
	if (pool_param("pool_mb") > 1)
		EXPECT_EQ(-EINVAL, pool_set_param("max_mb",
						  pool_param("pool_mb") - 1));
}

/* FREE of an unknown, freed or foreign id is -ENOENT; bad fields -EINVAL. */
TEST_F(pool, free_errors)
{
	struct mrpool_alloc a, b;
	struct mrpool_free f;
	int fd2;

	EXPECT_EQ(-ENOENT, pool_free(self->fd, 0));
	EXPECT_EQ(-ENOENT, pool_free(self->fd, 0x7fffffff));
	EXPECT_EQ(-ENOENT, pool_free(self->fd, 1ULL << 40));

	ASSERT_EQ(0, pool_alloc(self->fd, 1, &a));
	memset(&f, 0, sizeof(f));
	f.size = sizeof(f);
	f.slice_id = a.slice_id;
	f.flags = 1;
	EXPECT_EQ(-EINVAL, pool_ioctl(self->fd, MRPOOL_IOC_FREE, &f));
	f.flags = 0;
	f.reserved[1] = 1;
	EXPECT_EQ(-EINVAL, pool_ioctl(self->fd, MRPOOL_IOC_FREE, &f));
	f.reserved[1] = 0;
	f.size = 4;
	EXPECT_EQ(-EINVAL, pool_ioctl(self->fd, MRPOOL_IOC_FREE, &f));

	/* Another file can neither free nor see this slice. */
	fd2 = pool_open();
	ASSERT_LE(0, fd2);
	EXPECT_EQ(-ENOENT, pool_free(fd2, a.slice_id));
	ASSERT_EQ(0, pool_alloc(fd2, 1, &b));
	EXPECT_NE(a.slice_id, b.slice_id);
	EXPECT_NE(a.mmap_offset, b.mmap_offset);
	EXPECT_EQ(-ENOENT, pool_free(self->fd, b.slice_id));
	close(fd2);

	EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
	EXPECT_EQ(-ENOENT, pool_free(self->fd, a.slice_id));
}

/*
 * Slice ids cycle below 2^23, so every mmap offset stays below 2^44, which
 * a 32-bit process's mmap2() reaches: a cursor at or past the last id
 * wraps to the lowest free one, and each slice maps and keeps its bytes.
 */
TEST_F(pool, ids_wrap_below_2_44)
{
	static const long long starts[] = { 0x7ffffffe, (1LL << 23) - 2 };
	struct mrpool_alloc a[3];
	unsigned int i, k;
	uint8_t *p;

	if (self->next_id < 0)
		POOL_SKIP("no debugfs next_slice_id");
	for (k = 0; k < 2; k++) {
		ASSERT_EQ(0, pool_set_knob("next_slice_id", starts[k]));
		for (i = 0; i < 3; i++) {
			ASSERT_EQ(0, pool_alloc(self->fd, 1, &a[i]));
			EXPECT_GT(1ULL << 44, a[i].mmap_offset)
				TH_LOG("slice id %llu", (unsigned long long)a[i].slice_id);
			p = pool_map(self->fd, &a[i]);
			ASSERT_NE(MAP_FAILED, p) TH_LOG("slice id %llu",
							(unsigned long long)a[i].slice_id);
			p[a[i].length - 1] = (uint8_t)(i + 1);
			EXPECT_EQ(i + 1, p[a[i].length - 1]);
			EXPECT_EQ(0, munmap(p, a[i].length));
		}
		EXPECT_NE(a[0].slice_id, a[1].slice_id);
		EXPECT_NE(a[1].slice_id, a[2].slice_id);
		EXPECT_NE(a[0].slice_id, a[2].slice_id);
		/* From the last two ids, the third wrapped to the start. */
		if (k == 1)
			EXPECT_GT(a[0].slice_id, a[2].slice_id);
		for (i = 0; i < 3; i++)
			EXPECT_EQ(0, pool_free(self->fd, a[i].slice_id));
	}
}

/* Closing a file returns every slice it held. */
TEST_F(pool, close_frees_all)
{
	struct mrpool_query q;
	struct mrpool_alloc a;
	int fd2, i;

	fd2 = pool_open();
	ASSERT_LE(0, fd2);
	for (i = 0; i < 3; i++)
		ASSERT_EQ(0, pool_alloc(fd2, self->q0.chunk_size, &a));
	ASSERT_EQ(0, pool_query(fd2, &q));
	EXPECT_EQ(3 * self->q0.chunk_size, q.file_bytes);
	close(fd2);

	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(self->q0.used_bytes, q.used_bytes);
	EXPECT_EQ(self->q0.frees + 3, q.frees);
}

/* fail_slice_alloc makes the next N ALLOCs fail with -ENOMEM. */
TEST_F(pool, knob_fail_slice_alloc)
{
	long long inj = pool_attr("stats/fail_injected");
	struct mrpool_alloc a;

	ASSERT_EQ(0, pool_set_knob("fail_slice_alloc", 2));
	EXPECT_EQ(-ENOMEM, pool_alloc(self->fd, 1, &a));
	EXPECT_EQ(-ENOMEM, pool_alloc(self->fd, 1, &a));
	EXPECT_EQ(0, pool_alloc(self->fd, 1, &a));
	EXPECT_EQ(inj + 2, pool_attr("stats/fail_injected"));
}

/* fail_chunk_alloc makes growth fail; nothing leaks, the next one works. */
TEST_F(pool, knob_fail_chunk_alloc)
{
	long long cfail = pool_attr("stats/chunk_alloc_failures");
	uint64_t need = self->q0.free_bytes + 2 * self->q0.chunk_size;
	struct mrpool_query q;
	struct mrpool_alloc a;

	if (self->q0.total_bytes + 2 * self->q0.chunk_size > self->q0.max_bytes)
		POOL_SKIP("no room to grow below max_mb");
	ASSERT_EQ(0, pool_set_knob("fail_chunk_alloc", 1));
	EXPECT_EQ(-ENOMEM, pool_alloc(self->fd, need, &a));
	EXPECT_EQ(cfail + 1, pool_attr("stats/chunk_alloc_failures"));
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(self->q0.used_bytes, q.used_bytes);
	EXPECT_EQ(q.total_bytes,
		  q.free_bytes + q.used_bytes + q.quarantined_bytes);
	ASSERT_EQ(0, pool_alloc(self->fd, need, &a));
	EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
}

/* The node column of debugfs "chunks" for the chunk at @want, or -1. */
static int chunk_node(unsigned long want)
{
	char line[256], state[32];
	unsigned long pfn, owner;
	int node, ret = -1;
	FILE *f = fopen(POOL_DEBUGFS "/chunks", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx %d %31s %lu", &pfn, &node, state,
			   &owner) == 4 && pfn == want)
			ret = node;
	fclose(f);
	return ret;
}

/* 1 if the VMA starting at @addr has @flag in its smaps VmFlags, else 0. */
static int vma_has_flag(const void *addr, const char *flag)
{
	char line[512], want[32];
	bool in = false;
	int found = -1;
	FILE *f;

	snprintf(want, sizeof(want), "%lx-", (unsigned long)addr);
	f = fopen("/proc/self/smaps", "re");
	if (!f)
		return -1;
	while (found < 0 && fgets(line, sizeof(line), f)) {
		if (!strncmp(line, want, strlen(want)))
			in = true;
		else if (in && !strncmp(line, "VmFlags:", 8)) {
			char *tok, *save = NULL;

			found = 0;
			for (tok = strtok_r(line + 8, " \n", &save); tok;
			     tok = strtok_r(NULL, " \n", &save))
				if (!strcmp(tok, flag))
					found = 1;
		}
	}
	fclose(f);
	return found;
}

/*
 * MRPOOL_ALLOC_FORK_COPY is accepted, alone and with NODE_STRICT, and the
 * slice maps and frees as any other; the mapping is inherited at fork
 * (VmFlags without "dc"), a slice without the flag's is not.
 */
TEST_F(pool, alloc_fork_copy_flag)
{
	uint32_t flags[] = { MRPOOL_ALLOC_FORK_COPY,
			     MRPOOL_ALLOC_FORK_COPY | MRPOOL_ALLOC_NODE_STRICT, 0 };
	struct mrpool_alloc a;
	unsigned int i;
	void *p;

	for (i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		memset(&a, 0, sizeof(a));
		a.size = sizeof(a);
		a.bytes = 1;
		a.node = flags[i] & MRPOOL_ALLOC_NODE_STRICT ? self->q0.node :
			 MRPOOL_NODE_ANY;
		if (a.node < 0)
			a.node = 0;
		a.flags = flags[i];
		ASSERT_EQ(0, pool_ioctl(self->fd, MRPOOL_IOC_ALLOC, &a));
		EXPECT_EQ(self->q0.chunk_size, a.length);
		p = pool_map(self->fd, &a);
		ASSERT_NE(MAP_FAILED, p);
		EXPECT_EQ(!(flags[i] & MRPOOL_ALLOC_FORK_COPY),
			  vma_has_flag(p, "dc")) TH_LOG("flags %#x", flags[i]);
		EXPECT_EQ(0, munmap(p, a.length));
		EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
	}
}

/* A strict node request is served from that node, on every online node. */
TEST_F(pool, alloc_node_strict)
{
	struct mrpool_alloc a;
	unsigned long pfn;
	int node, nodes = 0;

	for (node = 0; node < 64; node++) {
		char path[96];

		snprintf(path, sizeof(path), "/sys/devices/system/node/node%d",
			 node);
		if (access(path, F_OK))
			continue;
		nodes++;
		memset(&a, 0, sizeof(a));
		a.size = sizeof(a);
		a.bytes = 1;
		a.node = node;
		a.flags = MRPOOL_ALLOC_NODE_STRICT;
		ASSERT_EQ(0, pool_ioctl(self->fd, MRPOOL_IOC_ALLOC, &a));
		ASSERT_EQ(1, pool_slice_pfns(a.slice_id, &pfn, 1));
		EXPECT_EQ(node, chunk_node(pfn));
		EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
	}
	EXPECT_LE(1, nodes);
	TH_LOG("%d node(s)", nodes);
}

/* sysfs and QUERY agree, and the per-order block counts add up. */
TEST_F(pool, sysfs_matches_query)
{
	unsigned long long blocks, pages = 0;
	char buf[256], *tok, *save;
	struct mrpool_alloc a;
	struct mrpool_query q;
	int order = 0;
	FILE *f;

	ASSERT_EQ(0, pool_alloc(self->fd, 1, &a));
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ((long long)q.total_bytes, pool_attr("total_bytes"));
	EXPECT_EQ((long long)q.free_bytes, pool_attr("free_bytes"));
	EXPECT_EQ((long long)q.used_bytes, pool_attr("used_bytes"));
	EXPECT_EQ((long long)q.quarantined_bytes,
		  pool_attr("quarantined_bytes"));
	EXPECT_EQ((long long)q.max_bytes, pool_attr("max_bytes"));
	EXPECT_EQ(q.node, pool_attr("node"));
	EXPECT_EQ((long long)q.allocs, pool_attr("stats/allocs"));
	EXPECT_EQ((long long)q.frees, pool_attr("stats/frees"));
	EXPECT_EQ((long long)q.alloc_failures,
		  pool_attr("stats/fail_nomem") + pool_attr("stats/fail_quota") +
		  pool_attr("stats/fail_memlock") +
		  pool_attr("stats/fail_injected"));
	EXPECT_LE(pool_attr("stats/trims"), pool_attr("stats/grows"));

	f = fopen(POOL_SYSFS "/blocks_per_order", "re");
	ASSERT_NE(NULL, f);
	ASSERT_NE(NULL, fgets(buf, sizeof(buf), f));
	fclose(f);
	for (tok = strtok_r(buf, " \n", &save); tok;
	     tok = strtok_r(NULL, " \n", &save), order++) {
		blocks = strtoull(tok, NULL, 10);
		pages += blocks << order;
	}
	EXPECT_EQ(q.chunk_size, 4096ULL << (order - 1));
	EXPECT_EQ(q.total_bytes, pages * 4096);
	EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
}

/* EXPORT_DMABUF of slice @id through @fd; the dma-buf in e->fd. */
static int export_slice(int fd, uint64_t id, struct mrpool_export_dmabuf *e)
{
	memset(e, 0, sizeof(*e));
	e->size = sizeof(*e);
	e->slice_id = id;
	e->flags = MRPOOL_EXPORT_CLOEXEC;
	return pool_ioctl(fd, MRPOOL_IOC_EXPORT_DMABUF, e);
}

/* SLICE_KEYS of slice @id through @fd, asking for the total only. */
static int slice_keys(int fd, uint64_t id, struct mrpool_slice_keys *k)
{
	memset(k, 0, sizeof(*k));
	k->size = sizeof(*k);
	k->slice_id = id;
	k->entry_size = sizeof(struct mrpool_slice_key);
	return pool_ioctl(fd, MRPOOL_IOC_SLICE_KEYS, k);
}

static int devices_total(int fd, struct mrpool_devices *d)
{
	memset(d, 0, sizeof(*d));
	d->size = sizeof(*d);
	d->entry_size = sizeof(struct mrpool_device);
	return pool_ioctl(fd, MRPOOL_IOC_DEVICES, d);
}

/*
 * Every ioctl that changes the pool or hands out access, through file @fd
 * not open for writing, with a request that would work on @id (a live
 * slice of another file) and with none at all: -EBADF each time.
 */
static int refused_all(int fd, uint64_t id)
{
	static const unsigned long cmds[] = {
		MRPOOL_IOC_ALLOC, MRPOOL_IOC_FREE, MRPOOL_IOC_EXPORT_DMABUF,
		MRPOOL_IOC_SLICE_KEYS,
	};
	struct mrpool_export_dmabuf e;
	struct mrpool_slice_keys k;
	struct mrpool_alloc a;
	unsigned int i;

	if (pool_alloc(fd, 1, &a) != -EBADF)
		return 1;
	if (pool_free(fd, id) != -EBADF || pool_free(fd, 0) != -EBADF)
		return 2;
	if (export_slice(fd, id, &e) != -EBADF)
		return 3;
	if (slice_keys(fd, id, &k) != -EBADF)
		return 4;
	/* Refused before the argument is read: not -EFAULT. */
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (pool_ioctl(fd, cmds[i], NULL) != -EBADF)
			return 5 + i;
	return 0;
}

/*
 * A read-only file (issue 33): ALLOC, FREE, EXPORT_DMABUF and SLICE_KEYS
 * are -EBADF, as write(2) would be, and change nothing: no counter moves,
 * another file's slice stays live. QUERY and DEVICES still answer.
 */
TEST_F(pool, rdonly_refuses_changes)
{
	long long inj = pool_attr("stats/fail_injected");
	struct mrpool_devices d;
	struct mrpool_query q, qr;
	struct mrpool_alloc a, b;
	int rofd;

	ASSERT_EQ(0, pool_alloc(self->fd, 1, &a));
	ASSERT_EQ(0, pool_query(self->fd, &self->q0));
	rofd = open(POOL_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, rofd);
	/* An armed failure knob would count a refusal that came too late. */
	ASSERT_EQ(0, pool_set_knob("fail_slice_alloc", 1));

	EXPECT_EQ(0, refused_all(rofd, a.slice_id));

	EXPECT_EQ(0, pool_query(rofd, &qr));
	EXPECT_EQ(0ULL, qr.file_bytes);
	EXPECT_EQ(0, devices_total(rofd, &d));
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(self->q0.allocs, q.allocs);
	EXPECT_EQ(self->q0.frees, q.frees);
	EXPECT_EQ(self->q0.alloc_failures, q.alloc_failures);
	EXPECT_EQ(self->q0.used_bytes, q.used_bytes);
	EXPECT_EQ(a.length, q.file_bytes);
	EXPECT_EQ(inj, pool_attr("stats/fail_injected"));
	close(rofd);
	/* The knob is still armed: no refused ALLOC got as far as it. */
	EXPECT_EQ(-ENOMEM, pool_alloc(self->fd, 1, &b));
	EXPECT_EQ(inj + 1, pool_attr("stats/fail_injected"));
	/* The slice was never touched: its owner frees it. */
	EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
}

/* A write-only file is a writer: ALLOC, SLICE_KEYS and FREE work. */
TEST_F(pool, wronly_may_change)
{
	struct mrpool_slice_keys k;
	struct mrpool_query q;
	struct mrpool_alloc a;
	int wofd;

	wofd = open(POOL_DEV, O_WRONLY | O_CLOEXEC);
	ASSERT_LE(0, wofd);
	ASSERT_EQ(0, pool_alloc(wofd, 1, &a));
	ASSERT_EQ(0, pool_query(wofd, &q));
	EXPECT_EQ(a.length, q.file_bytes);
	EXPECT_EQ(0, slice_keys(wofd, a.slice_id, &k));
	EXPECT_EQ(0, pool_free(wofd, a.slice_id));
	/* No file of this mode can map (do_mmap() wants FMODE_READ). */
	ASSERT_EQ(0, pool_alloc(wofd, 1, &a));
	EXPECT_EQ(MAP_FAILED, pool_map(wofd, &a));
	EXPECT_EQ(EACCES, errno);
	close(wofd);
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(self->q0.used_bytes, q.used_bytes);
}

/* Sends descriptor @fd over unix socket @sock. */
static int send_fd(int sock, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = "f", .iov_len = 1 };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf, .msg_controllen = sizeof(cbuf),
	};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &msg, 0) == 1 ? 0 : -1;
}

/* The descriptor that came over @sock, or -1. */
static int recv_fd(int sock)
{
	char cbuf[CMSG_SPACE(sizeof(int))], b;
	struct iovec iov = { .iov_base = &b, .iov_len = 1 };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf, .msg_controllen = sizeof(cbuf),
	};
	struct cmsghdr *c;
	int fd;

	if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != 1)
		return -1;
	c = CMSG_FIRSTHDR(&msg);
	if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

/*
 * The receiver of a read-only descriptor, as nobody: what it can do with
 * it. 0 if it is read-only in every way, else the step that was not.
 */
static int nobody_with_rdonly(int sock, uint64_t id)
{
	int prots[] = { PROT_READ | PROT_WRITE, PROT_READ, PROT_NONE };
	char path[64];
	struct mrpool_query q;
	unsigned int i;
	void *p;
	int fd, fd2;

	if (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY))
		return 100;
	/* setuid() made it undumpable: /proc/self/fd would be root's. */
	if (prctl(PR_SET_DUMPABLE, 1))
		return 101;
	fd = recv_fd(sock);
	if (fd < 0)
		return 102;
	if ((fcntl(fd, F_GETFL) & O_ACCMODE) != O_RDONLY)
		return 103;
	/* F_SETFL ignores the access mode. */
	if (fcntl(fd, F_SETFL, O_RDWR) || (fcntl(fd, F_GETFL) & O_ACCMODE) != O_RDONLY)
		return 104;
	i = refused_all(fd, id);
	if (i)
		return i;
	for (i = 0; i < sizeof(prots) / sizeof(prots[0]); i++) {
		p = mmap(NULL, 4096, prots[i], MAP_SHARED, fd,
			 MRPOOL_STATS_MMAP_OFFSET);
		if (p != MAP_FAILED || errno != EACCES)
			return 20 + i;
	}
	if (pool_query(fd, &q) || !q.total_bytes || q.file_bytes)
		return 30;
	/* Opening it again goes by the node's mode: reading only. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	fd2 = open(path, O_RDONLY | O_CLOEXEC);
	if (fd2 < 0)
		return 31;
	close(fd2);
	fd2 = open(path, O_RDWR | O_CLOEXEC);
	if (fd2 >= 0 || errno != EACCES)
		return 32;
	return 0;
}

/*
 * A read-only descriptor handed over a unix socket to an unprivileged
 * process stays read-only there: the mode cannot be changed or reopened
 * around (the node, like the review's 0644 one, lets others only read),
 * and every change is -EBADF, every mapping -EACCES.
 */
TEST_F(pool, rdonly_passed_to_nobody)
{
	struct mrpool_alloc a;
	struct mrpool_query q;
	struct stat st;
	char node[64];
	int sv[2], rofd, status;
	pid_t pid;

	ASSERT_EQ(0, pool_alloc(self->fd, 1, &a));
	ASSERT_EQ(0, pool_query(self->fd, &self->q0));
	/* A node of our own with the mode an admin would give it. */
	ASSERT_EQ(0, stat(POOL_DEV, &st));
	snprintf(node, sizeof(node), "/dev/mrpool-ro-test.%d", (int)getpid());
	unlink(node);
	ASSERT_EQ(0, mknod(node, S_IFCHR | 0644, st.st_rdev));
	ASSERT_EQ(0, chmod(node, 0644));
	rofd = open(node, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, rofd);
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		close(self->fd);
		close(sv[0]);
		_exit(nobody_with_rdonly(sv[1], a.slice_id));
	}
	close(sv[1]);
	EXPECT_EQ(0, send_fd(sv[0], rofd));
	close(rofd);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	unlink(node);
	close(sv[0]);
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(self->q0.allocs, q.allocs);
	EXPECT_EQ(self->q0.frees, q.frees);
	EXPECT_EQ(self->q0.used_bytes, q.used_bytes);
	EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
}

TEST_HARNESS_MAIN
