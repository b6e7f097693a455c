// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mrpool-bench: what an RDMA buffer costs, side by side in one run.
 *
 *   pool      mrp_alloc + mrp_free (thread cache, keys included if a PD is
 *             attached)
 *   malloc    glibc malloc + free
 *   malloc+reg  malloc + ibv_reg_mr + ibv_dereg_mr + free (only when an RDMA
 *             device is present)
 *
 * With --ring N the pool and malloc loops keep N buffers in flight: each
 * iteration frees the buffer allocated N iterations before (a receive
 * ring), instead of freeing the one it just allocated (one hot buffer).
 *
 * With a PD attached (a device, or mrpool-bench-fake's fake verbs) the pool
 * loop also runs as "pool-pdh": mrp_alloc_pdh() through the PD's handle
 * (mrp_pd_handle()). --pd-slot N attaches N other PDs first, so that the
 * one the loops name is in slot N (mrp_alloc() finds slot 0 first, then
 * searches).
 *
 * and the pool's throughput with 1 and N threads. Each loop touches the
 * buffer once so no compiler drops the pair. Times are the best of
 * --rounds runs. For instruction counts run one loop under callgrind:
 *   valgrind --tool=callgrind --toggle-collect=loop_pool \
 *     mrpool-bench --only pool -n 1000000
 * and divide Ir by the iterations.
 *
 * --waste DIST measures instead what the size classes cost in memory:
 * buffers of sizes drawn from DIST (4k-512k, 64k-512k, 4k-2m: uniform;
 * pow2+1: 2^k + 1 for k = 12..20 in turn) are allocated, all live, up to
 * 512 MiB requested (-n MiB), in a pool of power-of-two classes and in one of fine
 * classes (MRP_CLASSES_FINE), and the pool's mapped bytes are compared
 * with the bytes requested.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#include "mrpool.h"

static size_t size = 8192;
static long iters = 2000000;
static int rounds = 5;
static int max_threads = 2;
static long ring;		/* --ring: buffers in flight, 0 = one hot buffer */
static __thread void **ring_slot;	/* per thread: the buffers in flight */

static struct mrp_pool *pool;
static struct ibv_pd *pd;		/* attached when a device exists */
static struct mrp_pdh *pdh;		/* its handle */
static int pd_slot;			/* --pd-slot: pd's slot in the pool */
#define MAX_PD_SLOT 7			/* MRP_MAX_PDS - 1 */

#ifdef MRP_BENCH_FAKE_VERBS
/*
 * mrpool-bench-fake: lib/tests/fake_verbs.c stands in for ibv_reg_mr and
 * friends, so a host without a device measures the keyed fast paths.
 */
#define FAKE_PDS 16
extern struct ibv_pd fake_pds[FAKE_PDS];
#endif

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * The slots of --ring for this thread; each loop frees what it leaves there
 * so that every call starts empty.
 */
static void **ring_slots(void)
{
	if (!ring_slot)
		ring_slot = calloc((size_t)ring, sizeof(*ring_slot));
	if (!ring_slot) {
		fprintf(stderr, "mrpool-bench: out of memory\n");
		exit(1);
	}
	return ring_slot;
}

/* --ring: each buffer is freed ring iterations after it was allocated. */
static __attribute__((noinline)) long loop_pool_ring(long n)
{
	void **slot = ring_slots();
	struct mrp_buf b;
	long bad = 0;

	for (long i = 0; i < n; i++) {
		void **s = &slot[i % ring];

		if (*s && mrp_free(pool, *s))
			bad++;
		*s = NULL;
		if (mrp_alloc(pool, size, pd, &b)) {
			bad++;
			continue;
		}
		*(volatile char *)b.addr = (char)i;
		*s = b.addr;
	}
	for (long i = 0; i < ring; i++) {
		if (slot[i] && mrp_free(pool, slot[i]))
			bad++;
		slot[i] = NULL;
	}
	return bad;
}

/* loop_pool_ring() through the PD's handle */
static __attribute__((noinline)) long loop_pool_pdh_ring(long n)
{
	void **slot = ring_slots();
	struct mrp_buf b;
	long bad = 0;

	for (long i = 0; i < n; i++) {
		void **s = &slot[i % ring];

		if (*s && mrp_free(pool, *s))
			bad++;
		*s = NULL;
		if (mrp_alloc_pdh(pool, size, pdh, &b)) {
			bad++;
			continue;
		}
		*(volatile char *)b.addr = (char)i;
		*s = b.addr;
	}
	for (long i = 0; i < ring; i++) {
		if (slot[i] && mrp_free(pool, slot[i]))
			bad++;
		slot[i] = NULL;
	}
	return bad;
}

static __attribute__((noinline)) long loop_malloc_ring(long n)
{
	void **slot = ring_slots();
	long bad = 0;

	for (long i = 0; i < n; i++) {
		void **s = &slot[i % ring];

		free(*s);
		*s = malloc(size);
		if (!*s) {
			bad++;
			continue;
		}
		*(volatile char *)*s = (char)i;
	}
	for (long i = 0; i < ring; i++) {
		free(slot[i]);
		slot[i] = NULL;
	}
	return bad;
}

static __attribute__((noinline)) long loop_pool(long n)
{
	struct mrp_buf b;
	long bad = 0;

	if (ring)
		return loop_pool_ring(n);
	for (long i = 0; i < n; i++) {
		if (mrp_alloc(pool, size, pd, &b))
			bad++;
		*(volatile char *)b.addr = (char)i;
		if (mrp_free(pool, b.addr))
			bad++;
	}
	return bad;
}

/* loop_pool() through the PD's handle */
static __attribute__((noinline)) long loop_pool_pdh(long n)
{
	struct mrp_buf b;
	long bad = 0;

	if (ring)
		return loop_pool_pdh_ring(n);
	for (long i = 0; i < n; i++) {
		if (mrp_alloc_pdh(pool, size, pdh, &b))
			bad++;
		*(volatile char *)b.addr = (char)i;
		if (mrp_free(pool, b.addr))
			bad++;
	}
	return bad;
}

static __attribute__((noinline)) long loop_malloc(long n)
{
	long bad = 0;

	if (ring)
		return loop_malloc_ring(n);
	for (long i = 0; i < n; i++) {
		char *p = malloc(size);

		if (!p) {
			bad++;
			continue;
		}
		*(volatile char *)p = (char)i;
		free(p);
	}
	return bad;
}

static __attribute__((noinline)) long loop_malloc_reg(long n)
{
	long bad = 0;

	for (long i = 0; i < n; i++) {
		char *p = malloc(size);
		struct ibv_mr *mr;

		if (!p) {
			bad++;
			continue;
		}
		*(volatile char *)p = (char)i;
		mr = ibv_reg_mr(pd, p, size, IBV_ACCESS_LOCAL_WRITE |
				IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
		if (!mr || ibv_dereg_mr(mr))
			bad++;
		free(p);
	}
	return bad;
}

typedef long (*loop_fn)(long);

static uint64_t thread_cpu_ns(void);

/*
 * Best ns per iteration over the rounds, after one warm-up run: by the wall
 * clock (returned) and by the thread's CPU time (*cpu), which time stolen
 * by other load on a shared host does not inflate.
 */
static double time_loop(loop_fn fn, long n, double *cpu)
{
	double best = 1e30;

	*cpu = 1e30;
	if (fn(n / 10 + 1)) {
		fprintf(stderr, "mrpool-bench: operation failed\n");
		exit(1);
	}
	for (int r = 0; r < rounds; r++) {
		uint64_t t0 = now_ns(), c0 = thread_cpu_ns();

		if (fn(n)) {
			fprintf(stderr, "mrpool-bench: operation failed\n");
			exit(1);
		}
		double ns = (double)(now_ns() - t0) / (double)n;
		double cns = (double)(thread_cpu_ns() - c0) / (double)n;

		if (ns < best)
			best = ns;
		if (cns < *cpu)
			*cpu = cns;
	}
	return best;
}

struct thr {
	pthread_t t;
	pthread_barrier_t *bar;
	loop_fn fn;
	long n;
	long bad;
	uint64_t cpu_ns;	/* the thread's own CPU time for the loop */
	uint64_t start, end;	/* wall clock, taken by the thread itself */
};

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *thr_main(void *arg)
{
	struct thr *t = arg;

	uint64_t c0;

	t->fn(t->n / 10 + 1);			/* warm the thread's cache */
	pthread_barrier_wait(t->bar);
	t->start = now_ns();
	c0 = thread_cpu_ns();
	t->bad = t->fn(t->n);
	t->cpu_ns = thread_cpu_ns() - c0;
	t->end = now_ns();
	pthread_barrier_wait(t->bar);
	return NULL;
}

/*
 * Best aggregate operations per second with nthreads running fn, by the
 * wall clock; and in *cpu_rate the sum of each thread's operations per
 * second of its own CPU time, which other load on the host does not skew:
 * it drops only if the threads slow each other down (locks, shared lines).
 */
static double throughput(loop_fn fn, int nthreads, long n, double *cpu_rate)
{
	struct thr *t = calloc((size_t)nthreads, sizeof(*t));
	pthread_barrier_t bar;
	double best = 0;

	*cpu_rate = 0;
	for (int r = 0; r < rounds; r++) {
		uint64_t t0 = UINT64_MAX, t1 = 0, dt;

		pthread_barrier_init(&bar, NULL, (unsigned int)nthreads + 1);
		for (int i = 0; i < nthreads; i++) {
			t[i] = (struct thr){ .bar = &bar, .fn = fn, .n = n };
			pthread_create(&t[i].t, NULL, thr_main, &t[i]);
		}
		pthread_barrier_wait(&bar);
		pthread_barrier_wait(&bar);
		/* first start to last end, as the workers saw them */
		for (int i = 0; i < nthreads; i++) {
			t0 = t[i].start < t0 ? t[i].start : t0;
			t1 = t[i].end > t1 ? t[i].end : t1;
		}
		dt = t1 - t0;
		for (int i = 0; i < nthreads; i++) {
			pthread_join(t[i].t, NULL);
			if (t[i].bad) {
				fprintf(stderr, "mrpool-bench: operation failed\n");
				exit(1);
			}
		}
		pthread_barrier_destroy(&bar);
		double ops = (double)nthreads * (double)n * 1e9 / (double)dt;
		double rate = 0;

		for (int i = 0; i < nthreads; i++)
			rate += (double)n * 1e9 / (double)(t[i].cpu_ns ? t[i].cpu_ns : 1);
		if (ops > best)
			best = ops;
		if (rate > *cpu_rate)
			*cpu_rate = rate;
	}
	free(t);
	return best;
}

#ifndef MRP_BENCH_FAKE_VERBS
static struct ibv_context *open_device(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int n = 0;

	list = ibv_get_device_list(&n);
	if (list && n > 0)
		ctx = ibv_open_device(list[0]);
	if (list)
		ibv_free_device_list(list);
	return ctx;
}
#endif

static void usage(void)
{
	fprintf(stderr,
		"usage: mrpool-bench [-s SIZE] [-n ITERS] [-r ROUNDS] [-t THREADS]\n"
		"                    [--only pool|pool-pdh|malloc|reg] [--no-rdma] [--ring N]\n"
		"                    [--pd-slot N]\n"
		"       mrpool-bench --waste 4k-512k|64k-512k|4k-2m|pow2+1 [-n MIB]\n");
	exit(2);
}

static size_t waste_bytes = (size_t)512 << 20;	/* requested per pool */

/* xorshift64: the same sizes in both pools, and from run to run */
static uint64_t waste_rng(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static size_t waste_size(const char *dist, uint64_t *x, unsigned int i)
{
	size_t lo, hi;

	if (!strcmp(dist, "pow2+1"))
		return ((size_t)1 << (12 + i % 9)) + 1;
	if (!strcmp(dist, "4k-512k"))
		lo = 4096, hi = 512 << 10;
	else if (!strcmp(dist, "64k-512k"))
		lo = 64 << 10, hi = 512 << 10;
	else if (!strcmp(dist, "4k-2m"))
		lo = 4096, hi = 2 << 20;
	else
		return 0;
	return lo + waste_rng(x) % (hi - lo + 1);
}

/* One pool of classes (MRP_CLASSES_*): its mapped bytes for dist. */
static int waste_pool(const char *dist, int classes, double *mapped_ratio,
		      double *class_ratio)
{
	struct mrp_pool_attr attr = {
		.comp_mask = MRP_POOL_ATTR_CLASSES | MRP_POOL_ATTR_BACKGROUND,
		.classes = classes, .background = 0,
	};
	size_t cap = waste_bytes / 4096, n = 0, req = 0, got = 0;
	struct mrp_buf *bufs = calloc(cap, sizeof(*bufs));
	struct mrp_pool *p = mrp_pool_open(&attr);
	uint64_t x = 0x9e3779b97f4a7c15ull;
	struct mrp_stats st;
	int ret = 0;

	if (!p || !bufs) {
		fprintf(stderr, "mrpool-bench: waste: %s\n", mrp_strerror(p ? ENOMEM : errno));
		free(bufs);
		return 1;
	}
	while (req < waste_bytes && n < cap) {
		size_t sz = waste_size(dist, &x, (unsigned int)n);

		ret = mrp_alloc(p, sz, NULL, &bufs[n]);
		if (ret) {
			fprintf(stderr, "mrpool-bench: waste: mrp_alloc(%zu): %s\n", sz,
				mrp_strerror(ret));
			break;
		}
		req += sz;
		got += bufs[n++].size;
	}
	mrp_stats(p, &st, sizeof(st));
	*mapped_ratio = (double)st.bytes_mapped / (double)req;
	*class_ratio = (double)got / (double)req;
	for (size_t i = 0; i < n; i++)
		mrp_free(p, bufs[i].addr);
	free(bufs);
	mrp_pool_close(p);
	return ret != 0;
}

/*
 * mapped / requested in both modes; waste is the share of mapped bytes
 * not requested (1 - requested / mapped), class waste the same of the
 * buffers' class sizes (without the arenas' unused buffers and tails).
 */
static int waste(const char *dist)
{
	static const char *const mode[] = { "pow2", "fine" };
	uint64_t x = 1;

	if (!waste_size(dist, &x, 0))
		usage();
	printf("# mrpool-bench --waste %s: %zu MiB requested, all live, per pool\n",
	       dist, waste_bytes >> 20);
	printf("%-8s %-6s %15s %8s %14s\n", "dist", "mode", "mapped/request",
	       "waste", "class waste");
	for (int m = 0; m < 2; m++) {
		double mr, cr;

		if (waste_pool(dist, m ? MRP_CLASSES_FINE : MRP_CLASSES_POW2, &mr, &cr))
			return 1;
		printf("%-8s %-6s %15.3f %7.1f%% %13.1f%%\n", dist, mode[m], mr,
		       100.0 * (1 - 1 / mr), 100.0 * (1 - 1 / cr));
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "only", required_argument, NULL, 'o' },
		{ "no-rdma", no_argument, NULL, 'N' },
		{ "ring", required_argument, NULL, 'R' },
		{ "pd-slot", required_argument, NULL, 'P' },
		{ "waste", required_argument, NULL, 'W' },
		{ NULL, 0, NULL, 0 },
	};
	const char *only = NULL, *waste_dist = NULL;
	bool iters_set = false;
	struct ibv_context *ctx = NULL;
	struct ibv_pd *pds[MAX_PD_SLOT + 1] = { NULL };
	bool use_rdma = true;
	struct mrp_stats st;
	int c;

	while ((c = getopt_long(argc, argv, "s:n:r:t:", opts, NULL)) != -1) {
		switch (c) {
		case 's': size = strtoul(optarg, NULL, 0); break;
		case 'n': iters = strtol(optarg, NULL, 0); iters_set = true; break;
		case 'r': rounds = atoi(optarg); break;
		case 't': max_threads = atoi(optarg); break;
		case 'o': only = optarg; break;
		case 'N': use_rdma = false; break;
		case 'R': ring = strtol(optarg, NULL, 0); break;
		case 'P': pd_slot = atoi(optarg); break;
		case 'W': waste_dist = optarg; break;
		default: usage();
		}
	}
	if (waste_dist) {
		if (iters_set && iters > 0)
			waste_bytes = (size_t)iters << 20;
		return waste(waste_dist);
	}
	if (!size || iters < 1 || rounds < 1 || max_threads < 1 || ring < 0 ||
	    pd_slot < 0 || pd_slot > MAX_PD_SLOT)
		usage();

	pool = mrp_pool_open(NULL);
	if (!pool) {
		fprintf(stderr, "mrpool-bench: mrp_pool_open: %s\n", mrp_strerror(errno));
		return 1;
	}
#ifdef MRP_BENCH_FAKE_VERBS
	for (int i = 0; use_rdma && i <= pd_slot; i++) {
		pds[i] = &fake_pds[i];
		if (mrp_attach_pd(pool, pds[i], IBV_ACCESS_LOCAL_WRITE |
				  IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)) {
			fprintf(stderr, "mrpool-bench: PD setup failed\n");
			return 1;
		}
	}
	pd = pds[pd_slot];	/* NULL with --no-rdma */
#else
	if (use_rdma)
		ctx = open_device();
	for (int i = 0; ctx && i <= pd_slot; i++) {
		pds[i] = ibv_alloc_pd(ctx);
		if (!pds[i] || mrp_attach_pd(pool, pds[i], IBV_ACCESS_LOCAL_WRITE |
					     IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)) {
			fprintf(stderr, "mrpool-bench: PD setup failed\n");
			return 1;
		}
		pd = pds[i];
	}
#endif
	if (pd) {
		pdh = mrp_pd_handle(pool, pd);
		if (!pdh) {
			fprintf(stderr, "mrpool-bench: mrp_pd_handle: %s\n", mrp_strerror(errno));
			return 1;
		}
	}

	if (only) {
		/* one loop, once: for callgrind and perf */
		if (!strcmp(only, "pool"))
			return loop_pool(iters) != 0;
		if (!strcmp(only, "pool-pdh") && pdh)
			return loop_pool_pdh(iters) != 0;
		if (!strcmp(only, "malloc"))
			return loop_malloc(iters) != 0;
		if (!strcmp(only, "reg") && pd)
			return loop_malloc_reg(iters) != 0;
		usage();
	}

	double cp, cm, ch = 0, th = 0;
	double tp = time_loop(loop_pool, iters, &cp);
	double tm = time_loop(loop_malloc, iters, &cm);

	if (pdh)
		th = time_loop(loop_pool_pdh, iters, &ch);

	mrp_stats(pool, &st, sizeof(st));
	printf("# mrpool-bench: %zu-byte buffers, best of %d rounds, backend %s%s",
	       size, rounds, st.backend == MRP_KIND_KERNEL ? "kernel" : "anon",
	       pd ? ", keys of one attached PD" : ", no RDMA device: no keys");
	if (pd)
		printf(" (slot %d)", pd_slot);
	if (ring)
		printf(", %ld buffers in flight", ring);
	printf("\n");
	printf("%-26s %10s %10s %11s %10s\n", "alloc+free pair", "ns/op",
	       "vs malloc", "cpu ns/op", "vs malloc");
	printf("%-26s %10.1f %9.2fx %11.1f %9.2fx\n", "mrpool", tp, tp / tm, cp, cp / cm);
	if (pdh)
		printf("%-26s %10.1f %9.2fx %11.1f %9.2fx\n", "mrpool PD handle", th,
		       th / tm, ch, ch / cm);
	printf("%-26s %10.1f %9.2fx %11.1f %9.2fx\n", "glibc malloc", tm, 1.0, cm, 1.0);
	if (pd) {
		long n = iters / 1000 > 100 ? iters / 1000 : 100;
		double cr, tr = time_loop(loop_malloc_reg, n, &cr);

		printf("%-26s %10.1f %9.2fx %11.1f %9.2fx\n", "malloc+ibv_reg_mr+dereg",
		       tr, tr / tm, cr, cr / cm);
	} else {
		printf("%-26s %10s %10s\n", "malloc+ibv_reg_mr+dereg", "-", "(no device)");
	}

	printf("\n%-8s %14s %14s %9s %14s %9s\n", "threads", "mrpool Mops/s",
	       "malloc Mops/s", "scaling", "mrpool cpu-Mops", "cpu-scal");
	double p1 = 0, c1 = 0;

	for (int t = 1; t <= max_threads; t++) {
		double pc, mc;
		double p = throughput(loop_pool, t, iters, &pc);
		double m = throughput(loop_malloc, t, iters, &mc);

		if (t == 1) {
			p1 = p;
			c1 = pc;
		}
		printf("%-8d %14.1f %14.1f %8.2fx %14.1f %8.2fx\n", t, p / 1e6, m / 1e6,
		       p / p1, pc / 1e6, pc / c1);
	}
	printf("# scaling: wall-clock throughput vs 1 thread (needs idle CPUs);\n"
	       "# cpu-scal: same from each thread's own CPU time (immune to other load)\n");

	mrp_stats(pool, &st, sizeof(st));
	printf("\n# pool: %llu allocs, %.4f%% thread-cache hits, %llu refills, %llu arenas\n",
	       (unsigned long long)st.allocs,
	       st.allocs ? 100.0 * (double)st.tcache_hits / (double)st.allocs : 0.0,
	       (unsigned long long)st.depot_refills, (unsigned long long)st.arenas);
	mrp_pool_close(pool);
#ifndef MRP_BENCH_FAKE_VERBS
	for (int i = 0; i <= pd_slot; i++)
		if (pds[i])
			ibv_dealloc_pd(pds[i]);
#endif
	if (ctx)
		ibv_close_device(ctx);
	return 0;
}
