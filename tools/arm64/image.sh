#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Builds the arm64 system guest's boot files (tools/arm64/run) and caches
# them outside the checkout, so that every clone on the machine reuses them:
#
#   ${MRPOOL_CACHE:-/var/cache/mrpool}/arm64-<abi>-<version>-<hash>/
#       vmlinuz     a Debian 12 arm64 kernel (linux-image-<abi>:arm64), an
#                   uncompressed Image that qemu -kernel boots directly:
#                   6.1     Debian 12's own (linux-image-arm64): 4 KiB pages,
#                           48-bit VA
#                   6.12-16k  its security suite's 6.12 with 16 KiB pages
#                           (linux-image-6.12-arm64-16k): 52-bit VA where
#                           the CPU has LPA2, else 47
#       config      its configuration
#       root.cpio.gz  the root: Debian's arm64 libc, libibverbs and libnl,
#                   and busybox, unpacked by mmdebstrap (--variant=extract:
#                   no maintainer script runs, so no arm64 emulation of the
#                   host is needed), as an initramfs
#       packages    what the root holds, package and version per line
#
# <hash> is that of this script's code, comments aside (the package list
# is in it). The files are
# made in a temporary folder beside it and renamed when complete: a folder
# of that name is a whole build. The root comes from the Debian archive this
# machine's apt uses (its sources files are handed to mmdebstrap).
#
#   tools/arm64/image.sh [--kernel 6.1|6.12-16k]          build unless
#                                  cached; print the folder (default 6.1)
#   tools/arm64/image.sh [--kernel 6.1|6.12-16k] --path   print the folder;
#                                  status 1 if not built
#
# Needs mmdebstrap, cpio and the arm64 architecture in dpkg (tools/deps.sh);
# exits 4 without them. A cold build takes 20-40 s (downloads: the
# kernel packages are 60 MB (6.1) and 92 MB (6.12-16k)); the root is rebuilt
# for each kernel (18 MB unpacked, 6 MB as initramfs).
set -euo pipefail

cache=${MRPOOL_CACHE:-/var/cache/mrpool}
# The root: what the library's tests load, and a shell for the guest's init.
# mmdebstrap adds their dependencies.
pkgs=libc6,libgcc-s1,libibverbs1,libnl-3-200,libnl-route-3-200,busybox-static

say() { printf '[arm64-image] %s\n' "$*" >&2; }
skip() { say "$*"; exit 4; }

usage() { echo "usage: $0 [--kernel 6.1|6.12-16k] [--path]" >&2; exit 2; }
kernel=6.1 path=0
while (($#)); do
	case $1 in
	--kernel) kernel=${2:-}; shift 2 || usage ;;
	--path) path=1; shift ;;
	*) usage ;;
	esac
done
case $kernel in
6.1) meta=linux-image-arm64 ;;
6.12-16k) meta=linux-image-6.12-arm64-16k ;;
*) usage ;;
esac

# The kernel's ABI package, resolved as the metapackage names it: it moves
# with every security update.
abi=$(apt-cache depends "$meta:arm64" 2>/dev/null |
	sed -n 's/^ *Depends: \(linux-image-[^ :]*-arm64[^ :]*\).*/\1/p' | head -n1)
[ -n "$abi" ] || skip "apt knows no $meta:arm64 (dpkg --add-architecture arm64; apt-get update: tools/deps.sh)"
ver=$(apt-cache show --no-all-versions "$abi:arm64" | sed -n 's/^Version: //p' | head -n1)
hash=$(grep -v '^[[:space:]]*#' "$0" | sha256sum | cut -c1-12)	# comments aside
dir=$cache/arm64-${abi#linux-image-}-$ver-$hash

if ((path)); then
	[ -f "$dir/root.cpio.gz" ] || exit 1
	echo "$dir"
	exit 0
fi

command -v mmdebstrap >/dev/null || skip "mmdebstrap not installed: run tools/deps.sh"
command -v cpio >/dev/null || skip "cpio not installed: run tools/deps.sh"

mkdir -p "$cache"
exec {lock}>"$cache/.lock-${dir##*/}"	# one build per folder at a time
flock "$lock"
if [ -f "$dir/root.cpio.gz" ]; then
	say "cached: $dir"
	echo "$dir"
	exit 0
fi

start=$SECONDS
work=$(mktemp -d "$cache/.build-${dir##*/}.XXXXXX")
trap 'rm -rf "$work"' EXIT

say "fetching $abi:arm64 $ver"
(cd "$work" && { apt-get download -q "$abi:arm64=$ver" >/dev/null 2>&1 ||
	apt-get download "$abi:arm64=$ver"; })
dpkg -x "$work/${abi}_"*.deb "$work/kernel"
mkdir "$work/out"
cp "$work/kernel/boot/vmlinuz-${abi#linux-image-}" "$work/out/vmlinuz"
cp "$work/kernel/boot/config-${abi#linux-image-}" "$work/out/config"
rm -rf "$work/kernel" "$work"/*.deb

# The host's apt sources, each file one mmdebstrap mirror: the guest's
# packages come from where this machine's do.
mirrors=()
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
	[ -f "$f" ] && grep -q '^[^#]' "$f" && mirrors+=("$f")
done
((${#mirrors[@]})) || skip "no apt sources on this machine"
codename=$(. /etc/os-release && echo "$VERSION_CODENAME")

say "unpacking the arm64 root ($pkgs and their dependencies) with mmdebstrap"
nice -n 5 mmdebstrap --quiet --variant=extract --architectures=arm64 \
	--include="$pkgs" \
	--dpkgopt='path-exclude=/usr/share/doc/*' \
	--dpkgopt='path-exclude=/usr/share/man/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' \
	--dpkgopt='path-exclude=/usr/lib/aarch64-linux-gnu/gconv/*' \
	--extract-hook="ls \"\$1/var/cache/apt/archives\" >'$work/debs'" \
	"$codename" "$work/root" "${mirrors[@]}" >&2
root=$work/root
# Package and version of each unpacked .deb (extract mode keeps no dpkg status).
sed -n 's/_[a-z0-9]*\.deb$//p' "$work/debs" | sed 's/%3a/:/; s/_/ /' >"$work/out/packages"
[ -x "$root/bin/busybox" ] || { say "no busybox in the root"; exit 1; }
# The kernel opens /dev/console for init before any devtmpfs is mounted.
mkdir -p "$root/dev" "$root/proc" "$root/sys" "$root/tmp" "$root/run"
[ -e "$root/dev/console" ] || mknod -m 600 "$root/dev/console" c 5 1
[ -e "$root/dev/null" ] || mknod -m 666 "$root/dev/null" c 1 3
[ -e "$root/bin/sh" ] || ln -s busybox "$root/bin/sh"
(cd "$root" && find . -print0 | cpio --null -o -H newc --quiet | gzip -1) >"$work/out/root.cpio.gz"
say "root: $(du -sh "$root" | cut -f1) unpacked, $(du -h "$work/out/root.cpio.gz" | cut -f1) as initramfs"

rm -rf "$dir"
mv "$work/out" "$dir"
say "ready in $((SECONDS - start)) s: $dir"
echo "$dir"
