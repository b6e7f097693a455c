// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The pool in a real container runtime (issue 33): Debian 12's podman
 * with crun starts containers from a local image built from this root
 * (selftests/container_image.sh: busybox, container_grab, mrpool-demo and
 * the verbs libraries; podman import, no registry; vfs storage on the
 * guest's tmpfs, --network host for rxe), with /dev/mrpool and the RDMA
 * nodes handed in through the CDI spec "mrpoolctl cdi" writes
 * (--device mrpool.io/pool=default|rdma). Each case asserts what the
 * kernel did:
 *
 *   quota_per_container       two containers under their own cgroups
 *                             (--cgroup-parent) with quotas set by
 *                             "mrpoolctl quota set" get exactly those, the
 *                             next chunk EDQUOT; podman kill + rm gives all
 *                             back (used bytes, quota and tenant rows)
 *   quota_over_memlock        --ulimit memlock=8 MiB and a 256 MiB quota:
 *                             256 MiB (quota_mode's default, quota, is the
 *                             bound instead of RLIMIT_MEMLOCK and the
 *                             share); rm -f gives it back; under
 *                             quota_mode both the same container stops at
 *                             8 MiB (ENOMEM)
 *   rootless_owner_share      rootless podman as nobody with a subuid range
 *                             (/etc/subuid, newuidmap): a container's root
 *                             and a subuid (--user 1000) get max_user_mb
 *                             between them, charged to nobody's tenant,
 *                             the next chunk EDQUOT
 *   rdma_transfer             mrpool-demo's RDMA WRITE and READ through
 *                             pool memory inside a container, every byte
 *                             checked (its own ibv_reg_mr still needs
 *                             memlock or CAP_IPC_LOCK under a quota);
 *                             with the default device alone (no uverbs
 *                             node) it finds no RDMA device; a spec naming
 *                             a node the host lacks is refused
 *
 * Slow under TCG (each podman run is seconds): its own VM run on 6.1
 * (selftests/vm-runs), which proves the runtime's side; the kernel paths
 * under it are pool_quota_test's and pool_tenant_test's on every kernel.
 *
 * VM kernels: one
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kselftest_harness.h"

#include "ctl_util.h"
#include "file_util.h"
#include "pool_util.h"
#include "sh_util.h"

#define WORK		"/tmp/mrpool-ctr"
#define IMAGE		"localhost/mrpool-ctr:1"
#define CG_ROOT		"/sys/fs/cgroup"
#define CDI_SPEC	"/run/cdi/mrpool.json"
#define NOBODY		65534
/* A hang catcher for one podman command, not a bound on its time. */
#define CMD_SECS	900
#define WAIT_MS		(600 * 1000)

/* Rootful podman: its storage on the guest's tmpfs. */
#define PODMAN	"podman --storage-driver vfs --root " WORK "/store " \
		"--runroot " WORK "/runroot "

/* Common to every podman of the test: rootful and rootless alike. */
static const char containers_conf[] =
	"[engine]\n"
	"cgroup_manager = \"cgroupfs\"\n"	/* no systemd in the guest */
	"events_logger = \"file\"\n"
	"runtime = \"crun\"\n";

static int write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -EIO;
}

/* WORK/LOG.log on stderr, as TAP comments. */
static void show(const char *log)
{
	char path[256], *text, *line, *save = NULL;

	snprintf(path, sizeof(path), WORK "/%s.log", log);
	text = file_slurp(path);
	for (line = text ? strtok_r(text, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save))
		fprintf(stderr, "# %s: %s\n", log, line);
	free(text);
}

/*
 * sh -c CMD (printf-style), output in WORK/LOG.log; its exit status, -1
 * when it hung. On a failure the log is printed.
 */
static int __attribute__((format(printf, 2, 3)))
run(const char *log, const char *fmt, ...)
{
	char cmd[4096], path[256];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	snprintf(path, sizeof(path), WORK "/%s.log", log);
	st = sh_reap(sh_spawn(cmd, path), CMD_SECS);
	if (st) {
		fprintf(stderr, "# %s: exit %d: %s\n", log, st, cmd);
		show(log);
	}
	return st;
}

/*
 * podman ARGS as nobody (rootless), in a mount namespace where
 * /etc/subuid and /etc/subgid give nobody 100000-165535 (the guest's
 * root is read-only). RLIMIT_MEMLOCK unlimited: the share is what the
 * case bounds, not nobody's 8 MiB.
 */
#define ROOTLESS(log, args, ...)					\
	run(log, "ulimit -l unlimited && exec unshare -m sh -c '"	\
	    "mount --bind " WORK "/subid /etc/subuid && "		\
	    "mount --bind " WORK "/subid /etc/subgid && "		\
	    "exec setpriv --reuid=nobody --regid=nogroup --clear-groups " \
	    "env HOME=" WORK "/nobody XDG_RUNTIME_DIR=" WORK "/nobody/run " \
	    "podman --storage-driver vfs " args "'", ##__VA_ARGS__)

/* The image, the storage, the CDI spec: once per guest boot. */
static int ctr_prepare(struct __test_metadata *_metadata)
{
	char out[256];

	if (access(CG_ROOT "/cgroup.controllers", F_OK) &&
	    mount("cgroup2", CG_ROOT, "cgroup2", 0, NULL))
		return -errno;
	setenv("CONTAINERS_CONF", WORK "/containers.conf", 1);
	setenv("TMPDIR", "/tmp", 1);	/* /var/tmp is read-only here */
	if (!access(WORK "/ready", F_OK))
		return 0;
	mkdir(WORK, 0755);
	if (write_text(WORK "/containers.conf", containers_conf) ||
	    write_text(WORK "/subid", "nobody:100000:65536\n"))
		return -EIO;
	/* container_grab's lines, from any container's users */
	if ((mkdir(WORK "/out", 0777) && errno != EEXIST) ||
	    chmod(WORK "/out", 0777))
		return -errno;
	/*
	 * The spec, with rdma, as mrpoolctl cdi --update writes it where
	 * the operator chose MRPOOL_CDI_RDMA=yes (cdi_udev_test runs the
	 * package's udev rule; the guest's /etc is read-only here).
	 */
	mkdir("/run/cdi", 0755);
	if (ctl_run("cdi --output " CDI_SPEC, true, out, sizeof(out))) {
		TH_LOG("mrpoolctl cdi: %s", out);
		return -EIO;
	}
	if (run("image", "selftests/container_image.sh " WORK "/image.tar") ||
	    run("import", PODMAN "import " WORK "/image.tar " IMAGE))
		return -EIO;
	/* nobody's own store, under a home of its own */
	if (run("nobody", "mkdir -p " WORK "/nobody/run && chmod 700 " WORK
		"/nobody/run && chown -R nobody:nogroup " WORK "/nobody && "
		"chmod 644 " WORK "/image.tar") ||
	    ROOTLESS("import-nobody", "import " WORK "/image.tar " IMAGE))
		return -EIO;
	return write_text(WORK "/ready", "");
}

/* Set by a case that starts rootless containers: its teardown removes them. */
static bool rootless_used;

/*
 * What container_grab wrote in container @name: its line in WORK/out/NAME
 * (the folder bind-mounted at /out, writable by a rootless container's
 * users too).
 */
struct grab {
	unsigned int uid;
	unsigned long long got;
	char err[16];
	long long memlock;
};

static bool grab_read(const char *name, struct grab *g)
{
	char path[256], *text;
	bool ok;

	snprintf(path, sizeof(path), WORK "/out/%s", name);
	text = file_slurp(path);
	ok = text && sscanf(text, "uid %u got %llu errno %15s memlock %lld",
			    &g->uid, &g->got, g->err, &g->memlock) == 4;
	free(text);
	return ok;
}

/*
 * Wait (bounded) for the line of detached container @name (rootless:
 * nobody's); when it never comes, what podman knows of the container.
 */
static bool grab_wait(const char *name, bool rootless, struct grab *g)
{
	if (POOL_WAIT(grab_read(name, g), WAIT_MS))
		return true;
	if (rootless) {
		ROOTLESS("why-ps", "ps -a");
		ROOTLESS("why-logs", "logs %s", name);
	} else {
		run("why-ps", PODMAN "ps -a");
		run("why-logs", PODMAN "logs %s", name);
	}
	run("why-pool", "cat " POOL_DEBUGFS "/clients " POOL_DEBUGFS "/users");
	show("why-ps");
	show("why-logs");
	show("why-pool");
	return false;
}

/* The arguments that run container_grab as NAME (a run's last words). */
#define GRAB(name, max)	"-v " WORK "/out:/out " IMAGE \
			" /bin/container_grab hold " #max " /out/" name

/* debugfs quotas: bytes charged to the quota of @path (from the root). */
static long long quota_bytes(const char *path)
{
	char line[512], p[256], limit[32];
	unsigned long long id, bytes;
	long long ret = -1;
	FILE *f;

	f = fopen(POOL_DEBUGFS "/quotas", "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%255s %llu %31s %llu", p, &id, limit,
			   &bytes) == 4 && !strcmp(p, path))
			ret = (long long)bytes;
	fclose(f);
	return ret;
}

/* A tenant's bytes: its debugfs users row, 0 when it has none. */
static long long tenant_bytes(unsigned int uid)
{
	long long v = pool_user_row(uid, POOL_USER_BYTES);

	return v < 0 ? 0 : v;
}

/*
 * Is a process of container_grab (debugfs clients: the pool's users,
 * with their pids as this namespace sees them) in a cgroup below @cg?
 */
static bool grab_in_cgroup(const char *cg)
{
	char line[512], comm[64], path[64], *text;
	bool found = false;
	int pid;
	FILE *f;

	f = fopen(POOL_DEBUGFS "/clients", "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%d %63s", &pid, comm) != 2 ||
		    strcmp(comm, "container_grab"))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
		text = file_slurp(path);
		found = text && !strncmp(text, "0::", 3) &&
			!strncmp(text + 3, cg, strlen(cg)) &&
			text[3 + strlen(cg)] == '/';
		free(text);
	}
	fclose(f);
	return found;
}

/* The cgroups the cases make, each with a quota while it runs. */
static const char *const ctr_cgroups[] = {
	"mrpool-ctr-a", "mrpool-ctr-b", "mrpool-ctr-c", "mrpool-ctr-d",
};

FIXTURE(ctr) {
	int fd;
	struct mrpool_query q0;
	uint64_t chunk;
	long long used0;
	long long max_mb, user_mb;
	char mode[32];
};

FIXTURE_SETUP(ctr)
{
	POOL_SETUP_OPEN();
	self->chunk = self->q0.chunk_size;
	self->max_mb = pool_param("max_mb");
	self->user_mb = pool_param("max_user_mb");
	pool_param_str("quota_mode", self->mode, sizeof(self->mode));
	if (!self->mode[0])
		POOL_SETUP_SKIP("mrpool.ko has no quota_mode");
	if (access("/usr/bin/podman", X_OK) || access("/usr/bin/crun", X_OK))
		POOL_SETUP_SKIP("no podman or crun: tools/deps.sh installs them");
	ASSERT_EQ(0, ctr_prepare(_metadata));
	ASSERT_EQ(0, run("out", "rm -f " WORK "/out/*"));
	self->used0 = pool_attr("used_bytes");
}

/*
 * rmdir @path and the cgroups below it, deepest first (podman's
 * libpod-ID, once its container is gone); -errno of the last that
 * failed.
 */
static int cg_remove(const char *path)
{
	char sub[512];
	struct dirent *de;
	int ret = 0;
	DIR *d;

	d = opendir(path);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
		ret = cg_remove(sub) ?: ret;
	}
	closedir(d);
	if (rmdir(path))
		ret = -errno;
	return ret;
}

/* mkdir CG_ROOT/@name and give it a quota of @bytes (mrpoolctl). */
static int cg_quota(const char *name, unsigned long long bytes)
{
	char path[128], args[256], out[256];

	snprintf(path, sizeof(path), CG_ROOT "/%s", name);
	if (mkdir(path, 0755) && errno != EEXIST)
		return -errno;
	snprintf(args, sizeof(args), "quota set %s %llu", path, bytes);
	return ctl_run(args, true, out, sizeof(out)) ? -EIO : 0;
}

static void cg_unquota(const char *name)
{
	char args[128], out[256];

	snprintf(args, sizeof(args), "quota del /%.100s", name);
	ctl_run(args, true, out, sizeof(out));
}

/* Does debugfs quotas still list a quota of one of ctr_cgroups? */
static bool ctr_quota_listed(void)
{
	char line[512];
	bool found = false;
	FILE *f;

	f = fopen(POOL_DEBUGFS "/quotas", "re");
	if (!f)
		return true;	/* unreadable: nothing shown to be gone */
	while (!found && fgets(line, sizeof(line), f))
		found = !strncmp(line, "/mrpool-ctr-", strlen("/mrpool-ctr-"));
	fclose(f);
	return found;
}

/* debugfs quotas on stderr, as TAP comments. */
static void show_quotas(void)
{
	char *text = file_slurp(POOL_DEBUGFS "/quotas"), *line, *save = NULL;

	for (line = text ? strtok_r(text, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save))
		fprintf(stderr, "# quotas: %s\n", line);
	free(text);
}

FIXTURE_TEARDOWN(ctr)
{
	char path[128];
	int err;

	if (self->fd < 0)
		return;
	/*
	 * What a case left, however it ended (a failed ASSERT comes here
	 * too): its containers (conmon left the test's session), then the
	 * quotas (deleted while their cgroups still exist; mrpoolctl says
	 * nothing is there for those never set), then the cgroups, their
	 * processes gone with the containers. Without this a failed case
	 * left a quota for the rest of the boot, and every case its cgroup.
	 * Then each is shown gone, so a case checks what it left whichever
	 * cases ran with it (a newer harness runs one alone, -t): no quota
	 * of theirs listed once the memory is back (bounded wait), none of
	 * their cgroups, no spec of a missing node.
	 */
	run("teardown", PODMAN "rm -f -a");
	if (rootless_used)
		ROOTLESS("teardown-nobody", "rm -f -a");
	for (size_t i = 0; i < ARRAY_SIZE(ctr_cgroups); i++) {
		cg_unquota(ctr_cgroups[i]);
		snprintf(path, sizeof(path), CG_ROOT "/%s", ctr_cgroups[i]);
		err = cg_remove(path);
		if (err)
			TH_LOG("rmdir %s: %s", path, strerror(-err));
		EXPECT_NE(0, access(path, F_OK)) TH_LOG("%s is left", path);
	}
	unlink("/run/cdi/mrpool-gone.json");
	EXPECT_NE(0, access("/run/cdi/mrpool-gone.json", F_OK));
	pool_write_str(POOL_PARAMS "/quota_mode", self->mode);
	pool_set_param("max_mb", self->max_mb);
	pool_set_param("max_user_mb", self->user_mb);
	EXPECT_TRUE(POOL_WAIT(!ctr_quota_listed(), WAIT_MS))
		show_quotas();
	close(self->fd);
}

/*
 * Two containers, each under its own cgroup with a pool quota, get
 * exactly their quotas (the next chunk EDQUOT); podman kill and rm give
 * everything back: pool used bytes, both quotas' and root's rows.
 */
TEST_F_TIMEOUT(ctr, quota_per_container, 3600)
{
	const unsigned long long qa = 4 * self->chunk, qb = 6 * self->chunk;
	long long root0 = tenant_bytes(0);
	struct grab a, b;

	POOL_SETUP_SKIPPED();
	ASSERT_EQ(0, cg_quota("mrpool-ctr-a", qa));
	ASSERT_EQ(0, cg_quota("mrpool-ctr-b", qb));
	ASSERT_EQ(0, run("run-a", PODMAN "run -d --name ca --network host "
			 "--cgroup-parent /mrpool-ctr-a "
			 "--device mrpool.io/pool=default " GRAB("ca", -1)));
	ASSERT_EQ(0, run("run-b", PODMAN "run -d --name cb --network host "
			 "--cgroup-parent /mrpool-ctr-b "
			 "--device mrpool.io/pool=default " GRAB("cb", -1)));
	ASSERT_TRUE(grab_wait("ca", false, &a));
	ASSERT_TRUE(grab_wait("cb", false, &b));
	TH_LOG("a: uid %u got %llu %s; b: uid %u got %llu %s", a.uid, a.got,
	       a.err, b.uid, b.got, b.err);
	/* each under its --cgroup-parent (libpod-ID below it) */
	EXPECT_TRUE(grab_in_cgroup("/mrpool-ctr-a"));
	EXPECT_TRUE(grab_in_cgroup("/mrpool-ctr-b"));
	EXPECT_EQ(qa, a.got);
	EXPECT_STREQ("EDQUOT", a.err);
	EXPECT_EQ(qb, b.got);
	EXPECT_STREQ("EDQUOT", b.err);
	EXPECT_EQ((long long)qa, quota_bytes("/mrpool-ctr-a"));
	EXPECT_EQ((long long)qb, quota_bytes("/mrpool-ctr-b"));
	EXPECT_EQ(root0 + (long long)(qa + qb), tenant_bytes(0));
	EXPECT_EQ(self->used0 + (long long)(qa + qb), pool_attr("used_bytes"));

	/* Killed, then removed: everything back (bounded wait). */
	EXPECT_EQ(0, run("kill", PODMAN "kill ca cb"));
	EXPECT_EQ(0, run("rm", PODMAN "rm ca cb"));
	EXPECT_TRUE(POOL_WAIT(pool_attr("used_bytes") == self->used0 &&
			      quota_bytes("/mrpool-ctr-a") == 0 &&
			      quota_bytes("/mrpool-ctr-b") == 0 &&
			      tenant_bytes(0) == root0, WAIT_MS))
		TH_LOG("used %lld (was %lld), quotas %lld %lld, root %lld (was %lld)",
		       pool_attr("used_bytes"), self->used0,
		       quota_bytes("/mrpool-ctr-a"), quota_bytes("/mrpool-ctr-b"),
		       tenant_bytes(0), root0);
}

/*
 * RLIMIT_MEMLOCK 8 MiB (--ulimit) and a 256 MiB quota: the container
 * gets 256 MiB, quota_mode's default (quota) making the quota the bound
 * instead of memlock and root's share (half of max_mb, less than 256
 * MiB here); rm -f gives it back. quota_mode both, the memlock limit
 * applying too, stops the same container at 8 MiB: the limit was live.
 */
TEST_F_TIMEOUT(ctr, quota_over_memlock, 3600)
{
	const unsigned long long quota = 256 * MIB;
	struct grab g;

	POOL_SETUP_SKIPPED();
	ASSERT_STREQ("quota", self->mode) TH_LOG("quota_mode's default");
	/* room for the quota and a chunk over it, the share below it */
	ASSERT_EQ(0, pool_set_param("max_mb", quota / MIB + 64));
	ASSERT_EQ(0, pool_set_param("max_user_mb", 0));
	ASSERT_EQ(0, cg_quota("mrpool-ctr-c", quota));
	ASSERT_EQ(0, run("run-c", PODMAN "run -d --name cc --network host "
			 "--ulimit memlock=8388608:8388608 "
			 "--cgroup-parent /mrpool-ctr-c "
			 "--device mrpool.io/pool=default " GRAB("cc", -1)));
	ASSERT_TRUE(grab_wait("cc", false, &g));
	TH_LOG("uid %u got %llu %s memlock %lld", g.uid, g.got, g.err, g.memlock);
	EXPECT_EQ(8388608, g.memlock);
	EXPECT_EQ(quota, g.got);
	EXPECT_STREQ("EDQUOT", g.err);
	EXPECT_EQ((long long)quota, quota_bytes("/mrpool-ctr-c"));

	EXPECT_EQ(0, run("rm", PODMAN "rm -f cc"));
	EXPECT_TRUE(POOL_WAIT(pool_attr("used_bytes") == self->used0 &&
			      quota_bytes("/mrpool-ctr-c") == 0, WAIT_MS))
		TH_LOG("used %lld (was %lld), quota %lld",
		       pool_attr("used_bytes"), self->used0,
		       quota_bytes("/mrpool-ctr-c"));

	/* quota_mode both: the same container stops at its 8 MiB memlock */
	ASSERT_EQ(0, pool_write_str(POOL_PARAMS "/quota_mode", "both"));
	EXPECT_EQ(0, run("run-c2", PODMAN "run -d --name cc2 --network host "
			 "--ulimit memlock=8388608:8388608 "
			 "--cgroup-parent /mrpool-ctr-c "
			 "--device mrpool.io/pool=default " GRAB("cc2", -1)));
	EXPECT_TRUE(grab_wait("cc2", false, &g));
	pool_write_str(POOL_PARAMS "/quota_mode", self->mode);
	TH_LOG("both: got %llu %s", g.got, g.err);
	EXPECT_EQ(8388608, g.got);
	EXPECT_STREQ("ENOMEM", g.err);
	EXPECT_EQ(0, run("rm2", PODMAN "rm -f cc2"));
	EXPECT_TRUE(POOL_WAIT(pool_attr("used_bytes") == self->used0, WAIT_MS));
}

/*
 * Rootless podman as nobody, /etc/subuid giving it 100000-165535 (so its
 * containers have a user namespace of nobody's, made by newuidmap): a
 * container's root (nobody outside) and a container's uid 1000 (100999
 * outside) together get max_user_mb, all charged to nobody, the owner of
 * that namespace, and not one chunk more (EDQUOT), though RLIMIT_MEMLOCK
 * is unlimited; rm -f gives it back.
 */
TEST_F_TIMEOUT(ctr, rootless_owner_share, 3600)
{
	const unsigned long long share = 6 * self->chunk;
	struct grab r, u;

	POOL_SETUP_SKIPPED();
	ASSERT_EQ(0, pool_set_param("max_user_mb", share / MIB));
	ASSERT_EQ(0, tenant_bytes(NOBODY));
	rootless_used = true;
	/* the container's root takes 4 chunks, its uid 1000 what is left */
	ASSERT_EQ(0, ROOTLESS("run-r", "run -d --name rr --network host "
			      "--cgroups disabled "
			      "--device mrpool.io/pool=default " GRAB("rr", 4)));
	ASSERT_TRUE(grab_wait("rr", true, &r));
	ASSERT_EQ(0, ROOTLESS("run-u", "run -d --name ru --network host "
			      "--cgroups disabled --user 1000 "
			      "--device mrpool.io/pool=default " GRAB("ru", -1)));
	ASSERT_TRUE(grab_wait("ru", true, &u));
	TH_LOG("root: uid %u got %llu %s memlock %lld; uid %u got %llu %s",
	       r.uid, r.got, r.err, r.memlock, u.uid, u.got, u.err);
	EXPECT_EQ(0, r.uid);
	EXPECT_EQ(4 * self->chunk, r.got);
	EXPECT_STREQ("none", r.err);
	EXPECT_EQ(1000, u.uid);
	EXPECT_EQ(share - 4 * self->chunk, u.got);
	EXPECT_STREQ("EDQUOT", u.err);
	EXPECT_EQ((long long)share, tenant_bytes(NOBODY));
	EXPECT_EQ(0, tenant_bytes(100999));	/* uid 1000's outside */

	EXPECT_EQ(0, ROOTLESS("rm-nobody", "rm -f rr ru"));
	EXPECT_TRUE(POOL_WAIT(pool_attr("used_bytes") == self->used0 &&
			      tenant_bytes(NOBODY) == 0, WAIT_MS))
		TH_LOG("used %lld (was %lld), nobody %lld",
		       pool_attr("used_bytes"), self->used0,
		       tenant_bytes(NOBODY));
}

/*
 * mrpool-demo inside a container with the rdma device, under a cgroup
 * with a quota: pool slices and libmrpool buffers registered on rxe0,
 * RDMA WRITE and READ across a chunk boundary, every byte checked (exit 0
 * only then). The quota stands in for RLIMIT_MEMLOCK for pool chunks
 * only: the program's own ibv_reg_mr of them is pinned memory counted
 * against it (ib_umem_get), so with podman's default 8 MiB and without
 * CAP_IPC_LOCK the demo's third 4 MiB registration fails ENOMEM;
 * --cap-add IPC_LOCK lets it through. With the default device alone the
 * container has /dev/mrpool but no uverbs node, and the demo finds no
 * RDMA device. A spec naming a node the host lacks makes podman refuse
 * the container (why mrpoolctl cdi is run again after an RDMA device
 * goes).
 */
TEST_F_TIMEOUT(ctr, rdma_transfer, 3600)
{
	long long allocs = pool_read_ll(POOL_SYSFS "/stats/allocs");
	char *text;
	int lines = 0;

	POOL_SETUP_SKIPPED();
	ASSERT_EQ(0, cg_quota("mrpool-ctr-d", 64 * MIB));
	EXPECT_NE(0, run("demo-memlock", PODMAN "run --rm --network host "
			 "--cgroup-parent /mrpool-ctr-d "
			 "--device mrpool.io/pool=rdma " IMAGE
			 " /bin/mrpool-demo -d rxe0 -n 100"));
	text = file_slurp(WORK "/demo-memlock.log");
	EXPECT_TRUE(text && strstr(text, "mrpool-demo: ibv_reg_mr") &&
		    strstr(text, "Cannot allocate memory"))
		TH_LOG("%s", text ? text : "");
	free(text);

	EXPECT_EQ(0, run("demo", PODMAN "run --rm --network host "
			 "--cgroup-parent /mrpool-ctr-d --cap-add IPC_LOCK "
			 "--device mrpool.io/pool=rdma " IMAGE
			 " /bin/mrpool-demo -d rxe0 -n 100"));
	text = file_slurp(WORK "/demo.log");
	ASSERT_NE(NULL, text);
	for (char *p = text; (p = strstr(p, "\n  rdma    ")); p++)
		lines++;
	EXPECT_LE(4, lines) TH_LOG("%s", text);	/* WRITE, READ; both flows */
	EXPECT_EQ(NULL, strstr(text, "MISMATCH"));
	free(text);
	EXPECT_LT(allocs, pool_read_ll(POOL_SYSFS "/stats/allocs"));
	EXPECT_TRUE(POOL_WAIT(pool_attr("used_bytes") == self->used0 &&
			      quota_bytes("/mrpool-ctr-d") == 0, WAIT_MS));

	EXPECT_NE(0, run("demo-default", PODMAN "run --rm --network host "
			 "--device mrpool.io/pool=default " IMAGE
			 " /bin/mrpool-demo -d rxe0 -n 100"));
	text = file_slurp(WORK "/demo-default.log");
	EXPECT_TRUE(text && strstr(text, "RDMA device rxe0"))
		TH_LOG("%s", text ? text : "");
	free(text);

	/*
	 * A spec naming a node the host lacks (an RDMA device gone since
	 * mrpoolctl cdi ran): podman refuses the container.
	 */
	ASSERT_EQ(0, write_text("/run/cdi/mrpool-gone.json",
				"{\"cdiVersion\": \"0.3.0\", \"kind\": \"mrpool.io/gone\", "
				"\"devices\": [{\"name\": \"rdma\", \"containerEdits\": "
				"{\"deviceNodes\": [{\"path\": \"/dev/infiniband/uverbs99\"}]}}]}\n"));
	EXPECT_NE(0, run("gone", PODMAN "run --rm --network host "
			 "--device mrpool.io/gone=rdma " IMAGE " /bin/busybox true"));
	unlink("/run/cdi/mrpool-gone.json");
	text = file_slurp(WORK "/gone.log");
	EXPECT_TRUE(text && strstr(text, "uverbs99")) TH_LOG("%s", text ? text : "");
	free(text);
}

TEST_HARNESS_MAIN
