// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The guest runs its jobs with the host's root as the root of its mount
 * namespace, not in a chroot (tools/vm/init), so a user namespace can be
 * made there, by root and by an unprivileged user, as on a container host:
 * the tenants of user namespaces and rootless containers are tested in
 * these guests (issue 33). In a chroot the kernel refuses
 * unshare(CLONE_NEWUSER) with EPERM.
 *
 * VM kernels: one (the guest's set-up, the same for every kernel)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"

#include "pool_util.h"

#define NOBODY	65534

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, s, strlen(s)) != (ssize_t)strlen(s))
		ret = -errno;
	close(fd);
	return ret;
}

/*
 * In a child (as uid, when not 0): a new user namespace in which the
 * caller is root, mapped onto its own uid. 0, or the step that failed.
 */
static int userns_child(uid_t uid)
{
	char map[64];

	if (uid && (setgroups(0, NULL) || setgid(uid) || setuid(uid)))
		return 1;
	/* a uid change made the task undumpable: /proc/self root's again */
	if (prctl(PR_SET_DUMPABLE, 1))
		return 1;
	if (unshare(CLONE_NEWUSER))
		return errno == EPERM ? 2 : 3;
	if (write_file("/proc/self/setgroups", "deny"))
		return 4;
	snprintf(map, sizeof(map), "0 %u 1\n", uid);
	if (write_file("/proc/self/uid_map", map))
		return 5;
	return getuid() == 0 ? 0 : 6;
}

static int in_child(uid_t uid)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -1;
	if (pid == 0)
		_exit(userns_child(uid));
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/* Root makes one: the job is not in a chroot. */
TEST(not_chrooted)
{
	if (!pool_in_vm())
		SKIP(return, "outside the test VM: the host's set-up is not this test's");
	EXPECT_EQ(0, in_child(0)) TH_LOG("2: EPERM, a chroot or a disabled userns");
}

/* An unprivileged user makes its own user namespace (no subuid needed). */
TEST(unprivileged_user)
{
	if (!pool_in_vm())
		SKIP(return, "outside the test VM: the host's set-up is not this test's");
	EXPECT_EQ(0, in_child(NOBODY));
}

TEST_HARNESS_MAIN
