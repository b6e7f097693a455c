// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mrpoolctl quota: cgroup v2 pool quotas through the module's generic
 * netlink family (MRPOOL_CMD_QUOTA_*, include/uapi/mrpool_nl.h).
 *
 *   quota set CGROUP SIZE   give CGROUP a quota (root of the initial
 *                           namespaces); SIZE in bytes or with a K, M, G
 *                           or T suffix (binary: 8G is 8 GiB)
 *   quota del CGROUP        delete its limit (its usage stays listed
 *                           until the memory is back)
 *   quota list              every quota: path, cgroup id, limit, usage,
 *                           quarantined, removed (anyone may list)
 *
 * CGROUP is a path from the cgroup2 root ("/pods/pod42") or under its
 * mount point ("/sys/fs/cgroup/pods/pod42").
 */
#include "mrpoolctl.h"
#include "nl.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <netlink/genl/genl.h>

#include "uapi/mrpool_nl.h"

#define CTL_CGROUP2	"/sys/fs/cgroup"

static struct nla_policy ctl_quota_policy[MRPOOL_A_MAX + 1] = {
	[MRPOOL_A_QUOTA_PATH] = { .type = NLA_STRING },
	[MRPOOL_A_QUOTA_CGROUP_ID] = { .type = NLA_U64 },
	[MRPOOL_A_QUOTA_LIMIT_BYTES] = { .type = NLA_U64 },
	[MRPOOL_A_QUOTA_USAGE_BYTES] = { .type = NLA_U64 },
	[MRPOOL_A_QUOTA_QUARANTINED_BYTES] = { .type = NLA_U64 },
	[MRPOOL_A_QUOTA_REMOVED] = { .type = NLA_FLAG },
};

/*
 * "8G", "512M", "4096": bytes, binary suffixes (an optional "i" and "B"
 * after the letter). Returns 0, or -EINVAL.
 */
int ctl_parse_size(const char *text, unsigned long long *bytes)
{
	static const char units[] = "KMGTP";
	unsigned long long v, mul = 1;
	const char *u;
	char *end;

	if (!text[0] || text[0] == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(text, &end, 10);
	if (errno || end == text)
		return -EINVAL;
	if (*end) {
		u = strchr(units, *end == 'k' ? 'K' : *end);
		if (!u)
			return -EINVAL;
		mul = 1ULL << (10 * (u - units + 1));
		end++;
		if (*end == 'i')
			end++;
		if (*end == 'B')
			end++;
		if (*end)
			return -EINVAL;
	}
	if (v > UINT64_MAX / mul)
		return -EINVAL;
	*bytes = v * mul;
	return 0;
}

/* @arg as a path from the cgroup2 root: CTL_CGROUP2's prefix dropped. */
static const char *ctl_cgroup_rel(const char *arg)
{
	size_t n = strlen(CTL_CGROUP2);

	if (!strncmp(arg, CTL_CGROUP2, n) && (arg[n] == '/' || !arg[n]))
		return arg[n] ? arg + n : "/";
	return arg;
}

/* Send a SET or DEL request for @cgroup; 0, -errno, or 1 when reported. */
static int ctl_quota_request(int cmd, const char *cgroup,
			     unsigned long long limit)
{
	struct nl_msg *msg;
	struct ctl_nl nl;
	int ret;

	ret = ctl_nl_open(&nl, false);
	if (ret) {
		ctl_warn_missing(ret, "netlink family " MRPOOL_GENL_NAME);
		return 1;	/* reported */
	}
	msg = nlmsg_alloc();
	if (!msg) {
		ret = -ENOMEM;
		goto close;
	}
	if (!genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, nl.family, 0, 0, cmd,
			 MRPOOL_GENL_VERSION) ||
	    nla_put_string(msg, MRPOOL_A_QUOTA_PATH, ctl_cgroup_rel(cgroup)) ||
	    (cmd == MRPOOL_CMD_QUOTA_SET &&
	     nla_put_u64(msg, MRPOOL_A_QUOTA_LIMIT_BYTES, limit))) {
		nlmsg_free(msg);
		ret = -ENOMEM;
		goto close;
	}
	/* Frees @msg; the kernel's errno comes back as a libnl code. */
	ret = nl_send_sync(nl.sk, msg);
	if (ret < 0)
		ret = -ctl_nl_errno(ret);
close:
	ctl_nl_close(&nl);
	return ret;
}

static int ctl_quota_msg(struct nl_msg *msg, void *arg)
{
	struct ctl_nl_rows *rows = arg;
	struct nlattr *tb[MRPOOL_A_MAX + 1];
	char id[24], limit[24], usage[24], quar[24];
	const char *row[6];

	if (genlmsg_parse(nlmsg_hdr(msg), 0, tb, MRPOOL_A_MAX,
			  ctl_quota_policy) < 0 || !tb[MRPOOL_A_QUOTA_PATH]) {
		rows->err = -EPROTO;
		return NL_SKIP;
	}
	snprintf(id, sizeof(id), "%llu", tb[MRPOOL_A_QUOTA_CGROUP_ID] ?
		 (unsigned long long)nla_get_u64(tb[MRPOOL_A_QUOTA_CGROUP_ID]) :
		 0ULL);
	if (tb[MRPOOL_A_QUOTA_LIMIT_BYTES])
		snprintf(limit, sizeof(limit), "%llu", (unsigned long long)
			 nla_get_u64(tb[MRPOOL_A_QUOTA_LIMIT_BYTES]));
	else
		snprintf(limit, sizeof(limit), "-");
	snprintf(usage, sizeof(usage), "%llu", tb[MRPOOL_A_QUOTA_USAGE_BYTES] ?
		 (unsigned long long)nla_get_u64(tb[MRPOOL_A_QUOTA_USAGE_BYTES]) :
		 0ULL);
	snprintf(quar, sizeof(quar), "%llu",
		 tb[MRPOOL_A_QUOTA_QUARANTINED_BYTES] ? (unsigned long long)
		 nla_get_u64(tb[MRPOOL_A_QUOTA_QUARANTINED_BYTES]) : 0ULL);
	row[0] = nla_get_string(tb[MRPOOL_A_QUOTA_PATH]);
	row[1] = id;
	row[2] = limit;
	row[3] = usage;
	row[4] = quar;
	row[5] = tb[MRPOOL_A_QUOTA_REMOVED] ? "1" : "0";
	if (ctl_table_add(&rows->t, row))
		rows->err = -ENOMEM;
	return NL_OK;
}

static const char *const ctl_quota_head[] = {
	"path", "cgroup_id", "limit_bytes", "bytes", "quarantined_bytes",
	"removed",
};

/*
 * Every quota into @t (columns ctl_quota_head); 0 or -errno, reported
 * unless @quiet.
 */
int ctl_quota_table(struct ctl_table *t, bool quiet)
{
	return ctl_nl_dump_table(MRPOOL_CMD_QUOTA_GET, ctl_quota_head,
				 ARRAY_SIZE(ctl_quota_head), ctl_quota_msg, t,
				 quiet, "netlink family " MRPOOL_GENL_NAME);
}

static int ctl_quota_list(const struct ctl_cmd *cmd, int argc, char **argv)
{
	struct ctl_table t;

	if (argc != 2)
		return ctl_usage_error(cmd, "unexpected argument '%s'", argv[2]);
	if (ctl_quota_table(&t, false))
		return CTL_FAIL;
	if (ctl_json) {
		ctl_json_obj(NULL);
		ctl_json_table("quotas", &t);
		ctl_json_obj_end();
	} else {
		ctl_table_print(&t, stdout);
		printf("%zu quotas\n", t.nrows);
	}
	ctl_table_free(&t);
	return CTL_OK;
}

int ctl_cmd_quota(const struct ctl_cmd *cmd, int argc, char **argv)
{
	unsigned long long limit = 0;
	const char *what;
	int ret;

	if (argc < 2)
		return ctl_usage_error(cmd, "expected set, del or list");
	what = argv[1];
	if (!strcmp(what, "list"))
		return ctl_quota_list(cmd, argc, argv);
	if (!strcmp(what, "set")) {
		if (argc != 4)
			return ctl_usage_error(cmd, "expected set CGROUP SIZE");
		if (ctl_parse_size(argv[3], &limit))
			return ctl_usage_error(cmd, "'%s' is not a size", argv[3]);
		ret = ctl_quota_request(MRPOOL_CMD_QUOTA_SET, argv[2], limit);
	} else if (!strcmp(what, "del")) {
		if (argc != 3)
			return ctl_usage_error(cmd, "expected del CGROUP");
		ret = ctl_quota_request(MRPOOL_CMD_QUOTA_DEL, argv[2], 0);
	} else {
		return ctl_usage_error(cmd, "unknown action '%s'", what);
	}
	if (ret > 0)
		return CTL_FAIL;
	if (ret == -ENOENT && !strcmp(what, "del"))
		ctl_err("%s: no quota, or no such cgroup", argv[2]);
	else if (ret == -ENOENT)
		ctl_err("%s: no such cgroup v2 directory", argv[2]);
	else if (ret == -ERANGE)
		ctl_err("%s: larger than the module accepts (%llu bytes)",
			argv[3], (unsigned long long)MRPOOL_QUOTA_MAX_BYTES);
	else if (ret == -EPERM)
		ctl_errno(-ret, "quota %s %s (root of the initial namespaces only)",
			  what, argv[2]);
	else if (ret)
		ctl_errno(-ret, "quota %s %s", what, argv[2]);
	return ret ? CTL_FAIL : CTL_OK;
}
