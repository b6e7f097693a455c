// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mrpool-scenarios: the scenarios of `make bench` that need an RDMA device.
 *
 *   mrpool-scenarios [-d DEV] [-t SECONDS] [-m MAX_SIZE] [-r ROUNDS] [-p PEER]
 *                    alloc|reg|rdma|odp|startup
 *
 * -t is the time budget of one measurement (default 1), -m the largest
 * size of the reg and odp scenarios (default 256 MiB; odp also stops at a
 * third of MemAvailable) and the bytes the startup scenario makes ready,
 * -r the startup scenario's rounds (default 3), -p runs only the alloc
 * scenario's peers whose name contains PEER (for a diagnostic run). Output: CSV on stdout (see
 * each scen_*.c). Not installed: tools/bench/bench.sh runs it in the VM.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "rdmatest.h"

static void usage(void)
{
	fprintf(stderr, "usage: mrpool-scenarios [-d DEV] [-t SECONDS] [-m MAX_SIZE] [-r ROUNDS] [-p PEER]\n"
		"                        alloc|reg|rdma|odp|startup\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct bench_env env = { .budget_s = 1.0 };
	size_t max_size = 256 * MIB;
	const char *dev_name = NULL;
	struct rdt_dev dev;
	int c, ret, rounds = 3;

	while ((c = getopt(argc, argv, "d:t:m:r:p:")) != -1) {
		switch (c) {
		case 'd': dev_name = optarg; break;
		case 't': env.budget_s = strtod(optarg, NULL); break;
		case 'm': max_size = strtoull(optarg, NULL, 0); break;
		case 'r': rounds = atoi(optarg); break;
		case 'p': env.only_peer = optarg; break;
		default: usage();
		}
	}
	if (optind != argc - 1 || env.budget_s <= 0 || max_size < 4 * KIB || rounds < 1)
		usage();
	ret = rdt_dev_open(&dev, dev_name, NULL);
	if (ret) {
		fprintf(stderr, "mrpool-scenarios: no RDMA device: %s\n", strerror(-ret));
		return 1;
	}
	env.dev = &dev;
	env.pd = dev.pd;
	env.dev_name = dev.name;
	if (!strcmp(argv[optind], "alloc"))
		ret = scen_alloc(&env);
	else if (!strcmp(argv[optind], "reg"))
		ret = scen_reg(&env, max_size);
	else if (!strcmp(argv[optind], "rdma"))
		ret = scen_rdma(&env);
	else if (!strcmp(argv[optind], "odp"))
		ret = scen_odp(&env, max_size);
	else if (!strcmp(argv[optind], "startup"))
		ret = scen_startup(&env, max_size, rounds);
	else
		usage();
	rdt_dev_close(&dev);
	return ret;
}
