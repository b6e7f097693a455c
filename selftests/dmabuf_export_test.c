// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * MRPOOL_IOC_EXPORT_DMABUF: the descriptor, its size, mmap through it
 * showing the slice's bytes both ways, and revocation: a FREE or the
 * file's release unmaps the dma-buf's mappings (SIGBUS) and returns the
 * memory at once, whoever holds the dma-buf; its mode is that of the
 * file it came from (issue 33). Import by a NIC (ibv_reg_dmabuf_mr) cannot be tested here: rxe
 * in 6.1 has no dma-buf MRs.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
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
