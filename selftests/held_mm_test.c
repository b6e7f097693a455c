// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Another user holds a pool owner's mm: nothing of the pool stays with it
 * (issue 33, review kmod-2026-12-04: "another user keeps your charge
 * alive", its second route).
 *
 * Any local user can keep any process's mm from being torn down: a read
 * of /proc/<pid>/cmdline holds it (get_task_mm()) while it copies to the
 * reader's buffer, and a buffer that is a page of a FUSE file whose READ
 * its own server never answers makes that copy wait as long as the
 * reader likes. The owner then exits and is reaped, but its VMAs stay.
 * What the pool must not do is keep their slices, or the owner's charge,
 * for them: the owner's /dev/mrpool file is released by exit_files(),
 * after exit_mm() let go of the held mm, and that release revokes every
 * slice (revoke.c): the held VMAs are zapped through the client's map
 * file and their chunks go back at once (mapfile.c: VMAs hold the map
 * file, never the device file, so its release is not held up).
 *
 * The holder here is as unprivileged as on a host: nobody, in a user
 * namespace of its own (FUSE mounts are allowed there), with /dev/fuse
 * 0666 as Debian's udev makes it. The second test holds the mm of a fork
 * child with a copy of a FORK_COPY slice: memory of that mm (its RSS and
 * its pinned_vm, forkcopy.c), no count of its user's.
 *
 * VM kernels: all (exit_mm(), exit_files() and the zap are mm's, per kernel)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/close_range.h>
#include <linux/fuse.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop
#pragma GCC diagnostic ignored "-Wclobbered"

#include "pool_util.h"

#define NOBODY		65534
#define OWNER		65531	/* the owner whose mm is held */
#define NR_CHUNKS	2
#define FUSE_DEV	"/dev/fuse"
#define FILE_INO	2	/* the one file of the holder's FUSE mount */
#define WAIT_MS		(120 * 1000)

/* The holder's setup steps, reported when one fails. */
enum held_step {
	HELD_OK, HELD_UID, HELD_USERNS, HELD_MAPS, HELD_MOUNTNS, HELD_DIR,
	HELD_FUSE_OPEN, HELD_MOUNT, HELD_FORK, HELD_OPEN, HELD_MMAP,
	HELD_CMDLINE,
};

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return -1;
	if (write(fd, s, strlen(s)) != (ssize_t)strlen(s))
		ret = -1;
	close(fd);
	return ret;
}

static void become(unsigned int uid)
{
	if (setgroups(0, NULL) || setgid(uid) || setuid(uid))
		_exit(90);
}

static void put_int(int fd, int v)
{
	if (write(fd, &v, sizeof(v)) != sizeof(v))
		_exit(91);
}

/* An int from @fd within @ms, or -1 (EOF, timeout). */
static int get_int(int fd, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int v;

	if (poll(&pfd, 1, ms) != 1 || read(fd, &v, sizeof(v)) != sizeof(v))
		return -1;
	return v;
}

/* Answer the FUSE request @in with @len bytes of @arg, or with -@err. */
static void fuse_reply(int dev, const struct fuse_in_header *in, int err,
		       const void *arg, size_t len)
{
	char buf[sizeof(struct fuse_out_header) + 256];
	struct fuse_out_header *out = (void *)buf;

	if (len > sizeof(buf) - sizeof(*out))
		_exit(92);
	out->unique = in->unique;
	out->error = -err;
	out->len = sizeof(*out) + (err ? 0 : len);
	if (!err)
		memcpy(buf + sizeof(*out), arg, len);
	if (write(dev, buf, out->len) != (ssize_t)out->len && errno != ENOENT)
		_exit(93);
}

static void fuse_fill_attr(struct fuse_attr *attr, uint64_t ino)
{
	memset(attr, 0, sizeof(*attr));
	attr->ino = ino;
	attr->mode = ino == FUSE_ROOT_ID ? S_IFDIR | 0755 : S_IFREG | 0644;
	attr->nlink = ino == FUSE_ROOT_ID ? 2 : 1;
	attr->size = ino == FUSE_ROOT_ID ? 0 : 4096;
	attr->blocks = attr->size / 512;
	attr->blksize = 4096;
}

/*
 * The holder's FUSE server: a root directory with one 4 KiB file, "f",
 * whose every READ is left unanswered; the first is reported on @held.
 * Runs until killed (then the kernel aborts the connection).
 */
static void fuse_serve(int dev, int held)
{
	static char req[FUSE_MIN_READ_BUFFER + 128 * 1024];
	const struct fuse_in_header *in = (void *)req;
	const void *arg = req + sizeof(*in);
	bool said = false;
	ssize_t n;

	for (;;) {
		n = read(dev, req, sizeof(req));
		if (n < 0 && (errno == EINTR || errno == ENOENT))
			continue;
		if (n < (ssize_t)sizeof(*in))
			_exit(94);
		switch (in->opcode) {
		case FUSE_INIT: {
			const struct fuse_init_in *ii = arg;
			struct fuse_init_out io = {
				.major = FUSE_KERNEL_VERSION,
				.minor = ii->minor < FUSE_KERNEL_MINOR_VERSION ?
					 ii->minor : FUSE_KERNEL_MINOR_VERSION,
				.max_readahead = ii->max_readahead,
				.max_write = 4096,
			};

			fuse_reply(dev, in, 0, &io, sizeof(io));
			break;
		}
		case FUSE_LOOKUP: {
			struct fuse_entry_out eo = { .nodeid = FILE_INO };

			if (in->nodeid != FUSE_ROOT_ID || strcmp(arg, "f")) {
				fuse_reply(dev, in, ENOENT, NULL, 0);
				break;
			}
			eo.generation = 1;
			eo.entry_valid = 3600;
			eo.attr_valid = 3600;
			fuse_fill_attr(&eo.attr, FILE_INO);
			fuse_reply(dev, in, 0, &eo, sizeof(eo));
			break;
		}
		case FUSE_GETATTR: {
			struct fuse_attr_out ao = { .attr_valid = 3600 };

			fuse_fill_attr(&ao.attr, in->nodeid);
			fuse_reply(dev, in, 0, &ao, sizeof(ao));
			break;
		}
		case FUSE_OPEN: {
			struct fuse_open_out oo = { .fh = 1 };

			fuse_reply(dev, in, 0, &oo, sizeof(oo));
			break;
		}
		case FUSE_READ:
			/* Never answered: the reader's copy waits. */
			if (!said)
				put_int(held, HELD_OK);
			said = true;
			break;
		case FUSE_FORGET:
		case FUSE_BATCH_FORGET:
		case FUSE_INTERRUPT:
			break;
		default:
			fuse_reply(dev, in, ENOSYS, NULL, 0);
		}
	}
}

struct holder {
	pid_t pid;	/* the reader, which also made the mount */
	pid_t server;	/* its FUSE server */
	int held;	/* HELD_OK once the read waits, else the failed step */
	int done;	/* the read's result, once it returned */
	char dir[32];	/* the FUSE mount's point, nobody's, "" when none */
	char made[32];	/* the last dir made, kept for the teardown's check */
};

/*
 * The holder, as nobody in a user and mount namespace of its own: mounts
 * its FUSE file on @dir, forks the server, maps the file's page privately and
 * writable, and reads /proc/@victim/cmdline into it: the copy faults the
 * page in, FUSE asks the server, and the read waits with @victim's mm
 * held. Reports the server's pid, then HELD_OK (from the server) or the
 * step that failed on @held; the read's return value and errno on @done.
 */
static void holder_main(pid_t victim, const char *dir, int held, int done)
{
	char path[64], opts[128];
	pid_t server;
	void *page;
	int dev, f, cmd;
	ssize_t n;

	become(NOBODY);
	/* the uid change made the task undumpable: /proc/self is root's */
	if (prctl(PR_SET_DUMPABLE, 1))
		goto fail_uid;
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS)) {
		put_int(held, HELD_USERNS);
		_exit(1);
	}
	snprintf(path, sizeof(path), "0 %u 1\n", NOBODY);
	if (write_file("/proc/self/setgroups", "deny") ||
	    write_file("/proc/self/uid_map", path) ||
	    write_file("/proc/self/gid_map", path)) {
		put_int(held, HELD_MAPS);
		_exit(1);
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) {
		put_int(held, HELD_MOUNTNS);
		_exit(1);
	}
	dev = open(FUSE_DEV, O_RDWR | O_CLOEXEC);
	if (dev < 0) {
		put_int(held, HELD_FUSE_OPEN);
		_exit(1);
	}
	snprintf(opts, sizeof(opts),
		 "fd=%d,rootmode=40000,user_id=0,group_id=0", dev);
	if (mount("mrpool-held", dir, "fuse", MS_NOSUID | MS_NODEV, opts)) {
		put_int(held, HELD_MOUNT);
		_exit(1);
	}
	server = fork();
	if (server < 0) {
		put_int(held, HELD_FORK);
		_exit(1);
	}
	if (!server)
		fuse_serve(dev, held);
	close(dev);
	put_int(held, server);

	snprintf(path, sizeof(path), "%s/f", dir);
	f = open(path, O_RDONLY | O_CLOEXEC);
	if (f < 0) {
		put_int(held, HELD_OPEN);
		goto out;
	}
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, f, 0);
	if (page == MAP_FAILED) {
		put_int(held, HELD_MMAP);
		goto out;
	}
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)victim);
	cmd = open(path, O_RDONLY | O_CLOEXEC);
	if (cmd < 0) {
		put_int(held, HELD_CMDLINE);
		goto out;
	}
	n = read(cmd, page, 4096);
	put_int(done, n < 0 ? -errno : (int)n);
out:
	/* The server goes once the test kills it; reap it. */
	waitpid(server, NULL, 0);
	_exit(0);
fail_uid:
	put_int(held, HELD_UID);
	_exit(1);
}

/*
 * Start the holder of @victim's mm, its mount point made here (nobody's)
 * so that holder_stop() removes it whatever became of the holder. Return:
 * HELD_OK once the read waits on the held mm, else the step that failed
 * (or -1: nothing heard).
 */
static int holder_start(struct holder *h, pid_t victim)
{
	int held[2], done[2], v;

	h->pid = h->server = -1;
	h->held = h->done = -1;
	snprintf(h->dir, sizeof(h->dir), "/tmp/mrpool-held.XXXXXX");
	if (!mkdtemp(h->dir)) {
		h->dir[0] = '\0';
		return HELD_DIR;
	}
	memcpy(h->made, h->dir, sizeof(h->made));
	if (chown(h->dir, NOBODY, NOBODY))
		return HELD_DIR;
	if (pipe2(held, O_CLOEXEC) || pipe2(done, O_CLOEXEC))
		return -1;
	h->pid = fork();
	if (h->pid < 0)
		return -1;
	if (!h->pid) {
		/*
		 * Nothing of the test's but its own ends: a pipe end of
		 * the owner's kept here would hold off the EOF it exits on.
		 */
		int hi = fcntl(held[1], F_DUPFD, 10);
		int di = fcntl(done[1], F_DUPFD, 10);

		if (hi < 0 || di < 0 || dup2(hi, 3) != 3 ||
		    dup2(di, 4) != 4 || close_range(5, ~0U, 0))
			_exit(95);
		holder_main(victim, h->dir, 3, 4);
	}
	close(held[1]);
	close(done[1]);
	h->held = held[0];
	h->done = done[0];
	/* The server's pid (a pid is > HELD_CMDLINE), or a failed step. */
	v = get_int(h->held, WAIT_MS);
	if (v <= HELD_CMDLINE)
		return v;
	h->server = v;
	return get_int(h->held, WAIT_MS);
}

/* The read is still waiting: nothing came on @done. */
static bool holder_waiting(const struct holder *h)
{
	struct pollfd pfd = { .fd = h->done, .events = POLLIN };

	return poll(&pfd, 1, 0) == 0;
}

/*
 * Let the held mm go: killing the server aborts the FUSE connection, the
 * reader's copy fails and its read returns; the mount point goes (its
 * mount was in the holder's namespace only). Return: the read's result.
 */
static int holder_stop(struct holder *h)
{
	int ret = -1;

	if (h->server > 0)
		kill(h->server, SIGKILL);
	if (h->pid > 0) {
		ret = get_int(h->done, WAIT_MS);
		kill(h->pid, SIGKILL);
		waitpid(h->pid, NULL, 0);
	}
	if (h->held >= 0)
		close(h->held);
	if (h->done >= 0)
		close(h->done);
	if (h->dir[0])
		rmdir(h->dir);
	h->pid = h->server = -1;
	h->held = h->done = -1;
	h->dir[0] = '\0';
	return ret;
}

/*
 * Fork @fn as the owner, with the ends it uses of two pipes: @go (EOF
 * tells it to go on) and @out (what it reports). Leaves the test @go[1]
 * and @out[0]. Return: its pid, or -1.
 */
static pid_t owner_start(void (*fn)(uint64_t chunk, int go, int out),
			 uint64_t chunk, int go[2], int out[2])
{
	pid_t pid;

	if (pipe2(go, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (!pid) {
		close(go[1]);
		close(out[0]);
		fn(chunk, go[0], out[1]);
		_exit(0);
	}
	close(go[0]);
	close(out[1]);
	return pid;
}

FIXTURE(held) {
	int fd;
	struct mrpool_query q0;
	uint64_t chunk;
	long long trim;
	mode_t fuse_mode;	/* /dev/fuse's, restored by the teardown */
	struct holder h;
};

FIXTURE_SETUP(held)
{
	struct stat st;

	self->h.pid = self->h.server = -1;
	self->h.held = self->h.done = -1;
	self->h.dir[0] = '\0';
	self->h.made[0] = '\0';
	self->fuse_mode = 0;
	POOL_SETUP_OPEN();
	self->chunk = self->q0.chunk_size;
	/* "not listed" is how a reaped user's charge shows: readable, then */
	ASSERT_TRUE(pool_users_readable());
	self->trim = pool_trim_off();
	/* fuse is a module in Debian's kernels; devtmpfs makes its node */
	if (access(FUSE_DEV, F_OK) && system("modprobe -q fuse"))
		POOL_SETUP_SKIP("no FUSE: modprobe fuse failed");
	if (stat(FUSE_DEV, &st))
		POOL_SETUP_SKIP("no " FUSE_DEV);
	/* devtmpfs makes it 0600; a host's udev 0666 (Debian's rules) */
	self->fuse_mode = st.st_mode & 07777;
	ASSERT_EQ(0, chmod(FUSE_DEV, 0666));
}

FIXTURE_TEARDOWN(held)
{
	holder_stop(&self->h);
	/*
	 * What the case made is gone, however it ended and whichever cases
	 * ran with it (a newer harness runs one alone, -t): its holder's
	 * mount point, which holder_stop() removes.
	 */
	if (self->h.made[0])
		EXPECT_NE(0, access(self->h.made, F_OK))
			TH_LOG("%s is left", self->h.made);
	if (self->fuse_mode)
		chmod(FUSE_DEV, self->fuse_mode);
	if (self->fd < 0)
		return;
	pool_trim_restore(self->trim);
	close(self->fd);
}

static const char *held_step_name(int step)
{
	static const char *const names[] = {
		"held", "uid", "unshare(CLONE_NEWUSER|CLONE_NEWNS)",
		"uid/gid maps", "private mounts", "mkdtemp", "open /dev/fuse",
		"mount fuse", "fork", "open the FUSE file", "mmap it",
		"open /proc/<pid>/cmdline",
	};

	return step >= 0 && step <= HELD_CMDLINE ? names[step] :
	       "nothing heard";
}

/*
 * As OWNER: NR_CHUNKS chunks ALLOCed, mapped and written, and mapped a
 * second time through a dma-buf of the slice; reports the slice's
 * length, then exits at EOF on @go.
 */
static void owner_main(uint64_t chunk, int go, int out)
{
	int buf;
	struct mrpool_alloc a;
	uint8_t *p, *q;
	char c;
	int fd;

	become(OWNER);
	fd = pool_open();
	if (fd < 0 || pool_alloc(fd, NR_CHUNKS * chunk, &a))
		_exit(81);
	p = pool_map(fd, &a);
	if (p == MAP_FAILED)
		_exit(82);
	memset(p, 0x6d, a.length);
	buf = pool_export(fd, a.slice_id);
	if (buf < 0)
		_exit(83);
	q = mmap(NULL, a.length, PROT_READ | PROT_WRITE, MAP_SHARED, buf, 0);
	if (q == MAP_FAILED || q[a.length - 1] != 0x6d)
		_exit(84);
	put_int(out, (int)(a.length / chunk));
	while (read(go, &c, 1) > 0)
		;
	_exit(0);
}

/*
 * The owner's slice, mapped twice (its own VMA, its dma-buf's mmap), with
 * the owner's mm held by nobody's stuck read: once the owner is reaped,
 * its charge is 0 and the pool has every chunk back, while the read
 * still holds the mm (so the VMAs still exist); letting it go changes
 * nothing more.
 */
TEST_F_TIMEOUT(held, owner_reaped_while_mm_held, 600)
{
	struct mrpool_query q;
	int go[2], out[2], st, step;
	pid_t owner;

	POOL_SETUP_SKIPPED();
	owner = owner_start(owner_main, self->chunk, go, out);
	ASSERT_LT(0, owner);
	ASSERT_EQ(NR_CHUNKS, get_int(out[0], WAIT_MS));
	EXPECT_EQ((long long)(NR_CHUNKS * self->chunk),
		  pool_user_row(OWNER, POOL_USER_BYTES));

	step = holder_start(&self->h, owner);
	ASSERT_EQ(HELD_OK, step)
		TH_LOG("the holder failed at: %s", held_step_name(step));

	close(go[1]);
	ASSERT_EQ(owner, waitpid(owner, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
		TH_LOG("owner status %#x", st);
	/* Reaped: the rule is "back by then", so no waiting here. */
	EXPECT_GE(0, pool_user_row(OWNER, POOL_USER_BYTES));
	EXPECT_TRUE(pool_back_to(self->fd, &self->q0, &q))
		TH_LOG("used %llu quarantined %llu (were %llu, %llu)",
		       (unsigned long long)q.used_bytes,
		       (unsigned long long)q.quarantined_bytes,
		       (unsigned long long)self->q0.used_bytes,
		       (unsigned long long)self->q0.quarantined_bytes);
	/* ...and not because the mm went: the read still holds it. */
	EXPECT_TRUE(holder_waiting(&self->h));

	/* Let go: the copy fails (the FUSE connection aborted). */
	EXPECT_GT(0, holder_stop(&self->h));
	EXPECT_TRUE(pool_back_to(self->fd, &self->q0, &q));
	EXPECT_GE(0, pool_user_row(OWNER, POOL_USER_BYTES));
	close(out[0]);
}

/* Fork a reader of the copy at @p; its exit status (128 + a signal). */
static int copy_reader(const uint8_t *p, size_t len)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -1;
	if (!pid)
		_exit(p[0] == 0x43 && p[len - 1] == 0x43 ? 0 : 1);
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/*
 * As OWNER, RLIMIT_MEMLOCK two chunks: a one-chunk FORK_COPY slice
 * mapped and written (one chunk of its tenant's count), then a fork
 * whose child reads its copy, reports its pid and exits at EOF on @go;
 * once it is reaped (its status reported): the ALLOC of a second chunk
 * (0 or -errno reported), then a second child that reads its copy as
 * soon as it is forked (its status reported). Then waits to be killed.
 */
static void copier_main(uint64_t chunk, int go, int out)
{
	struct rlimit rl = { 2 * chunk, 2 * chunk };
	struct mrpool_alloc a, b;
	uint8_t *p;
	pid_t child;
	char c;
	int fd, st;

	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		_exit(80);
	become(OWNER);
	fd = pool_open();
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.bytes = chunk;
	a.node = MRPOOL_NODE_ANY;
	a.flags = MRPOOL_ALLOC_FORK_COPY;
	if (fd < 0 || pool_ioctl(fd, MRPOOL_IOC_ALLOC, &a))
		_exit(81);
	p = pool_map(fd, &a);
	if (p == MAP_FAILED)
		_exit(82);
	memset(p, 0x43, a.length);
	child = fork();
	if (child < 0)
		_exit(83);
	if (!child) {
		if (p[0] != 0x43 || p[a.length - 1] != 0x43)
			_exit(84);
		put_int(out, getpid());
		while (read(go, &c, 1) > 0)
			;
		_exit(0);
	}
	if (waitpid(child, &st, 0) != child)
		_exit(85);
	put_int(out, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	put_int(out, pool_alloc(fd, chunk, &b));
	put_int(out, copy_reader(p, a.length));
	for (;;)
		pause();
}

/*
 * A fork child's copy of a FORK_COPY slice is memory of the child's mm
 * (forkcopy.c), so another user that holds that mm after the child
 * exited keeps nothing charged to the owner: with RLIMIT_MEMLOCK room
 * for two chunks, the owner's tenant counts its one-chunk slice while
 * nobody holds the first child's mm (its copy still mapped there), as
 * before the fork -- the owner ALLOCs its second chunk -- and the owner's
 * next fork gets its copy. (Counted on the owner's tenant, the held copy
 * filled the count: that ALLOC failed ENOMEM and the second child died
 * of SIGBUS.) Once the owner is reaped its charge is 0 and the slices
 * are back, while the first child's mm is still held.
 */
TEST_F_TIMEOUT(held, fork_copy_not_charged_to_owner_when_held, 600)
{
	long long copies = pool_attr("stats/fork_copies");
	long long fails = pool_attr("stats/fork_copy_failures");
	struct mrpool_query q;
	int go[2], out[2], st, step, child;
	pid_t owner;

	POOL_SETUP_SKIPPED();
	owner = owner_start(copier_main, self->chunk, go, out);
	ASSERT_LT(0, owner);
	child = get_int(out[0], WAIT_MS);
	ASSERT_LT(0, child);
	EXPECT_EQ((long long)self->chunk,
		  pool_user_row(OWNER, POOL_USER_MEMLOCK));

	step = holder_start(&self->h, child);
	ASSERT_EQ(HELD_OK, step)
		TH_LOG("the holder failed at: %s", held_step_name(step));
	close(go[1]);
	EXPECT_EQ(0, get_int(out[0], WAIT_MS));	/* the first child */
	EXPECT_EQ(0, get_int(out[0], WAIT_MS))	/* the second chunk */
		TH_LOG("the owner's ALLOC within its RLIMIT_MEMLOCK failed");
	EXPECT_EQ(0, get_int(out[0], WAIT_MS))	/* the second child */
		TH_LOG("the second child's copy was refused");
	/* the owner's count: its two chunks, no copy; the mm still held */
	EXPECT_EQ((long long)(2 * self->chunk),
		  pool_user_row(OWNER, POOL_USER_MEMLOCK));
	EXPECT_TRUE(holder_waiting(&self->h));
	EXPECT_EQ(copies + 2, pool_attr("stats/fork_copies"));
	EXPECT_EQ(fails, pool_attr("stats/fork_copy_failures"));

	ASSERT_EQ(0, kill(owner, SIGKILL));
	ASSERT_EQ(owner, waitpid(owner, &st, 0));
	EXPECT_GE(0, pool_user_row(OWNER, POOL_USER_BYTES));
	EXPECT_TRUE(pool_back_to(self->fd, &self->q0, &q));
	EXPECT_TRUE(holder_waiting(&self->h));

	EXPECT_GT(0, holder_stop(&self->h));
	close(out[0]);
}

/*
 * A fixture of its own, declared after held, so that its case runs after
 * all of held's (the harness runs fixtures in order, the global one, of
 * plain TESTs, first): the end state of a whole run. Each case's own
 * leftovers are its teardown's check, which a case run alone makes too.
 */
FIXTURE(after) {
};

FIXTURE_SETUP(after)
{
}

FIXTURE_TEARDOWN(after)
{
}

/* Last: no mount point of any holder is left in /tmp (an earlier run's too). */
TEST_F(after, nothing_left)
{
	glob_t g = { 0 };

	EXPECT_EQ(GLOB_NOMATCH, glob("/tmp/mrpool-held.*", 0, NULL, &g))
		TH_LOG("left: %s", g.gl_pathc ? g.gl_pathv[0] : "?");
	globfree(&g);
}

TEST_HARNESS_MAIN
