// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The RDMA subsystem's own view of each device and port, as `rdma link`
 * shows it, from the kernel's RDMA netlink (NETLINK_RDMA, client
 * RDMA_NL_NLDEV): a dump of RDMA_NLDEV_CMD_GET for each device's
 * protocol, then of RDMA_NLDEV_CMD_PORT_GET for every port's state,
 * physical state and netdev, one device at a time: the kernel dumps ports
 * only for the device index a request names (and reports a request
 * without one in the dump's end, which libnl takes for success).
 * Neither needs privilege. The link layer follows from the protocol
 * (RoCE and iWARP run over Ethernet).
 */
#include "mrpoolctl.h"
#include "nl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <netlink/netlink.h>
#include <netlink/msg.h>
#include <netlink/attr.h>
#include <rdma/rdma_netlink.h>

/* Values of the IB spec, printed as the rdma tool prints them. */
static const char *const ctl_port_states[] = {
	"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER",
};

static const char *const ctl_phys_states[] = {
	"NOP", "SLEEP", "POLLING", "DISABLED", "ARMED", "LINK_UP",
	"LINK_ERROR_RECOVER", "PHY_TEST",
};

struct ctl_rdma_dev {
	unsigned int index;
	char name[64];
	char protocol[16];
};

struct ctl_rdma_dump {
	struct ctl_rdma_dev *devs;
	size_t ndevs;
	struct ctl_rdma_port *ports;
	size_t nports;
	int err;
};

static struct nla_policy ctl_rdma_policy[RDMA_NLDEV_ATTR_MAX] = {
	[RDMA_NLDEV_ATTR_DEV_INDEX] = { .type = NLA_U32 },
	[RDMA_NLDEV_ATTR_DEV_NAME] = { .type = NLA_STRING },
	[RDMA_NLDEV_ATTR_PORT_INDEX] = { .type = NLA_U32 },
	[RDMA_NLDEV_ATTR_PORT_STATE] = { .type = NLA_U8 },
	[RDMA_NLDEV_ATTR_PORT_PHYS_STATE] = { .type = NLA_U8 },
	[RDMA_NLDEV_ATTR_NDEV_NAME] = { .type = NLA_STRING },
	[RDMA_NLDEV_ATTR_DEV_PROTOCOL] = { .type = NLA_STRING },
};

static const char *ctl_rdma_name(const char *const *names, size_t n,
				 unsigned int v)
{
	return v < n ? names[v] : "UNKNOWN";
}

static int ctl_rdma_parse(struct nl_msg *msg, struct nlattr **tb)
{
	return nlmsg_parse(nlmsg_hdr(msg), 0, tb, RDMA_NLDEV_ATTR_MAX - 1,
			   ctl_rdma_policy);
}

static int ctl_rdma_dev_cb(struct nl_msg *msg, void *arg)
{
	struct nlattr *tb[RDMA_NLDEV_ATTR_MAX] = { NULL };
	struct ctl_rdma_dump *d = arg;
	struct ctl_rdma_dev *v;

	if (ctl_rdma_parse(msg, tb) < 0 || !tb[RDMA_NLDEV_ATTR_DEV_NAME] ||
	    !tb[RDMA_NLDEV_ATTR_DEV_INDEX])
		return NL_SKIP;
	v = realloc(d->devs, (d->ndevs + 1) * sizeof(*v));
	if (!v) {
		d->err = -ENOMEM;
		return NL_STOP;
	}
	d->devs = v;
	v += d->ndevs++;
	memset(v, 0, sizeof(*v));
	v->index = nla_get_u32(tb[RDMA_NLDEV_ATTR_DEV_INDEX]);
	snprintf(v->name, sizeof(v->name), "%s",
		 nla_get_string(tb[RDMA_NLDEV_ATTR_DEV_NAME]));
	if (tb[RDMA_NLDEV_ATTR_DEV_PROTOCOL])
		snprintf(v->protocol, sizeof(v->protocol), "%s",
			 nla_get_string(tb[RDMA_NLDEV_ATTR_DEV_PROTOCOL]));
	return NL_OK;
}

static int ctl_rdma_port_cb(struct nl_msg *msg, void *arg)
{
	struct nlattr *tb[RDMA_NLDEV_ATTR_MAX] = { NULL };
	struct ctl_rdma_dump *d = arg;
	struct ctl_rdma_port *p;

	if (ctl_rdma_parse(msg, tb) < 0 || !tb[RDMA_NLDEV_ATTR_DEV_NAME] ||
	    !tb[RDMA_NLDEV_ATTR_PORT_INDEX])
		return NL_SKIP;
	p = realloc(d->ports, (d->nports + 1) * sizeof(*p));
	if (!p) {
		d->err = -ENOMEM;
		return NL_STOP;
	}
	d->ports = p;
	p += d->nports++;
	memset(p, 0, sizeof(*p));
	snprintf(p->dev, sizeof(p->dev), "%s",
		 nla_get_string(tb[RDMA_NLDEV_ATTR_DEV_NAME]));
	p->port = nla_get_u32(tb[RDMA_NLDEV_ATTR_PORT_INDEX]);
	if (tb[RDMA_NLDEV_ATTR_PORT_STATE])
		p->state = ctl_rdma_name(ctl_port_states,
					 ARRAY_SIZE(ctl_port_states),
					 nla_get_u8(tb[RDMA_NLDEV_ATTR_PORT_STATE]));
	if (tb[RDMA_NLDEV_ATTR_PORT_PHYS_STATE])
		p->phys_state = ctl_rdma_name(ctl_phys_states,
					      ARRAY_SIZE(ctl_phys_states),
					      nla_get_u8(tb[RDMA_NLDEV_ATTR_PORT_PHYS_STATE]));
	if (tb[RDMA_NLDEV_ATTR_NDEV_NAME])
		snprintf(p->netdev, sizeof(p->netdev), "%s",
			 nla_get_string(tb[RDMA_NLDEV_ATTR_NDEV_NAME]));
	return NL_OK;
}

/* A dump of @cmd, of device @index unless it is -1, through @cb. */
static int ctl_rdma_dump(struct nl_sock *sk, int cmd, long index,
			 nl_recvmsg_msg_cb_t cb, struct ctl_rdma_dump *d)
{
	struct nl_msg *msg;
	int ret;

	msg = nlmsg_alloc_simple(RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd),
				 NLM_F_DUMP);
	if (!msg)
		return -ENOMEM;
	ret = index >= 0 ? nla_put_u32(msg, RDMA_NLDEV_ATTR_DEV_INDEX,
				       (unsigned int)index) : 0;
	if (ret >= 0)
		ret = nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, cb, d);
	if (ret >= 0)
		ret = nl_send_auto(sk, msg);
	nlmsg_free(msg);
	if (ret >= 0)
		ret = nl_recvmsgs_default(sk);
	if (ret < 0)
		return -ctl_nl_errno(ret);
	return d->err;
}

/* Each port's protocol and link layer from its device's entry. */
static void ctl_rdma_join(struct ctl_rdma_dump *d)
{
	size_t i, j;

	for (i = 0; i < d->nports; i++)
		for (j = 0; j < d->ndevs; j++) {
			if (strcmp(d->ports[i].dev, d->devs[j].name) ||
			    !d->devs[j].protocol[0])
				continue;
			memcpy(d->ports[i].protocol, d->devs[j].protocol,
			       sizeof(d->ports[i].protocol));
			d->ports[i].link_layer =
				strcmp(d->devs[j].protocol, "ib") ?
				"Ethernet" : "InfiniBand";
		}
}

/* Every port of every RDMA device into *@ports (free()). 0 or -errno. */
int ctl_rdma_ports(struct ctl_rdma_port **ports, size_t *n)
{
	struct ctl_rdma_dump d = { 0 };
	struct nl_sock *sk;
	size_t i;
	int ret;

	sk = nl_socket_alloc();
	if (!sk)
		return -ENOMEM;
	ret = nl_connect(sk, NETLINK_RDMA);
	if (ret < 0) {
		ret = -ctl_nl_errno(ret);
		goto out;
	}
	ret = ctl_rdma_dump(sk, RDMA_NLDEV_CMD_GET, -1, ctl_rdma_dev_cb, &d);
	for (i = 0; !ret && i < d.ndevs; i++)
		ret = ctl_rdma_dump(sk, RDMA_NLDEV_CMD_PORT_GET, d.devs[i].index,
				    ctl_rdma_port_cb, &d);
	if (ret)
		goto out;
	ctl_rdma_join(&d);
	*ports = d.ports;
	*n = d.nports;
	d.ports = NULL;
out:
	free(d.devs);
	free(d.ports);
	nl_socket_free(sk);
	return ret;
}
