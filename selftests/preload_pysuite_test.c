// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Python's own test suite (Debian's libpython3.11-testsuite), unmodified,
 * under the preload shim on the kernel backend (issue 32): a subset of
 * test_multiprocessing_fork, sized to the suite's time budget, run by
 * lib/tests/python_suite.sh once without the shim and once with it
 * (MRPOOL_SUITE_BACKEND=kmod: MRPOOL_BACKEND=kernel, the shim's default
 * MRPOOL_FORK=copy). Every case must end the same way in both runs, the
 * shim's report must show blocks from the kernel's pool and forks made
 * with pool blocks live (each child working on its own copy), and the
 * module's allocs and fork_copies counters must have moved in the shimmed
 * run only. make check's host job pysuite runs the four modules whole on
 * the anonymous backend.
 *
 * The subset (SUBSET): classes whose children fork with the parent's
 * pool blocks live and work on them (pools of workers, queues, the heap
 * of shared arenas, finalizers, connections, shared values, subclassed
 * processes). The whole module took 608 s without the shim in a 6.1
 * guest under TCG on a busy host (536 s in its 375 cases; 71 s in
 * WithManagerTestBarrier, 45 s in WithProcessesTestProcess, 26 s in
 * WithProcessesTestSharedMemory, left out): too long to run twice in the
 * VM job. The subset: 57 cases, 60-81 s without the shim and 75-97 s
 * with it, 172-201 s for the binary (two runs, measured the same way).
 *
 * VM kernels: one (selftests/run.sh: the shim and outside programs; the
 * kernel's fork copy under them, ALLOC, mmap and FREE, are
 * lib_fork_copy_test's, pool_revoke_test's and pool_mmap_test's on every
 * kernel)
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "file_util.h"

#define PY	"/usr/bin/python3"
#define MOD	"test.test_multiprocessing_fork."
/* regrtest -m patterns (fnmatch on the test's full id) */
#define SUBSET	MOD "WithProcessesTestPool.* " \
		MOD "WithProcessesTestQueue.* " \
		MOD "WithProcessesTestHeap.* " \
		MOD "WithProcessesTestFinalize.* " \
		MOD "WithProcessesTestConnection.* " \
		MOD "WithProcessesTestSubclassingProcess.* " \
		MOD "WithProcessesTestValue.* " \
		MOD "WithProcessesTestSharedCTypes.* " \
		MOD "TestNoForkBomb.*"

/* A fixture only for TEST_F_TIMEOUT: two runs of the subset take minutes. */
FIXTURE(suite) {
	int unused;
};

FIXTURE_SETUP(suite)
{
}

FIXTURE_TEARDOWN(suite)
{
}

/*
 * The subset, plainly and under the shim on the kernel backend: the same
 * outcome for every case, the kernel's pool used and forks copied.
 */
TEST_F_TIMEOUT(suite, same_outcomes_kernel_pool, 3600)
{
	char out[] = "/tmp/mrp_pysuite.XXXXXX", cmd[PATH_MAX + 1024];
	int fd, plan = -1, ok = 0, bad = 0;
	char *text, *l;

	if (system(PY " -c 'import test.libregrtest' 2>/dev/null"))
		SKIP(return, "needs Debian's libpython3.11-testsuite (tools/deps.sh)");
	if (access("/dev/mrpool", F_OK))
		SKIP(return, "needs /dev/mrpool (the VM job)");
	fd = mkstemp(out);
	ASSERT_LE(0, fd);
	close(fd);
	snprintf(cmd, sizeof(cmd), "MRPOOL_SUITE_BACKEND=kmod MRPOOL_SUITE_MATCH='%s' "
		 "lib/tests/python_suite.sh test_multiprocessing_fork >%s 2>&1",
		 SUBSET, out);
	system(cmd);	/* its TAP, judged below */
	text = file_slurp(out);
	unlink(out);
	ASSERT_NE(NULL, text);
	TH_LOG("lib/tests/python_suite.sh (kmod, the subset):\n%s", text);
	for (l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		if (!strncmp(l, "1..", 3))
			plan = atoi(l + 3);
		else if (!strncmp(l, "ok - ", 5))
			ok++;
		else if (!strncmp(l, "not ok - ", 9))
			bad++;
	}
	/* the module's line, pool used, forks with pool blocks, the counters */
	EXPECT_EQ(4, plan);
	EXPECT_EQ(0, bad);
	EXPECT_EQ(plan, ok);
	free(text);
}

TEST_HARNESS_MAIN
