// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * MRPOOL_IOC_EXPORT_DMABUF: the descriptor, its size, mmap through it
 * showing the slice's bytes both ways, and revocation: a FREE or the
 * file's release unmaps the dma-buf's mappings (SIGBUS) and returns the
 * memory at once, whoever holds the dma-buf; its mode is that of the
 * file it came from (issue 33); no one can pin the slice through such a
 * mapping (GUP fails: vmsplice(), O_DIRECT, ibv_reg_mr()). Import by a
 * NIC (ibv_reg_dmabuf_mr) cannot be tested here: rxe in 6.1 has no
 * dma-buf MRs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <sys/wait.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop
#pragma GCC diagnostic ignored "-Wclobbered"

#include "pool_util.h"

FIXTURE(dmabuf) {
	int fd;
	uint64_t chunk;
};

static int export(int fd, uint64_t id, uint32_t flags,
		  struct mrpool_export_dmabuf *e)
{
	memset(e, 0, sizeof(*e));
	e->size = sizeof(*e);
	e->flags = flags;
	e->slice_id = id;
	return pool_ioctl(fd, MRPOOL_IOC_EXPORT_DMABUF, e);
}

FIXTURE_SETUP(dmabuf)
{
	struct mrpool_query q;

	self->fd = -1;
	if (access(POOL_DEV, F_OK))
		POOL_SETUP_SKIP(POOL_DEV " missing: mrpool.ko not loaded");
	self->fd = pool_open();
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, pool_query(self->fd, &q));
	self->chunk = q.chunk_size;
}

FIXTURE_TEARDOWN(dmabuf)
{
	if (self->fd >= 0)
		close(self->fd);
}

/* The fd is a dma-buf of the slice's size, close-on-exec on request. */
TEST_F(dmabuf, fd_and_size)
{
	struct mrpool_export_dmabuf e;
	struct mrpool_alloc a;

	POOL_SETUP_SKIPPED();

	ASSERT_EQ(0, pool_alloc(self->fd, 2 * self->chunk, &a));
	ASSERT_EQ(0, export(self->fd, a.slice_id, 0, &e));
	ASSERT_LE(0, e.fd);
	EXPECT_EQ(a.length, e.length);
	EXPECT_EQ((off_t)a.length, lseek(e.fd, 0, SEEK_END));
	EXPECT_EQ(0, fcntl(e.fd, F_GETFD) & FD_CLOEXEC);
	EXPECT_EQ(O_RDWR, fcntl(e.fd, F_GETFL) & O_ACCMODE);
	EXPECT_EQ(0, close(e.fd));

	ASSERT_EQ(0, export(self->fd, a.slice_id, MRPOOL_EXPORT_CLOEXEC, &e));
	EXPECT_NE(0, fcntl(e.fd, F_GETFD) & FD_CLOEXEC);
	EXPECT_EQ(0, close(e.fd));
	EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
}

/* A mapping of the dma-buf and one of the slice show the same bytes. */
TEST_F(dmabuf, mmap_shows_slice)
{
	struct mrpool_export_dmabuf e;
	struct mrpool_alloc a;
	unsigned char *s, *b;
	uint64_t i;

	POOL_SETUP_SKIPPED();

	ASSERT_EQ(0, pool_alloc(self->fd, 2 * self->chunk, &a));
	s = pool_map(self->fd, &a);
	ASSERT_NE(MAP_FAILED, s);
	for (i = 0; i < a.length; i += 4096)
		s[i] = (unsigned char)(i / 4096 * 7 + 1);
	ASSERT_EQ(0, export(self->fd, a.slice_id, 0, &e));
	b = mmap(NULL, a.length, PROT_READ | PROT_WRITE, MAP_SHARED, e.fd, 0);
	ASSERT_NE(MAP_FAILED, b);
	for (i = 0; i < a.length; i += 4096)
		ASSERT_EQ(s[i], b[i]) TH_LOG("page %llu",
					     (unsigned long long)i / 4096);
	/* The other way: across the chunk boundary too. */
	memset(b + self->chunk - 64, 0xc3, 128);
	for (i = self->chunk - 64; i < self->chunk + 64; i++)
		ASSERT_EQ(0xc3, s[i]);
	/* The mapping pins nothing by itself and needs no offset token. */
	EXPECT_EQ(0, munmap(b, a.length));
	b = mmap(NULL, 4096, PROT_READ, MAP_SHARED, e.fd, self->chunk);
	ASSERT_NE(MAP_FAILED, b);
	EXPECT_EQ(s[self->chunk], b[0]);
	EXPECT_EQ(0, munmap(b, 4096));
	EXPECT_EQ(0, munmap(s, a.length));
	EXPECT_EQ(0, close(e.fd));
	EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
}

/* Private mappings and mappings past the end are refused. */
TEST_F(dmabuf, mmap_rules)
{
	struct mrpool_export_dmabuf e;
	struct mrpool_alloc a;
	void *b;

	POOL_SETUP_SKIPPED();

	ASSERT_EQ(0, pool_alloc(self->fd, self->chunk, &a));
	ASSERT_EQ(0, export(self->fd, a.slice_id, 0, &e));
	b = mmap(NULL, a.length, PROT_READ | PROT_WRITE, MAP_PRIVATE, e.fd, 0);
	EXPECT_EQ(MAP_FAILED, b);
	EXPECT_EQ(EINVAL, errno);
	b = mmap(NULL, 2 * a.length, PROT_READ, MAP_SHARED, e.fd, 0);
	EXPECT_EQ(MAP_FAILED, b);
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, close(e.fd));
	EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
}

/*
 * A slice of one chunk, exported as a dma-buf and mapped through it: the
 * mapping, or NULL.
 */
static unsigned char *exported_chunk(int fd, uint64_t chunk,
				     struct mrpool_alloc *a,
				     struct mrpool_export_dmabuf *e)
{
	void *b;

	if (pool_alloc(fd, chunk, a) || export(fd, a->slice_id, 0, e))
		return NULL;
	b = mmap(NULL, a->length, PROT_READ | PROT_WRITE, MAP_SHARED, e->fd, 0);
	return b == MAP_FAILED ? NULL : b;
}

/*
 * FREE while exported and mapped revokes the dma-buf's mapping too
 * (revoke.c): SIGBUS, the memory back at once (zeroed), and no new
 * mmap() of the dma-buf; closing it changes nothing more.
 */
TEST_F(dmabuf, free_revokes_dmabuf_mapping)
{
	long long frees = pool_attr("stats/frees");
	struct mrpool_export_dmabuf e;
	struct mrpool_query q0, q;
	struct mrpool_alloc a;
	unsigned char *b;

	POOL_SETUP_SKIPPED();

	ASSERT_EQ(0, pool_query(self->fd, &q0));
	b = exported_chunk(self->fd, self->chunk, &a, &e);
	ASSERT_NE(NULL, b);
	memset(b, 0x77, a.length);

	ASSERT_EQ(0, pool_free(self->fd, a.slice_id));
	EXPECT_EQ(-ENOENT, pool_free(self->fd, a.slice_id));
	EXPECT_EQ(SIGBUS, pool_touch(b, false));
	EXPECT_EQ(SIGBUS, pool_touch(b + a.length - 1, true));
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(q0.used_bytes, q.used_bytes);
	EXPECT_EQ(q0.quarantined_bytes, q.quarantined_bytes);
	EXPECT_EQ(frees + 1, pool_attr("stats/frees"));
	EXPECT_EQ(MAP_FAILED, mmap(NULL, a.length, PROT_READ, MAP_SHARED,
				   e.fd, 0));
	EXPECT_EQ(ENODEV, errno);
	ASSERT_EQ(0, munmap(b, a.length));

	ASSERT_EQ(0, close(e.fd));
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(q0.used_bytes, q.used_bytes);
	EXPECT_EQ(frees + 1, pool_attr("stats/frees"));
}

/*
 * An unmapped dma-buf of a live slice keeps nothing from its owner:
 * closing it is all it takes to drop the slice's last extra reference.
 */
TEST_F(dmabuf, release_after_free)
{
	long long frees = pool_attr("stats/frees");
	struct mrpool_export_dmabuf e;
	struct mrpool_query q0, q;
	struct mrpool_alloc a;
	unsigned char *b;

	POOL_SETUP_SKIPPED();

	ASSERT_EQ(0, pool_query(self->fd, &q0));
	b = exported_chunk(self->fd, self->chunk, &a, &e);
	ASSERT_NE(NULL, b);
	memset(b, 0x55, a.length);
	ASSERT_EQ(0, munmap(b, a.length));
	ASSERT_EQ(0, close(e.fd));
	/* The slice is the owner's still: its bytes are there. */
	b = pool_map(self->fd, &a);
	ASSERT_NE(MAP_FAILED, b);
	EXPECT_EQ(0x55, b[a.length - 1]);
	ASSERT_EQ(0, munmap(b, a.length));
	ASSERT_EQ(0, pool_free(self->fd, a.slice_id));
	EXPECT_TRUE(POOL_WAIT(pool_attr("stats/frees") == frees + 1, 5000));
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(q0.used_bytes, q.used_bytes);
	EXPECT_EQ(0, q.quarantined_bytes);
}

/*
 * A dma-buf outlives the /dev/mrpool file it came from, its memory does
 * not: the file's release revokes the slice, a mapping faults with
 * SIGBUS and no new one can be made.
 */
TEST_F(dmabuf, outlives_file_not_its_memory)
{
	long long used = pool_attr("used_bytes");
	struct mrpool_export_dmabuf e;
	struct mrpool_alloc a;
	unsigned char *b;

	POOL_SETUP_SKIPPED();

	ASSERT_EQ(0, pool_alloc(self->fd, self->chunk, &a));
	ASSERT_EQ(0, export(self->fd, a.slice_id, 0, &e));
	b = mmap(NULL, a.length, PROT_READ | PROT_WRITE, MAP_SHARED, e.fd, 0);
	ASSERT_NE(MAP_FAILED, b);
	b[0] = 1;
	EXPECT_EQ(1, b[0]);
	ASSERT_EQ(0, close(self->fd));
	self->fd = -1;
	EXPECT_TRUE(POOL_WAIT(pool_attr("used_bytes") == used, 5000));
	EXPECT_EQ(SIGBUS, pool_touch(b, false));
	ASSERT_EQ(0, munmap(b, a.length));
	EXPECT_EQ(MAP_FAILED, mmap(NULL, a.length, PROT_READ, MAP_SHARED,
				   e.fd, 0));
	EXPECT_EQ(ENODEV, errno);
	ASSERT_EQ(0, close(e.fd));
	EXPECT_EQ(used, pool_attr("used_bytes"));
}

#define NOBODY		65534
#define RAMDISK		"/dev/ram0"

/* What the receiver of unpinnable_mapping did, each 0 or -errno. */
struct pin_report {
	int step;		/* where it stopped; 0: it got to the end */
	int bytes_seen;		/* its mapping read the owner's bytes */
	int splice_own, splice_buf;
	int dio_own, dio_buf;
	int mr_own, mr_buf;
	int bytes_kept;		/* the owner's bytes still there after */
};

/* 0 when a page-sized vmsplice() of @p into @pipe_w went through. */
static int try_splice(int pipe_w, void *p)
{
	struct iovec iov = { p, 4096 };

	return vmsplice(pipe_w, &iov, 1, 0) == 4096 ? 0 : -errno;
}

/* 0 when an O_DIRECT read of a page from @dio into @p went through. */
static int try_dio(int dio, void *p)
{
	return pread(dio, p, 4096, 0) == 4096 ? 0 : -errno;
}

/* 0 when @p's page could be registered (and deregistered) on @pd. */
static int try_mr(struct ibv_pd *pd, void *p)
{
	struct ibv_mr *mr;

	mr = ibv_reg_mr(pd, p, 4096, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		return errno ? -errno : -EIO;
	return ibv_dereg_mr(mr) ? -EIO : 0;
}

/* rxe0's protection domain, or NULL. */
static struct ibv_pd *rxe_pd(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd = NULL;
	int n, i;

	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n && !pd; i++) {
		if (strcmp(ibv_get_device_name(list[i]), "rxe0"))
			continue;
		ctx = ibv_open_device(list[i]);
		pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	}
	if (list)
		ibv_free_device_list(list);
	return pd;
}

/*
 * As NOBODY, holding the dma-buf @buf of @len bytes (0x3c, but 0x3d in
 * its last byte) and @dio (a block device open with O_DIRECT): map it,
 * check the bytes, write 0xc5 at its start, then try each way of pinning
 * a page, first on a slice of its own (which must work), then on the
 * dma-buf's mapping.
 */
static void pin_receiver(int buf, uint64_t len, uint64_t chunk, int dio,
			 int out)
{
	struct rlimit rl = { 8 * chunk, 8 * chunk };
	struct pin_report r = { .step = 1 };
	struct mrpool_alloc a;
	struct ibv_pd *pd;
	int fd, pp[2];
	uint8_t *own, *q;

	if (setrlimit(RLIMIT_MEMLOCK, &rl) || setgroups(0, NULL) ||
	    setgid(NOBODY) || setuid(NOBODY))
		goto report;
	r.step++;
	fd = pool_open();
	if (fd < 0 || pool_alloc(fd, chunk, &a))
		goto report;
	r.step++;
	own = pool_map(fd, &a);
	q = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, buf, 0);
	pd = rxe_pd();
	if (own == MAP_FAILED || q == MAP_FAILED || !pd || pipe(pp))
		goto report;
	r.bytes_seen = q[0] == 0x3c && q[len / 2] == 0x3c &&
		       q[len - 1] == 0x3d;
	q[0] = 0xc5;
	r.splice_own = try_splice(pp[1], own);
	r.splice_buf = try_splice(pp[1], q + len - 4096);
	r.dio_own = try_dio(dio, own);
	r.dio_buf = try_dio(dio, q + len - 4096);
	r.mr_own = try_mr(pd, own);
	r.mr_buf = try_mr(pd, q + len - 4096);
	r.bytes_kept = q[len - 4096] == 0x3c && q[len - 1] == 0x3d;
	r.step = 0;
report:
	if (write(out, &r, sizeof(r)) != sizeof(r))
		_exit(2);
	_exit(0);
}

/*
 * A dma-buf's mapping cannot be pinned (issue 33): another user (NOBODY)
 * that received the dma-buf reads and writes the slice through it, but
 * vmsplice(), an O_DIRECT read into it and ibv_reg_mr() of it fail with
 * EFAULT -- each of which works on a slice of its own -- and the failed
 * ones leave the bytes alone. Without that, its pins could keep the
 * owner's memory after the owner freed it.
 */
TEST_F(dmabuf, unpinnable_mapping)
{
	struct mrpool_export_dmabuf e;
	struct pin_report r;
	struct mrpool_alloc a;
	int dio, res[2], st;
	uint8_t *s;
	pid_t pid;

	POOL_SETUP_SKIPPED();
	ASSERT_EQ(0, getuid());
	if (access(RAMDISK, F_OK))
		(void)!system("modprobe brd rd_nr=1 rd_size=4096 2>/dev/null");
	dio = open(RAMDISK, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (dio < 0)
		POOL_SKIP_OR_FAIL(return, "no " RAMDISK " for O_DIRECT (brd)");

	ASSERT_EQ(0, pool_alloc(self->fd, 2 * self->chunk, &a));
	s = pool_map(self->fd, &a);
	ASSERT_NE(MAP_FAILED, s);
	memset(s, 0x3c, a.length);
	s[a.length - 1] = 0x3d;
	ASSERT_EQ(0, export(self->fd, a.slice_id, 0, &e));
	ASSERT_EQ(0, pipe2(res, O_CLOEXEC));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		close(res[0]);
		pin_receiver(e.fd, a.length, self->chunk, dio, res[1]);
	}
	close(res[1]);
	memset(&r, 0, sizeof(r));
	r.step = -1;
	EXPECT_EQ((ssize_t)sizeof(r), read(res[0], &r, sizeof(r)));
	close(res[0]);
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st));
	ASSERT_EQ(0, r.step);
	EXPECT_TRUE(r.bytes_seen);
	/* Its write through the dma-buf landed in the slice. */
	EXPECT_EQ(0xc5, s[0]);
	/* Each way works on its own slice ... */
	EXPECT_EQ(0, r.splice_own);
	EXPECT_EQ(0, r.dio_own);
	EXPECT_EQ(0, r.mr_own);
	/* ... and on the dma-buf's mapping fails. */
	EXPECT_EQ(-EFAULT, r.splice_buf);
	EXPECT_EQ(-EFAULT, r.dio_buf);
	EXPECT_EQ(-EFAULT, r.mr_buf);
	EXPECT_TRUE(r.bytes_kept);
	EXPECT_EQ(0x3c, s[a.length - 4096]);
	close(dio);
	EXPECT_EQ(0, close(e.fd));
	EXPECT_EQ(0, munmap(s, a.length));
	EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
}

/* Bad requests: flags, reserved, ids of nobody or of another file, EPERM. */
TEST_F(dmabuf, bad_requests)
{
	struct mrpool_export_dmabuf e;
	struct mrpool_alloc a;
	int other, st;
	pid_t pid;

	POOL_SETUP_SKIPPED();

	ASSERT_EQ(0, pool_alloc(self->fd, self->chunk, &a));
	EXPECT_EQ(-EINVAL, export(self->fd, a.slice_id, 2, &e));
	memset(&e, 0, sizeof(e));
	e.size = sizeof(e);
	e.slice_id = a.slice_id;
	e.reserved[0] = 1;
	EXPECT_EQ(-EINVAL, pool_ioctl(self->fd, MRPOOL_IOC_EXPORT_DMABUF, &e));
	e.reserved[0] = 0;
	e.pad = 1;
	EXPECT_EQ(-EINVAL, pool_ioctl(self->fd, MRPOOL_IOC_EXPORT_DMABUF, &e));
	e.pad = 0;
	e.size = 16;
	EXPECT_EQ(-EINVAL, pool_ioctl(self->fd, MRPOOL_IOC_EXPORT_DMABUF, &e));
	EXPECT_EQ(-ENOENT, export(self->fd, 0, 0, &e));
	EXPECT_EQ(-ENOENT, export(self->fd, a.slice_id + 1000, 0, &e));
	EXPECT_EQ(-EFAULT, pool_ioctl(self->fd, MRPOOL_IOC_EXPORT_DMABUF,
				      (void *)8));

	other = pool_open();
	ASSERT_LE(0, other);
	EXPECT_EQ(-ENOENT, export(other, a.slice_id, 0, &e));
	close(other);

	/* A child that inherited the file is not its opener. */
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		_exit(export(self->fd, a.slice_id, 0, &e) == -EPERM ? 0 : 1);
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
}

/*
 * The dma-buf has the mode of the file it came from (issue 33): from a
 * write-only file it is write-only, so it maps in no way at all.
 */
TEST_F(dmabuf, mode_follows_file)
{
	static const int prots[] = {
		PROT_READ | PROT_WRITE, PROT_WRITE, PROT_READ, PROT_NONE,
	};
	struct mrpool_export_dmabuf e;
	struct mrpool_alloc a;
	unsigned int i;
	void *b;
	int wofd;

	POOL_SETUP_SKIPPED();

	wofd = open(POOL_DEV, O_WRONLY | O_CLOEXEC);
	ASSERT_LE(0, wofd);
	ASSERT_EQ(0, pool_alloc(wofd, self->chunk, &a));
	ASSERT_EQ(0, export(wofd, a.slice_id, MRPOOL_EXPORT_CLOEXEC, &e));
	EXPECT_EQ(O_WRONLY, fcntl(e.fd, F_GETFL) & O_ACCMODE);
	for (i = 0; i < sizeof(prots) / sizeof(prots[0]); i++) {
		b = mmap(NULL, a.length, prots[i], MAP_SHARED, e.fd, 0);
		EXPECT_EQ(MAP_FAILED, b) TH_LOG("prot %d", prots[i]);
		if (b == MAP_FAILED) {
			EXPECT_EQ(EACCES, errno);
		} else {
			munmap(b, a.length);
		}
	}
	/* F_SETFL cannot widen it. */
	EXPECT_EQ(0, fcntl(e.fd, F_SETFL, O_RDWR));
	EXPECT_EQ(O_WRONLY, fcntl(e.fd, F_GETFL) & O_ACCMODE);
	EXPECT_EQ(0, close(e.fd));
	close(wofd);
}

/*
 * A read-only file exports nothing (issue 33), not even a slice id that
 * is live in another file, and cannot get a slice to export: the
 * review's O_RDONLY ALLOC + EXPORT + writable mmap is closed at its start.
 */
TEST_F(dmabuf, rdonly_cannot_export)
{
	struct mrpool_export_dmabuf e;
	struct mrpool_alloc a, b;
	int rofd, fds;

	POOL_SETUP_SKIPPED();

	ASSERT_EQ(0, pool_alloc(self->fd, self->chunk, &a));
	rofd = open(POOL_DEV, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, rofd);
	fds = dup(rofd);
	ASSERT_LE(0, fds);
	close(fds);
	EXPECT_EQ(-EBADF, pool_alloc(rofd, self->chunk, &b));
	e.fd = -1;
	EXPECT_EQ(-EBADF, export(rofd, a.slice_id, 0, &e));
	EXPECT_EQ(-EBADF, export(rofd, 0, 0, &e));
	/* No descriptor was taken: the next free number is still @fds. */
	EXPECT_EQ(fds, dup(rofd));
	close(fds);
	if (e.fd >= 0)
		close(e.fd);
	close(rofd);
	EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
}

TEST_HARNESS_MAIN
