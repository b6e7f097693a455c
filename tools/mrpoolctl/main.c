// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mrpoolctl: inspect and tune the mrpool kernel module. This file holds
 * the dispatch table, the usage text, the global options (-h, -V, --json,
 * the last also accepted after the command) and the exit-status rules:
 * 0 success, 1 failure (message with the errno text on stderr), 2 usage.
 */
#include "mrpoolctl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define CTL_VERSION	"1.0"

const char *ctl_prog = "mrpoolctl";

static const struct ctl_cmd ctl_cmds[] = {
	{ "status", "", "ABI version, geometry, totals and counters",
	  ctl_cmd_status, false },
	{ "chunks", "", "every chunk: pfn, node, state, owner (debugfs)",
	  ctl_cmd_chunks, false },
	{ "slices", "", "every slice with its owner pid and comm (debugfs)",
	  ctl_cmd_slices, false },
	{ "clients", "", "open files of /dev/mrpool and what they hold (debugfs)",
	  ctl_cmd_clients, false },
	{ "devices", "", "RDMA devices and the kernel MR cache on each",
	  ctl_cmd_devices, false },
	{ "params", "", "module parameters, their values and access",
	  ctl_cmd_params, false },
	{ "set", "NAME VALUE", "change a writable module parameter",
	  ctl_cmd_set, false },
	{ "quota", "set CGROUP SIZE | del CGROUP | list",
	  "cgroup v2 pool quotas (set and del: root)", ctl_cmd_quota, false },
	{ "tenants", "", "what each user holds (root: every user; else your own)",
	  ctl_cmd_tenants, false },
	{ "cdi", "[--no-rdma] [-o|--output FILE] | --update",
	  "a CDI spec handing containers /dev/mrpool and the RDMA nodes",
	  ctl_cmd_cdi, false },
	{ "metrics", "", "counters in Prometheus text format (mrpool_*); no --json",
	  ctl_cmd_metrics, true },
	{ "watch", "[SECONDS [COUNT]]",
	  "totals and rates since the last sample, every SECONDS (2)",
	  ctl_cmd_watch, false },
	{ "monitor", "[COUNT]", "stream the module's netlink events, one per line",
	  ctl_cmd_monitor, false },
};

static void ctl_usage(FILE *f)
{
	size_t i;

	fprintf(f, "usage: %s [-h] [-V] [-j|--json] COMMAND [ARGS]\n\ncommands:\n",
		ctl_prog);
	for (i = 0; i < ARRAY_SIZE(ctl_cmds); i++) {
		char syn[64];

		snprintf(syn, sizeof(syn), "%s %s", ctl_cmds[i].name,
			 ctl_cmds[i].args);
		fprintf(f, "  %-24s %s\n", syn, ctl_cmds[i].help);
	}
	fprintf(f, "  %-24s %s\n", "help [COMMAND]", "this text, or one command's");
	fprintf(f, "\noptions:\n"
		"  -j, --json   JSON instead of text (before or after COMMAND):\n"
		"               one object per line; watch and monitor print one\n"
		"               per sample or event. Not for metrics (Prometheus text).\n"
		"  -h, --help   this text\n"
		"  -V, --version\n");
	fprintf(f, "\n'%s COMMAND -h' describes one command.\n", ctl_prog);
	fprintf(f, "Exit status: 0 ok (watch, monitor: also when stopped by SIGINT or\n"
		"SIGTERM), 1 failure (module not loaded, permission denied, nothing\n"
		"to show, a refused set; the reason on stderr), 2 usage error.\n");
}

static void ctl_cmd_usage(const struct ctl_cmd *cmd, FILE *f)
{
	fprintf(f, "usage: %s %s%s%s\n  %s\n", ctl_prog, cmd->name,
		cmd->args[0] ? " " : "", cmd->args, cmd->help);
}

/* Report a usage error of @cmd (or of the tool when NULL); returns 2. */
int ctl_usage_error(const struct ctl_cmd *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", ctl_prog);
	if (cmd)
		fprintf(stderr, "%s: ", cmd->name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (cmd)
		ctl_cmd_usage(cmd, stderr);
	else
		fprintf(stderr, "Run '%s -h' for the list of commands.\n",
			ctl_prog);
	return CTL_USAGE;
}

/* For subcommands without arguments: 0, or 2 after a usage message. */
int ctl_no_args(const struct ctl_cmd *cmd, int argc, char **argv)
{
	if (argc > 1)
		return ctl_usage_error(cmd, "unexpected argument '%s'",
				       argv[1]);
	return 0;
}

static const struct ctl_cmd *ctl_find(const char *name)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(ctl_cmds); i++)
		if (!strcmp(ctl_cmds[i].name, name))
			return &ctl_cmds[i];
	return NULL;
}

static bool ctl_is_help(const char *arg)
{
	return !strcmp(arg, "-h") || !strcmp(arg, "--help");
}

static bool ctl_is_json(const char *arg)
{
	return !strcmp(arg, "-j") || !strcmp(arg, "--json");
}

/* Take --json out of the command's arguments; returns the new argc. */
static int ctl_strip_json(int argc, char **argv)
{
	int i, n = 1;

	for (i = 1; i < argc; i++) {
		if (ctl_is_json(argv[i]))
			ctl_json = true;
		else
			argv[n++] = argv[i];
	}
	argv[n] = NULL;
	return n;
}

static int ctl_help(int argc, char **argv)
{
	const struct ctl_cmd *cmd;

	if (argc < 2) {
		ctl_usage(stdout);
		return CTL_OK;
	}
	cmd = ctl_find(argv[1]);
	if (!cmd)
		return ctl_usage_error(NULL, "unknown command '%s'", argv[1]);
	ctl_cmd_usage(cmd, stdout);
	return CTL_OK;
}

int main(int argc, char **argv)
{
	const struct ctl_cmd *cmd;
	int i, ret;

	while (argc > 1 && ctl_is_json(argv[1])) {
		ctl_json = true;
		argv[1] = argv[0];
		argv++;
		argc--;
	}
	if (argc < 2) {
		ctl_usage(stderr);
		return CTL_USAGE;
	}
	if (ctl_is_help(argv[1])) {
		ctl_usage(stdout);
		return CTL_OK;
	}
	if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
		printf("%s %s\n", ctl_prog, CTL_VERSION);
		return CTL_OK;
	}
	if (argv[1][0] == '-')
		return ctl_usage_error(NULL, "unknown option '%s'", argv[1]);
	if (!strcmp(argv[1], "help"))
		return ctl_help(argc - 1, argv + 1);

	cmd = ctl_find(argv[1]);
	if (!cmd)
		return ctl_usage_error(NULL, "unknown command '%s'", argv[1]);
	/* Before the command sees its arguments: "set NAME -h" is help too. */
	for (i = 2; i < argc; i++)
		if (ctl_is_help(argv[i])) {
			ctl_cmd_usage(cmd, stdout);
			return CTL_OK;
		}
	argc = ctl_strip_json(argc - 1, argv + 1) + 1;
	if (ctl_json && cmd->no_json)
		return ctl_usage_error(cmd, "no JSON form: %s prints the Prometheus text format",
				       cmd->name);
	ret = cmd->run(cmd, argc - 1, argv + 1);
	/* Output redirected to a full disk must not look like success. */
	if (fflush(stdout) || ferror(stdout)) {
		ctl_errno(errno ? errno : EIO, "writing output");
		return CTL_FAIL;
	}
	return ret;
}
