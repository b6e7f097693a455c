// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A chunk with a hardware-poisoned page never reaches another owner
 * (review 2026-12-04 #6). memory_failure() cannot unmap a pool page (no
 * rmap finds the slices' mappings) nor split a chunk the pool holds: it
 * marks the page and gives up (-EBUSY). The pool must then neither zero
 * the chunk nor hand it on, whichever way it comes back: a FREE, a
 * quarantine check, or a take of a chunk poisoned while free. It retires
 * it: out of the totals (the pool may grow by one), the owner's charge
 * released, stats/retired and stats/hwpoison_retired up by one, one
 * kernel log line naming it by pointer. And the fault handler never
 * maps a poisoned page: the owner gets SIGBUS with BUS_MCEERR_AR.
 *
 * Poison is injected as root with madvise(MADV_HWPOISON) on a mapping,
 * or by frame number through debugfs hwpoison/corrupt-pfn (the
 * hwpoison_inject module), frame numbers from /proc/self/pagemap and
 * debugfs mrpool/chunks; /proc/kpageflags confirms the mark. Each test
 * poisons a fresh chunk of its variant's kind: a shmem huge folio, a
 * compound page of plain pages (fail_shmem), or order-0 pages (under
 * fail_high_order), and then takes every chunk max_mb allows (max_mb is
 * set to one chunk above the pool's size), checking every page of each.
 *
 * The poisoned pages stay so until the guest is gone, kept by the pool
 * and by the kernel: this runs in a VM run of its own (selftests/vm-runs,
 * "hwpoison"). The kernel's own lines about the injections ("Injecting
 * memory failure", "Memory failure: ...") match none of the runner's
 * failure patterns (tools/vm/run), so they need no allowance.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/uio.h>

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
#include "kmsg_util.h"

#define PAGE		4096UL
/* The page of a chunk that is poisoned: neither its first nor its last. */
#define BAD_PAGE	5
#define KPF_HWPOISON	19
#define MAX_SLICES	256
#define CORRUPT_PFN	"/sys/kernel/debug/hwpoison/corrupt-pfn"
#define HWP_MSG		" retired: a page has a hardware memory error"

FIXTURE(hwp) {
	int fd;
	int kmsg;			/* /dev/kmsg, read from setup on */
	struct mrpool_query q0;
	long long trim_sec, max_mb;	/* restored by the teardown */
	long long retired, hwp_retired;	/* stats at setup */
	uint64_t chunk;
	struct mrpool_alloc victim;	/* one fresh chunk of the variant */
	unsigned long victim_pfn;	/* its first page */
	unsigned long bad;		/* the frame of its page BAD_PAGE */
};

FIXTURE_VARIANT(hwp) {
	const char *knob;		/* debugfs knob for a fresh chunk */
	int knob_n;			/* armed with this */
	const char *backing;		/* debugfs chunks: "shmem", "pages" */
	bool whole;			/* one PMD-order block */
};

/* The default: a whole chunk, a huge folio of the module's tmpfs. */
FIXTURE_VARIANT_ADD(hwp, shmem) {
	.knob = NULL,
	.backing = "shmem",
	.whole = true,
};

/* A whole chunk of plain pages: one compound page. */
FIXTURE_VARIANT_ADD(hwp, compound) {
	.knob = "fail_shmem",
	.knob_n = 1,
	.backing = "pages",
	.whole = true,
};

/*
 * A chunk built under fragmentation: order-0 pages. The knob stays armed
 * to the teardown: the defrag worker, which would replace a fragmented
 * free chunk by a whole one, fails while it is.
 */
FIXTURE_VARIANT_ADD(hwp, split) {
	.knob = "fail_high_order",
	.knob_n = 1000000,
	.backing = "pages",
	.whole = false,
};

/* ---- SIGBUS around the reads of a mapping ---- */

static sigjmp_buf bus_jmp;
static volatile sig_atomic_t bus_code;
static void *volatile bus_addr;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	bus_code = si->si_code;
	bus_addr = si->si_addr;
	siglongjmp(bus_jmp, 1);
}

/*
 * Read @len bytes at @p: 0 and *@first_nonzero (@len if all zero), or
 * -1 with bus_code and bus_addr set when a read raised SIGBUS.
 */
static int read_guarded(const void *p, size_t len, size_t *first_nonzero)
{
	struct sigaction sa = { .sa_sigaction = on_sigbus,
				.sa_flags = SA_SIGINFO };
	struct sigaction old;
	int ret = 0;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, &old);
	if (sigsetjmp(bus_jmp, 1))
		ret = -1;
	else
		*first_nonzero = pool_nonzero_at(p, len);
	sigaction(SIGBUS, &old, NULL);
	return ret;
}

/* ---- frame numbers and page flags (root only) ---- */

#define PFN_ERR		ULONG_MAX	/* pagemap could not be read */

/*
 * The frame of the page mapped at @addr (faulted in by the caller), 0 if
 * none is, or PFN_ERR.
 */
static unsigned long pfn_of(const void *addr)
{
	uint64_t e = 0;
	int fd;

	fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return PFN_ERR;
	if (pread(fd, &e, sizeof(e), (uintptr_t)addr / PAGE * sizeof(e)) !=
	    sizeof(e)) {
		close(fd);
		return PFN_ERR;
	}
	close(fd);
	if (!(e >> 63))
		return 0;
	return e & ((1ULL << 55) - 1);
}

static bool pfn_hwpoisoned(unsigned long pfn)
{
	uint64_t flags = 0;
	int fd;

	fd = open("/proc/kpageflags", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	if (pread(fd, &flags, sizeof(flags), pfn * sizeof(flags)) !=
	    sizeof(flags))
		flags = 0;
	close(fd);
	return flags & (1ULL << KPF_HWPOISON);
}

/*
 * memory_failure() on frame @pfn as a machine check would call it: 0 once
 * the page is marked (the call itself fails with EBUSY on pool pages).
 */
static int poison_pfn(unsigned long pfn)
{
	char val[32];

	if (access(CORRUPT_PFN, W_OK) &&
	    system("modprobe hwpoison_inject 2>/dev/null"))
		return -ENOENT;
	snprintf(val, sizeof(val), "%lu", pfn);
	pool_write_str(CORRUPT_PFN, val);
	return pfn_hwpoisoned(pfn) ? 0 : -EIO;
}

/* First page frame of the chunk slice @id owns (one-chunk slices). */
static unsigned long slice_pfn(uint64_t id)
{
	unsigned long pfn = 0;

	return pool_slice_pfns(id, &pfn, 1) == 1 ? pfn : 0;
}

struct row_want {
	uint64_t id;
	struct pool_chunk_row row;
};

static bool row_of(const struct pool_chunk_row *r, void *arg)
{
	struct row_want *w = arg;

	if (r->owner != w->id || strcmp(r->state, "used"))
		return false;
	w->row = *r;
	return true;
}

/* ---- the kernel log ---- */

/* Since setup, one retire line for a poisoned chunk, no frame number. */
static void expect_log(struct __test_metadata *_metadata, int fd,
		       const unsigned long *pfns, int npfns)
{
	kmsg_expect_chunk_line(_metadata, fd, HWP_MSG, pfns, npfns);
}

/* ---- setup: a fresh chunk of the variant, max_mb one chunk above ---- */

FIXTURE_SETUP(hwp)
{
	struct mrpool_alloc hold = { 0 };
	struct row_want w = { 0 };
	struct mrpool_query q;
	bool held = false;
	char *p;

	self->trim_sec = -1;
	self->max_mb = -1;
	self->kmsg = -1;
	POOL_SETUP_OPEN();
	self->chunk = self->q0.chunk_size;
	if (geteuid())
		POOL_SETUP_SKIP("needs root (poison injection, pagemap)");
	if (access("/proc/sys/vm/memory_failure_recovery", F_OK))
		POOL_SETUP_SKIP("kernel without CONFIG_MEMORY_FAILURE");
	if (self->q0.chunk_size != 2 * MIB)
		POOL_SETUP_SKIP("chunk_kb is not 2048");
	self->kmsg = kmsg_from_now();
	ASSERT_LE(0, self->kmsg);
	self->max_mb = pool_param("max_mb");
	self->trim_sec = pool_trim_off();
	ASSERT_LE(0, self->trim_sec);
	self->retired = pool_attr("stats/retired");
	self->hwp_retired = pool_attr("stats/hwpoison_retired");
	ASSERT_TRUE(POOL_WAIT(pool_attr("quarantined_bytes") == 0, 60000));

	/* Room for exactly one chunk more than the pool holds. */
	ASSERT_EQ(0, pool_query(self->fd, &q));
	ASSERT_EQ(0, pool_set_param("max_mb",
				    (q.total_bytes + self->chunk) / MIB));
	/* Every free chunk held, so the victim is grown. */
	if (q.free_bytes) {
		ASSERT_EQ(0, pool_alloc(self->fd, q.free_bytes, &hold));
		held = true;
	}
	if (variant->knob)
		ASSERT_EQ(0, pool_set_knob(variant->knob, variant->knob_n));
	ASSERT_EQ(0, pool_alloc(self->fd, self->chunk, &self->victim));
	if (held)
		ASSERT_EQ(0, pool_free(self->fd, hold.slice_id));

	w.id = self->victim.slice_id;
	ASSERT_EQ(1, pool_chunks_scan(row_of, &w));
	self->victim_pfn = w.row.pfn;
	if (strcmp(w.row.backing, variant->backing))
		POOL_SETUP_SKIP("victim chunk backed by %s, not %s (shmem_chunks=N?)",
				w.row.backing, variant->backing);
	EXPECT_EQ(variant->whole, !strcmp(w.row.blocks, "9:1"))
		TH_LOG("blocks %s", w.row.blocks);

	/* The frame to poison: pages of a split chunk are anywhere. */
	p = pool_map(self->fd, &self->victim);
	ASSERT_NE(MAP_FAILED, p);
	memset(p, 0xa5, self->victim.length);
	self->bad = pfn_of(p + BAD_PAGE * PAGE);
	munmap(p, self->victim.length);
	ASSERT_NE(0, self->bad);
	ASSERT_NE(PFN_ERR, self->bad);
	if (variant->whole)
		EXPECT_EQ(self->victim_pfn + BAD_PAGE, self->bad);
}

FIXTURE_TEARDOWN(hwp)
{
	if (self->kmsg >= 0)
		close(self->kmsg);
	if (self->fd < 0)
		return;
	pool_set_knob("fail_high_order", 0);
	pool_set_knob("fail_shmem", 0);
	/* Closing returns every slice; max_mb can then shrink back. */
	close(self->fd);
	if (self->max_mb >= 0)
		pool_set_param("max_mb", self->max_mb);
	pool_trim_restore(self->trim_sec);
}

/* ---- the checks after a poisoned chunk went back ---- */

/*
 * The chunk at @bad_chunk (its page @bad poisoned) went back. Every chunk
 * max_mb allows is taken, as one-chunk slices: none is that chunk or
 * holds that page, and every page of every one reads zero without SIGBUS.
 * The chunk was retired, once (counters, log); the pool holds max_mb
 * again, all of it in use and charged to this user, none quarantined.
 */
static void expect_retired_and_reused(struct __test_metadata *_metadata,
				      FIXTURE_DATA(hwp) *self,
				      unsigned long bad_chunk,
				      unsigned long bad)
{
	unsigned long pfns[2] = { bad_chunk, bad }, pfn;
	uint64_t ids[MAX_SLICES], chunk = self->chunk;
	struct mrpool_alloc a;
	struct mrpool_query q;
	int n = 0, i, ret;
	size_t nz, j;
	char *p;

	for (;;) {
		ASSERT_GT(MAX_SLICES, n);
		ret = pool_alloc(self->fd, chunk, &a);
		if (ret == -ENOMEM)
			break;
		ASSERT_EQ(0, ret);
		ids[n++] = a.slice_id;
		EXPECT_NE(bad_chunk, slice_pfn(a.slice_id))
			TH_LOG("slice %d got the poisoned chunk", n);
		p = pool_map(self->fd, &a);
		ASSERT_NE(MAP_FAILED, p);
		for (j = 0; j < a.length; j += PAGE) {
			ret = read_guarded(p + j, PAGE, &nz);
			EXPECT_EQ(0, ret)
				TH_LOG("slice %d page %zu: SIGBUS (si_code %d)",
				       n, j / PAGE, (int)bus_code);
			if (ret)
				break;
			EXPECT_EQ(PAGE, nz)
				TH_LOG("slice %d page %zu not zeroed", n, j / PAGE);
			pfn = pfn_of(p + j);
			EXPECT_NE(0, pfn);
			EXPECT_NE(PFN_ERR, pfn);
			EXPECT_NE(bad, pfn)
				TH_LOG("slice %d page %zu is the poisoned page",
				       n, j / PAGE);
		}
		munmap(p, a.length);
	}

	/* Retired by a worker: at the FREE, the check or the take. */
	EXPECT_TRUE(POOL_WAIT(pool_attr("stats/hwpoison_retired") >=
			      self->hwp_retired + 1, 20000));
	EXPECT_EQ(self->hwp_retired + 1, pool_attr("stats/hwpoison_retired"));
	EXPECT_EQ(self->retired + 1, pool_attr("stats/retired"));
	expect_log(_metadata, self->kmsg, pfns, 2);

	ASSERT_EQ(0, pool_query(self->fd, &q));
	TH_LOG("took %d chunks; total %llu used %llu free %llu max %llu",
	       n, (unsigned long long)q.total_bytes,
	       (unsigned long long)q.used_bytes,
	       (unsigned long long)q.free_bytes,
	       (unsigned long long)q.max_bytes);
	EXPECT_EQ(q.max_bytes, q.total_bytes);
	EXPECT_EQ(q.total_bytes, q.used_bytes);
	EXPECT_EQ(q.used_bytes, (uint64_t)n * chunk);
	EXPECT_EQ(0, q.quarantined_bytes);
	EXPECT_EQ(q.used_bytes, q.user_bytes);
	EXPECT_EQ(0, q.user_quarantined_bytes);

	for (i = 0; i < n; i++)
		EXPECT_EQ(0, pool_free(self->fd, ids[i]));
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(0, q.used_bytes);
	EXPECT_EQ(0, q.user_bytes);
}

/* Map the victim (written by the setup), its pages faulted in. */
static char *map_victim(FIXTURE_DATA(hwp) *self)
{
	char *p = pool_map(self->fd, &self->victim);
	size_t i;

	if (p == MAP_FAILED)
		return p;
	for (i = 0; i < self->victim.length; i += PAGE)
		(void)*(volatile char *)(p + i);
	return p;
}

/* MADV_HWPOISON on a mapped page of a slice, then FREE: retired. */
TEST_F_TIMEOUT(hwp, freed_after_madvise, 300)
{
	unsigned long bad = self->bad;
	char *p;
	int ret;

	POOL_SETUP_SKIPPED();
	p = map_victim(self);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_EQ(bad, pfn_of(p + BAD_PAGE * PAGE));
	ret = madvise(p + BAD_PAGE * PAGE, PAGE, MADV_HWPOISON);
	TH_LOG("madvise(MADV_HWPOISON): %s", ret ? strerror(errno) : "0");
	ASSERT_TRUE(pfn_hwpoisoned(bad));
	munmap(p, self->victim.length);
	ASSERT_EQ(0, pool_free(self->fd, self->victim.slice_id));

	expect_retired_and_reused(_metadata, self, self->victim_pfn, bad);
}

/* A free chunk poisoned by frame number: the next take retires it. */
TEST_F_TIMEOUT(hwp, free_chunk_poisoned, 300)
{
	unsigned long bad = self->bad;

	POOL_SETUP_SKIPPED();
	ASSERT_EQ(0, pool_free(self->fd, self->victim.slice_id));
	ASSERT_EQ(0, poison_pfn(bad)) TH_LOG("hwpoison/corrupt-pfn %#lx", bad);

	expect_retired_and_reused(_metadata, self, self->victim_pfn, bad);
}

/*
 * Poisoned while unmapped, by frame number (memory_failure() gives up on
 * a chunk of plain pages before it tries a split, so their folio carries
 * no mark): mapped again, the chunk maps page by page, the owner reads
 * its other pages and gets SIGBUS, BUS_MCEERR_AR, on that one. FREE
 * retires it.
 */
TEST_F_TIMEOUT(hwp, fault_on_poisoned_page, 300)
{
	unsigned long bad = self->bad;
	size_t nz;
	char *p;

	POOL_SETUP_SKIPPED();
	ASSERT_EQ(0, poison_pfn(bad)) TH_LOG("hwpoison/corrupt-pfn %#lx", bad);

	p = pool_map(self->fd, &self->victim);
	ASSERT_NE(MAP_FAILED, p);
	/*
	 * The chunk's first page first: the fault that could map a PMD.
	 * The owner's bytes are still there (nonzero at offset 0).
	 */
	ASSERT_EQ(0, read_guarded(p, PAGE, &nz));
	EXPECT_EQ(0, nz);
	EXPECT_EQ(0, read_guarded(p + (BAD_PAGE + 1) * PAGE, PAGE, &nz));
	EXPECT_EQ(0, nz);
	EXPECT_EQ(-1, read_guarded(p + BAD_PAGE * PAGE, PAGE, &nz));
	EXPECT_EQ(BUS_MCEERR_AR, bus_code);
	EXPECT_EQ(p + BAD_PAGE * PAGE, (char *)bus_addr);
	/* No PMD maps the chunk (-1: the kernel has no such field). */
	EXPECT_GE(0, pool_smaps_kb(p, "FilePmdMapped:"));
	EXPECT_GE(0, pool_smaps_kb(p, "ShmemPmdMapped:"));
	munmap(p, self->victim.length);
	ASSERT_EQ(0, pool_free(self->fd, self->victim.slice_id));

	expect_retired_and_reused(_metadata, self, self->victim_pfn, bad);
}

/*
 * The same through the slice's dma-buf, whose mapping inserts frame
 * numbers (dmabuf.c): its other pages read the owner's bytes, the
 * poisoned one raises SIGBUS, BUS_MCEERR_AR, at its address, and no
 * entry for it appears; FREE retires the chunk.
 */
TEST_F_TIMEOUT(hwp, dmabuf_fault_on_poisoned_page, 300)
{
	struct mrpool_export_dmabuf e;
	unsigned long bad = self->bad;
	size_t nz;
	char *p;

	POOL_SETUP_SKIPPED();
	ASSERT_EQ(0, poison_pfn(bad)) TH_LOG("hwpoison/corrupt-pfn %#lx", bad);

	memset(&e, 0, sizeof(e));
	e.size = sizeof(e);
	e.slice_id = self->victim.slice_id;
	e.flags = MRPOOL_EXPORT_CLOEXEC;
	ASSERT_EQ(0, pool_ioctl(self->fd, MRPOOL_IOC_EXPORT_DMABUF, &e));
	p = mmap(NULL, self->victim.length, PROT_READ, MAP_SHARED, e.fd, 0);
	ASSERT_NE(MAP_FAILED, p);
	ASSERT_EQ(0, read_guarded(p, PAGE, &nz));
	EXPECT_EQ(0, nz);
	EXPECT_EQ(0, read_guarded(p + (BAD_PAGE + 1) * PAGE, PAGE, &nz));
	EXPECT_EQ(0, nz);
	EXPECT_EQ(-1, read_guarded(p + BAD_PAGE * PAGE, PAGE, &nz));
	EXPECT_EQ(BUS_MCEERR_AR, bus_code);
	EXPECT_EQ(p + BAD_PAGE * PAGE, (char *)bus_addr);
	EXPECT_EQ(0UL, pfn_of(p + BAD_PAGE * PAGE));
	munmap(p, self->victim.length);
	close(e.fd);
	ASSERT_EQ(0, pool_free(self->fd, self->victim.slice_id));

	expect_retired_and_reused(_metadata, self, self->victim_pfn, bad);
}

/*
 * A chunk freed while a pipe pins a page waits in quarantine, charged;
 * poisoned there, it is retired at its next check, pin or not, and its
 * charge released.
 */
TEST_F_TIMEOUT(hwp, quarantined_chunk_poisoned, 300)
{
	unsigned long bad = self->bad;
	struct mrpool_query q;
	struct iovec iov;
	int pipefd[2];
	char *p;

	POOL_SETUP_SKIPPED();
	ASSERT_EQ(0, pipe(pipefd));
	p = map_victim(self);
	ASSERT_NE(MAP_FAILED, p);
	iov.iov_base = p;
	iov.iov_len = PAGE;
	ASSERT_EQ((ssize_t)PAGE, vmsplice(pipefd[1], &iov, 1, 0));
	munmap(p, self->victim.length);
	ASSERT_EQ(0, pool_free(self->fd, self->victim.slice_id));
	ASSERT_EQ(0, pool_query(self->fd, &q));
	ASSERT_EQ(self->chunk, q.quarantined_bytes);
	ASSERT_EQ(self->chunk, q.user_quarantined_bytes);

	ASSERT_EQ(0, poison_pfn(bad)) TH_LOG("hwpoison/corrupt-pfn %#lx", bad);
	/* Still pinned: retired anyway, uncharged. */
	EXPECT_TRUE(POOL_WAIT(pool_attr("quarantined_bytes") == 0, 20000));
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(0, q.user_quarantined_bytes);
	EXPECT_EQ(0, q.user_bytes);

	expect_retired_and_reused(_metadata, self, self->victim_pfn, bad);
	close(pipefd[0]);
	close(pipefd[1]);
}

TEST_HARNESS_MAIN
