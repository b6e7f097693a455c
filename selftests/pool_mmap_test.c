// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Mapping slices: only the owner's token, exact length, shared and
 * writable; no growth; not inherited by fork; data survives unmap and
 * remap; FREE of a mapped slice waits for the last unmap; kill -9 returns
 * slices; reused chunks come back zeroed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
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

FIXTURE(map) {
	int fd;
	struct mrpool_query q0;
	struct mrpool_alloc a;		/* two chunks */
	uint64_t chunk;
};

FIXTURE_SETUP(map)
{
	POOL_SETUP_OPEN();
	self->chunk = self->q0.chunk_size;
	ASSERT_EQ(0, pool_alloc(self->fd, 2 * self->chunk, &self->a));
}

FIXTURE_TEARDOWN(map)
{
	pool_set_knob("fail_shmem", 0);
	pool_set_knob("fail_high_order", 0);
	if (self->fd >= 0)
		close(self->fd);
}

static void fill(void *p, size_t len, unsigned int seed)
{
	uint32_t *w = p;
	size_t i;

	for (i = 0; i < len / 4; i++)
		w[i] = (uint32_t)(i * 2654435761u) ^ seed;
}

static int check(const void *p, size_t len, unsigned int seed)
{
	const uint32_t *w = p;
	size_t i;

	for (i = 0; i < len / 4; i++)
		if (w[i] != ((uint32_t)(i * 2654435761u) ^ seed))
			return -1;
	return 0;
}

/* check() of [@off, @off + @len) of a buffer filled from its start. */
static int check_range(const void *p, size_t off, size_t len,
		       unsigned int seed)
{
	const uint32_t *w = p;
	size_t i;

	for (i = off / 4; i < (off + len) / 4; i++)
		if (w[i] != ((uint32_t)(i * 2654435761u) ^ seed))
			return -1;
	return 0;
}

/* 1 if debugfs "slices" lists @id of this process in @state. */
static int slice_listed(uint64_t id, const char *want)
{
	char line[256], comm[64], state[16];
	unsigned long long sid, length;
	unsigned int chunks;
	int pid, maps, found = 0;
	FILE *f = fopen(POOL_DEBUGFS "/slices", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%llu %d %63s %llu %u %d %15s", &sid, &pid,
			   comm, &length, &chunks, &maps, state) == 7 &&
		    sid == id && pid == getpid() && !strcmp(state, want))
			found = 1;
	fclose(f);
	return found;
}

static void *map_at(int fd, size_t len, int prot, int flags, uint64_t off)
{
	return mmap(NULL, len, prot, flags, fd, (off_t)off);
}

/* A fresh slice maps 2 MiB aligned, reads zeros, keeps what is written. */
TEST_F(map, map_zeroed_aligned)
{
	uint8_t *p = pool_map(self->fd, &self->a);

	ASSERT_NE(MAP_FAILED, p);
	EXPECT_EQ(0UL, (uintptr_t)p % (2 * MIB));
	EXPECT_EQ(self->a.length, pool_nonzero_at(p, self->a.length));
	fill(p, self->a.length, 1);
	EXPECT_EQ(0, check(p, self->a.length, 1));
	/* Whole PMD-order chunks are mapped with huge entries. */
	char pmd[8];

	pool_param_str("pmd_map", pmd, sizeof(pmd));
	if (pmd[0] == 'Y' && self->chunk == 2 * MIB &&
	    pool_read_ll("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size") ==
	    (long long)(2 * MIB))
		EXPECT_EQ((long long)self->a.length / 1024,
			  pool_pmd_mapped_kb(p));
	EXPECT_EQ(0, munmap(p, self->a.length));
}

struct backing_census {
	uint64_t id;
	char whole_blocks[16];	/* one block of the chunk's order */
	int whole, shmem, frag_shmem;
};

static bool backing_row(const struct pool_chunk_row *r, void *arg)
{
	struct backing_census *c = arg;
	bool shmem = !strcmp(r->backing, "shmem");

	if (r->owner != c->id || strcmp(r->state, "used"))
		return false;
	if (!strcmp(r->blocks, c->whole_blocks)) {
		c->whole++;
		c->shmem += shmem;
	} else {
		c->frag_shmem += shmem;
	}
	return true;
}

/* Whole PMD shmem chunks can be had here (the parameters allow them). */
static bool shmem_chunks_on(uint64_t chunk)
{
	char shm[8], pmd[8];

	pool_param_str("shmem_chunks", shm, sizeof(shm));
	pool_param_str("pmd_map", pmd, sizeof(pmd));
	return shm[0] == 'Y' && pmd[0] == 'Y' && chunk == 2 * MIB &&
	       pool_read_ll("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size") ==
	       (long long)(2 * MIB);
}

/* A chunk of plain pages, in any state, whole or not. */
static bool plain_chunk(const struct pool_chunk_row *r, void *arg)
{
	return strcmp(r->backing, "shmem");
}

/* Compact all of the guest's memory. */
static void compact_memory(void)
{
	int fd = open("/proc/sys/vm/compact_memory", O_WRONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (write(fd, "1\n", 2) != 2)
			perror("compact_memory");
		close(fd);
	}
}

/*
 * Free PMD blocks for the @n chunks a test grows (shmem chunks never
 * reclaim or compact: without one a chunk is plain): taken as hugetlb
 * pages and given straight back, so the kernel compacts only until it has
 * them. A compaction of the whole guest, page poisoning every page it
 * moved, ran for minutes under TCG on a loaded host and tripped the soft
 * lockup detector (make check-busy on 6.12); it stays the fallback where
 * hugetlb gets fewer blocks.
 */
static void free_pmd_blocks(int n)
{
	static const char nr[] = "/proc/sys/vm/nr_hugepages";
	long long old = pool_read_ll(nr), got = -1;

	if (old >= 0 && !pool_write_ll(nr, old + n)) {
		got = pool_read_ll(nr) - old;
		pool_write_ll(nr, old);
	}
	if (got < n)
		compact_memory();
}

/*
 * With shmem_chunks=Y a whole chunk is a huge folio of the module's
 * private tmpfs (what GUP-fast pins on 6.5+), mapped with one PMD as
 * shmem; chunks built of smaller blocks stay plain pages. The slice takes
 * every free chunk and grows two, which are shmem. Whole plain chunks may
 * come with them: no more than the pool held plain chunks before (an
 * earlier test's fail_shmem or fragmented chunks; the defrag worker or the
 * quarantine may free such a chunk meanwhile).
 */
TEST_F(map, whole_chunks_are_shmem)
{
	struct backing_census c = { 0 };
	struct mrpool_query q;
	struct mrpool_alloc b;
	int order = 0, plain;
	uint64_t len;
	uint8_t *p;

	if (!shmem_chunks_on(self->chunk))
		SKIP(return, "no PMD shmem chunks with these parameters");
	while (((uint64_t)sysconf(_SC_PAGESIZE) << order) < self->chunk)
		order++;
	snprintf(c.whole_blocks, sizeof(c.whole_blocks), "%d:1", order);
	plain = pool_chunks_scan(plain_chunk, NULL);
	ASSERT_LE(0, plain);
	free_pmd_blocks(2);
	ASSERT_EQ(0, pool_query(self->fd, &q));
	len = q.free_bytes + 2 * self->chunk;
	ASSERT_LE(q.total_bytes + 2 * self->chunk, q.max_bytes);
	ASSERT_EQ(0, pool_alloc(self->fd, len, &b));
	c.id = b.slice_id;
	ASSERT_EQ((int)(len / self->chunk), pool_chunks_scan(backing_row, &c));
	TH_LOG("%d chunks: %d whole, %d shmem; the pool held %d plain chunks",
	       (int)(len / self->chunk), c.whole, c.shmem, plain);
	/* The background trim may shrink the free list meanwhile: <=. */
	EXPECT_LE(2, c.shmem);
	EXPECT_LE(c.whole - c.shmem, plain);
	EXPECT_EQ(0, c.frag_shmem);
	p = pool_map(self->fd, &b);
	ASSERT_NE(MAP_FAILED, p);
	fill(p, b.length, 5);
	EXPECT_EQ((long long)c.shmem * 2048,
		  pool_smaps_kb(p, "ShmemPmdMapped:"));
	EXPECT_EQ(0, check(p, b.length, 5));
	EXPECT_EQ(0, munmap(p, b.length));
	EXPECT_EQ(0, pool_free(self->fd, b.slice_id));
}

/*
 * A chunk grown without a shmem folio (fail_shmem: as when no free PMD
 * block is at hand) is built of plain pages, whole, zeroed and PMD-mapped.
 */
TEST_F(map, fail_shmem_gives_plain_chunks)
{
	struct backing_census c = { 0 };
	struct mrpool_query q;
	struct mrpool_alloc b;
	uint64_t len;
	int order = 0;
	uint8_t *p;

	if (!shmem_chunks_on(self->chunk))
		SKIP(return, "no PMD shmem chunks with these parameters");
	/* Every free chunk and two grown ones: the grown are plain. */
	ASSERT_EQ(0, pool_query(self->fd, &q));
	len = q.free_bytes + 2 * self->chunk;
	ASSERT_LE(q.total_bytes + 2 * self->chunk, q.max_bytes);
	ASSERT_EQ(0, pool_set_knob("fail_shmem", 2));
	ASSERT_EQ(0, pool_alloc(self->fd, len, &b));
	EXPECT_EQ(0LL, pool_read_ll(POOL_DEBUGFS "/fail_shmem"));
	while (((uint64_t)sysconf(_SC_PAGESIZE) << order) < self->chunk)
		order++;
	snprintf(c.whole_blocks, sizeof(c.whole_blocks), "%d:1", order);
	c.id = b.slice_id;
	ASSERT_EQ((int)(len / self->chunk), pool_chunks_scan(backing_row, &c));
	EXPECT_LE(2, c.whole - c.shmem);
	p = pool_map(self->fd, &b);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_EQ(b.length, pool_nonzero_at(p, b.length));
	fill(p, b.length, 9);
	EXPECT_EQ(0, check(p, b.length, 9));
	EXPECT_EQ((long long)(c.whole - c.shmem) * 2048,
		  pool_smaps_kb(p, "FilePmdMapped:"));
	EXPECT_EQ((long long)c.shmem * 2048,
		  pool_smaps_kb(p, "ShmemPmdMapped:"));
	EXPECT_EQ(0, munmap(p, b.length));
	EXPECT_EQ(0, pool_free(self->fd, b.slice_id));
}

/*
 * Dropping the page cache leaves shmem chunks alone: a mapped slice keeps
 * its bytes and its PMDs, and a freed one comes back zeroed.
 */
TEST_F(map, drop_caches_keeps_chunks)
{
	uint8_t *p;
	int fd;

	if (!shmem_chunks_on(self->chunk))
		SKIP(return, "no PMD shmem chunks with these parameters");
	p = pool_map(self->fd, &self->a);
	ASSERT_NE(MAP_FAILED, p);
	fill(p, self->a.length, 13);
	fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(2, write(fd, "3\n", 2));
	EXPECT_EQ(0, check(p, self->a.length, 13));
	EXPECT_EQ((long long)self->a.length / 1024,
		  pool_pmd_mapped_kb(p));
	EXPECT_EQ(0, munmap(p, self->a.length));
	EXPECT_EQ(0, pool_free(self->fd, self->a.slice_id));
	ASSERT_EQ(2, write(fd, "3\n", 2));
	close(fd);
	/* Most recently freed first: the same chunks, zeroed. */
	ASSERT_EQ(0, pool_alloc(self->fd, 2 * self->chunk, &self->a));
	p = pool_map(self->fd, &self->a);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_EQ(self->a.length, pool_nonzero_at(p, self->a.length));
	EXPECT_EQ(0, munmap(p, self->a.length));
}

/* Under fragmentation a chunk is built of smaller blocks, counted per order. */
TEST_F(map, fallback_orders)
{
	unsigned long long before[16] = {}, after[16] = {};
	struct mrpool_query q;
	struct mrpool_alloc b;
	int order = 0, n, i;
	char buf[256], *tok, *save;
	uint8_t *p;
	FILE *f;

	ASSERT_EQ(0, pool_query(self->fd, &q));
	if (q.total_bytes + self->chunk > q.max_bytes)
		POOL_SKIP("no room to grow below max_mb");
	for (n = 0; n < 2; n++) {
		f = fopen(POOL_SYSFS "/blocks_per_order", "re");
		ASSERT_NE(NULL, f);
		ASSERT_NE(NULL, fgets(buf, sizeof(buf), f));
		fclose(f);
		i = 0;
		for (tok = strtok_r(buf, " \n", &save); tok && i < 16;
		     tok = strtok_r(NULL, " \n", &save))
			(n ? after : before)[i++] = strtoull(tok, NULL, 10);
		order = i - 1;
		if (n)
			break;
		/* The next block above order 0 fails: the new chunk is
		 * made of two blocks one order down.
		 */
		ASSERT_EQ(0, pool_set_knob("fail_high_order", 1));
		ASSERT_EQ(0, pool_alloc(self->fd, q.free_bytes + self->chunk,
					&b));
	}
	ASSERT_LT(0, order);
	EXPECT_EQ(before[order - 1] + 2, after[order - 1]);
	EXPECT_LE(before[order], after[order]);

	/* The slice still works, the fallback chunk through 4 KiB PTEs. */
	p = pool_map(self->fd, &b);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_EQ(b.length, pool_nonzero_at(p, b.length));
	fill(p, b.length, 11);
	EXPECT_EQ(0, check(p, b.length, 11));
	EXPECT_EQ(0, munmap(p, b.length));
	EXPECT_EQ(0, pool_free(self->fd, b.slice_id));
}

/*
 * Tokens that are not a live slice of this file: -ENOENT. Offset 0 is the
 * file's stats page (lib_stats_test.c): a slice's length there is -EINVAL.
 */
TEST_F(map, wrong_token)
{
	size_t len = self->a.length;
	int prot = PROT_READ | PROT_WRITE;

	EXPECT_EQ(MAP_FAILED, map_at(self->fd, len, prot, MAP_SHARED,
				     MRPOOL_STATS_MMAP_OFFSET));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(MAP_FAILED, map_at(self->fd, len, prot, MAP_SHARED,
				     self->a.mmap_offset + 4096));
	EXPECT_EQ(ENOENT, errno);
	EXPECT_EQ(MAP_FAILED, map_at(self->fd, len, prot, MAP_SHARED,
				     self->a.mmap_offset + 1000 * 2 * MIB));
	EXPECT_EQ(ENOENT, errno);
}

/* Another file's token does not map, even a valid one. */
TEST_F(map, other_files_token)
{
	struct mrpool_alloc b;
	int fd2 = pool_open();
	void *p;

	ASSERT_LE(0, fd2);
	p = map_at(fd2, self->a.length, PROT_READ | PROT_WRITE, MAP_SHARED,
		   self->a.mmap_offset);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(ENOENT, errno);
	ASSERT_EQ(0, pool_alloc(fd2, self->chunk, &b));
	p = map_at(self->fd, b.length, PROT_READ | PROT_WRITE, MAP_SHARED,
		   b.mmap_offset);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(ENOENT, errno);
	close(fd2);
}

/* Exactly the slice's length: shorter or longer is -EINVAL. */
TEST_F(map, wrong_length)
{
	int prot = PROT_READ | PROT_WRITE;

	EXPECT_EQ(MAP_FAILED, map_at(self->fd, self->a.length - 4096, prot,
				     MAP_SHARED, self->a.mmap_offset));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(MAP_FAILED, map_at(self->fd, self->a.length + self->chunk,
				     prot, MAP_SHARED, self->a.mmap_offset));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(MAP_FAILED, map_at(self->fd, self->chunk, prot,
				     MAP_SHARED, self->a.mmap_offset));
	EXPECT_EQ(EINVAL, errno);
}

/* Private mappings are refused: a pin would break COW and pin a copy. */
TEST_F(map, map_private)
{
	EXPECT_EQ(MAP_FAILED, map_at(self->fd, self->a.length,
				     PROT_READ | PROT_WRITE, MAP_PRIVATE,
				     self->a.mmap_offset));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(MAP_FAILED, map_at(self->fd, self->a.length, PROT_READ,
				     MAP_PRIVATE, self->a.mmap_offset));
	EXPECT_EQ(EINVAL, errno);
}

/*
 * Read-only mappings are refused. A file not open for writing maps
 * nothing at all (issue 33): not its owner's slices (it can have none),
 * not the stats page, under no protection, so no mapping exists that
 * mprotect() could make writable; were one let through, mprotect() must
 * still refuse to add write (do_mmap() clears VM_MAYWRITE).
 */
TEST_F(map, read_only)
{
	static const int prots[] = {
		PROT_READ | PROT_WRITE, PROT_WRITE, PROT_READ, PROT_NONE,
	};
	static const int flags[] = { MAP_SHARED, MAP_SHARED_VALIDATE };
	uint64_t offs[2] = { self->a.mmap_offset, MRPOOL_STATS_MMAP_OFFSET };
	size_t lens[2] = { self->a.length, 4096 };
	unsigned int i, j, k;
	uint8_t *p;
	int rofd;

	EXPECT_EQ(MAP_FAILED, map_at(self->fd, self->a.length, PROT_READ,
				     MAP_SHARED, self->a.mmap_offset));
	EXPECT_EQ(EACCES, errno);

	rofd = open(POOL_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, rofd);
	for (i = 0; i < 2; i++)
		for (j = 0; j < sizeof(prots) / sizeof(prots[0]); j++)
			for (k = 0; k < 2; k++) {
				p = map_at(rofd, lens[i], prots[j], flags[k],
					   offs[i]);
				EXPECT_EQ(MAP_FAILED, p)
					TH_LOG("offset %#llx prot %d flags %#x",
					       (unsigned long long)offs[i],
					       prots[j], flags[k]);
				if (p == MAP_FAILED) {
					EXPECT_EQ(EACCES, errno);
					continue;
				}
				EXPECT_EQ(-1, mprotect(p, lens[i],
						       PROT_READ | PROT_WRITE));
				EXPECT_EQ(EACCES, errno);
				munmap(p, lens[i]);
			}
	close(rofd);
}

/* mremap cannot grow a slice mapping (VM_DONTEXPAND). */
TEST_F(map, mremap_growth)
{
	void *p = pool_map(self->fd, &self->a), *q;

	ASSERT_NE(MAP_FAILED, p);
	q = mremap(p, self->a.length, self->a.length + self->chunk,
		   MREMAP_MAYMOVE);
	EXPECT_EQ(MAP_FAILED, q);
	EXPECT_EQ(EFAULT, errno);
	q = mremap(p, self->a.length, self->a.length + self->chunk, 0);
	EXPECT_EQ(MAP_FAILED, q);
	EXPECT_EQ(0, munmap(p, self->a.length));
}

/* The memory is the slice's, not the mapping's: it survives a remap. */
TEST_F(map, data_survives_remap)
{
	void *p = pool_map(self->fd, &self->a);

	ASSERT_NE(MAP_FAILED, p);
	fill(p, self->a.length, 7);
	ASSERT_EQ(0, munmap(p, self->a.length));
	p = pool_map(self->fd, &self->a);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_EQ(0, check(p, self->a.length, 7));
	/* Zapped PTEs come back through the fault handler, same pages. */
	ASSERT_EQ(0, madvise(p, self->a.length, MADV_DONTNEED));
	EXPECT_EQ(0, check(p, self->a.length, 7));
	EXPECT_EQ(0, munmap(p, self->a.length));
}

/* Moved off 2 MiB alignment and cut up, a mapping still shows the slice. */
TEST_F(map, unaligned_move_and_split)
{
	size_t len = self->a.length;
	uint8_t *p, *q, *hole;

	p = pool_map(self->fd, &self->a);
	ASSERT_NE(MAP_FAILED, p);
	fill(p, len, 21);
	/* A hole one page past a 2 MiB boundary: huge entries cannot fit. */
	hole = mmap(NULL, len + 4 * MIB, PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, hole);
	q = (uint8_t *)(((uintptr_t)hole + 2 * MIB - 1) & ~(2 * MIB - 1)) +
	    4096;
	q = mremap(p, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, q);
	ASSERT_NE(MAP_FAILED, q);
	EXPECT_EQ(0, check(q, len, 21));
	/* Refault through 4 KiB entries into compound chunks. */
	ASSERT_EQ(0, madvise(q, len, MADV_DONTNEED));
	EXPECT_EQ(0, check(q, len, 21));
	EXPECT_EQ(0LL, pool_pmd_mapped_kb(q));
	/* Cut a page out of the middle: three VMAs, one slice. */
	ASSERT_EQ(0, munmap(q + self->chunk, 4096));
	EXPECT_EQ(0, check_range(q, 0, self->chunk, 21));
	EXPECT_EQ(0, check_range(q, self->chunk + 4096,
				 len - self->chunk - 4096, 21));
	ASSERT_EQ(0, pool_free(self->fd, self->a.slice_id));
	EXPECT_EQ(0, munmap(q, self->chunk));
	EXPECT_EQ(1, slice_listed(self->a.slice_id, "freed"));
	EXPECT_EQ(0, munmap(q + self->chunk + 4096, len - self->chunk - 4096));
	EXPECT_EQ(0, slice_listed(self->a.slice_id, "freed"));
	munmap(hole, len + 4 * MIB);
}

/*
 * FREE of a mapped slice revokes the mapping (revoke.c): each part of it,
 * split or not, faults with SIGBUS, and the memory is back at once.
 */
TEST_F(map, free_while_mapped)
{
	struct mrpool_query q;
	uint8_t *p = pool_map(self->fd, &self->a);
	uint64_t len = self->a.length;

	ASSERT_NE(MAP_FAILED, p);
	fill(p, len, 3);
	EXPECT_EQ(1, slice_listed(self->a.slice_id, "live"));
	/* Unmapping one chunk splits the VMA: the rest still maps it. */
	ASSERT_EQ(0, munmap(p, self->chunk));
	ASSERT_EQ(0, pool_query(self->fd, &q));
	uint64_t used = q.used_bytes, frees = q.frees;

	ASSERT_EQ(0, pool_free(self->fd, self->a.slice_id));
	EXPECT_EQ(-ENOENT, pool_free(self->fd, self->a.slice_id));
	EXPECT_EQ(MAP_FAILED, pool_map(self->fd, &self->a));
	EXPECT_EQ(ENOENT, errno);
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(used - len, q.used_bytes);
	EXPECT_EQ(0ULL, q.file_bytes);
	EXPECT_EQ(frees + 1, q.frees);
	EXPECT_EQ(SIGBUS, pool_touch(p + self->chunk, false));
	EXPECT_EQ(SIGBUS, pool_touch(p + len - 1, true));
	/* Listed while a VMA holds it, memory or not. */
	EXPECT_EQ(1, slice_listed(self->a.slice_id, "freed"));

	ASSERT_EQ(0, munmap(p + self->chunk, len - self->chunk));
	EXPECT_EQ(0, slice_listed(self->a.slice_id, "freed"));
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(used - len, q.used_bytes);
	EXPECT_EQ(frees + 1, q.frees);
}

/* fork() does not copy the mapping; the child cannot map it either way. */
TEST_F(map, child_cannot_map)
{
	uint8_t *p = pool_map(self->fd, &self->a);
	struct mrpool_query q;
	int status;
	pid_t pid;

	ASSERT_NE(MAP_FAILED, p);
	p[0] = 0x42;
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct mrpool_alloc b;
		unsigned char vec;
		int fd2 = pool_open();
		void *c;

		/* VM_DONTCOPY: nothing is mapped there in the child. */
		if (mincore(p, 4096, &vec) == 0 || errno != ENOMEM)
			_exit(1);
		if (fd2 < 0)
			_exit(2);
		c = mmap(NULL, self->a.length, PROT_READ | PROT_WRITE,
			 MAP_SHARED, fd2, (off_t)self->a.mmap_offset);
		if (c != MAP_FAILED || errno != ENOENT)
			_exit(3);
		if (pool_free(fd2, self->a.slice_id) != -ENOENT)
			_exit(4);
		/* Nor through the descriptor it inherited: the file is the
		 * parent's.
		 */
		c = mmap(NULL, self->a.length, PROT_READ | PROT_WRITE,
			 MAP_SHARED, self->fd, (off_t)self->a.mmap_offset);
		if (c != MAP_FAILED || errno != EPERM)
			_exit(5);
		if (pool_free(self->fd, self->a.slice_id) != -EPERM)
			_exit(6);
		if (pool_alloc(self->fd, 1, &b) != -EPERM)
			_exit(7);
		/* It may query the pool, not what the owner holds. */
		if (pool_query(self->fd, &q) || !q.total_bytes)
			_exit(8);
		if (q.file_bytes || q.user_bytes || q.user_quarantined_bytes)
			_exit(9);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	EXPECT_EQ(0x42, p[0]);
	/* What the child was told 0 of: the owner sees it. */
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_LE(self->a.length, q.file_bytes);
	EXPECT_LE(self->a.length, q.user_bytes);
	EXPECT_EQ(0, munmap(p, self->a.length));
}

/*
 * A child maps three one-chunk slices, optionally FREEs them (which gives
 * their memory back at once) and closes its file (then only its revoked
 * mappings hold them), and is killed: all three are back, and the pool
 * whole, by the time waitpid() returns.
 */
static void kill9_child(struct __test_metadata *_metadata,
			FIXTURE_DATA(map) *self, bool free_first)
{
	struct mrpool_query before, after;
	int pipefd[2], life[2], status;
	char c;
	pid_t pid;

	ASSERT_EQ(0, pool_query(self->fd, &before));
	ASSERT_EQ(0, pipe(pipefd));
	ASSERT_EQ(0, pipe(life));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct mrpool_alloc s;
		int fd2 = pool_open(), i;
		void *m;

		for (i = 0; i < 3; i++) {
			if (fd2 < 0 || pool_alloc(fd2, self->chunk, &s))
				_exit(1);
			m = pool_map(fd2, &s);
			if (m == MAP_FAILED)
				_exit(2);
			memset(m, 0xee, s.length);
			if (free_first && pool_free(fd2, s.slice_id))
				_exit(3);
		}
		if (free_first)
			close(fd2);
		if (write(pipefd[1], "r", 1) != 1)
			_exit(4);
		pool_child_wait(life);	/* killed by the test */
		_exit(0);
	}
	/* A child that fails before writing ends the read: no hang. */
	close(pipefd[1]);
	ASSERT_EQ(1, read(pipefd[0], &c, 1));
	ASSERT_EQ(0, pool_query(self->fd, &after));
	/* A FREE revokes the mappings: back before the kill (revoke.c). */
	EXPECT_EQ(before.used_bytes + (free_first ? 0 : 3 * self->chunk),
		  after.used_bytes);
	EXPECT_EQ(before.frees + (free_first ? 3 : 0), after.frees);
	ASSERT_EQ(0, kill(pid, SIGKILL));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFSIGNALED(status));
	ASSERT_EQ(0, pool_query(self->fd, &after));
	EXPECT_EQ(before.used_bytes, after.used_bytes);
	EXPECT_EQ(before.frees + 3, after.frees);
	EXPECT_EQ(after.total_bytes,
		  after.free_bytes + after.used_bytes + after.quarantined_bytes);
	close(pipefd[0]);
	close(life[0]);
	close(life[1]);
}

/* kill -9 of a process holding mapped slices returns all of them. */
TEST_F(map, kill9_returns_slices)
{
	kill9_child(_metadata, self, false);
}

/*
 * The same with only the revoked mappings holding the slices: the memory
 * went back at the FREE, and each VMA's close drops a slice's last
 * reference during exit, deferred out of mmap_lock (mmap.c).
 */
TEST_F(map, kill9_returns_freed_mappings)
{
	kill9_child(_metadata, self, true);
}

/* One process writes and frees; the next owner of that chunk reads zeros. */
TEST_F(map, zero_on_reuse)
{
	unsigned long pfn_a = 0;
	struct mrpool_alloc b;
	int pipefd[2], status;
	long long zeroed = pool_attr("stats/zeroed");
	pid_t pid;
	void *p;

	ASSERT_EQ(0, pipe(pipefd));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct mrpool_alloc s;
		int fd2 = pool_open();
		unsigned long pfn;

		if (fd2 < 0 || pool_alloc(fd2, self->chunk, &s))
			_exit(1);
		if (pool_slice_pfns(s.slice_id, &pfn, 1) != 1)
			_exit(2);
		p = pool_map(fd2, &s);
		if (p == MAP_FAILED)
			_exit(3);
		fill(p, s.length, 0xabc);
		if (write(pipefd[1], &pfn, sizeof(pfn)) != sizeof(pfn))
			_exit(4);
		_exit(0);	/* exit unmaps and closes: the chunk returns */
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status));
	ASSERT_EQ((ssize_t)sizeof(pfn_a), read(pipefd[0], &pfn_a, sizeof(pfn_a)));
	EXPECT_LT(zeroed, pool_attr("stats/zeroed"));

	/* That chunk is free again: a slice of every free chunk has it. */
	ASSERT_EQ(1, pool_alloc_free_has(self->fd, pfn_a, &b));
	p = pool_map(self->fd, &b);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_EQ(b.length, pool_nonzero_at(p, b.length));
	EXPECT_EQ(0, munmap(p, b.length));
	close(pipefd[0]);
	close(pipefd[1]);
}

/* debugfs lists this file with its pid, slices and bytes. */
TEST_F(map, debugfs_clients)
{
	char line[256], comm[64];
	unsigned long long bytes;
	int pid, n, found = 0;
	FILE *f = fopen(POOL_DEBUGFS "/clients", "re");

	ASSERT_NE(NULL, f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%d %63s %d %llu", &pid, comm, &n, &bytes) == 4 &&
		    pid == getpid() && n == 1 && bytes == self->a.length)
			found = 1;
	fclose(f);
	EXPECT_EQ(1, found);
}

TEST_HARNESS_MAIN
