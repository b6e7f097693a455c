/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The kernel log as tests read it: mrpool's own lines from /dev/kmsg,
 * from the moment the test starts looking (ib_timeout_test's retire
 * lines, pool_hwpoison_test's), so that a test checks what the module
 * said about what it just did and nothing earlier.
 */
#ifndef MRPOOL_KMSG_UTIL_H
#define MRPOOL_KMSG_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* /dev/kmsg, positioned after the last record: a descriptor or -errno. */
static inline int kmsg_from_now(void)
{
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (lseek(fd, 0, SEEK_END) < 0) {
		close(fd);
		return -errno;
	}
	return fd;
}

/*
 * The mrpool records logged on @fd since the last call, message text
 * only, one a line, appended to @buf (cut at @len). Returns their count.
 */
static inline int kmsg_mrpool(int fd, char *buf, size_t len)
{
	char rec[8192], *msg, *end;
	size_t used = strlen(buf);
	int n = 0;
	ssize_t r;

	for (;;) {
		r = read(fd, rec, sizeof(rec) - 1);
		if (r < 0 && errno == EPIPE)
			continue;	/* overwritten records: skipped */
		if (r <= 0)
			break;
		rec[r] = '\0';
		msg = strchr(rec, ';');
		if (!msg || strncmp(msg + 1, "mrpool: ", 8))
			continue;
		msg++;
		end = strchr(msg, '\n');
		if (end)
			*end = '\0';
		if (used + strlen(msg) + 2 > len)
			continue;
		used += sprintf(buf + used, "%s\n", msg);
		n++;
	}
	return n;
}

#endif
