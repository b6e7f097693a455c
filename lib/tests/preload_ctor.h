/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What tests/preload_ctor.c's constructor registered, for the program that
 * needs it (tests/preload_ctor_main.c).
 */
#ifndef MRP_PRELOAD_CTOR_H
#define MRP_PRELOAD_CTOR_H

#include <stdbool.h>

#include <infiniband/verbs.h>

/* The registrations, in the order the constructor made them. */
enum {
	CTOR_FIRST,		/* before any allocation: memory not the pool's */
	CTOR_SERVED,		/* inside a pool buffer */
	CTOR_SERVED_IOVA2,	/* the same with ibv_reg_mr_iova2 */
	CTOR_THREAD_SERVED,	/* the constructor's thread: a pool buffer */
	CTOR_THREAD_PASSED,	/* and its stack (deregistered there) */
	CTOR_NREG,
};

struct preload_ctor {
	struct ibv_pd *pd;		/* every registration's */
	struct ibv_mr *mr[CTOR_NREG];	/* NULL: failed (or deregistered) */
	int err[CTOR_NREG];		/* errno of a failed one */
	void *buf[2];			/* the pool buffers: the constructor's, the thread's */
	int dereg_thread;		/* ibv_dereg_mr() of CTOR_THREAD_PASSED, -1: none */
	bool thread;			/* the thread ran */
};

extern struct preload_ctor preload_ctor;

#endif /* MRP_PRELOAD_CTOR_H */
