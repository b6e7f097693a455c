#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Builds the debug guest kernel (tools/vm/run --kernel debug) from Debian's
# linux-source-6.1 with tools/vm/debug.config merged over x86_64's defconfig
# and kvm_guest.config, and caches the built tree outside the checkout, so
# that every clone on the machine reuses it:
#
#   ${MRPOOL_CACHE:-/var/cache/mrpool}/linux-<source version>-debug-<hash>
#
# <hash> is that of debug.config; the source package is kept beside it. The tree is built in a temporary folder
# beside it and renamed when complete: a folder of that name is a whole
# build. Out-of-tree modules build against it (make -C TREE M=...).
#
#   tools/vm/debug-kernel.sh          build unless cached; print the tree
#   tools/vm/debug-kernel.sh --path   print the tree; status 1 if not built
#
# The build takes about 13 minutes on two idle cores (nice'd, make -j
# nproc); it needs bc flex bison libelf-dev libssl-dev dwarves, installed
# here when missing.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
frag=$top/tools/vm/debug.config
cache=${MRPOOL_CACHE:-/var/cache/mrpool}

say() { printf '[debug-kernel] %s\n' "$*" >&2; }

# The version apt would download: the cache key moves with it.
ver=$(apt-cache show --no-all-versions linux-source-6.1 2>/dev/null |
	sed -n 's/^Version: //p' | head -n1)
[ -n "$ver" ] || { say "apt knows no linux-source-6.1: run apt-get update"; exit 2; }
hash=$(sha256sum "$frag" | cut -c1-12)
tree=$cache/linux-$ver-debug-$hash

case ${1:-} in
--path)
	[ -f "$tree/arch/x86/boot/bzImage" ] || exit 1
	echo "$tree"
	exit 0 ;;
'') ;;
*) echo "usage: $0 [--path]" >&2; exit 2 ;;
esac

mkdir -p "$cache"
exec {lock}>"$cache/.lock-${tree##*/}"	# one build per tree at a time
flock "$lock"
if [ -f "$tree/arch/x86/boot/bzImage" ]; then
	say "cached: $tree"
	echo "$tree"
	exit 0
fi

pkgs=(bc flex bison libelf-dev libssl-dev dwarves xz-utils build-essential)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
		missing+=("$p")
done
if ((${#missing[@]})); then
	say "installing build dependencies: ${missing[*]}"
	apt-get update -q >/dev/null
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
		--no-install-recommends "${missing[@]}" >/dev/null
fi

work=$(mktemp -d "$cache/.build-${tree##*/}.XXXXXX")
trap 'rm -rf "$work"' EXIT
# The source package stays in the cache: another fragment rebuilds from it.
deb=$cache/linux-source-6.1_${ver}_all.deb
if [ ! -f "$deb" ]; then
	say "fetching linux-source-6.1 $ver"
	(cd "$work" && apt-get download -q "linux-source-6.1=$ver" >/dev/null 2>&1 ||
		apt-get download "linux-source-6.1=$ver")
	mv "$work"/linux-source-6.1_*.deb "$deb"
fi
dpkg -x "$deb" "$work/deb"
src=$work/linux
mkdir "$src"
tar -xJf "$work/deb/usr/src/linux-source-6.1.tar.xz" -C "$src" --strip-components=1
rm -rf "$work/deb"
# Linux 6.2's "fault-injection: allow stacktrace filter for x86-64" (Wei
# Yongjun): 6.1 still keeps FAULT_INJECTION_STACKTRACE_FILTER off x86_64,
# from the days of an unreliable unwinder; the filter (debug.config) needs
# only that dependency gone. The config check below fails if it stays.
sed -i '/^config FAULT_INJECTION_STACKTRACE_FILTER$/,/^config /{/^\tdepends on !X86_64$/d}' \
	"$src/lib/Kconfig.debug"

say "configuring (defconfig + kvm_guest.config + $(basename "$frag"))"
mk=(nice -n 19 make -C "$src" -s)
"${mk[@]}" defconfig
"${mk[@]}" kvm_guest.config
(cd "$src" && scripts/kconfig/merge_config.sh -m .config "$frag" >/dev/null)
"${mk[@]}" olddefconfig
# merge_config only warns about a value that did not stick: refuse.
bad=0
while read -r line; do
	case $line in
	CONFIG_*=*) want=$line ;;
	'# CONFIG_'*' is not set') want=$line ;;
	*) continue ;;
	esac
	opt=
	if [[ $want == '#'* ]]; then
		opt=${want#\# }; opt=${opt%% *}
		! grep -q "^$opt=" "$src/.config" && continue
	else
		grep -qxF "$want" "$src/.config" && continue
	fi
	say "config: '$want' did not stick: $(grep -E "^(# )?${opt:-${want%%=*}}[= ]" "$src/.config" || echo "absent")"
	bad=1
done <"$frag"
((bad == 0)) || exit 1

jobs=$(nproc)
say "building bzImage and modules with make -j$jobs (nice'd; ~13 min on 2 idle cores)"
start=$SECONDS
"${mk[@]}" -j"$jobs" bzImage modules
say "built in $((SECONDS - start)) s"
cp "$frag" "$src/mrpool-debug.config"

rm -rf "$tree"
mv "$src" "$tree"
say "ready: $tree"
echo "$tree"
