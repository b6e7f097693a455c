/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * librdmatest: the smallest amount of verbs plumbing that lets the demo,
 * the selftests and the library's VM tests move bytes over a real RDMA QP.
 *
 * One device, one port, a RoCE v2 GID, and two RC QPs on that device
 * connected to each other (loopback): "a" is the requester, "b" the
 * responder. Every operation is posted on "a" and waited for synchronously,
 * so a test can assert on the work completion status of exactly that
 * operation (for example IBV_WC_REM_ACCESS_ERR for a wrong rkey).
 *
 * Return rule: int functions return 0 or a negative errno. Data-path calls
 * return -EIO when the operation completed with an error status (the status
 * is always stored in *status when status is not NULL) and -ETIMEDOUT when
 * no completion arrived in time. After an error completion RC QPs are in
 * the error state: rdt_loop_reconnect() makes the loop usable again.
 *
 * Internal test tooling: not installed, no ABI promise.
 */
#ifndef RDMATEST_H
#define RDMATEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

/* Device tried first when no name is given; then the first device found. */
#define RDT_DEFAULT_DEVICE	"rxe0"
/* Environment overrides for rdt_dev_open(name == NULL) and the GID index. */
#define RDT_ENV_DEVICE		"RDT_DEVICE"
#define RDT_ENV_GID_INDEX	"RDT_GID_INDEX"
/* Completion wait used by rdt_loop_create(); generous because TCG is slow. */
#define RDT_DEFAULT_TIMEOUT_MS	10000
/* Access flags that make a buffer a local and remote RDMA target. */
#define RDT_ACCESS_ALL		(IBV_ACCESS_LOCAL_WRITE | \
				 IBV_ACCESS_REMOTE_WRITE | \
				 IBV_ACCESS_REMOTE_READ)

/**
 * struct rdt_dev - an opened RDMA device, port, GID and protection domain
 * @ctx:	verbs context
 * @pd:		protection domain: the caller's, or one this library allocated
 * @own_pd:	true when rdt_dev_close() must deallocate @pd
 * @port:	port number used (the first active port with a RoCE v2 GID)
 * @gid_index:	RoCE v2 GID index on @port
 * @gid:	the GID at @gid_index
 * @mtu:	path MTU used for the QPs (min of the port's active MTU and 1024)
 * @name:	device name
 */
struct rdt_dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	bool own_pd;
	uint8_t port;
	int gid_index;
	union ibv_gid gid;
	enum ibv_mtu mtu;
	char name[IBV_SYSFS_NAME_MAX];
};

/**
 * struct rdt_qp - one RC QP and the CQ for both its queues
 * @qp:	the queue pair
 * @cq:	its send and receive completion queue
 */
struct rdt_qp {
	struct ibv_qp *qp;
	struct ibv_cq *cq;
};

/**
 * struct rdt_loop - two RC QPs on one device connected to each other
 * @dev:	the device (not owned)
 * @a:		requester: every rdt_write/read/send is posted here
 * @b:		responder: target of the requests, receives SENDs
 * @timeout_ms:	how long the data-path calls wait for a completion
 */
struct rdt_loop {
	struct rdt_dev *dev;
	struct rdt_qp a;
	struct rdt_qp b;
	int timeout_ms;
};

/**
 * rdt_dev_open - open a device, pick a port and RoCE v2 GID, get a PD
 * @dev:	filled on success; zeroed on failure
 * @name:	device name; NULL means $RDT_DEVICE, else "rxe0" if present,
 *		else the first device
 * @pd:		protection domain to use (must belong to a context the caller
 *		keeps open: its context is used) or NULL to allocate one
 *
 * $RDT_GID_INDEX, when set, forces the GID index. Returns -ENODEV when no
 * (named) device exists, -ENOENT when no port has a RoCE v2 GID.
 */
int rdt_dev_open(struct rdt_dev *dev, const char *name, struct ibv_pd *pd);

/* Deallocates the PD if the library allocated it, closes the device. */
void rdt_dev_close(struct rdt_dev *dev);

/**
 * rdt_find_roce_v2_gid - a RoCE v2 GID of a port: the first IPv4 one, else
 *			  the first one
 * @ctx:	verbs context
 * @port:	port number
 * @index:	(out) GID index
 * @gid:	(out) GID, may be NULL
 *
 * Returns 0, or -ENOENT when the port has none.
 */
int rdt_find_roce_v2_gid(struct ibv_context *ctx, uint8_t port, int *index,
			 union ibv_gid *gid);

/**
 * rdt_loop_create - two RC QPs on @dev connected to each other, in RTS
 * @lp:		filled on success; zeroed on failure
 * @dev:	an opened device; must outlive the loop
 */
int rdt_loop_create(struct rdt_loop *lp, struct rdt_dev *dev);

/* Destroys both QPs and CQs. Safe on a zeroed or failed loop. */
void rdt_loop_destroy(struct rdt_loop *lp);

/* Takes both QPs through RESET back to RTS and drains their CQs. */
int rdt_loop_reconnect(struct rdt_loop *lp);

/**
 * rdt_qp_connect - take an RC QP from RESET to RTS towards a remote QP
 * @dev:	device the QP lives on (port, GID index, MTU)
 * @qp:		the QP, in RESET
 * @remote_qpn:	destination QP number
 * @remote_gid:	destination GID (RoCE v2)
 *
 * Exposed for tests that wire QPs themselves (e.g. across two devices).
 */
int rdt_qp_connect(struct rdt_dev *dev, struct ibv_qp *qp, uint32_t remote_qpn,
		   const union ibv_gid *remote_gid);

/**
 * rdt_write - RDMA WRITE @len bytes from (@laddr, @lkey) to (@raddr, @rkey)
 * @lp:		the loop; posted on @lp->a
 * @laddr:	local source address, inside the MR of @lkey
 * @lkey:	local key
 * @raddr:	remote target address, inside the MR of @rkey
 * @rkey:	remote key
 * @len:	bytes
 * @status:	(out, may be NULL) work completion status (enum ibv_wc_status;
 *		an int so tests can compare it with IBV_WC_* directly)
 *
 * Returns 0, -EIO on an error completion, -ETIMEDOUT, or -errno from the
 * post.
 */
int rdt_write(struct rdt_loop *lp, void *laddr, uint32_t lkey,
	      uint64_t raddr, uint32_t rkey, size_t len,
	      int *status);

/* RDMA READ @len bytes from (@raddr, @rkey) into (@laddr, @lkey). As above. */
int rdt_read(struct rdt_loop *lp, void *laddr, uint32_t lkey,
	     uint64_t raddr, uint32_t rkey, size_t len,
	     int *status);

/**
 * rdt_send - SEND @len bytes from @lp->a into a receive posted on @lp->b
 * @lp:		the loop
 * @saddr:	source address, inside the MR of @skey
 * @skey:	lkey of the source
 * @daddr:	receive buffer address, inside the MR of @dkey
 * @dkey:	lkey of the receive buffer (same PD)
 * @len:	bytes
 * @status:	(out, may be NULL) status of the first failing completion,
 *		else IBV_WC_SUCCESS
 *
 * Posts the receive, then the send, and waits for both completions.
 */
int rdt_send(struct rdt_loop *lp, void *saddr, uint32_t skey,
	     void *daddr, uint32_t dkey, size_t len,
	     int *status);

/* Monotonic clock in nanoseconds, for the tools' timings. */
uint64_t rdt_now_ns(void);

/**
 * rdt_reg_time - time one ibv_reg_mr and one ibv_dereg_mr of a range
 * @pd:		protection domain
 * @addr:	start of the range
 * @len:	bytes
 * @reg_ns:	(out) nanoseconds ibv_reg_mr took (RDT_ACCESS_ALL)
 * @dereg_ns:	(out) nanoseconds ibv_dereg_mr took
 *
 * Returns 0, -errno of the registration, or -EIO if deregistering failed.
 */
int rdt_reg_time(struct ibv_pd *pd, void *addr, size_t len,
		 uint64_t *reg_ns, uint64_t *dereg_ns);

/**
 * struct rdt_thp - memory that THP can back with PMD-size pages
 * @addr:	the aligned start, written (prefaulted); NULL when unmapped
 * @base:	the whole mapping, for munmap
 * @maplen:	its length
 */
struct rdt_thp {
	void *addr;
	void *base;
	size_t maplen;
};

/**
 * rdt_thp_map - @len bytes at a THP (PMD size) boundary, MADV_HUGEPAGE,
 * written
 * @t:		(out) the mapping
 * @len:	bytes
 * @shmem:	a memfd mapped shared (huge where shmem_enabled allows),
 *		else private anonymous memory
 *
 * Returns 0 or -errno. Release with rdt_thp_unmap().
 */
int rdt_thp_map(struct rdt_thp *t, size_t len, bool shmem);
void rdt_thp_unmap(struct rdt_thp *t);

/**
 * struct rdt_odp - a device's On-Demand Paging capabilities (odp.c)
 * @supported:	general caps has IBV_ODP_SUPPORT and RC has what was asked
 * @implicit:	IBV_ODP_SUPPORT_IMPLICIT (addr 0, length SIZE_MAX)
 * @general:	odp_caps.general_caps
 * @rc:		odp_caps.per_transport_caps.rc_odp_caps (IBV_ODP_SUPPORT_*)
 * @ud:		... ud_odp_caps
 * @why:	when not @supported: the reason, for a SKIP line or a report
 */
struct rdt_odp {
	bool supported;
	bool implicit;
	uint64_t general;
	uint32_t rc, ud;
	char why[128];
};

/**
 * rdt_odp_probe - ask the device (ibv_query_device_ex) what ODP it has
 * @ctx:	verbs context
 * @need_rc:	IBV_ODP_SUPPORT_* bits RC must have (WRITE, READ, SEND...)
 * @odp:	(out) the capabilities; @odp->why says what is missing
 *
 * Returns 0 when ODP with @need_rc is supported, -EOPNOTSUPP when not,
 * or -errno of the query.
 */
int rdt_odp_probe(struct ibv_context *ctx, uint32_t need_rc, struct rdt_odp *odp);

/**
 * rdt_odp_prefetch - ibv_advise_mr(PREFETCH[_WRITE], IBV_ADVISE_MR_FLAG_FLUSH)
 * of [@addr, @addr + @len) in the ODP MR @mr: returns when it is mapped
 * @write:	PREFETCH_WRITE (pages made writable), else PREFETCH
 *
 * Where the provider library has no advise_mr (rdma-core 44's rxe), the
 * uverbs command is issued directly. Returns 0 or -errno (-EOPNOTSUPP
 * where the kernel's driver has no prefetch either).
 */
int rdt_odp_prefetch(struct ibv_pd *pd, struct ibv_mr *mr, void *addr, size_t len,
		     bool write);

/* pattern.c: fill @len bytes with the pattern of @seed, or compare them to it. */
void rdt_pattern_fill(void *buf, size_t len, unsigned int seed);
bool rdt_pattern_same(const void *buf, size_t len, unsigned int seed);

#endif /* RDMATEST_H */
