// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * container_grab: run inside a container by container_test. Takes chunks
 * from /dev/mrpool one ALLOC at a time until one is refused (or MAX
 * chunks are held), prints one line
 *
 *	uid UID got BYTES errno NAME memlock LIMIT
 *
 * (NAME: the refused ALLOC's errno, "none" when MAX was reached first;
 * LIMIT: its RLIMIT_MEMLOCK in bytes, -1 for unlimited, -2 when
 * /dev/mrpool could not be opened or queried, the reason after it),
 * to FILE (written whole, then renamed into place: a reader polling for
 * it never sees half; the test bind-mounts its folder), else to standard
 * output, then holds them until killed ("hold") or exits ("exit", which
 * gives them back). Static: the container's image needs no libraries for
 * it.
 *
 * usage: container_grab hold|exit [MAX [FILE]]   (MAX -1: no maximum)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "uapi/mrpool.h"

/* @line to @path (through @path.tmp), or to stdout when @path is NULL */
static void report(const char *path, const char *line)
{
	char tmp[4096];
	FILE *f;

	if (!path) {
		fputs(line, stdout);
		fflush(stdout);
		return;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f || fputs(line, f) < 0 || fclose(f) || rename(tmp, path))
		perror(path);
}

static const char *errno_name(int err)
{
	switch (err) {
	case 0: return "none";
	case EDQUOT: return "EDQUOT";
	case ENOMEM: return "ENOMEM";
	case ENOSPC: return "ENOSPC";
	case EPERM: return "EPERM";
	case EACCES: return "EACCES";
	default: {
		static char num[16];

		snprintf(num, sizeof(num), "E%d", err);
		return num;
	}
	}
}

/* Take chunks until refused or @max are held; the line to @out. */
static void grab(long max, const char *out)
{
	struct mrpool_query q = { .size = sizeof(q) };
	struct rlimit rl = { 0 };
	unsigned long long got = 0;
	char line[256];
	int fd, err = 0;
	long n = 0;

	getrlimit(RLIMIT_MEMLOCK, &rl);
	fd = open("/dev/" MRPOOL_DEV_NAME, O_RDWR | O_CLOEXEC);
	if (fd < 0 || ioctl(fd, MRPOOL_IOC_QUERY, &q)) {
		/* the same line, so a reader waiting for it sees why */
		err = errno;
		snprintf(line, sizeof(line),
			 "uid %u got 0 errno %s memlock -2 (%s: %s)\n",
			 getuid(), errno_name(err), fd < 0 ? "open" : "QUERY",
			 strerror(err));
		report(out, line);
		return;
	}
	while (max < 0 || n < max) {
		struct mrpool_alloc a = {
			.size = sizeof(a),
			.bytes = q.chunk_size,
			.node = MRPOOL_NODE_ANY,
		};

		if (ioctl(fd, MRPOOL_IOC_ALLOC, &a)) {
			err = errno;
			break;
		}
		got += q.chunk_size;
		n++;
	}
	snprintf(line, sizeof(line), "uid %u got %llu errno %s memlock %lld\n",
		 getuid(), got, errno_name(err),
		 rl.rlim_cur == RLIM_INFINITY ? -1LL : (long long)rl.rlim_cur);
	report(out, line);
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 4 ||
	    (strcmp(argv[1], "hold") && strcmp(argv[1], "exit"))) {
		fprintf(stderr, "usage: container_grab hold|exit [MAX [FILE]]\n");
		return 2;
	}
	grab(argc > 2 ? atol(argv[2]) : -1, argc > 3 ? argv[3] : NULL);
	if (!strcmp(argv[1], "hold"))
		for (;;)
			pause();
	return 0;
}
