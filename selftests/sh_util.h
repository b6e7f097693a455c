/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Outside programs for the selftests that run them (perftest, MPI): a
 * shell command in a process group of its own, its output in a file, and
 * its end awaited with a hang catcher that kills the whole group.
 *
 * A group still running when the test process ends (an ASSERT returned
 * before sh_reap(), or the harness SIGKILLed the test's group at its
 * timeout, which runs no teardown) is killed by a guardian: a process
 * forked at the test process's first sh_spawn() that learns each group
 * through a pipe and kills the ones not yet reaped when the pipe's write
 * end closes, however the test process ended.
 */
#ifndef MRPOOL_SELFTESTS_SH_UTIL_H
#define MRPOOL_SELFTESTS_SH_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

/* The guardian's pipe, and the test process it belongs to. */
static int sh_guard_fd = -1;
static pid_t sh_guard_owner;

/* The guardian: the groups announced (pid) and not yet reaped (-pid). */
static inline void sh_guard_loop(int rfd)
{
	pid_t live[64] = { 0 }, msg;
	ssize_t n;

	for (;;) {
		n = read(rfd, &msg, sizeof(msg));
		if (n < 0 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof(msg))
			break;	/* EOF: the test process is gone */
		for (size_t i = 0; i < sizeof(live) / sizeof(live[0]); i++) {
			if (msg > 0 && !live[i]) {
				live[i] = msg;		/* a group started */
				break;
			}
			if (msg < 0 && live[i] == -msg) {
				live[i] = 0;		/* reaped by the test */
				break;
			}
		}
	}
	for (size_t i = 0; i < sizeof(live) / sizeof(live[0]); i++)
		if (live[i])
			kill(-live[i], SIGKILL);
	_exit(0);
}

/* This process's guardian, started on first use (a parent's is not ours). */
static inline void sh_guard_start(void)
{
	pid_t gpid;
	int p[2];

	if (sh_guard_owner == getpid())
		return;
	if (sh_guard_fd >= 0)
		close(sh_guard_fd);
	sh_guard_fd = -1;
	sh_guard_owner = getpid();
	if (pipe(p))
		return;
	fcntl(p[0], F_SETFD, FD_CLOEXEC);	/* not in the commands */
	fcntl(p[1], F_SETFD, FD_CLOEXEC);
	gpid = fork();
	if (gpid == 0) {
		/*
		 * Out of the test's group (the harness's timeout kills it),
		 * holding nothing of the test's (a pool file).
		 */
		setpgid(0, 0);
		if (dup2(p[0], 0) != 0)
			_exit(1);
		for (int fd = 1; fd < 65536; fd++)
			close(fd);
		sh_guard_loop(0);
	}
	close(p[0]);
	if (gpid < 0) {
		close(p[1]);
		return;
	}
	setpgid(gpid, gpid);	/* whichever runs first */
	sh_guard_fd = p[1];
}

/*
 * Tell the guardian a group started (pid) or was reaped (-pid). Without a
 * guardian a group is killed by sh_reap() alone, as before; a guardian
 * gone early costs a SIGPIPE here, so its end is ignored.
 */
static inline void sh_guard(pid_t msg)
{
	void (*old)(int);

	if (sh_guard_fd < 0 || sh_guard_owner != getpid())
		return;
	old = signal(SIGPIPE, SIG_IGN);
	(void)!write(sh_guard_fd, &msg, sizeof(msg));
	signal(SIGPIPE, old);
}

/* The caller reaped a group's leader itself (waitpid): the guardian forgets it. */
static inline void sh_forget(pid_t pid)
{
	sh_guard(-pid);
}

/* sh -c CMD, output to LOG, in a process group of its own. */
static inline pid_t sh_spawn(const char *cmd, const char *log)
{
	pid_t pid;

	sh_guard_start();	/* before any group it must watch */
	pid = fork();

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
	if (pid > 0) {
		setpgid(pid, pid);	/* before anyone signals the group */
		sh_guard(pid);
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
		if (waitpid(pid, &st, WNOHANG) == pid) {
			sh_guard(-pid);
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		}
		usleep(100000);
	}
	kill(-pid, SIGKILL);
	waitpid(pid, &st, 0);
	sh_guard(-pid);
	return -1;
}

#endif
