// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Scenario "alloc": one RDMA-ready buffer got and given back, by every
 * peer, at 4 KiB, 8 KiB, 64 KiB and 2 MiB, with 1 and 2 threads.
 *
 * Each cell runs in two phases of half the budget each, after a warm-up:
 * throughput (operations in batches, the clock read once per batch) and
 * latency (the clock read around every operation; the timer's own cost is
 * in the row "timer"). Registrations per operation are counted over the
 * throughput phase (regcount.c): that is what says whether a peer's cache
 * hit. CSV on stdout, one row per cell.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "rdmatest.h"

#define LAT_CAP		200000	/* latency samples kept per thread */

static const struct peer *const peers[] = {
	&peer_pool, &peer_malloc, &peer_verbs, &peer_ucx_map, &peer_ucx_hit,
	&peer_fabric_reg, &peer_fabric_hit,
};
static const size_t sizes[] = { 4 * KIB, 8 * KIB, 64 * KIB, 2 * MIB };

struct worker {
	pthread_t t;
	pthread_barrier_t *bar;
	const struct peer *peer;
	size_t size;
	double budget_s;
	uint64_t warm;			/* warm-up operations */
	uint64_t first_regs;		/* registrations of the first operation */
	uint64_t ops, start, end;	/* throughput phase */
	struct samples lat;		/* latency phase */
	int err;
};

static int null_op(void *tls)
{
	(void)tls;
	return 0;
}

/* Operations until @deadline, in batches that grow while they are short. */
static uint64_t run_until(struct worker *w, int (*op)(void *), void *tls,
			  uint64_t deadline)
{
	uint64_t done = 0, batch = 1;

	for (;;) {
		uint64_t t0 = rdt_now_ns();

		for (uint64_t i = 0; i < batch; i++) {
			int ret = op(tls);

			if (ret) {
				w->err = ret;
				return done + i;
			}
		}
		done += batch;
		uint64_t t1 = rdt_now_ns();

		if (t1 >= deadline)
			return done;
		if (t1 - t0 < 1000000 && batch < (1u << 20))
			batch *= 2;
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	int (*op)(void *) = w->peer ? w->peer->op : null_op;
	void *tls = w->peer ? w->peer->thread_init(w->size) : NULL;
	uint64_t half = (uint64_t)(w->budget_s * 0.5e9);

	if (w->peer && !tls)
		w->err = -ENOMEM;
	/*
	 * The first operation alone: does the peer register a buffer it has
	 * not seen (a new size, a new buffer)? Then the warm-up, a tenth of
	 * the budget.
	 */
	if (!w->err) {
		uint64_t r0 = regcount_reg();

		w->err = op(tls);
		w->first_regs = regcount_reg() - r0;
		w->warm = 1;
	}
	if (!w->err)
		w->warm += run_until(w, op, tls, rdt_now_ns() + half / 5);
	pthread_barrier_wait(w->bar);
	w->start = rdt_now_ns();
	if (!w->err)
		w->ops = run_until(w, op, tls, w->start + half);
	w->end = rdt_now_ns();
	pthread_barrier_wait(w->bar);
	/* latency: the clock around every operation */
	for (uint64_t t0 = rdt_now_ns(), until = t0 + half;
	     !w->err && t0 < until && w->lat.n < w->lat.cap;) {
		int ret = op(tls);
		uint64_t t1 = rdt_now_ns();

		if (ret)
			w->err = ret;
		samples_add(&w->lat, t1 - t0);
		t0 = t1;
	}
	if (w->peer && tls)
		w->peer->thread_fini(tls);
	return NULL;
}

/* Commas would split a CSV field: the report reads plain comma-separated. */
static void csv_text(char *s)
{
	for (; *s; s++)
		if (*s == ',' || *s == '"' || *s == '\n')
			*s = ';';
}

static const char *cache_verdict(const struct peer *p, double reg_per_op,
				 uint64_t first_regs, char *buf, size_t len)
{
	if (p == &peer_malloc || !p)
		return "-";
	if (p == &peer_verbs)
		return "none (registers every buffer)";
	if (p == &peer_pool)
		return reg_per_op < 0.001 ? "pre-registered (no registration per buffer)" :
			"registered arenas during the run";
	if (reg_per_op < 0.01)
		return first_regs ? "hit (registered the first buffer only)" :
			"hit (no registration at all in this cell)";
	if (reg_per_op > 0.99)
		return "miss (one registration per operation)";
	snprintf(buf, len, "partial (%.0f%% of operations registered)", 100 * reg_per_op);
	return buf;
}

/* One cell; prints its CSV row. Returns 0, or 1 if an operation failed. */
static int run_cell(const struct bench_env *env, const struct peer *p,
		    size_t size, int nthreads)
{
	struct worker w[2];
	struct samples all;
	pthread_barrier_t bar;
	uint64_t ops = 0, warm = 0, t0 = UINT64_MAX, t1 = 0, r0, d0;
	char settings[400], verdict[96], status[64] = "ok";
	double reg, dereg, rate;
	int err = 0;

	memset(w, 0, sizeof(w));
	pthread_barrier_init(&bar, NULL, (unsigned int)nthreads);
	r0 = regcount_reg();
	d0 = regcount_dereg();
	for (int i = 0; i < nthreads; i++) {
		w[i] = (struct worker){ .bar = &bar, .peer = p, .size = size,
					.budget_s = env->budget_s };
		if (samples_init(&w[i].lat, LAT_CAP))
			return 1;
		pthread_create(&w[i].t, NULL, worker_main, &w[i]);
	}
	for (int i = 0; i < nthreads; i++)
		pthread_join(w[i].t, NULL);
	pthread_barrier_destroy(&bar);
	samples_init(&all, (size_t)nthreads * LAT_CAP);
	for (int i = 0; i < nthreads; i++) {
		ops += w[i].ops;
		warm += w[i].warm;
		t0 = w[i].start < t0 ? w[i].start : t0;
		t1 = w[i].end > t1 ? w[i].end : t1;
		samples_merge(&all, &w[i].lat);
		if (w[i].err)
			err = w[i].err;
		samples_free(&w[i].lat);
	}
	/*
	 * The counts span the first operation, the warm-up and both phases:
	 * per operation of all of them; the first one's own is reported too.
	 */
	reg = (double)(regcount_reg() - r0);
	dereg = (double)(regcount_dereg() - d0);
	uint64_t total = warm + ops + all.n;

	reg = total ? reg / (double)total : 0;
	dereg = total ? dereg / (double)total : 0;
	rate = t1 > t0 ? (double)ops * 1e9 / (double)(t1 - t0) : 0;
	snprintf(settings, sizeof(settings), "%s", p ? p->settings() : "clock_gettime pair");
	csv_text(settings);
	if (err)
		snprintf(status, sizeof(status), "error: %s", strerror(-err));
	printf("alloc,%s,%zu,%d,%llu,%.1f,%llu,%llu,%llu,%.4f,%.4f,%llu,%s,%s,%s\n",
	       p ? p->name : "timer", size, nthreads, (unsigned long long)ops, rate,
	       (unsigned long long)samples_pct(&all, 50),
	       (unsigned long long)samples_pct(&all, 99),
	       (unsigned long long)samples_pct(&all, 100), reg, dereg,
	       (unsigned long long)w[0].first_regs,
	       cache_verdict(p, reg, w[0].first_regs, verdict, sizeof(verdict)),
	       status, settings);
	fflush(stdout);
	samples_free(&all);
	return err ? 1 : 0;
}

int scen_alloc(const struct bench_env *env)
{
	int ret = 0;

	printf("scenario,peer,size,threads,ops,ops_per_s,p50_ns,p99_ns,max_ns,reg_per_op,dereg_per_op,first_op_regs,cache,status,settings\n");
	run_cell(env, NULL, 0, 1);
	for (size_t i = 0; i < sizeof(peers) / sizeof(peers[0]); i++) {
		const struct peer *p = peers[i];
		char why[256];

		if (env->only_peer && !strstr(p->name, env->only_peer))
			continue;
		if (p->setup(env, why, sizeof(why))) {
			csv_text(why);
			for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
				for (int t = 1; t <= 2; t++)
					printf("alloc,%s,%zu,%d,0,0,0,0,0,0,0,0,-,unavailable: %s,-\n",
					       p->name, sizes[s], t, why);
			fflush(stdout);
			continue;
		}
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
			for (int t = 1; t <= 2; t++)
				ret |= run_cell(env, p, sizes[s], t);
		p->teardown();
	}
	return ret;
}
