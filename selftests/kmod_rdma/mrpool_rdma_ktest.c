// SPDX-License-Identifier: GPL-2.0
/*
 * Test-only module: on load, for every RDMA device, takes two buffers
 * through mrpool's in-kernel API and moves bytes between them over a
 * loopback pair of kernel RC QPs in the buffers' PD: an RDMA WRITE and an
 * RDMA READ (bytes verified), a WRITE past the lent length inside the chunk
 * and one through the rkey of a freed buffer (both must fail), a WRITE
 * from a chunk a process owns through its cached lkey (must fail: the
 * buffers' PD holds no cached MR), 300 lends whose keys must all differ
 * and whose key bytes must not count up, and two sessions, each with a PD
 * of its own, whose QPs cannot reach each other's buffers. With
 * mode=lend_once dev=NAME it only lends one buffer on that device and
 * frees it (for the failure-knob tests of ib_timeout_test; session_once:
 * the same in a session of its own); mode=rdma_once dev=NAME runs the
 * tests above on that device alone (ib_recover_test: on a device that
 * recovered); with
 * mode=reclaim dev=NAME it borrows as a reclaim path would (see
 * kt_reclaim()); with mode=session_hold dev=NAME it keeps a session and
 * two buffers through the device's removal (see kt_hold()). Results are
 * TAP in /sys/kernel/debug/mrpool_rdma_ktest/tap.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/debugfs.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/mm.h>
#include <linux/vmalloc.h>
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/sched/mm.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_cache.h>
#include <net/ipv6.h>
#include <mrpool_kapi.h>

static char *mode = "";
module_param(mode, charp, 0444);
MODULE_PARM_DESC(mode, "\"\" (every test), rdma_once (every test, on dev only), lend_once (one lend on dev), session_once (one lend in a session on dev), reclaim (borrow on dev from reclaim context) or session_hold (keep a session on dev through its removal)");
static char *dev = "";
module_param(dev, charp, 0444);
MODULE_PARM_DESC(dev, "the device rdma_once, lend_once and reclaim use");
static char *foreign_dev = "";
module_param(foreign_dev, charp, 0444);
MODULE_PARM_DESC(foreign_dev, "device whose cached lkey of a process's chunk is tried");
static ulong foreign_pfn;
module_param(foreign_pfn, ulong, 0444);
MODULE_PARM_DESC(foreign_pfn, "first pfn of that chunk");
static uint foreign_lkey;
module_param(foreign_lkey, uint, 0444);
MODULE_PARM_DESC(foreign_lkey, "its lkey in mrpool's cache on foreign_dev");

/* Lends of one buffer whose keys must all differ. */
#define KT_LENDS	300

/* Bytes moved per test, at most a chunk. */
#define KT_LEN_MAX	SZ_64K
#define KT_TIMEOUT	(10 * HZ)
#define KT_MAX_RESULTS	256
#define KT_LINE		128

static DEFINE_MUTEX(kt_lock);
struct kt_result {
	bool ok;
	char text[KT_LINE];
};

static struct kt_result *kt_results;	/* numbered when shown */
static unsigned int kt_nr;
static struct dentry *kt_dir;

__printf(2, 3)
static void kt_report(bool ok, const char *fmt, ...)
{
	va_list args;

	mutex_lock(&kt_lock);
	if (kt_nr < KT_MAX_RESULTS) {
		kt_results[kt_nr].ok = ok;
		va_start(args, fmt);
		vscnprintf(kt_results[kt_nr].text, KT_LINE, fmt, args);
		va_end(args);
		kt_nr++;
	}
	mutex_unlock(&kt_lock);
}

static int tap_show(struct seq_file *m, void *v)
{
	unsigned int i;

	mutex_lock(&kt_lock);
	seq_puts(m, "TAP version 13\n");
	if (!kt_nr)
		seq_puts(m, "1..0 # SKIP no RDMA device\n");
	else
		seq_printf(m, "1..%u\n", kt_nr);
	for (i = 0; i < kt_nr; i++)
		seq_printf(m, "%s %u%s\n", kt_results[i].ok ? "ok" : "not ok",
			   i + 1, kt_results[i].text);
	mutex_unlock(&kt_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(tap);

/* One device under test: the loop and its last completion. */
struct kt_ctx {
	struct ib_device *dev;
	const char *name;
	u32 port;
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct ib_qp *qp[2];		/* qp[0] posts, qp[1] is the target */
	struct ib_cqe cqe;
	bool done;
	enum ib_wc_status status;
};

static void kt_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct kt_ctx *t = container_of(wc->wr_cqe, struct kt_ctx, cqe);

	t->status = wc->status;
	t->done = true;
}

/* Post one signalled WR on qp[0] and poll for it; -EIO on a bad status. */
static int kt_post_wait(struct kt_ctx *t, struct ib_send_wr *wr)
{
	unsigned long end = jiffies + KT_TIMEOUT;
	int ret;

	t->done = false;
	wr->wr_cqe = &t->cqe;
	wr->send_flags = IB_SEND_SIGNALED;
	ret = ib_post_send(t->qp[0], wr, NULL);
	if (ret)
		return ret;
	while (!t->done) {
		ib_process_cq_direct(t->cq, 4);
		if (t->done)
			break;
		if (time_after(jiffies, end))
			return -ETIMEDOUT;
		usleep_range(50, 200);
	}
	return t->status == IB_WC_SUCCESS ? 0 : -EIO;
}

static int kt_rdma(struct kt_ctx *t, enum ib_wr_opcode op, u64 laddr, u32 lkey,
		   u64 raddr, u32 rkey, u32 len)
{
	struct ib_sge sge = { .addr = laddr, .length = len, .lkey = lkey };
	struct ib_rdma_wr wr = {
		.wr.opcode = op,
		.wr.sg_list = &sge,
		.wr.num_sge = 1,
		.remote_addr = raddr,
		.rkey = rkey,
	};

	return kt_post_wait(t, &wr.wr);
}

static int kt_self_ah(struct kt_ctx *t, struct rdma_ah_attr *ah)
{
	const struct ib_gid_attr *gid = NULL, *attr;
	struct ib_port_attr pattr;
	union ib_gid dgid;
	u16 vlan;
	int i, ret;

	ret = ib_query_port(t->dev, t->port, &pattr);
	if (ret)
		return ret;
	memset(ah, 0, sizeof(*ah));
	ah->type = rdma_ah_find_type(t->dev, t->port);
	rdma_ah_set_port_num(ah, t->port);
	if (!rdma_protocol_roce(t->dev, t->port)) {
		rdma_ah_set_dlid(ah, pattr.lid);
		return 0;
	}
	/* An IPv4 GID routes on any netdev (lo too); link-local ones may not. */
	for (i = 0; i < pattr.gid_tbl_len; i++) {
		attr = rdma_get_gid_attr(t->dev, t->port, i);
		if (IS_ERR(attr))
			continue;
		if (!gid || ipv6_addr_v4mapped((struct in6_addr *)attr->gid.raw)) {
			if (gid)
				rdma_put_gid_attr(gid);
			gid = attr;
			if (ipv6_addr_v4mapped((struct in6_addr *)gid->gid.raw))
				break;
		} else {
			rdma_put_gid_attr(attr);
		}
	}
	if (!gid)
		return -ENOENT;
	dgid = gid->gid;
	rdma_ah_set_grh(ah, &dgid, 0, gid->index, 1, 0);
	ret = rdma_read_gid_l2_fields(gid, &vlan, ah->roce.dmac);
	rdma_put_gid_attr(gid);
	return ret;
}

/* RESET -> INIT -> RTR -> RTS toward @dqpn; also recovers an errored QP. */
static int kt_connect(struct kt_ctx *t, struct ib_qp *qp, u32 dqpn,
		      struct rdma_ah_attr *ah)
{
	struct ib_qp_attr a = { .qp_state = IB_QPS_RESET };
	int ret;

	ret = ib_modify_qp(qp, &a, IB_QP_STATE);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_INIT;
	a.port_num = t->port;
	a.qp_access_flags = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ |
			    IB_ACCESS_REMOTE_WRITE;
	ret = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_PKEY_INDEX |
			   IB_QP_PORT | IB_QP_ACCESS_FLAGS);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTR;
	a.path_mtu = IB_MTU_1024;
	a.dest_qp_num = dqpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr = *ah;
	ret = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU |
			   IB_QP_DEST_QPN | IB_QP_RQ_PSN |
			   IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_TIMEOUT |
			    IB_QP_RETRY_CNT | IB_QP_RNR_RETRY | IB_QP_SQ_PSN |
			    IB_QP_MAX_QP_RD_ATOMIC);
}

static int kt_loop_connect(struct kt_ctx *t)
{
	struct rdma_ah_attr ah;
	int ret;

	ret = kt_self_ah(t, &ah);
	if (ret)
		return ret;
	ret = kt_connect(t, t->qp[0], t->qp[1]->qp_num, &ah);
	if (ret)
		return ret;
	return kt_connect(t, t->qp[1], t->qp[0]->qp_num, &ah);
}

static int kt_loop_create(struct kt_ctx *t)
{
	struct ib_qp_init_attr init = {
		.sq_sig_type = IB_SIGNAL_REQ_WR,
		.qp_type = IB_QPT_RC,
		.cap = {
			.max_send_wr = 4,
			.max_recv_wr = 1,
			.max_send_sge = 1,
			.max_recv_sge = 1,
		},
	};
	int i;

	t->cq = ib_alloc_cq(t->dev, t, 16, 0, IB_POLL_DIRECT);
	if (IS_ERR(t->cq))
		return PTR_ERR(t->cq);
	t->cqe.done = kt_done;
	init.send_cq = t->cq;
	init.recv_cq = t->cq;
	for (i = 0; i < 2; i++) {
		t->qp[i] = ib_create_qp(t->pd, &init);
		if (IS_ERR(t->qp[i])) {
			int ret = PTR_ERR(t->qp[i]);

			t->qp[i] = NULL;
			return ret;
		}
	}
	return kt_loop_connect(t);
}

static void kt_loop_destroy(struct kt_ctx *t)
{
	int i;

	for (i = 0; i < 2; i++)
		if (t->qp[i])
			ib_destroy_qp(t->qp[i]);
	if (!IS_ERR_OR_NULL(t->cq))
		ib_free_cq(t->cq);
}

static void kt_fill(u8 *p, size_t len, u8 seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (u8)(seed + i * 7 + (i >> 9));
}

static unsigned long kt_pfn(const void *vaddr)
{
	if (is_vmalloc_addr(vaddr))
		return page_to_pfn(vmalloc_to_page(vaddr));
	return page_to_pfn(virt_to_page(vaddr));
}

/*
 * A chunk a process owns, through its lkey in mrpool's cache: a QP in the
 * buffers' PD must not be able to use it (on rxe the iova is the kernel
 * address of the chunk).
 */
static void kt_foreign(struct kt_ctx *t, struct mrpool_kbuf *b)
{
	u64 va;
	int ret;

	if (!ib_uses_virt_dma(t->dev) || !pfn_valid(foreign_pfn)) {
		kt_report(false, " - %s: cannot address pfn %#lx", t->name,
			  foreign_pfn);
		return;
	}
	va = (u64)(uintptr_t)page_address(pfn_to_page(foreign_pfn));
	memset(b->vaddr, 0x77, PAGE_SIZE);
	ret = kt_rdma(t, IB_WR_RDMA_WRITE, va, foreign_lkey, b->dma_addr,
		      b->rkey, PAGE_SIZE);
	kt_report(ret == -EIO && !memchr_inv(b->vaddr, 0x77, PAGE_SIZE),
		  " - %s: a process's cached lkey %#x is refused in the buffers' PD (%d, %s)",
		  t->name, foreign_lkey, ret, ib_wc_status_msg(t->status));
	if (ret)
		kt_loop_connect(t);
}

/*
 * KT_LENDS lends one after the other: no two share a key, and their key
 * bytes are no counter (a counter steps by one every time; random bytes
 * do so about once in 256).
 */
static void kt_lends(struct kt_ctx *t)
{
	unsigned long first_pfn = 0;
	unsigned int i, j, same = 0, dup = 0, got = 0, steps = 0;
	struct mrpool_kbuf *k;
	u32 *keys;

	keys = kcalloc(KT_LENDS, sizeof(*keys), GFP_KERNEL);
	if (!keys) {
		kt_report(false, " - %s: no memory for the lends test", t->name);
		return;
	}
	for (i = 0; i < KT_LENDS; i++) {
		k = mrpool_kbuf_alloc(t->dev, PAGE_SIZE);
		if (IS_ERR(k))
			break;
		keys[i] = k->rkey;
		if (!i)
			first_pfn = kt_pfn(k->vaddr);
		else if (kt_pfn(k->vaddr) == first_pfn)
			same++;
		mrpool_kbuf_free(k);
		got++;
		cond_resched();
	}
	for (i = 0; i < got; i++)
		for (j = i + 1; j < got; j++)
			dup += keys[i] == keys[j];
	for (i = 1; i < got; i++)
		steps += (u8)(keys[i] - keys[i - 1]) == 1;
	kfree(keys);
	kt_report(got == KT_LENDS && !dup,
		  " - %s: %u lends (%u more of the first chunk), %u repeated keys",
		  t->name, got, same, dup);
	kt_report(got == KT_LENDS && steps < got / 8,
		  " - %s: key bytes of %u lends in a row: %u steps of +1",
		  t->name, got, steps);
}

/* Did kt_fill(@p, @len, @seed) write these bytes? */
static bool kt_filled(const u8 *p, size_t len, u8 seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != (u8)(seed + i * 7 + (i >> 9)))
			return false;
	return true;
}

/*
 * A QP in @from's PD, given @victim's address and rkey, WRITEs into it and
 * READs from it: both must fail, and neither buffer change.
 */
static void kt_abuse(struct kt_ctx *from, struct mrpool_kbuf *own,
		     struct mrpool_kbuf *victim, u32 len, const char *what)
{
	int wr, rd;

	kt_fill(victim->vaddr, len, 0xb1);
	kt_fill(own->vaddr, len, 0xa1);
	wr = kt_rdma(from, IB_WR_RDMA_WRITE, own->dma_addr, own->lkey,
		     victim->dma_addr, victim->rkey, len);
	if (wr)
		kt_loop_connect(from);
	rd = kt_rdma(from, IB_WR_RDMA_READ, own->dma_addr, own->lkey,
		     victim->dma_addr, victim->rkey, len);
	if (rd == -ETIMEDOUT) {
		/*
		 * No completion at all: the loop, reconnected after the
		 * WRITE's error, was not back yet on a starved host (seen
		 * once on rxe under TCG), which says nothing of the rkey.
		 * Once more on a loop connected again.
		 */
		kt_loop_connect(from);
		rd = kt_rdma(from, IB_WR_RDMA_READ, own->dma_addr, own->lkey,
			     victim->dma_addr, victim->rkey, len);
	}
	if (rd)
		kt_loop_connect(from);
	kt_report(wr == -EIO && rd == -EIO && kt_filled(victim->vaddr, len, 0xb1) &&
		  kt_filled(own->vaddr, len, 0xa1),
		  " - %s: %s: WRITE (%d) and READ (%d) with its rkey fail, no byte moves",
		  from->name, what, wr, rd);
}

/*
 * Two sessions, A in a PD of mrpool's and B in one of this module's: the
 * PDs differ from each other and from the shared lend PD of @shared; a QP
 * in A's PD moves bytes between A's buffers but reaches B's buffer with
 * B's rkey neither for WRITE nor READ, and neither does a QP in the shared
 * PD (@t, connected). B's buffer outlives B's session.
 */
static void kt_sessions(struct kt_ctx *t, struct mrpool_kbuf *shared, u32 len)
{
	struct kt_ctx ta = { .dev = t->dev, .name = t->name, .port = t->port };
	struct mrpool_kbuf *a1 = NULL, *a2 = NULL, *b1 = NULL;
	struct mrpool_kbuf_session *sa, *sb = NULL;
	struct ib_pd *pd_b;
	int ret;

	pd_b = ib_alloc_pd(t->dev, 0);
	if (IS_ERR(pd_b)) {
		kt_report(false, " - %s: sessions: no PD (%ld)", t->name,
			  PTR_ERR(pd_b));
		return;
	}
	sa = mrpool_kbuf_session_create(t->dev, NULL);
	if (!IS_ERR(sa))
		sb = mrpool_kbuf_session_create(t->dev, pd_b);
	if (!IS_ERR_OR_NULL(sb)) {
		a1 = mrpool_kbuf_session_alloc(sa, len);
		a2 = mrpool_kbuf_session_alloc(sa, len);
		b1 = mrpool_kbuf_session_alloc(sb, len);
	}
	ret = IS_ERR(sa) ? PTR_ERR(sa) : IS_ERR(sb) ? PTR_ERR(sb) :
	      IS_ERR(a1) ? PTR_ERR(a1) : IS_ERR(a2) ? PTR_ERR(a2) :
	      PTR_ERR_OR_ZERO(b1);
	kt_report(!ret && sa->pd && sa->pd != sb->pd && sb->pd == pd_b &&
		  sa->pd != shared->pd && a1->pd == sa->pd && a2->pd == sa->pd &&
		  b1->pd == pd_b && !memchr_inv(b1->vaddr, 0, len),
		  " - %s: two sessions, each buffer in its session's PD, none in the shared one (%d)",
		  t->name, ret);
	if (ret)
		goto free;

	ta.pd = sa->pd;
	ret = kt_loop_create(&ta);
	if (!ret) {
		kt_fill(a1->vaddr, len, 0x11);
		ret = kt_rdma(&ta, IB_WR_RDMA_WRITE, a1->dma_addr, a1->lkey,
			      a2->dma_addr, a2->rkey, len);
	}
	kt_report(!ret && !memcmp(a1->vaddr, a2->vaddr, len),
		  " - %s: a QP in session A's PD moves bytes between A's buffers (%d)",
		  t->name, ret);
	if (!ret)
		kt_abuse(&ta, a1, b1, len, "a QP in session A's PD, B's buffer");
	kt_loop_destroy(&ta);
	kt_abuse(t, shared, b1, len, "a QP in the shared PD, B's buffer");

	/* B goes first; its buffer stays usable until freed. */
	mrpool_kbuf_session_destroy(sb);
	sb = NULL;
free:
	mrpool_kbuf_free(b1);
	mrpool_kbuf_free(a2);
	mrpool_kbuf_free(a1);
	mrpool_kbuf_session_destroy(sb);
	mrpool_kbuf_session_destroy(sa);
	/* Only now has no QP of mrpool's left in it. */
	ib_dealloc_pd(pd_b);
}

static void kt_run(struct kt_ctx *t)
{
	struct mrpool_kbuf *a, *b, *big;
	size_t max = mrpool_kbuf_max_size();
	u32 len = min_t(size_t, KT_LEN_MAX, max);
	u64 stale_addr;
	u32 stale_rkey;
	int ret;

	big = mrpool_kbuf_alloc(t->dev, max + 1);
	kt_report(PTR_ERR(big) == -EINVAL,
		  " - %s: a buffer larger than %zu bytes is refused (%d)",
		  t->name, max, PTR_ERR_OR_ZERO(big));
	if (!IS_ERR(big))
		mrpool_kbuf_free(big);

	a = mrpool_kbuf_alloc(t->dev, len);
	if (IS_ERR(a)) {
		kt_report(true, " - %s # SKIP device not usable by mrpool (%ld)",
			  t->name, PTR_ERR(a));
		return;
	}
	b = mrpool_kbuf_alloc(t->dev, len);
	kt_report(!IS_ERR(b) && a->pd == b->pd && a->lkey && b->rkey &&
		  a->vaddr && !memchr_inv(b->vaddr, 0, len),
		  " - %s: two zeroed buffers with keys in one PD", t->name);
	if (IS_ERR(b))
		goto free_a;
	t->pd = a->pd;

	ret = kt_loop_create(t);
	kt_report(!ret, " - %s: loopback RC QPs in the buffers' PD (%d)", t->name,
		  ret);
	if (ret)
		goto destroy;

	kt_fill(a->vaddr, len, 0x5a);
	ret = kt_rdma(t, IB_WR_RDMA_WRITE, a->dma_addr, a->lkey, b->dma_addr,
		      b->rkey, len);
	kt_report(!ret && !memcmp(a->vaddr, b->vaddr, len),
		  " - %s: RDMA WRITE of %u bytes arrived intact (%d, %s)",
		  t->name, len, ret, ib_wc_status_msg(t->status));

	kt_fill(b->vaddr + len / 2, len / 2, 0xc3);
	memset(a->vaddr, 0, len);
	ret = kt_rdma(t, IB_WR_RDMA_READ, a->dma_addr, a->lkey,
		      b->dma_addr + len / 2, b->rkey, len / 2);
	kt_report(!ret && !memcmp(a->vaddr, b->vaddr + len / 2, len / 2) &&
		  !memchr_inv(a->vaddr + len / 2, 0, len / 2),
		  " - %s: RDMA READ of %u bytes arrived intact (%d, %s)",
		  t->name, len / 2, ret, ib_wc_status_msg(t->status));

	/* The MR covers the lent length and no more of the chunk. */
	memset(b->vaddr, 0, len);
	ret = kt_rdma(t, IB_WR_RDMA_WRITE, a->dma_addr, a->lkey,
		      b->dma_addr + PAGE_ALIGN(len), b->rkey, PAGE_SIZE);
	kt_report(ret == -EIO && t->status == IB_WC_REM_ACCESS_ERR,
		  " - %s: a WRITE past the lent length, inside the chunk, fails (%d, %s)",
		  t->name, ret, ib_wc_status_msg(t->status));
	if (ret)
		kt_loop_connect(t);

	if (!strcmp(t->name, foreign_dev))
		kt_foreign(t, b);

	ret = kt_loop_connect(t);
	if (!ret)
		kt_sessions(t, a, len);

	/* A freed buffer's rkey must not reach the chunk's next owner. */
	stale_addr = b->dma_addr;
	stale_rkey = b->rkey;
	mrpool_kbuf_free(b);
	b = NULL;
	ret = kt_loop_connect(t);
	if (!ret)
		ret = kt_rdma(t, IB_WR_RDMA_WRITE, a->dma_addr, a->lkey,
			      stale_addr, stale_rkey, PAGE_SIZE);
	kt_report(ret == -EIO && t->status == IB_WC_REM_ACCESS_ERR,
		  " - %s: the rkey of a freed buffer is refused (%d, %s)",
		  t->name, ret, ib_wc_status_msg(t->status));

destroy:
	kt_loop_destroy(t);
	mrpool_kbuf_free(b);
	kt_lends(t);
free_a:
	mrpool_kbuf_free(a);
}

/* One buffer lent on the device named by dev, then freed. */
static void kt_lend_once(struct kt_ctx *t)
{
	struct mrpool_kbuf *a;

	a = mrpool_kbuf_alloc(t->dev, PAGE_SIZE);
	kt_report(!IS_ERR(a), " - %s: lend pfn %#lx rkey %#x (%d)", t->name,
		  IS_ERR(a) ? 0UL : kt_pfn(a->vaddr), IS_ERR(a) ? 0 : a->rkey,
		  PTR_ERR_OR_ZERO(a));
	if (IS_ERR(a))
		return;
	mrpool_kbuf_free(a);
	kt_report(true, " - %s: lend freed", t->name);
}

/*
 * The same through a session of mrpool's PD: one buffer lent, freed, and
 * the session destroyed (for ib_timeout_test: a lend MR that gets stuck
 * keeps the session's loop until the device goes).
 */
static void kt_session_once(struct kt_ctx *t)
{
	struct mrpool_kbuf_session *s;
	struct mrpool_kbuf *a;

	s = mrpool_kbuf_session_create(t->dev, NULL);
	a = IS_ERR(s) ? ERR_CAST(s) : mrpool_kbuf_session_alloc(s, PAGE_SIZE);
	kt_report(!IS_ERR(a), " - %s: session lend pfn %#lx rkey %#x (%d)",
		  t->name, IS_ERR(a) ? 0UL : kt_pfn(a->vaddr),
		  IS_ERR(a) ? 0 : a->rkey, PTR_ERR_OR_ZERO(a));
	mrpool_kbuf_free(a);
	mrpool_kbuf_session_destroy(s);
	kt_report(!IS_ERR(a), " - %s: lend freed, session destroyed", t->name);
}

/*
 * A borrower on a reclaim path (a shrinker, a block driver's writeback):
 * as direct reclaim does, fs_reclaim is held (for lockdep: it then knows
 * of any mrpool lock held across an allocation that may reclaim, and
 * reports the cycle) and PF_MEMALLOC set. In there: a buffer is taken,
 * bytes are written into it over RDMA from a buffer taken before, checked,
 * and it is freed; then the same with a buffer of a session. The loop's
 * QPs and the session are made outside, as a borrower would (at connection
 * set-up); only buffers are taken and freed in there.
 */
static void kt_reclaim(struct kt_ctx *t)
{
	u32 len = min_t(size_t, KT_LEN_MAX, mrpool_kbuf_max_size());
	struct mrpool_kbuf_session *s;
	struct mrpool_kbuf *a, *b, *c;
	unsigned int noreclaim;
	int ret;

	a = mrpool_kbuf_alloc(t->dev, len);
	if (IS_ERR(a)) {
		kt_report(false, " - %s: reclaim: no first buffer (%ld)",
			  t->name, PTR_ERR(a));
		return;
	}
	t->pd = a->pd;
	ret = kt_loop_create(t);
	if (ret) {
		kt_report(false, " - %s: reclaim: no QPs (%d)", t->name, ret);
		goto destroy;
	}
	kt_fill(a->vaddr, len, 0x3c);
	s = mrpool_kbuf_session_create(t->dev, NULL);

	fs_reclaim_acquire(GFP_KERNEL);
	noreclaim = memalloc_noreclaim_save();
	b = mrpool_kbuf_alloc(t->dev, len);
	ret = PTR_ERR_OR_ZERO(b);
	if (!ret)
		ret = kt_rdma(t, IB_WR_RDMA_WRITE, a->dma_addr, a->lkey,
			      b->dma_addr, b->rkey, len);
	kt_report(!ret && !memcmp(a->vaddr, b->vaddr, len),
		  " - %s: reclaim: a buffer taken, written over RDMA and freed from reclaim context (%d)",
		  t->name, ret);
	mrpool_kbuf_free(b);
	/* a session's buffer: its own PD's loop registers it */
	c = IS_ERR(s) ? ERR_CAST(s) : mrpool_kbuf_session_alloc(s, len);
	ret = PTR_ERR_OR_ZERO(c);
	if (!ret)
		memcpy(c->vaddr, a->vaddr, len);
	kt_report(!ret && c->pd == s->pd && !memcmp(a->vaddr, c->vaddr, len),
		  " - %s: reclaim: a session's buffer taken and freed from reclaim context (%d)",
		  t->name, ret);
	mrpool_kbuf_free(c);
	memalloc_noreclaim_restore(noreclaim);
	fs_reclaim_release(GFP_KERNEL);
	mrpool_kbuf_session_destroy(s);

destroy:
	kt_loop_destroy(t);
	mrpool_kbuf_free(a);
}

/*
 * mode=session_hold: a borrower that breaks mrpool_kapi.h's lifetime rule
 * (free everything in your remove callback, before mrpool's runs). At add
 * it takes a session in a PD of mrpool's, a buffer of that session and one
 * of the shared lend PD, and fills both; its remove callback keeps them
 * all. mrpool tears them down with the device; the API promises they are
 * still safe to free. A write to debugfs "release" then checks that the
 * session refuses a new buffer (-ENODEV: the device is gone), that both
 * buffers still hold their bytes (their chunks were not handed on), and
 * frees the buffers and the session. Under kt_hold_lock.
 */
#define KT_HOLD_LEN	SZ_16K

static DEFINE_MUTEX(kt_hold_lock);
static struct {
	struct mrpool_kbuf_session *s;
	struct mrpool_kbuf *sbuf, *lbuf;
	struct ib_device *ibdev;	/* compared only, never used after remove */
	char name[IB_DEVICE_NAME_MAX];
} kt_held;

static void kt_hold(struct kt_ctx *t)
{
	struct mrpool_kbuf_session *s;
	struct mrpool_kbuf *sb = NULL, *lb = NULL;

	s = mrpool_kbuf_session_create(t->dev, NULL);
	if (!IS_ERR(s)) {
		sb = mrpool_kbuf_session_alloc(s, KT_HOLD_LEN);
		lb = mrpool_kbuf_alloc(t->dev, KT_HOLD_LEN);
	}
	kt_report(!IS_ERR(s) && !IS_ERR(sb) && !IS_ERR(lb),
		  " - %s: hold: a session, its buffer and a shared one (%d %d %d)",
		  t->name, PTR_ERR_OR_ZERO(s), PTR_ERR_OR_ZERO(sb),
		  PTR_ERR_OR_ZERO(lb));
	if (IS_ERR(s) || IS_ERR(sb) || IS_ERR(lb)) {
		mrpool_kbuf_free(lb);
		mrpool_kbuf_free(sb);
		mrpool_kbuf_session_destroy(s);
		return;
	}
	kt_fill(sb->vaddr, KT_HOLD_LEN, 0x5a);
	kt_fill(lb->vaddr, KT_HOLD_LEN, 0xa5);
	mutex_lock(&kt_hold_lock);
	kt_held.s = s;
	kt_held.sbuf = sb;
	kt_held.lbuf = lb;
	kt_held.ibdev = t->dev;
	strscpy(kt_held.name, t->name, sizeof(kt_held.name));
	mutex_unlock(&kt_hold_lock);
}

/* The held objects checked and freed; false if none were held. */
static bool kt_release(void)
{
	struct mrpool_kbuf *b;
	bool held;

	mutex_lock(&kt_hold_lock);
	held = kt_held.s;
	if (held) {
		b = mrpool_kbuf_session_alloc(kt_held.s, KT_HOLD_LEN);
		kt_report(PTR_ERR_OR_ZERO(b) == -ENODEV,
			  " - %s: after the removal the session takes no buffer (%d)",
			  kt_held.name, PTR_ERR_OR_ZERO(b));
		mrpool_kbuf_free(b);
		kt_report(kt_filled(kt_held.sbuf->vaddr, KT_HOLD_LEN, 0x5a) &&
			  kt_filled(kt_held.lbuf->vaddr, KT_HOLD_LEN, 0xa5),
			  " - %s: both buffers kept their bytes through the removal",
			  kt_held.name);
		mrpool_kbuf_free(kt_held.sbuf);
		mrpool_kbuf_free(kt_held.lbuf);
		mrpool_kbuf_session_destroy(kt_held.s);
		kt_report(true, " - %s: buffers freed and session destroyed",
			  kt_held.name);
		memset(&kt_held, 0, sizeof(kt_held));
	}
	mutex_unlock(&kt_hold_lock);
	return held;
}

static ssize_t release_write(struct file *file, const char __user *buf,
			     size_t len, loff_t *ppos)
{
	return kt_release() ? len : -ENOENT;
}

static const struct file_operations release_fops = {
	.owner = THIS_MODULE,
	.write = release_write,
	.llseek = noop_llseek,
};

static int kt_add(struct ib_device *ibdev)
{
	struct kt_ctx *t;

	t = kzalloc(sizeof(*t), GFP_KERNEL);
	if (!t)
		return -ENOMEM;
	t->dev = ibdev;
	t->name = dev_name(&ibdev->dev);
	t->port = rdma_start_port(ibdev);
	if (!strcmp(mode, "lend_once")) {
		if (!strcmp(t->name, dev))
			kt_lend_once(t);
	} else if (!strcmp(mode, "session_once")) {
		if (!strcmp(t->name, dev))
			kt_session_once(t);
	} else if (!strcmp(mode, "rdma_once")) {
		if (!strcmp(t->name, dev))
			kt_run(t);
	} else if (!strcmp(mode, "reclaim")) {
		if (!strcmp(t->name, dev))
			kt_reclaim(t);
	} else if (!strcmp(mode, "session_hold")) {
		if (!strcmp(t->name, dev)) {
			kt_hold(t);
			kfree(t);
			/* remove is called for this device: it reports */
			return 0;
		}
	} else {
		kt_run(t);
	}
	kfree(t);
	/* Nothing is kept: remove has nothing to undo. */
	return -EOPNOTSUPP;
}

/* Only session_hold's device: what it holds is kept on purpose (above). */
static void kt_remove(struct ib_device *ibdev, void *client_data)
{
	mutex_lock(&kt_hold_lock);
	kt_report(kt_held.ibdev == ibdev,
		  " - %s: removed while the session and its buffers are held",
		  dev_name(&ibdev->dev));
	kt_held.ibdev = NULL;
	mutex_unlock(&kt_hold_lock);
}

static struct ib_client kt_client = {
	.name = "mrpool_rdma_ktest",
	.add = kt_add,
	.remove = kt_remove,
};

static int __init kt_init(void)
{
	int ret;

	kt_results = kcalloc(KT_MAX_RESULTS, sizeof(*kt_results), GFP_KERNEL);
	if (!kt_results)
		return -ENOMEM;
	/* The tests run here, once per device present. */
	ret = ib_register_client(&kt_client);
	if (ret) {
		kfree(kt_results);
		return ret;
	}
	kt_dir = debugfs_create_dir(KBUILD_MODNAME, NULL);
	debugfs_create_file("tap", 0400, kt_dir, NULL, &tap_fops);
	debugfs_create_file("release", 0200, kt_dir, NULL, &release_fops);
	return 0;
}

static void __exit kt_exit(void)
{
	debugfs_remove_recursive(kt_dir);
	ib_unregister_client(&kt_client);
	/* a test that stopped before its release leaves nothing behind */
	kt_release();
	kfree(kt_results);
}

module_init(kt_init);
module_exit(kt_exit);
MODULE_DESCRIPTION("mrpool in-kernel API test: RDMA through cached kernel keys");
MODULE_LICENSE("GPL");
