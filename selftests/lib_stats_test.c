// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Host-wide visibility (run inside the VM): a pool on the kernel backend
 * publishes its counters in its file's stats page, and debugfs
 * mrpool/clients shows them on this process's row, from the background
 * thread and, without one, from the allocation slow path. The page itself:
 * only the opener maps it, one shared writable page only, a child does not
 * inherit it, it is neither pool memory nor slice bytes, the kernel prints
 * what is written there (and nothing while the sequence count is odd), and
 * the client leaves debugfs once the file and the page are gone.
 */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "kselftest_harness.h"

#include "mrpool.h"
#include "pool_util.h"

#define NBUF		64
#define BUFSZ		(8 << 10)
#define CLIENTS		POOL_DEBUGFS "/clients"
#define MAXCOLS		32
#define NO_DEBUGFS	CLIENTS " not readable (debugfs not mounted?)"

/* One row of debugfs clients, cells by column name. */
struct row {
	char buf[1024];
	char *head[MAXCOLS];
	char *cell[MAXCOLS];
	int ncols;
};

static int split(char *line, char **out)
{
	char *save = NULL, *tok;
	int n = 0;

	for (tok = strtok_r(line, " \n", &save); tok && n < MAXCOLS;
	     tok = strtok_r(NULL, " \n", &save))
		out[n++] = tok;
	return n;
}

/*
 * The row of the @nth (0-based) client of this process in debugfs clients:
 * 1 found, 0 no such row, -errno when the file cannot be read.
 */
static int client_row(int nth, struct row *r)
{
	static char head[1024];
	char line[1024], pid[16];
	int ret = 0, n;
	FILE *f;

	f = fopen(CLIENTS, "re");
	if (!f)
		return -errno;
	snprintf(pid, sizeof(pid), "%d", getpid());
	if (!fgets(head, sizeof(head), f)) {
		fclose(f);
		return -EIO;
	}
	r->ncols = split(head, r->head);
	while (fgets(line, sizeof(line), f)) {
		strcpy(r->buf, line);
		n = split(r->buf, r->cell);
		if (n != r->ncols || strcmp(r->cell[0], pid) || nth--)
			continue;
		ret = 1;
		break;
	}
	fclose(f);
	return ret;
}

/* A cell of @r by column name, NULL if the column does not exist. */
static const char *cell(const struct row *r, const char *name)
{
	for (int i = 0; i < r->ncols; i++)
		if (!strcmp(r->head[i], name))
			return r->cell[i];
	return NULL;
}

/* A numeric cell; -1 for "-" or a missing column. */
static long long num(const struct row *r, const char *name)
{
	const char *c = cell(r, name);

	return c && *c != '-' ? strtoll(c, NULL, 10) : -1;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/*
 * Poll this process's first client row until its published allocs and
 * frees reach @allocs and @frees (the library publishes about once a
 * second; the VM is slow). 1 when seen, 0 on timeout, -errno.
 */
static int wait_published(struct row *r, long long allocs, long long frees,
			  long ms)
{
	int ret;

	for (long waited = 0; waited <= ms; waited += 100) {
		ret = client_row(0, r);
		if (ret < 0)
			return ret;
		if (ret && num(r, "allocs") >= allocs && num(r, "frees") >= frees)
			return 1;
		sleep_ms(100);
	}
	return 0;
}

/*
 * "mrpoolctl clients" (run from the repository top, as run.sh does) into
 * @out; its exit status, or -1.
 */
static int ctl_clients(char *out, size_t len)
{
	const char *tool = "tools/mrpoolctl/mrpoolctl";
	size_t got = 0, n;
	FILE *p;
	int st;

	out[0] = '\0';
	if (access(tool, X_OK))
		return -1;
	p = popen("tools/mrpoolctl/mrpoolctl clients 2>&1", "r");
	if (!p)
		return -1;
	while (got + 1 < len && (n = fread(out + got, 1, len - 1 - got, p)))
		got += n;
	out[got] = '\0';
	st = pclose(p);
	return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static struct mrp_pool *open_kernel_pool(int background)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_BACKEND | MRP_POOL_ATTR_ARENA_SIZE |
			     MRP_POOL_ATTR_BACKGROUND,
		.backend = MRP_BACKEND_KERNEL,
		.arena_size = 2 << 20,
		.background = background,
	};

	return mrp_pool_open(&a);
}

FIXTURE(stats) {
	long page;
};

FIXTURE_SETUP(stats)
{
	self->page = sysconf(_SC_PAGESIZE);
	if (access(POOL_DEV, R_OK | W_OK))
		POOL_SETUP_SKIP(POOL_DEV ": %s (module not loaded)", strerror(errno));
	if (access(CLIENTS, R_OK))
		POOL_SETUP_SKIP(NO_DEBUGFS);
}

FIXTURE_TEARDOWN(stats)
{
}

/* The background thread publishes allocs, frees, hit rate and bytes. */
TEST_F(stats, background_thread_publishes)
{
	struct mrp_buf b[NBUF];
	struct mrp_stats st;
	struct mrp_pool *pool;
	char out[8192];
	struct row r;
	int i;

	pool = open_kernel_pool(1);
	ASSERT_NE(NULL, pool) TH_LOG("mrp_pool_open: %s", strerror(errno));
	ASSERT_EQ(1, client_row(0, &r));
	for (i = 0; i < NBUF; i++)
		ASSERT_EQ(0, mrp_alloc(pool, BUFSZ, NULL, &b[i]));
	for (i = 0; i < NBUF / 2; i++)
		ASSERT_EQ(0, mrp_free(pool, b[i].addr));

	ASSERT_EQ(1, wait_published(&r, NBUF, NBUF / 2, 10000));
	ASSERT_EQ(0, mrp_stats(pool, &st, sizeof(st)));
	EXPECT_EQ(NBUF, num(&r, "allocs"));
	EXPECT_EQ(NBUF / 2, num(&r, "frees"));
	EXPECT_EQ((long long)st.tcache_hits, num(&r, "tc_hits"));
	EXPECT_EQ((long long)st.tcache_misses, num(&r, "tc_misses"));
	EXPECT_EQ(NBUF, num(&r, "tc_hits") + num(&r, "tc_misses"));
	EXPECT_LT(0, num(&r, "tc_misses"));
	EXPECT_NE(NULL, cell(&r, "hit_pct"));
	EXPECT_NE('-', cell(&r, "hit_pct")[0]);
	EXPECT_EQ(0, num(&r, "fallbacks"));
	EXPECT_EQ(0, num(&r, "fallback_bytes"));
	EXPECT_EQ(NBUF / 2 * BUFSZ, num(&r, "in_use"));
	EXPECT_LE(num(&r, "in_use"), num(&r, "mapped"));
	EXPECT_EQ((long long)st.registrations, num(&r, "regs"));
	TH_LOG("row: allocs %lld hits %lld misses %lld hit_pct %s in_use %lld mapped %lld",
	       num(&r, "allocs"), num(&r, "tc_hits"), num(&r, "tc_misses"),
	       cell(&r, "hit_pct"), num(&r, "in_use"), num(&r, "mapped"));

	/* The tool shows the same row and counts this client in its totals. */
	if (ctl_clients(out, sizeof(out)) < 0) {
		TH_LOG("tools/mrpoolctl/mrpoolctl not built: not checked");
	} else {
		char want[64];

		snprintf(want, sizeof(want), "1 publishing: %d allocs", NBUF);
		EXPECT_NE(NULL, strstr(out, want)) {
			TH_LOG("no '%s' in mrpoolctl clients:\n%s", want, out);
		}
		EXPECT_NE(NULL, strstr(out, "thread-cache hits"));
	}

	for (i = NBUF / 2; i < NBUF; i++)
		ASSERT_EQ(0, mrp_free(pool, b[i].addr));
	ASSERT_EQ(1, wait_published(&r, NBUF, NBUF, 10000));
	EXPECT_EQ(0, num(&r, "in_use"));
	ASSERT_EQ(0, mrp_pool_close(pool));
	/* The file is closed: the client, its page and its row are gone. */
	EXPECT_EQ(0, client_row(0, &r));
}

/* Without a background thread the allocation slow path publishes. */
TEST_F(stats, slow_path_publishes)
{
	struct mrp_buf b[NBUF], big;
	struct mrp_pool *pool;
	struct row r;
	int i;

	pool = open_kernel_pool(0);
	ASSERT_NE(NULL, pool) TH_LOG("mrp_pool_open: %s", strerror(errno));
	for (i = 0; i < NBUF; i++)
		ASSERT_EQ(0, mrp_alloc(pool, BUFSZ, NULL, &b[i]));
	/* Nothing runs on its own now: the counters stay unpublished. */
	sleep_ms(1500);
	ASSERT_EQ(1, client_row(0, &r));
	EXPECT_GT(NBUF, num(&r, "allocs"));
	/* A class never used takes the slow path, which publishes. */
	ASSERT_EQ(0, mrp_alloc(pool, 64 << 10, NULL, &big));
	ASSERT_EQ(1, client_row(0, &r));
	EXPECT_EQ(NBUF + 1, num(&r, "allocs"));
	EXPECT_EQ(NBUF * BUFSZ + (64 << 10), num(&r, "in_use"));
	for (i = 0; i < NBUF; i++)
		ASSERT_EQ(0, mrp_free(pool, b[i].addr));
	ASSERT_EQ(0, mrp_free(pool, big.addr));
	ASSERT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(0, client_row(0, &r));
}

/* The kernel shows what is written, only when the sequence is even. */
TEST_F(stats, kernel_prints_what_was_written)
{
	struct mrpool_client_stats *p, *p2;
	struct mrpool_query q;
	struct row r;
	int fd;

	fd = pool_open();
	ASSERT_LE(0, fd);
	ASSERT_EQ(1, client_row(0, &r));
	/* No page yet: every published column is "-". */
	EXPECT_EQ(-1, num(&r, "allocs"));
	EXPECT_STREQ("-", cell(&r, "hit_pct"));

	p = mmap(NULL, self->page, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 MRPOOL_STATS_MMAP_OFFSET);
	ASSERT_NE(MAP_FAILED, p) TH_LOG("mmap: %s", strerror(errno));
	/* A zeroed page: size 0 means never published. */
	for (long i = 0; i < self->page; i++)
		ASSERT_EQ(0, ((unsigned char *)p)[i]);
	ASSERT_EQ(1, client_row(0, &r));
	EXPECT_EQ(-1, num(&r, "allocs"));

	p->seq = 1;
	p->size = sizeof(*p);
	p->allocs = 1000;
	p->frees = 900;
	p->tcache_hits = 3;
	p->tcache_misses = 1;
	p->fallbacks = 7;
	p->fallback_bytes = 8192;
	p->bytes_in_use = 12345;
	p->bytes_mapped = 4 << 20;
	p->registrations = 2;
	p->reg_ns_total = 99;
	/* Odd: a writer is at it, nothing is shown. */
	ASSERT_EQ(1, client_row(0, &r));
	EXPECT_EQ(-1, num(&r, "allocs"));
	__atomic_store_n(&p->seq, 2, __ATOMIC_RELEASE);
	ASSERT_EQ(1, client_row(0, &r));
	EXPECT_EQ(1000, num(&r, "allocs"));
	EXPECT_EQ(900, num(&r, "frees"));
	EXPECT_EQ(3, num(&r, "tc_hits"));
	EXPECT_EQ(1, num(&r, "tc_misses"));
	EXPECT_STREQ("75.0", cell(&r, "hit_pct"));
	EXPECT_EQ(7, num(&r, "fallbacks"));
	EXPECT_EQ(8192, num(&r, "fallback_bytes"));
	EXPECT_EQ(12345, num(&r, "in_use"));
	EXPECT_EQ(4 << 20, num(&r, "mapped"));
	EXPECT_EQ(2, num(&r, "regs"));
	EXPECT_EQ(99, num(&r, "reg_ns"));
	EXPECT_EQ(0, num(&r, "mr_served"));
	EXPECT_EQ(0, num(&r, "mr_passed"));

	/* The preload shim's counters; "-" from a writer older than them. */
	p->preload_served = 5;
	p->preload_passed = 6;
	ASSERT_EQ(1, client_row(0, &r));
	EXPECT_EQ(5, num(&r, "mr_served"));
	EXPECT_EQ(6, num(&r, "mr_passed"));
	p->size = offsetof(struct mrpool_client_stats, preload_served);
	ASSERT_EQ(1, client_row(0, &r));
	EXPECT_EQ(1000, num(&r, "allocs"));
	EXPECT_STREQ("-", cell(&r, "mr_served"));
	EXPECT_STREQ("-", cell(&r, "mr_passed"));
	p->size = sizeof(*p);

	/* Hostile values are printed, not trusted: sums that overflow. */
	p->tcache_hits = UINT64_MAX;
	p->tcache_misses = UINT64_MAX;
	ASSERT_EQ(1, client_row(0, &r));
	EXPECT_STREQ("-", cell(&r, "hit_pct"));
	p->tcache_hits = UINT64_MAX / 2;
	p->tcache_misses = 0;
	ASSERT_EQ(1, client_row(0, &r));
	EXPECT_STREQ("100.0", cell(&r, "hit_pct"));
	/* A writer that claims a struct too small to hold the fields. */
	p->size = 8;
	ASSERT_EQ(1, client_row(0, &r));
	EXPECT_EQ(-1, num(&r, "allocs"));
	p->size = sizeof(*p);

	/* A second mapping is the same page. */
	p2 = mmap(NULL, self->page, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		  MRPOOL_STATS_MMAP_OFFSET);
	ASSERT_NE(MAP_FAILED, p2);
	EXPECT_EQ(1000, p2->allocs);
	ASSERT_EQ(0, munmap(p2, self->page));

	/* Neither pool memory nor this file's slice bytes. */
	ASSERT_EQ(0, pool_query(fd, &q));
	EXPECT_EQ(0, q.file_bytes);
	ASSERT_EQ(1, client_row(0, &r));
	EXPECT_EQ(0, num(&r, "bytes"));
	EXPECT_EQ(0, num(&r, "slices"));

	/* The mapping holds the file: the client stays until the unmap. */
	ASSERT_EQ(0, close(fd));
	ASSERT_EQ(1, client_row(0, &r));
	EXPECT_EQ(1000, num(&r, "allocs"));
	ASSERT_EQ(0, munmap(p, self->page));
	EXPECT_EQ(0, client_row(0, &r));
}

/* Only one shared, writable page: anything else is refused. */
TEST_F(stats, bad_mappings_refused)
{
	const int rw = PROT_READ | PROT_WRITE;
	struct row r;
	void *m;
	int fd;

	fd = pool_open();
	ASSERT_LE(0, fd);
	m = mmap(NULL, 2 * self->page, rw, MAP_SHARED, fd, MRPOOL_STATS_MMAP_OFFSET);
	EXPECT_EQ(MAP_FAILED, m);
	EXPECT_EQ(EINVAL, errno);
	m = mmap(NULL, self->page, rw, MAP_PRIVATE, fd, MRPOOL_STATS_MMAP_OFFSET);
	EXPECT_EQ(MAP_FAILED, m);
	EXPECT_EQ(EINVAL, errno);
	m = mmap(NULL, self->page, PROT_READ, MAP_SHARED, fd, MRPOOL_STATS_MMAP_OFFSET);
	EXPECT_EQ(MAP_FAILED, m);
	EXPECT_EQ(EACCES, errno);
	/* The next page offset is no slice token either. */
	m = mmap(NULL, self->page, rw, MAP_SHARED, fd, self->page);
	EXPECT_EQ(MAP_FAILED, m);
	EXPECT_EQ(ENOENT, errno);
	/* Refusals allocated nothing: still no page to show. */
	ASSERT_EQ(1, client_row(0, &r));
	EXPECT_EQ(-1, num(&r, "allocs"));
	close(fd);
}

/* A child neither inherits the page nor can map it through the fd. */
TEST_F(stats, child_cannot_map_parent_page)
{
	struct mrpool_client_stats *p;
	int fd, status;
	pid_t pid;

	fd = pool_open();
	ASSERT_LE(0, fd);
	p = mmap(NULL, self->page, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 MRPOOL_STATS_MMAP_OFFSET);
	ASSERT_NE(MAP_FAILED, p);
	p->allocs = 42;

	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		unsigned char vec;
		void *m;

		/* VM_DONTCOPY: the address is not mapped in the child. */
		if (mincore(p, self->page, &vec) == 0 || errno != ENOMEM)
			_exit(1);
		m = mmap(NULL, self->page, PROT_READ | PROT_WRITE, MAP_SHARED,
			 fd, MRPOOL_STATS_MMAP_OFFSET);
		if (m != MAP_FAILED)
			_exit(2);
		_exit(errno == EPERM ? 0 : 3);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	/* The parent's page is untouched. */
	EXPECT_EQ(42, p->allocs);
	munmap(p, self->page);
	close(fd);
}

TEST_HARNESS_MAIN
