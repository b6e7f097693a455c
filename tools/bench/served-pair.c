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
 * Without a device the PD is the program's own struct with a context
 * (as preload_test's), and no verbs call wakes the shim before the buffer
 * is allocated: hence MRPOOL_PRELOAD_INHERIT=all. --device opens the first
 * device (which wakes it) and allocates a real PD instead.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#define SERVED_SIZE	(128 * 1024)	/* a pool buffer under the default settings */
#define PASSED_SIZE	4096		/* glibc's: below MRPOOL_PRELOAD_MIN */
#define REG_LEN		4096

typedef long (*loop_fn)(struct ibv_pd *pd, char *buf, long n);

/* n pairs, the registration's lkey summed so that nothing is dropped */
static long pairs(struct ibv_pd *pd, char *buf, long n)
{
	long sum = 0;

	for (long i = 0; i < n; i++) {
		struct ibv_mr *mr = ibv_reg_mr(pd, buf, REG_LEN, IBV_ACCESS_LOCAL_WRITE);

		if (!mr)
			return -1;
		sum += mr->lkey;
		if (ibv_dereg_mr(mr))
			return -1;
	}
	return sum;
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

static double cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
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
	if ((!served && strcmp(what, "passed")) || n <= 0) {
		fprintf(stderr, "usage: served-pair [-n PAIRS] [--once] [--device] served|passed\n");
		return 2;
	}
	loop = served ? loop_served : loop_passed;
	pd = open_pd(device);
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
