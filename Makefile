# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# mrpool top-level build.
#
#   make              module (kmod/mrpool.ko), lib/, tools/, selftests/
#   make demo         the demo's deps (tools/deps.sh --demo) + module, lib and
#                     tools + boot the VM + RDMA transfer through the pool
#   make check        deps + build (for the 6.1, 6.12 and 7.3 guests) + every
#                     test; last line "N passed, N failed, N skipped"
#   make check-quick  build + host tests (plain, ASan) + static checks + the VM
#                     tests a change touches (TESTS="a_test b_test" names them;
#                     tools/check-quick.sh): minutes, for the inner loop
#   make check-busy   make check while a kernel build loop keeps every CPU busy
#   make check-debug  deps + the debug guest kernel (KASAN, lockdep, kmemleak,
#                     fault injection; built once into /var/cache/mrpool) + the
#                     module for it + the selftests (PART=1), the short
#                     reliability suite and the fault-injection run (PART=2)
#                     on it; last line "N passed, N failed, N skipped"
#   make check-arm64-system  deps + the library's host tests on Debian's arm64
#                     kernels (6.1; 6.12 with 16 KiB pages) in qemu-system-aarch64
#                     (tools/arm64/run; root and kernels cached in
#                     /var/cache/mrpool); part of make check
#   make stress       the reliability suite's long form on both guests (hours),
#                     in parts of at most 40 minutes (PART=N runs one;
#                     tools/stress.sh --list)
#   make slice SLICE=N  one slice of the long proofs (stress and check-debug
#                     parts; tools/slices.sh list); SLICE=ci: this commit's,
#                     as CI runs it after make check
#   make bench        deps + build + the benchmark scenarios (VM and host);
#                     report in results/bench/report.md (not part of check)
#   make modules-6.12 the module and test modules for the 6.12 guest
#   make modules-new  the module and test modules against trixie-backports'
#                     newest kernel (7.3 today), and sid's if newer, built
#                     with no warning in a chroot of that suite
#                     (tools/newkernel/build.sh): .cache/build-new, build-new-sid
#   make modules-debug  the debug guest kernel (tools/vm/debug-kernel.sh) and
#                     the module and test modules for it
#   make deps         Debian packages, guest kernel, kselftest headers (tools/deps.sh)
#   make deb          Debian packages in build/deb/, checked by lintian
#   make check-deb    install them here, boot both guests with them, purge
#   make install      library, header, pkg-config file, tools, man pages (DESTDIR, PREFIX)
#   make modules_install   the module, for the kernel in KDIR
#   make C=1          the module build under sparse
#   make OFA_DIR=DIR  the module against MLNX_OFED/DOCA's ib_core (tools/ofa/test.sh)
#
# KDIR defaults to the running kernel's build tree; where there is none (as
# on the development machines, whose kernel loads no modules) it is the
# cached guest kernel's headers from tools/deps.sh.

TOP := $(CURDIR)
-include $(TOP)/.cache/env.mk

KVER ?= $(shell uname -r)
ifeq ($(origin KDIR),undefined)
KDIR := $(firstword $(wildcard /lib/modules/$(KVER)/build) $(GUEST_KDIR))
endif
PREFIX ?= /usr/local
export PREFIX DESTDIR KSFT_DIR

.PHONY: all module modules-6.12 modules-new modules-debug lib tools selftests deps demo check \
	check-busy check-quick check-debug check-arm64-system stress slice bench deb check-deb \
	install modules_install clean

all: module lib tools selftests

module:
	@test -n "$(KDIR)" || { echo "no kernel build tree: install linux-headers-$$(uname -r) or run 'make deps'"; exit 1; }
	$(MAKE) -C $(KDIR) M=$(TOP) modules

# The module and the test modules for another guest kernel (tools/vm/run
# --kernel 6.12|debug), built from a copy of their sources: Kbuild writes
# its objects next to the sources, and two kernels' builds must not
# overwrite each other. The copy keeps the sources' times, so a second
# build compiles only what changed. $(call modules_for,BUILD DIR,KERNEL TREE)
define modules_for
	mkdir -p $(1)
	git -C $(TOP) ls-files Kbuild kmod include selftests/kmod_rdma selftests/dmabuf_import | \
		tar -C $(TOP) -cf - -T - | tar -C $(1) -xf -
	$(MAKE) -C $(2) M=$(1) modules
	$(MAKE) -C $(2) M=$(1)/selftests/kmod_rdma modules
	$(MAKE) -C $(2) M=$(1)/selftests/dmabuf_import modules
endef

B612 := $(TOP)/.cache/build-6.12
modules-6.12:
	@test -n "$(GUEST_KDIR_612)" || { echo "no 6.12 headers: run 'make deps'"; exit 1; }
	+$(call modules_for,$(B612),$(GUEST_KDIR_612))

# Kernels newer than Debian 12's need their suite's linux-kbuild (glibc
# 2.38+): the script builds in a cached chroot of that suite and prints TAP.
BNEW := $(TOP)/.cache
modules-new:
	$(TOP)/tools/newkernel/build.sh --out $(BNEW)

# The debug kernel is built (or found in its cache) first.
BDEBUG := $(TOP)/.cache/build-debug
modules-debug:
	$(TOP)/tools/vm/debug-kernel.sh >/dev/null
	+$(call modules_for,$(BDEBUG),$$($(TOP)/tools/vm/debug-kernel.sh --path))

lib:
	$(MAKE) -C lib

tools: lib
	$(MAKE) -C tools

selftests: lib module
	$(MAKE) -C selftests KDIR=$(KDIR)

deps:
	tools/deps.sh

# The guest boots the kernel tools/deps.sh cached, so both commands build
# against its headers whatever the host runs. The demo installs and builds
# only what it runs (tools/deps.sh --demo: the 6.1 guest, no kselftest
# headers, no selftests), so a first make demo does not wait for the
# suite's packages; make check installs the rest.
demo:
	tools/deps.sh --demo
	$(MAKE) -f $(TOP)/Makefile module lib tools KDIR=$$(sed -n 's/^GUEST_KDIR := //p' .cache/env.mk)
	tools/vm/run --name demo -- tools/demo/demo.sh

# The builds at once, on every core (modules-new: for the 7.3 guest, in
# its chroot, TAP in .cache/newkernel.tap for the summary); tools/check.sh
# times them from MRPOOL_MAKE_START (when make began: deps too).
check: export MRPOOL_MAKE_START := $(shell date +%s)
check: deps
	$(MAKE) -j$$(nproc) -f $(TOP)/Makefile all modules-6.12 modules-new \
		KDIR=$$(sed -n 's/^GUEST_KDIR := //p' .cache/env.mk)
	tools/check.sh

# The inner loop: what a change touches, in minutes (tools/check-quick.sh).
# TESTS names VM tests only: with empty MAKEFLAGS it does not reach the
# inner makes, where lib's own TESTS (its host tests) would take its value.
check-quick: deps
	MAKEFLAGS= $(MAKE) -f $(TOP)/Makefile all KDIR=$$(sed -n 's/^GUEST_KDIR := //p' .cache/env.mk)
	MAKEFLAGS= tools/check-quick.sh $(TESTS)

# No test may depend on timing: the whole check again on a loaded host.
check-busy: deps
	tools/busy.sh $(MAKE) -f $(TOP)/Makefile check

# The selftests, the short reliability suite and the fault-injection run
# on the debug guest kernel (tools/check-debug.sh), PART=1 or 2 for one
# half. Not in make check (CI runs one part of it, or of make stress, per
# landing: make slice): the kernel takes ~13 min to build once, and its
# guests run ~5x slower.
check-debug: deps
	$(MAKE) -f $(TOP)/Makefile all KDIR=$$(sed -n 's/^GUEST_KDIR := //p' .cache/env.mk)
	$(MAKE) -f $(TOP)/Makefile modules-debug
	tools/check-debug.sh $(if $(PART),--part $(PART))

# The library's host tests on arm64 kernels: 48-bit VA, 16 KiB pages (make
# check runs it too).
check-arm64-system: deps
	tools/arm64/run

# Fuzzer, kill storm, device churn, reloads, memory pressure at length.
stress: deps
	$(MAKE) -f $(TOP)/Makefile all KDIR=$$(sed -n 's/^GUEST_KDIR := //p' .cache/env.mk)
	$(MAKE) -f $(TOP)/Makefile modules-6.12
	tools/stress.sh $(if $(PART),--part $(PART))

# One slice of the long proofs (tools/slices.sh): SLICE=N, or SLICE=ci.
slice: deps
	tools/slices.sh $(if $(filter ci,$(SLICE)),ci,run $(SLICE))

# alloc, reg, rdma, odp, served (on rxe0) and glibc (ordinary programs'
# allocations without and under the shim, the kernel's pool) in one VM run,
# odp in the 7.3 guest (its modules: make modules-new), fastpath, served and
# glibc on the host (served preloads the shim with the host tests' fake
# verbs; glibc runs on the anon backend), then the report
# (tools/bench/bench.sh). Figures only: nothing asserted, not in check.
bench:
	tools/deps.sh --bench
	$(MAKE) -f $(TOP)/Makefile all KDIR=$$(sed -n 's/^GUEST_KDIR := //p' .cache/env.mk)
	$(MAKE) -f $(TOP)/Makefile modules-new
	$(MAKE) -C tools/bench scenarios
	$(MAKE) -C lib build/preload_fake_verbs.so
	tools/bench/bench.sh

# From a copy of the tracked (and new, unignored) files: the package build
# cleans and builds in its tree, which must not touch this one's objects.
DEB := $(TOP)/build/deb
deb: deps
	rm -rf $(DEB) && mkdir -p $(DEB)/src
	git -C $(TOP) ls-files -co --exclude-standard | \
		tar -C $(TOP) -cf - -T - | tar -C $(DEB)/src -xf -
	cd $(DEB)/src && dpkg-buildpackage -us -uc -b
	lintian --fail-on error,warning --info $(DEB)/*.changes

check-deb: deb
	tools/deb/test.sh

install: lib tools
	$(MAKE) -C lib install
	$(MAKE) -C tools install
	install -D -m 644 kmod/mrpool.4 $(DESTDIR)$(PREFIX)/share/man/man4/mrpool.4

modules_install:
	$(MAKE) -C $(KDIR) M=$(TOP) modules_install

# Kbuild's clean deletes every *.ko and *.o below M=: with M=$(TOP) that
# was the guest kernels' modules cached in .cache/ too (the next guest
# could not boot). Only kmod/ is cleaned by Kbuild.
clean:
	-$(if $(KDIR),$(MAKE) -C $(KDIR) M=$(TOP)/kmod clean)
	rm -f Module.symvers modules.order .Module.symvers.cmd .modules.order.cmd
	$(MAKE) -C lib clean
	$(MAKE) -C tools clean
	$(MAKE) -C selftests clean
	rm -rf results build
