/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * mrpoolctl: declarations shared by the subcommands (one file each) and
 * the helpers they use, grouped by the file that defines them.
 *
 * Everything the tool reads is optional: the kernel side grows and renames
 * files, debugfs may be unmounted, the device may be root-only. A missing
 * source is reported on stderr and the rest is still shown; a subcommand
 * fails (exit 1) only when it has nothing at all to show.
 */
#ifndef MRPOOLCTL_H
#define MRPOOLCTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* printf-style argument checking, like the kernel's __printf(). */
#define CTL_PRINTF(a, b) __attribute__((format(printf, a, b)))

/*
 * Exit status of every subcommand (documented in the usage text and the
 * man page): 0 success (watch and monitor also when stopped by SIGINT or
 * SIGTERM), 1 failure with a message on stderr (module not loaded,
 * permission denied, nothing to show, a refused set), 2 usage error.
 */
#define CTL_OK		0
#define CTL_FAIL	1
#define CTL_USAGE	2

/* Where the kernel side lives, below the optional MRPOOLCTL_ROOT prefix. */
#define CTL_DEV		"/dev/mrpool"
#define CTL_SYSFS	"/sys/class/misc/mrpool"
#define CTL_STATS	CTL_SYSFS "/stats"
#define CTL_MODULE	"/sys/module/mrpool"
#define CTL_PARAMS	CTL_MODULE "/parameters"
#define CTL_DEVICES	CTL_MODULE "/devices"
#define CTL_DEBUGFS	"/sys/kernel/debug/mrpool"

#define CTL_PATH_MAX	512

#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#endif

/* One subcommand of the dispatch table in main.c. */
struct ctl_cmd {
	const char *name;
	const char *args;	/* synopsis after the name, "" if none */
	const char *help;	/* one line for the usage text */
	/* argv[0] is the subcommand name; returns an exit status. */
	int (*run)(const struct ctl_cmd *cmd, int argc, char **argv);
	bool no_json;		/* --json is a usage error (metrics) */
};

/* main.c */
extern const char *ctl_prog;
int ctl_usage_error(const struct ctl_cmd *cmd, const char *fmt, ...)
	CTL_PRINTF(2, 3);
int ctl_no_args(const struct ctl_cmd *cmd, int argc, char **argv);

/* output.c: messages on stderr, sizes for humans */
extern bool ctl_quiet;	/* ctl_warn_missing() says nothing (watch) */
void ctl_err(const char *fmt, ...) CTL_PRINTF(1, 2);
void ctl_errno(int err, const char *fmt, ...) CTL_PRINTF(2, 3);
void ctl_warn_missing(int err, const char *path);
const char *ctl_human(char *buf, size_t len, unsigned long long bytes);

/* fs.c: reading sysfs and debugfs */
const char *ctl_path(char *buf, size_t len, const char *fmt, ...)
	CTL_PRINTF(3, 4);
int ctl_read_text(const char *path, char *buf, size_t len);
int ctl_read_ll(const char *path, long long *val);
bool ctl_parse_ll(const char *text, long long *val);
int ctl_list_dir(const char *path, char ***names, size_t *count);
void ctl_free_names(char **names, size_t count);
bool ctl_exists(const char *path);

/* json.c: --json output, one document per line on stdout */
extern bool ctl_json;
struct ctl_table;
void ctl_json_obj(const char *key);
void ctl_json_obj_end(void);
void ctl_json_arr(const char *key);
void ctl_json_arr_end(void);
void ctl_json_str(const char *key, const char *v);
void ctl_json_int(const char *key, long long v);
void ctl_json_uint(const char *key, unsigned long long v);
void ctl_json_double(const char *key, double v);
void ctl_json_null(const char *key);
void ctl_json_bool(const char *key, bool v);
void ctl_json_cell(const char *key, const char *text);
void ctl_json_table(const char *key, const struct ctl_table *t);

/* table.c: aligned columns */
struct ctl_table {
	size_t ncols;
	char **head;		/* ncols column names */
	char **cells;		/* nrows * ncols, row-major */
	size_t nrows;
	size_t cap;		/* rows allocated */
};

int ctl_table_init(struct ctl_table *t, size_t ncols,
		   const char *const *head);
int ctl_table_add(struct ctl_table *t, const char *const *row);
int ctl_table_load(struct ctl_table *t, const char *path);
int ctl_table_col(const struct ctl_table *t, const char *name);
const char *ctl_table_cell(const struct ctl_table *t, size_t row, size_t col);
void ctl_table_print(const struct ctl_table *t, FILE *f);
void ctl_table_free(struct ctl_table *t);
int ctl_show_debugfs(const char *file, const char *what,
		     void (*summary)(const struct ctl_table *t));

/* pool.c: geometry, totals and counters from the QUERY ioctl or sysfs */
enum ctl_kind {
	CTL_INFO,		/* a property: gauge without a unit */
	CTL_BYTES,		/* a gauge in bytes */
	CTL_COUNTER,		/* monotonic since load */
};

struct ctl_field {
	const char *name;	/* sysfs attribute name, status key */
	enum ctl_kind kind;
	const char *help;
	bool have;
	long long value;
};

enum {
	CTL_F_ABI, CTL_F_CHUNK, CTL_F_NODE, CTL_F_NDEV, CTL_F_TOTAL, CTL_F_FREE,
	CTL_F_USED, CTL_F_QUAR, CTL_F_MAX, CTL_F_ALLOCS, CTL_F_FREES,
	CTL_F_FAILS, CTL_NR_FIELDS,
};

struct ctl_pool {
	bool from_ioctl;		/* else from sysfs */
	struct ctl_field f[CTL_NR_FIELDS];
	char blocks[256];		/* blocks_per_order, "" if absent */
	char **stats;			/* stats/ counters not in f[] */
	long long *stat_values;
	size_t nstats;
	char **devices;			/* devices/ entries */
	size_t ndevices;
	bool have_devices;
};

int ctl_pool_read(struct ctl_pool *p);
void ctl_pool_free(struct ctl_pool *p);
const char *ctl_device_state(const char *dev, char *buf, size_t len);

/* devices.c */
int ctl_device_attrs(char **devs, size_t ndevs, const char ***cols,
		     size_t *ncols);
void ctl_device_attrs_free(const char **cols, size_t ncols);

/* the subcommands */
int ctl_cmd_status(const struct ctl_cmd *cmd, int argc, char **argv);
int ctl_cmd_chunks(const struct ctl_cmd *cmd, int argc, char **argv);
int ctl_cmd_slices(const struct ctl_cmd *cmd, int argc, char **argv);
int ctl_cmd_clients(const struct ctl_cmd *cmd, int argc, char **argv);
int ctl_cmd_devices(const struct ctl_cmd *cmd, int argc, char **argv);
int ctl_cmd_params(const struct ctl_cmd *cmd, int argc, char **argv);
int ctl_cmd_set(const struct ctl_cmd *cmd, int argc, char **argv);
int ctl_cmd_metrics(const struct ctl_cmd *cmd, int argc, char **argv);
int ctl_cmd_quota(const struct ctl_cmd *cmd, int argc, char **argv);
int ctl_cmd_tenants(const struct ctl_cmd *cmd, int argc, char **argv);
int ctl_cmd_cdi(const struct ctl_cmd *cmd, int argc, char **argv);

/* quota.c */
int ctl_parse_size(const char *text, unsigned long long *bytes);
int ctl_quota_table(struct ctl_table *t, bool quiet);

/* tenants.c */
int ctl_tenant_table(struct ctl_table *t, bool quiet);
int ctl_cmd_watch(const struct ctl_cmd *cmd, int argc, char **argv);
int ctl_cmd_monitor(const struct ctl_cmd *cmd, int argc, char **argv);

#endif /* MRPOOLCTL_H */
