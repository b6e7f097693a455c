// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Scenario "odp": On-Demand Paging, the registration that pins nothing,
 * beside pool buffers, THP anon + ibv_reg_mr and registration per message.
 * The device's ODP is probed (ibv_query_device_ex: IBV_ODP_SUPPORT and RC
 * WRITE/READ), never assumed: without it every ODP row says SKIP and why.
 * Five parts, every row measured interleaved with the rows it is compared
 * to (round by round), so that ratios within the run mean something:
 *   reg    one registration by size, 4 KiB to -m: ibv_reg_mr with
 *          IBV_ACCESS_ON_DEMAND of untouched memory, ibv_reg_mr of
 *          prefaulted THP anon, and a pool buffer (mrp_alloc with the
 *          PD's keys; its "dereg" is mrp_free); implicit ODP (addr 0,
 *          SIZE_MAX) where the device reports it, else a SKIP row;
 *   first  the first RDMA WRITE into every page of untouched ODP memory
 *          (the responder faults it in) and the first READ into it (the
 *          requester does), one single-packet operation a page, then the
 *          same after ibv_advise_mr(PREFETCH_WRITE, FLUSH) (the prefetch's
 *          own time too), and the second pass (mapped): against pinned
 *          THP anon;
 *   rate   steady-state RC WRITE message rate and p50/p99 at 4 KiB and
 *          64 KiB, source and target both ODP, both pool buffers, both
 *          pinned THP anon, and a source registered per message;
 *   pin    what a 64 MiB region, registered and written through RDMA,
 *          adds to VmPin and VmLck (/proc/self/status) and to the
 *          module's used_bytes; measured first, while the pool has no
 *          idle arena its background trim could deregister meanwhile;
 *   fallback  what the library's fallback buffer costs (lib/reg.c: a
 *          fresh mapping + ibv_reg_mr, then the buffer's first WRITE,
 *          ibv_dereg_mr, munmap) against the same with an ODP
 *          registration, per buffer.
 * CSV on stdout: scenario,part,memory,size,n,v1,v2,v3,status; what v1..v3
 * are depends on the part (tools/bench/report.sh names them).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "bench.h"
#include "mrpool.h"
#include "rdmatest.h"

#define ROUNDS		5
#define ODP_ACCESS	(RDT_ACCESS_ALL | IBV_ACCESS_ON_DEMAND)
#define ODP_RC_NEED	(IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ)
#define PIN_LEN		(64 * MIB)
#define LAT_CAP		200000

static const size_t reg_sizes[] = {
	4 * KIB, 64 * KIB, 1 * MIB, 2 * MIB, 8 * MIB, 32 * MIB, 64 * MIB,
	128 * MIB, 256 * MIB, 512 * MIB, 1024 * MIB,
};

struct odp_ctx {
	const struct bench_env *env;
	struct rdt_loop lp;
	struct mrp_pool *pool;
	struct rdt_odp caps;
	int odp_err;		/* 0, or why ODP rows are SKIP */
	int ret;		/* 1 once anything failed */
};

static void row(struct odp_ctx *c, const char *part, const char *mem, size_t size,
		int n, double v1, double v2, double v3, int err)
{
	if (err && err != -EOPNOTSUPP)
		c->ret = 1;
	printf("odp,%s,%s,%zu,%d,%.1f,%.1f,%.1f,%s%s\n", part, mem, size, n, v1, v2, v3,
	       err ? "error: " : "ok", err ? strerror(-err) : "");
	fflush(stdout);
}

/* A row whose figures stand but whose data did not arrive intact. */
static void row_corrupt(const char *part, const char *mem, size_t size, int n, double v1,
			double v2, double v3, const char *what)
{
	printf("odp,%s,%s,%zu,%d,%.1f,%.1f,%.1f,ok but %s\n", part, mem, size, n, v1, v2, v3,
	       what);
	fflush(stdout);
}

static void skip_row(const char *part, const char *mem, size_t size, const char *why)
{
	printf("odp,%s,%s,%zu,0,-,-,-,SKIP: %s\n", part, mem, size, why);
	fflush(stdout);
}

static double med_us(uint64_t *v, int n)
{
	struct samples s = { .ns = v, .n = (size_t)n, .cap = (size_t)n };

	return n ? (double)samples_pct(&s, 50) / 1e3 : 0;
}

static void *map_untouched(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* A field of /proc/self/status in kB, 0 if absent. */
static long status_kb(const char *field)
{
	char line[256];
	size_t fl = strlen(field);
	long kb = 0;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, fl) && line[fl] == ':')
			kb = strtol(line + fl + 1, NULL, 10);
	fclose(f);
	return kb;
}

/* The module's used_bytes in kB, 0 without the module. */
static long module_used_kb(void)
{
	unsigned long long b = 0;
	FILE *f = fopen("/sys/class/misc/mrpool/used_bytes", "re");

	if (f) {
		if (fscanf(f, "%llu", &b) != 1)
			b = 0;
		fclose(f);
	}
	return (long)(b / 1024);
}

/* The largest size the guest can hold three of (ODP, THP anon, pool). */
static size_t mem_cap(size_t max_size)
{
	long avail = 0;
	char line[256];
	FILE *f = fopen("/proc/meminfo", "re");

	if (f) {
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, "MemAvailable:", 13))
				avail = strtol(line + 13, NULL, 10);
		fclose(f);
	}
	if (avail > 0 && (size_t)avail * KIB / 3 < max_size)
		return (size_t)avail * KIB / 3;
	return max_size;
}

/* ---- reg ---- */

enum reg_kind { R_ODP, R_ANON, R_POOL, R_KINDS };
static const char *const reg_name[R_KINDS] = {
	"ODP (untouched)", "THP anon + ibv_reg_mr", "pool buffer (mrp_alloc)",
};

static int time_pool(struct odp_ctx *c, size_t size, uint64_t *a, uint64_t *f)
{
	struct mrp_buf b;
	uint64_t t0 = rdt_now_ns();
	int ret = mrp_alloc(c->pool, size, c->env->pd, &b);

	*a = rdt_now_ns() - t0;
	if (ret)
		return ret;
	t0 = rdt_now_ns();
	mrp_free(c->pool, b.addr);
	*f = rdt_now_ns() - t0;
	return 0;
}

static int time_odp_reg(struct ibv_pd *pd, void *addr, size_t len, uint64_t *r,
			uint64_t *d)
{
	uint64_t t0 = rdt_now_ns();
	struct ibv_mr *mr = ibv_reg_mr(pd, addr, len, ODP_ACCESS);

	*r = rdt_now_ns() - t0;
	if (!mr)
		return -errno;
	t0 = rdt_now_ns();
	if (ibv_dereg_mr(mr))
		return -EIO;
	*d = rdt_now_ns() - t0;
	return 0;
}

static void part_reg(struct odp_ctx *c, size_t max_size)
{
	struct ibv_pd *pd = c->env->pd;

	for (size_t i = 0; i < sizeof(reg_sizes) / sizeof(reg_sizes[0]); i++) {
		size_t size = reg_sizes[i];
		uint64_t reg[R_KINDS][ROUNDS], dereg[R_KINDS][ROUNDS];
		int err[R_KINDS] = { 0 }, n[R_KINDS] = { 0 };
		int rounds = size >= 64 * MIB ? 3 : ROUNDS;
		struct rdt_thp anon;
		void *odp;

		if (size > max_size)
			break;
		odp = map_untouched(size);
		err[R_ODP] = c->odp_err ? c->odp_err : (odp ? 0 : -ENOMEM);
		err[R_ANON] = rdt_thp_map(&anon, size, false);
		for (int r = 0; r < rounds; r++) {
			if (!err[R_ODP])
				err[R_ODP] = time_odp_reg(pd, odp, size, &reg[R_ODP][r],
							  &dereg[R_ODP][r]);
			if (!err[R_ANON])
				err[R_ANON] = rdt_reg_time(pd, anon.addr, size, &reg[R_ANON][r],
							   &dereg[R_ANON][r]);
			if (!err[R_POOL])
				err[R_POOL] = time_pool(c, size, &reg[R_POOL][r],
							&dereg[R_POOL][r]);
			for (int k = 0; k < R_KINDS; k++)
				n[k] += !err[k];
		}
		if (odp)
			munmap(odp, size);
		rdt_thp_unmap(&anon);
		for (int k = 0; k < R_KINDS; k++) {
			if (k == R_ODP && c->odp_err) {
				skip_row("reg", reg_name[k], size, c->caps.why);
				continue;
			}
			row(c, "reg", reg_name[k], size, n[k], med_us(reg[k], n[k]),
			    med_us(dereg[k], n[k]), 0, err[k]);
		}
	}
	if (c->odp_err) {
		skip_row("reg", "implicit ODP (whole address space)", SIZE_MAX, c->caps.why);
	} else if (!c->caps.implicit) {
		char why[160];

		snprintf(why, sizeof(why), "device reports no IBV_ODP_SUPPORT_IMPLICIT (general_caps 0x%llx)",
			 (unsigned long long)c->caps.general);
		skip_row("reg", "implicit ODP (whole address space)", 0, why);
	} else {
		uint64_t r[ROUNDS], d[ROUNDS];
		int e = 0, k = 0;

		for (; k < ROUNDS && !e; k++)
			e = time_odp_reg(pd, NULL, SIZE_MAX, &r[k], &d[k]);
		row(c, "reg", "implicit ODP (whole address space)", 0, e ? k - 1 : k,
		    med_us(r, e ? k - 1 : k), med_us(d, e ? k - 1 : k), 0, e);
	}
}

/* ---- first ---- */

/*
 * One round of the first-access part, size bytes: a source pinned and
 * filled (src, its MR smr), then for mem in turn the target's first WRITE
 * (or its first READ into it) and the second. Times in ns.
 */
enum first_kind { F_ODP, F_ODP_PF, F_ANON, F_KINDS };
static const char *const first_name[F_KINDS] = {
	"ODP untouched", "ODP after prefetch", "THP anon (pinned)",
};

/*
 * One RDMA operation of at most one MTU (1 KiB here) at the start of every
 * 4 KiB page of [mem, mem + size), a page's worth of data in total per
 * page: a WRITE into mem (the responder's faults) or a READ into it (the
 * requester's). Single packets at page starts: rxe's ODP in 7.3.4 copies
 * each packet at the start of its page (selftests/odp_test), so only
 * these arrive intact there; the faults are one per page either way.
 */
static int touch_pages(struct odp_ctx *c, bool rd, void *mem, struct ibv_mr *mr, void *src,
		       struct ibv_mr *smr, size_t size)
{
	size_t chunk = size < 1024 ? size : 1024;
	int ret = 0;

	for (size_t off = 0; !ret && off < size; off += 4096) {
		uintptr_t m = (uintptr_t)mem + off, s = (uintptr_t)src + off;

		if (rd)
			ret = rdt_read(&c->lp, (void *)m, mr->lkey, s, smr->rkey, chunk, NULL);
		else
			ret = rdt_write(&c->lp, (void *)s, smr->lkey, m, mr->rkey, chunk, NULL);
	}
	return ret;
}

static int first_one(struct odp_ctx *c, int k, bool rd, size_t size, void *src,
		     struct ibv_mr *smr, uint64_t *first, uint64_t *second, uint64_t *pf)
{
	struct ibv_pd *pd = c->env->pd;
	struct ibv_mr *mr = NULL;
	struct rdt_thp anon = { 0 };
	void *mem;
	uint64_t t0;
	int ret;

	*pf = 0;
	if (k == F_ANON) {
		ret = rdt_thp_map(&anon, size, false);
		if (ret)
			return ret;
		mem = anon.addr;
		mr = ibv_reg_mr(pd, mem, size, RDT_ACCESS_ALL);
	} else {
		mem = map_untouched(size);
		if (!mem)
			return -ENOMEM;
		mr = ibv_reg_mr(pd, mem, size, ODP_ACCESS);
	}
	if (!mr) {
		ret = -errno;
		goto out;
	}
	if (k == F_ODP_PF) {
		t0 = rdt_now_ns();
		ret = rdt_odp_prefetch(pd, mr, mem, size, true);
		*pf = rdt_now_ns() - t0;
		if (ret)
			goto out;
	}
	/* the first access of every page, then the second */
	for (int i = 0; i < 2; i++) {
		t0 = rdt_now_ns();
		ret = touch_pages(c, rd, mem, mr, src, smr, size);
		*(i ? second : first) = rdt_now_ns() - t0;
		if (ret)
			goto out;
	}
	for (size_t off = 0; !ret && off < size; off += 4096)
		if (memcmp((char *)mem + off, (char *)src + off, size < 1024 ? size : 1024))
			ret = -EBADMSG;
out:
	if (mr)
		ibv_dereg_mr(mr);
	if (k == F_ANON)
		rdt_thp_unmap(&anon);
	else
		munmap(mem, size);
	return ret;
}

static void part_first(struct odp_ctx *c)
{
	static const size_t sizes[] = { 4 * KIB, 64 * KIB, 1 * MIB };

	for (int rd = 0; rd < 2; rd++) {
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			size_t size = sizes[i];
			uint64_t f[F_KINDS][ROUNDS], s[F_KINDS][ROUNDS], p[F_KINDS][ROUNDS];
			int err[F_KINDS] = { 0 }, n[F_KINDS] = { 0 };
			const char *part = rd ? "first READ" : "first WRITE";
			struct ibv_mr *smr;
			void *src = malloc(size);

			if (!src)
				return;
			rdt_pattern_fill(src, size, (unsigned int)size);
			smr = ibv_reg_mr(c->env->pd, src, size, RDT_ACCESS_ALL);
			if (!smr) {
				row(c, part, "source", size, 0, 0, 0, 0, -errno);
				free(src);
				return;
			}
			err[F_ODP] = err[F_ODP_PF] = c->odp_err;
			for (int r = 0; r < ROUNDS; r++)
				for (int k = 0; k < F_KINDS; k++) {
					if (err[k])
						continue;
					err[k] = first_one(c, k, rd, size, src, smr, &f[k][r],
							   &s[k][r], &p[k][r]);
					if (err[k] && err[k] != -EOPNOTSUPP)
						rdt_loop_reconnect(&c->lp);
					n[k] += !err[k];
				}
			ibv_dereg_mr(smr);
			free(src);
			for (int k = 0; k < F_KINDS; k++) {
				if (k != F_ANON && c->odp_err)
					skip_row(part, first_name[k], size, c->caps.why);
				else if (k == F_ODP_PF && err[k] == -EOPNOTSUPP)
					skip_row(part, first_name[k], size,
						 "ibv_advise_mr: no prefetch in the driver (rxe before 6.17)");
				else
					row(c, part, first_name[k], size, n[k], med_us(f[k], n[k]),
					    med_us(s[k], n[k]), med_us(p[k], n[k]), err[k]);
			}
		}
	}
}

/* ---- rate ---- */

enum rate_kind { M_ODP, M_POOL, M_ANON, M_REG, M_KINDS };
static const char *const rate_name[M_KINDS] = {
	"ODP", "pool buffers", "THP anon (pinned)", "register each (source)",
};

struct region {
	void *src, *dst;
	uint32_t lkey, rkey;
	struct ibv_mr *smr, *dmr;
	struct rdt_thp ts, td;
	struct mrp_buf bs, bd;
};

static int region_make(struct odp_ctx *c, int k, size_t size, struct region *g)
{
	struct ibv_pd *pd = c->env->pd;
	int ret;

	memset(g, 0, sizeof(*g));
	switch (k) {
	case M_ODP:
		g->src = map_untouched(size);
		g->dst = map_untouched(size);
		if (!g->src || !g->dst)
			return -ENOMEM;
		g->smr = ibv_reg_mr(pd, g->src, size, ODP_ACCESS);
		g->dmr = ibv_reg_mr(pd, g->dst, size, ODP_ACCESS);
		break;
	case M_POOL:
	case M_REG:
		ret = mrp_alloc(c->pool, size, pd, &g->bs);
		if (!ret)
			ret = mrp_alloc(c->pool, size, pd, &g->bd);
		if (ret)
			return ret;
		g->src = g->bs.addr;
		g->dst = g->bd.addr;
		g->lkey = g->bs.lkey;
		g->rkey = g->bd.rkey;
		return 0;
	case M_ANON:
		ret = rdt_thp_map(&g->ts, size, false);
		if (!ret)
			ret = rdt_thp_map(&g->td, size, false);
		if (ret)
			return ret;
		g->src = g->ts.addr;
		g->dst = g->td.addr;
		g->smr = ibv_reg_mr(pd, g->src, size, RDT_ACCESS_ALL);
		g->dmr = ibv_reg_mr(pd, g->dst, size, RDT_ACCESS_ALL);
		break;
	}
	if (!g->smr || !g->dmr)
		return errno ? -errno : -EIO;
	g->lkey = g->smr->lkey;
	g->rkey = g->dmr->rkey;
	return 0;
}

static void region_free(struct odp_ctx *c, int k, size_t size, struct region *g)
{
	if (g->smr)
		ibv_dereg_mr(g->smr);
	if (g->dmr)
		ibv_dereg_mr(g->dmr);
	if (k == M_ODP) {
		if (g->src)
			munmap(g->src, size);
		if (g->dst)
			munmap(g->dst, size);
	}
	rdt_thp_unmap(&g->ts);
	rdt_thp_unmap(&g->td);
	if (g->bs.addr)
		mrp_free(c->pool, g->bs.addr);
	if (g->bd.addr)
		mrp_free(c->pool, g->bd.addr);
}

/* One message of kind k: for M_REG the source is malloc'd and registered for it. */
static int rate_msg(struct odp_ctx *c, int k, size_t size, struct region *g, unsigned int seed)
{
	struct ibv_mr *mr;
	void *b;
	int ret;

	if (k != M_REG) {
		rdt_pattern_fill(g->src, 64, seed);
		return rdt_write(&c->lp, g->src, g->lkey, (uintptr_t)g->dst, g->rkey, size, NULL);
	}
	b = malloc(size);
	if (!b)
		return -ENOMEM;
	rdt_pattern_fill(b, 64, seed);
	mr = ibv_reg_mr(c->env->pd, b, size, RDT_ACCESS_ALL);
	if (!mr) {
		ret = -errno;
	} else {
		ret = rdt_write(&c->lp, b, mr->lkey, (uintptr_t)g->dst, g->rkey, size, NULL);
		if (ibv_dereg_mr(mr) && !ret)
			ret = -EIO;
	}
	free(b);
	return ret;
}

static void part_rate(struct odp_ctx *c)
{
	static const size_t sizes[] = { 4 * KIB, 64 * KIB };
	double slice = c->env->budget_s / ROUNDS;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t size = sizes[i];
		struct region g[M_KINDS];
		struct samples lat[M_KINDS];
		uint64_t busy[M_KINDS] = { 0 }, n[M_KINDS] = { 0 };
		int err[M_KINDS] = { 0 };
		unsigned int seed[M_KINDS];

		memset(g, 0, sizeof(g));
		for (int k = 0; k < M_KINDS; k++) {
			seed[k] = 1;
			if (samples_init(&lat[k], LAT_CAP))
				err[k] = -ENOMEM;
			else if (k == M_ODP && c->odp_err)
				err[k] = c->odp_err;
			else
				err[k] = region_make(c, k, size, &g[k]);
			/* warm-up: every page of the ODP region mapped, caches hot */
			for (int w = 0; !err[k] && w < 20; w++)
				err[k] = rate_msg(c, k, size, &g[k], seed[k]++);
		}
		/* rounds of a slice each, the kinds in turn */
		for (int r = 0; r < ROUNDS; r++)
			for (int k = 0; k < M_KINDS; k++) {
				uint64_t t0 = rdt_now_ns(), start = t0;
				uint64_t until = t0 + (uint64_t)(slice * 1e9);

				while (!err[k] && t0 < until) {
					uint64_t t1;

					err[k] = rate_msg(c, k, size, &g[k], seed[k]);
					t1 = rdt_now_ns();
					samples_add(&lat[k], t1 - t0);
					t0 = t1;
					n[k]++;
					seed[k]++;
				}
				busy[k] += t0 - start;
			}
		for (int k = 0; k < M_KINDS; k++) {
			bool whole = true;

			if (!err[k] && !rdt_pattern_same(g[k].dst, 64, seed[k] - 1))
				err[k] = -EBADMSG;
			/* one whole message checked (the timed ones fill 64 bytes) */
			if (!err[k] && k != M_REG) {
				rdt_pattern_fill(g[k].src, size, 99);
				err[k] = rdt_write(&c->lp, g[k].src, g[k].lkey, (uintptr_t)g[k].dst,
						   g[k].rkey, size, NULL);
				whole = !err[k] && rdt_pattern_same(g[k].dst, size, 99);
			}
			if (k == M_ODP && c->odp_err) {
				skip_row("rate", rate_name[k], size, c->caps.why);
			} else {
				double rate = busy[k] ? (double)n[k] * 1e9 / (double)busy[k] : 0;

				if (whole)
					row(c, "rate", rate_name[k], size, (int)n[k], rate,
					    (double)samples_pct(&lat[k], 50) / 1e3,
					    (double)samples_pct(&lat[k], 99) / 1e3, err[k]);
				else
					row_corrupt("rate", rate_name[k], size, (int)n[k], rate,
						    (double)samples_pct(&lat[k], 50) / 1e3,
						    (double)samples_pct(&lat[k], 99) / 1e3,
						    "a whole message arrived corrupt");
			}
			if (k != M_ODP || !c->odp_err)
				region_free(c, k, size, &g[k]);
			samples_free(&lat[k]);
		}
	}
}

/* ---- pin ---- */

static void part_pin(struct odp_ctx *c)
{
	static const char *const name[3] = {
		"ODP", "THP anon + ibv_reg_mr", "pool buffer (mrp_alloc)",
	};
	struct ibv_pd *pd = c->env->pd;
	void *src = malloc(64 * KIB);
	struct ibv_mr *smr = src ? ibv_reg_mr(pd, src, 64 * KIB, RDT_ACCESS_ALL) : NULL;

	if (!smr) {
		row(c, "pin", "source", 64 * KIB, 0, 0, 0, 0, -ENOMEM);
		free(src);
		return;
	}
	rdt_pattern_fill(src, 64 * KIB, 5);
	for (int k = 0; k < 3; k++) {
		long pin0 = status_kb("VmPin"), lck0 = status_kb("VmLck"), mod0 = module_used_kb();
		struct ibv_mr *mr = NULL;
		struct rdt_thp anon = { 0 };
		struct mrp_buf b = { 0 };
		uint32_t rkey = 0;
		void *mem = NULL;
		int ret = 0;

		if (k == 0 && c->odp_err) {
			skip_row("pin", name[k], PIN_LEN, c->caps.why);
			continue;
		}
		if (k == 0) {
			mem = map_untouched(PIN_LEN);
			mr = mem ? ibv_reg_mr(pd, mem, PIN_LEN, ODP_ACCESS) : NULL;
		} else if (k == 1) {
			ret = rdt_thp_map(&anon, PIN_LEN, false);
			mem = anon.addr;
			mr = ret ? NULL : ibv_reg_mr(pd, mem, PIN_LEN, RDT_ACCESS_ALL);
		} else {
			ret = mrp_alloc(c->pool, PIN_LEN, pd, &b);
			mem = b.addr;
			rkey = b.rkey;
		}
		if (mr)
			rkey = mr->rkey;
		else if (k < 2 && !ret)
			ret = errno ? -errno : -EIO;
		/* RDMA WRITEs into every 64 KiB of it */
		for (size_t off = 0; !ret && off < PIN_LEN; off += 64 * KIB)
			ret = rdt_write(&c->lp, src, smr->lkey, (uintptr_t)mem + off, rkey,
					64 * KIB, NULL);
		row(c, "pin", name[k], PIN_LEN, 1, (double)(status_kb("VmPin") - pin0),
		    (double)(status_kb("VmLck") - lck0), (double)(module_used_kb() - mod0), ret);
		if (mr)
			ibv_dereg_mr(mr);
		if (k == 0 && mem)
			munmap(mem, PIN_LEN);
		rdt_thp_unmap(&anon);
		if (b.addr)
			mrp_free(c->pool, b.addr);
	}
	ibv_dereg_mr(smr);
	free(src);
}

/* ---- fallback ---- */

/*
 * One fallback buffer's life as lib/reg.c's mrp_fallback_alloc() lives it
 * (a fresh mapping, MADV_DONTFORK, a registration; here also its first
 * RDMA WRITE, then dereg and munmap), with a pinned or an ODP
 * registration: the whole, the registration and the first WRITE, in ns.
 */
static int fb_one(struct odp_ctx *c, bool odp, size_t size, void *src, struct ibv_mr *smr,
		  uint64_t *all, uint64_t *reg, uint64_t *wr)
{
	uint64_t t0 = rdt_now_ns(), t1;
	struct ibv_mr *mr;
	void *mem = map_untouched(size);
	int ret;

	if (!mem)
		return -ENOMEM;
	if (madvise(mem, size, MADV_DONTFORK)) {
		ret = -errno;
		munmap(mem, size);
		return ret;
	}
	t1 = rdt_now_ns();
	mr = ibv_reg_mr(c->env->pd, mem, size, odp ? ODP_ACCESS : RDT_ACCESS_ALL);
	*reg = rdt_now_ns() - t1;
	if (!mr) {
		ret = -errno;
		munmap(mem, size);
		return ret;
	}
	t1 = rdt_now_ns();
	ret = touch_pages(c, false, mem, mr, src, smr, size);
	*wr = rdt_now_ns() - t1;
	if (ibv_dereg_mr(mr) && !ret)
		ret = -EIO;
	munmap(mem, size);
	*all = rdt_now_ns() - t0;
	return ret;
}

static void part_fallback(struct odp_ctx *c)
{
	static const size_t sizes[] = { 4 * KIB, 64 * KIB, 1 * MIB };
	static const char *const name[2] = { "ibv_reg_mr (today)", "ODP" };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t size = sizes[i];
		uint64_t all[2][ROUNDS * 2], reg[2][ROUNDS * 2], wr[2][ROUNDS * 2];
		int err[2] = { 0, c->odp_err }, n[2] = { 0 };
		void *src = malloc(size);
		struct ibv_mr *smr = src ? ibv_reg_mr(c->env->pd, src, size, RDT_ACCESS_ALL) : NULL;

		if (!smr) {
			free(src);
			row(c, "fallback", "source", size, 0, 0, 0, 0, -ENOMEM);
			return;
		}
		for (int r = 0; r < ROUNDS * 2; r++)
			for (int k = 0; k < 2; k++) {
				if (err[k])
					continue;
				err[k] = fb_one(c, k, size, src, smr, &all[k][r], &reg[k][r], &wr[k][r]);
				n[k] += !err[k];
			}
		ibv_dereg_mr(smr);
		free(src);
		for (int k = 0; k < 2; k++) {
			if (k && c->odp_err)
				skip_row("fallback", name[k], size, c->caps.why);
			else
				row(c, "fallback", name[k], size, n[k], med_us(all[k], n[k]),
				    med_us(reg[k], n[k]), med_us(wr[k], n[k]), err[k]);
		}
	}
}

int scen_odp(const struct bench_env *env, size_t max_size)
{
	struct odp_ctx c = { .env = env };
	int ret;

	c.odp_err = rdt_odp_probe(env->dev->ctx, ODP_RC_NEED, &c.caps);
	c.pool = mrp_pool_open(NULL);
	if (!c.pool || mrp_attach_pd(c.pool, env->pd, RDT_ACCESS_ALL)) {
		fprintf(stderr, "odp: pool setup failed\n");
		return 1;
	}
	ret = rdt_loop_create(&c.lp, env->dev);
	if (ret) {
		fprintf(stderr, "odp: rdt_loop_create: %s\n", strerror(-ret));
		mrp_pool_close(c.pool);
		return 1;
	}
	printf("scenario,part,memory,size,n,v1,v2,v3,status\n");
	printf("odp,caps,%s,0,0,%llu,%u,%u,%s%s\n", env->dev_name,
	       (unsigned long long)c.caps.general, c.caps.rc, c.caps.ud,
	       c.odp_err ? "SKIP: " : "ok", c.odp_err ? c.caps.why : "");
	part_pin(&c);
	part_reg(&c, mem_cap(max_size));
	part_first(&c);
	part_rate(&c);
	part_fallback(&c);
	rdt_loop_destroy(&c.lp);
	mrp_pool_close(c.pool);
	return c.ret;
}
