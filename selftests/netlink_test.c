// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The module's generic netlink family "mrpool" (include/uapi/mrpool_nl.h)
 * spoken raw, without libnl, so that requests libnl would never build can
 * be sent: GET answers with the values sysfs shows, as root and as
 * nobody (the family needs no privilege, as sysfs does not), a device
 * filter answers with that device or -ENODEV, and every malformed request
 * (unknown or reply-only attributes, a string without its NUL or too
 * long, an attribute running past the message, an unknown command, the
 * event command) is refused with an errno. GET, the sysfs totals and
 * QUERY, looped by threads of nobody, answer while an ALLOC sleeps
 * holding the pool lock and never hold up ALLOC/FREE cycles, their totals
 * adding up throughout, and blocks_per_order filling total_bytes, while
 * the pool grows, quarantines and defragments. TENANT_GET: root lists every
 * user's charge in uid order and the orphans, a user only its own, and a
 * user's charge is gone once its process is reaped. Events: a flood of failed
 * ALLOCs reaches listeners rate-limited, every one counted; a request
 * larger than max_mb is no event; lowering quarantine_event_pct under
 * what is quarantined is a QUARANTINE_HIGH event at once; an exiting
 * user's pins past the orphans' share are an ORPHANS_FULL event.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop
#pragma GCC diagnostic ignored "-Wclobbered"

#include "genl_util.h"
#include "ib_util.h"
#include "uapi/mrpool_nl.h"

#define NL_BUF		65536
#define NOBODY		65534

/* Where nl_talk() copies a data message. */
struct nl_reply {
	char *buf;
	size_t len;
};

static void nl_keep(struct nlmsghdr *h, void *arg)
{
	struct nl_reply *r = arg;

	if (r->buf && h->nlmsg_len <= r->len)
		memcpy(r->buf, h, h->nlmsg_len);
}

/*
 * Send @r, read until its ack. The last data message (if any) is copied
 * to @reply. Returns the ack's error: 0 or -errno; -ETIMEDOUT if none.
 */
static int nl_talk(int fd, struct nl_req *r, char *reply, size_t len)
{
	struct nl_reply keep = { reply, len };

	return nl_talk_each(fd, r, nl_keep, &keep);
}

/* The first attribute of @type in [@a, @end), or NULL. */
static struct nlattr *nl_find(struct nlattr *a, const char *end, int type)
{
	for (; (char *)a + NLA_HDRLEN <= end && a->nla_len >= NLA_HDRLEN &&
	       (char *)a + a->nla_len <= end;
	     a = (struct nlattr *)((char *)a + NLA_ALIGN(a->nla_len)))
		if ((a->nla_type & NLA_TYPE_MASK) == type)
			return a;
	return NULL;
}

static void *nl_data(struct nlattr *a)
{
	return (char *)a + NLA_HDRLEN;
}

static char *nl_end(struct nlattr *a)
{
	return (char *)a + a->nla_len;
}

/* Top-level attributes of a genl message. */
static struct nlattr *nl_attrs(char *msg)
{
	return (struct nlattr *)((char *)NLMSG_DATA(msg) + GENL_HDRLEN);
}

static char *nl_msg_end(char *msg)
{
	return msg + ((struct nlmsghdr *)msg)->nlmsg_len;
}

/* The family's id, and its events group's id in *@grp; -errno if none. */
static int nl_family(int fd, uint32_t *grp)
{
	static char reply[NL_BUF];
	struct nlattr *a, *g, *e;
	struct nl_req r;
	int ret;

	nl_init(&r, GENL_ID_CTRL, CTRL_CMD_GETFAMILY);
	nl_put(&r, CTRL_ATTR_FAMILY_NAME, MRPOOL_GENL_NAME,
	       sizeof(MRPOOL_GENL_NAME));
	ret = nl_talk(fd, &r, reply, sizeof(reply));
	if (ret)
		return ret;
	a = nl_find(nl_attrs(reply), nl_msg_end(reply), CTRL_ATTR_FAMILY_ID);
	if (!a)
		return -ENOENT;
	g = nl_find(nl_attrs(reply), nl_msg_end(reply), CTRL_ATTR_MCAST_GROUPS);
	*grp = 0;
	/* Each group: a nest of {name, id}; only "events" exists. */
	if (g && (e = nl_find(nl_data(g), nl_end(g), 1)) &&
	    (e = nl_find(nl_data(e), nl_end(e), CTRL_ATTR_MCAST_GRP_ID)))
		*grp = *(uint32_t *)nl_data(e);
	return *(uint16_t *)nl_data(a);
}

static uint64_t nl_u64(char *msg, int type)
{
	struct nlattr *a = nl_find(nl_attrs(msg), nl_msg_end(msg), type);
	uint64_t v = UINT64_MAX;

	if (a && a->nla_len == NLA_HDRLEN + 8)
		memcpy(&v, nl_data(a), 8);
	return v;
}

/* Devices of a GET reply: each name into @names, how many. */
static int nl_devices(char *msg, char names[][64], int max)
{
	struct nlattr *devs, *d, *name;
	int n = 0;

	devs = nl_find(nl_attrs(msg), nl_msg_end(msg), MRPOOL_A_DEVICES);
	if (!devs)
		return -1;
	for (d = nl_data(devs); (char *)d < nl_end(devs) && n < max;
	     d = (struct nlattr *)((char *)d + NLA_ALIGN(d->nla_len))) {
		if (d->nla_len < NLA_HDRLEN)
			break;
		name = nl_find(nl_data(d), nl_end(d), MRPOOL_DEV_A_NAME);
		snprintf(names[n++], 64, "%s", name ? (char *)nl_data(name) : "");
	}
	return n;
}

/*
 * GET, checked against sysfs: chunk size, ceiling, and the device list.
 * 0 if all agree; else the number of the first check that failed. Runs in
 * the caller's credentials (the test forks it as nobody).
 */
static int nl_get_check(void)
{
	static char reply[NL_BUF];
	char names[16][64];
	struct nl_req r;
	uint32_t grp;
	int fd, fam, n, i;

	fd = nl_open();
	if (fd < 0)
		return 1;
	fam = nl_family(fd, &grp);
	if (fam < 0)
		return 2;
	nl_init(&r, fam, MRPOOL_CMD_GET);
	if (nl_talk(fd, &r, reply, sizeof(reply)))
		return 3;
	if (nl_u64(reply, MRPOOL_A_CHUNK_BYTES) !=
	    (uint64_t)pool_attr("chunk_bytes"))
		return 4;
	if (nl_u64(reply, MRPOOL_A_MAX_BYTES) != (uint64_t)pool_attr("max_bytes"))
		return 5;
	n = nl_devices(reply, names, 16);
	if (n < 1)
		return 6;
	for (i = 0; i < n; i++) {
		char name[64];

		memcpy(name, names[i], sizeof(name));
		if (!dev_listed(name))
			return 7;
	}
	/* Anyone may listen to the events. */
	if (!grp || setsockopt(fd, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &grp,
			       sizeof(grp)))
		return 8;
	close(fd);
	return 0;
}

FIXTURE(nl) {
	int fd;
	int family;
	char *reply;
};

FIXTURE_SETUP(nl)
{
	uint32_t grp;

	self->fd = -1;
	self->reply = malloc(NL_BUF);
	ASSERT_NE(NULL, self->reply);
	if (access(IB_SYSFS, F_OK))
		POOL_SETUP_SKIP("mrpool.ko not loaded");
	self->fd = nl_open();
	ASSERT_LE(0, self->fd);
	self->family = nl_family(self->fd, &grp);
	ASSERT_LT(0, self->family) TH_LOG("no family " MRPOOL_GENL_NAME);
	ASSERT_NE(0, grp);
}

FIXTURE_TEARDOWN(nl)
{
	if (self->fd >= 0)
		close(self->fd);
	free(self->reply);
}

/* GET as root: what sysfs shows, every device the module lists. */
TEST_F(nl, get_matches_sysfs)
{
	char names[16][64], name[64], state[32];
	struct nlattr *a;
	struct nl_req r;
	int n, i, ready = 0;
	uint64_t total;

	if (self->fd < 0)
		POOL_SKIP("mrpool.ko not loaded");
	EXPECT_EQ(0, nl_get_check());
	nl_init(&r, self->family, MRPOOL_CMD_GET);
	ASSERT_EQ(0, nl_talk(self->fd, &r, self->reply, NL_BUF));
	total = nl_u64(self->reply, MRPOOL_A_TOTAL_BYTES);
	EXPECT_EQ(total, nl_u64(self->reply, MRPOOL_A_FREE_BYTES) +
			 nl_u64(self->reply, MRPOOL_A_USED_BYTES) +
			 nl_u64(self->reply, MRPOOL_A_QUARANTINED_BYTES));
	EXPECT_EQ((uint64_t)pool_attr("stats/allocs"),
		  nl_u64(self->reply, MRPOOL_A_ALLOCS));
	EXPECT_EQ((uint64_t)pool_attr("stats/grows"),
		  nl_u64(self->reply, MRPOOL_A_GROWS));
	n = nl_devices(self->reply, names, 16);
	ASSERT_LE(1, n);
	for (i = 0; i < n; i++) {
		memcpy(name, names[i], sizeof(name));
		dev_str(name, "state", state, sizeof(state));
		ready += !strcmp(state, "ready");
	}
	a = nl_find(nl_attrs(self->reply), nl_msg_end(self->reply),
		    MRPOOL_A_DEVICES_READY);
	ASSERT_NE(NULL, a);
	EXPECT_EQ(ready, *(uint32_t *)nl_data(a));
}

/* GET as nobody: allowed, the same answer (sysfs is world-readable). */
TEST_F(nl, get_unprivileged)
{
	pid_t pid;
	int st;

	if (self->fd < 0)
		POOL_SKIP("mrpool.ko not loaded");
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		if (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY))
			_exit(90);
		_exit(nl_get_check());
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st)) TH_LOG("failed check %d as nobody",
					     WEXITSTATUS(st));
}

/* A device filter: that device alone, or -ENODEV for none of the name. */
TEST_F(nl, get_one_device)
{
	char names[4][64];
	struct nl_req r;

	if (self->fd < 0)
		POOL_SKIP("mrpool.ko not loaded");
	if (!dev_listed("rxe0"))
		POOL_SKIP("no rxe0 in this guest");
	nl_init(&r, self->family, MRPOOL_CMD_GET);
	nl_put(&r, MRPOOL_A_DEV_NAME, "rxe0", 5);
	ASSERT_EQ(0, nl_talk(self->fd, &r, self->reply, NL_BUF));
	ASSERT_EQ(1, nl_devices(self->reply, names, 4));
	EXPECT_STREQ("rxe0", names[0]);

	nl_init(&r, self->family, MRPOOL_CMD_GET);
	nl_put(&r, MRPOOL_A_DEV_NAME, "nosuchdev0", 11);
	EXPECT_EQ(-ENODEV, nl_talk(self->fd, &r, NULL, 0));
}

/*
 * Readers of the pool's totals from many threads of an unprivileged user:
 * GET, the sysfs totals and QUERY, which must never wait for the pool
 * lock ALLOC and FREE take (review kmod-2026-12-04, 10).
 */
#define FLOODERS	8

struct flood_count {
	long gets;	/* GETs answered */
	long reads;	/* sysfs totals read */
	long queries;	/* QUERYs answered */
	long bad;	/* totals that did not add up */
	long errs;	/* requests that failed */
	long blocks;	/* blocks_per_order checked against total_bytes */
	int capped;	/* stopped at its bound, not told to */
};

/* Shared between the test and its children (MAP_SHARED). */
struct flood {
	int family;
	long bound;		/* iterations per thread at most */
	int stop;		/* the flooders' signal to end */
	/*
	 * Check blocks_per_order against total_bytes too: set only while
	 * total_bytes never falls (trim off), see flood_blocks_ok().
	 */
	int check_blocks;
	struct flood_count t[FLOODERS];
	int cycles;		/* ALLOC/FREE cycles the allocator did */
};

/*
 * One GET on @fd (nl_talk()'s buffer is shared: not for threads). The
 * reply goes to @msg, @rx is for receiving. 0, or -errno.
 */
static int flood_get(int fd, int family, char *msg, char *rx)
{
	struct nlmsghdr *h;
	struct nl_req r;
	ssize_t n;
	int got = 0;

	nl_init(&r, family, MRPOOL_CMD_GET);
	if (send(fd, &r, r.n.nlmsg_len, 0) < 0)
		return -errno;
	for (;;) {
		n = recv(fd, rx, NL_BUF, 0);
		if (n < 0)
			return -errno;
		for (h = (struct nlmsghdr *)rx; NLMSG_OK(h, (size_t)n);
		     h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_ERROR) {
				int err = ((struct nlmsgerr *)NLMSG_DATA(h))->error;

				return err ? err : got ? 0 : -ENODATA;
			}
			memcpy(msg, h, h->nlmsg_len);
			got = 1;
		}
	}
}

/* total == free + used + quarantined, each at most total. */
static bool flood_adds_up(uint64_t total, uint64_t free, uint64_t used,
			  uint64_t quar)
{
	return used <= total && free <= total && quar <= total &&
	       free + used + quar == total;
}

/* Bytes of the blocks sysfs blocks_per_order counts, -1 if unreadable. */
static long long flood_blocks_bytes(void)
{
	char buf[512], *p, *end;
	long long pages = 0, n;
	ssize_t len;
	int fd, o;

	fd = open(POOL_SYSFS "/blocks_per_order", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return -1;
	buf[len] = '\0';
	for (o = 0, p = buf; ; o++, p = end) {
		n = strtoll(p, &end, 10);
		if (end == p)
			break;
		pages += n << o;
	}
	return o ? pages * sysconf(_SC_PAGESIZE) : -1;
}

/*
 * blocks_per_order read between two reads of total_bytes: 1 when the two
 * totals agree and the blocks make exactly that many bytes (every chunk
 * counted in total is made of blocks whose pages fill it, and nothing
 * else is), 0 when they do not, -1 when total changed meanwhile (nothing
 * to compare) or a read failed. Only while total never falls: then two
 * equal reads mean it did not change between them.
 */
static int flood_blocks_ok(void)
{
	long long t1, t2, b;

	t1 = pool_attr("total_bytes");
	b = flood_blocks_bytes();
	t2 = pool_attr("total_bytes");
	if (t1 < 0 || b < 0 || t1 != t2)
		return -1;
	return b == t1;
}

struct flood_arg {
	struct flood *f;
	int i;
};

/*
 * One flooder thread: GET, two sysfs totals, QUERY (and blocks_per_order
 * if asked), until told or bound.
 */
static void *flooder(void *arg)
{
	struct flood_arg *fa = arg;
	struct flood *f = fa->f;
	struct flood_count *c = &f->t[fa->i];
	struct mrpool_query q;
	char *msg, *rx;
	int fd, pfd, ok;
	long it;

	msg = malloc(NL_BUF);
	rx = malloc(NL_BUF);
	fd = nl_open();
	pfd = pool_open();
	if (!msg || !rx || fd < 0) {
		__atomic_add_fetch(&c->errs, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	for (it = 0; !__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE); it++) {
		if (it == f->bound) {
			c->capped = 1;
			break;
		}
		if (flood_get(fd, f->family, msg, rx)) {
			__atomic_add_fetch(&c->errs, 1, __ATOMIC_RELAXED);
		} else {
			if (!flood_adds_up(nl_u64(msg, MRPOOL_A_TOTAL_BYTES),
					   nl_u64(msg, MRPOOL_A_FREE_BYTES),
					   nl_u64(msg, MRPOOL_A_USED_BYTES),
					   nl_u64(msg, MRPOOL_A_QUARANTINED_BYTES)))
				__atomic_add_fetch(&c->bad, 1, __ATOMIC_RELAXED);
			__atomic_add_fetch(&c->gets, 1, __ATOMIC_RELEASE);
		}
		if (pool_attr("used_bytes") < 0 || pool_attr("total_bytes") < 0)
			__atomic_add_fetch(&c->errs, 1, __ATOMIC_RELAXED);
		else
			__atomic_add_fetch(&c->reads, 1, __ATOMIC_RELAXED);
		ok = f->check_blocks ? flood_blocks_ok() : -1;
		if (!ok)
			__atomic_add_fetch(&c->bad, 1, __ATOMIC_RELAXED);
		if (ok >= 0)
			__atomic_add_fetch(&c->blocks, 1, __ATOMIC_RELAXED);
		if (pfd < 0 || pool_query(pfd, &q)) {
			__atomic_add_fetch(&c->errs, 1, __ATOMIC_RELAXED);
			continue;
		}
		if (!flood_adds_up(q.total_bytes, q.free_bytes, q.used_bytes,
				   q.quarantined_bytes))
			__atomic_add_fetch(&c->bad, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&c->queries, 1, __ATOMIC_RELAXED);
	}
	if (pfd >= 0)
		close(pfd);
	close(fd);
	free(rx);
	free(msg);
	return NULL;
}

/* FLOODERS threads of nobody in a child of their own: its pid. */
static pid_t flood_start(struct flood *f)
{
	struct flood_arg args[FLOODERS];
	pthread_t th[FLOODERS];
	pid_t pid;
	int i;

	pid = fork();
	if (pid)
		return pid;
	if (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY))
		_exit(90);
	for (i = 0; i < FLOODERS; i++) {
		args[i].f = f;
		args[i].i = i;
		if (pthread_create(&th[i], NULL, flooder, &args[i]))
			_exit(91);
	}
	for (i = 0; i < FLOODERS; i++)
		pthread_join(th[i], NULL);
	_exit(0);
}

static struct flood *flood_map(int family, long bound)
{
	struct flood *f = mmap(NULL, sizeof(*f), PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (f == MAP_FAILED)
		return NULL;
	f->family = family;
	f->bound = bound;
	return f;
}

/* Every flooder thread answered at least once. */
static bool flood_all_got(struct flood *f)
{
	int i;

	for (i = 0; i < FLOODERS; i++)
		if (!__atomic_load_n(&f->t[i].gets, __ATOMIC_ACQUIRE))
			return false;
	return true;
}

static void flood_log(struct __test_metadata *_metadata, struct flood *f)
{
	int i;

	for (i = 0; i < FLOODERS; i++)
		TH_LOG("flooder %d: %ld GETs, %ld sysfs reads, %ld QUERYs, "
		       "%ld blocks_per_order checked, %ld inconsistent, "
		       "%ld errors%s", i, f->t[i].gets, f->t[i].reads,
		       f->t[i].queries, f->t[i].blocks, f->t[i].bad,
		       f->t[i].errs,
		       f->t[i].capped ? ", stopped at its bound" : "");
}

#define HOLD_KNOB	POOL_DEBUGFS "/hold_pool_lock"
#define HOLD_ROUNDS	20

/*
 * GET, sysfs and QUERY answer while an ALLOC sleeps holding the pool lock
 * (debugfs hold_pool_lock): every one of HOLD_ROUNDS rounds of each of
 * FLOODERS threads of nobody is answered, with totals that add up, and
 * the ALLOC is still inside the lock when they are all done (the knob
 * still reads 2, holding). Before, each read took the pool lock: the
 * flooders waited for the hold to end on its own (60 s), and the knob
 * read 3.
 */
TEST_F(nl, readers_never_wait_for_pool_lock)
{
	struct mrpool_alloc a;
	struct flood *f;
	pid_t alloc, fl;
	int st, i;

	if (access(HOLD_KNOB, F_OK))
		POOL_SKIP("no debugfs hold_pool_lock");
	f = flood_map(self->family, HOLD_ROUNDS);
	ASSERT_NE(NULL, f);
	ASSERT_EQ(0, pool_write_str(HOLD_KNOB, "1"));
	alloc = fork();
	ASSERT_LE(0, alloc);
	if (!alloc) {
		int fd = pool_open();

		_exit(fd < 0 || pool_alloc(fd, 1, &a) ? 1 : 0);
	}
	ASSERT_TRUE(POOL_WAIT(pool_read_ll(HOLD_KNOB) == 2, 30000))
		TH_LOG("the ALLOC never held the lock: knob %lld",
		       pool_read_ll(HOLD_KNOB));

	fl = flood_start(f);
	ASSERT_LE(0, fl);
	ASSERT_EQ(fl, waitpid(fl, &st, 0));
	/* Read before anything ends the hold. */
	EXPECT_EQ(2, pool_read_ll(HOLD_KNOB))
		TH_LOG("the readers waited for the pool lock");
	ASSERT_EQ(0, pool_write_str(HOLD_KNOB, "0"));
	ASSERT_EQ(alloc, waitpid(alloc, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st));
	flood_log(_metadata, f);
	for (i = 0; i < FLOODERS; i++) {
		EXPECT_EQ(HOLD_ROUNDS, f->t[i].gets);
		EXPECT_EQ(HOLD_ROUNDS, f->t[i].reads);
		EXPECT_EQ(HOLD_ROUNDS, f->t[i].queries);
		EXPECT_EQ(0, f->t[i].bad);
		EXPECT_EQ(0, f->t[i].errs);
	}
	munmap(f, sizeof(*f));
}

#define ALLOC_CYCLES	300
#define FLOOD_BOUND	(1L << 24)

/* ALLOC_CYCLES ALLOC/FREE cycles of 1 to 8 chunks (growth, then reuse). */
static int flood_allocator(struct flood *f)
{
	struct mrpool_alloc a;
	struct mrpool_query q;
	int fd = pool_open(), i;

	if (fd < 0 || pool_query(fd, &q))
		return 1;
	for (i = 0; i < ALLOC_CYCLES; i++) {
		if (pool_alloc(fd, q.chunk_size * (1 + i % 8), &a))
			return 2;
		if (pool_free(fd, a.slice_id))
			return 3;
		__atomic_store_n(&f->cycles, i + 1, __ATOMIC_RELEASE);
	}
	close(fd);
	return 0;
}

/*
 * FLOODERS threads of nobody loop GET, sysfs reads and QUERY (at most
 * FLOOD_BOUND rounds each) while another process does ALLOC_CYCLES
 * ALLOC/FREE cycles, some growing the pool: the allocator finishes while
 * every flooder is still going (none reached its bound), each flooder got
 * answers, and every answer's totals add up although they change under it.
 */
TEST_F(nl, get_flood_does_not_stall_alloc)
{
	struct flood *f;
	pid_t alloc, fl;
	int st, i;

	f = flood_map(self->family, FLOOD_BOUND);
	ASSERT_NE(NULL, f);
	fl = flood_start(f);
	ASSERT_LE(0, fl);
	/* The flood is on before the allocator starts. */
	ASSERT_TRUE(POOL_WAIT(flood_all_got(f), 60000)) flood_log(_metadata, f);
	alloc = fork();
	ASSERT_LE(0, alloc);
	if (!alloc)
		_exit(flood_allocator(f));
	ASSERT_EQ(alloc, waitpid(alloc, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st))
		TH_LOG("allocator: status %#x after %d cycles", st, f->cycles);
	EXPECT_EQ(ALLOC_CYCLES, f->cycles);
	/* Before telling them to stop: none of them ran out first. */
	for (i = 0; i < FLOODERS; i++)
		EXPECT_EQ(0, __atomic_load_n(&f->t[i].capped, __ATOMIC_ACQUIRE))
			TH_LOG("flooder %d stopped before the allocator", i);
	__atomic_store_n(&f->stop, 1, __ATOMIC_RELEASE);
	ASSERT_EQ(fl, waitpid(fl, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st));
	flood_log(_metadata, f);
	for (i = 0; i < FLOODERS; i++) {
		EXPECT_LE(1, f->t[i].gets);
		EXPECT_LE(1, f->t[i].reads);
		EXPECT_LE(1, f->t[i].queries);
		EXPECT_EQ(0, f->t[i].bad);
		EXPECT_EQ(0, f->t[i].errs);
	}
	munmap(f, sizeof(*f));
}

#define CHURN_ROUNDS	8

/*
 * One round of churn as root, in every way but trim the pool changes its
 * totals: grow by a chunk of order-0 pages (fail_high_order) while taking
 * every free chunk, pin a page of the first chunk in @pipe_w, FREE (the
 * pinned chunk to quarantine, the others back to free), let defrag swap
 * the fragmented chunk for a whole one, drop the pin and wait for it to
 * leave quarantine. 0, or the step that failed.
 */
static int churn_round(int fd, uint64_t chunk, long long *defrags)
{
	struct mrpool_alloc a;
	struct mrpool_query q;
	int pipe_fd[2], ret = 0;
	struct iovec iov;
	char *p;

	if (pool_query(fd, &q) || pool_set_knob("fail_high_order", 1 << 20))
		return 1;
	if (pool_alloc(fd, q.free_bytes + chunk, &a))
		return 2;
	p = pool_map(fd, &a);
	if (p == MAP_FAILED || pipe2(pipe_fd, O_NONBLOCK)) {
		pool_free(fd, a.slice_id);
		return 3;
	}
	p[0] = 1;
	iov.iov_base = p;
	iov.iov_len = 4096;
	if (vmsplice(pipe_fd[1], &iov, 1, 0) != 4096)
		ret = 4;
	munmap(p, a.length);
	if (pool_free(fd, a.slice_id))
		ret = ret ?: 5;
	/* Clearing the knob kicks the defrag worker. */
	if (pool_set_knob("fail_high_order", 0))
		ret = ret ?: 6;
	if (!ret && !POOL_WAIT(pool_attr("stats/defrags") > *defrags, 60000))
		ret = 7;
	*defrags = pool_attr("stats/defrags");
	close(pipe_fd[0]);
	close(pipe_fd[1]);
	if (!POOL_WAIT(pool_attr("quarantined_bytes") == 0, 60000))
		ret = ret ?: 8;
	return ret;
}

/*
 * Every read of the totals is of one moment while they change every way
 * but trim: FLOODERS threads of nobody loop GET and QUERY (total == free
 * + used + quarantined) and blocks_per_order between two equal reads of
 * total_bytes (the blocks fill exactly that many bytes; trim is off, so
 * total only grows) while root runs CHURN_ROUNDS rounds of growth,
 * ALLOC, quarantine behind a vmsplice() pin, FREE and defrag. The churn
 * happened (defrags and quarantines counted once a round at least) and
 * every flooder checked each kind of read.
 */
TEST_F(nl, totals_consistent_under_churn)
{
	long long trim_sec, defrags0, defrags, quarantines, chunk, room;
	struct flood *f;
	int fd, i, st, ret = 0;
	pid_t fl;

	if (access(POOL_DEBUGFS "/fail_high_order", F_OK))
		POOL_SKIP("no debugfs fail_high_order");
	chunk = pool_attr("chunk_bytes");
	room = (pool_attr("max_bytes") - pool_attr("total_bytes")) / chunk;
	if (room < CHURN_ROUNDS)
		POOL_SKIP("room for %lld chunks, %d needed", room, CHURN_ROUNDS);
	/* An earlier test's pins are dropped: their chunks leave at once. */
	ASSERT_TRUE(POOL_WAIT(pool_attr("quarantined_bytes") == 0, 60000));
	trim_sec = pool_trim_off();
	ASSERT_LE(0, trim_sec);
	fd = pool_open();
	ASSERT_LE(0, fd);
	defrags0 = pool_attr("stats/defrags");
	defrags = defrags0;
	quarantines = pool_attr("stats/quarantines");
	f = flood_map(self->family, FLOOD_BOUND);
	ASSERT_NE(NULL, f);
	f->check_blocks = 1;
	fl = flood_start(f);
	ASSERT_LE(0, fl);
	/* The flood is on before the churn starts. */
	ASSERT_TRUE(POOL_WAIT(flood_all_got(f), 60000)) flood_log(_metadata, f);

	for (i = 0; i < CHURN_ROUNDS && !ret; i++)
		ret = churn_round(fd, chunk, &defrags);
	__atomic_store_n(&f->stop, 1, __ATOMIC_RELEASE);
	ASSERT_EQ(fl, waitpid(fl, &st, 0));
	pool_set_knob("fail_high_order", 0);
	pool_trim_restore(trim_sec);
	close(fd);
	EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st));
	EXPECT_EQ(0, ret) TH_LOG("round %d failed at step %d", i, ret);
	EXPECT_LE(CHURN_ROUNDS, defrags - defrags0);
	EXPECT_LE(CHURN_ROUNDS, pool_attr("stats/quarantines") - quarantines);
	flood_log(_metadata, f);
	for (i = 0; i < FLOODERS; i++) {
		EXPECT_EQ(0, f->t[i].capped);
		EXPECT_LE(1, f->t[i].gets);
		EXPECT_LE(1, f->t[i].queries);
		EXPECT_LE(1, f->t[i].blocks);
		EXPECT_EQ(0, f->t[i].bad);
		EXPECT_EQ(0, f->t[i].errs);
	}
	munmap(f, sizeof(*f));
}

/* Malformed requests: each refused with an errno, none answered. */
TEST_F(nl, malformed_requests_refused)
{
	char longname[100];
	uint64_t v64 = 1;
	uint32_t v32 = 1;
	struct nl_req r;
	int ret;

	if (self->fd < 0)
		POOL_SKIP("mrpool.ko not loaded");
	/* An attribute type past the family's maximum. */
	nl_init(&r, self->family, MRPOOL_CMD_GET);
	nl_put(&r, MRPOOL_A_MAX + 5, &v32, 4);
	EXPECT_EQ(-EINVAL, nl_talk(self->fd, &r, NULL, 0));

	/* A reply-only attribute in a request. */
	nl_init(&r, self->family, MRPOOL_CMD_GET);
	nl_put(&r, MRPOOL_A_TOTAL_BYTES, &v64, 8);
	EXPECT_EQ(-EINVAL, nl_talk(self->fd, &r, NULL, 0));

	/* The device name without its NUL. */
	nl_init(&r, self->family, MRPOOL_CMD_GET);
	nl_put(&r, MRPOOL_A_DEV_NAME, "rxe0", 4);
	EXPECT_EQ(-EINVAL, nl_talk(self->fd, &r, NULL, 0));

	/* A name longer than any device's. */
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	nl_init(&r, self->family, MRPOOL_CMD_GET);
	nl_put(&r, MRPOOL_A_DEV_NAME, longname, sizeof(longname));
	ret = nl_talk(self->fd, &r, NULL, 0);
	EXPECT_TRUE(ret == -EINVAL || ret == -ERANGE) TH_LOG("got %d", ret);

	/* An attribute whose length runs past the message. */
	nl_init(&r, self->family, MRPOOL_CMD_GET);
	nl_put(&r, MRPOOL_A_DEV_NAME, "rxe0", 5);
	((struct nlattr *)r.attrs)->nla_len = 200;
	EXPECT_EQ(-EINVAL, nl_talk(self->fd, &r, NULL, 0));

	/* A command the family does not have, and the event command. */
	nl_init(&r, self->family, 77);
	EXPECT_EQ(-EOPNOTSUPP, nl_talk(self->fd, &r, NULL, 0));
	nl_init(&r, self->family, MRPOOL_CMD_EVENT);
	EXPECT_EQ(-EOPNOTSUPP, nl_talk(self->fd, &r, NULL, 0));

	/* Still answering afterwards. */
	nl_init(&r, self->family, MRPOOL_CMD_GET);
	EXPECT_EQ(0, nl_talk(self->fd, &r, self->reply, NL_BUF));
}

/* One TENANT_GET message, parsed. */
struct nl_tenant {
	int64_t uid;		/* -1: the orphans */
	uint64_t bytes, quarantined, memlock, orphaned;
};

struct nl_tenants {
	struct nl_tenant t[64];
	int n;
	int bad;		/* messages without the attributes they need */
};

static void nl_tenant_keep(struct nlmsghdr *h, void *arg)
{
	struct nl_tenants *ts = arg;
	char *msg = (char *)h;
	struct nl_tenant *t;
	struct nlattr *a;

	if (ts->n >= (int)(sizeof(ts->t) / sizeof(ts->t[0]))) {
		ts->bad++;
		return;
	}
	t = &ts->t[ts->n++];
	a = nl_find(nl_attrs(msg), nl_msg_end(msg), MRPOOL_A_TENANT_UID);
	t->uid = a && a->nla_len == NLA_HDRLEN + 4 ? *(uint32_t *)nl_data(a) : -2;
	if (nl_find(nl_attrs(msg), nl_msg_end(msg), MRPOOL_A_TENANT_ORPHANS))
		t->uid = a ? -2 : -1;	/* the orphans have no uid */
	t->bytes = nl_u64(msg, MRPOOL_A_TENANT_BYTES);
	t->quarantined = nl_u64(msg, MRPOOL_A_TENANT_QUARANTINED_BYTES);
	t->memlock = nl_u64(msg, MRPOOL_A_TENANT_MEMLOCK_BYTES);
	t->orphaned = nl_u64(msg, MRPOOL_A_TENANT_ORPHANED_BYTES);
	if (t->uid == -2 || t->bytes == UINT64_MAX ||
	    t->quarantined == UINT64_MAX || t->memlock == UINT64_MAX ||
	    t->orphaned == UINT64_MAX)
		ts->bad++;
}

/* TENANT_GET, a dump or the caller's own: 0 or -errno, parsed into @ts. */
static int nl_tenants(int fd, int family, bool dump, struct nl_tenants *ts)
{
	struct nl_req r;

	memset(ts, 0, sizeof(*ts));
	nl_init(&r, family, MRPOOL_CMD_TENANT_GET);
	if (dump)
		r.n.nlmsg_flags |= NLM_F_DUMP;
	return nl_talk_each(fd, &r, nl_tenant_keep, ts);
}

static const struct nl_tenant *nl_tenant_of(const struct nl_tenants *ts,
					    int64_t uid)
{
	for (int i = 0; i < ts->n; i++)
		if (ts->t[i].uid == uid)
			return &ts->t[i];
	return NULL;
}

/*
 * Fork a child running @fn(@arg, out, hold): it reports on out, read from
 * *@res, and holds what it made until *@hold, the write end of its hold
 * pipe, is closed. Return: its pid, or -1.
 */
static pid_t holder_start(void (*fn)(const void *arg, int out, int hold),
			  const void *arg, int *res, int *hold)
{
	int r[2], h[2];
	pid_t pid;

	if (pipe(r))
		return -1;
	if (pipe(h)) {
		close(r[0]);
		close(r[1]);
		return -1;
	}
	pid = fork();
	if (!pid) {
		close(h[1]);
		close(r[0]);
		fn(arg, r[1], h[0]);
		_exit(0);
	}
	close(h[0]);
	close(r[1]);
	*res = r[0];
	*hold = h[1];
	return pid;
}

#define TENANT_A	4242
#define TENANT_B	4343

/*
 * A child as TENANT_A: ALLOC @chunks chunks, then check what TENANT_GET
 * tells it: its own tenant alone, single or dumped, with those bytes all
 * in RLIMIT_MEMLOCK. Says 0 or the failed check on @out, then holds the
 * memory until @hold closes.
 */
static void tenant_holder(const void *arg, int out, int hold)
{
	const uint64_t chunk = *(const uint64_t *)arg;
	const int chunks = 2;
	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
	struct nl_tenants ts;
	struct mrpool_alloc a;
	int fd, nl, fam, ret = 0;
	uint32_t grp;
	char c;

	if (setrlimit(RLIMIT_MEMLOCK, &rl) || setgroups(0, NULL) ||
	    setgid(TENANT_A) || setuid(TENANT_A))
		ret = 1;
	else if ((fd = pool_open()) < 0 ||
		 pool_alloc(fd, chunks * chunk, &a))
		ret = 2;
	else if ((nl = nl_open()) < 0 || (fam = nl_family(nl, &grp)) < 0)
		ret = 3;
	else if (nl_tenants(nl, fam, false, &ts) || ts.n != 1 || ts.bad)
		ret = 4;
	else if (ts.t[0].uid != TENANT_A || ts.t[0].bytes != chunks * chunk ||
		 ts.t[0].memlock != chunks * chunk || ts.t[0].quarantined)
		ret = 5;
	else if (nl_tenants(nl, fam, true, &ts) || ts.n != 1 || ts.bad ||
		 ts.t[0].uid != TENANT_A || ts.t[0].bytes != chunks * chunk)
		ret = 6;	/* the dump: itself alone, no orphans */
	if (write(out, &ret, sizeof(ret)) != sizeof(ret))
		_exit(1);
	(void)!read(hold, &c, 1);
	_exit(0);
}

/* TENANT_B, holding nothing: its own tenant is zeros; it sees no other. */
static int tenant_onlooker(void)
{
	struct nl_tenants ts;
	uint32_t grp;
	int nl, fam;

	if (setgroups(0, NULL) || setgid(TENANT_B) || setuid(TENANT_B))
		return 1;
	if ((nl = nl_open()) < 0 || (fam = nl_family(nl, &grp)) < 0)
		return 2;
	if (nl_tenants(nl, fam, false, &ts) || ts.n != 1 || ts.bad ||
	    ts.t[0].uid != TENANT_B || ts.t[0].bytes || ts.t[0].memlock)
		return 3;
	if (nl_tenants(nl, fam, true, &ts) || ts.n != 0)
		return 4;	/* not TENANT_A's entry, not the orphans */
	return 0;
}

static bool tenant_a_gone(int fd, int family)
{
	struct nl_tenants ts;
	const struct nl_tenant *t;

	if (nl_tenants(fd, family, true, &ts))
		return false;
	t = nl_tenant_of(&ts, TENANT_A);
	return !t || !t->bytes;
}

/*
 * TENANT_GET: root lists every user's charge in uid order, the orphans
 * last; a user sees its own only, single or dumped, and another user's
 * charge never; a user's charge is back once its process is reaped; a
 * request with any attribute is refused.
 */
TEST_F(nl, tenants_per_user)
{
	uint64_t chunk = pool_attr("chunk_bytes");
	int res, hold, ret = -1, st, i;
	const struct nl_tenant *t;
	struct nl_tenants ts;
	uint64_t v64 = 1;
	struct nl_req r;
	pid_t pid, pid2;

	if (self->fd < 0)
		POOL_SKIP("mrpool.ko not loaded");
	ASSERT_LT(0, chunk);
	ASSERT_EQ(0, nl_tenants(self->fd, self->family, true, &ts));
	ASSERT_EQ(NULL, nl_tenant_of(&ts, TENANT_A))
		TH_LOG("uid %d holds pool memory already", TENANT_A);
	pid = holder_start(tenant_holder, &chunk, &res, &hold);
	ASSERT_LE(0, pid);
	ASSERT_EQ(sizeof(ret), read(res, &ret, sizeof(ret)));
	EXPECT_EQ(0, ret) TH_LOG("the holder's check %d failed", ret);

	/* Root: every tenant, uids ascending, the orphans last. */
	ASSERT_EQ(0, nl_tenants(self->fd, self->family, true, &ts));
	EXPECT_EQ(0, ts.bad);
	ASSERT_LE(2, ts.n);
	for (i = 1; i < ts.n - 1; i++)
		EXPECT_LT(ts.t[i - 1].uid, ts.t[i].uid);
	EXPECT_EQ(-1, ts.t[ts.n - 1].uid);
	t = nl_tenant_of(&ts, TENANT_A);
	ASSERT_NE(NULL, t);
	EXPECT_EQ(2 * chunk, t->bytes);
	EXPECT_EQ(2 * chunk, t->memlock);
	EXPECT_EQ(0, t->quarantined);

	pid2 = fork();
	ASSERT_LE(0, pid2);
	if (!pid2)
		_exit(tenant_onlooker());
	ASSERT_EQ(pid2, waitpid(pid2, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st))
		TH_LOG("the onlooker's check %d failed", WEXITSTATUS(st));

	/* A request takes no attribute. */
	nl_init(&r, self->family, MRPOOL_CMD_TENANT_GET);
	nl_put(&r, MRPOOL_A_TENANT_BYTES, &v64, 8);
	EXPECT_EQ(-EINVAL, nl_talk(self->fd, &r, NULL, 0));

	close(hold);		/* the holder exits */
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(POOL_WAIT(tenant_a_gone(self->fd, self->family), 20000));
	close(res);
}

#define VIEW_BASE	300000	/* uids of the passed-on dump's tenants */
#define VIEW_N		200	/* tenants: a dump of several parts */

/*
 * As root: one /dev/mrpool file opened as each of VIEW_N uids (a tenant
 * each while it is open); says 0 or the failing uid's index + 1 on @out,
 * then holds them until @hold closes.
 */
static void view_tenants(const void *arg, int out, int hold)
{
	int i, ret = 0;
	char c;

	for (i = 0; i < VIEW_N && !ret; i++) {
		if (syscall(SYS_setresuid, VIEW_BASE + i, VIEW_BASE + i, 0) ||
		    pool_open() < 0 || syscall(SYS_setresuid, 0, 0, 0))
			ret = i + 1;
	}
	if (write(out, &ret, sizeof(ret)) != sizeof(ret))
		_exit(1);
	(void)!read(hold, &c, 1);
	_exit(0);
}

/* Counts of a dump read as nobody. */
struct view_count {
	int n;			/* tenants of VIEW_BASE.. */
	int orphans;
};

static void view_keep(struct nlmsghdr *h, void *arg)
{
	struct view_count *vc = arg;
	char *msg = (char *)h;
	struct nlattr *a;

	if (nl_find(nl_attrs(msg), nl_msg_end(msg), MRPOOL_A_TENANT_ORPHANS)) {
		vc->orphans++;
		return;
	}
	a = nl_find(nl_attrs(msg), nl_msg_end(msg), MRPOOL_A_TENANT_UID);
	if (a && *(uint32_t *)nl_data(a) >= VIEW_BASE &&
	    *(uint32_t *)nl_data(a) < VIEW_BASE + VIEW_N)
		vc->n++;
}

/*
 * A dump is the view of whoever asked for it, to the end: root asks for
 * every tenant, then hands the socket, one part read, to a process of
 * nobody, which reads the rest -- every one of root's VIEW_N tenants and
 * the orphans, not nobody's own view (its tenant alone). The parts after
 * the first run in the reader's context; each once took its view from
 * there.
 */
TEST_F(nl, dump_keeps_askers_view)
{
	int res, hold, out[2], ret = -1, st, nl;
	struct view_count vc = { 0 };
	static char buf[65536];
	struct nlmsghdr *h;
	struct nl_req r;
	pid_t pid, rd;
	ssize_t n;

	if (self->fd < 0)
		POOL_SKIP("mrpool.ko not loaded");
	ASSERT_EQ(0, getuid());
	pid = holder_start(view_tenants, NULL, &res, &hold);
	ASSERT_LE(0, pid);
	ASSERT_EQ(sizeof(ret), read(res, &ret, sizeof(ret)));
	ASSERT_EQ(0, ret) TH_LOG("open as uid %d failed", VIEW_BASE + ret - 1);

	/*
	 * Root asks and reads the first part on a socket that never read
	 * more than 4 KiB at once, so the parts are that small: a few more
	 * are to come (the next one made as root's read returns).
	 */
	nl = nl_open();
	ASSERT_LE(0, nl);
	nl_init(&r, self->family, MRPOOL_CMD_TENANT_GET);
	r.n.nlmsg_flags |= NLM_F_DUMP;
	ASSERT_LT(0, send(nl, &r, r.n.nlmsg_len, 0));
	n = recv(nl, buf, 4096, 0);
	ASSERT_LT(0, n);
	for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
	     h = NLMSG_NEXT(h, n)) {
		ASSERT_NE(NLMSG_ERROR, h->nlmsg_type);
		ASSERT_NE(NLMSG_DONE, h->nlmsg_type)
			TH_LOG("the dump fit one part: no part to pass on");
		view_keep(h, &vc);
	}
	ASSERT_GT(VIEW_N, vc.n);

	/* Nobody reads the rest from the same socket. */
	ASSERT_EQ(0, pipe(out));
	rd = fork();
	ASSERT_LE(0, rd);
	if (!rd) {
		close(out[0]);
		if (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY))
			_exit(1);
		ret = 0;
		for (;;) {
			n = recv(nl, buf, sizeof(buf), 0);
			if (n < 0) {
				ret = -errno;
				break;
			}
			for (h = (struct nlmsghdr *)buf;
			     NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
				if (h->nlmsg_type == NLMSG_ERROR)
					ret = -1000;
				if (h->nlmsg_type == NLMSG_DONE ||
				    h->nlmsg_type == NLMSG_ERROR)
					goto done;
				view_keep(h, &vc);
			}
		}
done:
		if (write(out[1], &vc, sizeof(vc)) != sizeof(vc))
			_exit(2);
		_exit(ret ? 3 : 0);
	}
	close(out[1]);
	ASSERT_EQ(sizeof(vc), read(out[0], &vc, sizeof(vc)));
	ASSERT_EQ(rd, waitpid(rd, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st)) TH_LOG("status %#x", st);
	EXPECT_EQ(VIEW_N, vc.n);
	EXPECT_EQ(1, vc.orphans);
	close(out[0]);
	close(nl);

	close(hold);
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	close(res);
}

/* A socket in the events group, reads timing out after @sec seconds. */
static int nl_events_open(int sec)
{
	struct timeval tv = { .tv_sec = sec };
	uint32_t grp;
	int fd;

	fd = nl_open();
	if (fd < 0)
		return fd;
	if (nl_family(fd, &grp) < 0 || !grp ||
	    setsockopt(fd, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &grp,
		       sizeof(grp)) ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv))) {
		close(fd);
		return -1;
	}
	return fd;
}

static uint32_t nl_u32(char *msg, int type, uint32_t dflt)
{
	struct nlattr *a = nl_find(nl_attrs(msg), nl_msg_end(msg), type);
	uint32_t v = dflt;

	if (a && a->nla_len == NLA_HDRLEN + 4)
		memcpy(&v, nl_data(a), 4);
	return v;
}

/*
 * The next event of type @ev into @msg (others are skipped). 0, or -errno
 * (-ETIMEDOUT when none came in the socket's timeout).
 */
static int nl_next_event(int fd, uint32_t ev, char *msg)
{
	static char buf[NL_BUF];
	struct nlmsghdr *h;
	ssize_t n;

	for (;;) {
		n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
		     h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_len > NL_BUF)
				continue;
			memcpy(msg, h, h->nlmsg_len);
			if (nl_u32(msg, MRPOOL_A_EVENT, 0) == ev)
				return 0;
		}
	}
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* Pool events; parameters and slices put back in the teardown. */
FIXTURE(ev) {
	int fd;		/* /dev/mrpool */
	int ev;		/* the events group */
	long long max_mb;
	long long pct;
	long long trim_sec;
	long long user_mb;
	int pipe[2];
	char *msg;
};

FIXTURE_SETUP(ev)
{
	self->fd = -1;
	self->ev = -1;
	self->max_mb = -1;
	self->pct = -1;
	self->trim_sec = -1;
	self->user_mb = -1;
	self->pipe[0] = self->pipe[1] = -1;
	self->msg = malloc(NL_BUF);
	ASSERT_NE(NULL, self->msg);
	if (access(POOL_DEV, F_OK))
		POOL_SETUP_SKIP("mrpool.ko not loaded");
	self->fd = pool_open();
	ASSERT_LE(0, self->fd);
	self->max_mb = pool_param("max_mb");
	self->pct = pool_param("quarantine_event_pct");
	self->user_mb = pool_param("max_user_mb");
	ASSERT_LT(0, self->max_mb);
	ASSERT_LE(0, self->pct);
	/* Pool totals are read, then acted on: no chunk trimmed between. */
	self->trim_sec = pool_trim_off();
	ASSERT_LE(0, self->trim_sec);
	self->ev = nl_events_open(10);
	/* A setup that fails gets no teardown: put the trim back first. */
	if (self->ev < 0)
		pool_trim_restore(self->trim_sec);
	ASSERT_LE(0, self->ev);
}

FIXTURE_TEARDOWN(ev)
{
	if (self->pipe[0] >= 0) {
		close(self->pipe[0]);
		close(self->pipe[1]);
		/* The chunks it pinned leave quarantine before the next test. */
		POOL_WAIT(pool_attr("quarantined_bytes") == 0, 60000);
	}
	if (self->fd >= 0)
		close(self->fd);
	pool_trim_restore(self->trim_sec);
	if (self->pct >= 0)
		pool_set_param("quarantine_event_pct", self->pct);
	if (self->user_mb >= 0)
		pool_set_param("max_user_mb", self->user_mb);
	if (self->max_mb > 0)
		pool_set_param("max_mb", self->max_mb);
	if (self->ev >= 0)
		close(self->ev);
	free(self->msg);
}

#define FLOOD	200

/*
 * A flood of failed ALLOCs (anyone with /dev/mrpool can make one): at
 * most two EXHAUSTED events per second reach listeners, and with their
 * MRPOOL_A_EVENT_SUPPRESSED counts they stand for every failure. A
 * request larger than max_mb, the caller's error, is none of them.
 */
TEST_F(ev, exhaustion_rate_limited)
{
	long long total, chunk, free_chunks, max_mb, t0, ms;
	unsigned int events = 0, seen = 0;
	struct mrpool_alloc a, all;
	int i;

	if (self->fd < 0)
		POOL_SKIP("mrpool.ko not loaded");
	/* No room to grow: max_mb at what the pool holds, all of it taken. */
	total = pool_attr("total_bytes");
	chunk = pool_attr("chunk_bytes");
	max_mb = (total + MIB - 1) / MIB;
	ASSERT_EQ(0, pool_set_param("max_mb", max_mb));
	free_chunks = pool_attr("free_bytes") / chunk;
	if (free_chunks)
		ASSERT_EQ(0, pool_alloc(self->fd, free_chunks * chunk, &all));

	t0 = now_ms();
	EXPECT_EQ(-ENOMEM, pool_alloc(self->fd, max_mb * MIB + chunk, &a));
	for (i = 0; i < FLOOD; i++)
		ASSERT_EQ(-ENOMEM, pool_alloc(self->fd, chunk, &a));
	ms = now_ms() - t0;

	/* The last one held back comes when its second ends. */
	while (seen < FLOOD) {
		ASSERT_EQ(0, nl_next_event(self->ev, MRPOOL_EVENT_EXHAUSTED,
					   self->msg))
			TH_LOG("%u events for %u failures", events, seen);
		EXPECT_EQ(1, nl_u32(self->msg, MRPOOL_A_EVENT_CHUNKS, 0));
		seen += 1 + nl_u32(self->msg, MRPOOL_A_EVENT_SUPPRESSED, 0);
		events++;
	}
	EXPECT_EQ(FLOOD, seen);
	/* A leading and a trailing one per second the flood lasted. */
	EXPECT_GE(2 * (ms / 1000 + 2), events)
		TH_LOG("%u events in %lld ms", events, ms);
	EXPECT_EQ(-ETIMEDOUT, nl_next_event(self->ev, MRPOOL_EVENT_EXHAUSTED,
					    self->msg));
	if (free_chunks)
		EXPECT_EQ(0, pool_free(self->fd, all.slice_id));
}

/*
 * quarantine_event_pct lowered under what is quarantined: QUARANTINE_HIGH
 * at once (the quarantine worker once swallowed that crossing).
 */
TEST_F(ev, quarantine_threshold_lowered)
{
	long long chunk, max_bytes, k, i;
	struct mrpool_alloc a;
	struct iovec iov;
	char *p;

	if (self->fd < 0)
		POOL_SKIP("mrpool.ko not loaded");
	chunk = pool_attr("chunk_bytes");
	max_bytes = pool_attr("max_bytes");
	/* Chunks that make 1 % of max_mb. */
	k = (max_bytes / 100 + chunk - 1) / chunk;
	/* An earlier test's pins are dropped: their chunks leave at once. */
	POOL_WAIT(pool_attr("quarantined_bytes") == 0, 60000);
	if (k > 16 || pool_attr("quarantined_bytes"))
		POOL_SKIP("1%% of max_mb is %lld chunks, or quarantine is busy", k);
	ASSERT_EQ(0, pool_set_param("quarantine_event_pct", 100));
	ASSERT_EQ(0, pipe2(self->pipe, O_NONBLOCK));
	fcntl(self->pipe[1], F_SETPIPE_SZ, (int)(k * 4096 * 2));

	/* A page of every chunk in a pipe: FREE quarantines them all. */
	ASSERT_EQ(0, pool_alloc(self->fd, k * chunk, &a));
	p = pool_map(self->fd, &a);
	ASSERT_NE(MAP_FAILED, p);
	for (i = 0; i < k; i++) {
		p[i * chunk] = 1;
		iov.iov_base = p + i * chunk;
		iov.iov_len = 4096;
		ASSERT_EQ(4096, vmsplice(self->pipe[1], &iov, 1, 0));
	}
	munmap(p, a.length);
	ASSERT_EQ(0, pool_free(self->fd, a.slice_id));
	ASSERT_LE(k * chunk, pool_attr("quarantined_bytes"));

	ASSERT_EQ(0, pool_set_param("quarantine_event_pct", 1));
	ASSERT_EQ(0, nl_next_event(self->ev, MRPOOL_EVENT_QUARANTINE_HIGH,
				   self->msg));
	EXPECT_EQ((uint64_t)max_bytes / 100,
		  nl_u64(self->msg, MRPOOL_A_EVENT_THRESHOLD_BYTES));
	EXPECT_LE((uint64_t)k * chunk,
		  nl_u64(self->msg, MRPOOL_A_QUARANTINED_BYTES));
}

/*
 * As NOBODY: ALLOC a chunk, vmsplice() a page of it into @pipe_w (the
 * parent's pipe: the pin outlives the process) and exit without a FREE:
 * the exiting owner's leftover goes to the orphans, within their share.
 */
static void orphan_child(uint64_t chunk, int fd, int pipe_w)
{
	struct rlimit rl = { 4 * chunk, 4 * chunk };
	struct mrpool_alloc a;
	struct iovec iov;
	char *p;

	if (setrlimit(RLIMIT_MEMLOCK, &rl) || setgroups(0, NULL) ||
	    setgid(NOBODY) || setuid(NOBODY))
		_exit(2);
	close(fd);
	fd = pool_open();
	if (fd < 0 || pool_alloc(fd, chunk, &a))
		_exit(3);
	p = pool_map(fd, &a);
	if (p == MAP_FAILED)
		_exit(4);
	p[0] = 1;
	iov.iov_base = p;
	iov.iov_len = 4096;
	if (vmsplice(pipe_w, &iov, 1, 0) != 4096)
		_exit(5);
	_exit(0);
}

/*
 * What nobody's TENANT_GET (its own tenant) says the orphans hold of its
 * chunks: the bytes, or -1 when the answer is not one full entry.
 */
static long long orphaned_seen_by_nobody(void)
{
	struct nl_tenants *ts;
	int fd, fam, st, p[2];
	long long v = -1;
	uint32_t grp;
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = fork();
	if (!pid) {
		close(p[0]);
		ts = calloc(1, sizeof(*ts));
		if (!ts || setgroups(0, NULL) || setgid(NOBODY) ||
		    setuid(NOBODY) || (fd = nl_open()) < 0 ||
		    (fam = nl_family(fd, &grp)) < 0 ||
		    nl_tenants(fd, fam, false, ts) || ts->n != 1 || ts->bad)
			_exit(1);
		v = (long long)ts->t[0].orphaned;
		_exit(write(p[1], &v, sizeof(v)) == sizeof(v) ? 0 : 1);
	}
	close(p[1]);
	if (pid < 0 || read(p[0], &v, sizeof(v)) != sizeof(v))
		v = -1;
	close(p[0]);
	if (pid > 0)
		waitpid(pid, &st, 0);
	return v;
}

/*
 * The orphans hold at most one share (max_user_mb here, one chunk): the
 * first exit's pinned chunk is orphaned, the second's stays the user's,
 * counted in stats/orphans_full and announced with ORPHANS_FULL (one
 * chunk); the orphaned chunk is shown as nobody's (debugfs users'
 * orphaned_bytes, and its own TENANT_GET) though charged to no user; the
 * pipe gone, all are back.
 */
TEST_F(ev, orphans_full)
{
	long long chunk, full, held;
	int i, st;
	pid_t pid;

	if (self->fd < 0)
		POOL_SKIP("mrpool.ko not loaded");
	ASSERT_EQ(0, getuid());
	chunk = pool_attr("chunk_bytes");
	ASSERT_TRUE(POOL_WAIT(pool_orphan_bytes() == 0 &&
			      pool_user_row(NOBODY, POOL_USER_BYTES) <= 0, 60000))
		TH_LOG("nobody or the orphans hold pool memory already");
	ASSERT_EQ(0, pool_set_param("max_user_mb", chunk / MIB));
	ASSERT_EQ(0, pipe2(self->pipe, O_CLOEXEC));
	full = pool_attr("stats/orphans_full");
	for (i = 0; i < 2; i++) {
		pid = fork();
		ASSERT_LE(0, pid);
		if (!pid)
			orphan_child(chunk, self->fd, self->pipe[1]);
		ASSERT_EQ(pid, waitpid(pid, &st, 0));
		ASSERT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st))
			TH_LOG("child %d: status %#x", i, st);
		EXPECT_EQ(chunk, pool_orphan_bytes()) TH_LOG("child %d", i);
		/* No row once nobody holds nothing: 0. */
		held = pool_user_row(NOBODY, POOL_USER_BYTES);
		EXPECT_EQ(i * chunk, held < 0 ? 0 : held) TH_LOG("child %d", i);
		EXPECT_EQ(full + i, pool_attr("stats/orphans_full"))
			TH_LOG("child %d", i);
		EXPECT_EQ(chunk, pool_user_row(NOBODY, POOL_USER_ORPHANED))
			TH_LOG("child %d", i);
		EXPECT_EQ(chunk, orphaned_seen_by_nobody()) TH_LOG("child %d", i);
	}
	ASSERT_EQ(0, nl_next_event(self->ev, MRPOOL_EVENT_ORPHANS_FULL,
				   self->msg));
	EXPECT_EQ(1U, nl_u32(self->msg, MRPOOL_A_EVENT_CHUNKS, 0));
	/* The pins go with the pipe: nothing stays charged. */
	close(self->pipe[0]);
	close(self->pipe[1]);
	self->pipe[0] = self->pipe[1] = -1;
	EXPECT_TRUE(POOL_WAIT(pool_orphan_bytes() == 0 &&
			      pool_user_row(NOBODY, POOL_USER_BYTES) <= 0 &&
			      pool_user_row(NOBODY, POOL_USER_ORPHANED) <= 0,
			      20000));
	EXPECT_EQ(0, orphaned_seen_by_nobody());
}

TEST_HARNESS_MAIN
