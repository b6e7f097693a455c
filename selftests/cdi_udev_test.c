// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The package's udev rule keeps the CDI spec in step with the RDMA device
 * nodes (issue 33): debian/mrpool-utils.mrpool-cdi.udev (or the file
 * $MRPOOL_CDI_RULE: tools/deb/guest.sh names the installed one), installed
 * as the package installs it but for the tool's path (the tree's
 * mrpoolctl, or $MRPOOLCTL, for /usr/sbin/mrpoolctl), run by a real
 * systemd-udevd started for the test.
 * The guest boots without systemd or udev, so the test gives udevd a mount
 * namespace of the test's own in which the rules folders (and
 * /etc/default) are tmpfs holding nothing but that rule (and the
 * operator's choice): no other rule of the host acts on the guest's
 * devices. The test never writes the spec itself:
 *
 *   rxe_add_delete    MRPOOL_CDI_RDMA=yes in /etc/default/mrpool-cdi:
 *                     rdma link add of an rxe device writes
 *                     /run/cdi/mrpool.json with its uverbs node (and
 *                     rxe0's, rdma_cm) in "rdma"; rdma link delete writes
 *                     it again without that node, rxe0's still in
 *   default_alone     no /etc/default/mrpool-cdi: the same add writes
 *                     "default" alone
 *
 * Every wait is bounded and on a condition (the spec's contents).
 *
 * VM kernels: one
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest_harness.h"

#include "ctl_util.h"
#include "file_util.h"
#include "pool_util.h"

#define RULE_SRC	"debian/mrpool-utils.mrpool-cdi.udev"
#define RULE_TOOL	"/usr/sbin/mrpoolctl"
#define RULES_ETC	"/etc/udev/rules.d"
#define RULES_LIB	"/usr/lib/udev/rules.d"
#define RULE_DST	RULES_ETC "/60-mrpool-cdi.rules"
#define CONFIG		"/etc/default/mrpool-cdi"
#define UDEVD		"/lib/systemd/systemd-udevd"
#define UDEV_RUN	"/run/udev"
#define CDI_DIR		"/run/cdi"
#define CDI_SPEC	CDI_DIR "/mrpool.json"
#define RXE		"rxecdi"
#define NETDEV		"cdidummy0"
#define WAIT_MS		(120 * 1000)

static int write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -EIO;
}

/*
 * The rule @text with @tool for RULE_TOOL, into RULE_DST; the number of
 * commands replaced (the rule's every RUN), or -errno. Frees @text.
 */
static int rule_install(char *text, const char *tool)
{
	char *p, *q, *out;
	size_t len;
	int n = 0;

	if (!text)
		return -ENOENT;
	len = strlen(text) + 16 * strlen(tool) + 1;
	out = calloc(1, len);
	if (!out) {
		free(text);
		return -ENOMEM;
	}
	for (p = text; (q = strstr(p, RULE_TOOL)); p = q + strlen(RULE_TOOL)) {
		if (n == 16)
			break;
		strncat(out, p, q - p);
		strcat(out, tool);
		n++;
	}
	strcat(out, p);
	if (write_text(RULE_DST, out))
		n = -EIO;
	free(out);
	free(text);
	return n;
}

/* The uverbs node of RDMA device @ibdev into @node ("uverbsN"). */
static bool uverbs_of(const char *ibdev, char *node, size_t len)
{
	char path[PATH_MAX], *text;
	struct dirent *de;
	bool found = false;
	DIR *d;

	d = opendir("/sys/class/infiniband_verbs");
	if (!d)
		return false;
	while (!found && (de = readdir(d))) {
		if (strncmp(de->d_name, "uverbs", 6))
			continue;
		snprintf(path, sizeof(path), "/sys/class/infiniband_verbs/%s/ibdev",
			 de->d_name);
		text = file_slurp(path);
		if (text && !strncmp(text, ibdev, strlen(ibdev)) &&
		    (text[strlen(ibdev)] == '\n' || !text[strlen(ibdev)])) {
			found = strlen(de->d_name) < len;
			if (found)
				memcpy(node, de->d_name, strlen(de->d_name) + 1);
		}
		free(text);
	}
	closedir(d);
	return found;
}

/* Does the spec list /dev/infiniband/@node (NULL: does it exist at all)? */
static bool spec_has(const char *node)
{
	char want[128], *text;
	bool ret;

	if (!node)
		return !access(CDI_SPEC, F_OK);
	snprintf(want, sizeof(want), "\"/dev/infiniband/%s\"", node);
	text = file_slurp(CDI_SPEC);	/* empty when there is none */
	ret = text && strstr(text, want);
	free(text);
	return ret;
}

/* The spec on stderr, as TAP comments. */
static void spec_show(void)
{
	char *text = file_slurp(CDI_SPEC), *line, *save = NULL;

	if (!text)
		fprintf(stderr, "# " CDI_SPEC ": none\n");
	for (line = text ? strtok_r(text, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save))
		fprintf(stderr, "# spec: %s\n", line);
	free(text);
}

/* Files in CDI_DIR (the spec and any temporary left beside it). */
static int cdi_files(void)
{
	struct dirent *de;
	int n = 0;
	DIR *d;

	d = opendir(CDI_DIR);
	if (!d)
		return 0;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

FIXTURE(cdi) {
	pid_t udevd;
	bool udev_run_made;	/* UDEV_RUN made by the setup */
	bool rxe;		/* RXE and NETDEV to delete */
	char rxe0[32];		/* rxe0's uverbs node */
};

FIXTURE_SETUP(cdi)
{
	const char *mounts[] = { RULES_ETC, RULES_LIB, "/etc/default", UDEV_RUN };
	char tool[PATH_MAX], log[PATH_MAX], cmd[PATH_MAX + 128];
	const char *res = getenv("MRPOOL_RESULTS"), *rule;
	char *text;
	size_t i;
	int fd;

	self->udevd = -1;
	self->udev_run_made = false;
	self->rxe = false;
	if (!pool_in_vm())
		SKIP(_metadata->passed = 0; return,
		     "mounts over udev's rules and adds an RDMA device: the test VM only");
	if (access(UDEVD, X_OK))
		POOL_SETUP_SKIP("no " UDEVD);
	ASSERT_NE(NULL, ctl_tool());
	ASSERT_NE(NULL, realpath(ctl_tool(), tool));
	ASSERT_TRUE(uverbs_of("rxe0", self->rxe0, sizeof(self->rxe0)));

	/* the package's rule, before the mounts hide an installed one */
	rule = getenv("MRPOOL_CDI_RULE");
	rule = rule && *rule ? rule : RULE_SRC;
	ASSERT_EQ(0, access(rule, R_OK));
	text = file_slurp(rule);
	ASSERT_NE(NULL, text);

	/* udevd's world: this process's mount namespace, inherited */
	ASSERT_EQ(0, unshare(CLONE_NEWNS));
	ASSERT_EQ(0, mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL));
	if (!mkdir(UDEV_RUN, 0755))
		self->udev_run_made = true;
	for (i = 0; i < ARRAY_SIZE(mounts); i++) {
		ASSERT_EQ(0, mount("tmpfs", mounts[i], "tmpfs", 0, "mode=0755"))
			TH_LOG("mount tmpfs on %s: %s", mounts[i], strerror(errno));
	}
	/* its two commands the tool under test */
	ASSERT_EQ(2, rule_install(text, tool));
	unlink(CDI_SPEC);

	snprintf(log, sizeof(log), "%s/cdi-udevd.log", res ? res : "/tmp");
	self->udevd = fork();
	ASSERT_LE(0, self->udevd);
	if (!self->udevd) {
		fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		setenv("SYSTEMD_LOG_TARGET", "console", 1);
		setenv("SYSTEMD_LOG_LEVEL", "debug", 1);
		execl(UDEVD, UDEVD, (char *)NULL);
		_exit(127);
	}
	ASSERT_TRUE(POOL_WAIT(!system("udevadm control --ping >/dev/null 2>&1"),
			      WAIT_MS))
		TH_LOG("udevd did not answer (its log: %s)", log);
	/*
	 * Its answer alone let a test's rdma link add go unseen once on a
	 * loaded host (no event of it in udevd's log): wait until udevd has
	 * processed a kernel uevent, a change of rxe0's node (the rule runs
	 * on add and remove only, so no spec is written).
	 */
	snprintf(cmd, sizeof(cmd),
		 "timeout 20 udevadm trigger --settle --action=change "
		 "/sys/class/infiniband_verbs/%s >/dev/null 2>&1", self->rxe0);
	ASSERT_TRUE(POOL_WAIT(!system(cmd), WAIT_MS))
		TH_LOG("udevd processed no uevent (its log: %s)", log);
	ASSERT_NE(0, access(CDI_SPEC, F_OK));
}

FIXTURE_TEARDOWN(cdi)
{
	if (self->rxe) {
		if (system("rdma link delete " RXE " 2>&1; ip link del " NETDEV " 2>&1"))
			TH_LOG("could not delete " RXE " or " NETDEV);
	}
	if (self->udevd > 0) {
		/* its last events done (their /dev/char links gone) */
		if (system("udevadm settle --timeout=120"))
			TH_LOG("udevadm settle failed");
		kill(self->udevd, SIGTERM);
		waitpid(self->udevd, NULL, 0);
	}
	umount2(UDEV_RUN, MNT_DETACH);
	if (self->udev_run_made)
		rmdir(UDEV_RUN);
	unlink(CDI_SPEC);
	rmdir(CDI_DIR);
}

/* rdma link add RXE on NETDEV (a dummy netdev of its own). */
static int rxe_add(void)
{
	return system("ip link add " NETDEV " type dummy 2>&1 && "
		      "ip link set " NETDEV " up 2>&1 && "
		      "rdma link add " RXE " type rxe netdev " NETDEV " 2>&1");
}

/*
 * With rdma chosen, adding an RDMA device writes the spec with its uverbs
 * node, and deleting the device writes it again without: udev ran the
 * rule for both events (the test writes no spec).
 */
TEST_F_TIMEOUT(cdi, rxe_add_delete, 600)
{
	char node[32] = "";

	POOL_SETUP_SKIPPED();
	ASSERT_EQ(0, write_text(CONFIG, "MRPOOL_CDI_RDMA=yes\n"));
	ASSERT_FALSE(spec_has(NULL));
	self->rxe = true;
	ASSERT_EQ(0, rxe_add());
	ASSERT_TRUE(POOL_WAIT(uverbs_of(RXE, node, sizeof(node)), WAIT_MS));
	TH_LOG(RXE " is %s, rxe0 %s", node, self->rxe0);
	EXPECT_TRUE(POOL_WAIT(spec_has(node), WAIT_MS))
		spec_show();
	EXPECT_TRUE(spec_has(self->rxe0));
	EXPECT_TRUE(spec_has("rdma_cm"));

	ASSERT_EQ(0, system("rdma link delete " RXE " 2>&1"));
	EXPECT_TRUE(POOL_WAIT(!spec_has(node), WAIT_MS))
		spec_show();
	EXPECT_TRUE(spec_has(self->rxe0))
		spec_show();
	EXPECT_EQ(1, cdi_files());	/* the spec, no temporary */
	self->rxe = false;
	EXPECT_EQ(0, system("ip link del " NETDEV " 2>&1"));
}

/* Without the operator's choice, the rule's spec has "default" alone. */
TEST_F_TIMEOUT(cdi, default_alone, 600)
{
	char node[32] = "", *text;

	POOL_SETUP_SKIPPED();
	ASSERT_NE(0, access(CONFIG, F_OK));
	ASSERT_FALSE(spec_has(NULL));
	self->rxe = true;
	ASSERT_EQ(0, rxe_add());
	ASSERT_TRUE(POOL_WAIT(uverbs_of(RXE, node, sizeof(node)), WAIT_MS));
	ASSERT_TRUE(POOL_WAIT(spec_has(NULL), WAIT_MS));
	text = file_slurp(CDI_SPEC);
	ASSERT_NE(NULL, text);
	EXPECT_NE(NULL, strstr(text, "\"default\""));
	EXPECT_EQ(NULL, strstr(text, "\"rdma\""));
	EXPECT_EQ(NULL, strstr(text, "/dev/infiniband/"))
		spec_show();
	free(text);
}

TEST_HARNESS_MAIN
