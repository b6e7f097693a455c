// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * glibc-costs: issue 32's allocation patterns of ordinary programs, timed
 * and checked, to be run without libmrpool-preload and under it
 * (tools/bench/glibc-costs.sh runs both in turn and prints the ratios).
 * It knows nothing of mrpool: it allocates, checks its bytes and prints
 * one line per run,
 *   SCENARIO wall_s=W cpu_s=C [KEY=VALUE ...] ok
 * (CPU time is the process's, its threads' included: the pool's thread
 * under the shim; for the fork scenarios the child's is added). A wrong
 * byte ends the line with "FAIL ..." instead of "ok" and the exit status
 * with 1; a failed call exits 2. Scenarios (sizes in brackets are the
 * defaults; -s, -m, -n and -b change them, e.g. to small ones for a smoke
 * test; -u FILE names a file holding a byte count, read where VmRSS and
 * VmLck are and printed as file_kb: memory a pool module holds for the
 * process out of its VmLck, such as mrpool's used_bytes):
 *
 *   grow     a buffer grown by realloc in steps of -s KiB [1024] up to -m
 *            MiB [256], as input arrives (rgrow.c of the 2026-12-04
 *            review); after each step a word at the start and at the end
 *            of the new part, the previous end's checked at each step and
 *            every word at the end. Run it with MRPOOL_PRELOAD_MAX below
 *            the final size for the growth above the shim's maximum.
 *   calloc   calloc(1, -m MiB [512]), one byte of one page written (a
 *            sparse table, numpy.zeros): timed with that write; then VmRSS
 *            and VmLck, a word per 64 KiB read as zero, and outside the
 *            figures a 4 MiB block filled, freed and calloc'd again,
 *            every byte zero.
 *   shrink   -n blocks [8] of -m MiB [64], each: malloc, 1 MiB written,
 *            realloc to -s KiB [100] (read a large input, keep a little);
 *            then VmRSS and VmLck, the first block's usable size, and the
 *            kept bytes of every block checked.
 *   fork     -n blocks [64] of -b KiB [4096] live, a word written in each
 *            of their pages (outside the figures); then fork(): the child
 *            reads each page's word (the parent's, or FAIL), writes one
 *            byte in every page of every block and exits; the parent
 *            waits and checks every word is its own (the child's writes
 *            not seen). fork_s is the fork() call alone in the parent.
 *   fork-idle the same, but the child touches nothing and exits at once.
 *
 * With -d (fork and fork-idle) the program is an RDMA one: it opens the
 * first RDMA device and allocates a PD before its blocks, and registers
 * every block (local write) before the fork, outside the figures, as a
 * program holding its buffers registered does: their pages are pinned,
 * which the kernel copies into the child in fork() (Linux 5.13 and
 * later), glibc's or the pool's. No device: the line says skip, exit 4.
 * The fork child leaves with _exit(), as a forked worker does.
 */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define KIB	1024ul
#define MIB	(1024ul * 1024)
#define PAGE	4096ul

struct clocks {
	double wall, cpu;
};

static double ts(const struct timespec *t)
{
	return (double)t->tv_sec + (double)t->tv_nsec / 1e9;
}

static double tv(const struct timeval *t)
{
	return (double)t->tv_sec + (double)t->tv_usec / 1e6;
}

/* CPU time of the process (who RUSAGE_SELF) or its waited-for children. */
static double cpu(int who)
{
	struct rusage ru;

	getrusage(who, &ru);
	return tv(&ru.ru_utime) + tv(&ru.ru_stime);
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return ts(&t);
}

static void start(struct clocks *c)
{
	c->wall = now();
	c->cpu = cpu(RUSAGE_SELF) + cpu(RUSAGE_CHILDREN);
}

static void stop(struct clocks *c)
{
	c->wall = now() - c->wall;
	c->cpu = cpu(RUSAGE_SELF) + cpu(RUSAGE_CHILDREN) - c->cpu;
}

static void __attribute__((noreturn)) die(const char *what)
{
	fprintf(stderr, "glibc-costs: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* A /proc/self/status field in kB, -1 if absent. */
static long status_kb(const char *key)
{
	FILE *f = fopen("/proc/self/status", "r");
	size_t n = strlen(key);
	char line[256];
	long v = -1;

	if (!f)
		die("/proc/self/status");
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':')
			v = atol(line + n + 1);
	fclose(f);
	return v;
}

/* FILE's number of bytes in kB (-1 without -u or unreadable). */
static const char *used_file;

static long file_kb(void)
{
	FILE *f = used_file ? fopen(used_file, "r") : NULL;
	unsigned long long v;
	int n;

	if (!f)
		return -1;
	n = fscanf(f, "%llu", &v);
	fclose(f);
	return n == 1 ? (long)(v / 1024) : -1;
}

/* The word the writer stores at byte offset off of block b. */
static uint64_t word(unsigned int b, size_t off, uint64_t seed)
{
	return seed ^ ((uint64_t)b << 40) ^ off;
}

static void put(unsigned char *p, unsigned int b, size_t off, uint64_t seed)
{
	uint64_t w = word(b, off, seed);

	memcpy(p + off, &w, sizeof(w));
}

static bool is(const unsigned char *p, unsigned int b, size_t off, uint64_t seed)
{
	uint64_t w;

	memcpy(&w, p + off, sizeof(w));
	return w == word(b, off, seed);
}

static void print(const char *scen, const struct clocks *c, const char *extra,
		  const char *fail)
{
	printf("%s wall_s=%.6f cpu_s=%.6f %s%s%s\n", scen, c->wall, c->cpu, extra,
	       fail ? "FAIL " : "ok", fail ? fail : "");
}

#define SEED	0x6d72706f6f6c0000ull	/* the parent's (or only) writer */
#define CHILD	0x5a

static int grow(size_t step, size_t max)
{
	size_t n = max / step, sz, bad = 0, first_bad = 0;
	unsigned char *p = NULL, *q;
	struct clocks c;
	char extra[128];
	char fail[128];

	start(&c);
	for (size_t i = 0; i < n; i++) {
		sz = (i + 1) * step;
		q = realloc(p, sz);
		if (!q)
			die("realloc");
		p = q;
		/* the previous step's end came along */
		if (i && !is(p, 0, sz - step - 8, SEED) && !bad++)
			first_bad = sz - step - 8;
		put(p, 0, sz - step, SEED);
		put(p, 0, sz - 8, SEED);
	}
	stop(&c);
	for (size_t i = 0; i < n; i++) {
		if (!is(p, 0, i * step, SEED) && !bad++)
			first_bad = i * step;
		if (!is(p, 0, (i + 1) * step - 8, SEED) && !bad++)
			first_bad = (i + 1) * step - 8;
	}
	snprintf(extra, sizeof(extra), "steps=%zu final_mib=%zu usable=%zu ", n,
		 n * step / MIB, malloc_usable_size(p));
	snprintf(fail, sizeof(fail), "%zu words lost, the first at %zu", bad, first_bad);
	print("grow", &c, extra, bad ? fail : NULL);
	free(p);
	return bad ? 1 : 0;
}

static int sparse_calloc(size_t size)
{
	const size_t touched = 12345, reuse = 4 * MIB;
	unsigned char *volatile p;
	unsigned char *q;
	size_t bad = 0, first_bad = 0;
	long rss, lck, fkb;
	struct clocks c;
	char extra[128];
	char fail[128];

	start(&c);
	p = calloc(1, size);
	if (!p)
		die("calloc");
	p[touched] = 1;
	stop(&c);
	rss = status_kb("VmRSS");
	lck = status_kb("VmLck");
	fkb = file_kb();
	for (size_t off = 0; off + 8 <= size; off += 64 * KIB) {
		uint64_t w;

		memcpy(&w, p + off, sizeof(w));
		if (w && !bad++)
			first_bad = off;
	}
	if (p[touched] != 1 && !bad++)
		first_bad = touched;
	free(p);
	/* memory of the program's own that came back is cleared */
	q = malloc(reuse);
	if (!q)
		die("malloc");
	memset(q, 0xa5, reuse);
	free(q);
	q = calloc(1, reuse);
	if (!q)
		die("calloc");
	for (size_t i = 0; i < reuse; i++)
		if (q[i] && !bad++)
			first_bad = size + i;
	free(q);
	snprintf(extra, sizeof(extra), "mib=%zu vmrss_kb=%ld vmlck_kb=%ld file_kb=%ld ", size / MIB,
		 rss, lck, fkb);
	snprintf(fail, sizeof(fail), "%zu bytes not zero, the first at %zu (past mib: the 4 MiB reuse)",
		 bad, first_bad);
	print("calloc", &c, extra, bad ? fail : NULL);
	return bad ? 1 : 0;
}

static int shrink(unsigned int nblk, size_t size, size_t keep)
{
	const size_t written = size < MIB ? size : MIB;
	unsigned char **p = calloc(nblk, sizeof(*p));
	size_t bad = 0, usable;
	long rss, lck, fkb;
	struct clocks c;
	char extra[160];
	char fail[128];

	if (!p)
		die("calloc");
	start(&c);
	for (unsigned int b = 0; b < nblk; b++) {
		unsigned char *q = malloc(size);

		if (!q)
			die("malloc");
		for (size_t off = 0; off + 8 <= written; off += 8)
			put(q, b, off, SEED);
		p[b] = realloc(q, keep);
		if (!p[b])
			die("realloc");
	}
	stop(&c);
	rss = status_kb("VmRSS");
	lck = status_kb("VmLck");
	fkb = file_kb();
	usable = malloc_usable_size(p[0]);
	for (unsigned int b = 0; b < nblk; b++)
		for (size_t off = 0; off + 8 <= keep && off + 8 <= written; off += 8)
			bad += !is(p[b], b, off, SEED);
	snprintf(extra, sizeof(extra),
		 "blocks=%u mib=%zu keep_kib=%zu usable=%zu vmrss_kb=%ld vmlck_kb=%ld file_kb=%ld ",
		 nblk, size / MIB, keep / KIB, usable, rss, lck, fkb);
	snprintf(fail, sizeof(fail), "%zu kept words lost", bad);
	print("shrink", &c, extra, bad ? fail : NULL);
	for (unsigned int b = 0; b < nblk; b++)
		free(p[b]);
	free(p);
	return bad ? 1 : 0;
}

/*
 * The child: every page's word is the parent's; then (touch) one byte
 * written in every page. Exit 0, or 1 if a word was not the parent's.
 */
static void __attribute__((noreturn)) child(unsigned char **blk, unsigned int nblk,
					    size_t size, bool touch)
{
	int st = 0;

	if (!touch)
		_exit(0);
	for (unsigned int b = 0; b < nblk; b++)
		for (size_t off = 0; off < size; off += PAGE) {
			st |= !is(blk[b], b, off, SEED);
			blk[b][off] = CHILD;
		}
	_exit(st);
}

/* The first RDMA device's new PD, or exit 4 (skip) without a device. */
static struct ibv_pd *pd_open(const char *scen)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	int n = 0;

	list = ibv_get_device_list(&n);
	if (!list || !n) {
		printf("%s skip: no RDMA device\n", scen);
		exit(4);
	}
	ctx = ibv_open_device(list[0]);
	if (!ctx)
		die("ibv_open_device");
	ibv_free_device_list(list);
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd");
	return pd;
}

static int forked(unsigned int nblk, size_t size, bool touch, bool reg)
{
	const char *scen = touch ? "fork" : "fork-idle";
	struct ibv_pd *pd = reg ? pd_open(scen) : NULL;
	unsigned char **blk = calloc(nblk, sizeof(*blk));
	size_t bad = 0;
	double fork_s;
	struct clocks c;
	char extra[160];
	char fail[128];
	int status;
	pid_t pid;

	if (!blk)
		die("calloc");
	for (unsigned int b = 0; b < nblk; b++) {
		blk[b] = malloc(size);
		if (!blk[b])
			die("malloc");
		for (size_t off = 0; off < size; off += PAGE)
			put(blk[b], b, off, SEED);
		/* kept until exit, as the program's buffers are */
		if (pd && !ibv_reg_mr(pd, blk[b], size, IBV_ACCESS_LOCAL_WRITE))
			die("ibv_reg_mr");
	}
	start(&c);
	pid = fork();
	if (pid < 0)
		die("fork");
	if (!pid)
		child(blk, nblk, size, touch);
	fork_s = now() - c.wall;
	if (waitpid(pid, &status, 0) != pid)
		die("waitpid");
	stop(&c);
	for (unsigned int b = 0; b < nblk; b++)
		for (size_t off = 0; off < size; off += PAGE)
			bad += !is(blk[b], b, off, SEED);
	snprintf(extra, sizeof(extra), "blocks=%u kib=%zu registered=%d fork_s=%.6f child_status=0x%x ",
		 nblk, size / KIB, reg, fork_s, status);
	if (status)
		snprintf(fail, sizeof(fail), "the child saw other bytes than the parent's or died (status 0x%x)",
			 status);
	else
		snprintf(fail, sizeof(fail), "%zu of the parent's words changed (the child's writes)", bad);
	print(scen, &c, extra, bad || status ? fail : NULL);
	if (!pd) {
		for (unsigned int b = 0; b < nblk; b++)
			free(blk[b]);
		free(blk);
	}
	return bad || status ? 1 : 0;
}

static void __attribute__((noreturn)) usage(void)
{
	fprintf(stderr, "usage: glibc-costs [-s KiB] [-m MiB] [-n BLOCKS] [-b KiB] [-u FILE] [-d] "
		"grow|calloc|shrink|fork|fork-idle\n");
	exit(2);
}

int main(int argc, char **argv)
{
	long s = -1, m = -1, n = -1, b = -1;
	bool reg = false;
	const char *scen;
	int opt;

	while ((opt = getopt(argc, argv, "s:m:n:b:u:d")) != -1) {
		switch (opt) {
		case 's':
			s = atol(optarg);
			break;
		case 'm':
			m = atol(optarg);
			break;
		case 'n':
			n = atol(optarg);
			break;
		case 'b':
			b = atol(optarg);
			break;
		case 'u':
			used_file = optarg;
			break;
		case 'd':
			reg = true;
			break;
		default:
			usage();
		}
	}
	if (optind != argc - 1 || !s || !m || !n || !b)
		usage();
	scen = argv[optind];
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(scen, "grow"))
		return grow((s > 0 ? s : 1024) * KIB, (m > 0 ? m : 256) * MIB);
	if (!strcmp(scen, "calloc"))
		return sparse_calloc((m > 0 ? m : 512) * MIB);
	if (!strcmp(scen, "shrink"))
		return shrink(n > 0 ? n : 8, (m > 0 ? m : 64) * MIB, (s > 0 ? s : 100) * KIB);
	if (!strcmp(scen, "fork") || !strcmp(scen, "fork-idle"))
		return forked(n > 0 ? n : 64, (b > 0 ? b : 4096) * KIB, !strcmp(scen, "fork"), reg);
	usage();
}
