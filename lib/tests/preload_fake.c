// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The rest of the verbs the preload shim passes on, for preload_test:
 * built with fake_verbs.c into a shared object preloaded after the shim,
 * so that the shim's dlsym(RTLD_NEXT) finds these (no RDMA device here).
 */
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#undef ibv_reg_mr_iova

int fake_dealloc_pds, fake_close_devices, fake_rereg_mrs;

/*
 * Set: called first by ibv_reg_mr_iova(), which the shim reaches for a
 * registration it passes on, inside its bracket around the library's
 * calls: a test gets there deterministically (a signal raised, a
 * cancellation acted on). No lock is held there.
 */
void (*fake_reg_iova_hook)(void);

struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
			       uint64_t iova, int access)
{
	void (*hook)(void) = __atomic_load_n(&fake_reg_iova_hook, __ATOMIC_ACQUIRE);

	if (hook)
		hook();
	return ibv_reg_mr_iova2(pd, addr, length, iova, (unsigned int)access);
}

int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr,
		 size_t length, int access)
{
	(void)mr;
	(void)flags;
	(void)pd;
	(void)addr;
	(void)length;
	(void)access;
	fake_rereg_mrs++;
	return 0;
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
	(void)pd;
	fake_dealloc_pds++;
	return 0;
}

int ibv_close_device(struct ibv_context *ctx)
{
	(void)ctx;
	fake_close_devices++;
	return 0;
}

/*
 * What libibverbs says of fork: the kernel copies DMA-pinned pages for the
 * child (IBV_FORK_UNNEEDED, as every kernel the project tests does with
 * ib_core loaded); with FAKE_FORK=enabled, ibv_fork_init() ran on a kernel
 * that does not say so (libibverbs' own DONTFORK bookkeeping is on).
 */
enum ibv_fork_status ibv_is_fork_initialized(void)
{
	const char *s = getenv("FAKE_FORK");

	return s && !strcmp(s, "enabled") ? IBV_FORK_ENABLED : IBV_FORK_UNNEEDED;
}
