// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Scenario "startup": what an inference server pays at start to get N
 * bytes (-m) ready for RDMA: allocated, zeroed or touched the way each
 * peer does it by itself, and registered with the device. GB/s of N per
 * peer, with 1 and 2 threads (each thread takes every other block):
 *   pool cold        mrp_alloc of 256 MiB blocks (-m / 2 when smaller)
 *                    from a libmrpool pool with the PD attached, the
 *                    module's free chunks trimmed first: the module
 *                    creates (zeroes, registers in its kernel PD) every
 *                    chunk, the library registers each arena in the PD;
 *   pool reserved    the same with the chunks already in the module,
 *                    free (the previous round's, freed back: the state
 *                    pool_mb= gives at load); they were zeroed when they
 *                    were freed, outside the clock;
 *   pool 2 MiB blocks  the same, reserved, in 2 MiB allocations;
 *   module slice     MRPOOL_IOC_ALLOC of block-sized slices straight
 *                    from /dev/mrpool, mmap, a write to every 4 KiB page
 *                    (mapping it): zeroed and registered by the module,
 *                    in its kernel PD only (a process's QPs would still
 *                    need an ibv_reg_mr); from reserved chunks and cold;
 *   malloc + ibv_reg_mr  malloc'd memory never touched, registered: the
 *                    pin faults and zeroes every page;
 *   THP anon + ibv_reg_mr  the same with an anonymous mapping aligned to
 *                    the PMD size and MADV_HUGEPAGE;
 *   hugetlb memfd + ibv_reg_mr  memfd_create(MFD_HUGETLB) per block,
 *                    mmap, register; nr_hugepages is raised for the round
 *                    and set back after it, outside the clock; SKIP and
 *                    why when the kernel cannot reserve them;
 *   memset           memset to zero of N bytes already mapped: the memory
 *                    bandwidth every zeroing path is bounded by, nothing
 *                    registered.
 * Rounds (-r, default 3): each round runs every peer once, 1 thread then
 * 2 threads, in the order above (the pool's state is what makes a round
 * cold or reserved: idle_trim_sec is set to 1 and the pool waited for
 * down to pool_mb, on the devices too, before a cold row and the non-pool
 * peers, and to 0,
 * never, otherwise; it is set back at the end). Medians over the rounds.
 * Memory that was ready in a round is given back after it, outside the
 * clock. Needs /dev/mrpool for the pool and slice rows (SKIP without it).
 *
 * CSV on stdout: scenario,memory,threads,bytes,block,rounds,gbs_p50,
 * gbs_min,gbs_max,wall_s_p50,reg_s_p50,regs,chunks_created,status.
 * reg_s is the time inside the registering call summed over the threads:
 * ibv_reg_mr for the malloc, THP and hugetlb rows, the library's own
 * count (mrp_stats reg_ns_total) for the pool rows, the ALLOC ioctl (where
 * the module takes, creates and registers chunks) for the slice rows.
 * regs counts ibv_reg_mr calls in the process (regcount.c), chunks_created
 * the module's stats/grows over the round (medians).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "bench.h"
#include "mrpool.h"
#include "rdmatest.h"
#include <uapi/mrpool.h>

#define BLOCK_MAX	(256 * MIB)
#define SMALL_BLOCK	(2 * MIB)
#define ROUNDS_MAX	15
#define THREADS_MAX	2
#define PAGE		4096UL

#define SYS_MISC	"/sys/class/misc/mrpool/"
#define SYS_PARAM	"/sys/module/mrpool/parameters/"
#define SYS_DEVICES	"/sys/module/mrpool/devices/"
#define NR_HUGEPAGES	"/proc/sys/vm/nr_hugepages"

enum kind {
	K_POOL_COLD, K_POOL_RESERVED, K_POOL_2M, K_SLICE, K_SLICE_COLD,
	K_MALLOC, K_THP, K_HUGETLB, K_MEMSET, KINDS
};

static const char *const kind_name[KINDS] = {
	"pool cold", "pool reserved", "pool 2 MiB blocks", "module slice (reserved)",
	"module slice (cold)", "malloc + ibv_reg_mr", "THP anon + ibv_reg_mr",
	"hugetlb memfd + ibv_reg_mr", "memset (no registration)",
};

/* One block made ready: what giving it back needs. */
struct blk {
	void *addr;		/* what the peer got */
	void *base;		/* the mapping to unmap (THP: aligned inside it) */
	size_t maplen;
	struct ibv_mr *mr;
	uint64_t slice_id;
};

/* One round of one peer: the shared state and each thread's share. */
struct round {
	const struct bench_env *env;
	enum kind k;
	size_t block, nblocks;
	int threads;
	struct blk *blks;
	struct mrp_pool *pool;	/* pool rows */
	int fd;			/* slice rows: /dev/mrpool */
	char *memset_buf;	/* memset row: N bytes, mapped */
	pthread_barrier_t go;
	uint64_t reg_ns[THREADS_MAX];
	int err[THREADS_MAX];
};

struct worker {
	struct round *r;
	int t;
};

/* Medians and extremes of one row: rounds run and what they measured. */
struct cell {
	uint64_t wall[ROUNDS_MAX], reg[ROUNDS_MAX], regs[ROUNDS_MAX], grown[ROUNDS_MAX];
	int n;
	int err;
	const char *skip;	/* a SKIP row's reason */
};

static char hugetlb_why[160];
static size_t pmd_size = 2 * MIB;

static int read_u64(const char *path, uint64_t *v)
{
	unsigned long long x;
	FILE *f = fopen(path, "re");
	int ret = 0;

	if (!f)
		return -errno;
	if (fscanf(f, "%llu", &x) == 1)
		*v = x;
	else
		ret = -EIO;
	fclose(f);
	return ret;
}

static int write_u64(const char *path, uint64_t v)
{
	FILE *f = fopen(path, "we");
	int ret = 0;

	if (!f)
		return -errno;
	if (fprintf(f, "%llu\n", (unsigned long long)v) < 0)
		ret = -EIO;
	if (fclose(f) && !ret)
		ret = -errno;
	return ret;
}

static uint64_t module_grows(void)
{
	uint64_t v = 0;

	read_u64(SYS_MISC "stats/grows", &v);
	return v;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* The most chunks any device still has registered in the module's cache. */
static uint64_t device_chunks_max(void)
{
	DIR *d = opendir(SYS_DEVICES);
	uint64_t most = 0, v;
	struct dirent *e;
	char path[512];

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), SYS_DEVICES "%s/chunks", e->d_name);
		if (!read_u64(path, &v) && v > most)
			most = v;
	}
	closedir(d);
	return most;
}

/*
 * The module's pool down to its floor (pool_mb): idle_trim_sec=1 makes
 * its trim worker give back every chunk free for a second. The chunks
 * leave total_bytes before the worker deregisters them from the devices
 * and frees them: wait for the devices' chunk counts too, so that none of
 * that work runs under the next row's clock. Then 0, so that the chunks
 * the next rows free stay for the reserved rows.
 */
static int pool_drain(void)
{
	uint64_t floor_mb = 0, total = 0, chunk = 2 * MIB, floor;
	int ret, waited;

	read_u64(SYS_PARAM "pool_mb", &floor_mb);
	read_u64(SYS_MISC "chunk_bytes", &chunk);
	floor = (floor_mb * MIB + chunk - 1) / chunk;
	ret = write_u64(SYS_PARAM "idle_trim_sec", 1);
	if (ret)
		return ret;
	for (waited = 0; waited < 300000; waited += 100) {
		if (read_u64(SYS_MISC "total_bytes", &total))
			break;
		if (total <= floor * chunk && device_chunks_max() <= floor)
			break;
		sleep_ms(100);
	}
	write_u64(SYS_PARAM "idle_trim_sec", 0);
	if (total > floor * chunk || device_chunks_max() > floor)
		fprintf(stderr, "startup: pool still holds %llu bytes (%llu chunks on a device) after %d ms\n",
			(unsigned long long)total, (unsigned long long)device_chunks_max(), waited);
	return 0;
}

static int slice_alloc(int fd, size_t len, struct blk *b, uint64_t *ioctl_ns)
{
	struct mrpool_alloc al;
	uint64_t t0;
	char *m;

	memset(&al, 0, sizeof(al));
	al.size = sizeof(al);
	al.bytes = len;
	al.node = MRPOOL_NODE_ANY;
	t0 = rdt_now_ns();
	if (ioctl(fd, MRPOOL_IOC_ALLOC, &al))
		return -errno;
	*ioctl_ns += rdt_now_ns() - t0;
	b->slice_id = al.slice_id;
	m = mmap(NULL, al.length, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 (off_t)al.mmap_offset);
	if (m == MAP_FAILED)
		return -errno;
	b->base = b->addr = m;
	b->maplen = al.length;
	/* mapped by the first access of each page (one PMD each where it can) */
	for (size_t off = 0; off < al.length; off += PAGE)
		((volatile char *)m)[off] = 0;
	return 0;
}

static int reg_block(struct round *r, int t, struct blk *b, size_t len)
{
	uint64_t t0 = rdt_now_ns();

	b->mr = ibv_reg_mr(r->env->pd, b->addr, len, RDT_ACCESS_ALL);
	r->reg_ns[t] += rdt_now_ns() - t0;
	return b->mr ? 0 : -errno;
}

/* The timed part: make block @i ready the way kind r->k does. */
static int make_ready(struct round *r, int t, size_t i)
{
	struct blk *b = &r->blks[i];
	size_t len = r->block;
	struct mrp_buf buf;
	int ret, fd;
	char *m;

	switch (r->k) {
	case K_POOL_COLD:
	case K_POOL_RESERVED:
	case K_POOL_2M:
		ret = mrp_alloc(r->pool, len, r->env->pd, &buf);
		if (!ret)
			b->addr = buf.addr;
		return ret;
	case K_SLICE:
	case K_SLICE_COLD:
		return slice_alloc(r->fd, len, b, &r->reg_ns[t]);
	case K_MALLOC:
		b->addr = malloc(len);
		return b->addr ? reg_block(r, t, b, len) : -ENOMEM;
	case K_THP:
		b->maplen = len + pmd_size;
		b->base = mmap(NULL, b->maplen, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (b->base == MAP_FAILED) {
			b->base = NULL;
			return -errno;
		}
		b->addr = (void *)(((uintptr_t)b->base + pmd_size - 1) & ~(pmd_size - 1));
		madvise(b->addr, len, MADV_HUGEPAGE);
		return reg_block(r, t, b, len);
	case K_HUGETLB:
		fd = memfd_create("mrpool-startup", MFD_HUGETLB | MFD_CLOEXEC);
		if (fd < 0)
			return -errno;
		m = MAP_FAILED;
		if (!ftruncate(fd, (off_t)len))
			m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		ret = m == MAP_FAILED ? -errno : 0;
		close(fd);
		if (ret)
			return ret;
		b->base = b->addr = m;
		b->maplen = len;
		return reg_block(r, t, b, len);
	case K_MEMSET:
		b->addr = r->memset_buf + i * len;
		memset(b->addr, 0, len);
		return 0;
	default:
		return -EINVAL;
	}
}

static void *worker_fn(void *arg)
{
	struct worker *w = arg;
	struct round *r = w->r;

	pthread_barrier_wait(&r->go);
	for (size_t i = (size_t)w->t; i < r->nblocks && !r->err[w->t]; i += (size_t)r->threads)
		r->err[w->t] = make_ready(r, w->t, i);
	return NULL;
}

/* Gives back what a round made ready, outside the clock. */
static void round_release(struct round *r)
{
	for (size_t i = 0; r->blks && i < r->nblocks; i++) {
		struct blk *b = &r->blks[i];

		if (b->mr)
			ibv_dereg_mr(b->mr);
		switch (r->k) {
		case K_POOL_COLD:
		case K_POOL_RESERVED:
		case K_POOL_2M:
			if (b->addr)
				mrp_free(r->pool, b->addr);
			break;
		case K_SLICE:
		case K_SLICE_COLD:
			if (b->base) {
				struct mrpool_free fr = { .size = sizeof(fr),
							  .slice_id = b->slice_id };

				munmap(b->base, b->maplen);
				ioctl(r->fd, MRPOOL_IOC_FREE, &fr);
			}
			break;
		case K_MALLOC:
			free(b->addr);
			break;
		case K_THP:
		case K_HUGETLB:
			if (b->base)
				munmap(b->base, b->maplen);
			break;
		default:
			break;
		}
	}
	free(r->blks);
	r->blks = NULL;
	if (r->pool)
		mrp_pool_close(r->pool);
	r->pool = NULL;
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
	if (r->memset_buf)
		munmap(r->memset_buf, r->nblocks * r->block);
	r->memset_buf = NULL;
}

/* Outside the clock: what the round needs before it starts. */
static int round_prepare(struct round *r, size_t total)
{
	struct mrp_pool_attr at = {
		.comp_mask = MRP_POOL_ATTR_BACKEND, .backend = MRP_BACKEND_KERNEL,
	};

	r->nblocks = total / r->block;
	r->blks = calloc(r->nblocks, sizeof(*r->blks));
	if (!r->blks)
		return -ENOMEM;
	switch (r->k) {
	case K_POOL_COLD:
	case K_POOL_RESERVED:
	case K_POOL_2M:
		r->pool = mrp_pool_open(&at);
		if (!r->pool)
			return -errno;
		return mrp_attach_pd(r->pool, r->env->pd, RDT_ACCESS_ALL);
	case K_SLICE:
	case K_SLICE_COLD:
		r->fd = open("/dev/mrpool", O_RDWR | O_CLOEXEC);
		return r->fd < 0 ? -errno : 0;
	case K_MEMSET:
		r->memset_buf = mmap(NULL, total, PROT_READ | PROT_WRITE,
				     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (r->memset_buf == MAP_FAILED) {
			r->memset_buf = NULL;
			return -errno;
		}
		madvise(r->memset_buf, total, MADV_HUGEPAGE);
		memset(r->memset_buf, 1, total);
		return 0;
	default:
		return 0;
	}
}

/* nr_hugepages raised by what @total needs; the old value in *@old. */
static int hugetlb_reserve(size_t total, uint64_t *old)
{
	uint64_t want, got = 0, kb = 0;
	char line[128];
	FILE *f = fopen("/proc/meminfo", "re");

	if (f) {
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, "Hugepagesize:", 13))
				kb = strtoull(line + 13, NULL, 10);
		fclose(f);
	}
	if (!kb || read_u64(NR_HUGEPAGES, old)) {
		snprintf(hugetlb_why, sizeof(hugetlb_why), "no hugetlb pages in this kernel");
		return -EOPNOTSUPP;
	}
	want = *old + (total + kb * KIB - 1) / (kb * KIB);
	if (write_u64(NR_HUGEPAGES, want) || read_u64(NR_HUGEPAGES, &got) || got < want) {
		snprintf(hugetlb_why, sizeof(hugetlb_why),
			 "only %llu of %llu %llu kB hugepages could be reserved (nr_hugepages)",
			 (unsigned long long)(got > *old ? got - *old : 0),
			 (unsigned long long)(want - *old), (unsigned long long)kb);
		write_u64(NR_HUGEPAGES, *old);
		return -EOPNOTSUPP;
	}
	return 0;
}

/* One round of kind @k with @threads threads over @total bytes. */
static void run_round(const struct bench_env *env, enum kind k, int threads, size_t total,
		      size_t block, struct cell *c)
{
	struct round r = { .env = env, .k = k, .block = block, .threads = threads, .fd = -1 };
	pthread_t th[THREADS_MAX];
	struct worker w[THREADS_MAX];
	uint64_t t0, t1, regs0, grows0, hp_old = 0;
	struct mrp_stats st;
	int ret, started = 0;

	if (c->err || c->skip || c->n >= ROUNDS_MAX)
		return;
	if (k == K_HUGETLB && hugetlb_reserve(total, &hp_old)) {
		if (c->n)
			c->err = -EOPNOTSUPP;	/* a later round: the row keeps its figures */
		else
			c->skip = hugetlb_why;
		return;
	}
	ret = round_prepare(&r, total);
	if (!ret)
		ret = pthread_barrier_init(&r.go, NULL, (unsigned int)threads + 1) ? -EIO : 0;
	if (ret) {
		c->err = ret;
		round_release(&r);
		goto out;
	}
	for (int t = 0; t < threads; t++) {
		w[t] = (struct worker){ .r = &r, .t = t };
		if (pthread_create(&th[t], NULL, worker_fn, &w[t]))
			break;
		started++;
	}
	if (started < threads) {
		/* the barrier never opens for those started: can't go on */
		fprintf(stderr, "startup: pthread_create failed\n");
		exit(1);
	}
	regs0 = regcount_reg();
	grows0 = module_grows();
	pthread_barrier_wait(&r.go);
	t0 = rdt_now_ns();
	for (int t = 0; t < threads; t++)
		pthread_join(th[t], NULL);
	t1 = rdt_now_ns();
	pthread_barrier_destroy(&r.go);
	for (int t = 0; t < threads; t++)
		if (r.err[t] && !c->err)
			c->err = r.err[t];
	if (!c->err) {
		uint64_t reg = r.reg_ns[0] + r.reg_ns[1];

		if (r.pool && !mrp_stats(r.pool, &st, sizeof(st)))
			reg = st.reg_ns_total;
		c->wall[c->n] = t1 - t0;
		c->reg[c->n] = reg;
		c->regs[c->n] = regcount_reg() - regs0;
		c->grown[c->n] = module_grows() - grows0;
		c->n++;
	}
	round_release(&r);
out:
	if (k == K_HUGETLB)
		write_u64(NR_HUGEPAGES, hp_old);
}

static uint64_t med(const uint64_t *v, int n)
{
	uint64_t tmp[ROUNDS_MAX];
	struct samples s = { .ns = tmp, .n = (size_t)n, .cap = ROUNDS_MAX };

	memcpy(tmp, v, (size_t)n * sizeof(*v));
	return n ? samples_pct(&s, 50) : 0;
}

static void print_row(enum kind k, int threads, size_t total, size_t block, struct cell *c)
{
	uint64_t lo = UINT64_MAX, hi = 0, w;

	if (c->skip) {
		printf("startup,%s,%d,%zu,%zu,0,-,-,-,-,-,-,-,SKIP: %s\n", kind_name[k], threads,
		       total, block, c->skip);
		return;
	}
	if (!c->n) {
		printf("startup,%s,%d,%zu,%zu,0,-,-,-,-,-,-,-,error: %s\n", kind_name[k], threads,
		       total, block, strerror(-c->err));
		return;
	}
	for (int i = 0; i < c->n; i++) {
		lo = c->wall[i] < lo ? c->wall[i] : lo;
		hi = c->wall[i] > hi ? c->wall[i] : hi;
	}
	w = med(c->wall, c->n);
	printf("startup,%s,%d,%zu,%zu,%d,%.3f,%.3f,%.3f,%.3f,%.3f,%llu,%llu,%s%s\n",
	       kind_name[k], threads, total, block, c->n, (double)total / (double)w,
	       (double)total / (double)hi, (double)total / (double)lo, (double)w / 1e9,
	       (double)med(c->reg, c->n) / 1e9, (unsigned long long)med(c->regs, c->n),
	       (unsigned long long)med(c->grown, c->n), c->err ? "ok but a later round failed: " : "ok",
	       c->err ? strerror(-c->err) : "");
}

static size_t read_pmd_size(void)
{
	uint64_t v = 0;

	if (read_u64("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", &v) || !v)
		return 2 * MIB;
	return (size_t)v;
}

int scen_startup(const struct bench_env *env, size_t total, int rounds)
{
	static struct cell cells[KINDS][THREADS_MAX];
	size_t block = total / 2 < BLOCK_MAX ? total / 2 : BLOCK_MAX;
	uint64_t trim_old = 5;
	bool have_module = !access("/dev/mrpool", R_OK | W_OK);
	int ret = 0;

	pmd_size = read_pmd_size();
	block &= ~(SMALL_BLOCK - 1);
	if (!block) {
		fprintf(stderr, "startup: -m must be at least 4 MiB\n");
		return 1;
	}
	total = total / (2 * block) * (2 * block);
	if (rounds > ROUNDS_MAX)
		rounds = ROUNDS_MAX;
	memset(cells, 0, sizeof(cells));
	if (have_module)
		read_u64(SYS_PARAM "idle_trim_sec", &trim_old);
	for (int k = K_POOL_COLD; k <= K_SLICE_COLD; k++)
		for (int t = 0; !have_module && t < THREADS_MAX; t++)
			cells[k][t].skip = "no /dev/mrpool (mrpool.ko not loaded)";

	printf("scenario,memory,threads,bytes,block,rounds,gbs_p50,gbs_min,gbs_max,wall_s_p50,reg_s_p50,regs,chunks_created,status\n");
	fflush(stdout);
	for (int r = 0; r < rounds; r++) {
		for (int t = 1; t <= THREADS_MAX; t++) {
			for (int k = 0; k < KINDS; k++) {
				size_t b = k == K_POOL_2M ? SMALL_BLOCK : block;

				/* cold rows and the non-pool peers start from an empty pool */
				if (have_module && (k == K_POOL_COLD || k == K_SLICE_COLD || k == K_MALLOC))
					pool_drain();
				fprintf(stderr, "startup: round %d, %d thread(s), %s\n", r + 1, t,
					kind_name[k]);
				run_round(env, (enum kind)k, t, total, b, &cells[k][t - 1]);
			}
		}
	}
	if (have_module)
		write_u64(SYS_PARAM "idle_trim_sec", trim_old);
	for (int t = 1; t <= THREADS_MAX; t++)
		for (int k = 0; k < KINDS; k++) {
			struct cell *c = &cells[k][t - 1];

			if (!c->skip && c->err && c->err != -EOPNOTSUPP)
				ret = 1;
			print_row((enum kind)k, t, total, k == K_POOL_2M ? SMALL_BLOCK : block, c);
		}
	return ret;
}
