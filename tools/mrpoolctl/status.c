// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mrpoolctl status: one "key value" line per fact, byte counts followed
 * by a human-readable size in parentheses. Keys are the sysfs names, so
 * scripts can parse the output with a split on blanks. With --json, one
 * object: the same keys with numbers (null where unknown), "devices" as
 * an array of {name, state}, "blocks_per_order" as an array, and the
 * other stats/ counters in "stats".
 */
#include "mrpoolctl.h"

#include <string.h>

#include "uapi/mrpool.h"

static void ctl_status_line(const struct ctl_field *f)
{
	char human[32];

	if (!f->have) {
		printf("%-20s ?\n", f->name);
		return;
	}
	if (f->kind == CTL_BYTES)
		printf("%-20s %llu (%s)\n", f->name,
		       (unsigned long long)f->value,
		       ctl_human(human, sizeof(human),
				 (unsigned long long)f->value));
	else if (f->kind == CTL_COUNTER)
		printf("%-20s %llu\n", f->name, (unsigned long long)f->value);
	else
		printf("%-20s %lld\n", f->name, f->value);
}

static void ctl_status_devices(const struct ctl_pool *p)
{
	char state[64];
	size_t i;

	if (!p->have_devices) {
		printf("%-20s ?\n", "devices");
		return;
	}
	printf("%-20s %zu", "devices", p->ndevices);
	for (i = 0; i < p->ndevices; i++)
		printf("%s%s: %s", i ? ", " : " (", p->devices[i],
		       ctl_device_state(p->devices[i], state, sizeof(state)));
	printf("%s\n", p->ndevices ? ")" : "");
}

static void ctl_status_json_field(const struct ctl_field *f)
{
	if (!f->have)
		ctl_json_null(f->name);
	else if (f->kind == CTL_INFO)
		ctl_json_int(f->name, f->value);
	else
		ctl_json_uint(f->name, (unsigned long long)f->value);
}

static void ctl_status_json(const struct ctl_pool *p)
{
	char buf[sizeof(p->blocks)], state[64], *save = NULL, *tok;
	size_t i;

	ctl_json_obj(NULL);
	ctl_json_str("source", p->from_ioctl ? "ioctl" : "sysfs");
	for (i = 0; i < CTL_NR_FIELDS; i++)
		ctl_status_json_field(&p->f[i]);
	if (p->have_devices) {
		ctl_json_arr("devices");
		for (i = 0; i < p->ndevices; i++) {
			ctl_json_obj(NULL);
			ctl_json_str("name", p->devices[i]);
			ctl_json_str("state", ctl_device_state(p->devices[i], state,
							       sizeof(state)));
			ctl_json_obj_end();
		}
		ctl_json_arr_end();
	} else {
		ctl_json_null("devices");
	}
	if (p->blocks[0]) {
		memcpy(buf, p->blocks, sizeof(buf));
		ctl_json_arr("blocks_per_order");
		for (tok = strtok_r(buf, " ", &save); tok;
		     tok = strtok_r(NULL, " ", &save))
			ctl_json_cell(NULL, tok);
		ctl_json_arr_end();
	} else {
		ctl_json_null("blocks_per_order");
	}
	ctl_json_obj("stats");
	for (i = 0; i < p->nstats; i++)
		ctl_json_uint(p->stats[i], (unsigned long long)p->stat_values[i]);
	ctl_json_obj_end();
	ctl_json_obj_end();
}

int ctl_cmd_status(const struct ctl_cmd *cmd, int argc, char **argv)
{
	struct ctl_pool p;
	size_t i;
	int ret;

	ret = ctl_no_args(cmd, argc, argv);
	if (ret)
		return ret;
	ret = ctl_pool_read(&p);
	if (ret) {
		ctl_pool_free(&p);
		ctl_errno(ret, "no pool state to show");
		return CTL_FAIL;
	}
	if (ctl_json) {
		ctl_status_json(&p);
		ctl_pool_free(&p);
		return CTL_OK;
	}

	printf("%-20s %s\n", "source", p.from_ioctl ?
	       CTL_DEV " (MRPOOL_IOC_QUERY)" : CTL_SYSFS);
	for (i = CTL_F_ABI; i <= CTL_F_NDEV; i++)
		ctl_status_line(&p.f[i]);
	ctl_status_devices(&p);
	for (i = CTL_F_TOTAL; i <= CTL_F_MAX; i++)
		ctl_status_line(&p.f[i]);
	printf("%-20s %s\n", "blocks_per_order", p.blocks[0] ? p.blocks : "?");
	for (i = CTL_F_ALLOCS; i < CTL_NR_FIELDS; i++)
		ctl_status_line(&p.f[i]);
	for (i = 0; i < p.nstats; i++)
		printf("%-20s %llu\n", p.stats[i],
		       (unsigned long long)p.stat_values[i]);
	ctl_pool_free(&p);
	return CTL_OK;
}
