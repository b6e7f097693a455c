// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * For preload_test's ctor_registers: a shared object whose constructor
 * registers memory, as a C++ static initialiser that opens RDMA resources
 * does. A program that needs it (tests/preload_ctor_main.c) runs under the
 * preload shim: the loader runs this constructor before the shim's (the
 * shim and the fake verbs are preloaded, this object is the program's
 * dependency). The results are kept for the program's main(), which checks
 * and deregisters them.
 *
 * In order, before the shim's constructor: a registration before any
 * allocation of this object's (memory outside the pool: passed on), a
 * large allocation (the pool opens) and two registrations inside it
 * (served: the PD attaches, the arena is registered through the shim),
 * then the same from a thread the constructor starts, which ends before
 * the shim's constructor runs.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include <infiniband/verbs.h>

#include "preload_ctor.h"

#define CTOR_BUF	(128 * 1024)	/* a pool buffer under the default settings */

static struct ibv_context ctor_ctx;	/* no device: no NUMA node */
static struct ibv_pd ctor_pd = { .context = &ctor_ctx };
static char ctor_static[4096];		/* not the pool's */

struct preload_ctor preload_ctor;

/* One registration, its MR and errno kept in slot i. */
static void ctor_reg(int i, void *addr, size_t len, bool iova2)
{
	errno = 0;
	if (iova2)
		preload_ctor.mr[i] = ibv_reg_mr_iova2(&ctor_pd, addr, len, (uintptr_t)addr,
						      IBV_ACCESS_LOCAL_WRITE);
	else
		preload_ctor.mr[i] = ibv_reg_mr(&ctor_pd, addr, len, IBV_ACCESS_LOCAL_WRITE);
	preload_ctor.err[i] = preload_ctor.mr[i] ? 0 : errno;
}

/* A thread of the constructor's: one served, one passed on and deregistered. */
static void *ctor_thread(void *arg)
{
	char small[64];

	(void)arg;
	preload_ctor.buf[1] = malloc(CTOR_BUF);
	ctor_reg(CTOR_THREAD_SERVED, preload_ctor.buf[1], CTOR_BUF, false);
	ctor_reg(CTOR_THREAD_PASSED, small, sizeof(small), false);
	if (preload_ctor.mr[CTOR_THREAD_PASSED]) {
		preload_ctor.dereg_thread = ibv_dereg_mr(preload_ctor.mr[CTOR_THREAD_PASSED]);
		preload_ctor.mr[CTOR_THREAD_PASSED] = NULL;
	}
	return NULL;
}

__attribute__((constructor)) static void preload_ctor_init(void)
{
	pthread_t th;

	/* run alone, libibverbs would get the fake PD: nothing is registered */
	if (!getenv("MRP_PRELOAD_TEST"))
		return;
	preload_ctor.pd = &ctor_pd;
	preload_ctor.dereg_thread = -1;
	ctor_reg(CTOR_FIRST, ctor_static, sizeof(ctor_static), false);
	preload_ctor.buf[0] = malloc(CTOR_BUF);
	ctor_reg(CTOR_SERVED, preload_ctor.buf[0], 4096, false);
	ctor_reg(CTOR_SERVED_IOVA2, (char *)preload_ctor.buf[0] + 4096, 4096, true);
	preload_ctor.thread = !pthread_create(&th, NULL, ctor_thread, NULL) &&
			      !pthread_join(th, NULL);
}
