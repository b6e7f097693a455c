// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mrpool-demo: the pool's story in one run, over a real RDMA QP.
 *
 * Flow 1 uses the module's own interface: slices from /dev/mrpool, mapped,
 * registered with ibv_reg_mr. Flow 2 uses libmrpool: buffers that already
 * carry their keys. Both RDMA WRITE a pattern across a chunk boundary, READ
 * it back, check every byte and say how long each step took.
 *
 * Exit status: 0 when every byte arrived, 1 on any error or mismatch.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "demo.h"
#include "slices.h"

static void print_query(const char *when, const struct mrpool_query *q)
{
	printf("pool %s: abi %u, chunk %" PRIu64 " KiB, node %d, %u RDMA device(s)\n",
	       when, q->abi_version, (uint64_t)q->chunk_size >> 10, q->node,
	       q->ndevices);
	printf("pool %s: total %" PRIu64 " KiB, free %" PRIu64 " KiB, used %"
	       PRIu64 " KiB, quarantined %" PRIu64 " KiB, max %" PRIu64 " KiB\n",
	       when, (uint64_t)q->total_bytes >> 10,
	       (uint64_t)q->free_bytes >> 10, (uint64_t)q->used_bytes >> 10,
	       (uint64_t)q->quarantined_bytes >> 10,
	       (uint64_t)q->max_bytes >> 10);
	printf("pool %s: allocs %" PRIu64 ", frees %" PRIu64
	       ", alloc failures %" PRIu64 "\n", when, (uint64_t)q->allocs,
	       (uint64_t)q->frees, (uint64_t)q->alloc_failures);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: mrpool-demo [-d DEVICE] [-s KIB] [-m raw|lib|both] [-n N] [-x CMD]\n"
		"  -d DEVICE  RDMA device (default: rxe0, else the first)\n"
		"  -s KIB     bytes per transfer buffer in KiB (default: two chunks)\n"
		"  -m FLOW    raw: module interface only, lib: libmrpool only (default both)\n"
		"  -n N       small-buffer alloc/free rounds to time (default 10000)\n"
		"  -x CMD     run CMD (sh -c) while flow 1's slices are registered\n");
}

int main(int argc, char **argv)
{
	struct demo_opts o = { .small_iters = 10000 };
	bool raw = true, lib = true;
	struct mrpool_query q;
	struct rdt_dev dev;
	struct rdt_loop lp;
	int fd, c, ret;

	while ((c = getopt(argc, argv, "d:s:m:n:x:h")) != -1) {
		switch (c) {
		case 'd':
			o.device = optarg;
			break;
		case 's':
			o.len = strtoull(optarg, NULL, 0) << 10;
			break;
		case 'm':
			raw = strcmp(optarg, "lib");
			lib = strcmp(optarg, "raw");
			break;
		case 'n':
			o.small_iters = atoi(optarg);
			break;
		case 'x':
			o.hold_cmd = optarg;
			break;
		default:
			usage();
			return c == 'h' ? 0 : 1;
		}
	}
	if (o.len > UINT32_MAX / 2 || o.small_iters <= 0) {
		usage();
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);

	/* A file of our own for QUERY: the flows open theirs. */
	fd = demo_pool_open();
	if (fd < 0) {
		fprintf(stderr, "mrpool-demo: /dev/%s: %s\n", MRPOOL_DEV_NAME,
			strerror(-fd));
		return 1;
	}
	ret = demo_pool_query(fd, &q);
	if (ret) {
		fprintf(stderr, "mrpool-demo: QUERY: %s\n", strerror(-ret));
		goto close_fd;
	}
	print_query("at start", &q);
	if (q.abi_version != MRPOOL_ABI_VERSION || !q.chunk_size) {
		fprintf(stderr, "mrpool-demo: module ABI %u, chunk %" PRIu64
			": this demo speaks ABI %u\n", q.abi_version,
			(uint64_t)q.chunk_size, MRPOOL_ABI_VERSION);
		ret = -EPROTO;
		goto close_fd;
	}

	ret = rdt_dev_open(&dev, o.device, NULL);
	if (ret) {
		fprintf(stderr, "mrpool-demo: RDMA device %s: %s\n",
			o.device ? o.device : "(default)", strerror(-ret));
		goto close_fd;
	}
	ret = rdt_loop_create(&lp, &dev);
	if (ret) {
		fprintf(stderr, "mrpool-demo: RC QP loopback on %s: %s\n",
			dev.name, strerror(-ret));
		goto close_dev;
	}
	printf("rdma: device %s, port %u, RoCE v2 GID index %d, RC QPs %u <-> %u\n",
	       dev.name, dev.port, dev.gid_index, lp.a.qp->qp_num,
	       lp.b.qp->qp_num);

	if (raw)
		ret = demo_flow_raw(&o, &dev, &lp, q.chunk_size);
	if (!ret && lib)
		ret = demo_flow_lib(&o, &dev, &lp, q.chunk_size);

	rdt_loop_destroy(&lp);
close_dev:
	rdt_dev_close(&dev);
	if (!demo_pool_query(fd, &q))
		print_query("at end", &q);
close_fd:
	close(fd);
	printf("mrpool-demo: %s\n", ret ? "FAIL" : "PASS");
	return ret ? 1 : 0;
}
