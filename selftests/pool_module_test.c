// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Module lifetime: rmmod is refused while a file or a mapping is open and
 * succeeds after, giving all memory back; invalid parameters refuse to
 * load; load, use from several processes, unload, twenty times over
 * (issue 13); a load failing after prefill unwinds with the work prefill
 * armed stopped first. Each test reloads kmod/mrpool.ko with the
 * parameters it found, so the tests after it still have the module.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
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

#include "mrpool.h"
#include "pool_util.h"
#include "kmsg_util.h"
#include "rdmatest.h"

static const char *const param_names[] = {
	"pool_mb", "max_mb", "chunk_kb", "numa_node", "idle_trim_sec",
	"max_user_mb", "max_user_pct", "pmd_map", "shmem_chunks",
	/* Test knobs: not in sysfs, so never part of the reload's. */
	"fail_high_order", "fail_init_after_prefill",
};

FIXTURE(mod) {
	char ko[PATH_MAX];
	char params[512];
};

static int delete_module(const char *name)
{
	return syscall(SYS_delete_module, name, O_NONBLOCK) ? -errno : 0;
}

static int load_module(const char *ko, const char *params)
{
	int fd = open(ko, O_RDONLY | O_CLOEXEC), ret;

	if (fd < 0)
		return -errno;
	ret = syscall(SYS_finit_module, fd, params, 0) ? -errno : 0;
	close(fd);
	return ret;
}

/*
 * Free memory in KiB, counting the per-cpu page lists too: pages freed
 * a moment ago sit there, invisible in MemFree.
 */
static long long mem_free_kb(void)
{
	long long pages = 0, v;
	char line[256];
	FILE *f = fopen("/proc/zoneinfo", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, " pages free %lld", &v) == 1 ||
		    sscanf(line, " count: %lld", &v) == 1)
			pages += v;
	fclose(f);
	return pages * (sysconf(_SC_PAGESIZE) / 1024);
}

FIXTURE_SETUP(mod)
{
	size_t i, n = 0;
	char val[64];

	if (access(POOL_DEV, F_OK))
		POOL_SETUP_SKIP(POOL_DEV " missing: mrpool.ko not loaded");
	if (getuid() != 0)
		POOL_SETUP_SKIP("needs root to unload the module");
	ASSERT_EQ(0, pool_beside_self(self->ko, sizeof(self->ko),
				      "../kmod/mrpool.ko"));
	for (i = 0; i < sizeof(param_names) / sizeof(param_names[0]); i++) {
		pool_param_str(param_names[i], val, sizeof(val));
		if (val[0])
			n += snprintf(self->params + n, sizeof(self->params) - n,
				      "%s=%s ", param_names[i], val);
	}
}

FIXTURE_TEARDOWN(mod)
{
	/* Whatever happened, leave the module loaded as it was. */
	if (self->ko[0] && access("/sys/module/mrpool", F_OK))
		load_module(self->ko, self->params);
}

/* rmmod fails while a file or a mapping is open, then frees everything. */
TEST_F(mod, rmmod_refused_while_open)
{
	long long total, before, after;
	struct mrpool_alloc a;
	void *p;
	int fd;

	fd = pool_open();
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, pool_alloc(fd, 1, &a));
	p = pool_map(fd, &a);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_EQ(-EWOULDBLOCK, delete_module("mrpool"));
	close(fd);
	/* The mapping still holds the file, hence the module. */
	EXPECT_EQ(-EWOULDBLOCK, delete_module("mrpool"));
	ASSERT_EQ(0, munmap(p, a.length));

	total = pool_attr("total_bytes");
	before = mem_free_kb();
	ASSERT_EQ(0, delete_module("mrpool"));
	after = mem_free_kb();
	EXPECT_NE(0, access("/sys/module/mrpool", F_OK));
	/* The pool's pages are back (other activity is a few pages). */
	EXPECT_LE(before + total / 1024 - 1024, after);
	TH_LOG("pool held %lld KiB; free memory %lld -> %lld KiB", total / 1024,
	       before, after);

	ASSERT_EQ(0, load_module(self->ko, self->params));
	EXPECT_EQ(0, access(POOL_DEV, F_OK));
}

/* Invalid parameters refuse to load with -EINVAL. */
TEST_F(mod, invalid_params_refused)
{
	static const char *const bad[] = {
		"chunk_kb=3000", "chunk_kb=8192", "chunk_kb=0",
		"pool_mb=64 max_mb=32", "max_mb=0", "numa_node=999",
		"numa_node=-5", "idle_trim_sec=100000", "max_user_mb=4000000",
		"max_user_pct=0", "max_user_pct=101",
		"pmd_map=maybe", "shmem_chunks=maybe",
	};
	struct mrpool_query q;
	size_t i;
	int fd;

	ASSERT_EQ(0, delete_module("mrpool"));
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int ret = load_module(self->ko, bad[i]);

		if (ret != -EINVAL)
			TH_LOG("params '%s': %d", bad[i], ret);
		EXPECT_EQ(-EINVAL, ret);
		if (!access("/sys/module/mrpool", F_OK))
			ASSERT_EQ(0, delete_module("mrpool"));
	}
	/* A small chunk size is fine, and QUERY reports it. */
	ASSERT_EQ(0, load_module(self->ko, "chunk_kb=64 pool_mb=1"));
	fd = pool_open();
	ASSERT_LE(0, fd);
	EXPECT_EQ(0, pool_query(fd, &q));
	EXPECT_EQ(64 * 1024ULL, q.chunk_size);
	EXPECT_EQ(1 * MIB, q.total_bytes);
	close(fd);
	ASSERT_EQ(0, delete_module("mrpool"));
	ASSERT_EQ(0, load_module(self->ko, self->params));
}

/* Unload the module if it is loaded; true once it is not. */
static bool unloaded(void)
{
	return !delete_module("mrpool") || access("/sys/module/mrpool", F_OK);
}

/* Each reload user's raw slice: big enough to stand out of the noise. */
#define RELOAD_SLICE	(32ULL << 20)

/*
 * One user of a freshly loaded module: a raw slice of RELOAD_SLICE mapped
 * and written, and a libmrpool pool with a PD on rxe0 moving bytes by RDMA
 * WRITE. Odd seeds leave everything to exit. Returns 0, or the step that
 * failed.
 */
static int reload_user(unsigned int seed)
{
	struct mrp_pool_attr attr = {
		.comp_mask = MRP_POOL_ATTR_BACKEND | MRP_POOL_ATTR_ARENA_SIZE |
			     MRP_POOL_ATTR_BACKGROUND,
		.backend = MRP_BACKEND_KERNEL, .arena_size = 2 << 20,
		.background = 0,
	};
	const size_t len = 64 << 10;
	struct mrp_buf src, dst;
	struct mrpool_alloc a;
	struct mrp_pool *pool;
	struct rdt_loop lp;
	struct rdt_dev dev;
	uint8_t *p;
	int fd;

	fd = pool_open();
	if (fd < 0 || pool_alloc(fd, RELOAD_SLICE, &a))
		return 1;
	p = pool_map(fd, &a);
	if (p == MAP_FAILED || p[a.length - 1])
		return 2;
	memset(p, (int)seed, a.length);
	pool = mrp_pool_open(&attr);
	if (!pool || rdt_dev_open(&dev, NULL, NULL) ||
	    rdt_loop_create(&lp, &dev))
		return 3;
	if (mrp_attach_pd(pool, dev.pd, RDT_ACCESS_ALL) ||
	    mrp_alloc(pool, len, dev.pd, &src) ||
	    mrp_alloc(pool, len, dev.pd, &dst))
		return 4;
	rdt_pattern_fill(src.addr, len, seed);
	if (rdt_write(&lp, src.addr, src.lkey, (uintptr_t)dst.addr, dst.rkey,
		      len, NULL) || !rdt_pattern_same(dst.addr, len, seed))
		return 5;
	if (seed & 1)
		return 0;
	if (mrp_free(pool, src.addr) || mrp_free(pool, dst.addr) ||
	    mrp_pool_close(pool))
		return 6;
	rdt_loop_destroy(&lp);
	rdt_dev_close(&dev);
	munmap(p, a.length);
	close(fd);
	return 0;
}

/* MemAvailable in KiB with the page cache and reclaimable slab dropped. */
static long long settled_available(void)
{
	sync();
	pool_write_str("/proc/sys/vm/drop_caches", "3");
	return pool_mem_available() >> 10;
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

/*
 * Load, use from three processes at once, unload: MRPOOL_RELOADS times
 * (default 20; make stress runs more). Each unload succeeds once the
 * users are gone, and the pool's memory comes back every time. Available
 * memory moves for reasons of its own, even with the caches dropped
 * before each reading (per-CPU page lists, vmalloc's lazy purge, deferred
 * frees): one cycle +37 MiB, another -30 MiB, the median of a run's cycles
 * from -40 KiB to 4 MiB. So each user holds RELOAD_SLICE (32 MiB), and
 * what a reload could strand -- a user's chunks, quarantined or live, or
 * the pool's -- makes the median drop per cycle 32 MiB or more: it must
 * stay under half of that. A smaller loss (one chunk) hides in this noise;
 * the pool's own count (the WARN_ON in mrpool_pool_free_all) and
 * kmemleak in make check-debug look for those. The timeout (a hang
 * catcher) covers make stress's 100 cycles on a loaded host.
 */
TEST_F_TIMEOUT(mod, reload_cycles, 900)
{
	const char *env = getenv("MRPOOL_RELOADS");
	unsigned int cycles = env ? (unsigned int)strtoul(env, NULL, 0) : 20;
	long long first = 0, prev = 0, last, *drop;
	unsigned int c, i, n = 0;
	pid_t pids[3];
	int status;

	ASSERT_LE(3, cycles);
	drop = calloc(cycles, sizeof(*drop));
	ASSERT_NE(NULL, drop);
	for (c = 0; c < cycles; c++) {
		if (!access("/sys/module/mrpool", F_OK))
			ASSERT_TRUE(POOL_WAIT(unloaded(), 30000))
				TH_LOG("cycle %u: unload refused, refcnt %lld, %lld "
				       "bytes used", c,
				       pool_read_ll("/sys/module/mrpool/refcnt"),
				       pool_attr("used_bytes"));
		/* From the first cycle on: caches warm, libraries read. */
		if (c >= 1) {
			last = settled_available();
			if (c == 1)
				first = last;
			else
				drop[n++] = prev - last;
			prev = last;
		}
		ASSERT_EQ(0, load_module(self->ko, self->params));
		for (i = 0; i < 3; i++) {
			pids[i] = fork();
			ASSERT_LE(0, pids[i]);
			if (!pids[i])
				_exit(reload_user(c * 3 + i));
		}
		for (i = 0; i < 3; i++) {
			ASSERT_EQ(pids[i], waitpid(pids[i], &status, 0));
			EXPECT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
				TH_LOG("cycle %u user %u: status %#x", c, i, status);
		}
	}
	/* The last users' files close as they exit: unload waits for that. */
	ASSERT_TRUE(POOL_WAIT(unloaded(), 30000))
		TH_LOG("last unload refused, refcnt %lld",
		       pool_read_ll("/sys/module/mrpool/refcnt"));
	last = settled_available();
	drop[n++] = prev - last;
	qsort(drop, n, sizeof(*drop), cmp_ll);
	TH_LOG("%u cycles of 3 users; available memory %lld KiB after cycle 1, "
	       "%lld KiB at the end; drop per cycle: median %lld KiB, "
	       "least %lld, most %lld", cycles, first, last, drop[n / 2],
	       drop[0], drop[n - 1]);
	EXPECT_LT(drop[n / 2], (long long)(RELOAD_SLICE >> 10) / 2);
	free(drop);
	ASSERT_EQ(0, load_module(self->ko, self->params));
}

/*
 * Kernel log records on @fd since the last call that say the kernel went
 * wrong (a WARNING, a BUG, an oops, a kmemleak report), each appended to
 * @bad, and the count of mrpool's lines containing @mark. Returns the
 * number of bad records.
 */
static int kmsg_scan(int fd, const char *mark, int *marks, char *bad,
		     size_t len)
{
	static const char *const wrong[] = {
		"WARNING:", "BUG:", "Oops", "kmemleak", "cut here",
	};
	char rec[8192], *msg;
	size_t i, used = strlen(bad);
	ssize_t r;
	int n = 0;

	for (;;) {
		r = read(fd, rec, sizeof(rec) - 1);
		if (r < 0 && errno == EPIPE)
			continue;
		if (r <= 0)
			break;
		rec[r] = '\0';
		msg = strchr(rec, ';');
		if (!msg)
			continue;
		msg++;
		msg[strcspn(msg, "\n")] = '\0';
		if (!strncmp(msg, "mrpool: ", 8) && strstr(msg, mark))
			(*marks)++;
		for (i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++)
			if (strstr(msg, wrong[i]))
				break;
		if (i == sizeof(wrong) / sizeof(wrong[0]))
			continue;
		n++;
		if (used + strlen(msg) + 2 < len)
			used += sprintf(bad + used, "%s\n", msg);
	}
	return n;
}

#define FAILED_LOADS	3

/*
 * A load that fails after prefill unwinds cleanly with the defrag work
 * prefill armed (fail_high_order=9 makes the first 2 MiB chunk of order-0
 * pages; fail_init_after_prefill fails the load with that work due at
 * once): ECANCELED each time, nothing left loaded, no WARNING, BUG or
 * leak in the kernel log (mrpool_ib_chunk_added() warns when a chunk is
 * added after the ib side stopped, as a defrag run left going by the
 * unwind does); then a normal load passes traffic (RDMA WRITE on rxe0).
 */
TEST_F(mod, failed_load_unwinds_armed_work)
{
	const char *knobs = "pool_mb=8 chunk_kb=2048 fail_high_order=9 "
			    "fail_init_after_prefill=1";
	char bad[4096] = "";
	int kfd, i, armed = 0, st;
	pid_t pid;

	kfd = kmsg_from_now();
	ASSERT_LE(0, kfd);
	ASSERT_TRUE(POOL_WAIT(unloaded(), 30000));
	for (i = 0; i < FAILED_LOADS; i++) {
		EXPECT_EQ(-ECANCELED, load_module(self->ko, knobs));
		EXPECT_NE(0, access("/sys/module/mrpool", F_OK));
	}
	EXPECT_EQ(0, kmsg_scan(kfd, "failing the load, defrag armed", &armed,
			       bad, sizeof(bad)))
		TH_LOG("kernel log:\n%s", bad);
	/* The test could fail: each load had the defrag work armed. */
	EXPECT_EQ(FAILED_LOADS, armed);

	ASSERT_EQ(0, load_module(self->ko, self->params));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		_exit(reload_user(0));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st))
		TH_LOG("traffic after the failed loads: status %#x", st);
	EXPECT_EQ(0, kmsg_scan(kfd, "-", &armed, bad, sizeof(bad)))
		TH_LOG("kernel log:\n%s", bad);
	close(kfd);
}

struct backing_count {
	uint64_t id;
	int shmem, pages;
};

static bool count_backing(const struct pool_chunk_row *r, void *arg)
{
	struct backing_count *b = arg;

	if (r->owner != b->id || strcmp(r->state, "used"))
		return false;
	b->shmem += !strcmp(r->backing, "shmem");
	b->pages += !strcmp(r->backing, "pages");
	return true;
}

/*
 * shmem_chunks=N: whole chunks are plain compound pages again, still
 * mapped with one PMD each (FilePmdMapped, not ShmemPmdMapped), and the
 * data written through the mapping reads back; shmem_chunks=Y (the
 * default) gives tmpfs huge folios (ShmemPmdMapped).
 */
TEST_F(mod, shmem_chunks_switch)
{
	static const char *const modes[] = { "shmem_chunks=N", "shmem_chunks=Y" };
	char params[600], hp[8];
	struct mrpool_alloc a;
	size_t m, i;
	uint8_t *p;
	int fd;

	pool_param_str("pmd_map", hp, sizeof(hp));
	if (hp[0] != 'Y' || pool_read_ll("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size") !=
	    (long long)(2 * MIB))
		POOL_SKIP("pmd_map=%c or no 2 MiB PMD: no whole-chunk mappings", hp[0]);
	for (m = 0; m < 2; m++) {
		struct backing_count b = {};
		bool shmem = m == 1;

		ASSERT_TRUE(POOL_WAIT(unloaded(), 30000));
		snprintf(params, sizeof(params), "%s chunk_kb=2048 pmd_map=Y %s",
			 self->params, modes[m]);
		ASSERT_EQ(0, load_module(self->ko, params));
		fd = pool_open();
		ASSERT_LE(0, fd);
		ASSERT_EQ(0, pool_alloc(fd, 4 * MIB, &a));
		b.id = a.slice_id;
		ASSERT_EQ(2, pool_chunks_scan(count_backing, &b));
		EXPECT_EQ(shmem ? 2 : 0, b.shmem);
		EXPECT_EQ(shmem ? 0 : 2, b.pages);
		p = pool_map(fd, &a);
		ASSERT_NE(MAP_FAILED, p);
		for (i = 0; i < a.length; i += 4096)
			p[i] = (uint8_t)(i >> 12) ^ 0x5a;
		EXPECT_EQ(shmem ? 4096LL : 0LL,
			  pool_smaps_kb(p, "ShmemPmdMapped:"));
		EXPECT_EQ(shmem ? 0LL : 4096LL,
			  pool_smaps_kb(p, "FilePmdMapped:"));
		for (i = 0; i < a.length; i += 4096)
			if (p[i] != ((uint8_t)(i >> 12) ^ 0x5a))
				break;
		EXPECT_EQ(a.length, i);
		EXPECT_EQ(0, munmap(p, a.length));
		close(fd);
		TH_LOG("%s: %d shmem, %d plain chunks", modes[m], b.shmem,
		       b.pages);
		ASSERT_TRUE(POOL_WAIT(unloaded(), 30000));
		ASSERT_EQ(0, load_module(self->ko, self->params));
	}
}

/*
 * A chunk whose MR the device would not deregister, even at the last
 * chance (the device going, or the module unloading), is kept for good:
 * the device may still reach its pages. Armed: the first two MRs torn
 * down at unload fail to deregister and then fail the last chance too.
 * Their two chunks never go back to the page allocator (before: the
 * record of them was dropped before the pool freed its chunks, and their
 * pages were freed with the device's MR still over them).
 */
TEST_F(mod, unload_keeps_chunks_a_device_kept)
{
	long long total, chunk, before, after;
	struct mrpool_query q;
	int fd;

	fd = pool_open();
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, pool_query(fd, &q));
	close(fd);
	chunk = (long long)q.chunk_size;
	total = pool_attr("total_bytes");
	if (total < 4 * chunk)
		POOL_SKIP("pool_mb holds fewer than four chunks");
	ASSERT_EQ(0, pool_set_knob("fail_ib_dereg", 2));
	ASSERT_EQ(0, pool_set_knob("fail_ib_dereg_final", 2));
	before = mem_free_kb();
	ASSERT_TRUE(POOL_WAIT(unloaded(), 30000));
	after = mem_free_kb();
	TH_LOG("pool held %lld KiB, chunk %lld KiB; free memory %lld -> %lld KiB",
	       total / 1024, chunk / 1024, before, after);
	/* All came back but the two chunks (other activity: a few pages). */
	EXPECT_LE(before + (total - 2 * chunk) / 1024 - 1024, after);
	EXPECT_GE(before + (total - 2 * chunk) / 1024 + 1024, after);
	ASSERT_EQ(0, load_module(self->ko, self->params));
}

/* Every parameter carries a description for modinfo. */
TEST_F(mod, params_described)
{
	char cmd[PATH_MAX + 64], line[512];
	size_t i, found = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "modinfo -F parm %s 2>/dev/null", self->ko);
	f = popen(cmd, "r");
	if (!f)
		POOL_SKIP("modinfo not available");
	while (fgets(line, sizeof(line), f))
		for (i = 0; i < sizeof(param_names) / sizeof(param_names[0]); i++)
			if (!strncmp(line, param_names[i], strlen(param_names[i])) &&
			    strlen(line) > strlen(param_names[i]) + 20)
				found++;
	if (pclose(f) != 0 && !found)
		POOL_SKIP("modinfo failed");
	EXPECT_EQ(sizeof(param_names) / sizeof(param_names[0]), found);
}

TEST_HARNESS_MAIN
