// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * served-pair: what one ibv_reg_mr + ibv_dereg_mr pair costs a program
 * under libmrpool-preload (mrpool-run(1)), for
 *
 *   served   a local-write registration inside a pool buffer (a malloc of
 *            at least MRPOOL_PRELOAD_MIN): the shim answers it from the
 *            arena's MR, no registration of its own
 *   passed   the same registration of glibc memory (a small malloc): the
 *            shim passes it on to libibverbs, which registers for real
 *
 * Run with the shim and a libibverbs to pass on to preloaded, e.g. the
 * host tests' fake verbs (no RDMA device needed; lib/tests/fake_verbs.c,
 * whose registration is a lock, a calloc and a list insert: a device's is
 * a system call and a pin, thousands of instructions more):
 *   LD_PRELOAD="lib/libmrpool-preload.so lib/build/preload_fake_verbs.so" \
 *     MRPOOL_BACKEND=anon MRPOOL_PRELOAD_INHERIT=all served-pair -n 1000000 served
 * prints ns per pair (CPU time, best of 5 rounds). For instruction counts
 * (tools/bench/served.sh) run one loop under callgrind with only it
 * collected:
 *   valgrind --tool=callgrind --toggle-collect=loop_served \
 *     served-pair -n N --once served
 * and divide Ir by N. One pair before the loop attaches the PD, registers
 * the arena in it and sets up the thread's state, which is not counted.
 *
 * modeb: issue 32's mode-B program, the same size both ways in one run: a
 * malloc of 1 MiB (a pool buffer) registered whole and deregistered, per
 * use, served by the shim, against a real pair of 1 MiB the shim passes on
 * (anonymous mmap memory, not the pool's), rounds interleaved; -n pairs
 * served a round, n / 100 (at least 1) real ones. Prints per pair
 *   served WALL_NS CPU_NS
 *   real WALL_NS CPU_NS
 * (best of 5 rounds each). With --device (tools/bench/guest.sh: rxe0 in
 * the 6.1 guest) the real pair is the device's registration.
 *
 * Without a device the PD is the program's own struct with a context
 * (as preload_test's), and no verbs call wakes the shim before the buffer
 * is allocated: hence MRPOOL_PRELOAD_INHERIT=all. --device opens the first
 * device (which wakes it) and allocates a real PD instead.
 */
#include <getopt.h>
#include <sys/mman.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#define SERVED_SIZE	(128 * 1024)	/* a pool buffer under the default settings */
#define PASSED_SIZE	4096		/* glibc's: below MRPOOL_PRELOAD_MIN */
#define REG_LEN		4096
#define MODEB_SIZE	(1024 * 1024)	/* issue 32's mode-B program */

typedef long (*loop_fn)(struct ibv_pd *pd, char *buf, long n);

/* n pairs of len bytes, the registration's lkey summed so that nothing is dropped */
static long pairs_len(struct ibv_pd *pd, char *buf, size_t len, long n)
{
	long sum = 0;

	for (long i = 0; i < n; i++) {
		struct ibv_mr *mr = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE);

		if (!mr)
			return -1;
		sum += mr->lkey;
		if (ibv_dereg_mr(mr))
			return -1;
	}
	return sum;
}

static long pairs(struct ibv_pd *pd, char *buf, long n)
{
	return pairs_len(pd, buf, REG_LEN, n);
}

/* One function per memory, for callgrind's --toggle-collect. */
static __attribute__((noinline)) long loop_served(struct ibv_pd *pd, char *buf, long n)
{
	return pairs(pd, buf, n);
}

static __attribute__((noinline)) long loop_passed(struct ibv_pd *pd, char *buf, long n)
{
	return pairs(pd, buf, n);
}

static double clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double cpu_ns(void)
{
	return clock_ns(CLOCK_PROCESS_CPUTIME_ID);
}

/* One round of n mode-B pairs on buf: best[0] wall, best[1] CPU ns per pair. */
static int modeb_round(struct ibv_pd *pd, char *buf, long n, bool first, double best[2])
{
	double w0 = clock_ns(CLOCK_MONOTONIC), c0 = cpu_ns(), w, c;

	if (pairs_len(pd, buf, MODEB_SIZE, n) < 0)
		return -1;
	w = (clock_ns(CLOCK_MONOTONIC) - w0) / (double)n;
	c = (cpu_ns() - c0) / (double)n;
	if (first || w < best[0])
		best[0] = w;
	if (first || c < best[1])
		best[1] = c;
	return 0;
}

/* modeb (top of file): served and real pairs of 1 MiB, rounds interleaved. */
static int modeb(struct ibv_pd *pd, long n)
{
	long n_real = n / 100 > 0 ? n / 100 : 1;
	double served[2] = { 0, 0 }, real[2] = { 0, 0 };
	char *pool = malloc(MODEB_SIZE);
	char *anon = mmap(NULL, MODEB_SIZE, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (!pool || anon == MAP_FAILED)
		return 1;
	memset(pool, 1, MODEB_SIZE);
	memset(anon, 1, MODEB_SIZE);
	/* set-up, not counted: the PD attached, the arena registered in it */
	if (pairs_len(pd, pool, MODEB_SIZE, 1) < 0 || pairs_len(pd, anon, MODEB_SIZE, 1) < 0) {
		fprintf(stderr, "served-pair: ibv_reg_mr of 1 MiB failed\n");
		return 1;
	}
	for (int r = 0; r < 5; r++) {
		if (modeb_round(pd, pool, n, !r, served) ||
		    modeb_round(pd, anon, n_real, !r, real))
			return 1;
	}
	printf("served %.1f %.1f\n", served[0], served[1]);
	printf("real %.1f %.1f\n", real[0], real[1]);
	munmap(anon, MODEB_SIZE);
	free(pool);
	return 0;
}

static struct ibv_pd *open_pd(bool device)
{
	static struct ibv_context ctx;
	struct ibv_device **list;
	struct ibv_context *c;
	struct ibv_pd *pd;

	if (!device) {
		pd = calloc(1, sizeof(*pd));
		if (pd)
			pd->context = &ctx;
		return pd;
	}
	list = ibv_get_device_list(NULL);
	if (!list || !list[0]) {
		fprintf(stderr, "served-pair: no RDMA device\n");
		return NULL;
	}
	c = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	return c ? ibv_alloc_pd(c) : NULL;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "device", no_argument, NULL, 'd' },
		{ "once", no_argument, NULL, '1' },
		{ NULL, 0, NULL, 0 },
	};
	bool device = false, once = false, served;
	long n = 1000000;
	struct ibv_pd *pd;
	double best = 0;
	const char *what;
	loop_fn loop;
	char *buf;
	int c;

	while ((c = getopt_long(argc, argv, "n:", opts, NULL)) != -1) {
		if (c == 'n')
			n = strtol(optarg, NULL, 10);
		else if (c == 'd')
			device = true;
		else if (c == '1')
			once = true;
		else
			return 2;
	}
	what = optind < argc ? argv[optind] : "";
	served = !strcmp(what, "served");
	if ((!served && strcmp(what, "passed") && strcmp(what, "modeb")) || n <= 0) {
		fprintf(stderr, "usage: served-pair [-n PAIRS] [--once] [--device] served|passed|modeb\n");
		return 2;
	}
	loop = served ? loop_served : loop_passed;
	pd = open_pd(device);
	if (pd && !strcmp(what, "modeb"))
		return modeb(pd, n);
	buf = malloc(served ? SERVED_SIZE : PASSED_SIZE);
	if (!pd || !buf)
		return 1;
	memset(buf, 1, REG_LEN);
	/* set-up: the PD attached, the arena registered in it, not counted */
	if (pairs(pd, buf, 1) < 0) {
		fprintf(stderr, "served-pair: ibv_reg_mr failed\n");
		return 1;
	}
	if (once)		/* under callgrind: one round */
		return loop(pd, buf, n) < 0;
	for (int r = 0; r < 5; r++) {
		double t0 = cpu_ns(), t;

		if (loop(pd, buf, n) < 0)
			return 1;
		t = (cpu_ns() - t0) / (double)n;
		if (!r || t < best)
			best = t;
	}
	printf("%s %.1f\n", what, best);
	free(buf);
	return 0;
}
