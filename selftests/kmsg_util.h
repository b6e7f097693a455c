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
#include <strings.h>
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

/*
 * Needs kselftest_harness.h and pool_util.h (POOL_WAIT) included first.
 * Since the last read of @fd, the log has exactly one mrpool line with
 * @msg (waited for up to 5 s: a counter moves before its line is logged),
 * and no mrpool "chunk" line carries a frame number (@pfns, as "%lx" or
 * "%#lx") or any other "0x" number: chunks are named by pointer only.
 */
static inline void kmsg_expect_chunk_line(struct __test_metadata *_metadata,
					  int fd, const char *msg,
					  const unsigned long *pfns, int npfns)
{
	char log[8192] = "", *line, *save, *tok, *tsave;
	char hex[32], xhex[32];
	int n = 0, i;

	ASSERT_LE(0, fd) TH_LOG("/dev/kmsg: %s", strerror(-fd));
	POOL_WAIT((kmsg_mrpool(fd, log, sizeof(log)),
		   strstr(log, msg) != NULL), 5000);
	for (line = strtok_r(log, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (!strstr(line, "chunk "))
			continue;
		TH_LOG("kernel: %s", line);
		EXPECT_EQ(NULL, strstr(line, "0x")) TH_LOG("%s", line);
		if (strstr(line, msg))
			n++;
		for (tok = strtok_r(line, " :", &tsave); tok;
		     tok = strtok_r(NULL, " :", &tsave))
			for (i = 0; i < npfns; i++) {
				snprintf(hex, sizeof(hex), "%lx", pfns[i]);
				snprintf(xhex, sizeof(xhex), "%#lx", pfns[i]);
				EXPECT_NE(0, strcasecmp(tok, hex)) TH_LOG("pfn %s", hex);
				EXPECT_NE(0, strcasecmp(tok, xhex)) TH_LOG("pfn %s", xhex);
			}
	}
	EXPECT_EQ(1, n);
}

#endif
