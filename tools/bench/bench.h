/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * mrpool-scenarios: the scenarios of `make bench` that need an RDMA device
 * (alloc, reg, rdma, odp, startup; the fast path is mrpool-bench's). Shared declarations:
 * the clock, latency samples, CSV output, the registration counter and the
 * peers of the alloc scenario.
 *
 * Every scenario prints CSV (a header line, then one row per measurement)
 * on stdout; tools/bench/report.sh turns it into tables and plots. No
 * scenario judges its figures: they are reported, never asserted.
 */
#ifndef BENCH_H
#define BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ibv_pd;
struct rdt_dev;

#define KIB	1024UL
#define MIB	(1024UL * KIB)

/* samples.c: per-operation latencies of one measurement. */
struct samples {
	uint64_t *ns;		/* one latency per operation, up to cap */
	size_t n, cap;
};

int samples_init(struct samples *s, size_t cap);
void samples_add(struct samples *s, uint64_t ns);
/* Appends every sample of @from (as far as @to has room). */
void samples_merge(struct samples *to, const struct samples *from);
/* Sorts, then the @pct-th percentile (0..100; 100 is the maximum). */
uint64_t samples_pct(struct samples *s, double pct);
void samples_free(struct samples *s);

/*
 * regcount.c: calls to ibv_reg_mr (every variant) and ibv_dereg_mr made by
 * anyone in this process, libmrpool, UCX and libfabric included. The
 * executable's definitions interpose on libibverbs': a peer whose cache
 * hits makes no call per operation.
 */
uint64_t regcount_reg(void);
uint64_t regcount_dereg(void);

/* The environment every scenario gets from main.c. */
struct bench_env {
	struct rdt_dev *dev;		/* rxe0 or $RDT_DEVICE (librdmatest) */
	struct ibv_pd *pd;		/* dev's PD */
	const char *dev_name;
	double budget_s;		/* seconds per measurement (-t) */
	const char *only_peer;		/* -p: alloc runs the peers named so */
};

/*
 * A way to get an RDMA-ready buffer of one size and give it back (alloc
 * scenario). One operation: get the buffer, touch its first byte, give it
 * back. setup() is called once per size; thread_init() once per thread.
 */
struct peer {
	const char *name;	/* row label, also the CSV key */
	/*
	 * Once per process. Returns 0, or -errno with a reason in @why when
	 * the peer cannot run here (the row then says so).
	 */
	int (*setup)(const struct bench_env *env, char *why, size_t len);
	/* What the peer was run with (cache settings), for the report. */
	const char *(*settings)(void);
	void *(*thread_init)(size_t size);
	int (*op)(void *tls);		/* 0 or -errno */
	void (*thread_fini)(void *tls);
	void (*teardown)(void);
};

extern const struct peer peer_pool, peer_malloc, peer_verbs;
extern const struct peer peer_ucx_map, peer_ucx_hit;
extern const struct peer peer_fabric_reg, peer_fabric_hit;

/* Scenarios (scen_*.c): print CSV on stdout, return 0 or 1. */
int scen_alloc(const struct bench_env *env);
int scen_reg(const struct bench_env *env, size_t max_size);
int scen_rdma(const struct bench_env *env);
/* ODP beside the pool, THP anon and per-message registration (scen_odp.c). */
int scen_odp(const struct bench_env *env, size_t max_size);
/*
 * Getting @total bytes ready for RDMA at start, pool against the usual
 * ways, 1 and 2 threads, @rounds rounds (scen_startup.c).
 */
int scen_startup(const struct bench_env *env, size_t total, int rounds);

#endif /* BENCH_H */
