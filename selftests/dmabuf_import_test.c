// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Import of a slice's dma-buf by a device driver, as a NIC that registers
 * dma-bufs would do it: the test module dmabuf_import/mrpool_dmabuf_itest.ko
 * attaches a platform device (direct DMA), maps the attachment and reports
 * the scatter-gather table. NIC import itself (ibv_reg_dmabuf_mr) is not
 * testable here: rxe in 6.1 has no dma-buf MRs.
 *
 * The table is built chunk by chunk: its segments are the slice's
 * physically contiguous runs (read from /proc/self/pagemap), in the
 * slice's order, and mapping it allocates no array of the whole slice's
 * page pointers (the kmem:kmalloc trace event, in a tracing instance of
 * its own, sees the importing process's allocations). A mapped attachment
 * outlives the owner's FREE (a revocation): its pages stay the slice's,
 * intact, until the importer lets go, while new maps fail, and they are
 * the importer's charge meanwhile, not the owner's (issue 33).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop
#pragma GCC diagnostic ignored "-Wclobbered"

#include "pool_util.h"

#define ITEST		"mrpool_dmabuf_itest"
#define ITEST_IMPORT	"/sys/kernel/debug/" ITEST "/import"
#define ITEST_KVCALLOC	"/sys/kernel/debug/" ITEST "/kvcalloc"
#define ITEST_HOLD	"/sys/kernel/debug/" ITEST "/hold"
#define PAGE		4096UL

FIXTURE(imp) {
	int fd;
	int loaded;
};

struct block_census {
	uint64_t id;
	int blocks;
};

/* Adds the blocks a chunk of slice @id is built of ("order:count,..."). */
static bool count_blocks(const struct pool_chunk_row *r, void *arg)
{
	struct block_census *c = arg;
	const char *s = r->blocks;
	int order, count, len;

	if (r->owner != c->id || strcmp(r->state, "used"))
		return false;
	while (sscanf(s, "%d:%d%n", &order, &count, &len) == 2) {
		c->blocks += count;
		s += len;
		if (*s == ',')
			s++;
	}
	return true;
}

/*
 * Write the number @v to the importer's file @path; its report (read
 * back) in @out; 0 or -errno.
 */
static int itest_write(const char *path, int v, char *out, size_t len)
{
	char num[16];
	ssize_t n;
	int f, ret;

	f = open(path, O_RDWR | O_CLOEXEC);
	if (f < 0)
		return -errno;
	snprintf(num, sizeof(num), "%d", v);
	ret = write(f, num, strlen(num)) < 0 ? -errno : 0;
	n = pread(f, out, len - 1, 0);
	out[n > 0 ? n : 0] = '\0';
	close(f);
	return ret;
}

/* Hand descriptor @fd to the importer; its report in @out, or -errno. */
static int import(int fd, char *out, size_t len)
{
	return itest_write(ITEST_IMPORT, fd, out, len);
}

/* Write @v to the importer's hold file; its report in @out; 0 or -errno. */
static int hold(int v, char *out, size_t len)
{
	return itest_write(ITEST_HOLD, v, out, len);
}

/* The importer's report on what it holds, read now. */
static void held(char *out, size_t len)
{
	ssize_t n;
	int f;

	out[0] = '\0';
	f = open(ITEST_HOLD, O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return;
	n = pread(f, out, len - 1, 0);
	out[n > 0 ? n : 0] = '\0';
	close(f);
}

FIXTURE_SETUP(imp)
{
	char path[PATH_MAX], cmd[PATH_MAX + 16];

	self->fd = -1;
	if (access(POOL_DEV, F_OK))
		POOL_SETUP_SKIP(POOL_DEV " missing: mrpool.ko not loaded");
	if (pool_beside_self(path, sizeof(path),
			     "dmabuf_import/" ITEST ".ko"))
		POOL_SETUP_SKIP(ITEST ".ko not built (make -C $GUEST_KDIR M=$PWD/selftests/dmabuf_import)");
	snprintf(cmd, sizeof(cmd), "insmod %s", path);
	ASSERT_EQ(0, system(cmd));
	self->loaded = 1;
	self->fd = pool_open();
	ASSERT_LE(0, self->fd);
	/* user_bytes()'s 0 for a missing row needs the file to read. */
	ASSERT_TRUE(pool_users_readable());
}

FIXTURE_TEARDOWN(imp)
{
	if (self->fd >= 0)
		close(self->fd);
	if (self->loaded)
		system("rmmod " ITEST);
}

/* The importer sees every byte of the slice, in few segments, its pages. */
TEST_F(imp, map_attachment)
{
	unsigned long long size, dma_bytes, sum, want = 0;
	struct mrpool_export_dmabuf e;
	struct block_census bc = { 0 };
	unsigned int nents, direct;
	struct mrpool_query q;
	struct mrpool_alloc a;
	unsigned char *p;
	char rep[160];
	uint64_t i;

	POOL_SETUP_SKIPPED();

	ASSERT_EQ(0, pool_query(self->fd, &q));
	ASSERT_EQ(0, pool_alloc(self->fd, 3 * q.chunk_size, &a));
	bc.id = a.slice_id;
	p = pool_map(self->fd, &a);
	ASSERT_NE(MAP_FAILED, p);
	for (i = 0; i < a.length / 4096; i++) {
		p[i * 4096] = (unsigned char)(i * 7 + 1);
		want += (unsigned char)(i * 7 + 1);
	}
	memset(&e, 0, sizeof(e));
	e.size = sizeof(e);
	e.slice_id = a.slice_id;
	ASSERT_EQ(0, pool_ioctl(self->fd, MRPOOL_IOC_EXPORT_DMABUF, &e));

	ASSERT_EQ(0, import(e.fd, rep, sizeof(rep))) TH_LOG("%s", rep);
	TH_LOG("%s", rep);
	ASSERT_EQ(5, sscanf(rep, "size %llu nents %u dma_bytes %llu direct %u sum %llu",
			    &size, &nents, &dma_bytes, &direct, &sum));
	EXPECT_EQ(a.length, size);
	EXPECT_EQ(a.length, dma_bytes);
	EXPECT_EQ(1, direct);
	EXPECT_EQ(want, sum);
	/*
	 * At most one segment per block: one per chunk, unless an earlier
	 * test left fragmented chunks free (handed out when no whole is).
	 */
	ASSERT_EQ(3, pool_chunks_scan(count_blocks, &bc));
	EXPECT_LE(1, nents);
	EXPECT_GE(bc.blocks, (int)nents);

	EXPECT_EQ(0, munmap(p, a.length));
	EXPECT_EQ(0, close(e.fd));
	EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
}

/* Writes @s to @path; 0 or -errno. */
static int put_str(const char *path, const char *s)
{
	int f, ret = 0;

	f = open(path, O_WRONLY | O_CLOEXEC);
	if (f < 0)
		return -errno;
	if (write(f, s, strlen(s)) < 0)
		ret = -errno;
	close(f);
	return ret;
}

struct imp_report {
	unsigned long long size, dma_bytes, sum, wsum;
	unsigned int nents, direct;
};

/* Exports slice @a of @fd and has the importer map it; 0 or -errno. */
static int export_import(int fd, const struct mrpool_alloc *a,
			 struct imp_report *r)
{
	struct mrpool_export_dmabuf e;
	char rep[256];
	int ret;

	memset(&e, 0, sizeof(e));
	e.size = sizeof(e);
	e.slice_id = a->slice_id;
	ret = pool_ioctl(fd, MRPOOL_IOC_EXPORT_DMABUF, &e);
	if (ret)
		return ret;
	ret = import(e.fd, rep, sizeof(rep));
	close(e.fd);
	if (ret)
		return ret;
	if (sscanf(rep, "size %llu nents %u dma_bytes %llu direct %u sum %llu wsum %llu",
		   &r->size, &r->nents, &r->dma_bytes, &r->direct, &r->sum,
		   &r->wsum) != 6)
		return -EPROTO;
	return 0;
}

/*
 * The physically contiguous runs of @len bytes mapped at @p (faulted in),
 * from /proc/self/pagemap (frame numbers need CAP_SYS_ADMIN); -errno.
 */
static int phys_runs(const void *p, size_t len)
{
	size_t i, n = len / PAGE;
	uint64_t *pm, pfn, prev = 0;
	int f, runs = 0;
	ssize_t got;

	pm = calloc(n, sizeof(*pm));
	if (!pm)
		return -ENOMEM;
	f = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (f < 0) {
		free(pm);
		return -errno;
	}
	got = pread(f, pm, n * sizeof(*pm),
		    (off_t)((uintptr_t)p / PAGE * sizeof(*pm)));
	close(f);
	for (i = 0; got == (ssize_t)(n * sizeof(*pm)) && i < n; i++) {
		pfn = pm[i] & ((1ULL << 55) - 1);
		if (!(pm[i] >> 63) || !pfn) {
			runs = -EPERM;	/* not present, or no frame shown */
			break;
		}
		if (!i || pfn != prev + 1)
			runs++;
		prev = pfn;
	}
	if (got != (ssize_t)(n * sizeof(*pm)))
		runs = got < 0 ? -errno : -EIO;
	free(pm);
	return runs;
}

/*
 * Across chunk boundaries: every page, in the slice's order, first and
 * last byte, and one segment per physically contiguous run of the slice
 * (runs that cross a chunk boundary merge, as one table built from one
 * page array did).
 */
TEST_F(imp, map_spans_chunks_in_order)
{
	unsigned long long want = 0, wwant = 0;
	const unsigned int nchunks = 5;
	struct imp_report r;
	struct mrpool_query q;
	struct mrpool_alloc a;
	unsigned char *p, hd, tl;
	uint64_t i;
	int runs;

	POOL_SETUP_SKIPPED();

	ASSERT_EQ(0, pool_query(self->fd, &q));
	ASSERT_EQ(0, pool_alloc(self->fd, nchunks * q.chunk_size, &a));
	p = pool_map(self->fd, &a);
	ASSERT_NE(MAP_FAILED, p);
	for (i = 0; i < a.length / PAGE; i++) {
		hd = (unsigned char)(i * 13 + 5);
		tl = (unsigned char)(i * 31 + 7);
		p[i * PAGE] = hd;
		p[i * PAGE + PAGE - 1] = tl;
		want += hd;
		wwant += (i + 1) * (hd + tl);
	}
	runs = phys_runs(p, a.length);
	ASSERT_LT(0, runs) TH_LOG("pagemap: %s", strerror(-runs));

	ASSERT_EQ(0, export_import(self->fd, &a, &r));
	TH_LOG("%u segments, %d physical runs, %u chunks", r.nents, runs,
	       nchunks);
	EXPECT_EQ(a.length, r.size);
	EXPECT_EQ(a.length, r.dma_bytes);
	EXPECT_EQ(1, r.direct);
	EXPECT_EQ(want, r.sum);
	EXPECT_EQ(wwant, r.wsum);
	EXPECT_EQ(runs, (int)r.nents);

	EXPECT_EQ(0, munmap(p, a.length));
	EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
}

/* A tracing instance of the kmem:kmalloc event, the test's own. */
struct ktrace {
	char dir[PATH_MAX];
};

/*
 * Makes @t record the kmallocs of this process of @min bytes or more,
 * from an empty buffer; 0 or -errno.
 */
static int ktrace_start(struct ktrace *t, unsigned long min)
{
	static const char *const roots[] = {
		"/sys/kernel/tracing", "/sys/kernel/debug/tracing",
	};
	char path[PATH_MAX + 64], filter[128];
	unsigned int i;
	int ret;

	t->dir[0] = '\0';
	for (i = 0; i < 2 && !t->dir[0]; i++) {
		snprintf(path, sizeof(path), "%s/instances", roots[i]);
		if (i == 0 && access(path, F_OK))
			mount("nodev", roots[0], "tracefs", 0, NULL);
		if (!access(path, F_OK))
			snprintf(t->dir, sizeof(t->dir),
				 "%s/instances/mrpool_dmabuf_itest", roots[i]);
	}
	if (!t->dir[0])
		return -ENOENT;
	rmdir(t->dir);	/* a run that died left it */
	if (mkdir(t->dir, 0700))
		return -errno;
	snprintf(filter, sizeof(filter), "common_pid == %d && bytes_req >= %lu",
		 (int)getpid(), min);
	snprintf(path, sizeof(path), "%s/events/kmem/kmalloc/filter", t->dir);
	ret = put_str(path, filter);
	snprintf(path, sizeof(path), "%s/events/kmem/kmalloc/enable", t->dir);
	if (!ret)
		ret = put_str(path, "1");
	return ret;
}

/* Events recorded since the last call (which emptied the buffer). */
static int ktrace_take(struct ktrace *t, struct __test_metadata *_metadata)
{
	char path[PATH_MAX + 16], line[512];
	int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/trace", t->dir);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (line[0] != '#' && strstr(line, "kmalloc:")) {
			TH_LOG("%s", line);
			n++;
		}
	fclose(f);
	/* Opened for writing with O_TRUNC: the buffer is emptied. */
	f = fopen(path, "w");
	if (f)
		fclose(f);
	return n;
}

static void ktrace_stop(struct ktrace *t)
{
	char path[PATH_MAX + 32];

	if (!t->dir[0])
		return;
	snprintf(path, sizeof(path), "%s/events/kmem/kmalloc/enable", t->dir);
	put_str(path, "0");
	rmdir(t->dir);
}

/*
 * Mapping a slice allocates nothing as large as an array of its page
 * pointers: the same kvcalloc() made by the importer module shows in the
 * trace (so the trace would show the exporter's), the map does not.
 */
TEST_F(imp, map_allocates_no_page_array)
{
	const unsigned int nchunks = 8;
	unsigned long npages;
	struct imp_report r;
	struct mrpool_query q;
	struct mrpool_alloc a;
	struct ktrace t = { "" };
	char num[32];
	int ret;

	POOL_SETUP_SKIPPED();

	ASSERT_EQ(0, pool_query(self->fd, &q));
	ASSERT_EQ(0, pool_alloc(self->fd, nchunks * q.chunk_size, &a));
	npages = a.length / PAGE;
	ret = ktrace_start(&t, npages * sizeof(void *));
	if (ret == -ENOENT) {
		EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
		POOL_SKIP("no tracefs (kmem:kmalloc) in this kernel");
	}
	ASSERT_EQ(0, ret) TH_LOG("tracing instance: %s", strerror(-ret));

	/* The reference: a page array of the slice, in this process. */
	snprintf(num, sizeof(num), "%lu", npages);
	EXPECT_EQ(0, put_str(ITEST_KVCALLOC, num));
	EXPECT_LE(1, ktrace_take(&t, _metadata))
		TH_LOG("the trace misses a kvcalloc of %lu pointers", npages);

	EXPECT_EQ(0, export_import(self->fd, &a, &r));
	EXPECT_EQ(0, ktrace_take(&t, _metadata));
	EXPECT_EQ(a.length, r.dma_bytes);
	ktrace_stop(&t);

	EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
}

/* A descriptor that is not a dma-buf is refused by dma_buf_get(). */
/*
 * Revocation and a kernel importer (mrpool(4), Revocation): a FREE
 * unmaps the owner's mapping (SIGBUS) and refuses new attachment maps
 * (ENODEV), but a mapped attachment keeps its pages -- still used, not
 * zeroed, not handed on -- until the importer lets go of the dma-buf.
 */
TEST_F(imp, importer_keeps_memory_past_free)
{
	long long frees = pool_attr("stats/frees");
	struct mrpool_export_dmabuf e;
	unsigned long long sum, want = 0;
	struct mrpool_query q0, q1, q;
	struct mrpool_alloc a;
	unsigned char *p;
	char rep[160];
	uint64_t i;

	POOL_SETUP_SKIPPED();

	ASSERT_EQ(0, pool_query(self->fd, &q0));
	ASSERT_EQ(0, pool_alloc(self->fd, 2 * q0.chunk_size, &a));
	p = pool_map(self->fd, &a);
	ASSERT_NE(MAP_FAILED, p);
	for (i = 0; i < a.length / 4096; i++) {
		p[i * 4096] = (unsigned char)(i * 5 + 3);
		want += (unsigned char)(i * 5 + 3);
	}
	memset(&e, 0, sizeof(e));
	e.size = sizeof(e);
	e.slice_id = a.slice_id;
	ASSERT_EQ(0, pool_ioctl(self->fd, MRPOOL_IOC_EXPORT_DMABUF, &e));
	ASSERT_EQ(0, hold(e.fd, rep, sizeof(rep))) TH_LOG("%s", rep);
	ASSERT_EQ(1, sscanf(rep, "sum %llu", &sum)) TH_LOG("%s", rep);
	EXPECT_EQ(want, sum);
	ASSERT_EQ(0, pool_query(self->fd, &q1));

	ASSERT_EQ(0, pool_free(self->fd, a.slice_id));
	EXPECT_EQ(SIGBUS, pool_touch(p, false));
	/* Kept for the importer: used, its bytes intact. */
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(q1.used_bytes, q.used_bytes);
	EXPECT_EQ(q1.free_bytes, q.free_bytes);
	EXPECT_EQ(frees, pool_attr("stats/frees"));
	held(rep, sizeof(rep));
	ASSERT_EQ(1, sscanf(rep, "sum %llu", &sum)) TH_LOG("%s", rep);
	EXPECT_EQ(want, sum);
	/* No new map of a revoked slice. */
	EXPECT_EQ(-ENODEV, import(e.fd, rep, sizeof(rep))) TH_LOG("%s", rep);

	/*
	 * The importer unmaps: the memory is back, although the dma-buf
	 * and the revoked mapping still hold the slice.
	 */
	ASSERT_EQ(0, hold(-1, rep, sizeof(rep)));
	EXPECT_EQ(0, strncmp(rep, "none", 4)) TH_LOG("%s", rep);
	EXPECT_EQ(frees + 1, pool_attr("stats/frees"));
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(q0.used_bytes, q.used_bytes);
	EXPECT_EQ(q0.quarantined_bytes, q.quarantined_bytes);
	EXPECT_EQ(0, close(e.fd));
	EXPECT_EQ(0, munmap(p, a.length));
	EXPECT_EQ(frees + 1, pool_attr("stats/frees"));
}

#define OWNER		65533	/* a user other than the importer's */
#define NOBODY		65534

/*
 * As OWNER: ALLOC two chunks, fill and export them, report the dma-buf's
 * descriptor number on @out; with @pin, vmsplice() the first chunk's first
 * page into a pipe kept open to the end (a pin through its own mapping);
 * on a byte from @go, FREE and report the result; exit when @go ends.
 */
static void kept_owner(uint64_t chunk, int go, int out, bool pin)
{
	struct rlimit rl = { 4 * chunk, 4 * chunk };
	struct mrpool_export_dmabuf e;
	struct mrpool_alloc a;
	int fd, ret = -1;
	uint8_t *p;
	char c;

	if (setrlimit(RLIMIT_MEMLOCK, &rl) || setgroups(0, NULL) ||
	    setgid(OWNER) || setuid(OWNER))
		_exit(1);
	fd = pool_open();
	if (fd < 0 || pool_alloc(fd, 2 * chunk, &a))
		_exit(2);
	p = pool_map(fd, &a);
	if (p == MAP_FAILED)
		_exit(3);
	memset(p, 0x6b, a.length);
	if (pin) {
		struct iovec iov = { p, 4096 };
		int pp[2];

		if (pipe(pp) || vmsplice(pp[1], &iov, 1, 0) != 4096)
			_exit(6);
	}
	memset(&e, 0, sizeof(e));
	e.size = sizeof(e);
	e.slice_id = a.slice_id;
	if (pool_ioctl(fd, MRPOOL_IOC_EXPORT_DMABUF, &e) ||
	    write(out, &e.fd, sizeof(e.fd)) != sizeof(e.fd))
		_exit(4);
	if (read(go, &c, 1) == 1)
		ret = pool_free(fd, a.slice_id);
	if (write(out, &ret, sizeof(ret)) != sizeof(ret))
		_exit(5);
	while (read(go, &c, 1) > 0)
		;
	_exit(0);
}

static long long user_bytes(unsigned int uid)
{
	long long v = pool_user_row(uid, POOL_USER_BYTES);

	return v > 0 ? v : 0;
}

/*
 * Fork OWNER's kept_owner() (@pin: its pin); the dma-buf, got into this
 * process, in *@buf; its pid, or -1.
 */
static pid_t start_owner(uint64_t chunk, bool pin, int go[2], int res[2],
			 int *buf)
{
	int pidfd, bfd = -1;
	pid_t pid;

	if (pipe2(go, O_CLOEXEC) || pipe2(res, O_CLOEXEC))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (!pid) {
		close(go[1]);
		close(res[0]);
		kept_owner(chunk, go[0], res[1], pin);
	}
	close(go[0]);
	close(res[1]);
	if (read(res[0], &bfd, sizeof(bfd)) != sizeof(bfd))
		return -1;
	pidfd = syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0)
		return -1;
	*buf = syscall(SYS_pidfd_getfd, pidfd, bfd, 0);
	close(pidfd);
	return *buf < 0 ? -1 : pid;
}

/* Tell OWNER to FREE; its result. */
static int owner_free(int go[2], int res[2])
{
	int ret = -1;

	if (write(go[1], "f", 1) != 1 ||
	    read(res[0], &ret, sizeof(ret)) != sizeof(ret))
		return -1;
	return ret;
}

/*
 * hold(@v) from a child whose real user is @uid (the one a map is charged
 * to), still root to write the importer's file; 0 or -errno, or -1000.
 */
static int hold_as(unsigned int uid, int v)
{
	char rep[160];
	pid_t pid;
	int st;

	pid = fork();
	if (pid < 0)
		return -1000;
	if (!pid)
		_exit(setreuid(uid, 0) ? 100 : -hold(v, rep, sizeof(rep)));
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st) == 100)
		return -1000;
	return -WEXITSTATUS(st);
}

/*
 * Chunks a revocation keeps for an importer's mapped attachment are the
 * importer's charge (issue 33): OWNER exports two chunks, root's importer
 * maps an attachment of them (root: the one other user that did), OWNER
 * FREEs: OWNER's charge is 0 while it lives on, root's has grown by the
 * two chunks, and is back once the importer unmaps.
 */
TEST_F(imp, kept_chunks_charged_to_importer)
{
	int go[2], res[2], pidfd, buf, bfd = -1, ret = -1, st;
	struct mrpool_query q;
	long long root0;
	uint64_t chunk;
	char rep[160];
	pid_t pid;

	POOL_SETUP_SKIPPED();
	ASSERT_EQ(0, getuid());
	ASSERT_EQ(0, pool_query(self->fd, &q));
	chunk = q.chunk_size;
	ASSERT_TRUE(POOL_WAIT(user_bytes(OWNER) == 0, 20000));
	root0 = user_bytes(0);
	ASSERT_EQ(0, pipe2(go, O_CLOEXEC));
	ASSERT_EQ(0, pipe2(res, O_CLOEXEC));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		close(go[1]);
		close(res[0]);
		kept_owner(chunk, go[0], res[1], false);
	}
	close(go[0]);
	close(res[1]);
	ASSERT_EQ((ssize_t)sizeof(bfd), read(res[0], &bfd, sizeof(bfd)));
	pidfd = syscall(SYS_pidfd_open, pid, 0);
	ASSERT_LE(0, pidfd);
	buf = syscall(SYS_pidfd_getfd, pidfd, bfd, 0);
	ASSERT_LE(0, buf);
	close(pidfd);
	EXPECT_EQ((long long)(2 * chunk), user_bytes(OWNER));

	ASSERT_EQ(0, hold(buf, rep, sizeof(rep))) TH_LOG("%s", rep);
	ASSERT_EQ(1, write(go[1], "f", 1));
	ASSERT_EQ((ssize_t)sizeof(ret), read(res[0], &ret, sizeof(ret)));
	EXPECT_EQ(0, ret);
	/* Kept for the importer, and its charge. */
	EXPECT_EQ(0, user_bytes(OWNER));
	EXPECT_EQ(root0 + (long long)(2 * chunk), user_bytes(0));
	held(rep, sizeof(rep));
	EXPECT_EQ(0, strncmp(rep, "sum", 3)) TH_LOG("%s", rep);

	close(go[1]);
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st)) TH_LOG("%#x", st);
	EXPECT_EQ(0, user_bytes(OWNER));
	/* The importer lets go: so does its charge. */
	ASSERT_EQ(0, hold(-1, rep, sizeof(rep)));
	EXPECT_EQ(root0, user_bytes(0));
	EXPECT_EQ(0, close(buf));
	close(res[0]);
}

/*
 * Who is charged at a revocation is who maps an attachment then, not who
 * once did (issue 33): NOBODY maps an attachment of OWNER's two chunks and
 * unmaps it, OWNER maps one, OWNER FREEs: the chunks kept for OWNER's own
 * attachment stay OWNER's, NOBODY (holding nothing) is charged nothing,
 * and the charge goes at the unmap.
 */
TEST_F(imp, stale_importer_not_charged)
{
	long long nobody0, orphans0;
	int go[2], res[2], buf = -1, st;
	struct mrpool_query q;
	uint64_t chunk;
	char rep[160];
	pid_t pid;

	POOL_SETUP_SKIPPED();
	ASSERT_EQ(0, getuid());
	ASSERT_EQ(0, pool_query(self->fd, &q));
	chunk = q.chunk_size;
	ASSERT_TRUE(POOL_WAIT(user_bytes(OWNER) == 0, 20000));
	nobody0 = user_bytes(NOBODY);
	orphans0 = pool_orphan_bytes();
	pid = start_owner(chunk, false, go, res, &buf);
	ASSERT_LT(0, pid);
	EXPECT_EQ((long long)(2 * chunk), user_bytes(OWNER));

	ASSERT_EQ(0, hold_as(NOBODY, buf));
	ASSERT_EQ(0, hold_as(NOBODY, -1));
	ASSERT_EQ(0, hold_as(OWNER, buf));
	held(rep, sizeof(rep));
	ASSERT_EQ(0, strncmp(rep, "sum", 3)) TH_LOG("%s", rep);
	EXPECT_EQ(0, owner_free(go, res));
	/* Only OWNER's attachment is mapped: the chunks stay its charge. */
	EXPECT_EQ(nobody0, user_bytes(NOBODY));
	EXPECT_EQ((long long)(2 * chunk), user_bytes(OWNER));
	EXPECT_EQ(orphans0, pool_orphan_bytes());

	ASSERT_EQ(0, hold(-1, rep, sizeof(rep)));
	EXPECT_EQ(0, user_bytes(OWNER));
	EXPECT_EQ(nobody0, user_bytes(NOBODY));
	close(go[1]);
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st)) TH_LOG("%#x", st);
	EXPECT_EQ(0, close(buf));
	close(res[0]);
}

/*
 * A chunk the owner still pins at the revocation stays its own, though an
 * importer's attachment is mapped (issue 33): OWNER vmsplice()s a page of
 * its first chunk into a pipe it keeps, root maps an attachment, OWNER
 * FREEs: root is charged the second chunk only, OWNER the pinned one;
 * root's unmap leaves root at its charge before, OWNER with the pinned
 * chunk (quarantined) until its pipe goes with it.
 */
TEST_F(imp, owner_pins_not_left_on_importer)
{
	int go[2], res[2], buf = -1, st;
	long long root0, quar0;
	struct mrpool_query q;
	uint64_t chunk;
	char rep[160];
	pid_t pid;

	POOL_SETUP_SKIPPED();
	ASSERT_EQ(0, getuid());
	ASSERT_EQ(0, pool_query(self->fd, &q));
	chunk = q.chunk_size;
	ASSERT_TRUE(POOL_WAIT(user_bytes(OWNER) == 0, 20000));
	root0 = user_bytes(0);
	quar0 = q.quarantined_bytes;
	pid = start_owner(chunk, true, go, res, &buf);
	ASSERT_LT(0, pid);

	ASSERT_EQ(0, hold(buf, rep, sizeof(rep))) TH_LOG("%s", rep);
	EXPECT_EQ(0, owner_free(go, res));
	EXPECT_EQ(root0 + (long long)chunk, user_bytes(0));
	EXPECT_EQ((long long)chunk, user_bytes(OWNER));

	ASSERT_EQ(0, hold(-1, rep, sizeof(rep)));
	EXPECT_EQ(root0, user_bytes(0));
	EXPECT_EQ((long long)chunk, user_bytes(OWNER));
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(quar0 + chunk, q.quarantined_bytes);

	/* OWNER exits, its pipe with it: the quarantine lets the chunk go. */
	close(go[1]);
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st)) TH_LOG("%#x", st);
	EXPECT_TRUE(POOL_WAIT(user_bytes(OWNER) == 0, 20000));
	EXPECT_EQ(root0, user_bytes(0));
	EXPECT_EQ(0, close(buf));
	close(res[0]);
}

TEST_F(imp, not_a_dmabuf)
{
	char rep[160];

	POOL_SETUP_SKIPPED();

	EXPECT_EQ(-EINVAL, import(self->fd, rep, sizeof(rep)));
}

TEST_HARNESS_MAIN
