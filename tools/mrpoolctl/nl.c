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
