// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Two hosts, two kernels (tools/vm/run --hosts 2): the same binary runs in
 * both guests, each with its own mrpool and rxe0 on its own NIC. Host 1
 * ($MRPOOL_HOST_INDEX=1) serves, host 2 connects to $MRPOOL_PEER_IP over
 * TCP; per test they exchange QP number, GID and a libmrpool buffer's
 * address, rkey and length, connect one RC QP each to the other's, and
 * move data slice to slice between the two pools: a WRITE from host 2
 * into host 1's buffer, a READ of host 1's buffer into host 2's, a SEND
 * into a receive posted on host 1. The side that received checks every
 * byte and tells the other. Last, each pool's sysfs counters stay put
 * while the other host allocates.
 *
 * Every wait is bounded: a peer that never connects or answers fails the
 * test after a timeout (the tests after it wait only briefly).
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/socket.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop
/* After a longjmp the harness only runs the teardown: no local is reused. */
#pragma GCC diagnostic ignored "-Wclobbered"

#include "mrpool.h"
#include "pool_util.h"
#include "rdmatest.h"

#define HOSTS_PORT	18515
#define HELLO_MAGIC	0x4d525048u	/* "MRPH" */
/*
 * The other guest may boot later (another kernel, a busy host): wait this
 * long for it ($MRPOOL_PEER_WAIT seconds overrides), and once it never
 * came, only NOPEER_WAIT_S in the tests after.
 */
#define CONNECT_WAIT_S	300
#define NOPEER_WAIT_S	10
/* One message from the peer: a 3 MiB transfer at ~3 MB/s under TCG. */
#define IO_WAIT_S	180
#define BUF_LEN		(3 * MIB)	/* own arena of two chunks: crosses a boundary */
#define READ_LEN	MIB
#define SEND_LEN	(256 << 10)
#define GROW_LEN	(8 * MIB)
#define QDEPTH		4

/* What each side tells the other at the start of a test (little endian). */
struct hello {
	uint32_t magic;
	uint32_t test;		/* hash of the test's name: both run the same one */
	uint32_t qpn;
	uint32_t rkey;
	uint64_t addr;
	uint64_t len;
	uint8_t gid[16];
};

FIXTURE(hosts) {
	int index;		/* 1: server, 2: client */
	int sock;
	struct rdt_dev dev;
	bool opened;
	struct rdt_qp q;
	struct mrp_pool *pool;
	struct mrp_buf buf;	/* this host's pool buffer, BUF_LEN */
	uint64_t peer_addr;	/* the peer's buffer */
	uint32_t peer_rkey;
};

/* Shared with every test's child (the harness forks one per test). */
static int *peer_never_came;

static void __attribute__((constructor)) hosts_test_init(void)
{
	peer_never_came = mmap(NULL, sizeof(*peer_never_came),
			       PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (peer_never_came == MAP_FAILED)
		peer_never_came = NULL;
}

/* Seconds to wait for the peer's connection. */
static int peer_wait_s(void)
{
	const char *env = getenv("MRPOOL_PEER_WAIT");
	int s = env ? atoi(env) : CONNECT_WAIT_S;

	if (s <= 0)
		s = CONNECT_WAIT_S;
	if (peer_never_came && *peer_never_came && s > NOPEER_WAIT_S)
		s = NOPEER_WAIT_S;
	return s;
}

static uint32_t name_hash(const char *s)
{
	uint32_t h = 2166136261u;

	while (*s)
		h = (h ^ (uint8_t)*s++) * 16777619u;
	return h;
}

static int io_all(int sock, void *p, size_t len, bool out)
{
	uint8_t *b = p;
	ssize_t n;

	while (len) {
		n = out ? send(sock, b, len, MSG_NOSIGNAL) : recv(sock, b, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;	/* EAGAIN: SO_RCVTIMEO ran out */
		if (n == 0)
			return -ECONNRESET;
		b += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Send @len bytes of @out, then receive @len bytes into @in. */
static int xchg(int sock, const void *out, void *in, size_t len)
{
	int ret = io_all(sock, (void *)out, len, true);

	return ret ? ret : io_all(sock, in, len, false);
}

/* Exchange one value with the peer: a barrier that carries a result. */
static int64_t sync_peer(int sock, int64_t mine)
{
	uint64_t out = htole64((uint64_t)mine), in = 0;

	if (xchg(sock, &out, &in, sizeof(in)))
		return INT64_MIN;
	return (int64_t)le64toh(in);
}

static int sock_timeouts(int fd, int sec)
{
	struct timeval tv = { .tv_sec = sec };
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)))
		return -errno;
	return 0;
}

/* Host 1: accept one connection on HOSTS_PORT within @wait_s seconds. */
static int serve_one(int wait_s)
{
	struct sockaddr_in sa = {
		.sin_family = AF_INET, .sin_port = htons(HOSTS_PORT),
		.sin_addr.s_addr = htonl(INADDR_ANY),
	};
	struct pollfd pfd = { .events = POLLIN };
	int one = 1, fd, c = -1;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 1)) {
		c = -errno;
		goto out;
	}
	pfd.fd = fd;
	if (poll(&pfd, 1, wait_s * 1000) != 1) {
		c = -ETIMEDOUT;
		goto out;
	}
	c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
	if (c < 0)
		c = -errno;
out:
	close(fd);
	return c;
}

/* Host 2: connect to the peer, retrying until @wait_s seconds have passed. */
static int connect_peer(const char *ip, int wait_s)
{
	struct sockaddr_in sa = {
		.sin_family = AF_INET, .sin_port = htons(HOSTS_PORT),
	};
	uint64_t end = rdt_now_ns() + wait_s * 1000000000ULL;
	int fd, err;

	if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1)
		return -EINVAL;
	do {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		if (!connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
			return fd;
		err = -errno;
		close(fd);
		usleep(200 * 1000);
	} while (rdt_now_ns() < end);
	return err;
}

static int make_qp(struct rdt_dev *dev, struct rdt_qp *q)
{
	struct ibv_qp_init_attr attr = {
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
		.cap = {
			.max_send_wr = QDEPTH, .max_recv_wr = QDEPTH,
			.max_send_sge = 1, .max_recv_sge = 1,
		},
	};

	q->cq = ibv_create_cq(dev->ctx, 2 * QDEPTH, NULL, NULL, 0);
	if (!q->cq)
		return -errno;
	attr.send_cq = q->cq;
	attr.recv_cq = q->cq;
	q->qp = ibv_create_qp(dev->pd, &attr);
	return q->qp ? 0 : -errno;
}

/* One completion from @cq within IO_WAIT_S: 0, -EIO (status in *wc), -ETIMEDOUT. */
static int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	uint64_t end = rdt_now_ns() + IO_WAIT_S * 1000000000ULL;
	int n;

	do {
		n = ibv_poll_cq(cq, 1, wc);
		if (n < 0)
			return -EIO;
		if (n > 0)
			return wc->status == IBV_WC_SUCCESS ? 0 : -EIO;
		usleep(100);
	} while (rdt_now_ns() < end);
	return -ETIMEDOUT;
}

/* Post one request for @len bytes of this host's buffer and wait for it. */
static int post_wait(FIXTURE_DATA(hosts) *self, enum ibv_wr_opcode op,
		     size_t len, int *status)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)self->buf.addr, .length = (uint32_t)len,
		.lkey = self->buf.lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = op, .sg_list = &sge, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = self->peer_addr, .rkey = self->peer_rkey },
	};
	struct ibv_send_wr *bad;
	struct ibv_wc wc = { .status = IBV_WC_GENERAL_ERR };
	int ret;

	ret = ibv_post_send(self->q.qp, &wr, &bad);
	if (ret)
		return -ret;
	ret = wait_wc(self->q.cq, &wc);
	*status = wc.status;
	return ret;
}

FIXTURE_SETUP(hosts)
{
	struct mrp_pool_attr pa = {
		.comp_mask = MRP_POOL_ATTR_BACKEND | MRP_POOL_ATTR_BACKGROUND,
		.backend = MRP_BACKEND_KERNEL, .background = 0,
	};
	const char *idx = getenv("MRPOOL_HOST_INDEX");
	const char *peer = getenv("MRPOOL_PEER_IP");
	struct hello me = { 0 }, them = { 0 };
	union ibv_gid gid;
	int wait_s;

	self->sock = -1;
	self->opened = false;
	self->pool = NULL;
	memset(&self->q, 0, sizeof(self->q));
	memset(&self->buf, 0, sizeof(self->buf));
	if (!idx || !peer)
		POOL_SETUP_SKIP("MRPOOL_HOST_INDEX/MRPOOL_PEER_IP unset: needs tools/vm/run --hosts 2");
	if (access(POOL_DEV, F_OK))
		POOL_SETUP_SKIP(POOL_DEV " missing: mrpool.ko not loaded");
	self->index = atoi(idx);
	ASSERT_TRUE(self->index == 1 || self->index == 2);

	ASSERT_EQ(0, rdt_dev_open(&self->dev, "rxe0", NULL));
	self->opened = true;
	self->pool = mrp_pool_open(&pa);
	ASSERT_NE(NULL, self->pool) TH_LOG("mrp_pool_open: %s", strerror(errno));
	ASSERT_EQ(0, mrp_attach_pd(self->pool, self->dev.pd, RDT_ACCESS_ALL));
	ASSERT_EQ(0, mrp_alloc(self->pool, BUF_LEN, self->dev.pd, &self->buf));
	ASSERT_EQ(0, make_qp(&self->dev, &self->q));

	wait_s = peer_wait_s();
	self->sock = self->index == 1 ? serve_one(wait_s) : connect_peer(peer, wait_s);
	if (self->sock < 0 && peer_never_came)
		*peer_never_came = 1;
	ASSERT_LE(0, self->sock)
		TH_LOG("no connection with the peer in %d s: %s", wait_s,
		       strerror(-self->sock));
	ASSERT_EQ(0, sock_timeouts(self->sock, IO_WAIT_S));

	me.magic = htole32(HELLO_MAGIC);
	me.test = htole32(name_hash(_metadata->name));
	me.qpn = htole32(self->q.qp->qp_num);
	me.rkey = htole32(self->buf.rkey);
	me.addr = htole64((uintptr_t)self->buf.addr);
	me.len = htole64(self->buf.size);
	memcpy(me.gid, &self->dev.gid, sizeof(me.gid));
	ASSERT_EQ(0, xchg(self->sock, &me, &them, sizeof(them)));
	ASSERT_EQ(HELLO_MAGIC, le32toh(them.magic));
	ASSERT_EQ(name_hash(_metadata->name), le32toh(them.test))
		TH_LOG("the peer runs another test");
	ASSERT_LE(BUF_LEN, le64toh(them.len));
	/* Two hosts: two addresses. */
	ASSERT_NE(0, memcmp(me.gid, them.gid, sizeof(me.gid)));
	self->peer_addr = le64toh(them.addr);
	self->peer_rkey = le32toh(them.rkey);
	memcpy(&gid, them.gid, sizeof(gid));
	ASSERT_EQ(0, rdt_qp_connect(&self->dev, self->q.qp, le32toh(them.qpn), &gid));
	/* Neither side sends before the other's QP is ready to receive. */
	ASSERT_EQ(0, sync_peer(self->sock, 0));
	TH_LOG("host %d: qpn %u rkey 0x%x <-> peer qpn %u rkey 0x%x", self->index,
	       self->q.qp->qp_num, self->buf.rkey, le32toh(them.qpn), self->peer_rkey);
}

FIXTURE_TEARDOWN(hosts)
{
	if (self->sock >= 0)
		close(self->sock);
	if (self->q.qp)
		ibv_destroy_qp(self->q.qp);
	if (self->q.cq)
		ibv_destroy_cq(self->q.cq);
	if (self->pool) {
		if (self->buf.addr)
			EXPECT_EQ(0, mrp_free(self->pool, self->buf.addr));
		EXPECT_EQ(0, mrp_pool_close_flags(self->pool, MRP_CLOSE_FORCE));
	}
	if (self->opened)
		rdt_dev_close(&self->dev);
}

/* Host 2 WRITEs 3 MiB of its pool buffer into host 1's; host 1 checks. */
TEST_F_TIMEOUT(hosts, write_into_peer_pool, 60)
{
	int st = -1, ret = 0;
	int64_t r, verdict;

	POOL_SETUP_SKIPPED();
	if (self->index == 1)
		memset(self->buf.addr, 0, BUF_LEN);
	ASSERT_EQ(0, sync_peer(self->sock, 0));
	if (self->index == 2) {
		rdt_pattern_fill(self->buf.addr, BUF_LEN, 21);
		ret = post_wait(self, IBV_WR_RDMA_WRITE, BUF_LEN, &st);
		EXPECT_EQ(0, ret) TH_LOG("WRITE: %d, status %d", ret, st);
	}
	r = sync_peer(self->sock, ret);
	if (self->index == 1) {
		EXPECT_EQ(0, r) TH_LOG("the peer's WRITE failed");
		ret = rdt_pattern_same(self->buf.addr, BUF_LEN, 21) ? 0 : -EBADMSG;
		EXPECT_EQ(0, ret) TH_LOG("bytes written by the peer differ");
	}
	verdict = sync_peer(self->sock, ret);
	if (self->index == 2)
		EXPECT_EQ(0, verdict) TH_LOG("host 1 found the bytes wrong");
}

/* Host 2 READs 1 MiB of host 1's pool buffer into its own; host 2 checks. */
TEST_F_TIMEOUT(hosts, read_from_peer_pool, 60)
{
	int st = -1, ret = 0;
	int64_t verdict;

	POOL_SETUP_SKIPPED();
	if (self->index == 1)
		rdt_pattern_fill(self->buf.addr, READ_LEN, 22);
	else
		memset(self->buf.addr, 0, READ_LEN);
	ASSERT_EQ(0, sync_peer(self->sock, 0));
	if (self->index == 2) {
		ret = post_wait(self, IBV_WR_RDMA_READ, READ_LEN, &st);
		EXPECT_EQ(0, ret) TH_LOG("READ: %d, status %d", ret, st);
		if (!ret && !rdt_pattern_same(self->buf.addr, READ_LEN, 22))
			ret = -EBADMSG;
		EXPECT_EQ(0, ret) TH_LOG("bytes read from the peer differ");
	}
	verdict = sync_peer(self->sock, ret);
	if (self->index == 1)
		EXPECT_EQ(0, verdict) TH_LOG("host 2's READ failed or read wrong bytes");
}

/* Host 2 SENDs 256 KiB into a receive host 1 posted on its pool buffer. */
TEST_F_TIMEOUT(hosts, send_into_peer_pool, 60)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)self->buf.addr, .length = SEND_LEN,
		.lkey = self->buf.lkey,
	};
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *rbad;
	struct ibv_wc wc = { .status = IBV_WC_GENERAL_ERR };
	int st = -1, ret = 0;
	int64_t r, verdict;

	POOL_SETUP_SKIPPED();
	if (self->index == 1) {
		memset(self->buf.addr, 0, SEND_LEN);
		ret = -ibv_post_recv(self->q.qp, &rwr, &rbad);
		EXPECT_EQ(0, ret);
	}
	/* The receive is posted before host 2 sends. */
	r = sync_peer(self->sock, ret);
	ASSERT_EQ(0, r);
	if (self->index == 2) {
		rdt_pattern_fill(self->buf.addr, SEND_LEN, 23);
		ret = post_wait(self, IBV_WR_SEND, SEND_LEN, &st);
		EXPECT_EQ(0, ret) TH_LOG("SEND: %d, status %d", ret, st);
	}
	r = sync_peer(self->sock, ret);
	if (self->index == 1) {
		EXPECT_EQ(0, r) TH_LOG("the peer's SEND failed");
		ret = r ? -EIO : wait_wc(self->q.cq, &wc);
		EXPECT_EQ(0, ret) TH_LOG("receive: %d, status %d", ret, wc.status);
		if (!ret) {
			EXPECT_EQ(IBV_WC_RECV, wc.opcode);
			EXPECT_EQ(SEND_LEN, wc.byte_len);
			if (wc.byte_len != SEND_LEN ||
			    !rdt_pattern_same(self->buf.addr, SEND_LEN, 23))
				ret = -EBADMSG;
			EXPECT_EQ(0, ret) TH_LOG("bytes received differ");
		}
	}
	verdict = sync_peer(self->sock, ret);
	if (self->index == 2)
		EXPECT_EQ(0, verdict) TH_LOG("host 1 did not receive the bytes");
}

/*
 * Each host in turn allocates 8 MiB more from its pool; the other's
 * used_bytes (read in its own sysfs) does not move. Both sides exchange
 * their readings and check both.
 */
TEST_F_TIMEOUT(hosts, pools_independent, 60)
{
	int64_t mine[2], theirs[2];
	int grower, i;

	POOL_SETUP_SKIPPED();
	for (grower = 1; grower <= 2; grower++) {
		bool grow = self->index == grower;
		struct mrp_buf big = { 0 };

		ASSERT_EQ(0, sync_peer(self->sock, 0));
		mine[0] = pool_attr("used_bytes");
		ASSERT_LT(0, mine[0]);	/* this fixture's buffer */
		ASSERT_EQ(0, sync_peer(self->sock, 0));
		if (grow)
			EXPECT_EQ(0, mrp_alloc(self->pool, GROW_LEN, self->dev.pd, &big));
		ASSERT_EQ(0, sync_peer(self->sock, 0));
		mine[1] = pool_attr("used_bytes");
		for (i = 0; i < 2; i++) {
			theirs[i] = sync_peer(self->sock, mine[i]);
			ASSERT_NE(INT64_MIN, theirs[i]);
		}
		TH_LOG("host %d allocated %lu MiB: used_bytes here %lld -> %lld, on the peer %lld -> %lld",
		       grower, GROW_LEN / MIB, (long long)mine[0], (long long)mine[1],
		       (long long)theirs[0], (long long)theirs[1]);
		if (grow) {
			EXPECT_LE(mine[0] + (int64_t)GROW_LEN, mine[1]);
			EXPECT_EQ(theirs[0], theirs[1]);
		} else {
			EXPECT_EQ(mine[0], mine[1]);
			EXPECT_LE(theirs[0] + (int64_t)GROW_LEN, theirs[1]);
		}
		if (big.addr)
			EXPECT_EQ(0, mrp_free(self->pool, big.addr));
	}
}

TEST_HARNESS_MAIN
