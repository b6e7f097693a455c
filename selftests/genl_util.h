/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Generic netlink requests built by hand for the VM tests that talk to
 * mrpool's family (netlink_test, pool_quota_test): a socket with a receive
 * timeout (a lost reply fails a test instead of hanging it), a request
 * header, and attributes appended in place. Parsing stays with each test:
 * one reads single replies, the other dumps.
 */
#ifndef GENL_UTIL_H
#define GENL_UTIL_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>

struct nl_req {
	struct nlmsghdr n;
	struct genlmsghdr g;
	char attrs[8192];
};

static inline int nl_open(void)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	struct timeval tv = { .tv_sec = 60 };
	int fd;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		return -errno;
	}
	return fd;
}

static inline void nl_init(struct nl_req *r, uint16_t family, uint8_t cmd)
{
	memset(r, 0, sizeof(*r));
	r->n.nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN);
	r->n.nlmsg_type = family;
	r->n.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	r->n.nlmsg_seq = 1;
	r->g.cmd = cmd;
	r->g.version = 1;
}

/*
 * Append an attribute: @len bytes of @data, padded. From the request's
 * start (the same address as r->n): an offset from &r->n past its 16
 * bytes trips GCC's -Wstringop-overflow.
 */
static inline void nl_put(struct nl_req *r, uint16_t type, const void *data,
			  uint16_t len)
{
	struct nlattr *a = (struct nlattr *)((char *)r +
					     NLMSG_ALIGN(r->n.nlmsg_len));

	a->nla_type = type;
	a->nla_len = NLA_HDRLEN + len;
	memcpy((char *)a + NLA_HDRLEN, data, len);
	r->n.nlmsg_len = NLMSG_ALIGN(r->n.nlmsg_len) + NLA_ALIGN(a->nla_len);
}

static inline void nl_put_u64(struct nl_req *r, uint16_t type, uint64_t v)
{
	nl_put(r, type, &v, sizeof(v));
}

static inline void nl_put_str(struct nl_req *r, uint16_t type, const char *s)
{
	nl_put(r, type, s, strlen(s) + 1);
}

/*
 * Send @r, read until its ack or the dump's end; each data message goes
 * to @fn (if any). Returns the ack's error (or the dump end's): 0 or
 * -errno; -ETIMEDOUT when nothing came within the socket's timeout.
 */
static inline int nl_talk_each(int fd, struct nl_req *r,
			       void (*fn)(struct nlmsghdr *h, void *arg), void *arg)
{
	static char buf[65536];
	struct nlmsghdr *h;
	ssize_t n;

	if (send(fd, r, r->n.nlmsg_len, 0) < 0)
		return -errno;
	for (;;) {
		n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
		     h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_ERROR)
				return ((struct nlmsgerr *)NLMSG_DATA(h))->error;
			if (h->nlmsg_type == NLMSG_DONE)
				return *(int *)NLMSG_DATA(h);
			if (fn)
				fn(h, arg);
		}
	}
}

#endif /* GENL_UTIL_H */
