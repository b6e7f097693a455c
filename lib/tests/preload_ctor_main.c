// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * For preload_test's ctor_registers: a program linked against
 * build/preload_ctor.so, whose constructor registered memory before the
 * preload shim's constructor ran (tests/preload_ctor.c). Every one of its
 * registrations must have worked: an MR with keys, served from the pool
 * for those inside a pool buffer; each deregisters cleanly here, and so
 * does the PD. Exit status 0, else 1 with one line on stderr per fault;
 * 4 when not run by preload_test (MRP_PRELOAD_TEST unset: the constructor
 * registered nothing).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "preload_ctor.h"

static const char *const names[CTOR_NREG] = {
	[CTOR_FIRST] = "first (static buffer)",
	[CTOR_SERVED] = "pool buffer",
	[CTOR_SERVED_IOVA2] = "pool buffer, iova2",
	[CTOR_THREAD_SERVED] = "thread's pool buffer",
	[CTOR_THREAD_PASSED] = "thread's stack",
};

/* Served: an MR of the shim's, no kernel object behind it. */
static bool served(const struct ibv_mr *mr)
{
	return mr->handle == UINT32_MAX;
}

int main(void)
{
	struct preload_ctor *c = &preload_ctor;
	int bad = 0, ret;

	if (!c->pd) {
		fprintf(stderr, "preload_ctor: run by preload_test (ctor_registers), "
			"under the shim and the fake verbs\n");
		return 4;
	}
	if (!c->thread) {
		fprintf(stderr, "constructor's thread did not run\n");
		bad++;
	}
	for (int i = 0; i < CTOR_NREG; i++) {
		struct ibv_mr *mr = c->mr[i];

		if (c->err[i] || (!mr && i != CTOR_THREAD_PASSED)) {
			fprintf(stderr, "%s: ibv_reg_mr in a constructor failed: %s\n",
				names[i], strerror(c->err[i]));
			bad++;
			continue;
		}
		if (!mr)
			continue;
		if (!mr->lkey || mr->pd != c->pd) {
			fprintf(stderr, "%s: MR without keys (lkey %#x)\n", names[i], mr->lkey);
			bad++;
		}
		if (served(mr) != (i != CTOR_FIRST)) {
			fprintf(stderr, "%s: %s\n", names[i],
				served(mr) ? "served, outside the pool" : "not served");
			bad++;
		}
		ret = ibv_dereg_mr(mr);
		if (ret) {
			fprintf(stderr, "%s: ibv_dereg_mr: %s\n", names[i], strerror(ret));
			bad++;
		}
	}
	if (c->dereg_thread) {
		fprintf(stderr, "%s: ibv_dereg_mr in the constructor's thread: %d\n",
			names[CTOR_THREAD_PASSED], c->dereg_thread);
		bad++;
	}
	ret = ibv_dealloc_pd(c->pd);
	if (ret) {
		fprintf(stderr, "ibv_dealloc_pd: %s\n", strerror(ret));
		bad++;
	}
	free(c->buf[0]);
	free(c->buf[1]);
	return bad ? 1 : 0;
}
