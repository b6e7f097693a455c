// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Netlink through libnl-3: a generic netlink socket on the module's
 * "mrpool" family (include/uapi/mrpool_nl.h), and the errno behind a
 * libnl error code, so failures reach ctl_warn_missing() like every
 * other source's.
 */
#include "mrpoolctl.h"
#include "nl.h"

#include <errno.h>
#include <netlink/errno.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>

#include "uapi/mrpool_nl.h"

/* libnl reports its own codes (NLE_*): back to what the kernel said. */
int ctl_nl_errno(int nlerr)
{
	switch (nlerr < 0 ? -nlerr : nlerr) {
	case NLE_OBJ_NOTFOUND:
		return ENOENT;
	case NLE_PERM:
		return EPERM;
	case NLE_NOACCESS:
		return EACCES;
	case NLE_NOMEM:
		return ENOMEM;
	case NLE_INVAL:
		return EINVAL;
	case NLE_RANGE:
		return ERANGE;
	case NLE_OPNOTSUPP:
		return EOPNOTSUPP;
	case NLE_NODEV:
		return ENODEV;
	case NLE_AGAIN:
		return EAGAIN;
	case NLE_INTR:
		return EINTR;
	case NLE_AF_NOSUPPORT:
	case NLE_PROTO_MISMATCH:
		return EPROTONOSUPPORT;
	default:
		return EIO;
	}
}

void ctl_nl_close(struct ctl_nl *nl)
{
	nl_socket_free(nl->sk);
	nl->sk = NULL;
}

/*
 * Connect to generic netlink and find the family; with @events also join
 * its multicast group. Returns 0 or -errno (-ENOENT: no such family, the
 * module is not loaded or predates it).
 */
int ctl_nl_open(struct ctl_nl *nl, bool events)
{
	int ret, grp;

	nl->sk = nl_socket_alloc();
	if (!nl->sk)
		return -ENOMEM;
	ret = genl_connect(nl->sk);
	if (ret < 0)
		goto fail;
	nl->family = genl_ctrl_resolve(nl->sk, MRPOOL_GENL_NAME);
	if (nl->family < 0) {
		ret = nl->family;
		goto fail;
	}
	if (events) {
		grp = genl_ctrl_resolve_grp(nl->sk, MRPOOL_GENL_NAME,
					    MRPOOL_GENL_MCGRP_EVENTS);
		if (grp < 0) {
			ret = grp;
			goto fail;
		}
		/* Events are not answers to anything we sent. */
		nl_socket_disable_seq_check(nl->sk);
		ret = nl_socket_add_membership(nl->sk, grp);
		if (ret < 0)
			goto fail;
	}
	return 0;

fail:
	ctl_nl_close(nl);
	return -ctl_nl_errno(ret);
}

/*
 * Dump command @cmd of the family into @t, a table of @ncols columns named
 * @head: @row (a libnl valid-message callback, passed a struct
 * ctl_nl_rows) adds one row per message. 0 or -errno, reported (naming
 * @what) unless @quiet.
 */
int ctl_nl_dump_table(int cmd, const char *const *head, size_t ncols,
		      int (*row)(struct nl_msg *msg, void *arg),
		      struct ctl_table *t, bool quiet, const char *what)
{
	struct ctl_nl_rows rows = { .err = 0 };
	struct ctl_nl nl;
	int ret;

	ret = ctl_table_init(&rows.t, ncols, head);
	if (ret)
		return ret;
	ret = ctl_nl_open(&nl, false);
	if (ret)
		goto fail;
	nl_socket_modify_cb(nl.sk, NL_CB_VALID, NL_CB_CUSTOM, row, &rows);
	ret = genl_send_simple(nl.sk, nl.family, cmd, MRPOOL_GENL_VERSION,
			       NLM_F_DUMP);
	if (ret >= 0)
		ret = nl_recvmsgs_default(nl.sk);
	ctl_nl_close(&nl);
	ret = ret < 0 ? -ctl_nl_errno(ret) : rows.err;
	if (ret)
		goto fail;
	*t = rows.t;
	return 0;
fail:
	if (!quiet)
		ctl_warn_missing(ret, what);
	ctl_table_free(&rows.t);
	return ret;
}
