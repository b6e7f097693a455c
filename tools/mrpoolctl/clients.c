// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mrpoolctl clients: debugfs mrpool/clients as a table, one row per open
 * file of /dev/mrpool (pid and comm of the opener, slices, bytes held).
 */
#include "mrpoolctl.h"

int ctl_cmd_clients(const struct ctl_cmd *cmd, int argc, char **argv)
{
	int ret = ctl_no_args(cmd, argc, argv);

	return ret ? ret : ctl_show_debugfs("clients", "clients", NULL);
}
