// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A structured fuzzer of the /dev/mrpool UAPI (issue 13). Worker
 * processes, half of them root and half nobody, make random calls: every
 * ioctl with random sizes, flags, reserved fields, pointers (NULL, kernel,
 * inaccessible, read-only) and ids or tokens (live, freed, another file's or
 * another process's); mmap, munmap (whole and partial), mremap, mprotect
 * and madvise (every advice) of slices, dma-bufs and the stats page; fork,
 * with the child trying its parent's slices; MRs over random ranges;
 * closing and reopening the device. As they go they check what must hold
 * whatever the calls were:
 *  - a request with an unknown flag, a nonzero reserved field or a bad size
 *    never succeeds, nor does an id or token of another file;
 *  - every page of a slice reads zero until its owner writes it and then
 *    exactly what it wrote (each page is stamped with pid, slice id and
 *    page): nobody sees another process's bytes, fresh slices are zero;
 *  - a forked child cannot fault in its parent's slices, nor learn from
 *    QUERY what its parent's file or user holds;
 *  - QUERY's file_bytes is what the worker holds, and nobody's user_bytes
 *    never exceeds its RLIMIT_MEMLOCK;
 *  - no MR can be registered over a dma-buf's mapping (nothing pins it);
 * (a FREE or the file's close revokes the slice's mappings and dma-bufs:
 * the worker lets go of them then; pool_revoke_test checks the SIGBUS)
 * and when every worker has exited the pool is whole again. The kernel log
 * is checked by the VM run.
 *
 * MRPOOL_FUZZ_CALLS (default 100000, the short form in make check; make
 * stress runs 2000000), MRPOOL_FUZZ_WORKERS (default 4), MRPOOL_FUZZ_SEED
 * (default from the clock; printed, so a run can be replayed).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <grp.h>
#include <linux/dma-buf.h>
#include <infiniband/verbs.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop
#pragma GCC diagnostic ignored "-Wclobbered"

#define POOL_TEST_UNBOUNDED
#include "pool_util.h"

#define NOBODY		65534
#define FZ_MAX_WORKERS	16
#define FZ_PUB		16	/* slices each worker publishes to the others */
#define FZ_SLICES	8	/* slices a worker holds at most */
#define FZ_MAPS		64
#define FZ_BUFS		6
#define FZ_MRS		6
#define FZ_FREED	16	/* recently freed ids, tried again */
#define FZ_STAMP_MAGIC	0x6d72706f6f6c465aULL	/* "mrpoolFZ" */
#ifndef MADV_SOFT_OFFLINE
#define MADV_SOFT_OFFLINE 101
#endif
#define FZ_NOBODY_CHUNKS 6	/* nobody's RLIMIT_MEMLOCK, in chunks */

/* The ops, with their weights: how often each is picked. */
#define FZ_OPS(X)							\
	X(ALLOC, 10) X(FREE, 6) X(MMAP, 10) X(MUNMAP, 6) X(MREMAP, 3)	\
	X(MPROTECT, 4) X(MADVISE, 8) X(TOUCH, 14) X(QUERY, 4)		\
	X(DEVICES, 2) X(KEYS, 3) X(EXPORT, 3) X(BUF_MMAP, 3)		\
	X(BUF_CLOSE, 2) X(BUF_SYNC, 1) X(BAD_CMD, 4) X(BAD_PTR, 5)	\
	X(FOREIGN, 5) X(FORK, 1) X(REOPEN, 1) X(STATS, 2) X(MR_REG, 2)	\
	X(MR_DEREG, 2) X(RDONLY, 2)
#define FZ_ENUM(n, w) FZ_OP_##n,
#define FZ_WEIGHT(n, w) w,
#define FZ_NAME(n, w) #n,
enum { FZ_OPS(FZ_ENUM) FZ_NOPS };
static const unsigned int fz_weight[] = { FZ_OPS(FZ_WEIGHT) };
static const char *const fz_name[] = { FZ_OPS(FZ_NAME) };
/* Ops whose main call must have succeeded at least once in a run. */
static const bool fz_must_succeed[FZ_NOPS] = {
	[FZ_OP_ALLOC] = true, [FZ_OP_FREE] = true, [FZ_OP_MMAP] = true,
	[FZ_OP_MUNMAP] = true, [FZ_OP_MREMAP] = true, [FZ_OP_MPROTECT] = true,
	[FZ_OP_MADVISE] = true, [FZ_OP_TOUCH] = true, [FZ_OP_QUERY] = true,
	[FZ_OP_DEVICES] = true, [FZ_OP_KEYS] = true, [FZ_OP_EXPORT] = true,
	[FZ_OP_BUF_MMAP] = true, [FZ_OP_BUF_CLOSE] = true, [FZ_OP_FORK] = true,
	[FZ_OP_REOPEN] = true, [FZ_OP_STATS] = true, [FZ_OP_MR_REG] = true,
	[FZ_OP_MR_DEREG] = true, [FZ_OP_RDONLY] = true,
};

/* A slice id and token a worker holds, for the others to try. */
struct fz_pub {
	uint64_t id;
	uint64_t off;
};

/* One worker's counters and first findings, in memory shared with the test. */
struct fz_report {
	unsigned long calls;
	unsigned long ops[FZ_NOPS];
	unsigned long ok[FZ_NOPS];	/* ops whose main call succeeded */
	unsigned long violations;
	unsigned long pages_checked;
	char first[3][320];
	struct fz_pub pub[FZ_PUB];
};

struct fz_shared {
	struct fz_report w[FZ_MAX_WORKERS];
};

struct fz_slice {
	bool used;
	bool live;		/* not freed, its file not closed */
	int fdi;		/* which of the worker's files owns it */
	unsigned int fdgen;	/* ... in which of its opens */
	uint64_t id, off, len;
	bool fork_copy;		/* MRPOOL_ALLOC_FORK_COPY: children get copies */
	int maps, bufs;		/* mapping records, dma-bufs alive */
	uint8_t *stamped;	/* per page: the owner wrote its stamp */
};

struct fz_buf {
	bool used;
	int fd;			/* -1 once closed */
	int maps;
	struct fz_slice *s;
};

enum { FZ_MAP_SLICE, FZ_MAP_BUF, FZ_MAP_STATS };

/* A mapping: pages [first, first + len / page) of a slice, or the stats page. */
struct fz_map {
	bool used;
	int kind;
	uint8_t *addr;
	size_t len;
	size_t first;
	int prot;
	bool dofork;		/* inherited: FORK_COPY or MADV_DOFORK */
	struct fz_slice *s;
	struct fz_buf *b;
};

struct fz_stamp {
	uint64_t magic;
	uint32_t pid;
	uint32_t page;
	uint64_t id;
	uint64_t inv;		/* ~id: a torn or shifted copy fails */
};

struct fz {
	struct fz_report *rep;
	struct fz_shared *sh;
	int idx, nworkers;
	uint64_t rng;
	bool root;
	pid_t pid;
	size_t page;
	uint64_t chunk;
	uint64_t memlock;	/* nobody's limit; 0 for root */
	int max_node;		/* highest online NUMA node (0-N) */
	int fd[2];
	unsigned int fdgen[2];
	struct fz_slice slices[FZ_SLICES];
	struct fz_map maps[FZ_MAPS];
	struct fz_buf bufs[FZ_BUFS];
	struct ibv_mr *mrs[FZ_MRS];
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct fz_pub freed[FZ_FREED];	/* recently freed: id and token */
	unsigned int nfreed;
	uint8_t *ro;		/* a read-only page holding a plausible request */
	uint8_t *hole;		/* a page nothing can access (PROT_NONE, kept:
				 * an unmapped hole would be reused) */
	uint8_t *arg;		/* two pages for requests */
};

/* Fault catching around one access: a signal handler needs globals. */
static sigjmp_buf fz_jmp;
static volatile sig_atomic_t fz_armed, fz_sig;

static void fz_on_fault(int sig)
{
	if (!fz_armed) {
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	fz_armed = 0;
	fz_sig = sig;
	siglongjmp(fz_jmp, 1);
}

static uint64_t fz_rand(struct fz *z)
{
	/* xorshift64* */
	z->rng ^= z->rng >> 12;
	z->rng ^= z->rng << 25;
	z->rng ^= z->rng >> 27;
	return z->rng * 2685821657736338717ULL;
}

static uint64_t fz_below(struct fz *z, uint64_t n)
{
	return n ? fz_rand(z) % n : 0;
}

static bool fz_chance(struct fz *z, unsigned int percent)
{
	return fz_below(z, 100) < percent;
}

__attribute__((format(printf, 2, 3)))
static void fz_violation(struct fz *z, const char *fmt, ...)
{
	unsigned long n = __atomic_fetch_add(&z->rep->violations, 1,
					     __ATOMIC_RELAXED);
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 3)
		snprintf(z->rep->first[n], sizeof(z->rep->first[n]),
			 "worker %d (%s, pid %d): %s", z->idx,
			 z->root ? "root" : "nobody", (int)getpid(), msg);
	if (n < 20)
		fprintf(stderr, "# VIOLATION worker %d: %s\n", z->idx, msg);
}

static void fz_call(struct fz *z)
{
	z->rep->calls++;
}

/* A counted ioctl; -errno. */
static int fz_ioctl(struct fz *z, int fd, unsigned long cmd, void *arg)
{
	fz_call(z);
	return pool_ioctl(fd, cmd, arg);
}

/* Errors the UAPI documents; anything else is a finding. */
static void fz_errno_ok(struct fz *z, const char *what, int ret)
{
	switch (-ret) {
	case 0: case EINVAL: case EFAULT: case ENOENT: case ENOMEM:
	case EDQUOT: case ENOSPC: case EPERM: case ENOTTY: case EMFILE:
	case EACCES: case E2BIG: case EBADF:
		return;
	}
	fz_violation(z, "%s failed with errno %d, not a documented error",
		     what, -ret);
}

/* --- the model of what the worker holds --- */

static struct fz_slice *fz_pick_slice(struct fz *z, bool live)
{
	unsigned int i, start = fz_below(z, FZ_SLICES);

	for (i = 0; i < FZ_SLICES; i++) {
		struct fz_slice *s = &z->slices[(start + i) % FZ_SLICES];

		if (s->used && (!live || s->live))
			return s;
	}
	return NULL;
}

static struct fz_map *fz_pick_map(struct fz *z, int kind)
{
	unsigned int i, start = fz_below(z, FZ_MAPS);

	for (i = 0; i < FZ_MAPS; i++) {
		struct fz_map *m = &z->maps[(start + i) % FZ_MAPS];

		if (m->used && (kind < 0 || m->kind == kind))
			return m;
	}
	return NULL;
}

static struct fz_map *fz_new_map(struct fz *z)
{
	unsigned int i;

	for (i = 0; i < FZ_MAPS; i++)
		if (!z->maps[i].used) {
			memset(&z->maps[i], 0, sizeof(z->maps[i]));
			z->maps[i].used = true;
			return &z->maps[i];
		}
	return NULL;
}

static unsigned int fz_free_maps(struct fz *z)
{
	unsigned int i, n = 0;

	for (i = 0; i < FZ_MAPS; i++)
		n += !z->maps[i].used;
	return n;
}

/* A slice record goes once nothing of the worker refers to it. */
static void fz_slice_gc(struct fz_slice *s)
{
	if (s->used && !s->live && !s->maps && !s->bufs) {
		free(s->stamped);
		memset(s, 0, sizeof(*s));
	}
}

static int *fz_map_owner(struct fz_map *m)
{
	if (m->kind == FZ_MAP_SLICE)
		return &m->s->maps;
	if (m->kind == FZ_MAP_BUF)
		return &m->b->maps;
	return NULL;
}

static void fz_buf_gc(struct fz_buf *b)
{
	struct fz_slice *s = b->s;

	if (b->used && b->fd < 0 && !b->maps) {
		memset(b, 0, sizeof(*b));
		s->bufs--;
		fz_slice_gc(s);
	}
}

/* The record @m is unmapped. */
static void fz_map_gone(struct fz_map *m)
{
	int *owner = fz_map_owner(m);
	struct fz_slice *s = m->s;
	struct fz_buf *b = m->b;
	int kind = m->kind;

	memset(m, 0, sizeof(*m));
	if (owner)
		(*owner)--;
	if (kind == FZ_MAP_BUF)
		fz_buf_gc(b);
	else if (kind == FZ_MAP_SLICE)
		fz_slice_gc(s);
}

/*
 * Make pages [a, b) of @m a record of its own (the kernel splits the VMA
 * when a call on that range succeeds); returns it, or NULL when there are
 * no records left for the pieces.
 */
static struct fz_map *fz_map_carve(struct fz *z, struct fz_map *m, size_t a,
				   size_t b)
{
	size_t pages = m->len / z->page;
	struct fz_map *mid, *tail;
	int *owner = fz_map_owner(m);

	if (fz_free_maps(z) < 2)
		return NULL;
	if (b < pages) {
		tail = fz_new_map(z);
		*tail = *m;
		tail->addr = m->addr + b * z->page;
		tail->len = (pages - b) * z->page;
		tail->first = m->first + b;
		m->len = b * z->page;
		if (owner)
			(*owner)++;
	}
	if (!a)
		return m;
	mid = fz_new_map(z);
	*mid = *m;
	mid->addr = m->addr + a * z->page;
	mid->len = (b - a) * z->page;
	mid->first = m->first + a;
	m->len = a * z->page;
	if (owner)
		(*owner)++;
	return mid;
}

/* A random non-empty page range [*a, *b) of @m. */
static void fz_range(struct fz *z, const struct fz_map *m, size_t *a,
		     size_t *b)
{
	size_t pages = m->len / z->page;

	if (fz_chance(z, 40)) {
		*a = 0;
		*b = pages;
		return;
	}
	*a = fz_below(z, pages);
	*b = *a + 1 + fz_below(z, pages - *a);
}

/* --- stamps: what each page of a slice must hold --- */

static void fz_stamp_of(struct fz *z, const struct fz_slice *s, size_t pg,
			struct fz_stamp *st)
{
	st->magic = FZ_STAMP_MAGIC;
	st->pid = (uint32_t)z->pid;
	st->page = (uint32_t)pg;
	st->id = s->id;
	st->inv = ~s->id;
}

/*
 * Read the stamp area of page @pg of @m's slice and compare it with the
 * model: 0 when it matches, 1 when it does not, -signal on a fault.
 */
static int fz_check_page(struct fz *z, struct fz_map *m, size_t pg,
			 bool whole)
{
	static const struct fz_stamp zero;
	const uint8_t *p = m->addr + (pg - m->first) * z->page;
	struct fz_stamp got, want;
	size_t i;

	fz_armed = 1;
	if (sigsetjmp(fz_jmp, 1))
		return -fz_sig;
	memcpy(&got, p, sizeof(got));
	if (whole && !m->s->stamped[pg])
		for (i = sizeof(got); i < z->page; i++)
			if (p[i]) {
				fz_armed = 0;
				return 1;
			}
	fz_armed = 0;
	z->rep->pages_checked++;
	if (!m->s->stamped[pg])
		return memcmp(&got, &zero, sizeof(got)) != 0;
	fz_stamp_of(z, m->s, pg, &want);
	return memcmp(&got, &want, sizeof(got)) != 0;
}

static const char *fz_kind_name(int kind)
{
	return kind == FZ_MAP_SLICE ? "slice" :
	       kind == FZ_MAP_BUF ? "dma-buf" : "stats";
}

#define FZ_SAMPLE	8	/* pages a routine check reads per mapping */

/*
 * The readable pages of @m hold what the model says: all of them when
 * @full (a new mapping, the end), else FZ_SAMPLE at random; one of them
 * is read whole. @why says what just happened, for the report.
 */
static void fz_check_map(struct fz *z, struct fz_map *m, const char *why,
			 bool full)
{
	size_t pages = m->len / z->page, n = full ? pages : FZ_SAMPLE;
	size_t i, pg, whole = fz_below(z, n);
	struct fz_stamp got;
	int ret;

	if (m->kind == FZ_MAP_STATS || !(m->prot & PROT_READ))
		return;
	for (i = 0; i < n; i++) {
		pg = m->first + (full ? i : fz_below(z, pages));
		ret = fz_check_page(z, m, pg, i == whole);
		if (!ret)
			continue;
		if (ret < 0) {
			fz_violation(z, "signal %d reading page %zu of slice %" PRIu64
				     " through its %s mapping (prot %d), %s",
				     -ret, pg, m->s->id, fz_kind_name(m->kind),
				     m->prot, why);
			return;
		}
		memcpy(&got, m->addr + (pg - m->first) * z->page, sizeof(got));
		fz_violation(z, "page %zu of slice %" PRIu64 " (%s mapping, %s) holds "
			     "magic %#" PRIx64 " pid %u page %u id %" PRIu64
			     ", expected %s", pg, m->s->id,
			     fz_kind_name(m->kind), why, got.magic, got.pid,
			     got.page, got.id,
			     m->s->stamped[pg] ? "our stamp" : "zeroes");
		return;
	}
}

/* Check every mapping of @s, after something happened to it. */
static void fz_check_slice(struct fz *z, struct fz_slice *s, const char *why)
{
	unsigned int i;

	for (i = 0; i < FZ_MAPS; i++)
		if (z->maps[i].used && z->maps[i].s == s)
			fz_check_map(z, &z->maps[i], why, false);
}

/* Stamp a random page range of a writable mapping, then read it back. */
static void fz_touch(struct fz *z)
{
	struct fz_map *m = fz_pick_map(z, -1);
	struct fz_stamp st;
	size_t a, b, pg;

	if (!m || m->kind == FZ_MAP_STATS)
		return;
	if ((m->prot & (PROT_READ | PROT_WRITE)) != (PROT_READ | PROT_WRITE)) {
		fz_check_map(z, m, "touch", false);
		return;
	}
	fz_range(z, m, &a, &b);
	for (pg = m->first + a; pg < m->first + b; pg++) {
		fz_stamp_of(z, m->s, pg, &st);
		fz_armed = 1;
		if (sigsetjmp(fz_jmp, 1)) {
			fz_violation(z, "signal %d writing page %zu of slice %"
				     PRIu64 " through its %s mapping", (int)fz_sig,
				     pg, m->s->id, fz_kind_name(m->kind));
			return;
		}
		memcpy(m->addr + (pg - m->first) * z->page, &st, sizeof(st));
		fz_armed = 0;
		m->s->stamped[pg] = 1;
	}
	z->rep->ok[FZ_OP_TOUCH]++;
	fz_check_slice(z, m->s, "after stamping");
}

/* --- requests with random sizes, reserved fields and pointers --- */

/*
 * Lay out a request of @ksize bytes at z->arg with a random size field;
 * returns whether the size is one the kernel must accept. Bytes past
 * ksize are zero, or garbage when *tail_bad is set.
 */
static bool fz_size(struct fz *z, size_t ksize, size_t v1, bool *tail_bad)
{
	uint32_t size = (uint32_t)ksize;
	bool ok = true;

	*tail_bad = false;
	memset(z->arg, 0, 2 * z->page);
	switch (fz_below(z, 24)) {
	case 0:
		size = fz_below(z, v1);
		ok = false;
		break;
	case 1:
		size = (uint32_t)v1;
		break;
	case 2:
		size = (uint32_t)(ksize + 8 * (1 + fz_below(z, 8)));
		if (fz_chance(z, 50)) {
			z->arg[ksize + fz_below(z, size - ksize)] = 0xa5;
			*tail_bad = true;
			ok = false;
		}
		break;
	case 3:
		size = (uint32_t)(z->page + 1 + fz_below(z, 4096));
		ok = false;
		break;
	case 4:
		size = 0xffffffff;
		ok = false;
		break;
	}
	memcpy(z->arg, &size, sizeof(size));
	return ok;
}

/* A pointer that is no request at all. */
static void *fz_bad_ptr(struct fz *z)
{
	switch (fz_below(z, 4)) {
	case 0:
		return NULL;
	case 1:
		return (void *)(uintptr_t)0xffff888000000000ULL;
	case 2:
		return z->hole;
	default:
		return z->ro;
	}
}

/* --- the ops --- */

static int fz_fd(struct fz *z)
{
	int fdi = fz_below(z, 2);

	return z->fd[fdi] >= 0 ? fdi : !fdi;
}

static uint64_t fz_random_id(struct fz *z)
{
	unsigned int w;

	switch (fz_below(z, 5)) {
	case 0:
		return z->nfreed ? z->freed[fz_below(z, z->nfreed)].id : 0;
	case 1:
		w = fz_below(z, z->nworkers);
		return z->sh->w[w].pub[fz_below(z, FZ_PUB)].id;
	case 2:
		return fz_below(z, 1 << 20);
	case 3:
		return fz_rand(z);
	default:
		return 0;
	}
}

/* An mmap offset: a freed or published token, or none at all. */
static off_t fz_random_off(struct fz *z)
{
	unsigned int w;

	switch (fz_below(z, 4)) {
	case 0:
		return z->nfreed ? (off_t)z->freed[fz_below(z, z->nfreed)].off : 0;
	case 1:
		w = fz_below(z, z->nworkers);
		return (off_t)z->sh->w[w].pub[fz_below(z, FZ_PUB)].off;
	case 2:
		return (off_t)(z->page * fz_below(z, 1 << 20));
	default:
		return (off_t)((fz_rand(z) >> 1) & ~(uint64_t)(z->page - 1));
	}
}

/* Our slice with @id, or token @off, live in file @fdi; else NULL. */
static struct fz_slice *fz_live_in(struct fz *z, uint64_t id, uint64_t off,
				   int fdi)
{
	unsigned int i;

	for (i = 0; i < FZ_SLICES; i++) {
		struct fz_slice *s = &z->slices[i];

		if (s->used && s->live && s->fdi == fdi &&
		    (s->id == id || s->off == off))
			return s;
	}
	return NULL;
}

static void fz_publish(struct fz *z)
{
	unsigned int i, n = 0;

	memset(z->rep->pub, 0, sizeof(z->rep->pub));
	for (i = 0; i < FZ_SLICES && n < FZ_PUB; i++)
		if (z->slices[i].used && z->slices[i].live) {
			z->rep->pub[n].id = z->slices[i].id;
			z->rep->pub[n++].off = z->slices[i].off;
		}
}

static void fz_note_freed(struct fz *z, const struct fz_slice *s)
{
	struct fz_pub *f = &z->freed[z->nfreed < FZ_FREED ? z->nfreed++ :
				     fz_below(z, FZ_FREED)];

	f->id = s->id;
	f->off = s->off;
}

static bool fz_map_slice(struct fz *z, struct fz_slice *s, int prot)
{
	struct fz_map *m = fz_new_map(z);
	void *p;

	if (!m)
		return false;
	m->used = false;
	fz_call(z);
	p = mmap(NULL, s->len, prot, MAP_SHARED, z->fd[s->fdi], (off_t)s->off);
	if (p == MAP_FAILED) {
		if (errno != ENOMEM && errno != EAGAIN)
			fz_violation(z, "mmap of live slice %" PRIu64 " (%" PRIu64
				     " bytes, prot %d) failed with errno %d",
				     s->id, s->len, prot, errno);
		return false;
	}
	m->used = true;
	m->kind = FZ_MAP_SLICE;
	m->addr = p;
	m->len = s->len;
	m->prot = prot;
	m->s = s;
	m->dofork = s->fork_copy;
	s->maps++;
	fz_check_map(z, m, "mapped", true);
	return true;
}

static void op_alloc(struct fz *z)
{
	struct mrpool_alloc *a = (void *)z->arg;
	struct fz_slice *s = NULL;
	bool ok, tail_bad;
	unsigned int i;
	int fdi = fz_fd(z), ret;

	for (i = 0; i < FZ_SLICES; i++)
		if (!z->slices[i].used) {
			s = &z->slices[i];
			break;
		}
	ok = fz_size(z, sizeof(*a), 80, &tail_bad);
	switch (fz_below(z, 8)) {
	case 0:
		a->bytes = fz_chance(z, 50) ? 0 : fz_rand(z);
		ok &= a->bytes != 0 && a->bytes <= 2 * z->chunk;
		break;
	case 1:
		a->bytes = 1 + fz_below(z, z->page);
		break;
	default:
		a->bytes = z->chunk * (1 + fz_below(z, 2)) -
			   fz_below(z, 2) * fz_below(z, z->chunk);
		break;
	}
	a->node = fz_chance(z, 80) ? MRPOOL_NODE_ANY :
		  (int32_t)fz_below(z, 6) - 2;
	if (a->node != MRPOOL_NODE_ANY &&
	    (a->node < 0 || a->node > z->max_node))
		ok = false;
	if (fz_chance(z, 10)) {
		a->flags = (uint32_t)fz_rand(z);
		ok &= !(a->flags & ~MRPOOL_ALLOC_VALID_FLAGS);
	} else if (fz_chance(z, 10)) {
		a->flags = MRPOOL_ALLOC_NODE_STRICT;
	} else if (fz_chance(z, 20)) {
		a->flags = MRPOOL_ALLOC_FORK_COPY;
	}
	if (fz_chance(z, 5)) {
		a->pad = 1;
		ok = false;
	}
	if (fz_chance(z, 5)) {
		a->reserved[fz_below(z, 4)] = fz_rand(z) | 1;
		ok = false;
	}
	if (!s && ok)
		return;	/* no room to track it */
	ret = fz_ioctl(z, z->fd[fdi], MRPOOL_IOC_ALLOC, a);
	if (ret) {
		fz_errno_ok(z, "ALLOC", ret);
		/* A good request fails only for want of memory, quota or ids. */
		if (ok && !tail_bad && ret != -ENOMEM && ret != -EDQUOT &&
		    ret != -ENOSPC)
			fz_violation(z, "ALLOC of %" PRIu64 " bytes, node %d, flags "
				     "%#x failed with errno %d", (uint64_t)a->bytes,
				     a->node, a->flags, -ret);
		return;
	}
	z->rep->ok[FZ_OP_ALLOC]++;
	if (!ok || tail_bad) {
		fz_violation(z, "ALLOC accepted a bad request (size %u flags %#x "
			     "node %d bytes %" PRIu64 ")", a->size, a->flags,
			     a->node, (uint64_t)a->bytes);
		/* It is ours now, whatever it was: free it. */
		pool_free(z->fd[fdi], a->slice_id);
		return;
	}
	if (a->length < a->bytes || a->length % z->chunk ||
	    a->length - a->bytes >= z->chunk)
		fz_violation(z, "ALLOC of %" PRIu64 " bytes gave a slice of %"
			     PRIu64, (uint64_t)a->bytes, (uint64_t)a->length);
	s->used = true;
	s->live = true;
	s->fdi = fdi;
	s->fdgen = z->fdgen[fdi];
	s->id = a->slice_id;
	s->off = a->mmap_offset;
	s->len = a->length;
	s->fork_copy = a->flags & MRPOOL_ALLOC_FORK_COPY;
	s->stamped = calloc(s->len / z->page, 1);
	if (!s->stamped)
		abort();
	fz_publish(z);
	/* Mostly map it at once: fresh slices must read zero. */
	if (fz_chance(z, 80))
		fz_map_slice(z, s, PROT_READ | PROT_WRITE);
}

static void fz_let_go(struct fz *z, struct fz_slice *s);

static void op_free(struct fz *z)
{
	struct mrpool_free *f = (void *)z->arg;
	struct fz_slice *s = fz_pick_slice(z, true);
	bool tail_bad, ok;
	int fdi, ret;

	ok = fz_size(z, sizeof(*f), 32, &tail_bad);
	if (s && fz_chance(z, 85)) {
		f->slice_id = s->id;
		fdi = fz_chance(z, 90) ? s->fdi : !s->fdi;
		if (z->fd[fdi] < 0)
			fdi = s->fdi;
	} else {
		f->slice_id = fz_random_id(z);
		fdi = fz_fd(z);
	}
	s = fz_live_in(z, f->slice_id, UINT64_MAX, fdi);
	if (fz_chance(z, 5)) {
		f->flags = 1U << fz_below(z, 32);
		ok = false;
	}
	if (fz_chance(z, 5)) {
		f->reserved[fz_below(z, 2)] = 1;
		ok = false;
	}
	ret = fz_ioctl(z, z->fd[fdi], MRPOOL_IOC_FREE, f);
	if (ret) {
		fz_errno_ok(z, "FREE", ret);
		if (ok && !tail_bad && s)
			fz_violation(z, "FREE of live slice %" PRIu64
				     " failed with errno %d", s->id, -ret);
		return;
	}
	z->rep->ok[FZ_OP_FREE]++;
	if (!ok || tail_bad || !s) {
		fz_violation(z, "FREE of id %" PRIu64 " succeeded: not a live "
			     "slice of this file, or a bad request",
			     (uint64_t)f->slice_id);
		return;
	}
	s->live = false;
	fz_note_freed(z, s);
	fz_publish(z);
	/*
	 * FREE revoked every mapping of the slice (mrpool(4) Revocation:
	 * SIGBUS from now on, the memory back at once, pool_revoke_test):
	 * the worker lets go of them and of its dma-bufs.
	 */
	fz_let_go(z, s);
	fz_slice_gc(s);
}

static void op_mmap(struct fz *z)
{
	static const int prots[] = { PROT_READ, PROT_WRITE, PROT_NONE,
				     PROT_READ | PROT_WRITE | PROT_EXEC };
	struct fz_slice *s = fz_pick_slice(z, false);
	int prot = PROT_READ | PROT_WRITE, flags = MAP_SHARED, fdi;
	struct fz_map *m = NULL;
	size_t len;
	off_t off;
	void *p;

	if (s && s->live && fz_chance(z, 60)) {
		if (fz_map_slice(z, s, prot))
			z->rep->ok[FZ_OP_MMAP]++;
		return;
	}
	/* Mostly a mapping the kernel must refuse. */
	fdi = s ? s->fdi : fz_fd(z);
	len = s ? s->len : z->chunk;
	off = s ? (off_t)s->off : fz_random_off(z);
	switch (fz_below(z, 6)) {
	case 0:
		flags = MAP_PRIVATE;
		break;
	case 1:
		len = fz_chance(z, 50) ? len / 2 : len + z->page;
		break;
	case 2:
		off += (off_t)z->page * (off_t)(1 + fz_below(z, 8));
		break;
	case 3:
		fdi = !fdi;
		break;
	case 4:
		prot = prots[fz_below(z, 4)];
		break;
	}
	if (z->fd[fdi] < 0)
		fdi = !fdi;
	fz_call(z);
	p = mmap(NULL, len, prot, flags, z->fd[fdi], off);
	if (p == MAP_FAILED)
		return;
	z->rep->ok[FZ_OP_MMAP]++;
	s = fz_live_in(z, 0, (uint64_t)off, fdi);
	if (s && len == s->len && flags == MAP_SHARED && (prot & PROT_WRITE))
		m = fz_new_map(z);
	else
		fz_violation(z, "mmap accepted: len %zu off %#llx flags %#x prot "
			     "%d (%s)", len, (unsigned long long)off, flags,
			     prot, s ? "a live slice" : "no live slice");
	if (!m) {
		munmap(p, len);
		return;
	}
	m->kind = FZ_MAP_SLICE;
	m->addr = p;
	m->len = len;
	m->prot = prot;
	m->s = s;
	m->dofork = s->fork_copy;
	s->maps++;
	fz_check_map(z, m, "mapped", true);
}

/* Unmap @m (a record: all of its pages). */
static void fz_unmap(struct fz *z, struct fz_map *m)
{
	struct fz_slice *s = m->s;

	fz_call(z);
	if (munmap(m->addr, m->len)) {
		fz_violation(z, "munmap of a %s mapping failed: errno %d",
			     fz_kind_name(m->kind), errno);
		return;
	}
	fz_map_gone(m);
	if (s && s->used && s->live)
		fz_check_slice(z, s, "after a munmap");
}

static void op_munmap(struct fz *z)
{
	struct fz_map *m = fz_pick_map(z, -1), *part;
	size_t a, b;

	if (!m)
		return;
	fz_range(z, m, &a, &b);
	part = fz_map_carve(z, m, a, b);
	fz_unmap(z, part ? part : m);
	z->rep->ok[FZ_OP_MUNMAP]++;
}

/* Drop every mapping and dma-buf of a freed slice: its record goes. */
static void fz_let_go(struct fz *z, struct fz_slice *s)
{
	unsigned int i;

	for (i = 0; i < FZ_MAPS && s->used; i++)
		if (z->maps[i].used && z->maps[i].s == s)
			fz_unmap(z, &z->maps[i]);
	for (i = 0; i < FZ_BUFS && s->used; i++)
		if (z->bufs[i].used && z->bufs[i].s == s && z->bufs[i].fd >= 0) {
			fz_call(z);
			close(z->bufs[i].fd);
			z->bufs[i].fd = -1;
			fz_buf_gc(&z->bufs[i]);
		}
}

/*
 * The model's records are finite: when mappings run short, unmap whole
 * ones; when every slice record is taken, let go of a freed slice, so
 * that allocations keep happening.
 */
static void fz_relieve(struct fz *z)
{
	struct fz_map *m;
	unsigned int i;

	while (fz_free_maps(z) < 8 && (m = fz_pick_map(z, -1)))
		fz_unmap(z, m);
	for (i = 0; i < FZ_SLICES; i++)
		if (!z->slices[i].used)
			return;
	for (i = 0; i < FZ_SLICES; i++)
		if (!z->slices[i].live) {
			fz_let_go(z, &z->slices[i]);
			return;
		}
}

static void op_mremap(struct fz *z)
{
	struct fz_map *m = fz_pick_map(z, -1);
	size_t newlen;
	void *p, *dst;

	if (!m)
		return;
	switch (fz_below(z, 4)) {
	case 0:	/* grow: VM_DONTEXPAND refuses */
		fz_call(z);
		p = mremap(m->addr, m->len, m->len + z->page, MREMAP_MAYMOVE);
		if (p != MAP_FAILED) {
			fz_violation(z, "mremap grew a %s mapping",
				     fz_kind_name(m->kind));
			/* Whatever it is now, it is no longer ours to model. */
			munmap(p, m->len + z->page);
			fz_map_gone(m);
		}
		return;
	case 1:	/* shrink */
		if (m->len <= z->page)
			return;
		newlen = z->page * (1 + fz_below(z, m->len / z->page - 1));
		fz_call(z);
		p = mremap(m->addr, m->len, newlen, 0);
		if (p == MAP_FAILED)
			return;
		m->len = newlen;
		break;
	default: /* move */
		fz_call(z);
		dst = mmap(NULL, m->len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
			   -1, 0);
		if (dst == MAP_FAILED)
			return;
		fz_call(z);
		p = mremap(m->addr, m->len, m->len,
			   MREMAP_MAYMOVE | MREMAP_FIXED, dst);
		if (p == MAP_FAILED) {
			munmap(dst, m->len);
			return;
		}
		m->addr = p;
		break;
	}
	z->rep->ok[FZ_OP_MREMAP]++;
	if (m->kind != FZ_MAP_STATS)
		fz_check_slice(z, m->s, "after mremap");
}

static void op_mprotect(struct fz *z)
{
	static const int prots[] = { PROT_NONE, PROT_READ, PROT_WRITE,
				     PROT_READ | PROT_WRITE, PROT_EXEC,
				     PROT_READ | PROT_WRITE | PROT_EXEC };
	struct fz_map *m = fz_pick_map(z, -1);
	int prot = prots[fz_below(z, 6)];
	size_t a, b;

	if (!m)
		return;
	fz_range(z, m, &a, &b);
	m = fz_map_carve(z, m, a, b);
	if (!m)
		return;
	fz_call(z);
	if (mprotect(m->addr, m->len, prot))
		return;
	z->rep->ok[FZ_OP_MPROTECT]++;
	/* x86 reads through a write-only mapping: PROT_READ is the model's. */
	m->prot = prot;
	if (m->kind != FZ_MAP_STATS)
		fz_check_slice(z, m->s, "after mprotect");
}

static void op_madvise(struct fz *z)
{
	static const int advice[] = {
		MADV_NORMAL, MADV_RANDOM, MADV_SEQUENTIAL, MADV_WILLNEED,
		MADV_DONTNEED, MADV_FREE, MADV_REMOVE, MADV_DONTFORK,
		MADV_DOFORK, MADV_MERGEABLE, MADV_UNMERGEABLE, MADV_HUGEPAGE,
		MADV_NOHUGEPAGE, MADV_DONTDUMP, MADV_DODUMP, MADV_WIPEONFORK,
		MADV_KEEPONFORK, MADV_COLD, MADV_PAGEOUT, 22 /* POPULATE_READ */,
		23 /* POPULATE_WRITE */, 24 /* DONTNEED_LOCKED */,
		25 /* COLLAPSE */, MADV_HWPOISON, MADV_SOFT_OFFLINE, 1000,
	};
	unsigned int n = sizeof(advice) / sizeof(advice[0]);
	struct fz_map *m = fz_pick_map(z, -1);
	int adv = advice[fz_below(z, n)];
	size_t a, b;

	/* Root could poison the pool's pages: nobody tries it (EPERM). */
	if (!m || (z->root && (adv == MADV_HWPOISON ||
			       adv == MADV_SOFT_OFFLINE)))
		return;
	fz_range(z, m, &a, &b);
	m = fz_map_carve(z, m, a, b);
	if (!m)
		return;
	fz_call(z);
	if (madvise(m->addr, m->len, adv)) {
		return;
	}
	z->rep->ok[FZ_OP_MADVISE]++;
	if (adv == MADV_HWPOISON || adv == MADV_SOFT_OFFLINE)
		fz_violation(z, "nobody's madvise(%d) succeeded", adv);
	if (adv == MADV_DOFORK)
		m->dofork = true;
	if (adv == MADV_DONTFORK)
		m->dofork = false;
	if (m->kind != FZ_MAP_STATS)
		fz_check_slice(z, m->s, adv == MADV_REMOVE ? "after MADV_REMOVE" :
				adv == MADV_PAGEOUT ? "after MADV_PAGEOUT" :
				adv == MADV_DONTNEED ? "after MADV_DONTNEED" :
				"after madvise");
}

/* QUERY, and what it must say about what this worker holds. */
static void op_query(struct fz *z)
{
	struct mrpool_query *q = (void *)z->arg;
	uint64_t held;
	bool ok, tail_bad;
	unsigned int i;
	int fdi = fz_fd(z), ret, tries;

	ok = fz_size(z, sizeof(*q), 128, &tail_bad);
	if (fz_chance(z, 5)) {
		q->reserved[0] = 1;
		ok = false;
	}
	ret = fz_ioctl(z, z->fd[fdi], MRPOOL_IOC_QUERY, q);
	if (ret) {
		fz_errno_ok(z, "QUERY", ret);
		if (ok && !tail_bad)
			fz_violation(z, "QUERY failed: errno %d", -ret);
		return;
	}
	z->rep->ok[FZ_OP_QUERY]++;
	if (!ok || tail_bad)
		fz_violation(z, "QUERY accepted size %u or a reserved field",
			     q->size);
	if (q->size < sizeof(*q))
		return;
	if (!z->root && q->user_bytes > z->memlock)
		fz_violation(z, "nobody holds %" PRIu64 " bytes of the pool, its "
			     "RLIMIT_MEMLOCK is %" PRIu64, (uint64_t)q->user_bytes,
			     z->memlock);
	held = 0;
	for (i = 0; i < FZ_SLICES; i++) {
		struct fz_slice *s = &z->slices[i];

		if (s->used && s->fdi == fdi && s->fdgen == z->fdgen[fdi])
			held += s->len;
	}
	/* A reaped child's mm may still be going away: wait for it. */
	for (tries = 0; q->file_bytes != held && tries < 100; tries++) {
		usleep(50000);
		memset(q, 0, sizeof(*q));
		q->size = sizeof(*q);
		if (fz_ioctl(z, z->fd[fdi], MRPOOL_IOC_QUERY, q))
			return;
	}
	if (q->file_bytes != held)
		fz_violation(z, "QUERY file_bytes %" PRIu64 ", the worker holds %"
			     PRIu64, (uint64_t)q->file_bytes, held);
}

/* DEVICES and SLICE_KEYS with random counts, entry sizes and arrays. */
static void op_list(struct fz *z, bool keys)
{
	struct mrpool_slice_keys *k = (void *)z->arg;
	struct mrpool_devices *d = (void *)z->arg;
	struct fz_slice *s = fz_pick_slice(z, true);
	uint8_t *entries = z->arg + z->page;
	uint32_t entry_size, count;
	bool ok, tail_bad;
	int fdi = fz_fd(z), ret;

	ok = fz_size(z, keys ? sizeof(*k) : sizeof(*d), keys ? 56 : 48,
		     &tail_bad);
	entry_size = keys ? 96 : 192;
	switch (fz_below(z, 5)) {
	case 0:
		entry_size = fz_below(z, entry_size);
		ok = false;
		break;
	case 1:
		entry_size += 8 * fz_below(z, 16);
		break;
	case 2:
		entry_size = (uint32_t)fz_rand(z);
		ok &= entry_size >= (keys ? 96 : 192) && entry_size <= z->page;
		break;
	}
	count = fz_chance(z, 20) ? (uint32_t)fz_rand(z) : fz_below(z, 3);
	/* Entries beyond the page of room would land on the next mapping. */
	if ((uint64_t)count * entry_size > z->page)
		entries = fz_bad_ptr(z);
	if (keys) {
		k->entry_size = entry_size;
		k->count = count;
		k->entries = (uintptr_t)entries;
		k->slice_id = s && fz_chance(z, 80) ? s->id : fz_random_id(z);
		if (!fz_live_in(z, k->slice_id, UINT64_MAX, fdi))
			ok = false;
		if (fz_chance(z, 5)) {
			k->pad = 1;
			ok = false;
		}
	} else {
		d->entry_size = entry_size;
		d->count = count;
		d->entries = (uintptr_t)entries;
		if (fz_chance(z, 5)) {
			d->flags = 1;
			ok = false;
		}
	}
	ret = fz_ioctl(z, z->fd[fdi], keys ? MRPOOL_IOC_SLICE_KEYS :
			MRPOOL_IOC_DEVICES, z->arg);
	if (ret) {
		fz_errno_ok(z, keys ? "SLICE_KEYS" : "DEVICES", ret);
		return;
	}
	z->rep->ok[keys ? FZ_OP_KEYS : FZ_OP_DEVICES]++;
	if (!ok || tail_bad)
		fz_violation(z, "%s accepted a bad request (size %u, entry size "
			     "%u)", keys ? "SLICE_KEYS" : "DEVICES",
			     *(uint32_t *)z->arg, entry_size);
	if (keys && !z->root && count && k->total && entry_size >= 96 &&
	    entries == z->arg + z->page) {
		struct mrpool_slice_key *e = (void *)entries;

		if (e->iova)
			fz_violation(z, "SLICE_KEYS showed nobody iova %#" PRIx64,
				     (uint64_t)e->iova);
	}
}

static void op_export(struct fz *z)
{
	struct mrpool_export_dmabuf *e = (void *)z->arg;
	struct fz_slice *s = fz_pick_slice(z, true);
	struct fz_buf *b = NULL;
	bool ok, tail_bad;
	unsigned int i;
	int fdi, ret;

	for (i = 0; i < FZ_BUFS; i++)
		if (!z->bufs[i].used)
			b = &z->bufs[i];
	ok = fz_size(z, sizeof(*e), 48, &tail_bad);
	if (s && fz_chance(z, 85)) {
		e->slice_id = s->id;
		fdi = s->fdi;
	} else {
		e->slice_id = fz_random_id(z);
		fdi = fz_fd(z);
	}
	s = fz_live_in(z, e->slice_id, UINT64_MAX, fdi);
	if (fz_chance(z, 50))
		e->flags = MRPOOL_EXPORT_CLOEXEC;
	if (fz_chance(z, 5)) {
		e->flags = (uint32_t)fz_rand(z);
		ok &= !(e->flags & ~MRPOOL_EXPORT_VALID_FLAGS);
	}
	if (fz_chance(z, 5)) {
		e->pad = 1;
		ok = false;
	}
	if (!b && ok)
		return;
	ret = fz_ioctl(z, z->fd[fdi], MRPOOL_IOC_EXPORT_DMABUF, e);
	if (ret) {
		fz_errno_ok(z, "EXPORT_DMABUF", ret);
		if (ok && !tail_bad && s && ret != -EMFILE && ret != -ENOMEM)
			fz_violation(z, "EXPORT_DMABUF of live slice %" PRIu64
				     " failed with errno %d", s->id, -ret);
		return;
	}
	z->rep->ok[FZ_OP_EXPORT]++;
	if (!ok || tail_bad || !s || !b) {
		fz_violation(z, "EXPORT_DMABUF accepted a bad request (id %" PRIu64
			     ", flags %#x)", (uint64_t)e->slice_id, e->flags);
		close(e->fd);
		return;
	}
	if (e->length != s->len)
		fz_violation(z, "dma-buf of %" PRIu64 " bytes for a slice of %"
			     PRIu64, (uint64_t)e->length, s->len);
	b->used = true;
	b->fd = e->fd;
	b->s = s;
	s->bufs++;
}

static struct fz_buf *fz_pick_buf(struct fz *z, bool open)
{
	unsigned int i, start = fz_below(z, FZ_BUFS);

	for (i = 0; i < FZ_BUFS; i++) {
		struct fz_buf *b = &z->bufs[(start + i) % FZ_BUFS];

		if (b->used && (!open || b->fd >= 0))
			return b;
	}
	return NULL;
}

static void op_buf_mmap(struct fz *z)
{
	struct fz_buf *b = fz_pick_buf(z, true);
	int prot = fz_chance(z, 70) ? PROT_READ | PROT_WRITE : PROT_READ;
	int flags = fz_chance(z, 90) ? MAP_SHARED : MAP_PRIVATE;
	size_t len;
	off_t off = 0;
	struct fz_map *m;
	void *p;

	if (!b || fz_free_maps(z) < 1)
		return;
	len = fz_chance(z, 80) ? b->s->len :
	      z->page * (1 + fz_below(z, b->s->len / z->page + 1));
	if (fz_chance(z, 20))
		off = (off_t)(z->page * fz_below(z, b->s->len / z->page + 1));
	fz_call(z);
	p = mmap(NULL, len, prot, flags, b->fd, off);
	if (p == MAP_FAILED)
		return;
	z->rep->ok[FZ_OP_BUF_MMAP]++;
	if (flags != MAP_SHARED || off + len > b->s->len) {
		fz_violation(z, "dma-buf mmap accepted: len %zu off %lld flags "
			     "%#x for %" PRIu64 " bytes", len, (long long)off,
			     flags, b->s->len);
		munmap(p, len);
		return;
	}
	m = fz_new_map(z);
	m->kind = FZ_MAP_BUF;
	m->addr = p;
	m->len = len;
	m->first = (size_t)off / z->page;
	m->prot = prot;
	m->s = b->s;
	m->b = b;
	b->maps++;
	fz_check_map(z, m, "dma-buf mapped", true);
}

static void op_buf_close(struct fz *z)
{
	struct fz_buf *b = fz_pick_buf(z, true);
	struct fz_slice *s;

	if (!b)
		return;
	fz_call(z);
	close(b->fd);
	b->fd = -1;
	s = b->s;
	z->rep->ok[FZ_OP_BUF_CLOSE]++;
	fz_buf_gc(b);
	if (s->used)
		fz_check_slice(z, s, "after a dma-buf close");
}

static void op_buf_sync(struct fz *z)
{
	struct fz_buf *b = fz_pick_buf(z, true);
	struct dma_buf_sync sync = { .flags = fz_rand(z) & 0xf };

	if (!b)
		return;
	if (fz_chance(z, 10))
		sync.flags = fz_rand(z);
	fz_call(z);
	if (!ioctl(b->fd, DMA_BUF_IOCTL_SYNC, &sync))
		z->rep->ok[FZ_OP_BUF_SYNC]++;
}

/* Commands the module does not have, and known ones of another type. */
static void op_bad_cmd(struct fz *z)
{
	unsigned long cmd;
	int ret, fdi = fz_fd(z);

	switch (fz_below(z, 3)) {
	case 0:
		cmd = _IOC(fz_below(z, 4), MRPOOL_IOC_MAGIC,
			   6 + fz_below(z, 250), fz_below(z, 1 << 14));
		break;
	case 1:
		cmd = _IOC(fz_below(z, 4), fz_below(z, 256), fz_below(z, 6),
			   fz_below(z, 1 << 14));
		if (_IOC_TYPE(cmd) == MRPOOL_IOC_MAGIC)
			return;
		break;
	default:
		cmd = (uint32_t)fz_rand(z);
		if (_IOC_TYPE(cmd) == MRPOOL_IOC_MAGIC && _IOC_NR(cmd) < 6)
			return;
		break;
	}
	/* What the VFS answers for every file (FIOCLEX, FIFREEZE, FICLONE...). */
	switch (_IOC_TYPE(cmd)) {
	case 'T': case 'X': case 'f': case 0x94:
		return;
	}
	memset(z->arg, 0, 2 * z->page);
	ret = fz_ioctl(z, z->fd[fdi], cmd, z->arg);
	if (ret != -ENOTTY)
		fz_violation(z, "ioctl %#lx: %d, not ENOTTY", cmd, ret);
	else
		z->rep->ok[FZ_OP_BAD_CMD]++;
}

/* A known command with a pointer that is no request. */
static void op_bad_ptr(struct fz *z)
{
	static const unsigned long cmds[] = {
		MRPOOL_IOC_QUERY, MRPOOL_IOC_ALLOC, MRPOOL_IOC_FREE,
		MRPOOL_IOC_DEVICES, MRPOOL_IOC_EXPORT_DMABUF,
		MRPOOL_IOC_SLICE_KEYS,
	};
	unsigned long cmd = cmds[fz_below(z, 6)];
	void *p = fz_bad_ptr(z);
	int ret, fdi = fz_fd(z);

	ret = fz_ioctl(z, z->fd[fdi], cmd, p);
	if (!ret && p != z->ro)
		fz_violation(z, "ioctl %#lx on pointer %p succeeded", cmd, p);
	else if (!ret && (cmd == MRPOOL_IOC_ALLOC ||
			  cmd == MRPOOL_IOC_EXPORT_DMABUF))
		fz_violation(z, "ioctl %#lx wrote to a read-only request", cmd);
	else
		z->rep->ok[FZ_OP_BAD_PTR]++;
	if (ret)
		fz_errno_ok(z, "ioctl on a bad pointer", ret);
}

/* Another worker's published slice: its id and token do nothing here. */
static void op_foreign(struct fz *z)
{
	unsigned int w = fz_below(z, z->nworkers);
	struct fz_pub pub = z->sh->w[w].pub[fz_below(z, FZ_PUB)];
	struct mrpool_free f = { .size = sizeof(f), .slice_id = pub.id };
	struct mrpool_export_dmabuf e = { .size = sizeof(e),
					  .slice_id = pub.id };
	int fdi = fz_fd(z), ret;
	unsigned int i;
	void *p;

	if (w == (unsigned int)z->idx || !pub.id)
		return;
	/* Is it one of ours after all (ids are host-wide, never shared)? */
	for (i = 0; i < FZ_SLICES; i++)
		if (z->slices[i].used && z->slices[i].id == pub.id)
			return;
	switch (fz_below(z, 3)) {
	case 0:
		ret = fz_ioctl(z, z->fd[fdi], MRPOOL_IOC_FREE, &f);
		break;
	case 1:
		ret = fz_ioctl(z, z->fd[fdi], MRPOOL_IOC_EXPORT_DMABUF, &e);
		if (!ret)
			close(e.fd);
		break;
	default:
		fz_call(z);
		p = mmap(NULL, z->chunk, PROT_READ | PROT_WRITE, MAP_SHARED,
			 z->fd[fdi], (off_t)pub.off);
		ret = p == MAP_FAILED ? -errno : 0;
		if (!ret)
			munmap(p, z->chunk);
		break;
	}
	if (!ret)
		fz_violation(z, "worker %u's slice %" PRIu64 " answered to this "
			     "file", w, pub.id);
	else
		z->rep->ok[FZ_OP_FOREIGN]++;
}

/* Read one byte at @p in the child: 0 if it could, else the signal. */
static int fz_child_probe(const uint8_t *p)
{
	volatile uint8_t c;

	fz_armed = 1;
	if (sigsetjmp(fz_jmp, 1))
		return fz_sig;
	c = *p;
	(void)c;
	fz_armed = 0;
	return 0;
}

/*
 * The child of a fork: the device file is inherited, the process is not
 * its opener; slice mappings (VM_DONTCOPY, or MADV_DOFORK'ed and then
 * refused by the fault handler) give it nothing of its parent's, but for
 * those of FORK_COPY slices not MADV_DONTFORK'ed: a copy it can read, or
 * for nobody SIGBUS where the copy was past RLIMIT_MEMLOCK.
 */
static void fz_child(struct fz *z)
{
	struct mrpool_alloc a = { .size = sizeof(a), .bytes = z->chunk,
				  .node = MRPOOL_NODE_ANY };
	struct mrpool_query q = { .size = sizeof(q) };
	struct fz_slice *s = fz_pick_slice(z, true);
	unsigned int i;
	int ret, fdi = fz_fd(z);
	void *p;

	for (i = 0; i < FZ_MAPS; i++) {
		struct fz_map *m = &z->maps[i];

		if (!m->used || m->kind != FZ_MAP_SLICE ||
		    !(m->prot & PROT_READ))
			continue;
		ret = fz_child_probe(m->addr);
		if (m->s->fork_copy && m->dofork) {
			/*
			 * A copy is locked memory: nobody's workers, sharing
			 * one RLIMIT_MEMLOCK count, may find it refused
			 * (SIGBUS); root's (CAP_IPC_LOCK) never.
			 */
			if (ret && (z->root || ret != SIGBUS))
				fz_violation(z, "a forked child got signal %d "
					     "reading its copy of slice %" PRIu64,
					     ret, m->s->id);
		} else if (!ret) {
			fz_violation(z, "a forked child read its parent's slice %"
				     PRIu64 " (%s)", m->s->id,
				     m->dofork ? "MADV_DOFORK" : "not inherited");
		}
	}
	ret = fz_ioctl(z, z->fd[fdi], MRPOOL_IOC_ALLOC, &a);
	if (ret != -EPERM)
		fz_violation(z, "ALLOC in a forked child: %d, not EPERM", ret);
	ret = fz_ioctl(z, z->fd[fdi], MRPOOL_IOC_QUERY, &q);
	if (ret)
		fz_violation(z, "QUERY in a forked child: %d", ret);
	else if (q.file_bytes || q.user_bytes || q.user_quarantined_bytes)
		fz_violation(z, "QUERY in a forked child told it the parent's "
			     "bytes: file %" PRIu64 ", user %" PRIu64,
			     (uint64_t)q.file_bytes, (uint64_t)q.user_bytes);
	if (s) {
		struct mrpool_free f = { .size = sizeof(f), .slice_id = s->id };

		ret = fz_ioctl(z, z->fd[s->fdi], MRPOOL_IOC_FREE, &f);
		if (ret != -EPERM)
			fz_violation(z, "FREE of the parent's slice in a forked "
				     "child: %d, not EPERM", ret);
		p = mmap(NULL, s->len, PROT_READ | PROT_WRITE, MAP_SHARED,
			 z->fd[s->fdi], (off_t)s->off);
		if (p != MAP_FAILED)
			fz_violation(z, "a forked child mapped its parent's slice %"
				     PRIu64, s->id);
	}
}

static void op_fork(struct fz *z)
{
	int status;
	pid_t pid;

	fz_call(z);
	pid = fork();
	if (pid < 0)
		return;
	if (!pid) {
		fz_child(z);
		_exit(0);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		fz_violation(z, "a forked child died: status %#x", status);
	z->rep->ok[FZ_OP_FORK]++;
}

static void fz_open_file(struct fz *z, int fdi)
{
	fz_call(z);
	z->fd[fdi] = pool_open();
	if (z->fd[fdi] < 0)
		fz_violation(z, "reopening " POOL_DEV ": errno %d", errno);
	else
		z->rep->ok[FZ_OP_REOPEN]++;
	z->fdgen[fdi]++;
}

/*
 * Close one of the files (its slices are freed, their mappings and
 * dma-bufs revoked) and open it again, at once or after a while on the
 * other.
 */
static void op_reopen(struct fz *z)
{
	unsigned int i;
	int fdi;

	for (fdi = 0; fdi < 2; fdi++)
		if (z->fd[fdi] < 0) {
			fz_open_file(z, fdi);
			return;
		}
	fdi = (int)fz_below(z, 2);
	fz_call(z);
	close(z->fd[fdi]);
	z->fd[fdi] = -1;
	for (i = 0; i < FZ_SLICES; i++) {
		struct fz_slice *s = &z->slices[i];

		if (s->used && s->fdi == fdi && s->live) {
			s->live = false;
			fz_note_freed(z, s);
			/* revoked with the file's release, as by FREE */
			fz_let_go(z, s);
			fz_slice_gc(s);
		}
	}
	fz_publish(z);
	if (fz_chance(z, 50))
		fz_open_file(z, fdi);
}

/*
 * A file of this process opened read-only: it may query, but no request
 * that changes the pool or hands out memory goes through it, not even
 * for a live slice of the worker's, which stays live (a later FREE of it
 * through its own file must succeed: op_free checks that).
 */
static void op_rdonly(struct fz *z)
{
	struct fz_slice *s = fz_pick_slice(z, true);
	union {
		struct mrpool_alloc a;
		struct mrpool_free f;
		struct mrpool_export_dmabuf e;
		struct mrpool_query q;
	} *r = (void *)z->arg;
	unsigned long cmd;
	int fd, ret, want = -EBADF;
	void *p;

	fz_call(z);
	fd = open(POOL_DEV, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fz_violation(z, "opening " POOL_DEV " read-only: errno %d",
			     errno);
		return;
	}
	memset(r, 0, sizeof(*r));
	switch (fz_below(z, 5)) {
	case 0:
		r->a.size = sizeof(r->a);
		r->a.bytes = z->chunk;
		r->a.node = MRPOOL_NODE_ANY;
		cmd = MRPOOL_IOC_ALLOC;
		break;
	case 1:
		r->f.size = sizeof(r->f);
		r->f.slice_id = s ? s->id : fz_random_id(z);
		cmd = MRPOOL_IOC_FREE;
		break;
	case 2:
		r->e.size = sizeof(r->e);
		r->e.slice_id = s ? s->id : fz_random_id(z);
		cmd = MRPOOL_IOC_EXPORT_DMABUF;
		break;
	case 3:
		r->q.size = sizeof(r->q);
		cmd = MRPOOL_IOC_QUERY;
		want = 0;
		break;
	default:
		/* A live slice's token maps nothing through it. */
		cmd = 0;
		fz_call(z);
		p = mmap(NULL, s ? s->len : z->chunk, PROT_READ | PROT_WRITE,
			 MAP_SHARED, fd, s ? (off_t)s->off : fz_random_off(z));
		ret = p == MAP_FAILED ? -errno : 0;
		if (!ret)
			munmap(p, s ? s->len : z->chunk);
		want = -EACCES;
		break;
	}
	if (cmd)
		ret = fz_ioctl(z, fd, cmd, r);
	if (cmd == MRPOOL_IOC_QUERY && ret && ret != -EBADF && ret != -EPERM)
		fz_errno_ok(z, "QUERY through a read-only file", ret);
	else if (ret == want)
		z->rep->ok[FZ_OP_RDONLY]++;
	else
		fz_violation(z, "read-only file: %s gave %d, not %d",
			     cmd ? "ioctl" : "mmap", ret, want);
	if (cmd == MRPOOL_IOC_EXPORT_DMABUF && !ret)
		close(r->e.fd);
	close(fd);
}

/* The stats page: map it (rightly or not) and scribble on it. */
static void op_stats(struct fz *z)
{
	size_t len = fz_chance(z, 80) ? z->page : z->page * 2;
	int flags = fz_chance(z, 90) ? MAP_SHARED : MAP_PRIVATE;
	int fdi = fz_fd(z);
	struct fz_map *m;
	uint8_t *p;
	size_t i;

	fz_call(z);
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, z->fd[fdi],
		 MRPOOL_STATS_MMAP_OFFSET);
	if (p == MAP_FAILED)
		return;
	z->rep->ok[FZ_OP_STATS]++;
	if (len != z->page || flags != MAP_SHARED)
		fz_violation(z, "stats page mapped with len %zu flags %#x",
			     len, flags);
	for (i = 0; i < 64; i++)
		p[fz_below(z, z->page)] = (uint8_t)fz_rand(z);
	m = fz_new_map(z);
	if (!m) {
		munmap(p, len);
		return;
	}
	m->kind = FZ_MAP_STATS;
	m->addr = p;
	m->len = len;
	m->prot = PROT_READ | PROT_WRITE;
	/* Root reads what the kernel makes of the garbage. */
	if (z->root && fz_chance(z, 50)) {
		char buf[4096];
		int fd = open(POOL_DEBUGFS "/clients", O_RDONLY | O_CLOEXEC);

		fz_call(z);
		if (fd >= 0) {
			while (read(fd, buf, sizeof(buf)) > 0)
				;
			close(fd);
		}
	}
}

static void op_mr_reg(struct fz *z)
{
	static const int access[] = {
		IBV_ACCESS_LOCAL_WRITE, 0,
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		IBV_ACCESS_REMOTE_READ,
	};
	struct fz_map *m = fz_pick_map(z, -1);
	unsigned int i;
	size_t a, b;

	if (!m || !z->pd)
		return;
	for (i = 0; i < FZ_MRS && z->mrs[i]; i++)
		;
	if (i == FZ_MRS)
		return;
	fz_range(z, m, &a, &b);
	fz_call(z);
	z->mrs[i] = ibv_reg_mr(z->pd, m->addr + a * z->page,
			       (b - a) * z->page - fz_below(z, z->page),
			       access[fz_below(z, 3)]);
	if (!z->mrs[i])
		return;
	z->rep->ok[FZ_OP_MR_REG]++;
	/* A dma-buf's mapping has no pages to pin (mrpool(4)). */
	if (m->kind == FZ_MAP_BUF)
		fz_violation(z, "ibv_reg_mr of a dma-buf mapping of slice %"
			     PRIu64 " succeeded", m->s->id);
}

static void op_mr_dereg(struct fz *z)
{
	unsigned int i = fz_below(z, FZ_MRS);

	if (!z->mrs[i])
		return;
	fz_call(z);
	if (ibv_dereg_mr(z->mrs[i]))
		fz_violation(z, "ibv_dereg_mr failed");
	else
		z->rep->ok[FZ_OP_MR_DEREG]++;
	z->mrs[i] = NULL;
}

static void fz_op(struct fz *z, int op)
{
	switch (op) {
	case FZ_OP_ALLOC: op_alloc(z); break;
	case FZ_OP_FREE: op_free(z); break;
	case FZ_OP_MMAP: op_mmap(z); break;
	case FZ_OP_MUNMAP: op_munmap(z); break;
	case FZ_OP_MREMAP: op_mremap(z); break;
	case FZ_OP_MPROTECT: op_mprotect(z); break;
	case FZ_OP_MADVISE: op_madvise(z); break;
	case FZ_OP_TOUCH: fz_touch(z); break;
	case FZ_OP_QUERY: op_query(z); break;
	case FZ_OP_DEVICES: op_list(z, false); break;
	case FZ_OP_KEYS: op_list(z, true); break;
	case FZ_OP_EXPORT: op_export(z); break;
	case FZ_OP_BUF_MMAP: op_buf_mmap(z); break;
	case FZ_OP_BUF_CLOSE: op_buf_close(z); break;
	case FZ_OP_BUF_SYNC: op_buf_sync(z); break;
	case FZ_OP_BAD_CMD: op_bad_cmd(z); break;
	case FZ_OP_BAD_PTR: op_bad_ptr(z); break;
	case FZ_OP_FOREIGN: op_foreign(z); break;
	case FZ_OP_FORK: op_fork(z); break;
	case FZ_OP_REOPEN: op_reopen(z); break;
	case FZ_OP_STATS: op_stats(z); break;
	case FZ_OP_MR_REG: op_mr_reg(z); break;
	case FZ_OP_MR_DEREG: op_mr_dereg(z); break;
	case FZ_OP_RDONLY: op_rdonly(z); break;
	}
}

static int fz_pick_op(struct fz *z)
{
	unsigned int total = 0, i;
	uint64_t r;

	for (i = 0; i < FZ_NOPS; i++)
		total += fz_weight[i];
	r = fz_below(z, total);
	for (i = 0; i < FZ_NOPS; i++) {
		if (r < fz_weight[i])
			return (int)i;
		r -= fz_weight[i];
	}
	return 0;
}

/* Unmap and check everything, or leave it all to exit (both happen). */
static void fz_finish(struct fz *z)
{
	unsigned int i;

	if (fz_chance(z, 50))
		return;
	for (i = 0; i < FZ_MAPS; i++)
		if (z->maps[i].used) {
			if (z->maps[i].kind != FZ_MAP_STATS)
				fz_check_map(z, &z->maps[i], "at the end", true);
			munmap(z->maps[i].addr, z->maps[i].len);
		}
	for (i = 0; i < FZ_MRS; i++)
		if (z->mrs[i] && fz_chance(z, 50))
			ibv_dereg_mr(z->mrs[i]);
}

/* The highest node with memory ("0", "0-1", "0,2"), for ALLOC's node. */
static int fz_max_node(void)
{
	FILE *f = fopen("/sys/devices/system/node/has_normal_memory", "re");
	int n, r, max = 0;
	char sep = 0;

	if (!f)
		return 0;
	while ((r = fscanf(f, "%d%c", &n, &sep)) >= 1) {
		if (n > max)
			max = n;
		if (r == 1 || sep == '\n')
			break;
	}
	fclose(f);
	return max;
}

static int fz_setup(struct fz *z, struct fz_shared *sh, int idx, int nworkers,
		    uint64_t seed, uint64_t chunk)
{
	struct sigaction sa = { .sa_handler = fz_on_fault };
	struct ibv_device **list;
	int i, n;

	memset(z, 0, sizeof(*z));
	z->sh = sh;
	z->rep = &sh->w[idx];
	z->idx = idx;
	z->nworkers = nworkers;
	z->rng = (seed ^ (0x9e3779b97f4a7c15ULL * (idx + 1))) | 1;
	z->root = !(idx & 1);
	z->page = (size_t)sysconf(_SC_PAGESIZE);
	z->chunk = chunk;
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	z->max_node = fz_max_node();
	if (!z->root) {
		struct rlimit rl;

		z->memlock = FZ_NOBODY_CHUNKS * chunk;
		rl.rlim_cur = rl.rlim_max = z->memlock;
		if (setrlimit(RLIMIT_MEMLOCK, &rl) || setgroups(0, NULL) ||
		    setgid(NOBODY) || setuid(NOBODY))
			return 1;
	}
	/* After setuid(), which clears it. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() == 1)
		return 1;
	z->pid = getpid();
	z->arg = mmap(NULL, 2 * z->page, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	z->ro = mmap(NULL, z->page, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	z->hole = mmap(NULL, z->page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	if (z->arg == MAP_FAILED || z->ro == MAP_FAILED || z->hole == MAP_FAILED)
		return 2;
	/* A plausible request of every kind starts with a size they accept. */
	*(uint32_t *)z->ro = 128;
	((struct mrpool_alloc *)z->ro)->bytes = chunk;
	if (mprotect(z->ro, z->page, PROT_READ))
		return 2;
	z->fd[0] = pool_open();
	z->fd[1] = pool_open();
	if (z->fd[0] < 0 || z->fd[1] < 0)
		return 3;
	/* rxe0: a device the churn test adds would wait for this context. */
	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n && !z->ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "rxe0"))
			z->ctx = ibv_open_device(list[i]);
	if (z->ctx)
		z->pd = ibv_alloc_pd(z->ctx);
	if (list)
		ibv_free_device_list(list);
	return 0;
}

static void fz_worker(struct fz_shared *sh, int idx, int nworkers,
		      uint64_t seed, uint64_t chunk, unsigned long calls)
{
	struct fz z;
	int ret;

	ret = fz_setup(&z, sh, idx, nworkers, seed, chunk);
	if (ret) {
		fz_violation(&z, "setup failed at step %d: errno %d", ret, errno);
		_exit(ret);
	}
	if (!z.pd && pool_in_vm())
		fz_violation(&z, "no RDMA device to register MRs with");
	while (z.rep->calls < calls) {
		int op = fz_pick_op(&z);

		z.rep->ops[op]++;
		fz_relieve(&z);
		fz_op(&z, op);
	}
	fz_finish(&z);
	_exit(0);
}

static unsigned long env_ul(const char *name, unsigned long def)
{
	const char *v = getenv(name);

	return v && *v ? strtoul(v, NULL, 0) : def;
}

TEST(fuzz)
{
	unsigned long calls = env_ul("MRPOOL_FUZZ_CALLS", 100000);
	unsigned long nworkers = env_ul("MRPOOL_FUZZ_WORKERS", 4);
	uint64_t seed = env_ul("MRPOOL_FUZZ_SEED", 0);
	unsigned long total = 0, bad = 0, checked = 0;
	struct mrpool_query base, q;
	pid_t pids[FZ_MAX_WORKERS];
	struct fz_shared *sh;
	char line[1024];
	unsigned int i, w;
	size_t n;
	int fd, status;

	if (access(POOL_DEV, F_OK))
		POOL_SKIP(POOL_DEV " missing: mrpool.ko not loaded");
	if (geteuid())
		POOL_SKIP("needs root to run workers as root and as nobody");
	ASSERT_GE(nworkers, 1);
	ASSERT_LE(nworkers, FZ_MAX_WORKERS);
	if (!seed)
		seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	TH_LOG("seed %" PRIu64 " (MRPOOL_FUZZ_SEED replays it), %lu calls, "
	       "%lu workers%s", seed, calls, nworkers,
	       pool_shared() ? ", on a shared pool" : "");
	fd = pool_open();
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, pool_query(fd, &base));
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, sh);

	for (w = 0; w < nworkers; w++) {
		pids[w] = fork();
		ASSERT_LE(0, pids[w]);
		if (!pids[w])
			fz_worker(sh, (int)w, (int)nworkers, seed,
				  base.chunk_size,
				  (calls + nworkers - 1) / nworkers);
	}
	for (w = 0; w < nworkers; w++) {
		ASSERT_EQ(pids[w], waitpid(pids[w], &status, 0));
		EXPECT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
			TH_LOG("worker %u ended with status %#x", w, status);
	}

	for (w = 0; w < nworkers; w++) {
		struct fz_report *r = &sh->w[w];

		total += r->calls;
		bad += r->violations;
		checked += r->pages_checked;
		for (i = 0; i < 3 && i < r->violations; i++)
			TH_LOG("%s", r->first[i]);
	}
	n = 0;
	for (i = 0; i < FZ_NOPS; i++) {
		unsigned long ops = 0, ok = 0;

		for (w = 0; w < nworkers; w++) {
			ops += sh->w[w].ops[i];
			ok += sh->w[w].ok[i];
		}
		n += snprintf(line + n, sizeof(line) - n, " %s %lu/%lu",
			      fz_name[i], ok, ops);
	}
	TH_LOG("%lu calls, %lu pages checked, %lu violations; ops (ok/tried):%s",
	       total, checked, bad, line);
	EXPECT_GE(total, calls);
	EXPECT_EQ(0, bad);
	/* A kernel refusing everything would pass the rest: each main path
	 * must have succeeded at least once. */
	for (i = 0; i < FZ_NOPS; i++) {
		unsigned long ok = 0;

		if (!fz_must_succeed[i])
			continue;
		for (w = 0; w < nworkers; w++)
			ok += sh->w[w].ok[i];
		EXPECT_LT(0, ok) TH_LOG("no %s ever succeeded", fz_name[i]);
	}

	/* Every worker is gone, and so are its files. */
	EXPECT_TRUE(POOL_WAIT(!pool_clients_of(pids, nworkers), 60000))
		TH_LOG("%d files of the workers still open",
		       pool_clients_of(pids, nworkers));
	ASSERT_EQ(0, pool_query(fd, &q));
	EXPECT_EQ(0, q.file_bytes);
	/* The pool is whole again. Quarantine drains as the last pins go;
	 * the bound only catches a chunk that never does. */
	if (!pool_shared())
		EXPECT_TRUE(POOL_WAIT(pool_back_to(fd, &base, &q), 120000))
			TH_LOG("used %llu quarantined %llu of %llu, at the start %llu %llu",
			       (unsigned long long)q.used_bytes,
			       (unsigned long long)q.quarantined_bytes,
			       (unsigned long long)q.total_bytes,
			       (unsigned long long)base.used_bytes,
			       (unsigned long long)base.quarantined_bytes);
	munmap(sh, sizeof(*sh));
	close(fd);
}

TEST_HARNESS_MAIN
