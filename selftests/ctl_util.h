/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Running the mrpoolctl tool from a VM test (mrpoolctl_test,
 * pool_quota_test), from the repository top or selftests/.
 */
#ifndef CTL_UTIL_H
#define CTL_UTIL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>

#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#endif

/* The tool: $MRPOOLCTL, else relative to the repository top or selftests/. */
static inline const char *ctl_tool(void)
{
	static const char *const tries[] = {
		"tools/mrpoolctl/mrpoolctl", "../tools/mrpoolctl/mrpoolctl",
	};
	const char *env = getenv("MRPOOLCTL");
	size_t i;

	if (env && *env)
		return env;
	for (i = 0; i < ARRAY_SIZE(tries); i++)
		if (!access(tries[i], X_OK))
			return tries[i];
	return NULL;
}

/*
 * Run "mrpoolctl ARGS"; stdout (and stderr too when @with_stderr) into
 * @out. Returns the exit status, or -1 if it did not exit normally.
 */
static inline int ctl_run(const char *args, bool with_stderr, char *out, size_t len)
{
	const char *tool = ctl_tool();
	char cmd[512];
	size_t got = 0, n;
	FILE *p;
	int st;

	out[0] = '\0';
	if (!tool)
		return -1;
	snprintf(cmd, sizeof(cmd), "%s %s %s", tool, args,
		 with_stderr ? "2>&1" : "2>/dev/null");
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (got + 1 < len && (n = fread(out + got, 1, len - 1 - got, p)))
		got += n;
	out[got] = '\0';
	st = pclose(p);
	return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#endif /* CTL_UTIL_H */
