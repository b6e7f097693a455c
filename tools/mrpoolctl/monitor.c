// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mrpoolctl monitor [COUNT]: join the "events" group of the module's
 * generic netlink family and print each event as it comes, one line each
 * ("TIME EVENT key=value ...") or, with --json, one object per line. It
 * says on stderr when it is listening, so a script can start it and wait
 * for that before it acts. Stops after COUNT events, or at SIGINT or
 * SIGTERM (status 0); if the socket overflows (events came faster than
 * they were read) it says so and goes on. It also listens to nlctrl's
 * "notify" group: when the module is unloaded the kernel drops every
 * member of its groups, so at the family's return (CTRL_CMD_NEWFAMILY) it
 * joins the events group again, saying so on stderr.
 */
#define _GNU_SOURCE	/* ppoll() */
#include "mrpoolctl.h"
#include "nl.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/socket.h>
#include <netlink/msg.h>

#include "uapi/mrpool.h"
#include "uapi/mrpool_nl.h"

static const char *const ctl_event_names[] = {
	[MRPOOL_EVENT_GROW_FAILED] = "grow_failed",
	[MRPOOL_EVENT_EXHAUSTED] = "exhausted",
	[MRPOOL_EVENT_QUARANTINE_HIGH] = "quarantine_high",
	[MRPOOL_EVENT_DEV_ADDED] = "dev_added",
	[MRPOOL_EVENT_DEV_READY] = "dev_ready",
	[MRPOOL_EVENT_DEV_FAILED] = "dev_failed",
	[MRPOOL_EVENT_DEV_REMOVED] = "dev_removed",
	[MRPOOL_EVENT_TRIM] = "trim",
	[MRPOOL_EVENT_ORPHANS_FULL] = "orphans_full",
};

static const char *const ctl_dev_states[] = {
	[MRPOOL_DEVICE_READY] = "ready",
	[MRPOOL_DEVICE_UNSUPPORTED] = "unsupported",
	[MRPOOL_DEVICE_FAILED] = "failed",
	[MRPOOL_DEVICE_REMOVED] = "removed",
};

/* Sizes checked by libnl before any nla_get_*(). */
static struct nla_policy ctl_ev_policy[MRPOOL_A_MAX + 1] = {
	[MRPOOL_A_TOTAL_BYTES] = { .type = NLA_U64 },
	[MRPOOL_A_FREE_BYTES] = { .type = NLA_U64 },
	[MRPOOL_A_USED_BYTES] = { .type = NLA_U64 },
	[MRPOOL_A_QUARANTINED_BYTES] = { .type = NLA_U64 },
	[MRPOOL_A_MAX_BYTES] = { .type = NLA_U64 },
	[MRPOOL_A_DEVICE] = { .type = NLA_NESTED },
	[MRPOOL_A_EVENT] = { .type = NLA_U32 },
	[MRPOOL_A_EVENT_CHUNKS] = { .type = NLA_U32 },
	[MRPOOL_A_EVENT_THRESHOLD_BYTES] = { .type = NLA_U64 },
	[MRPOOL_A_EVENT_SUPPRESSED] = { .type = NLA_U32 },
};

/* nlctrl's family messages: the name, the id, the groups. */
static struct nla_policy ctl_ctrl_policy[CTRL_ATTR_MAX + 1] = {
	[CTRL_ATTR_FAMILY_ID] = { .type = NLA_U16 },
	[CTRL_ATTR_FAMILY_NAME] = { .type = NLA_STRING },
	[CTRL_ATTR_MCAST_GROUPS] = { .type = NLA_NESTED },
};

static struct nla_policy ctl_grp_policy[CTRL_ATTR_MCAST_GRP_MAX + 1] = {
	[CTRL_ATTR_MCAST_GRP_NAME] = { .type = NLA_STRING },
	[CTRL_ATTR_MCAST_GRP_ID] = { .type = NLA_U32 },
};

static struct nla_policy ctl_dev_policy[MRPOOL_DEV_A_MAX + 1] = {
	[MRPOOL_DEV_A_NAME] = { .type = NLA_STRING },
	[MRPOOL_DEV_A_STATE] = { .type = NLA_U32 },
	[MRPOOL_DEV_A_NODE] = { .type = NLA_U32 },
	[MRPOOL_DEV_A_CHUNKS] = { .type = NLA_U32 },
	[MRPOOL_DEV_A_KBUFS] = { .type = NLA_U32 },
	[MRPOOL_DEV_A_REGS] = { .type = NLA_U64 },
	[MRPOOL_DEV_A_REG_FAILURES] = { .type = NLA_U64 },
	[MRPOOL_DEV_A_WR_TIMEOUTS] = { .type = NLA_U64 },
	[MRPOOL_DEV_A_REASON] = { .type = NLA_STRING },
};

/* Top-level u64 attributes shown with every pool event, in this order. */
static const struct {
	int attr;
	const char *name;
} ctl_ev_u64[] = {
	{ MRPOOL_A_TOTAL_BYTES, "total_bytes" },
	{ MRPOOL_A_FREE_BYTES, "free_bytes" },
	{ MRPOOL_A_USED_BYTES, "used_bytes" },
	{ MRPOOL_A_QUARANTINED_BYTES, "quarantined_bytes" },
	{ MRPOOL_A_MAX_BYTES, "max_bytes" },
	{ MRPOOL_A_EVENT_THRESHOLD_BYTES, "threshold_bytes" },
};

struct ctl_monitor {
	struct ctl_nl *nl;
	long long left;		/* events still to print; <0: no limit */
	int err;		/* output failed */
};

static volatile sig_atomic_t ctl_monitor_stop;

static void ctl_monitor_signal(int sig)
{
	(void)sig;
	ctl_monitor_stop = 1;
}

static const char *ctl_name(const char *const *names, size_t n, unsigned int v)
{
	return v < n && names[v] ? names[v] : "unknown";
}

/* key=value for text, "key":value for JSON. */
static void ctl_kv_u64(const char *key, unsigned long long v)
{
	if (ctl_json)
		ctl_json_uint(key, v);
	else
		printf(" %s=%llu", key, v);
}

static void ctl_kv_int(const char *key, long long v)
{
	if (ctl_json)
		ctl_json_int(key, v);
	else
		printf(" %s=%lld", key, v);
}

/* A string value; text quotes it when it has blanks (a reason). */
static void ctl_kv_str(const char *key, const char *v)
{
	if (ctl_json)
		ctl_json_str(key, v);
	else if (strpbrk(v, " \t\""))
		printf(" %s=\"%s\"", key, v);
	else
		printf(" %s=%s", key, v);
}

static void ctl_monitor_device(struct nlattr *nest)
{
	struct nlattr *tb[MRPOOL_DEV_A_MAX + 1];

	if (nla_parse_nested(tb, MRPOOL_DEV_A_MAX, nest, ctl_dev_policy) < 0)
		return;
	if (ctl_json)
		ctl_json_obj("device");
	if (tb[MRPOOL_DEV_A_NAME])
		ctl_kv_str(ctl_json ? "name" : "device",
			   nla_get_string(tb[MRPOOL_DEV_A_NAME]));
	if (tb[MRPOOL_DEV_A_STATE])
		ctl_kv_str("state", ctl_name(ctl_dev_states,
					     ARRAY_SIZE(ctl_dev_states),
					     nla_get_u32(tb[MRPOOL_DEV_A_STATE])));
	if (tb[MRPOOL_DEV_A_NODE])
		ctl_kv_int("node", (int)nla_get_u32(tb[MRPOOL_DEV_A_NODE]));
	if (tb[MRPOOL_DEV_A_CHUNKS])
		ctl_kv_u64("chunks", nla_get_u32(tb[MRPOOL_DEV_A_CHUNKS]));
	if (tb[MRPOOL_DEV_A_REG_FAILURES])
		ctl_kv_u64("reg_failures",
			   nla_get_u64(tb[MRPOOL_DEV_A_REG_FAILURES]));
	if (tb[MRPOOL_DEV_A_REASON])
		ctl_kv_str("reason", nla_get_string(tb[MRPOOL_DEV_A_REASON]));
	if (ctl_json)
		ctl_json_obj_end();
}

/* The events group's id in a NEWFAMILY message's groups; <0 if none. */
static int ctl_monitor_grp(struct nlattr *groups)
{
	struct nlattr *tb[CTRL_ATTR_MCAST_GRP_MAX + 1], *g;
	int rem;

	nla_for_each_nested(g, groups, rem) {
		if (nla_parse_nested(tb, CTRL_ATTR_MCAST_GRP_MAX, g,
				     ctl_grp_policy) < 0 ||
		    !tb[CTRL_ATTR_MCAST_GRP_NAME] || !tb[CTRL_ATTR_MCAST_GRP_ID])
			continue;
		if (!strcmp(nla_get_string(tb[CTRL_ATTR_MCAST_GRP_NAME]),
			    MRPOOL_GENL_MCGRP_EVENTS))
			return (int)nla_get_u32(tb[CTRL_ATTR_MCAST_GRP_ID]);
	}
	return -1;
}

/*
 * nlctrl says a family came or went. The module's going dropped our
 * membership; its coming back (a new id, perhaps a new group id) is
 * joined again.
 */
static void ctl_monitor_ctrl(struct ctl_monitor *m, struct nlmsghdr *h)
{
	struct genlmsghdr *gh = genlmsg_hdr(h);
	struct nlattr *tb[CTRL_ATTR_MAX + 1];
	int grp, ret;

	if ((gh->cmd != CTRL_CMD_NEWFAMILY && gh->cmd != CTRL_CMD_DELFAMILY) ||
	    genlmsg_parse(h, 0, tb, CTRL_ATTR_MAX, ctl_ctrl_policy) < 0 ||
	    !tb[CTRL_ATTR_FAMILY_NAME] || !tb[CTRL_ATTR_FAMILY_ID] ||
	    strcmp(nla_get_string(tb[CTRL_ATTR_FAMILY_NAME]), MRPOOL_GENL_NAME))
		return;
	if (gh->cmd == CTRL_CMD_DELFAMILY) {
		fprintf(stderr, "%s: family %s gone (module unloaded): waiting for it\n",
			ctl_prog, MRPOOL_GENL_NAME);
		return;
	}
	grp = tb[CTRL_ATTR_MCAST_GROUPS] ?
	      ctl_monitor_grp(tb[CTRL_ATTR_MCAST_GROUPS]) : -1;
	if (grp < 0) {
		ctl_err("family %s is back without its %s group",
			MRPOOL_GENL_NAME, MRPOOL_GENL_MCGRP_EVENTS);
		return;
	}
	m->nl->family = nla_get_u16(tb[CTRL_ATTR_FAMILY_ID]);
	ret = nl_socket_add_membership(m->nl->sk, grp);
	if (ret < 0) {
		ctl_errno(ctl_nl_errno(ret), "joining group %s again",
			  MRPOOL_GENL_MCGRP_EVENTS);
		return;
	}
	fprintf(stderr, "%s: family %s is back: listening again\n", ctl_prog,
		MRPOOL_GENL_NAME);
}

static int ctl_monitor_msg(struct nl_msg *msg, void *arg)
{
	struct genlmsghdr *gh = genlmsg_hdr(nlmsg_hdr(msg));
	struct nlattr *tb[MRPOOL_A_MAX + 1];
	struct ctl_monitor *m = arg;
	char when[40];
	struct timespec ts;
	struct tm tm;
	size_t i;

	if (nlmsg_hdr(msg)->nlmsg_type == GENL_ID_CTRL) {
		ctl_monitor_ctrl(m, nlmsg_hdr(msg));
		return NL_SKIP;
	}
	if (nlmsg_hdr(msg)->nlmsg_type != m->nl->family ||
	    gh->cmd != MRPOOL_CMD_EVENT ||
	    genlmsg_parse(nlmsg_hdr(msg), 0, tb, MRPOOL_A_MAX,
			  ctl_ev_policy) < 0 || !tb[MRPOOL_A_EVENT])
		return NL_SKIP;

	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(when + strlen(when), sizeof(when) - strlen(when), ".%03ld",
		 ts.tv_nsec / 1000000);
	if (ctl_json) {
		ctl_json_obj(NULL);
		ctl_json_str("time", when);
		ctl_json_str("event", ctl_name(ctl_event_names,
					       ARRAY_SIZE(ctl_event_names),
					       nla_get_u32(tb[MRPOOL_A_EVENT])));
	} else {
		printf("%s %s", when,
		       ctl_name(ctl_event_names, ARRAY_SIZE(ctl_event_names),
				nla_get_u32(tb[MRPOOL_A_EVENT])));
	}
	if (tb[MRPOOL_A_DEVICE])
		ctl_monitor_device(tb[MRPOOL_A_DEVICE]);
	if (tb[MRPOOL_A_EVENT_CHUNKS])
		ctl_kv_u64("chunks", nla_get_u32(tb[MRPOOL_A_EVENT_CHUNKS]));
	if (tb[MRPOOL_A_EVENT_SUPPRESSED])
		ctl_kv_u64("suppressed",
			   nla_get_u32(tb[MRPOOL_A_EVENT_SUPPRESSED]));
	for (i = 0; i < ARRAY_SIZE(ctl_ev_u64); i++)
		if (tb[ctl_ev_u64[i].attr])
			ctl_kv_u64(ctl_ev_u64[i].name,
				   nla_get_u64(tb[ctl_ev_u64[i].attr]));
	if (ctl_json)
		ctl_json_obj_end();
	else
		putchar('\n');
	/* Each event as it happens, also into a pipe. */
	if (fflush(stdout) || ferror(stdout))
		m->err = errno ? errno : EIO;
	if (m->left > 0)
		m->left--;
	return NL_OK;
}

int ctl_cmd_monitor(const struct ctl_cmd *cmd, int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = ctl_monitor_signal };
	struct ctl_monitor m = { .left = -1 };
	sigset_t block, unblocked;
	struct ctl_nl nl;
	struct pollfd pfd;
	long long count;
	int ret, grp;

	if (argc > 2)
		return ctl_usage_error(cmd, "unexpected argument '%s'", argv[2]);
	if (argc > 1) {
		if (!ctl_parse_ll(argv[1], &count) || count < 1)
			return ctl_usage_error(cmd, "COUNT: '%s' is not a positive integer",
					       argv[1]);
		m.left = count;
	}
	ret = ctl_nl_open(&nl, true);
	if (ret) {
		ctl_warn_missing(ret, "generic netlink family " MRPOOL_GENL_NAME);
		return CTL_FAIL;
	}
	m.nl = &nl;
	/* The module's unloading and loading again, from nlctrl. */
	grp = genl_ctrl_resolve_grp(nl.sk, "nlctrl", "notify");
	if (grp >= 0)
		grp = nl_socket_add_membership(nl.sk, grp);
	if (grp < 0)
		ctl_err("cannot follow module reloads (nlctrl notify: %s)",
			nl_geterror(grp));
	nl_socket_modify_cb(nl.sk, NL_CB_VALID, NL_CB_CUSTOM, ctl_monitor_msg,
			    &m);
	/*
	 * SIGINT and SIGTERM are blocked but while ppoll() waits: one that
	 * comes between the check of the flag and the wait ends the wait
	 * instead of going unnoticed until the next event.
	 */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigprocmask(SIG_BLOCK, &block, &unblocked);
	sigdelset(&unblocked, SIGINT);
	sigdelset(&unblocked, SIGTERM);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	fprintf(stderr, "%s: listening for %s events (group %s)\n", ctl_prog,
		MRPOOL_GENL_NAME, MRPOOL_GENL_MCGRP_EVENTS);

	pfd.fd = nl_socket_get_fd(nl.sk);
	pfd.events = POLLIN;
	ret = CTL_OK;
	while (!ctl_monitor_stop && m.left != 0 && !m.err) {
		if (ppoll(&pfd, 1, NULL, &unblocked) < 0) {
			if (errno == EINTR)
				continue;
			ctl_errno(errno, "poll");
			ret = CTL_FAIL;
			break;
		}
		ret = nl_recvmsgs_default(nl.sk);
		if (ret == -NLE_NOMEM || ret == -NLE_MSG_OVERFLOW) {
			/* ENOBUFS from the socket: the kernel dropped some. */
			ctl_err("events were lost (receive buffer overflow)");
		} else if (ret < 0 && ret != -NLE_INTR && ret != -NLE_AGAIN) {
			ctl_warn_missing(ctl_nl_errno(ret),
					 "generic netlink family " MRPOOL_GENL_NAME);
			ret = CTL_FAIL;
			break;
		}
		ret = CTL_OK;
	}
	if (m.err) {
		ctl_errno(m.err, "writing output");
		ret = CTL_FAIL;
	}
	ctl_nl_close(&nl);
	return ret;
}
