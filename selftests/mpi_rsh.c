// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The remote shell Open MPI's launcher needs between the two guests of
 * tools/vm/run --hosts 2 (mpi_netpipe_test): the guests share the host's
 * read-only root, which has no sshd set up, and reach nothing but each
 * other. mpirun runs it as its plm_rsh_agent: "mpi_rsh HOST CMD...".
 *
 *   mpi_rsh serve ADDR PEER SECONDS  run the commands PEER sends to ADDR
 *                                     until "mpi_rsh done" or SECONDS pass
 *   mpi_rsh [-opt...] HOST CMD...     run CMD with sh -c on HOST: its output
 *                                     here, its exit status ours
 *   mpi_rsh done HOST                 stop HOST's server (exit 0)
 *
 * One connection per command. The client sends a u32 length and the
 * command; the server answers with frames: 'O', u32 length, output bytes
 * (stdout and stderr merged), then 'X', u32 exit status (128 + signal). A
 * client that goes away (mpirun ends its launch) kills the command's
 * process group. The server exits 0 after "done", 3 when SECONDS passed.
 *
 * It is a root shell for the peer guest: it serves only inside a guest of
 * tools/vm/run --hosts 2 (MRPOOL_HOST_INDEX set), on that guest's address
 * on a segment that reaches only the other guest, to that guest alone.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PORT		7789
#define MAX_CMD		(64 * 1024)
#define DONE		"\001mpi_rsh done"

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int read_all(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int frame(int fd, char type, const void *data, uint32_t len)
{
	char hdr[5];
	uint32_t be = htonl(len);

	hdr[0] = type;
	memcpy(hdr + 1, &be, 4);
	return write_all(fd, hdr, 5) || write_all(fd, data, len) ? -1 : 0;
}

/* One command for a connection, in a child of the server. */
static void run_one(int c, const char *cmd)
{
	char buf[16384];
	int pfd[2], st;
	uint32_t status;
	pid_t pid;
	ssize_t n;

	if (pipe(pfd))
		_exit(1);
	pid = fork();
	if (pid < 0)
		_exit(1);
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);

		setpgid(0, 0);
		signal(SIGPIPE, SIG_DFL);	/* the server ignores it; exec keeps that */
		if (null < 0)
			_exit(126);
		dup2(null, 0);
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		close(null);
		close(pfd[0]);
		close(pfd[1]);
		close(c);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	setpgid(pid, pid);
	close(pfd[1]);
	/*
	 * Output to the client until the command's end; a client gone (hung
	 * up, or EPIPE on output) ends the command: its launch is over. The
	 * command may be silent (orted is), so the socket is watched too.
	 */
	for (;;) {
		struct pollfd p[2] = {
			{ .fd = pfd[0], .events = POLLIN },
			{ .fd = c, .events = POLLRDHUP },
		};

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
			kill(-pid, SIGKILL);
			break;
		}
		if (!p[0].revents)
			continue;
		n = read(pfd[0], buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			break;
		if (n < 0 || frame(c, 'O', buf, (uint32_t)n)) {
			kill(-pid, SIGKILL);
			break;
		}
	}
	waitpid(pid, &st, 0);
	status = htonl(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	frame(c, 'X', &status, sizeof(status));
	_exit(0);
}

static int serve(const char *addr, const char *peer, int seconds)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(PORT) };
	struct in_addr want;
	time_t end = time(NULL) + seconds;
	int s, one = 1;

	signal(SIGPIPE, SIG_IGN);
	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1 ||
	    inet_pton(AF_INET, peer, &want) != 1) {
		fprintf(stderr, "mpi_rsh: bad address\n");
		return 2;
	}
	s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0 || setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(s, (struct sockaddr *)&sa, sizeof(sa)) || listen(s, 16)) {
		perror("mpi_rsh: listen");
		return 2;
	}
	for (;;) {
		struct sockaddr_in from;
		socklen_t flen = sizeof(from);
		struct timeval tv = { .tv_sec = 1 };
		char *cmd;
		uint32_t len;
		fd_set r;
		int c;

		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		if (time(NULL) >= end) {
			fprintf(stderr, "mpi_rsh: no \"done\" in %d s\n", seconds);
			return 3;
		}
		FD_ZERO(&r);
		FD_SET(s, &r);
		if (select(s + 1, &r, NULL, NULL, &tv) <= 0)
			continue;
		c = accept4(s, (struct sockaddr *)&from, &flen, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		/* a peer that connects and sends nothing must not stall the loop */
		setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &(struct timeval){ .tv_sec = 5 },
			   sizeof(struct timeval));
		/* Only the other guest: nothing else is on its segment anyway. */
		if (from.sin_addr.s_addr != want.s_addr ||
		    read_all(c, &len, 4) || (len = ntohl(len)) == 0 || len > MAX_CMD ||
		    !(cmd = calloc(1, len + 1))) {
			close(c);
			continue;
		}
		if (read_all(c, cmd, len)) {
			free(cmd);
			close(c);
			continue;
		}
		if (!strcmp(cmd, DONE)) {
			uint32_t zero = 0;

			frame(c, 'X', &zero, sizeof(zero));
			close(c);
			return 0;
		}
		if (fork() == 0) {
			close(s);
			run_one(c, cmd);
		}
		free(cmd);
		close(c);
	}
}

static int client(const char *host, const char *cmd)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(PORT) };
	char buf[16384];
	uint32_t len = (uint32_t)strlen(cmd), be;
	int s;

	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		fprintf(stderr, "mpi_rsh: %s: not an IPv4 address\n", host);
		return 255;
	}
	s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa))) {
		fprintf(stderr, "mpi_rsh: %s: %s\n", host, strerror(errno));
		return 255;
	}
	be = htonl(len);
	if (len > MAX_CMD || write_all(s, &be, 4) || write_all(s, cmd, len))
		return 255;
	for (;;) {
		char hdr[5];

		if (read_all(s, hdr, 5))
			return 255;
		memcpy(&be, hdr + 1, 4);
		len = ntohl(be);
		if (hdr[0] == 'X') {
			if (len != 4 || read_all(s, &be, 4))
				return 255;
			return (int)ntohl(be) & 0xff;
		}
		if (hdr[0] != 'O' || len > sizeof(buf) || read_all(s, buf, len))
			return 255;
		if (write_all(1, buf, len))
			return 255;
	}
}

int main(int argc, char **argv)
{
	char *cmd;
	size_t n = 0;
	int i = 1;

	if (argc == 5 && !strcmp(argv[1], "serve")) {
		if (!getenv("MRPOOL_HOST_INDEX")) {
			fprintf(stderr, "mpi_rsh: serves only in a guest of tools/vm/run --hosts 2\n");
			return 2;
		}
		return serve(argv[2], argv[3], atoi(argv[4]));
	}
	if (argc == 3 && !strcmp(argv[1], "done"))
		return client(argv[2], DONE);
	/* ssh-style options Open MPI may pass before the host: ignored */
	while (i < argc && argv[i][0] == '-')
		i++;
	if (argc - i < 2) {
		fprintf(stderr, "usage: mpi_rsh serve ADDR PEER SECONDS | done HOST | HOST CMD...\n");
		return 255;
	}
	for (int j = i + 1; j < argc; j++)
		n += strlen(argv[j]) + 1;
	cmd = calloc(1, n + 1);
	if (!cmd)
		return 255;
	for (int j = i + 1; j < argc; j++) {
		strcat(cmd, argv[j]);
		if (j + 1 < argc)
			strcat(cmd, " ");
	}
	return client(argv[i], cmd);
}
