/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * mrpoolctl's netlink helpers (libnl-3), apart from mrpoolctl.h so that
 * only the files that speak netlink see libnl's headers.
 */
#ifndef MRPOOLCTL_NL_H
#define MRPOOLCTL_NL_H

#include <stdbool.h>
#include <stddef.h>

struct nl_sock;

/* nl.c: the module's generic netlink family */
struct ctl_nl {
	struct nl_sock *sk;
	int family;		/* resolved id of "mrpool" */
};

int ctl_nl_errno(int nlerr);
int ctl_nl_open(struct ctl_nl *nl, bool events);
void ctl_nl_close(struct ctl_nl *nl);

/* A dump's rows, as ctl_nl_dump_table()'s callback fills them. */
struct ctl_nl_rows {
	struct ctl_table t;
	int err;		/* -EPROTO, -ENOMEM: what a callback met */
};

struct nl_msg;
int ctl_nl_dump_table(int cmd, const char *const *head, size_t ncols,
		      int (*row)(struct nl_msg *msg, void *arg),
		      struct ctl_table *t, bool quiet, const char *what);

/* rdma.c: the RDMA subsystem's view of devices and ports (RDMA_NL_NLDEV) */
struct ctl_rdma_port {
	char dev[64];
	unsigned int port;
	const char *state;	/* "ACTIVE", ... as rdma link prints them */
	const char *phys_state;
	const char *link_layer;	/* "Ethernet", "InfiniBand", or NULL */
	char protocol[16];	/* the device's: "roce", "ib", "iw" or "" */
	char netdev[32];	/* "" when none */
};

int ctl_rdma_ports(struct ctl_rdma_port **ports, size_t *n);

#endif /* MRPOOLCTL_NL_H */
