// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * cgroup v2 pool quotas (issue 33, kmod/quota.c), set through the generic
 * netlink family spoken raw (as netlink_test does). As root the test
 * mounts cgroup2 if needed and makes its own cgroups; children move
 * themselves into one, drop to nobody with RLIMIT_MEMLOCK 8 MiB (and a
 * per-user share of two chunks) and ALLOC one chunk at a time: each gets
 * exactly its quota, siblings each theirs, a parent's quota bounds the
 * sum of its children, quota_mode rlimit and both bring the tenant's
 * limits back, a charged cgroup removed by rmdir stays charged until its
 * memory is back, freed chunks a pipe pins stay charged (quarantined)
 * until it goes, a killed child's charge is gone right after waitpid(),
 * and unprivileged or malformed requests change nothing; a process in a
 * cgroup namespace lists only the quotas inside it, with paths from its
 * root; a path near PATH_MAX is listed whole to a reader that peeks with
 * 4 KiB; mrpoolctl quota and metrics agree with netlink; a fork child
 * of a process below a quota gets its copy of every slice the quota let
 * the parent hold, past RLIMIT_MEMLOCK.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop
#pragma GCC diagnostic ignored "-Wclobbered"

#include "ctl_util.h"
#include "genl_util.h"
#include "pool_util.h"
#include "uapi/mrpool_nl.h"

#define NOBODY		65534
#define NL_BUF		65536
#define CG_ROOT		"/sys/fs/cgroup"
#define CG_BASE		CG_ROOT "/mrpool_quota_test"
#define CG_REL		"/mrpool_quota_test"
#define MEMLOCK		(8 * MIB)	/* what a container has */
#define SHARE_CHUNKS	2		/* max_user_mb, in chunks */
#define QA		6		/* chunks: more than memlock and share */
#define QB		10
#define KILL_LOOPS	12

static struct nlattr *nl_find(struct nlmsghdr *h, int type)
{
	char *end = (char *)h + h->nlmsg_len;
	struct nlattr *a = (struct nlattr *)((char *)NLMSG_DATA(h) +
					     GENL_HDRLEN);

	for (; (char *)a + NLA_HDRLEN <= end && a->nla_len >= NLA_HDRLEN &&
	       (char *)a + a->nla_len <= end;
	     a = (struct nlattr *)((char *)a + NLA_ALIGN(a->nla_len)))
		if ((a->nla_type & NLA_TYPE_MASK) == type)
			return a;
	return NULL;
}

static uint64_t nl_u64(struct nlmsghdr *h, int type)
{
	struct nlattr *a = nl_find(h, type);
	uint64_t v = UINT64_MAX;

	if (a && a->nla_len == NLA_HDRLEN + 8)
		memcpy(&v, (char *)a + NLA_HDRLEN, 8);
	return v;
}

static void family_id(struct nlmsghdr *h, void *arg)
{
	struct nlattr *a = nl_find(h, CTRL_ATTR_FAMILY_ID);

	if (a)
		*(int *)arg = *(uint16_t *)((char *)a + NLA_HDRLEN);
}

static int nl_family(int fd)
{
	struct nl_req r;
	int id = -ENOENT;

	nl_init(&r, GENL_ID_CTRL, CTRL_CMD_GETFAMILY);
	nl_put_str(&r, CTRL_ATTR_FAMILY_NAME, MRPOOL_GENL_NAME);
	if (nl_talk_each(fd, &r, family_id, &id))
		return -ENOENT;
	return id;
}

/* A quota as QUOTA_GET lists it. */
struct quota_row {
	char path[256];
	uint64_t id;
	uint64_t limit;		/* UINT64_MAX: none */
	uint64_t usage;
	uint64_t quarantined;
	bool removed;
};

struct quota_list {
	int n;
	struct quota_row rows[64];
};

static void quota_collect(struct nlmsghdr *h, void *arg)
{
	struct quota_list *l = arg;
	struct quota_row *row;
	struct nlattr *a;

	if (l->n >= 64)
		return;
	row = &l->rows[l->n++];
	memset(row, 0, sizeof(*row));
	a = nl_find(h, MRPOOL_A_QUOTA_PATH);
	if (a)
		snprintf(row->path, sizeof(row->path), "%s",
			 (char *)a + NLA_HDRLEN);
	row->id = nl_u64(h, MRPOOL_A_QUOTA_CGROUP_ID);
	row->limit = nl_u64(h, MRPOOL_A_QUOTA_LIMIT_BYTES);
	row->usage = nl_u64(h, MRPOOL_A_QUOTA_USAGE_BYTES);
	row->quarantined = nl_u64(h, MRPOOL_A_QUOTA_QUARANTINED_BYTES);
	row->removed = nl_find(h, MRPOOL_A_QUOTA_REMOVED);
}

/* Every quota (a dump); -errno on failure. */
static int quota_dump(int fd, int family, struct quota_list *l)
{
	struct nl_req r;

	l->n = 0;
	nl_init(&r, family, MRPOOL_CMD_QUOTA_GET);
	r.n.nlmsg_flags |= NLM_F_DUMP;
	return nl_talk_each(fd, &r, quota_collect, l);
}

/* The listed quota of cgroup @id, or NULL. */
static struct quota_row *quota_find(struct quota_list *l, uint64_t id)
{
	int i;

	for (i = 0; i < l->n; i++)
		if (l->rows[i].id == id)
			return &l->rows[i];
	return NULL;
}

static int quota_set(int fd, int family, const char *rel, uint64_t limit)
{
	struct nl_req r;

	nl_init(&r, family, MRPOOL_CMD_QUOTA_SET);
	nl_put_str(&r, MRPOOL_A_QUOTA_PATH, rel);
	nl_put_u64(&r, MRPOOL_A_QUOTA_LIMIT_BYTES, limit);
	return nl_talk_each(fd, &r, NULL, NULL);
}

static int quota_del(int fd, int family, const char *rel)
{
	struct nl_req r;

	nl_init(&r, family, MRPOOL_CMD_QUOTA_DEL);
	nl_put_str(&r, MRPOOL_A_QUOTA_PATH, rel);
	return nl_talk_each(fd, &r, NULL, NULL);
}

/* One quota by path: its usage in bytes, or -errno. */
static long long quota_usage(int fd, int family, const char *rel)
{
	struct quota_list l = { 0 };
	struct nl_req r;
	int ret;

	nl_init(&r, family, MRPOOL_CMD_QUOTA_GET);
	nl_put_str(&r, MRPOOL_A_QUOTA_PATH, rel);
	ret = nl_talk_each(fd, &r, quota_collect, &l);
	if (ret)
		return ret;
	return l.n == 1 ? (long long)l.rows[0].usage : -EPROTO;
}

static uint64_t cg_id(const char *dir)
{
	struct stat st;

	return stat(dir, &st) ? 0 : st.st_ino;
}

static int cg_move(const char *dir, pid_t pid)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	return pool_write_ll(path, pid);
}

/* What a child got: chunks allocated and the errno that stopped it. */
struct child_report {
	int got;
	int err;	/* 0, a negative errno, or a positive setup step */
};

/*
 * A child's start: move into @dir, become nobody with RLIMIT_MEMLOCK
 * MEMLOCK, open the pool. The descriptor, or -1 with rep->err the step
 * that failed (1 the move, 2 the limit or the ids, 3 the open).
 */
static int child_enter(const char *dir, struct child_report *rep)
{
	struct rlimit rl = { MEMLOCK, MEMLOCK };
	int fd;

	if (cg_move(dir, getpid())) {
		rep->err = 1;
		return -1;
	}
	if (setrlimit(RLIMIT_MEMLOCK, &rl) || setgroups(0, NULL) ||
	    setgid(NOBODY) || setuid(NOBODY)) {
		rep->err = 2;
		return -1;
	}
	fd = pool_open();
	if (fd < 0)
		rep->err = 3;
	return fd;
}

/*
 * Move into @dir, become nobody with RLIMIT_MEMLOCK MEMLOCK and ALLOC
 * one chunk at a time, at most @max; report, then exit (@hold: wait for
 * SIGKILL, mapping and touching what it got).
 */
static void quota_child(const char *dir, uint64_t chunk, int max, int out,
			bool hold)
{
	struct child_report rep = { 0 };
	struct mrpool_alloc a;
	int fd, ret;
	void *p;

	fd = child_enter(dir, &rep);
	while (!rep.err && rep.got < max) {
		ret = pool_alloc(fd, chunk, &a);
		if (ret) {
			rep.err = ret;
			break;
		}
		rep.got++;
		if (hold) {
			p = pool_map(fd, &a);
			if (p == MAP_FAILED) {
				rep.err = 4;
				break;
			}
			memset(p, 0x5a, chunk);
		}
	}
	if (write(out, &rep, sizeof(rep)) != sizeof(rep))
		_exit(9);
	if (!hold)
		_exit(0);
	for (;;)
		pause();
}

/* Fork a quota_child; its pid, and its report in *@rep. */
static pid_t spawn(const char *dir, uint64_t chunk, int max, bool hold,
		   struct child_report *rep)
{
	int res[2];
	pid_t pid;

	rep->got = -1;
	rep->err = 10;
	if (pipe2(res, O_CLOEXEC))
		return -1;
	pid = fork();
	if (pid == 0) {
		close(res[0]);
		quota_child(dir, chunk, max, res[1], hold);
	}
	close(res[1]);
	if (pid > 0 && read(res[0], rep, sizeof(*rep)) != sizeof(*rep))
		rep->err = 11;
	close(res[0]);
	return pid;
}

static int reap(pid_t pid)
{
	int st;

	kill(pid, SIGKILL);
	return waitpid(pid, &st, 0) == pid ? 0 : -1;
}

/*
 * As quota_child, but each chunk is mapped, one page of it vmsplice()d
 * into a pipe kept open, unmapped and freed: it stays in quarantine
 * until the pipes go with the process.
 */
static void splice_child(const char *dir, uint64_t chunk, int max, int out)
{
	struct child_report rep = { 0 };
	struct mrpool_alloc a;
	struct iovec iov;
	int fd, ret, pfd[2];
	void *p;

	fd = child_enter(dir, &rep);
	while (!rep.err && rep.got < max) {
		ret = pool_alloc(fd, chunk, &a);
		if (ret) {
			rep.err = ret;
			break;
		}
		rep.got++;
		p = pool_map(fd, &a);
		if (p == MAP_FAILED || pipe(pfd)) {
			rep.err = 4;
			break;
		}
		memset(p, 0x5a, 4096);
		iov.iov_base = p;
		iov.iov_len = 4096;
		if (vmsplice(pfd[1], &iov, 1, 0) != 4096 ||
		    munmap(p, a.length) || pool_free(fd, a.slice_id)) {
			rep.err = 5;
			break;
		}
	}
	if (write(out, &rep, sizeof(rep)) != sizeof(rep))
		_exit(9);
	for (;;)
		pause();
}

FIXTURE(quota) {
	int fd;
	struct mrpool_query q0;
	int nl;
	int family;
	uint64_t chunk;
	long long user_mb;
	char mode[32];
	char a[128], b[128];		/* CG_BASE/a, CG_BASE/b */
};

FIXTURE_SETUP(quota)
{
	self->nl = -1;
	POOL_SETUP_OPEN();
	self->chunk = self->q0.chunk_size;
	self->user_mb = pool_param("max_user_mb");
	pool_param_str("quota_mode", self->mode, sizeof(self->mode));
	if (!self->mode[0])
		POOL_SETUP_SKIP("mrpool.ko has no quota_mode");
	ASSERT_EQ(0, getuid());
	ASSERT_LE((QA + QB + 2) * self->chunk,
		  (uint64_t)pool_param("max_mb") * MIB);
	if (access(CG_ROOT "/cgroup.controllers", F_OK))
		ASSERT_EQ(0, mount("cgroup2", CG_ROOT, "cgroup2", 0, NULL));
	rmdir(CG_BASE "/a");
	rmdir(CG_BASE "/b");
	rmdir(CG_BASE);
	ASSERT_EQ(0, mkdir(CG_BASE, 0755));
	snprintf(self->a, sizeof(self->a), CG_BASE "/a");
	snprintf(self->b, sizeof(self->b), CG_BASE "/b");
	ASSERT_EQ(0, mkdir(self->a, 0755));
	ASSERT_EQ(0, mkdir(self->b, 0755));
	self->nl = nl_open();
	ASSERT_LE(0, self->nl);
	self->family = nl_family(self->nl);
	ASSERT_LT(0, self->family);
	ASSERT_EQ(0, pool_write_str(POOL_PARAMS "/quota_mode", "quota"));
	ASSERT_EQ(0, pool_set_param("max_user_mb",
				    SHARE_CHUNKS * self->chunk / MIB));
}

FIXTURE_TEARDOWN(quota)
{
	if (self->fd < 0)
		return;
	if (self->nl >= 0) {
		quota_del(self->nl, self->family, CG_REL "/a");
		quota_del(self->nl, self->family, CG_REL "/b");
		quota_del(self->nl, self->family, CG_REL);
		close(self->nl);
	}
	rmdir(CG_BASE "/a");
	rmdir(CG_BASE "/b");
	rmdir(CG_BASE);
	if (self->mode[0])
		pool_write_str(POOL_PARAMS "/quota_mode", self->mode);
	pool_set_param("max_user_mb", self->user_mb);
	close(self->fd);
}

/* A child gets exactly its quota; killed, its charge is 0 at waitpid(). */
TEST_F(quota, child_gets_exactly_its_quota)
{
	struct child_report rep;
	unsigned int i, late = 0;
	long long usage;
	pid_t pid;

	ASSERT_EQ(0, quota_set(self->nl, self->family, CG_REL "/a",
			       QA * self->chunk));
	for (i = 0; i < KILL_LOOPS; i++) {
		pid = spawn(self->a, self->chunk, QA + 1, true, &rep);
		ASSERT_LT(0, pid);
		EXPECT_EQ(QA, rep.got) TH_LOG("loop %u: err %d", i, rep.err);
		EXPECT_EQ(-EDQUOT, rep.err);
		usage = quota_usage(self->nl, self->family, CG_REL "/a");
		EXPECT_EQ((long long)(QA * self->chunk), usage);
		ASSERT_EQ(0, reap(pid));
		/* Reaped: the cgroup's charge is back. */
		usage = quota_usage(self->nl, self->family, CG_REL "/a");
		if (usage != 0 && !late++)
			TH_LOG("loop %u: %lld bytes charged after waitpid()",
			       i, usage);
	}
	EXPECT_EQ(0U, late);
}

/*
 * Freed chunks a pipe still pins stay charged to the quota, shown as
 * quarantined, and count against it; back to 0 once the pipes are gone.
 */
TEST_F(quota, quarantine_keeps_quota_charge)
{
	uint64_t ida = cg_id(self->a);
	struct child_report rep = { -1, 10 };
	struct quota_list l;
	struct quota_row *row;
	int res[2];
	pid_t pid;

	ASSERT_EQ(0, quota_set(self->nl, self->family, CG_REL "/a",
			       QA * self->chunk));
	ASSERT_EQ(0, pipe2(res, O_CLOEXEC));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		close(res[0]);
		splice_child(self->a, self->chunk, QA + 1, res[1]);
	}
	close(res[1]);
	if (read(res[0], &rep, sizeof(rep)) != sizeof(rep))
		rep.err = 11;
	close(res[0]);
	EXPECT_EQ(QA, rep.got);
	EXPECT_EQ(-EDQUOT, rep.err);
	ASSERT_EQ(0, quota_dump(self->nl, self->family, &l));
	row = quota_find(&l, ida);
	ASSERT_NE(NULL, row);
	EXPECT_EQ(QA * self->chunk, row->usage);
	EXPECT_EQ(QA * self->chunk, row->quarantined);
	ASSERT_EQ(0, reap(pid));
	/* The pipes went with the child: quarantine lets go. */
	EXPECT_TRUE(POOL_WAIT(!quota_dump(self->nl, self->family, &l) &&
			      (row = quota_find(&l, ida)) && !row->usage &&
			      !row->quarantined, 20000));
}

/* Two sibling cgroups with different quotas each get theirs. */
TEST_F(quota, siblings_each_get_theirs)
{
	struct child_report ra, rb;
	pid_t pa, pb;

	ASSERT_EQ(0, quota_set(self->nl, self->family, CG_REL "/a",
			       QA * self->chunk));
	ASSERT_EQ(0, quota_set(self->nl, self->family, CG_REL "/b",
			       QB * self->chunk));
	pa = spawn(self->a, self->chunk, QB + 1, true, &ra);
	pb = spawn(self->b, self->chunk, QB + 1, true, &rb);
	ASSERT_LT(0, pa);
	ASSERT_LT(0, pb);
	EXPECT_EQ(QA, ra.got);
	EXPECT_EQ(-EDQUOT, ra.err);
	EXPECT_EQ(QB, rb.got);
	EXPECT_EQ(-EDQUOT, rb.err);
	EXPECT_EQ((long long)(QA * self->chunk),
		  quota_usage(self->nl, self->family, CG_REL "/a"));
	EXPECT_EQ((long long)(QB * self->chunk),
		  quota_usage(self->nl, self->family, CG_REL "/b"));
	ASSERT_EQ(0, reap(pa));
	ASSERT_EQ(0, reap(pb));
	EXPECT_EQ(0, quota_usage(self->nl, self->family, CG_REL "/a"));
	EXPECT_EQ(0, quota_usage(self->nl, self->family, CG_REL "/b"));
}

/* A parent's quota bounds the sum of its children's. */
TEST_F(quota, parent_bounds_children)
{
	struct child_report ra, rb;
	pid_t pa, pb;

	ASSERT_EQ(0, quota_set(self->nl, self->family, CG_REL, 8 * self->chunk));
	ASSERT_EQ(0, quota_set(self->nl, self->family, CG_REL "/a",
			       QA * self->chunk));
	ASSERT_EQ(0, quota_set(self->nl, self->family, CG_REL "/b",
			       QA * self->chunk));
	pa = spawn(self->a, self->chunk, QA + 1, true, &ra);
	ASSERT_LT(0, pa);
	EXPECT_EQ(QA, ra.got);
	EXPECT_EQ(-EDQUOT, ra.err);
	/* b's own quota has room; the parent's has 2 chunks left. */
	pb = spawn(self->b, self->chunk, QA + 1, true, &rb);
	ASSERT_LT(0, pb);
	EXPECT_EQ(2, rb.got);
	EXPECT_EQ(-EDQUOT, rb.err);
	EXPECT_EQ((long long)(8 * self->chunk),
		  quota_usage(self->nl, self->family, CG_REL));
	EXPECT_EQ((long long)(2 * self->chunk),
		  quota_usage(self->nl, self->family, CG_REL "/b"));
	ASSERT_EQ(0, reap(pa));
	EXPECT_EQ((long long)(2 * self->chunk),
		  quota_usage(self->nl, self->family, CG_REL));
	ASSERT_EQ(0, reap(pb));
	EXPECT_EQ(0, quota_usage(self->nl, self->family, CG_REL));
}

/* quota_mode rlimit and both bring RLIMIT_MEMLOCK back. */
TEST_F(quota, rlimit_and_both_modes)
{
	uint64_t memlock_chunks = MEMLOCK / self->chunk;
	struct child_report rep;
	pid_t pid;

	/* The share out of the way: RLIMIT_MEMLOCK is the tenant's limit. */
	ASSERT_EQ(0, pool_set_param("max_user_mb", pool_param("max_mb")));
	ASSERT_EQ(0, quota_set(self->nl, self->family, CG_REL "/a",
			       QA * self->chunk));

	ASSERT_EQ(0, pool_write_str(POOL_PARAMS "/quota_mode", "rlimit"));
	pid = spawn(self->a, self->chunk, QA + 1, true, &rep);
	ASSERT_LT(0, pid);
	EXPECT_EQ((int)memlock_chunks, rep.got);
	EXPECT_EQ(-ENOMEM, rep.err);
	/* Counted in every mode. */
	EXPECT_EQ((long long)(memlock_chunks * self->chunk),
		  quota_usage(self->nl, self->family, CG_REL "/a"));
	ASSERT_EQ(0, reap(pid));

	/* both: the lower of the two, with its errno. */
	ASSERT_EQ(0, pool_write_str(POOL_PARAMS "/quota_mode", "both"));
	pid = spawn(self->a, self->chunk, QA + 1, true, &rep);
	ASSERT_LT(0, pid);
	EXPECT_EQ((int)memlock_chunks, rep.got);
	EXPECT_EQ(-ENOMEM, rep.err);
	ASSERT_EQ(0, reap(pid));
	ASSERT_EQ(0, quota_set(self->nl, self->family, CG_REL "/a",
			       (memlock_chunks - 1) * self->chunk));
	pid = spawn(self->a, self->chunk, QA + 1, true, &rep);
	ASSERT_LT(0, pid);
	EXPECT_EQ((int)memlock_chunks - 1, rep.got);
	EXPECT_EQ(-EDQUOT, rep.err);
	ASSERT_EQ(0, reap(pid));

	/* quota: the quota alone, past memlock. */
	ASSERT_EQ(0, pool_write_str(POOL_PARAMS "/quota_mode", "quota"));
	ASSERT_EQ(0, quota_set(self->nl, self->family, CG_REL "/a",
			       QA * self->chunk));
	pid = spawn(self->a, self->chunk, QA + 1, true, &rep);
	ASSERT_LT(0, pid);
	EXPECT_EQ(QA, rep.got);
	EXPECT_EQ(-EDQUOT, rep.err);
	ASSERT_EQ(0, reap(pid));

	/* No quota covers b: the tenant's limits, unchanged. */
	pid = spawn(self->b, self->chunk, QA + 1, true, &rep);
	ASSERT_LT(0, pid);
	EXPECT_EQ((int)memlock_chunks, rep.got);
	EXPECT_EQ(-ENOMEM, rep.err);
	ASSERT_EQ(0, reap(pid));
	/* Bad modes refused. */
	EXPECT_NE(0, pool_write_str(POOL_PARAMS "/quota_mode", "none"));
}

/*
 * Move into @dir as a container's process (child_enter()), ALLOC @n
 * chunks as MRPOOL_ALLOC_FORK_COPY slices, write each, map the last
 * @extra more times, fork: the child reads each slice's first and last
 * byte and writes its copy (a copy not made is SIGBUS, the child's
 * status says), the parent's bytes stay; with @extra the child exits at
 * once (which of its mappings got no copy is the fork's order).
 * Return: 0, the child's exit status or 128 + its signal, else a step.
 */
static int fork_copy_child(const char *dir, uint64_t chunk, int n, int extra)
{
	struct child_report rep = { 0 };
	volatile uint8_t *p[QA];
	struct mrpool_alloc a;
	int fd, i, st;
	pid_t pid;

	fd = child_enter(dir, &rep);
	if (fd < 0 || n > QA)
		return 100 + rep.err;
	for (i = 0; i < n; i++) {
		memset(&a, 0, sizeof(a));
		a.size = sizeof(a);
		a.bytes = chunk;
		a.node = MRPOOL_NODE_ANY;
		a.flags = MRPOOL_ALLOC_FORK_COPY;
		if (pool_ioctl(fd, MRPOOL_IOC_ALLOC, &a))
			return 110;
		p[i] = pool_map(fd, &a);
		if (p[i] == MAP_FAILED)
			return 111;
		memset((void *)p[i], 0x40 + i, chunk);
	}
	for (i = 0; i < extra; i++)
		if (pool_map(fd, &a) == MAP_FAILED)
			return 115;
	pid = fork();
	if (pid < 0)
		return 112;
	if (!pid) {
		if (extra)
			_exit(0);
		for (i = 0; i < n; i++) {
			if (p[i][0] != 0x40 + i || p[i][chunk - 1] != 0x40 + i)
				_exit(20 + i);
			p[i][0] = 0x70;
			p[i][chunk - 1] = 0x70;
		}
		_exit(pool_vmpin_kb() == 0 ? 0 : 30);
	}
	if (waitpid(pid, &st, 0) != pid)
		return 113;
	for (i = 0; i < n; i++)
		if (p[i][0] != 0x40 + i || p[i][chunk - 1] != 0x40 + i)
			return 114;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/*
 * A fork child's copy of its parent's slices (forkcopy.c) is admitted by
 * the rule that admitted the slices: below a quota (quota_mode quota) a
 * container's process whose quota let it hold more than its 8 MiB of
 * RLIMIT_MEMLOCK forks a child that reads and writes all of it (main's
 * module charged the copies to RLIMIT_MEMLOCK: the child got SIGBUS, as
 * Python multiprocessing's workers did under mrpool-run in a container),
 * not counted in the child's VmPin (its own registrations keep their
 * RLIMIT_MEMLOCK), yet held per child to the quota's limit: a parent
 * mapping a slice again cannot make more. Without a quota (b) RLIMIT_MEMLOCK
 * still bounds the parent and so the copies: what pool_tenant_test's
 * fork_copy_limit_per_child checks per child.
 */
TEST_F(quota, fork_copy_under_quota)
{
	long long copies = pool_attr("stats/fork_copies");
	long long fails = pool_attr("stats/fork_copy_failures");
	int n = MEMLOCK / self->chunk + 1, st;
	pid_t pid;

	ASSERT_TRUE(self->q0.features & MRPOOL_FEATURE_FORK_COPY);
	ASSERT_LE(n, QA);
	/* The share out of the way, as for a container of a shared uid. */
	ASSERT_EQ(0, pool_set_param("max_user_mb", pool_param("max_mb")));
	ASSERT_EQ(0, quota_set(self->nl, self->family, CG_REL "/a",
			       QA * self->chunk));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		_exit(fork_copy_child(self->a, self->chunk, n, 0));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
		TH_LOG("status %#x (a child's 135: SIGBUS, copies refused)", st);
	EXPECT_EQ(copies + n, pool_attr("stats/fork_copies"));
	EXPECT_EQ(fails, pool_attr("stats/fork_copy_failures"));
	EXPECT_TRUE(POOL_WAIT(quota_usage(self->nl, self->family,
					  CG_REL "/a") == 0, 20000));

	/*
	 * The quota holds each child's copies as RLIMIT_MEMLOCK did: a
	 * parent mapping its last slice twice more maps n + 2 chunks, one
	 * past the quota's QA, and its child gets QA copies and one refused
	 * (uncounted, the copies went past the quota: review of f988f5c).
	 */
	copies = pool_attr("stats/fork_copies");
	fails = pool_attr("stats/fork_copy_failures");
	ASSERT_EQ(QA + 1, n + 2);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		_exit(fork_copy_child(self->a, self->chunk, n, 2));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) TH_LOG("status %#x", st);
	EXPECT_EQ(copies + QA, pool_attr("stats/fork_copies"));
	EXPECT_EQ(fails + 1, pool_attr("stats/fork_copy_failures"));
	EXPECT_TRUE(POOL_WAIT(quota_usage(self->nl, self->family,
					  CG_REL "/a") == 0, 20000));
}

/*
 * A cgroup removed while charged stays charged (listed as removed) until
 * the memory is back; a deleted limit keeps its usage listed; the
 * uncharge finds the quotas charged although the process moved.
 */
TEST_F(quota, rmdir_keeps_charge)
{
	uint64_t ida = cg_id(self->a), idb = cg_id(CG_BASE);
	struct quota_list l;
	struct quota_row *row;
	struct child_report rep;
	pid_t pid;

	ASSERT_NE(0ULL, ida);
	ASSERT_EQ(0, quota_set(self->nl, self->family, CG_REL, 8 * self->chunk));
	ASSERT_EQ(0, quota_set(self->nl, self->family, CG_REL "/a",
			       QA * self->chunk));
	pid = spawn(self->a, self->chunk, 3, true, &rep);
	ASSERT_LT(0, pid);
	ASSERT_EQ(3, rep.got);
	ASSERT_EQ(0, rep.err);
	/* Out of a, then a is removed. */
	ASSERT_EQ(0, cg_move(CG_BASE, pid));
	ASSERT_EQ(0, rmdir(self->a));
	ASSERT_EQ(0, quota_dump(self->nl, self->family, &l));
	row = quota_find(&l, ida);
	ASSERT_NE(NULL, row);
	EXPECT_TRUE(row->removed);
	EXPECT_EQ(3 * self->chunk, row->usage);
	EXPECT_EQ(QA * self->chunk, row->limit);
	/* The parent's limit deleted: its usage stays listed. */
	ASSERT_EQ(0, quota_del(self->nl, self->family, CG_REL));
	ASSERT_EQ(-ENOENT, quota_del(self->nl, self->family, CG_REL));
	ASSERT_EQ(0, quota_dump(self->nl, self->family, &l));
	row = quota_find(&l, idb);
	ASSERT_NE(NULL, row);
	EXPECT_FALSE(row->removed);
	EXPECT_EQ(UINT64_MAX, row->limit);
	EXPECT_EQ(3 * self->chunk, row->usage);
	/* The memory back: both gone. */
	ASSERT_EQ(0, reap(pid));
	ASSERT_EQ(0, quota_dump(self->nl, self->family, &l));
	EXPECT_EQ(NULL, quota_find(&l, ida));
	EXPECT_EQ(NULL, quota_find(&l, idb));
	ASSERT_EQ(0, mkdir(self->a, 0755));
}

/* Unprivileged QUOTA_SET and QUOTA_DEL: -EPERM, nothing changed. */
TEST_F(quota, unprivileged_set_refused)
{
	struct quota_list l;
	struct quota_row *row;
	int status, fam = self->family;
	pid_t pid;

	ASSERT_EQ(0, quota_set(self->nl, fam, CG_REL "/a", QA * self->chunk));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int fd, e1, e2, e3;

		if (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY))
			_exit(1);
		fd = nl_open();
		if (fd < 0)
			_exit(2);
		e1 = quota_set(fd, fam, CG_REL "/a", 100 * self->chunk);
		e2 = quota_del(fd, fam, CG_REL "/a");
		e3 = quota_set(fd, fam, CG_REL "/b", self->chunk);
		/* GET needs no privilege. */
		if (quota_usage(fd, fam, CG_REL "/a") != 0)
			_exit(3);
		_exit(e1 == -EPERM && e2 == -EPERM && e3 == -EPERM ? 0 : 4);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
		TH_LOG("child status %#x", status);
	ASSERT_EQ(0, quota_dump(self->nl, fam, &l));
	row = quota_find(&l, cg_id(self->a));
	ASSERT_NE(NULL, row);
	EXPECT_EQ(QA * self->chunk, row->limit);
	EXPECT_EQ(NULL, quota_find(&l, cg_id(self->b)));
}

/*
 * A container's view: a child in CG_BASE/a with a cgroup namespace of its
 * own, then nobody, lists a's quota alone, as "/" (its namespace's root),
 * never its sibling b's nor any path of the host's tree; root still lists
 * both with their full paths.
 */
TEST_F(quota, cgroup_namespace_listing)
{
	struct quota_list l;
	struct quota_row *row;
	int status, fam = self->family;
	uint64_t ida = cg_id(self->a), idb = cg_id(self->b);
	pid_t pid;

	ASSERT_EQ(0, quota_set(self->nl, fam, CG_REL "/a", QA * self->chunk));
	ASSERT_EQ(0, quota_set(self->nl, fam, CG_REL "/b", QB * self->chunk));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int fd;

		if (cg_move(self->a, getpid()))
			_exit(1);
		if (unshare(CLONE_NEWCGROUP))
			_exit(2);
		if (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY))
			_exit(3);
		fd = nl_open();
		if (fd < 0 || quota_dump(fd, fam, &l))
			_exit(4);
		if (l.n != 1 || l.rows[0].id != ida)
			_exit(5);
		if (strcmp(l.rows[0].path, "/"))
			_exit(6);
		if (quota_find(&l, idb))
			_exit(7);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
		TH_LOG("child status %#x", status);
	ASSERT_EQ(0, quota_dump(self->nl, fam, &l));
	row = quota_find(&l, ida);
	ASSERT_NE(NULL, row);
	EXPECT_STREQ(CG_REL "/a", row->path);
	row = quota_find(&l, idb);
	ASSERT_NE(NULL, row);
	EXPECT_STREQ(CG_REL "/b", row->path);
}

/*
 * Dump @family's quotas as a reader that sizes its buffer by a peek
 * (MSG_PEEK | MSG_TRUNC into 4 KiB, as libnl did): the length of the
 * path of quota @id into *@len; 0, or -errno (the dump's own error).
 */
static int quota_peek_dump(int fd, int family, uint64_t id, size_t *len)
{
	static char small[4096];
	struct nlmsghdr *h;
	struct nlattr *a;
	struct nl_req r;
	char *buf;
	ssize_t n;

	*len = 0;
	nl_init(&r, family, MRPOOL_CMD_QUOTA_GET);
	r.n.nlmsg_flags |= NLM_F_DUMP;
	if (send(fd, &r, r.n.nlmsg_len, 0) < 0)
		return -errno;
	for (;;) {
		n = recv(fd, small, sizeof(small), MSG_PEEK | MSG_TRUNC);
		if (n <= 0)
			return n ? -errno : -EPROTO;
		buf = malloc(n);
		if (!buf || recv(fd, buf, n, 0) != n) {
			free(buf);
			return -EIO;
		}
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
		     h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_ERROR ||
			    h->nlmsg_type == NLMSG_DONE) {
				int err = *(int *)NLMSG_DATA(h);

				if (h->nlmsg_type == NLMSG_ERROR)
					err = ((struct nlmsgerr *)NLMSG_DATA(h))->error;
				free(buf);
				return err;
			}
			a = nl_find(h, MRPOOL_A_QUOTA_PATH);
			if (nl_u64(h, MRPOOL_A_QUOTA_CGROUP_ID) == id && a)
				*len = strnlen((char *)a + NLA_HDRLEN,
					       a->nla_len - NLA_HDRLEN);
		}
		free(buf);
	}
}

#define LONG_NAME	200	/* characters per level of the long path */
#define LONG_PATH	4080	/* under PATH_MAX - 1, what SET accepts */

/*
 * A quota on a cgroup whose path is nearly PATH_MAX long is listed whole
 * in a dump, to a reader whose first buffer is 4 KiB: each part of the
 * dump has room for the longest path (not an error on an empty part).
 */
TEST_F(quota, long_path_listed)
{
	char path[PATH_MAX], name[LONG_NAME + 1];
	size_t base = strlen(CG_ROOT), got;
	int levels = 0, ret;
	uint64_t id;

	/* LONG_PATH from the cgroup2 root: its message is over 4 KiB. */
	snprintf(path, sizeof(path), "%s", self->b);
	while (strlen(path) - base < LONG_PATH) {
		size_t left = LONG_PATH - (strlen(path) - base) - 1;
		size_t n = left > LONG_NAME ? LONG_NAME : left;

		memset(name, 'p', n);
		name[n] = '\0';
		strcat(path, "/");
		strcat(path, name);
		ASSERT_EQ(0, mkdir(path, 0755)) TH_LOG("mkdir level %d", levels);
		levels++;
	}
	ASSERT_EQ(LONG_PATH, strlen(path) - base);
	id = cg_id(path);
	ASSERT_NE(0, id);
	ASSERT_EQ(0, quota_set(self->nl, self->family, path + base,
			       QA * self->chunk));
	ret = quota_peek_dump(self->nl, self->family, id, &got);
	EXPECT_EQ(0, ret);
	EXPECT_EQ(strlen(path) - base, got);
	EXPECT_EQ(0, quota_del(self->nl, self->family, path + base));
	for (; levels > 0; levels--) {
		EXPECT_EQ(0, rmdir(path));
		*strrchr(path, '/') = '\0';
	}
}

/* Malformed requests: an errno each, the table unchanged. */
TEST_F(quota, malformed_requests_refused)
{
	uint64_t ida = cg_id(self->a), limit = QA * self->chunk;
	struct quota_list before, after;
	int fam = self->family, i;
	struct nl_req r;

	ASSERT_EQ(0, quota_set(self->nl, fam, CG_REL "/a", limit));
	ASSERT_EQ(0, quota_dump(self->nl, fam, &before));
	ASSERT_NE(NULL, quota_find(&before, ida));

	/* No such cgroup. */
	EXPECT_EQ(-ENOENT, quota_set(self->nl, fam, CG_REL "/nonexistent",
				     limit));
	/* A file, not a directory. */
	EXPECT_NE(0, quota_set(self->nl, fam, CG_REL "/a/cgroup.procs",
			       limit));
	/* No limit. */
	nl_init(&r, fam, MRPOOL_CMD_QUOTA_SET);
	nl_put_str(&r, MRPOOL_A_QUOTA_PATH, CG_REL "/b");
	EXPECT_EQ(-EINVAL, nl_talk_each(self->nl, &r, NULL, NULL));
	/* No cgroup. */
	nl_init(&r, fam, MRPOOL_CMD_QUOTA_SET);
	nl_put_u64(&r, MRPOOL_A_QUOTA_LIMIT_BYTES, limit);
	EXPECT_EQ(-EINVAL, nl_talk_each(self->nl, &r, NULL, NULL));
	/* Path and id both. */
	nl_init(&r, fam, MRPOOL_CMD_QUOTA_SET);
	nl_put_str(&r, MRPOOL_A_QUOTA_PATH, CG_REL "/b");
	nl_put_u64(&r, MRPOOL_A_QUOTA_CGROUP_ID, cg_id(self->b));
	nl_put_u64(&r, MRPOOL_A_QUOTA_LIMIT_BYTES, limit);
	EXPECT_EQ(-EINVAL, nl_talk_each(self->nl, &r, NULL, NULL));
	/* An absurd size. */
	EXPECT_EQ(-ERANGE, quota_set(self->nl, fam, CG_REL "/b", 1ULL << 60));
	EXPECT_EQ(-ERANGE, quota_set(self->nl, fam, CG_REL "/a",
				     MRPOOL_QUOTA_MAX_BYTES + 1));
	/* A limit of the wrong size. */
	nl_init(&r, fam, MRPOOL_CMD_QUOTA_SET);
	nl_put_str(&r, MRPOOL_A_QUOTA_PATH, CG_REL "/b");
	nl_put(&r, MRPOOL_A_QUOTA_LIMIT_BYTES, &fam, 4);
	EXPECT_EQ(-EINVAL, nl_talk_each(self->nl, &r, NULL, NULL));
	/* The path without its NUL. */
	nl_init(&r, fam, MRPOOL_CMD_QUOTA_SET);
	nl_put(&r, MRPOOL_A_QUOTA_PATH, CG_REL, strlen(CG_REL));
	nl_put_u64(&r, MRPOOL_A_QUOTA_LIMIT_BYTES, limit);
	EXPECT_EQ(-EINVAL, nl_talk_each(self->nl, &r, NULL, NULL));
	/* A reply-only attribute, and one the family does not have. */
	nl_init(&r, fam, MRPOOL_CMD_QUOTA_SET);
	nl_put_str(&r, MRPOOL_A_QUOTA_PATH, CG_REL "/b");
	nl_put_u64(&r, MRPOOL_A_QUOTA_LIMIT_BYTES, limit);
	nl_put_u64(&r, MRPOOL_A_QUOTA_USAGE_BYTES, 0);
	EXPECT_EQ(-EINVAL, nl_talk_each(self->nl, &r, NULL, NULL));
	nl_init(&r, fam, MRPOOL_CMD_QUOTA_SET);
	nl_put_str(&r, MRPOOL_A_QUOTA_PATH, CG_REL "/b");
	nl_put_u64(&r, MRPOOL_A_QUOTA_LIMIT_BYTES, limit);
	nl_put_u64(&r, MRPOOL_A_MAX + 5, 0);
	EXPECT_EQ(-EINVAL, nl_talk_each(self->nl, &r, NULL, NULL));
	/* DEL of a cgroup without a quota; GET of one. */
	EXPECT_EQ(-ENOENT, quota_del(self->nl, fam, CG_REL "/b"));
	EXPECT_EQ(-ENOENT, quota_usage(self->nl, fam, CG_REL "/b"));
	/* By id: the same quota as by path. */
	nl_init(&r, fam, MRPOOL_CMD_QUOTA_SET);
	nl_put_u64(&r, MRPOOL_A_QUOTA_CGROUP_ID, ida);
	nl_put_u64(&r, MRPOOL_A_QUOTA_LIMIT_BYTES, limit);
	EXPECT_EQ(0, nl_talk_each(self->nl, &r, NULL, NULL));
	nl_init(&r, fam, MRPOOL_CMD_QUOTA_SET);
	nl_put_u64(&r, MRPOOL_A_QUOTA_CGROUP_ID, ~0ULL);
	nl_put_u64(&r, MRPOOL_A_QUOTA_LIMIT_BYTES, limit);
	EXPECT_EQ(-ENOENT, nl_talk_each(self->nl, &r, NULL, NULL));

	ASSERT_EQ(0, quota_dump(self->nl, fam, &after));
	ASSERT_EQ(before.n, after.n);
	for (i = 0; i < before.n; i++) {
		EXPECT_EQ(before.rows[i].id, after.rows[i].id);
		EXPECT_EQ(before.rows[i].limit, after.rows[i].limit);
		EXPECT_EQ(before.rows[i].usage, after.rows[i].usage);
	}
}

/*
 * mrpoolctl quota set (with a /sys/fs/cgroup path and a size suffix),
 * list, list --json, del, and metrics' per-quota samples agree with
 * netlink; as nobody set is refused, a bad size is a usage error.
 */
TEST_F(quota, mrpoolctl_quota)
{
	uint64_t ida = cg_id(self->a), limit = QA * self->chunk;
	static char out[65536];
	struct child_report rep;
	struct quota_list l;
	struct quota_row *row;
	char args[256], want[256];
	int status;
	pid_t pid;

	if (!ctl_tool())
		POOL_SKIP("tools/mrpoolctl/mrpoolctl not built (run make)");
	snprintf(args, sizeof(args), "quota set %s %lluK", self->a,
		 (unsigned long long)(limit >> 10));
	ASSERT_EQ(0, ctl_run(args, false, out, sizeof(out)));
	ASSERT_EQ(0, quota_dump(self->nl, self->family, &l));
	row = quota_find(&l, ida);
	ASSERT_NE(NULL, row);
	EXPECT_EQ(limit, row->limit);
	EXPECT_STREQ(CG_REL "/a", row->path);

	pid = spawn(self->a, self->chunk, 2, true, &rep);
	ASSERT_LT(0, pid);
	ASSERT_EQ(2, rep.got);
	ASSERT_EQ(0, ctl_run("quota list", false, out, sizeof(out)));
	snprintf(want, sizeof(want), "%s %llu %llu %llu", CG_REL "/a",
		 (unsigned long long)ida, (unsigned long long)limit,
		 (unsigned long long)(2 * self->chunk));
	/* Columns are aligned: compare with runs of spaces squeezed. */
	{
		char *r = out, *w = out;

		for (; *r; r++)
			if (*r != ' ' || w == out || w[-1] != ' ')
				*w++ = *r;
		*w = '\0';
	}
	EXPECT_NE(NULL, strstr(out, want)) TH_LOG("list: %s", out);
	ASSERT_EQ(0, ctl_run("--json quota list", false, out, sizeof(out)));
	snprintf(want, sizeof(want),
		 "{\"path\":\"%s\",\"cgroup_id\":%llu,\"limit_bytes\":%llu,\"bytes\":%llu,",
		 CG_REL "/a", (unsigned long long)ida,
		 (unsigned long long)limit,
		 (unsigned long long)(2 * self->chunk));
	EXPECT_NE(NULL, strstr(out, want)) TH_LOG("json: %s", out);
	ASSERT_EQ(0, ctl_run("metrics", false, out, sizeof(out)));
	snprintf(want, sizeof(want),
		 "mrpool_quota_bytes{cgroup=\"%s\"} %llu\n", CG_REL "/a",
		 (unsigned long long)(2 * self->chunk));
	EXPECT_NE(NULL, strstr(out, want)) TH_LOG("metrics: %s", out);
	snprintf(want, sizeof(want),
		 "mrpool_quota_limit_bytes{cgroup=\"%s\"} %llu\n",
		 CG_REL "/a", (unsigned long long)limit);
	EXPECT_NE(NULL, strstr(out, want)) TH_LOG("metrics: %s", out);
	ASSERT_EQ(0, reap(pid));

	/* Usage errors, and a refusal as nobody: the quota unchanged. */
	snprintf(args, sizeof(args), "quota set %s 8X", self->a);
	EXPECT_EQ(2, ctl_run(args, false, out, sizeof(out)));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		if (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY))
			_exit(100);
		snprintf(args, sizeof(args), "quota set %s 1G", self->a);
		_exit(ctl_run(args, false, out, sizeof(out)));
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1)
		TH_LOG("status %#x", status);
	ASSERT_EQ(0, quota_dump(self->nl, self->family, &l));
	row = quota_find(&l, ida);
	ASSERT_NE(NULL, row);
	EXPECT_EQ(limit, row->limit);

	snprintf(args, sizeof(args), "quota del %s", CG_REL "/a");
	ASSERT_EQ(0, ctl_run(args, false, out, sizeof(out)));
	ASSERT_EQ(0, quota_dump(self->nl, self->family, &l));
	EXPECT_EQ(NULL, quota_find(&l, ida));
	EXPECT_EQ(1, ctl_run(args, false, out, sizeof(out)));
}

TEST_HARNESS_MAIN
