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
 * The RDMA nodes are those present when the spec is written: a node
 * listed but absent makes the runtime refuse the container. --update
 * writes the spec the package keeps in step with the devices, CDI_RUNTIME
 * in the runtimes' directory for generated specs (which takes precedence
 * over /etc/cdi), from the package's udev rule whenever /dev/mrpool,
 * rdma_cm or a uverbs node comes or goes; whether it has "rdma" is the
 * operator's choice, MRPOOL_CDI_RDMA=yes in CDI_CONFIG. cdiVersion is
 * 0.3.0, the oldest the fields used need (device nodes by path), which
 * every CDI release since accepts, Debian 12's podman 4.3 included.
 */
#define _GNU_SOURCE	/* strverscmp */
#include "mrpoolctl.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define CTL_CDI_VERSION	"0.3.0"
#define CTL_CDI_KIND	"mrpool.io/pool"
#define CTL_IB_DIR	"/dev/infiniband"
/* cdi --update: the spec udev keeps, and the operator's choice for it */
#define CTL_CDI_RUNDIR	"/run/cdi"
#define CTL_CDI_RUNTIME	CTL_CDI_RUNDIR "/mrpool.json"
#define CTL_CDI_CONFIG	"/etc/default/mrpool-cdi"
#define CTL_CDI_RDMA	"MRPOOL_CDI_RDMA"
/* --update's writers' lock (ctl_cdi_lock()) and how long it waits, s */
#define CTL_CDI_LOCKDIR	"/run/mrpool"
#define CTL_CDI_LOCKNAME	"cdi.lock"
#define CTL_CDI_LOCK_WAIT	30

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

/*
 * The writers' lock of --update: CTL_CDI_LOCK, a file in CTL_CDI_LOCKDIR
 * (made 0700; refused unless a directory of ours, not a symlink, that no
 * group or other may write), so that no other user can open it, let alone
 * hold it (/run/cdi is 0755, and a flock() needs only a read-only fd; a
 * user holding one would stall every udev worker that runs --update, and
 * dpkg). Writers run side by side (udev runs one per event, in parallel
 * workers), and each reads the nodes under the lock, so the last to rename
 * its spec read them after every node that came or went before it started.
 * The wait is bounded, CTL_CDI_LOCK_WAIT seconds (well under udev's 180 s
 * event timeout), then it fails, said why; MRPOOLCTL_CDI_LOCK_WAIT (in
 * seconds, 0: no wait) overrides it, for the host tests alone. Returns the
 * fd to close to unlock, or -1 (said why).
 */
static volatile sig_atomic_t ctl_cdi_timed_out;

static void ctl_cdi_alarm(int sig)
{
	(void)sig;
	ctl_cdi_timed_out = 1;
}

static int ctl_cdi_lock(void)
{
	char dir[CTL_PATH_MAX];
	unsigned int wait_s = CTL_CDI_LOCK_WAIT;
	struct sigaction sa = { 0 }, old;
	const char *env;
	struct stat st;
	int dfd, fd;

	env = getenv("MRPOOLCTL_CDI_LOCK_WAIT");
	if (env && *env)
		wait_s = strtoul(env, NULL, 10);
	ctl_path(dir, sizeof(dir), CTL_CDI_LOCKDIR);
	if (mkdir(dir, 0700) && errno != EEXIST) {
		ctl_errno(errno, "%s", dir);
		return -1;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		ctl_errno(errno, "%s", dir);
		return -1;
	}
	if (fstat(dfd, &st)) {
		ctl_errno(errno, "%s", dir);
		close(dfd);
		return -1;
	}
	if (st.st_uid != geteuid() || (st.st_mode & 022)) {
		ctl_err("%s: owned by uid %u, mode %04o: not the lock's folder "
			"(made by root, mode 0700)", dir, (unsigned int)st.st_uid,
			(unsigned int)(st.st_mode & 07777));
		close(dfd);
		return -1;
	}
	fd = openat(dfd, CTL_CDI_LOCKNAME,
		    O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		ctl_errno(errno, "%s/" CTL_CDI_LOCKNAME, dir);
		close(dfd);
		return -1;
	}
	close(dfd);
	/*
	 * A blocking flock() (so a waiter is listed in /proc/locks) that
	 * SIGALRM interrupts when the time is up: no SA_RESTART.
	 */
	sa.sa_handler = ctl_cdi_alarm;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, &old);
	ctl_cdi_timed_out = 0;
	alarm(wait_s);
	while (flock(fd, wait_s ? LOCK_EX : LOCK_EX | LOCK_NB)) {
		if (errno == EINTR && !ctl_cdi_timed_out)
			continue;
		if (errno == EINTR || errno == EWOULDBLOCK)
			ctl_err("%s/" CTL_CDI_LOCKNAME ": still locked after %u s "
				"(another mrpoolctl cdi --update stuck?): "
				CTL_CDI_RUNTIME " not written", dir, wait_s);
		else
			ctl_errno(errno, "lock %s/" CTL_CDI_LOCKNAME, dir);
		close(fd);
		fd = -1;
		break;
	}
	alarm(0);
	sigaction(SIGALRM, &old, NULL);
	return fd;
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

/*
 * The operator's choice for --update: *@rdma from CTL_CDI_RDMA=yes|no in
 * @path (shell syntax, as /etc/default files are: comments, blank lines,
 * other variables, the value optionally quoted); no file or no such line
 * is no. Anything else fails: a spec the operator did not choose is not
 * written.
 */
static int ctl_cdi_config(const char *path, bool *rdma)
{
	char *line = NULL, *p, *v, *end;
	int lineno = 0, ret = CTL_OK;
	size_t size = 0;
	FILE *f;

	*rdma = false;
	f = fopen(path, "re");
	if (!f) {
		if (errno == ENOENT)
			return CTL_OK;
		ctl_errno(errno, "%s", path);
		return CTL_FAIL;
	}
	/* getline: a line of any length is one line (no tail read as one) */
	while (getline(&line, &size, f) >= 0) {
		lineno++;
		for (p = line; *p == ' ' || *p == '\t'; p++)
			;
		if (!strncmp(p, "export ", 7))
			p += 7;
		if (strncmp(p, CTL_CDI_RDMA "=", strlen(CTL_CDI_RDMA) + 1))
			continue;
		v = p + strlen(CTL_CDI_RDMA) + 1;
		end = v + strcspn(v, " \t\r\n#");
		if ((*v == '"' || *v == '\'') && end > v + 1 && end[-1] == *v) {
			v++;
			end--;
		}
		*end = '\0';
		if (!strcmp(v, "yes")) {
			*rdma = true;
		} else if (!strcmp(v, "no")) {
			*rdma = false;
		} else {
			ctl_err("%s:%d: " CTL_CDI_RDMA " is '%s', not yes or no",
				path, lineno, v);
			ret = CTL_FAIL;
		}
	}
	free(line);
	fclose(f);
	return ret;
}

/*
 * The spec to @out (stdout when NULL), with "rdma" when @rdma (and the
 * host has a uverbs node). @update: --update's, under its writers' lock,
 * and no note for a host with no uverbs node yet.
 */
static int ctl_cdi_emit(const char *out, bool rdma, bool update)
{
	char **nodes = NULL;
	int lock = -1, ret;
	size_t n = 0;

	if (update) {
		lock = ctl_cdi_lock();
		if (lock < 0)
			return CTL_FAIL;
	}
	ret = rdma ? ctl_cdi_nodes(&nodes, &n) : 0;
	if (ret) {
		ctl_errno(ret, "%s", CTL_IB_DIR);
		ret = CTL_FAIL;
		goto unlock;
	}
	if (rdma && !n && !update)
		ctl_err("no RDMA device nodes in %s: the spec has no 'rdma' device",
			CTL_IB_DIR);
	if (out) {
		ret = ctl_cdi_to_file(out, nodes, n);
	} else {
		ctl_cdi_write(stdout, nodes, n);
		ret = CTL_OK;
	}
	ctl_free_names(nodes, n);
unlock:
	if (lock >= 0)
		close(lock);
	return ret;
}

/*
 * --update: CTL_CDI_RUNTIME (CTL_CDI_RUNDIR made if missing), "rdma" as
 * CTL_CDI_CONFIG says. Run by the package's udev rule on every add and
 * remove of a node the spec may name, and by its postinst; a host whose
 * RDMA driver is not up yet has no uverbs node, so no note for that.
 */
static int ctl_cdi_update(void)
{
	char config[CTL_PATH_MAX], dir[CTL_PATH_MAX], out[CTL_PATH_MAX];
	bool rdma;

	if (ctl_cdi_config(ctl_path(config, sizeof(config), CTL_CDI_CONFIG),
			   &rdma))
		return CTL_FAIL;
	/* 0755 whatever the umask: rootless runtimes read it too */
	ctl_path(dir, sizeof(dir), CTL_CDI_RUNDIR);
	if (!mkdir(dir, 0755) ? chmod(dir, 0755) : errno != EEXIST) {
		ctl_errno(errno, "%s", dir);
		return CTL_FAIL;
	}
	return ctl_cdi_emit(ctl_path(out, sizeof(out), CTL_CDI_RUNTIME), rdma,
			    true);
}

int ctl_cmd_cdi(const struct ctl_cmd *cmd, int argc, char **argv)
{
	bool rdma = true, update = false;
	const char *out = NULL;
	int i;

	for (i = 1; i < argc; i++) {
		/*
		 * --no-rdma: /dev/mrpool alone, the package's default. Runtimes
		 * that inject CDI devices named in pod annotations (containerd
		 * with enable_cdi, CRI-O) would hand any pod that asks every
		 * HCA of the host through "rdma".
		 */
		if (!strcmp(argv[i], "--no-rdma")) {
			rdma = false;
			continue;
		}
		if (!strcmp(argv[i], "--update")) {
			update = true;
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
	if (update && (out || !rdma))
		return ctl_usage_error(cmd, "--update takes no other option: "
				       "its file is " CTL_CDI_RUNTIME
				       ", its choice of rdma in " CTL_CDI_CONFIG);
	if (update)
		return ctl_cdi_update();
	return ctl_cdi_emit(out, rdma, false);
}
