#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Builds the module and the test modules (selftests/kmod_rdma,
# selftests/dmabuf_import) against the newest kernels Debian serves beyond
# Debian 12: the newest linux-headers of trixie-backports, and sid's newest
# when it is a newer kernel than that one (build only). Their linux-kbuild
# needs a newer glibc than Debian 12's, so each builds inside a chroot of
# its suite made by mmdebstrap (--variant=buildd plus the headers and
# libibverbs-dev), cached outside the checkout so every clone reuses it:
#
#   ${MRPOOL_CACHE:-/var/cache/mrpool}/newkernel-<target>-<abi>-<version>-<hash>
#
# <abi> and <version> are the headers' (resolved with apt each run: they
# move with every upload), <hash> that of the suites and the package list.
# A chroot is made in a temporary folder beside it and renamed when whole;
# older chroots of the same target are removed once a newer one is whole.
# The versions are resolved by an apt of the script's own (its sources,
# lists and empty dpkg status under newkernel-apt/ in the cache): the
# host's apt sources and packages are never touched.
#
# The tracked sources (git ls-files, as the top Makefile's modules_for) are
# copied to OUT/build-new (trixie-backports) and OUT/build-new-sid, where
# the .ko files stay for a guest run, with the kernel's ABI in the file
# kabi; each make's log is beside them (make-*.log). A build that leaves
# any "warning:" in its log fails, as one that fails outright.
#
# The TAP is kept in OUT/newkernel.tap too (make check's summary reads it).
#
#   tools/newkernel/build.sh [--out OUT] [--target trixie-backports|sid]
#   tools/newkernel/build.sh [--out OUT] --fetch
#
# OUT defaults to the checkout's .cache. --target builds that one only (sid
# then builds even when it is not newer). --fetch builds nothing: it makes
# (or finds) trixie-backports' chroot and fetches that kernel for the
# guest (tools/vm/run --kernel 7.3): linux-image-<abi> is only a
# metapackage of linux-binary-<abi> (the kernel, at
# usr/lib/modules/<abi>/vmlinuz) and linux-modules-<abi>, both downloaded
# by the script's apt and unpacked into OUT/guest/<abi> (lib -> usr/lib,
# depmod'ed), and OUT/newkernel.mk names them: NEW_KABI, NEW_ROOT and
# NEW_SERIES (7.3), read by tools/vm/run and tools/check.sh.
# tools/deps.sh runs --fetch. TAP on stdout, progress on stderr; status 1
# if a build or the fetch failed, 4 if a prerequisite is missing (root,
# mmdebstrap, unshare, git, a Debian mirror in the host's apt).
# The first run (two chroots' downloads) and a cached rebuild take the
# times README.md's kernel section gives.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
cache=${MRPOOL_CACHE:-/var/cache/mrpool}
out=$top/.cache
only='' fetch=0
flavour=$(dpkg --print-architecture)
# What the chroots hold besides the buildd variant (build-essential):
# the headers are added per target.
include=libibverbs-dev

say() { printf '[newkernel] %s\n' "$*" >&2; }
skip() { say "$*"; exit 4; }
usage() { echo "usage: $0 [--out DIR] [--target trixie-backports|sid | --fetch]" >&2; exit 2; }

while (($#)); do
	case $1 in
	--out) out=${2:-}; shift 2 || usage; [ -n "$out" ] || usage ;;
	--target) only=${2:-}; shift 2 || usage ;;
	--fetch) fetch=1; shift ;;
	*) usage ;;
	esac
done
case $only in
'' | trixie-backports | sid) ;;
*) usage ;;
esac
[ "$fetch" = 0 ] || [ -z "$only" ] || usage

((EUID == 0)) || skip "needs root (mmdebstrap's root mode, mounts in the chroot)"
for c in mmdebstrap unshare chroot git; do
	command -v "$c" >/dev/null || skip "$c not installed"
done
git -C "$top" rev-parse --git-dir >/dev/null 2>&1 || skip "$top is no git checkout"

# The Debian archive this machine's apt uses (its stable suite's site),
# which serves the other suites too.
# shellcheck disable=SC1091  # the host's, read at run time
codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
# shellcheck disable=SC2016  # apt's format fields, not the shell's
mirror=$(apt-get indextargets --format '$(REPO_URI) $(CODENAME) $(LABEL)' |
	awk -v c="$codename" '$2 == c && $3 == "Debian" { print $1; exit }')
[ -n "$mirror" ] || skip "no Debian mirror for $codename in the host's apt (apt-get update)"

# What the host's apt says about reaching its mirror (a proxy; this
# machine's snapshot mirror serves Release files past their Valid-Until),
# for mmdebstrap's apt as for the script's own.
aptopts=()
for k in Check-Valid-Until Check-Date http::Proxy https::Proxy; do
	# shellcheck disable=SC2016  # apt-config's format fields
	o=$(apt-config dump --no-empty --format '%f "%v";%n' "Acquire::$k")
	[ -z "$o" ] || aptopts+=(--aptopt="$o")
done

# A target's suite (what mmdebstrap installs), its sources' suites and its
# build folder.
suite_of() {
	case $1 in trixie-backports) echo trixie ;; *) echo "$1" ;; esac
}
suites_of() {
	case $1 in trixie-backports) echo trixie trixie-backports ;; *) echo "$1" ;; esac
}
outdir_of() {
	case $1 in trixie-backports) echo "$out/build-new" ;; *) echo "$out/build-new-$1" ;; esac
}

# sources TARGET: the deb822 sources of a target's apt and chroot.
sources() {
	cat <<-EOF
	Types: deb
	URIs: $mirror
	Suites: $(suites_of "$1")
	Components: main
	Architectures: $flavour
	Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
	EOF
}

# resolve TARGET: sets abi and ver to the newest linux-headers-ABI package
# of the target's suites and its version, from the target's own apt state,
# updated first.
resolve() {
	local dir=$cache/newkernel-apt/$1 lock
	abi='' ver=''
	mkdir -p "$dir/sources.list.d" "$dir/lists/partial" "$dir/cache/archives/partial"
	exec {lock}>"$dir/.lock"
	flock "$lock"
	sources "$1" >"$dir/sources.list.d/debian.sources"
	: >"$dir/status"
	# Read after the host's configuration (which may say how to reach the
	# mirror); its update hooks are for the host's lists, not these.
	cat >"$dir/apt.conf" <<-EOF
	Dir::Etc::SourceList "/dev/null";
	Dir::Etc::SourceParts "$dir/sources.list.d";
	Dir::Etc::Preferences "/dev/null";
	Dir::Etc::PreferencesParts "/dev/null";
	Dir::State::Lists "$dir/lists";
	Dir::State::status "$dir/status";
	Dir::Cache "$dir/cache";
	APT::Architectures { "$flavour"; };
	#clear APT::Update::Post-Invoke;
	#clear APT::Update::Post-Invoke-Success;
	EOF
	if apt-get -c "$dir/apt.conf" -q update >"$dir/update.log" 2>&1; then
		abi=$(apt-cache -c "$dir/apt.conf" search --names-only \
			"^linux-headers-[0-9][^-]*-$flavour\$" |
			sed "s/^linux-headers-\([^ ]*\) .*/\1/" | sort -V | tail -n1)
		[ -z "$abi" ] || ver=$(apt-cache -c "$dir/apt.conf" show --no-all-versions \
			"linux-headers-$abi" | sed -n 's/^Version: //p' | head -n1)
		[ -n "$ver" ] || say "no linux-headers-*-$flavour in $(suites_of "$1")"
	else
		cat "$dir/update.log" >&2
		say "apt-get update failed for $1"
	fi
	exec {lock}>&-
	[ -n "$ver" ]
}

# upstream ABI: the kernel's own version (7.3.4 of 7.3.4+deb13-amd64)
upstream() { local v=${1%-"$flavour"}; echo "${v%%+*}"; }

# chroot_for TARGET ABI VERSION: sets root to the chroot, made unless
# cached, and holds its lock shared on fd 9 (for the builds) when it
# returns.
chroot_for() {
	local key dir work start old
	root=
	key=$(printf '%s\n' "$(suites_of "$1")" "$include" | sha256sum | cut -c1-8)
	dir=$cache/newkernel-$1-$2-$3-$key
	mkdir -p "$cache"
	exec 9>"$cache/.lock-${dir##*/}"
	flock 9
	if [ -d "$dir" ]; then
		say "cached: $dir"
	else
		say "making the $(suite_of "$1") chroot with linux-headers-$2 $3"
		start=$SECONDS
		work=$(mktemp -d "$cache/.build-${dir##*/}.XXXXXX")
		sources "$1" >"$work/debian.sources"
		# /build: the mount point of a build's sources.
		# shellcheck disable=SC2016  # mmdebstrap's hook expands $1
		if ! nice -n 10 mmdebstrap --variant=buildd "${aptopts[@]}" \
			--include="linux-headers-$2,$include" \
			--dpkgopt='path-exclude=/usr/share/doc/*' \
			--dpkgopt='path-exclude=/usr/share/man/*' \
			--dpkgopt='path-exclude=/usr/share/locale/*' \
			--customize-hook='mkdir -p "$1/build"' \
			"$(suite_of "$1")" "$work/root" "$work/debian.sources" \
			>"$work/mmdebstrap.log" 2>&1; then
			grep -E '^(E|W):' "$work/mmdebstrap.log" >&2 || tail -n 20 "$work/mmdebstrap.log" >&2
			rm -rf "$work"
			say "mmdebstrap failed"
			return 1
		fi
		mv "$work/root" "$dir"
		rm -rf "$work"
		say "chroot ready in $((SECONDS - start)) s: $dir"
		# The target's older chroots, unless a build holds one.
		for old in "$cache/newkernel-$1-"*; do
			if [ "$old" = "$dir" ] || [ ! -d "$old" ]; then
				continue
			fi
			(
				exec 8>"$cache/.lock-${old##*/}"
				flock -n 8 || exit 0
				rm -rf "$old" "$cache/.lock-${old##*/}"
				say "removed the older $old"
			)
		done
	fi
	flock -s 9
	root=$dir
}

# in_chroot ROOT SRC CMD...: runs CMD in ROOT with proc mounted (objtool
# reads it) and SRC at /build, in a mount namespace of its own (the
# mounts go with it).
in_chroot() {
	# shellcheck disable=SC2016  # the inner shell's arguments
	unshare --mount --propagation private -- /bin/sh -c '
		root=$1 src=$2; shift 2
		mount -t proc proc "$root/proc" &&
		mount --bind "$src" "$root/build" &&
		exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
			HOME=/root LC_ALL=C "$@"' sh "$@"
}

n=0 failed=0 tapf=
emit() { echo "$*"; [ -z "$tapf" ] || echo "$*" >>"$tapf"; }
tap() {	# tap OK|FAIL|SKIP TEXT...
	local text=${*:2}
	n=$((n + 1))
	case $1 in
	OK) emit "ok $n - $text" ;;
	FAIL) emit "not ok $n - $text"; failed=1 ;;
	SKIP) emit "ok $n # SKIP $text" ;;
	esac
}

# build TARGET: the three modules against the target's newest headers.
build() {
	local bdir name m ko log
	resolve "$1" || { tap FAIL "$1: the newest kernel headers resolve"; return 0; }
	chroot_for "$1" "$abi" "$ver" ||
		{ tap FAIL "$1: a chroot with linux-headers-$abi"; return 0; }
	bdir=$(outdir_of "$1")
	rm -rf "$bdir" && mkdir -p "$bdir"
	git -C "$top" ls-files Kbuild kmod include selftests/kmod_rdma selftests/dmabuf_import |
		tar -C "$top" -cf - -T - | tar -C "$bdir" -xf -
	echo "$abi" >"$bdir/kabi"
	say "building against $abi ($ver) in $bdir"
	# Kbuild directory : the module it builds (mrpool.ko first: the test
	# modules link against its Module.symvers).
	for m in .:kmod/mrpool selftests/kmod_rdma:mrpool_rdma_ktest \
		selftests/dmabuf_import:mrpool_dmabuf_itest; do
		ko=$bdir/${m%%:*}/${m#*:}.ko
		name=$(basename "$ko")
		log=$bdir/make-${name%.ko}.log
		if in_chroot "$root" "$bdir" nice -n 10 make -j"$(nproc)" \
			-C "/lib/modules/$abi/build" "M=/build/${m%%:*}" modules >"$log" 2>&1 &&
			[ -f "$ko" ] && ! grep -qi 'warning:' "$log"; then
			tap OK "$name builds against $abi with no warning"
		else
			tap FAIL "$name builds against $abi with no warning"
			grep -iE 'warning:|error' "$log" | head -n 20 |
				while IFS= read -r l; do emit "# $l"; done
			emit "# log: $log"
		fi
	done
	exec 9>&-
}

# fetch_guest: trixie-backports' chroot and its newest kernel for the
# guest, unpacked into OUT/guest/ABI, named in OUT/newkernel.mk.
fetch_guest() {
	local conf=$cache/newkernel-apt/trixie-backports/apt.conf guest dl pkgs p
	resolve trixie-backports || { tap FAIL "trixie-backports: the newest kernel headers resolve"; return 0; }
	chroot_for trixie-backports "$abi" "$ver" ||
		{ tap FAIL "trixie-backports: a chroot with linux-headers-$abi"; return 0; }
	exec 9>&-
	tap OK "trixie-backports: a chroot with linux-headers-$abi ($ver)"
	guest=$out/guest/$abi
	if [ -f "$guest/.done" ]; then
		say "guest kernel $abi: cached"
	else
		say "fetching the guest kernel $abi"
		# What linux-image-ABI depends on of its own version (the
		# kernel and its modules), or the image itself where it holds
		# them (the older layout).
		pkgs=$(apt-cache -c "$conf" depends "linux-image-$abi" 2>/dev/null |
			sed -n "s/^ *Depends: \(linux-\(binary\|modules\)-$abi\)\$/\1/p")
		[ -n "$pkgs" ] || pkgs=linux-image-$abi
		rm -rf "$guest" && mkdir -p "$guest"
		dl=$(mktemp -d "$out/guest/.dl.XXXXXX")
		# shellcheck disable=SC2086  # package names
		if ! (cd "$dl" && apt-get -c "$conf" download -q $pkgs >"$dl/download.log" 2>&1); then
			cat "$dl/download.log" >&2
			rm -rf "$dl"
			tap FAIL "the guest kernel $abi downloads ($pkgs)"
			return 0
		fi
		for p in "$dl"/*.deb; do dpkg -x "$p" "$guest"; done
		rm -rf "$dl"
		# Debian 13 keeps modules in usr/lib only: depmod -b and the
		# guest (tools/vm/guest.sh) look below lib/.
		[ -e "$guest/lib" ] || ln -s usr/lib "$guest/lib"
		# What the kernel builds in, the modules' order and its config
		# come with its headers (in the chroot), not with its modules:
		# without them modprobe finds no virtio_pci (built in).
		for p in modules.order modules.builtin modules.builtin.modinfo config; do
			[ ! -f "$root/usr/lib/modules/$abi/$p" ] ||
				cp "$root/usr/lib/modules/$abi/$p" "$guest/lib/modules/$abi/"
		done
		depmod -b "$guest" "$abi"
		touch "$guest/.done"
	fi
	if [ -f "$guest/lib/modules/$abi/vmlinuz" ] || [ -f "$guest/boot/vmlinuz-$abi" ]; then
		tap OK "the guest kernel $abi is unpacked in $guest"
	else
		tap FAIL "the guest kernel $abi is unpacked in $guest (no vmlinuz)"
		return 0
	fi
	{
		echo "# written by tools/newkernel/build.sh --fetch"
		echo "NEW_KABI := $abi"
		echo "NEW_ROOT := $guest"
		echo "NEW_SERIES := $(upstream "$abi" | cut -d. -f1,2)"
	} >"$out/newkernel.mk.tmp"
	mv "$out/newkernel.mk.tmp" "$out/newkernel.mk"
}

start=$SECONDS abi='' ver='' root=
mkdir -p "$out"
if ((fetch)); then
	fetch_guest
	echo "1..$n"
	say "took $((SECONDS - start)) s"
	exit "$failed"
fi
tapf=$out/newkernel.tap
: >"$tapf"
if [ "$only" != sid ]; then
	build trixie-backports
fi
if [ "$only" = sid ]; then
	build sid
elif [ -z "$only" ]; then
	# sid only when it brings a newer kernel than trixie-backports.
	babi=$abi
	if ! resolve sid; then
		tap FAIL "sid: the newest kernel headers resolve"
	elif [ -z "$babi" ]; then
		tap SKIP "sid: trixie-backports' kernel did not resolve, nothing to compare"
	elif dpkg --compare-versions "$(upstream "$abi")" gt "$(upstream "$babi")"; then
		build sid
	else
		tap SKIP "sid's newest kernel $abi is not newer than trixie-backports' $babi:" \
			"nothing more to build"
	fi
fi
emit "1..$n"
say "took $((SECONDS - start)) s"
exit "$failed"
