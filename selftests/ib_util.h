/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Helpers of the selftests that exercise the ib_core side: the kernel MR
 * cache's counters (debugfs ib_stats), a device's sysfs attributes, rxe
 * links added and deleted, the kernel test module's paths, and the setup
 * of the tests that inject work request failures on a link of their own.
 * Needs kselftest_harness.h included first.
 */
#ifndef IB_UTIL_H
#define IB_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "pool_util.h"
#include "kmsg_util.h"

#define IB_SYSFS	"/sys/module/mrpool/devices"
#define KTEST_NAME	"mrpool_rdma_ktest"
#define KTEST_TAP	"/sys/kernel/debug/" KTEST_NAME "/tap"
/* Tests the module reports per usable device (all of them, rdma_once). */
#define KTEST_PER_DEV	13

/* "name value" from debugfs ib_stats, or -1. */
static inline long long ib_stat(const char *name)
{
	char line[128], key[64];
	long long v, ret = -1;
	FILE *f;

	f = fopen(POOL_DEBUGFS "/ib_stats", "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%63s %lld", key, &v) == 2 &&
		    !strcmp(key, name))
			ret = v;
	fclose(f);
	return ret;
}

/* A device's sysfs attribute as text without newline; "" if absent. */
static inline void dev_str(const char *dev, const char *attr, char *buf, size_t len)
{
	char path[512];
	ssize_t n;
	int fd;

	buf[0] = '\0';
	snprintf(path, sizeof(path), IB_SYSFS "/%s/%s", dev, attr);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, buf, len - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

static inline long long dev_ll(const char *dev, const char *attr)
{
	char path[512];

	snprintf(path, sizeof(path), IB_SYSFS "/%s/%s", dev, attr);
	return pool_read_ll(path);
}

static inline int dev_listed(const char *dev)
{
	char path[512];
	struct stat st;

	snprintf(path, sizeof(path), IB_SYSFS "/%s", dev);
	return stat(path, &st) == 0;
}

static inline int link_add(const char *dev)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd),
		 "rdma link add %s type rxe netdev lo >/dev/null 2>&1", dev);
	return system(cmd);
}

static inline int link_del(const char *dev)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rdma link delete %s >/dev/null 2>&1", dev);
	return system(cmd);
}

/* Chunks the pool holds now. */
static inline long long pool_chunks(void)
{
	return pool_attr("total_bytes") / pool_attr("chunk_bytes");
}

/*
 * A device's objects, as the kernel's own `rdma resource show` counts
 * them; @mr leaves out the module's kernel MR cache (one MR per chunk of
 * the pool registered on the device, growing and trimming with the pool).
 */
struct rdma_res {
	long long ctx, pd, cq, qp, mr;
};

/* @dev's line of `rdma resource show` ("0: rxe0: pd 1 cq 2 ... mr 3 ..."). */
static inline int rdma_res_line(const char *dev, struct rdma_res *r)
{
	char line[512], key[72], name[16], *p;
	FILE *f = popen("rdma resource show 2>/dev/null", "re");
	int n, found = -1;
	long long v;

	memset(r, 0, sizeof(*r));
	if (!f)
		return -1;
	snprintf(key, sizeof(key), " %s:", dev);
	while (fgets(line, sizeof(line), f)) {
		p = strstr(line, key);
		if (!p)
			continue;
		found = 0;
		for (p += strlen(key); sscanf(p, " %15s %lld%n", name, &v, &n) == 2;
		     p += n) {
			if (!strcmp(name, "ctx"))
				r->ctx = v;
			else if (!strcmp(name, "pd"))
				r->pd = v;
			else if (!strcmp(name, "cq"))
				r->cq = v;
			else if (!strcmp(name, "qp"))
				r->qp = v;
			else if (!strcmp(name, "mr"))
				r->mr = v;
		}
	}
	pclose(f);
	return found;
}

/*
 * rdma_res_line() less the module's chunk MRs, read while the count of
 * chunks registered on @dev holds still; 0, or -1 if @dev is not listed
 * (by rdma or the module) or the pool would not hold still.
 */
static inline int rdma_res_of(const char *dev, struct rdma_res *r)
{
	long long before, after;
	int tries;

	for (tries = 0; tries < 20; tries++) {
		before = dev_ll(dev, "chunks");
		if (rdma_res_line(dev, r) || before < 0)
			return -1;
		after = dev_ll(dev, "chunks");
		if (before == after) {
			r->mr -= before;
			return 0;
		}
	}
	return -1;
}

/*
 * Wait up to @secs seconds for @dev to hold what it held at @base: the
 * same contexts, PDs, CQs, QPs and MRs besides the module's own. Polls by
 * the clock, as each poll runs the rdma tool (slow in a TCG guest).
 * Leaves the last reading in @now.
 */
static inline bool rdma_res_back(const char *dev, const struct rdma_res *base,
				 struct rdma_res *now, int secs)
{
	time_t end = time(NULL) + secs;

	for (;;) {
		if (!rdma_res_of(dev, now) && now->ctx == base->ctx &&
		    now->pd == base->pd && now->cq == base->cq &&
		    now->qp == base->qp && now->mr == base->mr)
			return true;
		if (time(NULL) >= end)
			return false;
		usleep(200 * 1000);
	}
}

/*
 * The end of a test whose processes held pool memory and rxe0 objects:
 * the pool back to @base (nothing more used or quarantined, no more
 * chunks than then), rxe0 holding what it held at @res0, and available
 * memory plus the pool within POOL_MEM_SLACK_MB of @avail0. EXPECTs, for
 * a test body (the waits are hang catchers).
 */
#define EXPECT_ALL_BACK(fd, base, res0, avail0) do {			\
	struct mrpool_query __q = { 0 };				\
	struct rdma_res __r;						\
	long long __avail;						\
									\
	EXPECT_TRUE(POOL_WAIT(pool_back_to(fd, base, &__q) &&		\
			      __q.total_bytes <= (base)->total_bytes,	\
			      120000))					\
		TH_LOG("used %llu quarantined %llu total %llu; before "	\
		       "%llu %llu %llu",				\
		       (unsigned long long)__q.used_bytes,		\
		       (unsigned long long)__q.quarantined_bytes,	\
		       (unsigned long long)__q.total_bytes,		\
		       (unsigned long long)(base)->used_bytes,		\
		       (unsigned long long)(base)->quarantined_bytes,	\
		       (unsigned long long)(base)->total_bytes);	\
	EXPECT_TRUE(rdma_res_back("rxe0", res0, &__r, 60))		\
		TH_LOG("rxe0 now: ctx %lld pd %lld cq %lld qp %lld mr %lld; " \
		       "before: %lld %lld %lld %lld %lld", __r.ctx, __r.pd, \
		       __r.cq, __r.qp, __r.mr, (res0)->ctx, (res0)->pd,	\
		       (res0)->cq, (res0)->qp, (res0)->mr);		\
	__avail = pool_mem_available() + (long long)__q.total_bytes;	\
	TH_LOG("available memory + pool: %lld MiB before, %lld MiB after", \
	       (avail0) >> 20, __avail >> 20);				\
	EXPECT_GE(__avail, (avail0) - ((long long)POOL_MEM_SLACK_MB << 20)); \
} while (0)

/*
 * Calls @fn with every device mrpool lists ready; returns how many calls
 * returned true, or -1 when the list cannot be read.
 */
static inline int ib_ready_scan(bool (*fn)(const char *dev, void *arg),
				void *arg)
{
	char state[32];
	struct dirent *e;
	int n = 0;
	DIR *dir;

	dir = opendir(IB_SYSFS);
	if (!dir)
		return -1;
	while ((e = readdir(dir))) {
		if (e->d_name[0] == '.')
			continue;
		dev_str(e->d_name, "state", state, sizeof(state));
		if (!strcmp(state, "ready") && fn(e->d_name, arg))
			n++;
	}
	closedir(dir);
	return n;
}

static inline bool ib_dev_other(const char *dev, void *except)
{
	return !except || strcmp(dev, except);
}

/* Devices mrpool lists ready, @except (NULL: none) left out; 0 if none. */
static inline int ib_ready_devices(const char *except)
{
	int n = ib_ready_scan(ib_dev_other, (void *)except);

	return n < 0 ? 0 : n;
}

/* The test kernel module beside the running binary, in kmod_rdma/. */
static inline int ktest_path(char *buf, size_t len)
{
	return pool_beside_self(buf, len, "kmod_rdma/" KTEST_NAME ".ko");
}

/*
 * Load the test module at @path with @params (it runs at load), echo its
 * TAP, count its results, unload it. A "lend pfn X" line sets *@lend_pfn
 * (NULL: not wanted). 0 or -errno.
 */
/* Load the test module with @params (an old copy goes first): 0 or -errno. */
static inline int ktest_load(const char *path, const char *params)
{
	int fd, ret;

	syscall(__NR_delete_module, KTEST_NAME, O_NONBLOCK);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = syscall(__NR_finit_module, fd, params, 0) ? -errno : 0;
	close(fd);
	return ret;
}

/*
 * The loaded test module's results so far, each echoed: ok and not ok
 * counted, the pfn of a "lend pfn" line in *lend_pfn if asked. 0 or -errno.
 */
static inline int ktest_tap(int *ok, int *not_ok, unsigned long *lend_pfn)
{
	char line[256], *p;
	FILE *f;

	*ok = *not_ok = 0;
	f = fopen(KTEST_TAP, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		printf("# ktest: %s", line);
		if (!strncmp(line, "ok ", 3))
			(*ok)++;
		else if (!strncmp(line, "not ok ", 7))
			(*not_ok)++;
		p = strstr(line, "lend pfn ");
		if (p && lend_pfn)
			*lend_pfn = strtoul(p + 9, NULL, 16);
	}
	fclose(f);
	fflush(stdout);
	return 0;
}

static inline int ktest_unload(void)
{
	return syscall(__NR_delete_module, KTEST_NAME, O_NONBLOCK) ? -errno : 0;
}

/* Load, read the results of what ran at load, unload. */
static inline int ktest_run(const char *path, const char *params, int *ok,
			    int *not_ok, unsigned long *lend_pfn)
{
	int ret, unload;

	*ok = *not_ok = 0;
	ret = ktest_load(path, params);
	if (ret)
		return ret;
	ret = ktest_tap(ok, not_ok, lend_pfn);
	unload = ktest_unload();
	return ret ? ret : unload;
}

/*
 * The fault-injecting tests' (ib_timeout_test, ib_recover_test) work
 * request timeout, and the module's defaults their teardown puts back.
 * The timeout is the module's default: long enough for another thread to
 * run queries, and for a real completion of a loaded TCG guest to arrive
 * in time (one that does not would fail the wrong work request).
 */
#define IB_FAULT_WR_TIMEOUT_MS	5000
#define IB_FAULT_RECOVER_MS	1000
#define IB_FAULT_RECOVER_MAX_MS	60000

/* Objects that must return to their count once a test's device is gone. */
struct ib_fault_census {
	long long chunks, pds, mrs, dma_maps, stuck, kbufs, lends, sessions;
};

static inline void ib_fault_census(struct ib_fault_census *c)
{
	c->chunks = pool_chunks();
	c->pds = ib_stat("pds");
	c->mrs = ib_stat("mrs");
	c->dma_maps = ib_stat("dma_maps");
	c->stuck = ib_stat("stuck_mrs");
	c->kbufs = ib_stat("kbufs");
	c->lends = ib_stat("lends");
	c->sessions = ib_stat("sessions");
}

/* What ib_fault_setup() changed, for ib_fault_teardown(). */
struct ib_fault_env {
	struct ib_fault_census base;	/* at setup */
	const char *dev;		/* the test's own rxe link */
	long long trim_sec;		/* idle_trim_sec to restore, or -1 */
	int kmsg;			/* the kernel log from setup on */
};

/*
 * The setup of a test that injects work request failures (debugfs
 * fail_ib_*) on a Soft-RoCE link of its own, @dev, so rxe0 stays ready:
 * checks what it needs (mrpool.ko, its debugfs knobs, the rdma tool, the
 * test module), deletes a @dev an earlier run left, turns the idle trim
 * off (chunk counts are compared across slow steps), sets wr_timeout_ms
 * and, unless negative, @recover_ms, takes the census, and opens the
 * kernel log from now on. A setup that fails gets no teardown: the trim
 * is put back before an ASSERT after it fails, and a caller whose own
 * setup fails later calls ib_fault_teardown() first.
 */
static inline void ib_fault_setup(struct __test_metadata *_metadata,
				  struct ib_fault_env *env, const char *dev,
				  int recover_ms)
{
	char state[32], path[PATH_MAX];
	int knob;

	env->dev = dev;
	env->trim_sec = -1;
	env->kmsg = -1;
	ASSERT_EQ(0, access(IB_SYSFS, F_OK)) TH_LOG("mrpool.ko is not loaded");
	ASSERT_EQ(0, access(POOL_DEBUGFS "/fail_ib_complete", F_OK))
		TH_LOG("no debugfs, or no fail_ib_complete knob");
	ASSERT_EQ(0, system("command -v rdma >/dev/null 2>&1"))
		TH_LOG("the rdma tool (iproute2) is missing");
	ASSERT_EQ(0, ktest_path(path, sizeof(path)))
		TH_LOG("%s.ko is not built", KTEST_NAME);
	dev_str("rxe0", "state", state, sizeof(state));
	ASSERT_STREQ("ready", state);
	if (dev_listed(dev))
		link_del(dev);
	env->trim_sec = pool_trim_off();
	ASSERT_LE(0, env->trim_sec);
	knob = pool_set_knob("wr_timeout_ms", IB_FAULT_WR_TIMEOUT_MS);
	if (!knob && recover_ms >= 0)
		knob = pool_set_knob("recover_ms", recover_ms);
	ib_fault_census(&env->base);
	if (knob || env->base.stuck < 0)
		pool_trim_restore(env->trim_sec);
	ASSERT_EQ(0, knob);
	ASSERT_LE(0, env->base.stuck);
	env->kmsg = kmsg_from_now();
}

/*
 * Undo ib_fault_setup() and whatever the test armed: every fail_ib_* knob
 * off, the module's timeout and recovery waits, the trim, the link.
 */
static inline void ib_fault_teardown(struct ib_fault_env *env)
{
	if (env->kmsg >= 0)
		close(env->kmsg);
	env->kmsg = -1;
	pool_set_knob("fail_ib_complete", 0);
	pool_set_knob("fail_ib_complete_after", 0);
	pool_set_knob("fail_ib_wc", 0);
	pool_set_knob("fail_ib_wc_after", 0);
	pool_set_knob("fail_ib_dereg", 0);
	pool_set_knob("wr_timeout_ms", IB_FAULT_WR_TIMEOUT_MS);
	pool_set_knob("recover_ms", IB_FAULT_RECOVER_MS);
	pool_set_knob("recover_max_ms", IB_FAULT_RECOVER_MAX_MS);
	pool_trim_restore(env->trim_sec);
	env->trim_sec = -1;
	if (dev_listed(env->dev))
		link_del(env->dev);
}

#endif /* IB_UTIL_H */
