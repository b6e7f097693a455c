// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * An ordinary program that forks with large blocks live, as programs do
 * under mrpool-run (issue 32): run without the shim and under it, it must
 * print the same lines and exit 0 (preload_prog_test on the host's
 * anonymous backend, selftests/preload_prefork_test in the guest on the
 * kernel's pool). It knows nothing of mrpool; it only says, on a line of
 * its own that the tests do not compare, how many of its blocks look like
 * the pool's (a power-of-two usable size, aligned to it or to 2 MiB).
 *
 *   prefork_server prefork   a pre-fork server: the parent fills NBLK
 *                            blocks (64 KiB to 3 MiB, 7.4 MiB in all) and
 *                            forks WORKERS workers that accept connections
 *                            on one listening AF_UNIX socket; each request
 *                            names a 4 KiB slice of an inherited block, the
 *                            worker replies with what it holds there and
 *                            then writes the request's pattern over it.
 *                            The parent, as the client, keeps a model of
 *                            every worker's copy (the parent's pattern
 *                            until that worker wrote the slice) and checks
 *                            every reply against it; each round holds one
 *                            connection per worker open at once, so every
 *                            worker serves in every round. After the
 *                            workers exit, the parent's blocks are as it
 *                            filled them.
 *   prefork_server spawn     system(), popen() both ways and a fork+exec
 *                            helper whose child reads a block before its
 *                            exec, each ROUNDS times, while the parent
 *                            holds its blocks and a second thread keeps
 *                            rewriting blocks of its own; each command's
 *                            effect is checked, then every block.
 *   prefork_server userns    frees large blocks, then unshare(CLONE_NEWUSER),
 *                            which the kernel refuses to a process of more
 *                            than one thread; then waits (two minutes at
 *                            most) for its locked memory (VmLck: the
 *                            pool's, under the shim) to go down, as when a
 *                            pool thread trims, and says what it saw.
 *
 * Exit: 0 when every check passed; 1 a check failed (the line says which);
 * 2 a system call failed.
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define NBLK	8
#define WORKERS	4
#define ROUNDS	3
#define PER	16		/* requests per connection */
#define SLICE	4096
#define SPAWNS	12

static const size_t blk_size[NBLK] = {
	64 << 10, 96 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 3 << 20,
};
static unsigned char *blk[NBLK];

struct req {
	uint32_t quit, b, off;
	uint8_t seed;
};

struct reply {
	uint32_t worker;
	unsigned char held[SLICE];
};

static unsigned char pat(unsigned int b, size_t i, unsigned char seed)
{
	return (unsigned char)(seed + b * 31 + i * 7 + (i >> 12));
}

static void fill(unsigned char *p, unsigned int b, size_t off, size_t n, unsigned char seed)
{
	for (size_t i = off; i < off + n; i++)
		p[i - off] = pat(b, i, seed);
}

static bool same(const unsigned char *p, unsigned int b, size_t off, size_t n,
		 unsigned char seed)
{
	for (size_t i = off; i < off + n; i++)
		if (p[i - off] != pat(b, i, seed))
			return false;
	return true;
}

static bool pool_like(void *p)
{
	size_t n = malloc_usable_size(p);

	return n >= 4096 && !(n & (n - 1)) &&
	       (!((uintptr_t)p % n) || !((uintptr_t)p % (2u << 20)));
}

/* The parent's seed of block b. */
#define PARENT_SEED	0x5a

static int alloc_blocks(void)
{
	int pool = 0;

	for (unsigned int b = 0; b < NBLK; b++) {
		blk[b] = malloc(blk_size[b]);
		if (!blk[b])
			return -1;
		fill(blk[b], b, 0, blk_size[b], PARENT_SEED);
		pool += pool_like(blk[b]);
	}
	return pool;
}

static unsigned int blocks_intact(void)
{
	unsigned int n = 0;

	for (unsigned int b = 0; b < NBLK; b++)
		n += same(blk[b], b, 0, blk_size[b], PARENT_SEED);
	return n;
}

static bool xfer(int fd, void *p, size_t n, bool out)
{
	for (size_t done = 0; done < n;) {
		ssize_t r = out ? write(fd, (char *)p + done, n - done) :
				  read(fd, (char *)p + done, n - done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		done += (size_t)r;
	}
	return true;
}

/*
 * A worker: every inherited block must read as the parent left it, then
 * connections until a quit request. Each connection's replies go through
 * a large block of the worker's own.
 */
static int worker(int lfd, uint32_t id)
{
	if (blocks_intact() != NBLK)
		return 3;
	for (;;) {
		struct reply *rp;
		struct req rq;
		int c = accept(lfd, NULL, NULL);

		if (c < 0) {
			if (errno == EINTR)
				continue;
			return 4;
		}
		rp = malloc(256 << 10);
		if (!rp)
			return 5;
		while (xfer(c, &rq, sizeof(rq), false)) {
			if (rq.quit) {
				free(rp);
				close(c);
				return 0;
			}
			if (rq.b >= NBLK || rq.off + SLICE > blk_size[rq.b])
				return 6;
			rp->worker = id;
			memcpy(rp->held, blk[rq.b] + rq.off, SLICE);
			fill(blk[rq.b] + rq.off, rq.b, rq.off, SLICE, rq.seed);
			if (!xfer(c, rp, sizeof(*rp), true))
				return 7;
		}
		free(rp);
		close(c);
	}
}

/* seeds[w][b][slice]: what worker w last wrote there, 0 for the parent's */
static unsigned char seeds[WORKERS][NBLK][(3 << 20) / SLICE];

static int prefork(void)
{
	char dir[] = "/tmp/prefork.XXXXXX";
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	unsigned int checked = 0, bad = 0, spread = 0, intact;
	uint32_t lcg = 12345;
	pid_t pid[WORKERS];
	struct reply *rp;
	int lfd, pool, st, fails = 0;

	pool = alloc_blocks();
	if (pool < 0 || !mkdtemp(dir))
		return 2;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/sock", dir);
	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 64))
		return 2;
	for (uint32_t w = 0; w < WORKERS; w++) {
		pid[w] = fork();
		if (pid[w] < 0)
			return 2;
		if (!pid[w])
			_exit(worker(lfd, w));
	}
	/* the workers' now: were they all gone, connect() would be refused */
	close(lfd);
	rp = malloc(sizeof(*rp));
	if (!rp)
		return 2;
	for (int r = 0; r < ROUNDS; r++) {
		int c[WORKERS];
		bool seen[WORKERS] = { false };
		unsigned int n = 0;

		for (int i = 0; i < WORKERS; i++) {
			c[i] = socket(AF_UNIX, SOCK_STREAM, 0);
			if (c[i] < 0 || connect(c[i], (struct sockaddr *)&sa, sizeof(sa)))
				return 2;
		}
		for (int k = 0; k < PER; k++)
			for (int i = 0; i < WORKERS; i++) {
				struct req rq = { 0 };
				unsigned char want;

				lcg = lcg * 1103515245u + 12345u;
				rq.b = (lcg >> 8) % NBLK;
				rq.off = (uint32_t)(((lcg >> 12) % (blk_size[rq.b] / SLICE)) * SLICE);
				rq.seed = (unsigned char)(1 + (lcg >> 20) % 250);
				if (!xfer(c[i], &rq, sizeof(rq), true) ||
				    !xfer(c[i], rp, sizeof(*rp), false) || rp->worker >= WORKERS)
					return 2;
				want = seeds[rp->worker][rq.b][rq.off / SLICE];
				if (!same(rp->held, rq.b, rq.off, SLICE, want ? want : PARENT_SEED))
					bad++;
				seeds[rp->worker][rq.b][rq.off / SLICE] = rq.seed;
				checked++;
				if (!seen[rp->worker]) {
					seen[rp->worker] = true;
					n++;
				}
			}
		for (int i = 0; i < WORKERS; i++)
			close(c[i]);
		spread += n == WORKERS;
	}
	for (int i = 0; i < WORKERS; i++) {
		struct req rq = { .quit = 1 };
		int c = socket(AF_UNIX, SOCK_STREAM, 0);

		if (c < 0 || connect(c, (struct sockaddr *)&sa, sizeof(sa)) ||
		    !xfer(c, &rq, sizeof(rq), true))
			return 2;
		close(c);
	}
	for (int w = 0; w < WORKERS; w++) {
		if (waitpid(pid[w], &st, 0) != pid[w])
			return 2;
		fails += !WIFEXITED(st) || WEXITSTATUS(st);
	}
	unlink(sa.sun_path);
	rmdir(dir);
	intact = blocks_intact();
	printf("prefork: workers %d, failed %d; rounds %d, with every worker %u; "
	       "replies %u, wrong %u; parent's blocks intact %u of %d\n",
	       WORKERS, fails, ROUNDS, spread, checked, bad, intact, NBLK);
	printf("pool-like blocks %d of %d\n", pool, NBLK);
	free(rp);
	return fails || spread != ROUNDS || bad || checked != ROUNDS * PER * WORKERS ||
	       intact != NBLK;
}

/* The second thread's blocks: rewritten whole, pass after pass. */
#define TBLK	4
static unsigned char *tblk[TBLK];
static atomic_bool stop;
static atomic_uint passes;

static void *rewriter(void *arg __attribute__((unused)))
{
	unsigned char seed = 1;

	while (!atomic_load(&stop)) {
		for (unsigned int b = 0; b < TBLK; b++)
			fill(tblk[b], b + NBLK, 0, 1 << 20, seed);
		for (unsigned int b = 0; b < TBLK; b++)
			if (!same(tblk[b], b + NBLK, 0, 1 << 20, seed))
				return (void *)1;
		seed++;
		atomic_fetch_add(&passes, 1);
	}
	/* the last pass stands: main checks it */
	return (void *)(uintptr_t)(256 + (unsigned char)(seed - 1));
}

static int spawn(void)
{
	char dir[] = "/tmp/prefork.XXXXXX", path[64], cmd[160];
	unsigned int sys_ok = 0, popen_ok = 0, helper_ok = 0, intact, tintact = 0;
	pthread_t t;
	void *ret;
	int pool, st;

	pool = alloc_blocks();
	if (pool < 0 || !mkdtemp(dir))
		return 2;
	for (unsigned int b = 0; b < TBLK; b++) {
		tblk[b] = malloc(1 << 20);
		if (!tblk[b])
			return 2;
		pool += pool_like(tblk[b]);
	}
	snprintf(path, sizeof(path), "%s/out", dir);
	if (pthread_create(&t, NULL, rewriter, NULL))
		return 2;
	/* the rewriter must be at it while the commands start */
	while (atomic_load(&passes) < 1)
		usleep(1000);
	for (int r = 0; r < SPAWNS; r++) {
		unsigned int b = (unsigned int)r % NBLK;
		unsigned char *back, tail[512];
		FILE *f;
		size_t got, extra;
		pid_t pid;

		/* system(): its exit status and the file it wrote */
		snprintf(cmd, sizeof(cmd), "echo ran %d > %s; exit %d", r, path, r % 5 + 3);
		st = system(cmd);
		f = fopen(path, "r");
		if (f) {
			int v = -1;

			if (WIFEXITED(st) && WEXITSTATUS(st) == r % 5 + 3 &&
			    fscanf(f, "ran %d", &v) == 1 && v == r)
				sys_ok++;
			fclose(f);
		}
		/* popen(..., "w"): a block, whole, through cat into the file */
		snprintf(cmd, sizeof(cmd), "cat > %s", path);
		f = popen(cmd, "w");
		if (!f)
			return 2;
		got = fwrite(blk[b], 1, blk_size[b], f);
		if (pclose(f) || got != blk_size[b])
			continue;
		/* popen(..., "r"): the file back, into a large block of this loop's */
		back = malloc(blk_size[b]);
		if (!back)
			return 2;
		snprintf(cmd, sizeof(cmd), "cat %s", path);
		f = popen(cmd, "r");
		if (!f)
			return 2;
		got = fread(back, 1, blk_size[b], f);
		/*
		 * Read to the end before pclose(): a reader that stops at the
		 * byte count closes the pipe under a cat that has not exited
		 * yet, which may then die of SIGPIPE (it did on arm64). What
		 * comes past the block is counted as a difference.
		 */
		while ((extra = fread(tail, 1, sizeof(tail), f)) > 0)
			got += extra;
		if (!pclose(f) && got == blk_size[b] && !memcmp(back, blk[b], got))
			popen_ok++;
		free(back);
		/* fork + exec, as a program's own helper: the child reads a block first */
		pid = fork();
		if (pid < 0)
			return 2;
		if (!pid) {
			if (!same(blk[b], b, 0, blk_size[b], PARENT_SEED))
				_exit(9);
			execl("/bin/sh", "sh", "-c", "exit 0", (char *)NULL);
			_exit(127);
		}
		if (waitpid(pid, &st, 0) == pid && WIFEXITED(st) && !WEXITSTATUS(st))
			helper_ok++;
	}
	atomic_store(&stop, true);
	if (pthread_join(t, &ret))
		return 2;
	if ((uintptr_t)ret >= 256) {
		unsigned char seed = (unsigned char)((uintptr_t)ret - 256);

		for (unsigned int b = 0; b < TBLK; b++)
			tintact += same(tblk[b], b + NBLK, 0, 1 << 20, seed);
	}
	unlink(path);
	rmdir(dir);
	intact = blocks_intact();
	printf("spawn: system %u, popen %u, fork+exec %u of %d each; "
	       "the thread's blocks as it last wrote them %u of %d; blocks intact %u of %d\n",
	       sys_ok, popen_ok, helper_ok, SPAWNS, tintact, TBLK, intact, NBLK);
	printf("pool-like blocks %d of %d\n", pool, NBLK + TBLK);
	return sys_ok != SPAWNS || popen_ok != SPAWNS || helper_ok != SPAWNS ||
	       tintact != TBLK || intact != NBLK;
}

/* VmLck of /proc/self/status, in kB; -1 if unreadable. */
static long vm_locked(void)
{
	char line[128];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmLck: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static int userns(void)
{
	long before, later;
	int pool, ret, err;

	pool = alloc_blocks();
	if (pool < 0)
		return 2;
	for (unsigned int b = 0; b < NBLK; b++)
		free(blk[b]);
	before = vm_locked();
	ret = unshare(CLONE_NEWUSER);
	err = errno;
	printf("unshare(CLONE_NEWUSER): %s\n", ret ? strerror(err) : "ok");
	printf("pool-like blocks %d of %d\n", pool, NBLK);
	later = before;
	for (int i = 0; i < 12000 && before > 0 && later >= before; i++) {
		usleep(10000);
		later = vm_locked();
	}
	printf("locked kB at the unshare %ld, later %ld\n", before, later);
	return ret != 0;
}

int main(int argc, char **argv)
{
	int ret;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 2) {
		fprintf(stderr, "usage: prefork_server prefork|spawn|userns\n");
		return 2;
	}
	ret = !strcmp(argv[1], "prefork") ? prefork() :
	      !strcmp(argv[1], "spawn") ? spawn() :
	      !strcmp(argv[1], "userns") ? userns() : 2;
	if (ret == 2)
		fprintf(stderr, "prefork_server %s: %s\n", argv[1], strerror(errno));
	return ret;
}
