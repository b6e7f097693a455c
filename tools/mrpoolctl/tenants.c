// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mrpoolctl tenants: what each user pool memory is charged to holds,
 * through the module's generic netlink family (MRPOOL_CMD_TENANT_GET,
 * include/uapi/mrpool_nl.h): uid, bytes, of those quarantined and
 * charged to RLIMIT_MEMLOCK, and what was taken from the user to the
 * orphans and is still held (0 from a module that does not say). Root of the initial namespaces gets every
 * user and the orphans (the charges of dead owners' slices another
 * process still holds, shown as uid "orphans"); anyone else its own
 * user's line, if that user holds anything.
 */
#include "mrpoolctl.h"
#include "nl.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <netlink/genl/genl.h>

#include "uapi/mrpool_nl.h"

static struct nla_policy ctl_tenant_policy[MRPOOL_A_MAX + 1] = {
	[MRPOOL_A_TENANT_UID] = { .type = NLA_U32 },
	[MRPOOL_A_TENANT_BYTES] = { .type = NLA_U64 },
	[MRPOOL_A_TENANT_QUARANTINED_BYTES] = { .type = NLA_U64 },
	[MRPOOL_A_TENANT_MEMLOCK_BYTES] = { .type = NLA_U64 },
	[MRPOOL_A_TENANT_ORPHANS] = { .type = NLA_FLAG },
	[MRPOOL_A_TENANT_ORPHANED_BYTES] = { .type = NLA_U64 },
};

static const char *const ctl_tenant_head[] = {
	"uid", "bytes", "quarantined_bytes", "memlock_bytes", "orphaned_bytes",
};

static void ctl_tenant_u64(char *buf, size_t len, struct nlattr *a)
{
	snprintf(buf, len, "%llu", a ? (unsigned long long)nla_get_u64(a) : 0ULL);
}

static int ctl_tenant_msg(struct nl_msg *msg, void *arg)
{
	struct ctl_nl_rows *rows = arg;
	struct nlattr *tb[MRPOOL_A_MAX + 1];
	char uid[24], bytes[24], quar[24], memlock[24], orphaned[24];
	const char *row[ARRAY_SIZE(ctl_tenant_head)] = {
		uid, bytes, quar, memlock, orphaned,
	};

	if (genlmsg_parse(nlmsg_hdr(msg), 0, tb, MRPOOL_A_MAX,
			  ctl_tenant_policy) < 0 ||
	    (!tb[MRPOOL_A_TENANT_UID] && !tb[MRPOOL_A_TENANT_ORPHANS])) {
		rows->err = -EPROTO;
		return NL_SKIP;
	}
	if (tb[MRPOOL_A_TENANT_ORPHANS])
		snprintf(uid, sizeof(uid), "orphans");
	else
		snprintf(uid, sizeof(uid), "%u",
			 nla_get_u32(tb[MRPOOL_A_TENANT_UID]));
	ctl_tenant_u64(bytes, sizeof(bytes), tb[MRPOOL_A_TENANT_BYTES]);
	ctl_tenant_u64(quar, sizeof(quar),
		       tb[MRPOOL_A_TENANT_QUARANTINED_BYTES]);
	ctl_tenant_u64(memlock, sizeof(memlock),
		       tb[MRPOOL_A_TENANT_MEMLOCK_BYTES]);
	ctl_tenant_u64(orphaned, sizeof(orphaned),
		       tb[MRPOOL_A_TENANT_ORPHANED_BYTES]);
	if (ctl_table_add(&rows->t, row))
		rows->err = -ENOMEM;
	return NL_OK;
}

/*
 * Every tenant the caller may see into @t (columns ctl_tenant_head); 0 or
 * -errno, reported unless @quiet.
 */
int ctl_tenant_table(struct ctl_table *t, bool quiet)
{
	return ctl_nl_dump_table(MRPOOL_CMD_TENANT_GET, ctl_tenant_head,
				 ARRAY_SIZE(ctl_tenant_head), ctl_tenant_msg, t,
				 quiet,
				 "netlink command TENANT_GET of " MRPOOL_GENL_NAME);
}

int ctl_cmd_tenants(const struct ctl_cmd *cmd, int argc, char **argv)
{
	struct ctl_table t;
	int ret;

	ret = ctl_no_args(cmd, argc, argv);
	if (ret)
		return ret;
	if (ctl_tenant_table(&t, false))
		return CTL_FAIL;
	if (ctl_json) {
		ctl_json_obj(NULL);
		ctl_json_table("tenants", &t);
		ctl_json_obj_end();
	} else {
		ctl_table_print(&t, stdout);
		printf("%zu tenants\n", t.nrows);
	}
	ctl_table_free(&t);
	return CTL_OK;
}
