// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Revocation (issue 33): the owner takes its memory back. A FREE, or the
 * owner's exit, unmaps every mapping of the slice -- the owner's own and
 * the dma-buf's in another user's process -- which then faults with
 * SIGBUS; the chunks go back to the pool at once, or once the last pin
 * (a pipe holding vmsplice()d pages) goes. Only the owner's own mapping
 * can be pinned (a dma-buf's cannot: EFAULT), so what such a pin holds
 * stays the owner's while it lives, and another user cannot keep the
 * owner charged -- the owner's charge is 0 right after its reap; the
 * next owner of a chunk reads zeros.
 *
 * VM kernels: all (zapping, fault and GUP paths are mm's, per kernel)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
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
#define OWNER		65533	/* the owner user of the two-user tests */
#define NR_CHUNKS	2	/* chunks of their slice */

FIXTURE(revoke) {
	int fd;
	struct mrpool_query q0;
	uint64_t chunk;
	long long trim;		/* idle_trim_sec, restored by the teardown */
	long long user_mb;	/* max_user_mb, restored by the teardown */
};

FIXTURE_SETUP(revoke)
{
	POOL_SETUP_OPEN();
	/* user_bytes()'s -1 is "charged nothing" only if the file reads. */
	ASSERT_TRUE(pool_users_readable());
	self->chunk = self->q0.chunk_size;
	self->trim = pool_trim_off();
	self->user_mb = pool_param("max_user_mb");
}

FIXTURE_TEARDOWN(revoke)
{
	if (self->fd < 0)
		return;
	pool_trim_restore(self->trim);
	if (self->user_mb >= 0)
		pool_set_param("max_user_mb", self->user_mb);
	close(self->fd);
}

static long long user_bytes(unsigned int uid)
{
	return pool_user_row(uid, POOL_USER_BYTES);
}


/* Send @fd and a u64 over the unix socket @sock. */
static int send_fd(int sock, int fd, uint64_t val)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &val, sizeof(val) };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf, .msg_controllen = sizeof(cbuf),
	};
	struct cmsghdr *cm;

	memset(cbuf, 0, sizeof(cbuf));
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	return sendmsg(sock, &mh, 0) == sizeof(val) ? 0 : -1;
}

/* The descriptor and value send_fd() sent, or -1. */
static int recv_fd(int sock, uint64_t *val)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { val, sizeof(*val) };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf, .msg_controllen = sizeof(cbuf),
	};
	struct cmsghdr *cm;
	int fd;

	if (recvmsg(sock, &mh, MSG_CMSG_CLOEXEC) != sizeof(*val))
		return -1;
	cm = CMSG_FIRSTHDR(&mh);
	if (!cm || cm->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

static void become(unsigned int uid)
{
	if (setgroups(0, NULL) || setgid(uid) || setuid(uid))
		_exit(90);
}

/* One byte from @fd, or _exit(@code) at EOF. */
static void wait_byte(int fd, int code)
{
	char c;

	if (read(fd, &c, 1) != 1)
		_exit(code);
}

static void say(int fd, int v)
{
	if (write(fd, &v, sizeof(v)) != sizeof(v))
		_exit(91);
}

/* FREE only, or the owner's exit (its file released by the exit). */
enum owner_end { OWNER_FREES, OWNER_EXITS };

/*
 * As OWNER: ALLOC NR_CHUNKS chunks, map and fill them with 0x5a, export
 * the slice and send the dma-buf to the receiver; on a byte from @go,
 * FREE (and report what its own mapping then does) or exit.
 */
static void owner_child(uint64_t chunk, int sock, int go, int out,
			enum owner_end end)
{
	struct rlimit rl = { NR_CHUNKS * chunk, NR_CHUNKS * chunk };
	int buf;
	struct mrpool_alloc a;
	uint8_t *p;
	int fd;

	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		_exit(80);
	become(OWNER);
	fd = pool_open();
	if (fd < 0 || pool_alloc(fd, NR_CHUNKS * chunk, &a))
		_exit(81);
	p = pool_map(fd, &a);
	if (p == MAP_FAILED)
		_exit(82);
	memset(p, 0x5a, a.length);
	buf = pool_export(fd, a.slice_id);
	if (buf < 0)
		_exit(83);
	if (send_fd(sock, buf, a.length))
		_exit(84);
	close(buf);
	wait_byte(go, 85);
	if (end == OWNER_EXITS)
		_exit(0);
	say(out, pool_free(fd, a.slice_id));
	say(out, pool_touch(p, false));
	wait_byte(go, 0);	/* the parent's end: EOF */
	_exit(0);
}

/*
 * As NOBODY once it has the dma-buf: map it, check the owner's bytes,
 * try to vmsplice() one page of each chunk into a pipe (@splice), report
 * 0, or the first vmsplice()'s -errno; on a byte from @go, report what a
 * touch of the mapping does; then hold the pipe until @go ends.
 */
static void receiver_child(uint64_t chunk, int sock, int go, int out,
			   bool splice)
{
	uint64_t len = 0;
	int buf, pp[2], i, ret = 0;
	uint8_t *q;

	buf = recv_fd(sock, &len);
	if (buf < 0)
		_exit(70);
	become(NOBODY);
	q = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, buf, 0);
	if (q == MAP_FAILED)
		_exit(71);
	if (q[0] != 0x5a || q[len - 1] != 0x5a)
		_exit(72);
	if (splice) {
		if (pipe(pp))
			_exit(73);
		for (i = 0; i < (int)(len / chunk) && !ret; i++) {
			struct iovec iov = { q + i * chunk, 4096 };

			if (vmsplice(pp[1], &iov, 1, 0) != 4096)
				ret = -errno;
		}
	}
	say(out, ret);
	wait_byte(go, 75);
	say(out, pool_touch(q, false));
	say(out, pool_touch(q + len - 1, true));
	wait_byte(go, 0);	/* the pipe goes with the exit */
	_exit(0);
}

/* A child's report, or -1000 when it ended first. */
static int hear(int fd)
{
	int v;

	return read(fd, &v, sizeof(v)) == sizeof(v) ? v : -1000;
}

struct two_users {
	pid_t owner, receiver;
	int owner_go, owner_out, recv_go, recv_out;
};

/* What a two-user test's children are told. */
struct two_users_how {
	uint64_t chunk;
	enum owner_end end;
	bool splice;
};

/* A child of a two-user test: its socket end, @go to wait on, @out. */
typedef void (*two_users_child)(const struct two_users_how *how, int sock,
				int go, int out);

/*
 * Fork @receiver and @owner, joined by a socket, each with a pipe to wait
 * on (@t->recv_go, @t->owner_go) and one to report on (@t->recv_out,
 * @t->owner_out).
 */
static int two_users_run(struct two_users *t, const struct two_users_how *how,
			 two_users_child owner, two_users_child receiver)
{
	int sv[2], og[2], oo[2], rg[2], ro[2];

	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) ||
	    pipe2(og, O_CLOEXEC) || pipe2(oo, O_CLOEXEC) ||
	    pipe2(rg, O_CLOEXEC) || pipe2(ro, O_CLOEXEC))
		return -1;
	t->receiver = fork();
	if (t->receiver < 0)
		return -1;
	/* Each child keeps its own ends only: EOF on @go is the parent's. */
	if (!t->receiver) {
		close(og[0]);
		close(og[1]);
		close(oo[0]);
		close(oo[1]);
		close(rg[1]);
		close(ro[0]);
		receiver(how, sv[1], rg[0], ro[1]);
		_exit(0);
	}
	t->owner = fork();
	if (t->owner < 0)
		return -1;
	if (!t->owner) {
		close(rg[0]);
		close(rg[1]);
		close(ro[0]);
		close(ro[1]);
		close(og[1]);
		close(oo[0]);
		owner(how, sv[0], og[0], oo[1]);
		_exit(0);
	}
	close(sv[0]);
	close(sv[1]);
	close(og[0]);
	close(oo[1]);
	close(rg[0]);
	close(ro[1]);
	t->owner_go = og[1];
	t->owner_out = oo[0];
	t->recv_go = rg[1];
	t->recv_out = ro[0];
	return 0;
}

static void owner_default(const struct two_users_how *how, int sock, int go,
			  int out)
{
	owner_child(how->chunk, sock, go, out, how->end);
}

static void receiver_default(const struct two_users_how *how, int sock,
			     int go, int out)
{
	receiver_child(how->chunk, sock, go, out, how->splice);
}

/* The owner and receiver above: @end and @splice say how. */
static int two_users_start(struct two_users *t, uint64_t chunk,
			   enum owner_end end, bool splice)
{
	struct two_users_how how = { chunk, end, splice };

	return two_users_run(t, &how, owner_default, receiver_default);
}

/* Exit status of @pid after closing @go (its end), or -1. */
static int two_users_reap(pid_t pid, int go)
{
	int st;

	close(go);
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/*
 * FREE revokes the owner's own mappings: the slice mapped twice, both
 * fault with SIGBUS after the FREE, and its chunks are free again at once.
 */
TEST_F(revoke, free_revokes_own_mappings)
{
	struct mrpool_query q1, q2;
	long long frees = pool_attr("stats/frees");
	struct mrpool_alloc a;
	uint8_t *p, *q;

	ASSERT_EQ(0, pool_alloc(self->fd, NR_CHUNKS * self->chunk, &a));
	p = pool_map(self->fd, &a);
	ASSERT_NE(MAP_FAILED, p);
	q = pool_map(self->fd, &a);
	ASSERT_NE(MAP_FAILED, q);
	memset(p, 0x77, a.length);
	ASSERT_EQ(0x77, q[a.length - 1]);
	EXPECT_EQ(0, pool_touch(p, true));
	ASSERT_EQ(0, pool_query(self->fd, &q1));

	ASSERT_EQ(0, pool_free(self->fd, a.slice_id));
	EXPECT_EQ(SIGBUS, pool_touch(p, false));
	EXPECT_EQ(SIGBUS, pool_touch(q, false));
	EXPECT_EQ(SIGBUS, pool_touch(q + a.length - 1, true));
	EXPECT_EQ(SIGBUS, pool_touch(p + self->chunk, true));
	/* Back without an unmap: free, not used nor quarantined. */
	ASSERT_EQ(0, pool_query(self->fd, &q2));
	EXPECT_EQ(q1.free_bytes + a.length, q2.free_bytes);
	EXPECT_EQ(q1.used_bytes - a.length, q2.used_bytes);
	EXPECT_EQ(q1.quarantined_bytes, q2.quarantined_bytes);
	EXPECT_EQ(0ULL, q2.file_bytes);
	EXPECT_EQ(q1.user_bytes - a.length, q2.user_bytes);
	EXPECT_EQ(frees + 1, pool_attr("stats/frees"));
	EXPECT_EQ(0, munmap(p, a.length));
	EXPECT_EQ(0, munmap(q, a.length));
}

/*
 * A FORK_COPY slice FREEd while still mapped, then a fork: its chunks are
 * back in the pool (maybe another owner's already), so the child gets no
 * copy: its touch is SIGBUS, fork_copy_failures counts it, and the chunk
 * handed to the next ALLOC reads zeros there.
 */
TEST_F(revoke, fork_after_free_gets_no_copy)
{
	long long fails = pool_attr("stats/fork_copy_failures");
	struct mrpool_alloc a, b;
	uint8_t *p, *r;
	pid_t pid;
	int st;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.bytes = self->chunk;
	a.node = MRPOOL_NODE_ANY;
	a.flags = MRPOOL_ALLOC_FORK_COPY;
	ASSERT_EQ(0, pool_ioctl(self->fd, MRPOOL_IOC_ALLOC, &a));
	p = pool_map(self->fd, &a);
	ASSERT_NE(MAP_FAILED, p);
	memset(p, 0x5c, a.length);
	ASSERT_EQ(0, pool_free(self->fd, a.slice_id));
	ASSERT_EQ(0, pool_alloc(self->fd, self->chunk, &b));
	r = pool_map(self->fd, &b);
	ASSERT_NE(MAP_FAILED, r);
	EXPECT_EQ(b.length, pool_nonzero_at(r, b.length));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		_exit(p[0] == 0x5c ? 1 : 2);	/* SIGBUS is the pass */
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS)
		TH_LOG("child status %#x", st);
	EXPECT_EQ(fails + 1, pool_attr("stats/fork_copy_failures"));
	EXPECT_EQ(0, munmap(r, b.length));
	EXPECT_EQ(0, pool_free(self->fd, b.slice_id));
	EXPECT_EQ(0, munmap(p, a.length));
}

/*
 * Another user's dma-buf mapping is revoked at the owner's exit: its next
 * touch gets SIGBUS, and the owner's charge is 0 right after the reap.
 */
TEST_F(revoke, dmabuf_receiver_revoked_at_owner_exit)
{
	struct two_users t;
	int st;

	ASSERT_EQ(0, getuid());
	ASSERT_EQ(0, two_users_start(&t, self->chunk, OWNER_EXITS, false));
	ASSERT_EQ(0, hear(t.recv_out));
	EXPECT_EQ((long long)(NR_CHUNKS * self->chunk), user_bytes(OWNER));

	ASSERT_EQ(1, write(t.owner_go, "x", 1));
	ASSERT_EQ(t.owner, waitpid(t.owner, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st));
	/* Reaped: nothing of the owner's may be charged any more. */
	EXPECT_GE(0, user_bytes(OWNER));

	ASSERT_EQ(1, write(t.recv_go, "g", 1));
	EXPECT_EQ(SIGBUS, hear(t.recv_out));
	EXPECT_EQ(SIGBUS, hear(t.recv_out));
	EXPECT_EQ(0, two_users_reap(t.receiver, t.recv_go));
	close(t.owner_go);
	close(t.owner_out);
	close(t.recv_out);
	EXPECT_GE(0, user_bytes(NOBODY));
}

/*
 * The same for a FREE by a live owner: the receiver and the owner's own
 * mapping fault, and the chunks are back in the pool.
 */
TEST_F(revoke, dmabuf_receiver_revoked_at_free)
{
	struct mrpool_query q;
	struct two_users t;

	ASSERT_EQ(0, getuid());
	ASSERT_EQ(0, two_users_start(&t, self->chunk, OWNER_FREES, false));
	ASSERT_EQ(0, hear(t.recv_out));

	ASSERT_EQ(1, write(t.owner_go, "x", 1));
	EXPECT_EQ(0, hear(t.owner_out));
	EXPECT_EQ(SIGBUS, hear(t.owner_out));
	EXPECT_GE(0, user_bytes(OWNER));
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(self->q0.used_bytes, q.used_bytes);
	EXPECT_EQ(self->q0.quarantined_bytes, q.quarantined_bytes);

	ASSERT_EQ(1, write(t.recv_go, "g", 1));
	EXPECT_EQ(SIGBUS, hear(t.recv_out));
	EXPECT_EQ(SIGBUS, hear(t.recv_out));
	EXPECT_EQ(0, two_users_reap(t.receiver, t.recv_go));
	EXPECT_EQ(0, two_users_reap(t.owner, t.owner_go));
	close(t.owner_out);
	close(t.recv_out);
}

/*
 * vmsplice(): the receiver tries to pin one page per chunk in a pipe
 * before the owner exits, and fails (EFAULT): a dma-buf's mapping has no
 * pages to pin. The owner's charge is 0 at its reap, nothing waits in
 * quarantine and nothing is the receiver's. Before, the pins held the
 * chunks, charged to the receiver, until the pipe went.
 */
TEST_F(revoke, receiver_cannot_pin_dmabuf)
{
	struct mrpool_query q;
	struct two_users t;
	int st;

	ASSERT_EQ(0, getuid());
	ASSERT_TRUE(POOL_WAIT(user_bytes(NOBODY) <= 0, 20000))
		TH_LOG("nobody holds pool memory already");
	ASSERT_EQ(0, two_users_start(&t, self->chunk, OWNER_EXITS, true));
	EXPECT_EQ(-EFAULT, hear(t.recv_out));

	ASSERT_EQ(1, write(t.owner_go, "x", 1));
	ASSERT_EQ(t.owner, waitpid(t.owner, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st));
	EXPECT_GE(0, user_bytes(OWNER));
	/* Nothing pinned: nothing quarantined, nothing moved. */
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(self->q0.quarantined_bytes, q.quarantined_bytes);
	EXPECT_GE(0, user_bytes(NOBODY));

	ASSERT_EQ(1, write(t.recv_go, "g", 1));
	EXPECT_EQ(SIGBUS, hear(t.recv_out));
	EXPECT_EQ(SIGBUS, hear(t.recv_out));
	EXPECT_EQ(0, two_users_reap(t.receiver, t.recv_go));
	EXPECT_TRUE(pool_back_to(self->fd, &self->q0, &q));
	close(t.owner_go);
	close(t.owner_out);
	close(t.recv_out);
}

/*
 * The owner's own pins stay its own (issue 33): OWNER exports a slice of
 * SHED_SHARE chunks (its whole share) to NOBODY, which maps it, then
 * vmsplice()s a page of each chunk of its own mapping into its own pipe
 * and FREEs. Only the owner's mapping can be pinned, so the chunks wait
 * in quarantine charged to OWNER -- its next ALLOC is refused -- not to
 * NOBODY (which holds its SHED_SHARE - 1 chunks), nor the orphans, and
 * nothing counts in orphans_full: room ran short nowhere. Before, the
 * pins could have been NOBODY's, so NOBODY took one chunk (up to its
 * share) and the orphans the other. Once OWNER is gone, pipes and all,
 * everything is back.
 */
#define SHED_SHARE	2

static void shed_owner(const struct two_users_how *how, int sock, int go,
		       int out)
{
	uint64_t chunk = how->chunk;
	struct rlimit rl = { 8 * SHED_SHARE * chunk, 8 * SHED_SHARE * chunk };
	int buf;
	struct mrpool_alloc a, b;
	struct iovec iov;
	int fd, pp[2], i;
	uint8_t *p;

	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		_exit(80);
	become(OWNER);
	fd = pool_open();
	if (fd < 0 || pool_alloc(fd, SHED_SHARE * chunk, &a))
		_exit(81);
	p = pool_map(fd, &a);
	if (p == MAP_FAILED)
		_exit(83);
	memset(p, 0x5a, a.length);
	buf = pool_export(fd, a.slice_id);
	if (buf < 0 || send_fd(sock, buf, a.length))
		_exit(84);
	close(buf);
	wait_byte(go, 85);	/* the receiver mapped it */
	/* The pipe is kept (not closed) until the exit. */
	if (pipe(pp))
		_exit(86);
	for (i = 0; i < SHED_SHARE; i++) {
		iov.iov_base = p + i * chunk;
		iov.iov_len = 4096;
		if (vmsplice(pp[1], &iov, 1, 0) != 4096)
			_exit(87);
	}
	say(out, pool_free(fd, a.slice_id));
	wait_byte(go, 88);
	/* What stayed OWNER's counts against its share. */
	say(out, pool_alloc(fd, chunk, &b));
	wait_byte(go, 0);	/* the pipe goes with the exit */
	_exit(0);
}

static void shed_receiver(const struct two_users_how *how, int sock, int go,
			  int out)
{
	uint64_t chunk = how->chunk;
	struct rlimit rl = { 8 * SHED_SHARE * chunk, 8 * SHED_SHARE * chunk };
	struct mrpool_alloc own;
	uint64_t len = 0;
	int fd, buf;
	uint8_t *q;

	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		_exit(70);
	become(NOBODY);
	fd = pool_open();
	say(out, fd < 0 ? -1 : pool_alloc(fd, (SHED_SHARE - 1) * chunk, &own));
	buf = recv_fd(sock, &len);
	if (buf < 0)
		_exit(71);
	q = mmap(NULL, len, PROT_READ, MAP_SHARED, buf, 0);
	if (q == MAP_FAILED)
		_exit(72);
	say(out, q[0] == 0x5a && q[len - 1] == 0x5a ? 0 : 73);
	wait_byte(go, 0);
	_exit(0);
}

TEST_F(revoke, owner_pins_stay_owners)
{
	long long full = pool_attr("stats/orphans_full");
	long long share_mb = SHED_SHARE * self->chunk / MIB;
	struct two_users_how how = { .chunk = self->chunk };
	struct mrpool_query q;
	struct two_users t;

	ASSERT_EQ(0, getuid());
	ASSERT_LE(0, full);
	ASSERT_TRUE(POOL_WAIT(pool_orphan_bytes() == 0 &&
			      user_bytes(NOBODY) <= 0 &&
			      user_bytes(OWNER) <= 0, 20000))
		TH_LOG("nobody or the owner holds pool memory already");
	ASSERT_EQ(0, pool_set_param("max_user_mb", share_mb));
	ASSERT_EQ(0, two_users_run(&t, &how, shed_owner, shed_receiver));

	EXPECT_EQ(0, hear(t.recv_out));	/* NOBODY's own share - 1 chunks */
	EXPECT_EQ(0, hear(t.recv_out));	/* mapped */
	ASSERT_EQ(1, write(t.owner_go, "m", 1));
	EXPECT_EQ(0, hear(t.owner_out));	/* pinned and freed */
	EXPECT_EQ((long long)(SHED_SHARE * self->chunk), user_bytes(OWNER));
	EXPECT_EQ((long long)(SHED_SHARE * self->chunk),
		  pool_user_row(OWNER, POOL_USER_QUARANTINED));
	EXPECT_EQ((long long)((SHED_SHARE - 1) * self->chunk),
		  user_bytes(NOBODY));
	EXPECT_EQ(0, pool_orphan_bytes());
	EXPECT_EQ(full, pool_attr("stats/orphans_full"));
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(self->q0.quarantined_bytes + SHED_SHARE * self->chunk,
		  q.quarantined_bytes);
	/* OWNER's next ALLOC: its share is pinned. */
	ASSERT_EQ(1, write(t.owner_go, "a", 1));
	EXPECT_EQ(-EDQUOT, hear(t.owner_out));

	/* Both gone, pipes and all: everything is back. */
	EXPECT_EQ(0, two_users_reap(t.owner, t.owner_go));
	EXPECT_EQ(0, two_users_reap(t.receiver, t.recv_go));
	close(t.owner_out);
	close(t.recv_out);
	EXPECT_TRUE(POOL_WAIT(pool_orphan_bytes() == 0 &&
			      user_bytes(NOBODY) <= 0 &&
			      user_bytes(OWNER) <= 0, 20000));
	EXPECT_TRUE(POOL_WAIT(pool_back_to(self->fd, &self->q0, &q), 20000));
}

/*
 * The review's abuse (issue 33): NOBODY, sitting at its share with its
 * own ALLOCs, receives OWNER's dma-bufs and tries to keep their memory by
 * pinning a page of each chunk through its mapping (vmsplice()) while
 * OWNER frees them, twice: once to fill the orphans, once to leave OWNER
 * charged past them. A dma-buf mapping cannot be pinned: each vmsplice()
 * fails with EFAULT, every chunk is back at the FREE, and once OWNER's
 * process is gone its charge is 0, the orphans hold nothing and NOBODY
 * holds its own share and cannot ALLOC past it. Before, the first round's
 * chunks went to the orphans and the second's stayed OWNER's after its
 * exit.
 */
#define ABUSE_SHARE	2	/* chunks of a user's share */
#define ABUSE_ROUNDS	2

static void atshare_owner(const struct two_users_how *how, int sock, int go,
			  int out)
{
	uint64_t chunk = how->chunk;
	struct rlimit rl = { 4 * ABUSE_SHARE * chunk, 4 * ABUSE_SHARE * chunk };
	int buf;
	struct mrpool_alloc a;
	int fd, r;
	uint8_t *p;

	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		_exit(80);
	become(OWNER);
	fd = pool_open();
	if (fd < 0)
		_exit(81);
	for (r = 0; r < ABUSE_ROUNDS; r++) {
		wait_byte(go, 89);
		if (pool_alloc(fd, ABUSE_SHARE * chunk, &a))
			_exit(82);
		p = pool_map(fd, &a);
		if (p == MAP_FAILED)
			_exit(83);
		memset(p, 0x5a, a.length);
		buf = pool_export(fd, a.slice_id);
		if (buf < 0 || send_fd(sock, buf, a.length))
			_exit(84);
		close(buf);
		wait_byte(go, 85);	/* the receiver tried its pins */
		say(out, pool_free(fd, a.slice_id));
	}
	wait_byte(go, 0);
	_exit(0);
}

static void atshare_receiver(const struct two_users_how *how, int sock,
			     int go, int out)
{
	uint64_t chunk = how->chunk;
	struct rlimit rl = { 4 * ABUSE_SHARE * chunk, 4 * ABUSE_SHARE * chunk };
	struct mrpool_alloc own, more;
	int fd, buf, r, i, pp[2], ret;
	uint64_t len = 0;
	struct iovec iov;
	uint8_t *q;

	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		_exit(70);
	become(NOBODY);
	fd = pool_open();
	say(out, fd < 0 ? -1 : pool_alloc(fd, ABUSE_SHARE * chunk, &own));
	/* The pipes are kept (not closed) until the exit. */
	for (r = 0; r < ABUSE_ROUNDS; r++) {
		buf = recv_fd(sock, &len);
		if (buf < 0 || pipe(pp))
			_exit(71);
		q = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, buf, 0);
		if (q == MAP_FAILED || q[0] != 0x5a || q[len - 1] != 0x5a)
			_exit(72);
		/* 0 if every page was pinned, else the first -errno. */
		ret = 0;
		for (i = 0; i < (int)(len / chunk) && !ret; i++) {
			iov.iov_base = q + i * chunk;
			iov.iov_len = 4096;
			if (vmsplice(pp[1], &iov, 1, 0) != 4096)
				ret = -errno;
		}
		say(out, ret);
	}
	wait_byte(go, 73);
	say(out, pool_alloc(fd, chunk, &more));
	wait_byte(go, 0);
	_exit(0);
}

TEST_F(revoke, receiver_at_share_cannot_keep_owner_charged)
{
	long long share_mb = ABUSE_SHARE * self->chunk / MIB;
	struct two_users_how how = { .chunk = self->chunk };
	struct mrpool_query q;
	struct two_users t;
	int r, st;

	ASSERT_EQ(0, getuid());
	ASSERT_TRUE(POOL_WAIT(pool_orphan_bytes() == 0 &&
			      user_bytes(NOBODY) <= 0 &&
			      user_bytes(OWNER) <= 0, 20000))
		TH_LOG("nobody, the owner or the orphans hold pool memory already");
	ASSERT_EQ(0, pool_set_param("max_user_mb", share_mb));
	ASSERT_EQ(0, two_users_run(&t, &how, atshare_owner,
				   atshare_receiver));

	EXPECT_EQ(0, hear(t.recv_out));	/* NOBODY's whole share */
	for (r = 0; r < ABUSE_ROUNDS; r++) {
		ASSERT_EQ(1, write(t.owner_go, "r", 1));
		EXPECT_EQ(-EFAULT, hear(t.recv_out)) TH_LOG("round %d", r);
		ASSERT_EQ(1, write(t.owner_go, "f", 1));
		EXPECT_EQ(0, hear(t.owner_out));	/* freed */
	}
	/* OWNER's process is gone. */
	close(t.owner_go);
	ASSERT_EQ(t.owner, waitpid(t.owner, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st));
	EXPECT_GE(0, user_bytes(OWNER));
	EXPECT_EQ(0, pool_orphan_bytes());
	EXPECT_EQ((long long)(ABUSE_SHARE * self->chunk), user_bytes(NOBODY));
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(self->q0.quarantined_bytes, q.quarantined_bytes);
	/* NOBODY, at its share, gets no more. */
	ASSERT_EQ(1, write(t.recv_go, "a", 1));
	EXPECT_EQ(-EDQUOT, hear(t.recv_out));

	EXPECT_EQ(0, two_users_reap(t.receiver, t.recv_go));
	close(t.owner_out);
	close(t.recv_out);
	EXPECT_TRUE(POOL_WAIT(pool_orphan_bytes() == 0 &&
			      user_bytes(NOBODY) <= 0 &&
			      user_bytes(OWNER) <= 0, 20000));
	EXPECT_TRUE(POOL_WAIT(pool_back_to(self->fd, &self->q0, &q), 20000));
}

/*
 * The chunk a revocation gave back is handed on zeroed, and the revoked
 * mapping of the previous owner cannot see the next owner's bytes.
 */
TEST_F(revoke, next_owner_reads_zeros)
{
	struct mrpool_alloc a, b;
	unsigned long pfn;
	uint8_t *p, *n;

	ASSERT_EQ(0, pool_alloc(self->fd, self->chunk, &a));
	ASSERT_EQ(1, pool_slice_pfns(a.slice_id, &pfn, 1));
	p = pool_map(self->fd, &a);
	ASSERT_NE(MAP_FAILED, p);
	memset(p, 0xa5, a.length);
	ASSERT_EQ(0, pool_free(self->fd, a.slice_id));

	/* Still mapped here, yet free: a slice of every free chunk has it. */
	ASSERT_EQ(1, pool_alloc_free_has(self->fd, pfn, &b));
	n = pool_map(self->fd, &b);
	ASSERT_NE(MAP_FAILED, n);
	EXPECT_EQ(b.length, pool_nonzero_at(n, b.length));
	memset(n, 0x3c, b.length);
	EXPECT_EQ(SIGBUS, pool_touch(p, false));
	EXPECT_EQ(SIGBUS, pool_touch(p + a.length - 1, false));
	EXPECT_EQ(0, munmap(p, a.length));
	EXPECT_EQ(0, munmap(n, b.length));
	EXPECT_EQ(0, pool_free(self->fd, b.slice_id));
}

#define RACE_ROUNDS	30
#define RACERS		2

/* A thread faulting a slice's mapping in, again and again. */
struct racer {
	pthread_t th;
	uint8_t *p;
	size_t len;
	int sig;		/* __atomic: the signal that ended it */
};

static __thread sigjmp_buf racer_jmp;

static void racer_handler(int sig)
{
	siglongjmp(racer_jmp, sig);
}

static void *racer_fn(void *arg)
{
	struct racer *r = arg;
	size_t off = 0;
	int sig;

	sig = sigsetjmp(racer_jmp, 1);
	if (sig) {
		__atomic_store_n(&r->sig, sig, __ATOMIC_RELEASE);
		return NULL;
	}
	for (;;) {
		(void)*(volatile uint8_t *)(r->p + off);
		off = (off + 4096) % r->len;
		/* Unmapped again: each sweep faults every entry anew. */
		if (!off)
			madvise(r->p, r->len, MADV_DONTNEED);
	}
	return NULL;
}

/*
 * FREE while other threads fault the mapping in: a fault that passed the
 * revoked check before the FREE has its entry zapped all the same. Every
 * thread ends with SIGBUS, and the chunk is free while the mapping still
 * exists: an entry installed after the zap would hold a page reference.
 */
TEST_F(revoke, free_races_faults)
{
	struct sigaction sa, old_bus, old_segv;
	struct racer r[RACERS];
	struct mrpool_query q1, q2;
	struct mrpool_alloc a;
	int round, i, done;
	uint8_t *p;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = racer_handler;
	sigemptyset(&sa.sa_mask);
	ASSERT_EQ(0, sigaction(SIGBUS, &sa, &old_bus));
	ASSERT_EQ(0, sigaction(SIGSEGV, &sa, &old_segv));
	for (round = 0; round < RACE_ROUNDS; round++) {
		ASSERT_EQ(0, pool_alloc(self->fd, self->chunk, &a));
		p = pool_map(self->fd, &a);
		ASSERT_NE(MAP_FAILED, p);
		memset(p, 0x42, a.length);
		ASSERT_EQ(0, pool_query(self->fd, &q1));
		for (i = 0; i < RACERS; i++) {
			r[i].p = p;
			r[i].len = a.length;
			r[i].sig = 0;
			ASSERT_EQ(0, pthread_create(&r[i].th, NULL, racer_fn,
						    &r[i]));
		}
		usleep(1000 + (round % 7) * 3000);
		ASSERT_EQ(0, pool_free(self->fd, a.slice_id));
		done = POOL_WAIT(({
			int n = 0;

			for (i = 0; i < RACERS; i++)
				n += !!__atomic_load_n(&r[i].sig,
						       __ATOMIC_ACQUIRE);
			n == RACERS;
		}), 10000);
		EXPECT_TRUE(done) TH_LOG("round %d: a thread still reads", round);
		/*
		 * A racer's own MADV_DONTNEED may hold a page a moment (its
		 * zap frees after the TLB flush): quarantine for a tick. An
		 * entry left mapped holds it until the munmap below.
		 */
		EXPECT_TRUE(POOL_WAIT(!pool_query(self->fd, &q2) &&
				      q2.quarantined_bytes == q1.quarantined_bytes &&
				      q2.free_bytes == q1.free_bytes + a.length,
				      5000))
			TH_LOG("round %d: the chunk is still referenced", round);
		/* Stragglers, if any, end on SIGSEGV. */
		EXPECT_EQ(0, munmap(p, a.length));
		for (i = 0; i < RACERS; i++) {
			pthread_join(r[i].th, NULL);
			EXPECT_EQ(SIGBUS, r[i].sig)
				TH_LOG("round %d: thread %d", round, i);
		}
	}
	sigaction(SIGBUS, &old_bus, NULL);
	sigaction(SIGSEGV, &old_segv, NULL);
}

TEST_HARNESS_MAIN
