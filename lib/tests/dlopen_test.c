// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Host test of the shared library loaded and unloaded at run time, as
 * verbs providers and plugins do: dlopen, use from a thread that stays
 * alive, dlclose, and only then let the thread exit (which runs the
 * library's thread-exit destructor); twice. Also the pool thread: named
 * "mrpool-bg", and every signal blocked in it. And the version the
 * library, its file name and mrpool.pc give, and the libibverbs versions
 * it needs to load.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "mrpool.h"

#if !defined(MRP_SO_PATH) || !defined(MRP_PC_PATH) || !defined(MRP_SO_VERSION)
#error "build with -DMRP_SO_PATH=\"/path/to/libmrpool.so.1.x.0\", MRP_PC_PATH, MRP_SO_VERSION"
#endif

struct lib {
	void *h;
	struct mrp_pool *(*open)(const struct mrp_pool_attr *);
	int (*close_flags)(struct mrp_pool *, unsigned int);
	int (*alloc)(struct mrp_pool *, size_t, struct ibv_pd *, struct mrp_buf *);
	int (*free)(struct mrp_pool *, void *);
};

static int lib_load(struct lib *l)
{
	l->h = dlopen(MRP_SO_PATH, RTLD_NOW | RTLD_LOCAL);
	if (!l->h)
		return -1;
	*(void **)&l->open = dlsym(l->h, "mrp_pool_open");
	*(void **)&l->close_flags = dlsym(l->h, "mrp_pool_close_flags");
	*(void **)&l->alloc = dlsym(l->h, "mrp_alloc");
	*(void **)&l->free = dlsym(l->h, "mrp_free");
	return l->open && l->close_flags && l->alloc && l->free ? 0 : -1;
}

struct user {
	struct lib *lib;
	struct mrp_pool *pool;
	pthread_barrier_t step;
	int ret;
};

/* Take a buffer through this thread's cache, then wait for the unload. */
static void *use_and_wait(void *arg)
{
	struct user *u = arg;
	struct mrp_buf b;

	u->ret = u->lib->alloc(u->pool, 8192, NULL, &b) || u->lib->free(u->pool, b.addr);
	pthread_barrier_wait(&u->step);	/* used: the exit destructor is armed */
	pthread_barrier_wait(&u->step);	/* the library is closed */
	return NULL;			/* exit: the destructor runs now */
}

/* dlopen, use in a thread, dlclose, thread exit; twice, no crash. */
TEST(dlclose_with_thread_alive)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_BACKEND | MRP_POOL_ATTR_BACKGROUND,
		.backend = MRP_BACKEND_ANON, .background = 0,
	};

	for (int round = 0; round < 2; round++) {
		struct lib lib;
		struct user u = { .lib = &lib, .ret = -1 };
		pthread_t t;

		ASSERT_EQ(0, lib_load(&lib)) TH_LOG("%s", dlerror());
		u.pool = lib.open(&a);
		ASSERT_NE(NULL, u.pool);
		ASSERT_EQ(0, pthread_barrier_init(&u.step, NULL, 2));
		ASSERT_EQ(0, pthread_create(&t, NULL, use_and_wait, &u));
		pthread_barrier_wait(&u.step);
		EXPECT_EQ(0, u.ret);
		EXPECT_EQ(0, lib.close_flags(u.pool, 0));
		EXPECT_EQ(0, dlclose(lib.h));
		pthread_barrier_wait(&u.step);
		ASSERT_EQ(0, pthread_join(t, NULL));
		pthread_barrier_destroy(&u.step);
	}
}

/* The tid of this process's thread named name, or -1. */
static long thread_named(const char *name)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	long tid = -1;

	if (!d)
		return -1;
	while (tid < 0 && (e = readdir(d))) {
		char path[300], comm[32] = "";
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f) && !strncmp(comm, name, strlen(name)) &&
		    comm[strlen(name)] == '\n')
			tid = atol(e->d_name);
		fclose(f);
	}
	closedir(d);
	return tid;
}

/* The signal mask of thread tid (SigBlk in its status). */
static unsigned long long thread_sigblk(long tid)
{
	unsigned long long m = 0;
	char path[64], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%ld/status", tid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "SigBlk: %llx", &m) == 1)
			break;
	fclose(f);
	return m;
}

#define SIGBIT(s)	(1ULL << ((s) - 1))

/*
 * 1 if blocking sig in this thread shows in its SigBlk. Linux: always;
 * qemu user mode shows the host mask, where guest real-time signals sit
 * elsewhere.
 */
static int sigblk_shows(int sig)
{
	sigset_t one, old;
	int shows;

	sigemptyset(&one);
	sigaddset(&one, sig);
	pthread_sigmask(SIG_BLOCK, &one, &old);
	shows = (thread_sigblk(gettid()) & SIGBIT(sig)) != 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return shows;
}

/* The pool thread is "mrpool-bg" and blocks every signal it can. */
TEST(background_thread_named_and_masked)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_BACKEND | MRP_POOL_ATTR_BACKGROUND,
		.backend = MRP_BACKEND_ANON, .background = 1,
	};
	/* valgrind keeps SIGRTMAX for itself */
	const int sigs[] = { SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE,
			     SIGALRM, SIGTERM, SIGCHLD, SIGWINCH, SIGRTMIN, SIGRTMIN + 1 };
	int checked = 0;
	unsigned long long blk;
	struct lib lib;
	struct mrp_pool *pool;
	long tid;

	ASSERT_EQ(0, lib_load(&lib)) TH_LOG("%s", dlerror());
	EXPECT_EQ(-1, thread_named("mrpool-bg"));
	pool = lib.open(&a);
	ASSERT_NE(NULL, pool);
	tid = thread_named("mrpool-bg");
	ASSERT_LT(0, tid);
	blk = thread_sigblk(tid);
	for (unsigned int i = 0; i < ARRAY_SIZE(sigs); i++) {
		if (!sigblk_shows(sigs[i]))
			continue;
		checked++;
		EXPECT_NE(0, blk & SIGBIT(sigs[i])) {
			TH_LOG("signal %d not blocked", sigs[i]);
		}
	}
	EXPECT_LE(10, checked);
	/* the caller's own mask is left as it was */
	EXPECT_EQ(0, thread_sigblk(gettid()) & SIGBIT(SIGUSR1));
	EXPECT_EQ(0, lib.close_flags(pool, 0));
	dlclose(lib.h);
}

/*
 * One version everywhere: the loaded library's mrp_version(), the header
 * it was built from, its file name and mrpool.pc (pkg-config said 1.0.0
 * of library 1.6, so --atleast-version=1.5 failed where mrp_alloc_pdh()
 * exists).
 */
TEST(version_everywhere)
{
	char want[32], line[256], pc[64] = "";
	int (*version)(void);
	void *h;
	FILE *f;

	snprintf(want, sizeof(want), "%d.%d.0", MRP_VERSION_MAJOR, MRP_VERSION_MINOR);
	EXPECT_STREQ(want, MRP_SO_VERSION);
	EXPECT_NE(NULL, strstr(MRP_SO_PATH, want));
	h = dlopen(MRP_SO_PATH, RTLD_NOW | RTLD_LOCAL);
	ASSERT_NE(NULL, h);
	*(void **)&version = dlsym(h, "mrp_version");
	ASSERT_NE(NULL, version);
	EXPECT_EQ(MRP_VERSION, version());
	dlclose(h);
	f = fopen(MRP_PC_PATH, "r");
	ASSERT_NE(NULL, f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Version: %63s", pc) == 1)
			break;
	fclose(f);
	EXPECT_STREQ(want, pc);
}

/*
 * The version names the shared object at path needs of the library named
 * lib (its .gnu.version_r), each passed to fn; the count of them, or -1
 * if the file is no 64-bit ELF with such a section.
 */
static int elf_needs(const char *path, const char *lib,
		     void (*fn)(const char *name, void *arg), void *arg)
{
	const Elf64_Ehdr *eh;
	const Elf64_Shdr *sh;
	const unsigned char *p;
	struct stat stb;
	int fd, n = -1;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &stb) || (size_t)stb.st_size < sizeof(*eh)) {
		close(fd);
		return -1;
	}
	p = mmap(NULL, (size_t)stb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return -1;
	eh = (const Elf64_Ehdr *)p;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64)
		goto out;
	sh = (const Elf64_Shdr *)(p + eh->e_shoff);
	for (int i = 0; i < eh->e_shnum; i++) {
		const char *str = (const char *)(p + sh[sh[i].sh_link].sh_offset);
		const unsigned char *v = p + sh[i].sh_offset;

		if (sh[i].sh_type != SHT_GNU_verneed)
			continue;
		n = 0;
		for (Elf64_Word k = 0; k < sh[i].sh_info; k++) {
			const Elf64_Verneed *vn = (const Elf64_Verneed *)v;
			const unsigned char *x = v + vn->vn_aux;

			for (int j = 0; j < vn->vn_cnt; j++) {
				const Elf64_Vernaux *va = (const Elf64_Vernaux *)x;

				if (!strcmp(str + vn->vn_file, lib)) {
					fn(str + va->vna_name, arg);
					n++;
				}
				x += va->vna_next;
			}
			v += vn->vn_next;
		}
	}
out:
	munmap((void *)p, (size_t)stb.st_size);
	return n;
}

static void count_ibverbs_1_12(const char *name, void *arg)
{
	*(int *)arg += !strcmp(name, "IBVERBS_1.12");
}

/*
 * The library loads with a libibverbs older than rdma-core 34: it needs
 * no IBVERBS_1.12 (ibv_reg_dmabuf_mr() is looked up at run time, reg.c),
 * while it does need some version of libibverbs (the check reads what it
 * should). The library linked the call directly before.
 */
TEST(no_ibverbs_1_12)
{
	int n12 = 0;

	EXPECT_LT(0, elf_needs(MRP_SO_PATH, "libibverbs.so.1", count_ibverbs_1_12, &n12));
	EXPECT_EQ(0, n12);
}

TEST_HARNESS_MAIN
