// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mrpoolctl cdi: a Container Device Interface spec (JSON) that hands the
 * pool to containers: "podman run --device mrpool.io/pool=rdma ...", a
 * Kubernetes device plugin's CDI names, and so on.
 *
 *   mrpool.io/pool=default   /dev/mrpool alone: for containers whose RDMA
 *                            devices come from elsewhere (an SR-IOV or
 *                            RDMA device plugin picks which uverbs nodes a
 *                            pod gets), or that only allocate
 *   mrpool.io/pool=rdma      /dev/mrpool and every RDMA node of the host
 *                            (/dev/infiniband/uverbs*, rdma_cm): what one
 *                            container needs to register pool memory and
 *                            move it, in one name; left out when the host
 *                            has no uverbs node
 *
 * The RDMA nodes are those present when the spec is written: run it again
 * after a device comes or goes (a node listed but absent makes the
 * runtime refuse the container). cdiVersion is 0.3.0, the oldest the
 * fields used need (device nodes by path), which every CDI release since
 * accepts, Debian 12's podman 4.3 included.
 */
#define _GNU_SOURCE	/* strverscmp */
#include "mrpoolctl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CTL_CDI_VERSION	"0.3.0"
#define CTL_CDI_KIND	"mrpool.io/pool"
#define CTL_IB_DIR	"/dev/infiniband"

/* uverbsN and rdma_cm: the nodes a verbs program or librdmacm opens. */
static bool ctl_cdi_rdma_node(const char *name)
{
	const char *p;

	if (!strcmp(name, "rdma_cm"))
		return true;
	if (strncmp(name, "uverbs", 6) || !name[6])
		return false;
	for (p = name + 6; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	return true;
}

static int ctl_cdi_cmp(const void *a, const void *b)
{
	return strverscmp(*(char *const *)a, *(char *const *)b);
}

static void ctl_cdi_node(FILE *f, const char *path, bool last)
{
	fprintf(f, "\t\t\t\t\t{ \"path\": \"%s\" }%s\n", path, last ? "" : ",");
}

static void ctl_cdi_device(FILE *f, const char *name, char **nodes,
			   size_t n, bool last)
{
	char path[CTL_PATH_MAX];
	size_t i;

	fprintf(f, "\t\t{\n\t\t\t\"name\": \"%s\",\n"
		"\t\t\t\"containerEdits\": {\n\t\t\t\t\"deviceNodes\": [\n",
		name);
	ctl_cdi_node(f, CTL_DEV, !n);
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), CTL_IB_DIR "/%s", nodes[i]);
		ctl_cdi_node(f, path, i + 1 == n);
	}
	fprintf(f, "\t\t\t\t]\n\t\t\t}\n\t\t}%s\n", last ? "" : ",");
}

/* The spec to @f; @nodes are the RDMA nodes' names (may be none). */
static void ctl_cdi_write(FILE *f, char **nodes, size_t n)
{
	fprintf(f, "{\n\t\"cdiVersion\": \"" CTL_CDI_VERSION "\",\n"
		"\t\"kind\": \"" CTL_CDI_KIND "\",\n\t\"devices\": [\n");
	ctl_cdi_device(f, "default", NULL, 0, !n);
	if (n)
		ctl_cdi_device(f, "rdma", nodes, n, true);
	fprintf(f, "\t]\n}\n");
}

/* The RDMA nodes under /dev/infiniband, version-sorted (uverbs10 last). */
static int ctl_cdi_nodes(char ***names, size_t *count)
{
	char dir[CTL_PATH_MAX];
	size_t i, n = 0;
	char **v;
	int ret;

	ret = ctl_list_dir(ctl_path(dir, sizeof(dir), CTL_IB_DIR), &v, count);
	if (ret == -ENOENT) {
		*names = NULL;
		*count = 0;
		return 0;
	}
	if (ret)
		return ret;
	for (i = 0; i < *count; i++) {
		if (ctl_cdi_rdma_node(v[i]))
			v[n++] = v[i];
		else
			free(v[i]);
	}
	if (n)
		qsort(v, n, sizeof(*v), ctl_cdi_cmp);
	*names = v;
	*count = n;
	return 0;
}

/* Write to @out through a temporary beside it: readers never see half. */
static int ctl_cdi_to_file(const char *out, char **nodes, size_t n)
{
	char tmp[CTL_PATH_MAX];
	FILE *f;
	int fd;

	if (snprintf(tmp, sizeof(tmp), "%s.XXXXXX", out) >= (int)sizeof(tmp)) {
		ctl_errno(ENAMETOOLONG, "%s", out);
		return CTL_FAIL;
	}
	fd = mkstemp(tmp);
	if (fd < 0) {
		ctl_errno(errno, "%s", tmp);
		return CTL_FAIL;
	}
	f = fdopen(fd, "w");
	if (!f) {
		ctl_errno(errno, "%s", tmp);
		close(fd);
		goto remove_tmp;
	}
	ctl_cdi_write(f, nodes, n);
	/* mkstemp made it 0600: runtimes run as other users (rootless) */
	if (fchmod(fd, 0644) || fflush(f) || fsync(fd)) {
		ctl_errno(errno, "%s", tmp);
		fclose(f);
		goto remove_tmp;
	}
	if (fclose(f)) {
		ctl_errno(errno, "%s", tmp);
		goto remove_tmp;
	}
	if (rename(tmp, out)) {
		ctl_errno(errno, "%s", out);
		goto remove_tmp;
	}
	return CTL_OK;

remove_tmp:
	unlink(tmp);
	return CTL_FAIL;
}

int ctl_cmd_cdi(const struct ctl_cmd *cmd, int argc, char **argv)
{
	const char *out = NULL;
	bool rdma = true;
	char **nodes = NULL;
	size_t n = 0;
	int i, ret;

	for (i = 1; i < argc; i++) {
		/*
		 * --no-rdma: /dev/mrpool alone, for the package's spec. Runtimes
		 * that inject CDI devices named in pod annotations (containerd
		 * with enable_cdi, CRI-O) would hand any pod that asks every
		 * HCA of the host through "rdma".
		 */
		if (!strcmp(argv[i], "--no-rdma")) {
			rdma = false;
			continue;
		}
		if (strcmp(argv[i], "-o") && strcmp(argv[i], "--output"))
			return ctl_usage_error(cmd, "unexpected argument '%s'",
					       argv[i]);
		if (++i == argc)
			return ctl_usage_error(cmd, "%s needs a file",
					       argv[i - 1]);
		out = argv[i];
	}
	ret = rdma ? ctl_cdi_nodes(&nodes, &n) : 0;
	if (ret) {
		ctl_errno(ret, "%s", CTL_IB_DIR);
		return CTL_FAIL;
	}
	if (rdma && !n)
		ctl_err("no RDMA device nodes in %s: the spec has no 'rdma' device",
			CTL_IB_DIR);
	if (out) {
		ret = ctl_cdi_to_file(out, nodes, n);
	} else {
		ctl_cdi_write(stdout, nodes, n);
		ret = CTL_OK;
	}
	ctl_free_names(nodes, n);
	return ret;
}
