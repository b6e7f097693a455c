// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The shim's settings, its one pool and its counters.
 *
 * Dormant until RDMA: LD_PRELOAD reaches every program a run executes (a
 * launcher, a shell script, env, numactl, a compiler the program starts),
 * and only those that use RDMA gain from pinned memory; the others would
 * pin their large blocks and take the pool's host-wide quota for nothing.
 * So, by default, the shim in a process leaves every allocation to the
 * real allocator (no pool, no address map, nothing pinned) until the
 * process first uses RDMA: a device list with a device in it, a device
 * opened, or a registration (mrp_pl_activate(), from verbs.c). From then
 * on large allocations come from the pool; blocks handed out before stay
 * the real allocator's (free() tells them apart by the address map, as
 * any real block). MRPOOL_PRELOAD_INHERIT=all (or 1, mrpool-run --all) is
 * active from the start, as the shim was before; MRPOOL_PRELOAD_INHERIT=0
 * (mrpool-run --no-inherit) is dormant as the default, and the process
 * that activates takes the shim out of the environment its own children
 * get: a wrapper chain before it keeps the shim, its descendants lose it.
 *
 * The pool opens on first use once active (a large allocation or a
 * registration), on
 * the kernel module when /dev/mrpool opens and on the library's anonymous
 * backend otherwise (MRPOOL_BACKEND as for any pool); if it cannot open,
 * the shim passes everything on. No fallback buffers (MRPOOL_FALLBACK is
 * ignored): every pool buffer must lie in an arena, the test free() makes.
 *
 * Fork: a program forked under the shim must find in the child every block
 * it had, as under glibc. The shim asks for MRP_FORK_COPY (unless
 * MRPOOL_FORK says otherwise): on the anonymous backend, where the kernel
 * copies DMA-pinned pages at fork, a child gets its own copy of each
 * arena, unlocked and unregistered, and the parent keeps its pages and
 * registrations; on the kernel backend, where the module offers it
 * (MRPOOL_FEATURE_FORK_COPY), the module makes the child a private copy of
 * each slice mapping at the fork, the same way. Slices of an older module
 * are never inherited (VM_DONTCOPY), nor are anonymous arenas where the
 * kernel would let a child's copy-on-write take a pinned page from the
 * parent (MADV_DONTFORK): there the
 * parent's arenas are covered in the child with inaccessible placeholders
 * so that no mapping of the child lands where the shim still takes
 * pointers for pool buffers (a read of one faults). Either way, in a child
 * the shim serves nothing from the pool and passes every registration on,
 * and free() of a parent's block is a no-op (a copy stays until exit).
 * Without a copy the library marks the arenas DONTFORK again at each fork,
 * as libibverbs' fork support clears the advice, and unmaps in the child
 * whatever it got anyway (pool.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload.h"

struct mrp_pl_cfg mrp_pl_cfg;
__thread struct mrp_pl_tls mrp_pl_tls __attribute__((tls_model("initial-exec"))) = {
	.in = MRP_PL_FRESH,
};
struct mrp_pl_counters mrp_pl_count;
/* its destructor gives back what the exiting thread deferred */
static pthread_key_t mrp_pl_exit_key;
static bool mrp_pl_exit_key_ok;		/* set once, before any pool block exists */

/* mrp_pl_setup() has run: set once, with release, at its end */
_Atomic bool mrp_pl_set_up;
static pthread_once_t mrp_pl_setup_once = PTHREAD_ONCE_INIT;

/*
 * DORMANT (0, the start) until the process uses RDMA or the settings say
 * active from the start, then CLOSED; the first user opens the pool.
 * Allocations test state == OPEN only: dormancy costs them nothing.
 */
enum { MRP_PL_DORMANT, MRP_PL_CLOSED, MRP_PL_OPENING, MRP_PL_OPEN, MRP_PL_OFF };
static _Atomic int mrp_pl_state;
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
	if (n <= 0)
		return;
	if ((size_t)n >= sizeof(line)) {
		/* cut short (a long setting's value): still one whole line */
		n = sizeof(line) - 1;
		line[n - 1] = '\n';
	}
	if (write(STDERR_FILENO, line, (size_t)n) < 0) {
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

/*
 * The real malloc is the object foreign's, not glibc's (real.c): the
 * program or a library in it may give blocks from malloc back through
 * that allocator's own API, which would take a pool block for one of its
 * own. So allocations are left to it (registrations are then all passed
 * on: no memory is the pool's), unless MRPOOL_PRELOAD_FOREIGN_MALLOC says
 * the program uses the standard calls only. Said once, on stderr, as the
 * pool's failure to open is: the person running the program under
 * mrpool-run must know the shim does nothing here.
 *
 * The shim does not define the allocators' own entry points (sdallocx,
 * mallocx, tc_free, mi_free, ...) to catch pool blocks there instead:
 * their presence is how programs detect those allocators (folly, for one,
 * looks for mallocx and its siblings), so a program on glibc would believe
 * jemalloc is there and call what the shim does not have (mallctl); each
 * allocator has dozens of them; and a pool block would still reach any
 * the shim left out.
 */
static void mrp_pl_foreign(const char *owner)
{
	static char name[64];
	const char *base = strrchr(owner, '/'), *force;
	size_t n;

	base = base ? base + 1 : owner;
	n = strnlen(base, sizeof(name) - 1);
	memcpy(name, base, n);		/* no snprintf: the first malloc runs this */
	mrp_pl_cfg.foreign = name;
	if (!mrp_pl_cfg.min && !mrp_pl_cfg.aligned_min)
		return;			/* no allocations asked for: nothing to say */
	force = getenv("MRPOOL_PRELOAD_FOREIGN_MALLOC");
	if (force && *force && strcmp(force, "0")) {
		mrp_pl_cfg.forced = true;
		return;
	}
	mrp_pl_cfg.min = 0;
	mrp_pl_cfg.aligned_min = 0;
	mrp_pl_cfg.left = true;
}

/*
 * What mrp_pl_foreign() decided, said as the process leaves dormancy: a
 * dormant process (a compiler, a script the run executes) is the real
 * allocator's anyway, and a line from each would only be noise.
 */
static void mrp_pl_say_foreign(void)
{
	const char *force = getenv("MRPOOL_PRELOAD_FOREIGN_MALLOC");

	if (!mrp_pl_cfg.foreign)
		return;
	if (mrp_pl_cfg.forced)
		mrp_pl_say("mrpool-preload: malloc is %s's, not glibc's: "
			   "MRPOOL_PRELOAD_FOREIGN_MALLOC=%s serves large allocations from the "
			   "pool anyway; a pool block given to its own API (e.g. sdallocx) crashes\n",
			   mrp_pl_cfg.foreign, force ? force : "");
	else if (mrp_pl_cfg.left)
		mrp_pl_say("mrpool-preload: malloc is %s's, not glibc's: allocations left to it "
			   "(its own API, e.g. sdallocx, would get pool blocks), registrations passed "
			   "on; see mrpool-run(1)\n", mrp_pl_cfg.foreign);
}

/*
 * From mrp_pl_resolve(), with the object whose malloc is the real one when
 * it is not glibc's: getenv() allocates nothing.
 */
void mrp_pl_load_cfg(const char *foreign)
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
	if (foreign)
		mrp_pl_foreign(foreign);
	s = getenv("MRPOOL_PRELOAD_INHERIT");
	if (s && (!strcmp(s, "all") || !strcmp(s, "1"))) {
		mrp_pl_cfg.inherit = MRP_PL_INHERIT_ALL;
	} else if (s && !strcmp(s, "0")) {
		mrp_pl_cfg.inherit = MRP_PL_INHERIT_UNTIL_RDMA;
	} else {
		mrp_pl_cfg.inherit = MRP_PL_INHERIT_DORMANT;
		if (s && *s)
			mrp_pl_say("mrpool-preload: MRPOOL_PRELOAD_INHERIT=%s is not 0, 1 or all: "
				   "dormant until the program uses RDMA, inherited\n", s);
	}
	/* nothing can have activated yet: this runs before the verbs calls can */
	if (mrp_pl_cfg.inherit == MRP_PL_INHERIT_ALL) {
		atomic_store_explicit(&mrp_pl_state, MRP_PL_CLOSED, memory_order_relaxed);
		mrp_pl_say_foreign();
	}
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

/*
 * Thread exit: every call of the thread into the library has returned or
 * was left for good (unwound by cancellation or pthread_exit(), or jumped
 * out of), so it is outside, and what it deferred goes back. A later
 * destructor's free finds in 0 and frees at once.
 */
static void mrp_pl_thread_exit(void *arg)
{
	(void)arg;
	__atomic_store_n(&mrp_pl_tls.in, 0, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&mrp_pl_tls.pending, __ATOMIC_RELAXED))
		mrp_pl_drain();
}

/* From mrp_pl_resolve(), before the pool can open. */
void mrp_pl_tls_init(void)
{
	mrp_pl_exit_key_ok = !pthread_key_create(&mrp_pl_exit_key, mrp_pl_thread_exit);
}

/*
 * The thread's first look at in (MRP_PL_FRESH): outside, and the key set so
 * that its exit gives back what it may defer. pthread_setspecific() may be
 * reached from a signal handler here, once per thread, as the library's
 * first allocation of a thread sets its own key from one.
 */
static MRP_NOINLINE void mrp_pl_thread_start(void)
{
	__atomic_store_n(&mrp_pl_tls.in, 0, __ATOMIC_RELAXED);
	if (mrp_pl_exit_key_ok)
		pthread_setspecific(mrp_pl_exit_key, &mrp_pl_tls);
}

/* Is the thread running on its alternate signal stack? */
static bool mrp_pl_on_altstack(void)
{
	stack_t ss;

	return !sigaltstack(NULL, &ss) && (ss.ss_flags & SS_ONSTACK);
}

/*
 * in is not 0 (see struct mrp_pl_tls): the thread's first look, a call
 * from inside (true: cfa, this entry point's frame, is at or below the
 * top, or the thread is on its alternate signal stack), or the top of a
 * call left for good, which this one clears, giving back what waited
 * (false). Async-signal-safe: a handler may get here while its thread is
 * anywhere, even here, and leaves in as it found it or cleared.
 */
bool mrp_pl_inside_slow(uintptr_t cfa)
{
	uintptr_t top = __atomic_load_n(&mrp_pl_tls.in, __ATOMIC_RELAXED);

	if (top == MRP_PL_FRESH) {
		mrp_pl_thread_start();
		return false;
	}
	if (!top)			/* a handler cleared it meanwhile */
		return false;
	if (cfa <= top || mrp_pl_on_altstack())
		return true;
	__atomic_store_n(&mrp_pl_tls.in, 0, __ATOMIC_RELAXED);
	mrp_add(&mrp_pl_count.abandoned, 1);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&mrp_pl_tls.pending, __ATOMIC_RELAXED))
		mrp_pl_drain();
	return false;
}

/* Off the path of every later call: mrp_pl_pool_outside() keeps no stack frame. */
static MRP_NOINLINE void mrp_pl_open(void)
{
	struct mrp_pool_attr attr = {
		.comp_mask = MRP_POOL_ATTR_FALLBACK,
		.fallback = 0,
	};
	struct mrp_pool *pool;
	int cancel;

	/* the fork handlers before there is a pool for them to guard */
	mrp_pl_setup();

	/* children keep their blocks where that can be (see the top) */
	if (!getenv("MRPOOL_FORK")) {
		attr.comp_mask |= MRP_POOL_ATTR_FORK;
		attr.fork = MRP_FORK_COPY;
	}

	/*
	 * Opening the kernel backend's device is a cancellation point: a
	 * thread cancelled there would leave the state OPENING, and the
	 * pool unopened, for good.
	 */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	mrp_pl_enter_outer();
	pool = mrp_pool_open(&attr);
	if (!pool)
		mrp_pl_say_no_pool(&attr, errno);
	mrp_pl_leave_outer();
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
 * MRPOOL_PRELOAD_INHERIT=0 (mrpool-run --no-inherit), at activation: the
 * shim's entries leave LD_PRELOAD and the setting leaves the environment,
 * so that what this process executes runs without the shim (a helper it
 * starts, a shell), while the wrappers that led here (env, numactl, a
 * launcher script) kept it. The dynamic loader read LD_PRELOAD at start:
 * this process keeps the shim. A program that copied its environment
 * earlier (Python's os.environ) and hands the copy to a child passes the
 * shim on in it.
 *
 * Other threads may be running: glibc's setenv() replaces the pointer to
 * an existing variable in place and never frees the old string, and
 * unsetenv() moves the later entries down under its lock, so a getenv()
 * racing it may miss a variable for that instant; nothing here writes a
 * string another thread may be reading.
 */
static void mrp_pl_uninherit(void)
{
	static const char name[] = "libmrpool-preload.so";
	const char *pre = getenv("LD_PRELOAD");
	char out[4096];
	size_t n = 0;

	unsetenv("MRPOOL_PRELOAD_INHERIT");
	if (!pre || strlen(pre) >= sizeof(out))
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
 * The process uses RDMA (verbs.c: a device list with a device in it, a
 * device opened, a registration): the pool is active from now on, and
 * opens at its first use. Once; after mrp_pl_setup() (the settings read).
 * Never from inside an allocation: setenv() allocates.
 */
void mrp_pl_activate(void)
{
	int st = MRP_PL_DORMANT;

	if (likely(atomic_load_explicit(&mrp_pl_state, memory_order_relaxed) != MRP_PL_DORMANT))
		return;
	if (!atomic_compare_exchange_strong(&mrp_pl_state, &st, MRP_PL_CLOSED))
		return;			/* another thread did */
	mrp_pl_say_foreign();
	if (mrp_pl_cfg.inherit == MRP_PL_INHERIT_UNTIL_RDMA)
		mrp_pl_uninherit();
}

/*
 * mrp_pl_pool() of a call from outside the library: the pool, but not on
 * the pool's thread (it may hold the pool's lock), not in a forked child,
 * not while another thread opens it (that caller gets the real function
 * rather than waiting).
 */
struct mrp_pool *mrp_pl_pool_outside(void)
{
	int st = atomic_load_explicit(&mrp_pl_state, memory_order_acquire);
	struct mrp_pool *pool;

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
struct mrp_pool *mrp_pl_pool_peek(void)
{
	if (atomic_load_explicit(&mrp_pl_state, memory_order_acquire) != MRP_PL_OPEN ||
	    mrp_forked(mrp_pl_the_pool))
		return NULL;
	return mrp_pl_the_pool;
}

/*
 * unshare() and setns(): the kernel refuses a new user namespace (also
 * CLONE_VM, CLONE_SIGHAND, CLONE_THREAD) and joining a user or mount
 * namespace to a process of more than one thread. The pool's thread would
 * make every program under the shim one once its pool opened, so for these
 * calls it is stopped and started again after (mrp_bg_pause(), pool.c): a
 * program of one thread of its own gets what it would without the shim.
 * The system call itself, as glibc makes it. One caller at a time pauses
 * (two are two threads, refused by the kernel anyway). From a signal
 * handler that interrupted one of its thread's calls into the library
 * (or this one) the call goes straight to the kernel: the pool thread
 * could be waiting for a lock the interrupted call holds.
 */
#define MRP_PL_EXPORT	__attribute__((visibility("default")))

static pthread_mutex_t mrp_pl_ns_lock = PTHREAD_MUTEX_INITIALIZER;

static long mrp_pl_single_threaded(long nr, long a, long b)
{
	struct mrp_pool *pool = mrp_pl_inside() ? NULL : mrp_pl_pool_peek();
	bool paused;
	long ret;
	int err;

	if (!pool)
		return syscall(nr, a, b);
	mrp_pl_enter_outer();
	pthread_mutex_lock(&mrp_pl_ns_lock);
	paused = mrp_bg_pause(pool);
	ret = syscall(nr, a, b);
	err = errno;
	if (paused)
		mrp_bg_resume(pool);
	pthread_mutex_unlock(&mrp_pl_ns_lock);
	mrp_pl_leave_outer();
	errno = err;
	return ret;
}

MRP_PL_EXPORT int unshare(int flags)
{
	if (!(flags & (CLONE_NEWUSER | CLONE_VM | CLONE_SIGHAND | CLONE_THREAD)))
		return (int)syscall(SYS_unshare, flags);
	return (int)mrp_pl_single_threaded(SYS_unshare, flags, 0);
}

MRP_PL_EXPORT int setns(int fd, int nstype)
{
	if (nstype && !(nstype & (CLONE_NEWUSER | CLONE_NEWNS)))
		return (int)syscall(SYS_setns, fd, nstype);
	return (int)mrp_pl_single_threaded(SYS_setns, fd, nstype);
}

static void mrp_pl_fork_prepare(void)
{
	mrp_pl_verbs_fork_prepare();
}

/* The pool's allocations, frees and bytes in use (0 without a pool of ours). */
static void mrp_pl_pool_counts(struct mrp_pool *pool, uint64_t *allocs, uint64_t *frees,
			       uint64_t *in_use)
{
	struct mrp_stats st;
	uintptr_t outer;

	*allocs = 0;
	*frees = 0;
	*in_use = 0;
	if (!pool)
		return;
	outer = mrp_pl_enter();
	if (!mrp_stats(pool, &st, sizeof(st))) {
		*allocs = st.allocs;
		*frees = st.frees;
		*in_use = st.bytes_in_use;
	}
	mrp_pl_leave(outer);
}

/*
 * A fork with pool blocks live: the child has a copy of them or none (see
 * the top of the file). Counted for the report; with MRPOOL_PRELOAD_DEBUG, said once
 * on stderr (write(2): no allocation in a fork handler).
 */
static void mrp_pl_fork_parent(void)
{
	struct mrp_pool *pool = mrp_pl_pool_peek();
	static atomic_bool warned;
	uint64_t allocs, frees, in_use, live;
	char line[256];
	int n;

	mrp_pl_verbs_fork_parent();
	/* the library's parent handler ran first: its locks are free again */
	mrp_pl_pool_counts(pool, &allocs, &frees, &in_use);
	live = allocs > frees ? allocs - frees : 0;
	if (!live)
		return;
	mrp_add(&mrp_pl_count.forks, 1);
	if (!mrp_pl_cfg.debug || atomic_exchange(&warned, true))
		return;
	n = snprintf(line, sizeof(line),
		     "mrpool-preload: pid %d forked with %llu blocks from the pool live: %s\n",
		     (int)getpid(), (unsigned long long)live, pool->fork_copy ?
		     "the child has its own copy of them" :
		     "the child does not inherit them (a read faults, see mrpool-run(1))");
	if (n > 0 && write(STDERR_FILENO, line, (size_t)n) < 0) {
		/* nowhere to say it */
	}
}

/*
 * In the child: the parent's arenas are gone, unless the pool gave the
 * child a copy of them; keep their ranges reserved (with a copy, the
 * holes in it: mrp_pl_fill_holes()).
 * The library's child handler ran first (registered first, see
 * mrp_pl_setup_run()): the pool's lock is free again, the list is as the
 * parent left it between two operations (its prepare handler held the
 * lock across the fork), and each arena's range is empty, so that no
 * placeholder meets a mapping (MAP_FIXED_NOREPLACE would leave the whole
 * arena uncovered). This is the child's only thread.
 */
static void mrp_pl_placeholder(uintptr_t base, size_t len)
{
	mmap((void *)base, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS |
	     MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
}

/*
 * An arena the child should have as a copy (MRP_FORK_COPY) may still have
 * holes: ranges libibverbs' fork support marked MADV_DONTFORK when the
 * program registered them, which the prepare handler's MADV_DOFORK could
 * not undo (kernels after 6.12 refuse it on a module's slice). A hole the
 * child's own mmap() could land in would be taken for pool blocks: cover
 * each with a placeholder. mincore() fails with ENOMEM over a range with
 * an unmapped page: one call per MRP_PL_PROBE pages finds the arenas
 * without holes, pages are probed one by one only where one is.
 */
#define MRP_PL_PROBE	4096

static void mrp_pl_fill_holes(uintptr_t base, size_t len)
{
	static unsigned char vec[MRP_PL_PROBE];
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), step = MRP_PL_PROBE * pg;
	uintptr_t p, q, hole;

	for (p = base; p < base + len; p += step) {
		size_t n = base + len - p < step ? base + len - p : step;

		if (!mincore((void *)p, n, vec) || errno != ENOMEM)
			continue;
		hole = 0;
		for (q = p; q < p + n; q += pg) {
			bool unmapped = mincore((void *)q, pg, vec) && errno == ENOMEM;

			if (unmapped && !hole)
				hole = q;
			if (!unmapped && hole) {
				mrp_pl_placeholder(hole, q - hole);
				hole = 0;
			}
		}
		if (hole)
			mrp_pl_placeholder(hole, p + n - hole);
	}
}

static void mrp_pl_fork_child(void)
{
	struct mrp_pool *pool = mrp_pl_the_pool;
	struct mrp_arena *a;

	mrp_pl_verbs_fork_child();
	/*
	 * The child's report counts its own work: what the parent did before
	 * the fork is in the parent's. (The pool's own counts need nothing:
	 * a child reports none of its parent's pool, mrp_pl_pool_peek().)
	 */
	atomic_store(&mrp_pl_count.alloc_fails, 0);
	atomic_store(&mrp_pl_count.forks, 0);
	atomic_store(&mrp_pl_count.copies, 0);
	atomic_store(&mrp_pl_count.copied, 0);
	atomic_store(&mrp_pl_count.zeroed, 0);
	atomic_store(&mrp_pl_count.deferred, 0);
	atomic_store(&mrp_pl_count.abandoned, 0);
	if (atomic_load(&mrp_pl_state) != MRP_PL_OPEN)
		return;		/* no pool */
	pthread_mutex_lock(&pool->lock);
	for (a = pool->arenas; a; a = a->next) {
		if (pool->fork_copy)
			mrp_pl_fill_holes(a->base, a->size);
		else
			mrp_pl_placeholder(a->base, a->size);
	}
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
	uint64_t allocs, frees, in_use, served, passed;
	char line[640];
	int fd, n;

	/*
	 * exit(): as at a thread's exit, no call of this thread into the
	 * library is running (exit() is no call for a signal handler), and
	 * what it deferred goes back before the counts.
	 */
	mrp_pl_thread_exit(NULL);
	mrp_pl_pool_counts(pool, &allocs, &frees, &in_use);
	mrp_pl_verbs_counts(&served, &passed);
	if (pool) {
		mrp_pl_enter_outer();
		mrp_publish(pool, true);
		mrp_pl_leave_outer();
	}
	if (!mrp_pl_cfg.report)
		return;
	n = snprintf(line, sizeof(line),
		     "mrpool-preload: pid %d: backend %s, registrations served %llu passed %llu, "
		     "allocations from the pool %llu (refused %llu), frees to the pool %llu "
		     "(deferred %llu), bytes in use %llu, calls abandoned %llu, "
		     "forks with pool blocks %llu, "
		     "realloc copies %llu, bytes copied %llu, calloc bytes zeroed %llu, "
		     "malloc %s%s\n",
		     (int)getpid(),
		     pool ? (pool->ops->kind == MRP_KIND_KERNEL ? "kernel" : "anon") :
		     atomic_load(&mrp_pl_state) == MRP_PL_DORMANT ? "none (dormant: no RDMA)" :
		     atomic_load(&mrp_pl_state) == MRP_PL_OPEN ? "none (forked: the parent's pool)" :
		     "none",
		     (unsigned long long)served,
		     (unsigned long long)passed,
		     (unsigned long long)allocs,
		     (unsigned long long)atomic_load(&mrp_pl_count.alloc_fails),
		     (unsigned long long)frees,
		     (unsigned long long)atomic_load(&mrp_pl_count.deferred),
		     (unsigned long long)in_use,
		     (unsigned long long)atomic_load(&mrp_pl_count.abandoned),
		     (unsigned long long)atomic_load(&mrp_pl_count.forks),
		     (unsigned long long)atomic_load(&mrp_pl_count.copies),
		     (unsigned long long)atomic_load(&mrp_pl_count.copied),
		     (unsigned long long)atomic_load(&mrp_pl_count.zeroed),
		     mrp_pl_cfg.foreign ? mrp_pl_cfg.foreign : "glibc",
		     !mrp_pl_cfg.foreign ? "" : mrp_pl_cfg.forced ? " (not glibc's: pool forced)" :
		     " (not glibc's: allocations left to it)");
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
 * The library's fork handlers are registered (mrp_global_init) before the
 * shim's: prepare handlers run in reverse order, so the shim's lock is
 * taken first and the library's (mrp_global_lock, each pool->lock,
 * mrp_fork_lock) inside it, the order every other path takes them in
 * (verbs.c holds mrp_pl_lock while it attaches PDs and registers arenas);
 * child handlers run in order, so the library's has made the pool
 * consistent when the shim's runs. Their allocations (glibc's list of
 * handlers) are the real allocator's: a large one would open the pool,
 * which comes here again.
 */
static void mrp_pl_setup_run(void)
{
	uintptr_t outer;

	mrp_pl_ready();
	outer = mrp_pl_enter();
	/*
	 * On failure no pool opens, and the library registered no handlers.
	 * It maps nothing: the address map (1 GiB of address space) comes
	 * with the pool's first arena, for the first block it serves.
	 */
	(void)mrp_global_init();
	pthread_atfork(mrp_pl_fork_prepare, mrp_pl_fork_parent, mrp_pl_fork_child);
	mrp_pl_leave(outer);
	atomic_store_explicit(&mrp_pl_set_up, true, memory_order_release);
}

void mrp_pl_setup_slow(void)
{
	pthread_once(&mrp_pl_setup_once, mrp_pl_setup_run);
}

/*
 * The loader runs the constructors of a program's libraries before those
 * of preloaded objects, and such a constructor may allocate, register, or
 * start a thread that does: what this one sets up, the first call that
 * needs it sets up too (mrp_pl_setup(), mrp_pl_ready()).
 */
__attribute__((constructor)) static void mrp_pl_init(void)
{
	mrp_pl_setup();
}
