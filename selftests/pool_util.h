/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Helpers shared by the pool_*_test.c selftests: ioctl wrappers that retry
 * EINTR and return -errno, reading pool counters from sysfs, the debugfs
 * failure knobs and chunk list, and writable module parameters.
 */
#ifndef POOL_UTIL_H
#define POOL_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include "uapi/mrpool.h"

#ifdef TEST_TIMEOUT_DEFAULT
/*
 * The harness's per-test timeouts catch hangs; they are not timings. A
 * TCG guest on a busy host (make check-busy) runs four to five times
 * slower than on an idle one: 30 s killed a module reload mid-way there.
 * Ten times every declared bound; run.sh's per-binary timeout stays.
 */
#undef TEST_TIMEOUT_DEFAULT
#ifdef POOL_TEST_UNBOUNDED
/*
 * A test whose length is its parameters' (the fuzzer, the kill storm,
 * the churn: make stress runs them for hours) defines POOL_TEST_UNBOUNDED:
 * run.sh's per-binary timeout (MRPOOL_TEST_TIMEOUT) bounds it instead.
 */
#define TEST_TIMEOUT_DEFAULT (24 * 3600)
#else
#define TEST_TIMEOUT_DEFAULT 300
#endif
#undef TEST_F_TIMEOUT
#define TEST_F_TIMEOUT(fixture_name, test_name, timeout) \
	__TEST_F_IMPL(fixture_name, test_name, -1, (timeout) * 10)
#endif

#define POOL_DEV	"/dev/" MRPOOL_DEV_NAME
#define POOL_SYSFS	"/sys/class/misc/" MRPOOL_DEV_NAME
#define POOL_PARAMS	"/sys/module/mrpool/parameters"
#define POOL_DEBUGFS	"/sys/kernel/debug/mrpool"
#define MIB		(1024UL * 1024UL)

/*
 * What a child that waits to be killed does instead of pause(), with
 * @life a pipe the test made before fork(): it also returns when the test
 * process is gone (the last write end closes), so a failed ASSERT before
 * the test's kill() cannot leave it holding the TAP pipe open, hanging
 * the run until its timeout. Its caller then exits.
 */
static inline void pool_child_wait(int life[2])
{
	char c;

	close(life[1]);
	while (read(life[0], &c, 1) < 0 && errno == EINTR)
		;
}

static inline int pool_ioctl(int fd, unsigned long cmd, void *arg)
{
	int ret;

	do {
		ret = ioctl(fd, cmd, arg);
	} while (ret < 0 && errno == EINTR);
	return ret < 0 ? -errno : ret;
}

/*
 * The path of @rel (say "../kmod/mrpool.ko") from the running binary's
 * folder into @buf; 0 if that file is readable, -1 if it is not or the
 * path does not fit (@buf is "" when the binary's path is unknown).
 */
static inline int pool_beside_self(char *buf, size_t len, const char *rel)
{
	char exe[PATH_MAX], *slash;
	ssize_t n;

	buf[0] = '\0';
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -1;
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	if (snprintf(buf, len, "%s/%s", exe, rel) >= (int)len)
		return -1;
	return access(buf, R_OK) ? -1 : 0;
}

static inline int pool_open(void)
{
	return open(POOL_DEV, O_RDWR | O_CLOEXEC);
}

static inline int pool_query(int fd, struct mrpool_query *q)
{
	memset(q, 0, sizeof(*q));
	q->size = sizeof(*q);
	return pool_ioctl(fd, MRPOOL_IOC_QUERY, q);
}

/* ALLOC of @bytes on any node; fills @a. */
static inline int pool_alloc(int fd, uint64_t bytes, struct mrpool_alloc *a)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->bytes = bytes;
	a->node = MRPOOL_NODE_ANY;
	return pool_ioctl(fd, MRPOOL_IOC_ALLOC, a);
}

static inline int pool_free(int fd, uint64_t slice_id)
{
	struct mrpool_free f = { .size = sizeof(f), .slice_id = slice_id };

	return pool_ioctl(fd, MRPOOL_IOC_FREE, &f);
}

/* EXPORT_DMABUF of slice @id, close-on-exec: its descriptor, or -errno. */
static inline int pool_export(int fd, uint64_t slice_id)
{
	struct mrpool_export_dmabuf e = {
		.size = sizeof(e), .slice_id = slice_id,
		.flags = MRPOOL_EXPORT_CLOEXEC,
	};
	int ret = pool_ioctl(fd, MRPOOL_IOC_EXPORT_DMABUF, &e);

	return ret ? ret : (int)e.fd;
}

/* mmap a slice the way the library does; MAP_FAILED with errno set. */
static inline void *pool_map(int fd, const struct mrpool_alloc *a)
{
	return mmap(NULL, a->length, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		    (off_t)a->mmap_offset);
}

/*
 * Offset of the first non-zero 8-byte word of @p, or @len when all of it
 * is zero (a slice's length is a multiple of the page size).
 */
static inline size_t pool_nonzero_at(const void *p, size_t len)
{
	const uint64_t *w = p;
	size_t i;

	for (i = 0; i < len / 8; i++)
		if (w[i])
			return i * 8;
	return len;
}

/* A decimal value from a file, or -1. */
static inline long long pool_read_ll(const char *path)
{
	char buf[64];
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return strtoll(buf, NULL, 0);
}

static inline int pool_write_str(const char *path, const char *val)
{
	ssize_t n;
	int fd;

	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = write(fd, val, strlen(val));
	n = n < 0 ? -errno : 0;
	close(fd);
	return (int)n;
}

static inline int pool_write_ll(const char *path, long long v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%lld", v);
	return pool_write_str(path, buf);
}

/* sysfs attribute of the device, e.g. "used_bytes" or "stats/frees". */
static inline long long pool_attr(const char *name)
{
	char path[256];

	snprintf(path, sizeof(path), POOL_SYSFS "/%s", name);
	return pool_read_ll(path);
}

static inline long long pool_param(const char *name)
{
	char path[256];

	snprintf(path, sizeof(path), POOL_PARAMS "/%s", name);
	return pool_read_ll(path);
}

/* A parameter's text without the newline ("Y", "8", ...); "" if absent. */
static inline void pool_param_str(const char *name, char *buf, size_t len)
{
	char path[256];
	ssize_t n;
	int fd;

	buf[0] = '\0';
	snprintf(path, sizeof(path), POOL_PARAMS "/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		n = 0;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

static inline int pool_set_param(const char *name, long long v)
{
	char path[256];

	snprintf(path, sizeof(path), POOL_PARAMS "/%s", name);
	return pool_write_ll(path, v);
}

/* Arm a debugfs failure knob: the next @n allocations of that kind fail. */
static inline int pool_set_knob(const char *name, long long n)
{
	char path[256];

	snprintf(path, sizeof(path), POOL_DEBUGFS "/%s", name);
	return pool_write_ll(path, n);
}

/*
 * The pfns of the chunks owned by slice @id, from debugfs "chunks"
 * (pfn node state owner blocks). Returns how many were found.
 */
static inline int pool_slice_pfns(uint64_t id, unsigned long *pfns, int max)
{
	char line[256], state[32];
	unsigned long pfn, owner;
	int node, n = 0;
	FILE *f;

	f = fopen(POOL_DEBUGFS "/chunks", "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx %d %31s %lu", &pfn, &node, state,
			   &owner) != 4)
			continue;
		if (owner == id && !strcmp(state, "used") && n < max)
			pfns[n++] = pfn;
	}
	fclose(f);
	return n;
}

/*
 * ALLOC every free chunk (at least one) into @b: 1 if the chunk at @pfn
 * is among them, 0 if not, or -errno. "A freed chunk comes back" without
 * assuming which free chunk is handed out first (the defrag worker puts
 * its new chunks at the head of the free list at any time).
 */
static inline int pool_alloc_free_has(int fd, unsigned long pfn,
				      struct mrpool_alloc *b)
{
	struct mrpool_query q;
	unsigned long *pfns;
	int i, n, got, ret;

	ret = pool_query(fd, &q);
	if (ret)
		return ret;
	n = q.free_bytes / q.chunk_size ? q.free_bytes / q.chunk_size : 1;
	ret = pool_alloc(fd, n * q.chunk_size, b);
	if (ret)
		return ret;
	pfns = calloc(n, sizeof(*pfns));
	if (!pfns)
		return -ENOMEM;
	got = pool_slice_pfns(b->slice_id, pfns, n);
	for (i = 0, ret = 0; i < got; i++)
		ret |= pfns[i] == pfn;
	free(pfns);
	return got < 0 ? got : ret;
}

/* One line of debugfs chunks. */
struct pool_chunk_row {
	unsigned long pfn;
	int node;
	char state[32];		/* "free", "used", "quarantined" */
	unsigned long owner;	/* slice id while used */
	char blocks[64];	/* "order:count,..." */
	char backing[8];	/* "shmem" (a tmpfs huge folio) or "pages" */
};

/*
 * Calls @fn on every chunk debugfs lists; returns how many calls returned
 * true, or -errno when the file cannot be read.
 */
static inline int pool_chunks_scan(bool (*fn)(const struct pool_chunk_row *r,
					      void *arg), void *arg)
{
	struct pool_chunk_row r;
	char line[256];
	int n = 0;
	FILE *f;

	f = fopen(POOL_DEBUGFS "/chunks", "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx %d %31s %lu %63s %7s", &r.pfn, &r.node,
			   r.state, &r.owner, r.blocks, r.backing) == 6 &&
		    fn(&r, arg))
			n++;
	fclose(f);
	return n;
}

static inline bool pool_chunk_in_state(const struct pool_chunk_row *r,
				       void *state)
{
	return !strcmp(r->state, state);
}

/* How many chunks debugfs lists in @state ("free", "used", ...). */
static inline int pool_count_state(const char *want)
{
	return pool_chunks_scan(pool_chunk_in_state, (void *)want);
}

/* State of the chunk starting at @pfn into @state; 0 or -ENOENT. */
static inline int pool_pfn_state(unsigned long want, char *state, size_t len)
{
	char line[256], st[32];
	unsigned long pfn, owner;
	int node, ret = -ENOENT;
	FILE *f;

	f = fopen(POOL_DEBUGFS "/chunks", "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx %d %31s %lu", &pfn, &node, st,
			   &owner) == 4 && pfn == want) {
			snprintf(state, len, "%s", st);
			ret = 0;
		}
	fclose(f);
	return ret;
}

/* A "Field:   N kB" line of the /proc/self/smaps entry starting at @addr. */
static inline long long pool_smaps_kb(const void *addr, const char *field)
{
	unsigned long start, end;
	char line[256];
	long long kb = -1;
	int in = 0;
	FILE *f;

	f = fopen("/proc/self/smaps", "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &start, &end) == 2 &&
		    strchr(line, '-') < strchr(line, ' ')) {
			in = start == (unsigned long)addr;
			continue;
		}
		if (in && !strncmp(line, field, strlen(field))) {
			kb = strtoll(line + strlen(field), NULL, 10);
			break;
		}
	}
	fclose(f);
	return kb;
}

/*
 * KiB of the mapping at @addr mapped with PMDs: chunks of plain pages
 * count as FilePmdMapped, shmem chunks (shmem_chunks=Y) as ShmemPmdMapped.
 */
static inline long long pool_pmd_mapped_kb(const void *addr)
{
	long long file = pool_smaps_kb(addr, "FilePmdMapped:");
	long long shmem = pool_smaps_kb(addr, "ShmemPmdMapped:");

	return file < 0 || shmem < 0 ? -1 : file + shmem;
}

/*
 * How far MemAvailable may drift over a long test (slab, logs, page
 * cache) when a test checks that the kernel has its memory back.
 */
#define POOL_MEM_SLACK_MB	48

/* MemAvailable of /proc/meminfo in bytes, or -1. */
static inline long long pool_mem_available(void)
{
	char line[256];
	long long kb = -1;
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1)
			break;
	fclose(f);
	return kb < 0 ? -1 : kb * 1024;
}

/*
 * How many of the files debugfs "clients" lists (pid comm slices bytes
 * ...) belong to one of the @n processes in @pids; -errno if unreadable.
 * For processes that have exited: their files must be gone.
 */
static inline int pool_clients_of(const int *pids, size_t n)
{
	char line[512];
	int pid, found = 0;
	size_t i;
	FILE *f;

	f = fopen(POOL_DEBUGFS "/clients", "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%d ", &pid) == 1)
			for (i = 0; i < n; i++)
				found += pids[i] == pid;
	fclose(f);
	return found;
}

/*
 * The pool as a test that shares it must leave it: nothing used or
 * quarantined beyond @base, every chunk accounted for.
 */
static inline bool pool_back_to(int fd, const struct mrpool_query *base,
				struct mrpool_query *q)
{
	return !pool_query(fd, q) && q->used_bytes <= base->used_bytes &&
	       q->quarantined_bytes <= base->quarantined_bytes &&
	       q->total_bytes == q->free_bytes + q->used_bytes +
				 q->quarantined_bytes;
}

/*
 * debugfs users can be read and has its header: a row missing from it
 * then means a user charged nothing, not a file that could not be read.
 */
static inline bool pool_users_readable(void)
{
	char line[256];
	bool ok;
	FILE *f;

	f = fopen(POOL_DEBUGFS "/users", "re");
	if (!f)
		return false;
	ok = fgets(line, sizeof(line), f) && !strncmp(line, "uid bytes ", 10);
	fclose(f);
	return ok;
}

/* The columns of debugfs users after the uid. */
enum pool_user_col {
	POOL_USER_BYTES, POOL_USER_QUARANTINED, POOL_USER_MEMLOCK,
	POOL_USER_ORPHANED,
};

/*
 * @uid's row of debugfs users: bytes charged, of those in quarantine, of
 * those in RLIMIT_MEMLOCK, or bytes of its the orphans hold (@col); -1 if
 * not listed.
 */
static inline long long pool_user_row(unsigned int uid, enum pool_user_col col)
{
	unsigned long long v[4];
	char line[256];
	long long ret = -1;
	unsigned int u;
	FILE *f;

	f = fopen(POOL_DEBUGFS "/users", "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%u %llu %llu %llu %llu", &u, &v[0], &v[1],
			   &v[2], &v[3]) == 5 && u == uid)
			ret = (long long)v[col];
	fclose(f);
	return ret;
}

/* Bytes charged to no user (debugfs users' "orphans" row), else 0. */
static inline long long pool_orphan_bytes(void)
{
	unsigned long long bytes = 0;
	char line[256];
	FILE *f;

	f = fopen(POOL_DEBUGFS "/users", "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "orphans %llu", &bytes) == 1)
			break;
	fclose(f);
	return (long long)bytes;
}

/*
 * MRPOOL_SHARED_POOL=1: another test runs on the pool at the same time
 * (device_churn_test runs the fuzzer and the kill storm together), so
 * pool-wide end states are its caller's to check, not this test's.
 */
static inline bool pool_shared(void)
{
	const char *v = getenv("MRPOOL_SHARED_POOL");

	return v && !strcmp(v, "1");
}

/*
 * SKIP from a FIXTURE_SETUP. 6.1's harness runs the test body after a plain
 * SKIP() in setup; clearing "passed" makes its wrapper return before the
 * body (and before the teardown: use this before setup takes anything),
 * and the test still reports as skipped because "skip" is set.
 *
 * Inside the test VM (tools/vm/guest.sh exports MRPOOL_VM=1) the module,
 * rxe0, debugfs and the test modules are always there, so a missing
 * precondition is a failure there, not a skip. fmt must be a literal.
 */
#define POOL_SETUP_SKIP(fmt, ...) \
	POOL_SKIP_OR_FAIL(_metadata->passed = 0; return, fmt, ##__VA_ARGS__)

/* Inside the test VM (MRPOOL_VM=1): every precondition is provided. */
static inline bool pool_in_vm(void)
{
	const char *vm = getenv("MRPOOL_VM");

	return vm && !strcmp(vm, "1");
}

/* SKIP(@statement, ...) outside the VM; in it, fail and return. */
#define POOL_SKIP_OR_FAIL(statement, fmt, ...) do {			\
	if (pool_in_vm()) {						\
		TH_LOG("FAIL, not SKIP (MRPOOL_VM=1): " fmt, ##__VA_ARGS__); \
		_metadata->passed = 0;					\
		return;							\
	}								\
	SKIP(statement, fmt, ##__VA_ARGS__);				\
} while (0)

/*
 * The start of a pool test's FIXTURE_SETUP: self->fd is /dev/mrpool opened
 * (-1 until then, for the teardown) and self->q0 its first QUERY; SKIP when
 * the module is not loaded.
 */
#define POOL_SETUP_OPEN() do {						\
	self->fd = -1;							\
	if (access(POOL_DEV, F_OK))					\
		POOL_SETUP_SKIP(POOL_DEV " missing: mrpool.ko not loaded"); \
	self->fd = pool_open();						\
	ASSERT_LE(0, self->fd);						\
	ASSERT_EQ(0, pool_query(self->fd, &self->q0));			\
} while (0)

/*
 * SKIP from a test body for a missing precondition: in the VM (MRPOOL_VM=1)
 * the guest always provides it, so its absence fails the test instead.
 */
#define POOL_SKIP(fmt, ...) POOL_SKIP_OR_FAIL(return, fmt, ##__VA_ARGS__)

/*
 * 6.1's kselftest_harness.h runs a TEST_F body even after its setup
 * called SKIP(): a body starts with this to stop there.
 */
#define POOL_SETUP_SKIPPED() do {					\
	if (_metadata->skip)						\
		return;							\
} while (0)

/*
 * Idle trim off for a fixture that compares pool totals (the 5 s trim
 * could give chunks back between two reads); returns the setting for
 * pool_trim_restore(), or -1 if it could not be read or changed.
 */
static inline long long pool_trim_off(void)
{
	long long sec = pool_param("idle_trim_sec");

	if (sec < 0 || pool_set_param("idle_trim_sec", 0))
		return -1;
	return sec;
}

static inline void pool_trim_restore(long long sec)
{
	if (sec >= 0)
		pool_set_param("idle_trim_sec", sec);
}

static sigjmp_buf pool_touch_jmp;
static volatile sig_atomic_t pool_touch_sig;

static inline void pool_touch_handler(int sig)
{
	pool_touch_sig = sig;
	siglongjmp(pool_touch_jmp, 1);
}

/*
 * Read (or write) the byte at @p in this process: 0, or the signal the
 * access raised (SIGBUS from a revoked slice's mapping, mmap.c).
 */
static inline int pool_touch(volatile uint8_t *p, bool write)
{
	struct sigaction sa, old_bus, old_segv;
	int ret = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = pool_touch_handler;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, &old_bus);
	sigaction(SIGSEGV, &sa, &old_segv);
	pool_touch_sig = 0;
	if (!sigsetjmp(pool_touch_jmp, 1)) {
		if (write)
			*p = 0x11;
		else
			(void)*p;
	} else {
		ret = pool_touch_sig;
	}
	sigaction(SIGBUS, &old_bus, NULL);
	sigaction(SIGSEGV, &old_segv, NULL);
	return ret;
}

/*
 * A "Field: N kB" line of /proc/<@pid>/status (@pid 0: this process), in
 * kB, or -1.
 */
static inline long long pool_status_kb(pid_t pid, const char *field)
{
	char path[64], line[128], fmt[64];
	long long kb = -1;
	FILE *f;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/status");
	snprintf(fmt, sizeof(fmt), "%s: %%lld kB", field);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, fmt, &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/* VmPin of /proc/self/status (fork copies, registrations), in kB, or -1. */
static inline long long pool_vmpin_kb(void)
{
	return pool_status_kb(0, "VmPin");
}

/*
 * How far below its count /proc/<pid>/status may show an RSS counter, in
 * kB: where they are per-CPU (6.2+), a reader that does not sum them
 * (6.12's task_mem()) misses what each CPU has not folded in yet, less
 * than percpu_counter_batch (max(32, 2 x CPUs) pages) per CPU.
 */
static inline long long pool_rss_slack_kb(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_CONF);

	if (cpus < 1)
		cpus = 1;
	return cpus * (cpus * 2 > 32 ? cpus * 2 : 32) *
	       (sysconf(_SC_PAGESIZE) >> 10);
}

/* Poll until @cond holds or @ms elapse (TCG guests are slow). */
#define POOL_WAIT(cond, ms) ({						\
	int __left = (ms);						\
	while (!(cond) && __left > 0) {					\
		usleep(50 * 1000);					\
		__left -= 50;						\
	}								\
	(cond);								\
})

#endif /* POOL_UTIL_H */
