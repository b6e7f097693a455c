/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Outside programs for the selftests that run them (perftest, MPI): a
 * shell command in a process group of its own, its output in a file, and
 * its end awaited with a hang catcher that kills the whole group.
 */
#ifndef MRPOOL_SELFTESTS_SH_UTIL_H
#define MRPOOL_SELFTESTS_SH_UTIL_H

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

/* sh -c CMD, output to LOG, in a process group of its own. */
static inline pid_t sh_spawn(const char *cmd, const char *log)
{
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		setpgid(0, 0);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* Its exit status (128 + signal), or -1 after secs seconds (the group killed). */
static inline int sh_reap(pid_t pid, int secs)
{
	int st;

	if (pid < 0)
		return -1;
	for (int i = 0; i < secs * 10; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		usleep(100000);
	}
	kill(-pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

#endif
