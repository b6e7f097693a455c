// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The shim's settings, its one pool and its counters.
 *
 * The pool opens on first use (a large allocation or a registration), on
 * the kernel module when /dev/mrpool opens and on the library's anonymous
 * backend otherwise (MRPOOL_BACKEND as for any pool); if it cannot open,
 * the shim passes everything on. No fallback buffers (MRPOOL_FALLBACK is
 * ignored): every pool buffer must lie in an arena, the test free() makes.
 *
 * Fork: pool memory is not inherited (slices are VM_DONTCOPY, anonymous
 * arenas MADV_DONTFORK; the library marks both again at each fork, as
 * libibverbs' fork support clears the advice, and unmaps in the child
 * whatever it got anyway: pool.c), so in a child the shim serves nothing
 * from the pool and passes every registration on; the parent's arenas are
 * covered with inaccessible placeholders so that no mapping of the child
 * lands there while the shim still takes pointers into them for pool
 * buffers (free() of one is a no-op in the child, a read of one faults).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "preload.h"

struct mrp_pl_cfg mrp_pl_cfg;
__thread unsigned int mrp_pl_depth __attribute__((tls_model("initial-exec")));
struct mrp_pl_counters mrp_pl_count;

enum { MRP_PL_CLOSED, MRP_PL_OPENING, MRP_PL_OPEN, MRP_PL_OFF };
static _Atomic int mrp_pl_state;		/* the first user opens the pool */
static struct mrp_pool *mrp_pl_the_pool;	/* set before state OPEN, then fixed */

/*
 * One line on stderr: what a person must know (the pool did not open, a
 * setting was not understood). write(2), no allocation: this runs inside
 * the first malloc.
 */
static void mrp_pl_say(const char *fmt, ...)
{
	char line[320];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n > 0 && write(STDERR_FILENO, line,
			   (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1) < 0) {
		/* nowhere to say it */
	}
}

/*
 * A size setting of the shim's ("64K", "2M", "0": K/M/G suffixes, decimal,
 * as the library's MRPOOL_* sizes): unset or empty keeps def; malformed
 * keeps it too, and says so once.
 */
static size_t mrp_pl_env_size(const char *name, size_t def)
{
	const char *s = getenv(name);
	size_t v;

	if (!s || !*s)
		return def;
	if (!mrp_parse_size(s, &v))
		return v;
	mrp_pl_say("mrpool-preload: %s=%s is not a size (a decimal number, K, M or G "
		   "after it): %zu used\n", name, s, def);
	return def;
}

/* From mrp_pl_resolve(): getenv() allocates nothing. */
void mrp_pl_load_cfg(void)
{
	const char *s;

	mrp_pl_cfg.min = mrp_pl_env_size("MRPOOL_PRELOAD_MIN", 64 * 1024);
	/*
	 * RDMA buffers are mostly asked for page-aligned (posix_memalign,
	 * memalign, valloc), where glibc wastes up to a page anyway: a lower
	 * threshold for those serves small ones without moving every small
	 * malloc into 4 KiB buffers.
	 */
	mrp_pl_cfg.aligned_min = mrp_pl_env_size("MRPOOL_PRELOAD_ALIGNED_MIN", mrp_pl_cfg.min);
	/*
	 * Pool memory is pinned: one huge request (a file read whole, a
	 * matrix) would pin it all and could take the pool's whole limit.
	 */
	mrp_pl_cfg.max = mrp_pl_env_size("MRPOOL_PRELOAD_MAX", 1ull << 30);
	/*
	 * A large calloc is often a table that stays sparse (numpy.zeros,
	 * hash tables): glibc maps it and the untouched pages cost nothing,
	 * where the pool would pin all of it.
	 */
	mrp_pl_cfg.calloc_max = mrp_pl_env_size("MRPOOL_PRELOAD_CALLOC_MAX", 16 << 20);
	s = getenv("MRPOOL_PRELOAD_REMOTE");
	mrp_pl_cfg.remote = s && !strcmp(s, "arena") ? MRP_PL_REMOTE_ARENA :
			    MRP_PL_REMOTE_REAL;
	if (s && *s && mrp_pl_cfg.remote != MRP_PL_REMOTE_ARENA)
		mrp_pl_say("mrpool-preload: MRPOOL_PRELOAD_REMOTE=%s is not \"arena\": "
			   "registrations with remote access are passed on\n", s);
	s = getenv("MRPOOL_PRELOAD_REPORT");
	mrp_pl_cfg.report = s && *s ? s : NULL;
	s = getenv("MRPOOL_PRELOAD_DEBUG");
	mrp_pl_cfg.debug = s && *s && strcmp(s, "0");
}

/*
 * The pool did not open: everything passes through, which a person
 * running the program under mrpool-run must hear of, once, with the
 * setting at fault if one is (the library fails the open on a malformed
 * MRPOOL_* variable rather than guess).
 */
static void mrp_pl_say_no_pool(const struct mrp_pool_attr *attr, int err)
{
	const char *bad = NULL, *val;
	struct mrp_cfg cfg;

	if (err == EINVAL && mrp_cfg_load(&cfg, attr, &bad) && bad) {
		val = getenv(bad);
		mrp_pl_say("mrpool-preload: %s=%s is not a valid setting (see mrp_pool_open(3)): "
			   "no pool, every allocation and registration passes through\n",
			   bad, val ? val : "");
		return;
	}
	mrp_pl_say("mrpool-preload: no pool (mrp_pool_open: %s): every allocation and "
		   "registration passes through\n", mrp_strerror(err));
}

/* Off the path of every later call: mrp_pl_pool() keeps no stack frame. */
static MRP_NOINLINE void mrp_pl_open(void)
{
	struct mrp_pool_attr attr = {
		.comp_mask = MRP_POOL_ATTR_FALLBACK,
		.fallback = 0,
	};
	struct mrp_pool *pool;
	int cancel;

	/*
	 * Opening the kernel backend's device is a cancellation point: a
	 * thread cancelled there would leave the state OPENING, and the
	 * pool unopened, for good.
	 */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	mrp_pl_enter();
	pool = mrp_pool_open(&attr);
	if (!pool)
		mrp_pl_say_no_pool(&attr, errno);
	mrp_pl_leave();
	pthread_setcancelstate(cancel, NULL);
	/* the registrations' per-thread counters, summed for the stats page */
	if (pool)
		atomic_store_explicit(&pool->preload_publish, mrp_pl_verbs_publish,
				      memory_order_release);
	mrp_pl_the_pool = pool;
	atomic_store_explicit(&mrp_pl_state, pool ? MRP_PL_OPEN : MRP_PL_OFF,
			      memory_order_release);
}

/*
 * The pool, if this call may use it: not from inside the library (the
 * caller's own bookkeeping), not on the pool's thread (it may hold the
 * pool's lock), not in a forked child, not while another thread opens it
 * (that caller gets the real function rather than waiting).
 */
struct mrp_pool *mrp_pl_pool(void)
{
	int st = atomic_load_explicit(&mrp_pl_state, memory_order_acquire);
	struct mrp_pool *pool;

	if (mrp_pl_depth)
		return NULL;
	if (unlikely(st == MRP_PL_CLOSED)) {
		if (atomic_compare_exchange_strong(&mrp_pl_state, &st, MRP_PL_OPENING))
			mrp_pl_open();
		st = atomic_load_explicit(&mrp_pl_state, memory_order_acquire);
	}
	if (st != MRP_PL_OPEN)
		return NULL;
	pool = mrp_pl_the_pool;
	if (mrp_forked(pool) || mrp_bg_self)
		return NULL;
	return pool;
}

/* The pool if it is open and ours (not a forked child's copy); never opens it. */
static struct mrp_pool *mrp_pl_pool_peek(void)
{
	if (atomic_load_explicit(&mrp_pl_state, memory_order_acquire) != MRP_PL_OPEN ||
	    mrp_forked(mrp_pl_the_pool))
		return NULL;
	return mrp_pl_the_pool;
}

static void mrp_pl_fork_prepare(void)
{
	mrp_pl_verbs_fork_prepare();
}

/* The pool's allocations and frees so far (0, 0 without a pool of ours). */
static void mrp_pl_pool_counts(struct mrp_pool *pool, uint64_t *allocs, uint64_t *frees)
{
	struct mrp_stats st;

	*allocs = 0;
	*frees = 0;
	if (!pool)
		return;
	mrp_pl_enter();
	if (!mrp_stats(pool, &st, sizeof(st))) {
		*allocs = st.allocs;
		*frees = st.frees;
	}
	mrp_pl_leave();
}

/*
 * A fork with pool blocks live: the child has none of them (see the top of
 * the file). Counted for the report; with MRPOOL_PRELOAD_DEBUG, said once
 * on stderr (write(2): no allocation in a fork handler).
 */
static void mrp_pl_fork_parent(void)
{
	static atomic_bool warned;
	uint64_t allocs, frees, live;
	char line[256];
	int n;

	mrp_pl_verbs_fork_parent();
	/* the library's parent handler ran first: its locks are free again */
	mrp_pl_pool_counts(mrp_pl_pool_peek(), &allocs, &frees);
	live = allocs > frees ? allocs - frees : 0;
	if (!live)
		return;
	mrp_add(&mrp_pl_count.forks, 1);
	if (!mrp_pl_cfg.debug || atomic_exchange(&warned, true))
		return;
	n = snprintf(line, sizeof(line),
		     "mrpool-preload: pid %d forked with %llu blocks from the pool live: "
		     "the child does not inherit them (a read faults, see mrpool-run(1))\n",
		     (int)getpid(), (unsigned long long)live);
	if (n > 0 && write(STDERR_FILENO, line, (size_t)n) < 0) {
		/* nowhere to say it */
	}
}

/*
 * In the child: the parent's arenas are gone; keep their ranges reserved.
 * The library's child handler ran first (registered first, see
 * mrp_pl_init): the pool's lock is free again, the list is as the
 * parent left it between two operations (its prepare handler held the
 * lock across the fork), and each arena's range is empty, so that no
 * placeholder meets a mapping (MAP_FIXED_NOREPLACE would leave the whole
 * arena uncovered). This is the child's only thread.
 */
static void mrp_pl_fork_child(void)
{
	struct mrp_pool *pool = mrp_pl_the_pool;
	struct mrp_arena *a;

	mrp_pl_verbs_fork_child();
	if (atomic_load(&mrp_pl_state) != MRP_PL_OPEN)
		return;
	pthread_mutex_lock(&pool->lock);
	for (a = pool->arenas; a; a = a->next)
		mmap((void *)a->base, a->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS |
		     MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
	pthread_mutex_unlock(&pool->lock);
}

/*
 * MRPOOL_PRELOAD_REPORT=stderr or a file (appended to): one line at exit
 * with the counters, for people and for the tests; the stats page gets its
 * last update too.
 */
__attribute__((destructor)) static void mrp_pl_fini(void)
{
	struct mrp_pool *pool = mrp_pl_pool_peek();
	uint64_t allocs, frees, served, passed;
	char line[512];
	int fd, n;

	mrp_pl_pool_counts(pool, &allocs, &frees);
	mrp_pl_verbs_counts(&served, &passed);
	if (pool) {
		mrp_pl_enter();
		mrp_publish(pool, true);
		mrp_pl_leave();
	}
	if (!mrp_pl_cfg.report)
		return;
	n = snprintf(line, sizeof(line),
		     "mrpool-preload: pid %d: backend %s, registrations served %llu passed %llu, "
		     "allocations from the pool %llu (refused %llu), forks with pool blocks %llu, "
		     "realloc copies %llu, bytes copied %llu, calloc bytes zeroed %llu\n",
		     (int)getpid(),
		     pool ? (pool->ops->kind == MRP_KIND_KERNEL ? "kernel" : "anon") : "none",
		     (unsigned long long)served,
		     (unsigned long long)passed,
		     (unsigned long long)allocs,
		     (unsigned long long)atomic_load(&mrp_pl_count.alloc_fails),
		     (unsigned long long)atomic_load(&mrp_pl_count.forks),
		     (unsigned long long)atomic_load(&mrp_pl_count.copies),
		     (unsigned long long)atomic_load(&mrp_pl_count.copied),
		     (unsigned long long)atomic_load(&mrp_pl_count.zeroed));
	if (n <= 0)
		return;
	if (!strcmp(mrp_pl_cfg.report, "stderr")) {
		fd = STDERR_FILENO;
	} else {
		fd = open(mrp_pl_cfg.report, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0)
			return;
	}
	if (write(fd, line, (size_t)n) < 0) {
		/* nothing to do about it at exit */
	}
	if (fd != STDERR_FILENO)
		close(fd);
}

/*
 * MRPOOL_PRELOAD_INHERIT=0 (mrpool-run --no-inherit): take the shim out of
 * LD_PRELOAD, so that programs this one executes run without it (a shell,
 * a launcher, a helper that forks and keeps using large buffers). The
 * dynamic loader read LD_PRELOAD before: this process keeps the shim.
 */
static void mrp_pl_uninherit(void)
{
	static const char name[] = "libmrpool-preload.so";
	const char *s = getenv("MRPOOL_PRELOAD_INHERIT"), *pre = getenv("LD_PRELOAD");
	char out[4096];
	size_t n = 0;

	if (!s || strcmp(s, "0") || !pre || strlen(pre) >= sizeof(out))
		return;
	/* entries separated by spaces or colons, as ld.so(8) reads them */
	while (*pre) {
		size_t len = strcspn(pre, " :"), nl = sizeof(name) - 1;

		if (len && !(len >= nl && !memcmp(pre + len - nl, name, nl) &&
			     (len == nl || pre[len - nl - 1] == '/'))) {
			if (n)
				out[n++] = ' ';
			memcpy(out + n, pre, len);
			n += len;
		}
		pre += len;
		pre += strspn(pre, " :");
	}
	out[n] = 0;
	if (n)
		setenv("LD_PRELOAD", out, 1);
	else
		unsetenv("LD_PRELOAD");
}

/*
 * The library's fork handlers are registered (mrp_global_init) before the
 * shim's: prepare handlers run in reverse order, so the shim's lock is
 * taken first and the library's (mrp_global_lock, each pool->lock,
 * mrp_fork_lock) inside it, the order every other path takes them in
 * (verbs.c holds mrp_pl_lock while it attaches PDs and registers arenas);
 * child handlers run in order, so the library's has made the pool
 * consistent when the shim's runs. libibverbs' functions are looked up
 * here, once, where no lock of ours is held (verbs.c).
 */
__attribute__((constructor)) static void mrp_pl_init(void)
{
	mrp_pl_ready();
	mrp_pl_verbs_resolve();
	mrp_pl_uninherit();
	/*
	 * On failure no pool opens, and the library registered no handlers.
	 * It maps nothing: the address map (1 GiB of address space) comes
	 * with the pool's first arena, for the first block it serves.
	 */
	(void)mrp_global_init();
	pthread_atfork(mrp_pl_fork_prepare, mrp_pl_fork_parent, mrp_pl_fork_child);
}
