// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Counts memory registrations made by anyone in the process. These
 * definitions in the executable come first in the dynamic linker's search
 * order, so UCX's and libfabric's calls into libibverbs land here too (an
 * unversioned definition satisfies their versioned references); each one
 * counts and calls libibverbs' own through dlsym(RTLD_NEXT). This is how
 * the alloc scenario knows whether a peer's cache hit: registrations per
 * operation, not a guess from timings.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include <infiniband/verbs.h>

#include "bench.h"

static atomic_uint_fast64_t n_reg, n_dereg;
/*
 * Calls in progress on this thread: libibverbs' ibv_reg_mr calls
 * ibv_reg_mr_iova2 through its own PLT, which lands here again; only the
 * outermost call counts.
 */
static __thread int depth;

uint64_t regcount_reg(void)
{
	return atomic_load(&n_reg);
}

uint64_t regcount_dereg(void)
{
	return atomic_load(&n_dereg);
}

/* libibverbs' definition of @name; without it nothing can work: abort. */
static void *next_sym(const char *name)
{
	void *f = dlsym(RTLD_NEXT, name);

	if (!f)
		abort();
	return f;
}

#undef ibv_reg_mr
struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access);
struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	static struct ibv_mr *(*real)(struct ibv_pd *, void *, size_t, int);

	if (!real)
		real = (struct ibv_mr *(*)(struct ibv_pd *, void *, size_t, int))
			next_sym("ibv_reg_mr");
	struct ibv_mr *mr;

	if (!depth++)
		atomic_fetch_add(&n_reg, 1);
	mr = real(pd, addr, length, access);
	depth--;
	return mr;
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
				uint64_t iova, unsigned int access)
{
	static struct ibv_mr *(*real)(struct ibv_pd *, void *, size_t, uint64_t,
				      unsigned int);

	if (!real)
		real = (struct ibv_mr *(*)(struct ibv_pd *, void *, size_t, uint64_t,
					   unsigned int))next_sym("ibv_reg_mr_iova2");
	struct ibv_mr *mr;

	if (!depth++)
		atomic_fetch_add(&n_reg, 1);
	mr = real(pd, addr, length, iova, access);
	depth--;
	return mr;
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
	static int (*real)(struct ibv_mr *);

	if (!real)
		real = (int (*)(struct ibv_mr *))next_sym("ibv_dereg_mr");
	int ret;

	if (!depth++)
		atomic_fetch_add(&n_dereg, 1);
	ret = real(mr);
	depth--;
	return ret;
}
