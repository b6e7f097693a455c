#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Host tests of mrpoolctl without the module: a fabricated sysfs/debugfs
# tree under MRPOOLCTL_ROOT, every command's --json output parsed with
# python3 and compared with the files it came from, the exit codes, and
# the hints of the one error helper. Prints TAP; exits 1 on a failure.
# Usage: host_test.sh [path/to/mrpoolctl]
set -u
here=$(cd "$(dirname "$0")" && pwd)
tool=$(realpath "${1:-$here/../mrpoolctl}")
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
export MRPOOLCTL_ROOT=$root
n=0 failed=0

ok() {	# ok DESCRIPTION STATUS
	n=$((n + 1))
	if [ "$2" = 0 ]; then echo "ok $n - $1"; else echo "not ok $n - $1"; failed=1; fi
}

# json_check FILE PYTHON-EXPR: every line of FILE is a JSON document; the
# expression (over `docs`, the list of them) must be true.
json_check() {
	python3 - "$1" "$2" <<'EOF'
import json, sys
docs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
sys.exit(0 if eval(sys.argv[2]) else 1)
EOF
}

# spec_check FILE PYTHON-EXPR: FILE is one JSON document (`doc`, over any
# number of lines, as CDI specs are written); the expression must be true.
spec_check() {
	python3 - "$1" "$2" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
sys.exit(0 if eval(sys.argv[2]) else 1)
EOF
}

s=$root/sys/class/misc/mrpool
m=$root/sys/module/mrpool
d=$root/sys/kernel/debug/mrpool
mkdir -p "$s/stats" "$m/parameters" "$m/devices/rxe0" "$m/devices/mlx5_0" "$d"
for kv in chunk_bytes=2097152 node=0 total_bytes=8388608 free_bytes=4194304 \
	used_bytes=2097152 quarantined_bytes=2097152 max_bytes=268435456 \
	stats/allocs=5 stats/frees=3 stats/grows=4 stats/fail_nomem=1 \
	stats/fail_quota=2; do
	echo "${kv#*=}" >"$s/${kv%%=*}"
done
echo "0 0 0 0 0 0 0 0 0 4 0" >"$s/blocks_per_order"
echo 8 >"$m/parameters/pool_mb" && chmod 444 "$m/parameters/pool_mb"
echo 256 >"$m/parameters/max_mb" && chmod 644 "$m/parameters/max_mb"
echo Y >"$m/parameters/pmd_map" && chmod 444 "$m/parameters/pmd_map"
echo ready >"$m/devices/rxe0/state"; echo 4 >"$m/devices/rxe0/chunks"
echo -1 >"$m/devices/rxe0/node"; echo >"$m/devices/rxe0/reason"
echo unsupported >"$m/devices/mlx5_0/state"; echo 0 >"$m/devices/mlx5_0/chunks"
echo 1 >"$m/devices/mlx5_0/node"
printf 'no "fast"\tregistration\n' >"$m/devices/mlx5_0/reason"
printf 'pfn node state slice blocks\n0x1000 0 used 1 9:1\n0x1200 0 free - 9:1\n010 0 quarantined - 9:1\n' >"$d/chunks"
printf 'id pid comm length chunks maps state\n1 42 my prog 2097152 1 1 live\n2 43 b\xffd\xc3\xa9 2097152 1 0 live\n3 45 x\\0409\\012\\134 4194304 2 0 live\n' >"$d/slices"
printf 'pid comm slices bytes allocs\n42 my\tprog 1 2097152 -\n44 1234 0 0 0\n' >"$d/clients"

out=$root/out
"$tool" --json status >"$out" 2>/dev/null
ok "status --json exits 0" $?
json_check "$out" 'len(docs) == 1 and docs[0]["total_bytes"] == 8388608 and docs[0]["used_bytes"] == 2097152 and docs[0]["allocs"] == 5 and docs[0]["alloc_failures"] == 3 and docs[0]["stats"] == {"fail_nomem": 1, "fail_quota": 2, "grows": 4} and docs[0]["blocks_per_order"][9] == 4 and docs[0]["abi_version"] is None and docs[0]["source"] == "sysfs" and {"name": "mlx5_0", "state": "unsupported"} in docs[0]["devices"]'
ok "status --json: sysfs values, unknowns null, failures summed" $?

"$tool" chunks --json >"$out"
ok "chunks --json (option after the command) exits 0" $?
json_check "$out" 'docs[0]["count"] == 3 and docs[0]["chunks"][0] == {"pfn": "0x1000", "node": 0, "state": "used", "slice": 1, "blocks": "9:1"} and docs[0]["chunks"][1]["slice"] is None and docs[0]["chunks"][2]["pfn"] == "010"'
ok "chunks --json: rows as objects, '-' null, hex and leading zeros stay strings" $?

"$tool" -j slices >"$out" && json_check "$out" 'docs[0]["slices"][0] == {"id": 1, "pid": 42, "comm": "my prog", "length": 2097152, "chunks": 1, "maps": 1, "state": "live"} and docs[0]["slices"][1]["comm"] == "b\ufffdd\u00e9"'
ok "slices -j: a comm with a blank stays one value, bytes not UTF-8 become U+FFFD" $?

# the module escapes a comm's blanks and backslashes (a task names itself)
"$tool" -j slices >"$out" && json_check "$out" 'docs[0]["slices"][2] == {"id": 3, "pid": 45, "comm": "x 9\n\\", "length": 4194304, "chunks": 2, "maps": 0, "state": "live"} and docs[0]["count"] == 3'
ok "slices -j: an escaped comm (blank, newline, backslash) comes back whole, columns in place" $?
"$tool" slices >"$out" && [ "$(grep -c . "$out")" -le 5 ] && grep -q '^ *3  *45  *x 9?\\ ' "$out"
ok "slices: one line per row, a comm's newline shown as ?" $?

"$tool" --json clients >"$out" && json_check "$out" 'docs[0]["clients"][0]["comm"] == "my prog" and docs[0]["clients"][0]["allocs"] is None and docs[0]["clients"][1]["comm"] == "1234" and docs[0]["clients"][1]["pid"] == 44'
ok "clients --json: a comm with a tab, '-' counters null, a comm of digits a string" $?

"$tool" --json devices >"$out" 2>/dev/null
ok "devices --json exits 0" $?
json_check "$out" 'docs[0]["count"] == 2 and [x["name"] for x in docs[0]["devices"]] == ["mlx5_0", "rxe0"] and docs[0]["devices"][0]["reason"] == "no \"fast\"\tregistration" and docs[0]["devices"][1]["node"] == -1 and docs[0]["devices"][1]["reason"] is None and all(x["ports"] is None for x in docs[0]["devices"])'
ok "devices --json: attributes, quote and tab escaped, no live RDMA view for a fabricated root" $?

"$tool" --json params >"$out" && json_check "$out" '{p["name"]: (p["value"], p["access"]) for p in docs[0]["params"]} == {"max_mb": (256, "rw"), "pool_mb": (8, "ro"), "pmd_map": ("Y", "ro")}'
ok "params --json: values and access" $?

"$tool" --json set max_mb 512 >"$out" && json_check "$out" 'docs[0] == {"name": "max_mb", "old": 256, "new": 512}' &&
	[ "$(cat "$m/parameters/max_mb")" = 512 ]
ok "set --json: old and new value, file written" $?

"$tool" --json watch 0.1 3 >"$out" 2>/dev/null
ok "watch --json 0.1 3 exits 0" $?
json_check "$out" 'len(docs) == 3 and docs[0]["rates"] is None and docs[0]["interval"] is None and all(d["interval"] > 0 and d["deltas"]["allocs"] == 0 and d["rates"]["grows"] == 0 for d in docs[1:]) and docs[2]["counters"]["grows"] == 4'
ok "watch --json: one object per sample, deltas and rates from the second" $?

"$tool" watch 0.1 2 >"$out" 2>/dev/null && [ "$(wc -l <"$out")" = 3 ] && grep -q 'ALLOC/s' "$out"
ok "watch text: a header and one line per sample" $?

# output that cannot be written ends watch with 1 (it never ended before)
timeout 20 "$tool" watch 0.1 >/dev/full 2>"$out"
[ $? = 1 ] && grep -q 'cannot write' "$out"
ok "watch to a full device: exit 1, says why" $?

"$tool" --json metrics >/dev/null 2>"$out"
[ $? = 2 ] && grep -q 'Prometheus' "$out"
ok "metrics --json is a usage error (exit 2) that says why" $?

for bad in "watch 0" "watch x" "watch 1 0" "watch 1 2 3" "monitor 0" "monitor x"; do
	# shellcheck disable=SC2086 # the words are the arguments
	"$tool" $bad >/dev/null 2>&1
	[ $? = 2 ]
	ok "$bad: usage error, exit 2" $?
done

"$tool" -h | grep -q 'Exit status: 0 ok' && "$tool" -h | grep -q -- '--json'
ok "usage text documents --json and the exit codes" $?

# The error helper: each usual cause named.
rm -rf "$d"
"$tool" chunks >/dev/null 2>"$out"
[ $? = 1 ] && grep -q 'debugfs is not mounted' "$out"
ok "no debugfs: exit 1, says debugfs is not mounted" $?
mkdir -p "$d" && printf 'pfn\n' >"$d/chunks" && chmod 000 "$d/chunks"
if [ "$(id -u)" = 0 ]; then
	echo "ok $((n += 1)) # SKIP permission hint: root reads mode 000 files"
else
	"$tool" chunks >/dev/null 2>"$out"
	[ $? = 1 ] && grep -q 'root only' "$out"
	ok "unreadable debugfs: says it is root only" $?
fi
MRPOOLCTL_ROOT=$root/none "$tool" status >/dev/null 2>"$out"
[ $? = 1 ] && grep -q 'module is not loaded' "$out"
ok "no module: exit 1, says the module is not loaded" $?

# No module here, so no "mrpool" generic netlink family on this kernel.
if [ -e /sys/module/mrpool ]; then
	echo "ok $((n += 1)) # SKIP monitor without the module: it is loaded here"
else
	MRPOOLCTL_ROOT=$root/none "$tool" monitor >/dev/null 2>"$out"
	[ $? = 1 ] && grep -q 'netlink family mrpool.*module is not loaded' "$out"
	ok "monitor without the module: exit 1, says the module is not loaded" $?
fi

# cdi: a CDI spec whose "rdma" device holds /dev/mrpool and the RDMA nodes
# (uverbsN in number order, rdma_cm), not umad or issm; written whole to
# --output with mode 0644; without RDMA nodes only "default", said so.
ib=$root/dev/infiniband
mkdir -p "$ib" && touch "$ib/uverbs0" "$ib/uverbs10" "$ib/uverbs2" "$ib/rdma_cm" "$ib/umad0" "$ib/issm0" "$ib/uverbsX"
"$tool" cdi >"$out" && spec_check "$out" 'doc["cdiVersion"] == "0.3.0" and doc["kind"] == "mrpool.io/pool" and [d["name"] for d in doc["devices"]] == ["default", "rdma"] and doc["devices"][0]["containerEdits"] == {"deviceNodes": [{"path": "/dev/mrpool"}]} and [x["path"] for x in doc["devices"][1]["containerEdits"]["deviceNodes"]] == ["/dev/mrpool", "/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs0", "/dev/infiniband/uverbs2", "/dev/infiniband/uverbs10"]'
ok "cdi: default is /dev/mrpool, rdma adds rdma_cm and uverbs0, 2, 10 (real paths, no root prefix)" $?
"$tool" cdi --output "$root/spec.json" >"$out" && [ ! -s "$out" ] &&
	[ "$(stat -c %a "$root/spec.json")" = 644 ] && spec_check "$root/spec.json" 'doc["devices"][1]["name"] == "rdma"' &&
	[ -z "$(find "$root" -maxdepth 1 -name 'spec.json.*')" ]
ok "cdi --output: the file alone (mode 644, no temporary left), nothing on stdout" $?
"$tool" cdi -o "$root/no/such/dir/spec.json" 2>"$out"
[ $? = 1 ] && grep -q 'No such file' "$out"
ok "cdi -o into a missing folder: exit 1 with the reason" $?
"$tool" cdi --no-rdma >"$out" 2>"$root/err" && [ ! -s "$root/err" ] &&
	spec_check "$out" '[d["name"] for d in doc["devices"]] == ["default"]'
ok "cdi --no-rdma: only default, though RDMA nodes exist, nothing on stderr" $?
"$tool" cdi --output >/dev/null 2>&1
[ $? = 2 ]
ok "cdi --output without a file: usage error (2)" $?

# cdi --update: what the package's udev rule runs: run/cdi/mrpool.json
# (run/cdi made), "rdma" only where etc/default/mrpool-cdi says yes.
spec=$root/run/cdi/mrpool.json
mkdir "$root/run"
(umask 077 && "$tool" cdi --update >"$out") 2>"$root/err" && [ ! -s "$out" ] && [ ! -s "$root/err" ] &&
	[ "$(stat -c %a "$spec")" = 644 ] && [ "$(stat -c %a "$root/run/cdi")" = 755 ] &&
	spec_check "$spec" '[d["name"] for d in doc["devices"]] == ["default"]'
ok "cdi --update without etc/default/mrpool-cdi: run/cdi (0755 under umask 077) and mrpool.json, default alone, silent" $?
mkdir -p "$root/etc/default"
cfg=$root/etc/default/mrpool-cdi
printf '# the operator chose\nOTHER=1\n\n  MRPOOL_CDI_RDMA="yes"  # every HCA\n' >"$cfg"
"$tool" cdi --update && [ -z "$(find "$root/run/cdi" -name 'mrpool.json.*')" ] &&
	spec_check "$spec" '[d["name"] for d in doc["devices"]] == ["default", "rdma"] and [x["path"] for x in doc["devices"][1]["containerEdits"]["deviceNodes"]][-1] == "/dev/infiniband/uverbs10"'
ok "cdi --update with MRPOOL_CDI_RDMA=\"yes\" (quoted, among comments): rdma with the nodes" $?
echo "MRPOOL_CDI_RDMA=no" >>"$cfg"
"$tool" cdi --update && spec_check "$spec" '[d["name"] for d in doc["devices"]] == ["default"]'
ok "cdi --update: the last MRPOOL_CDI_RDMA line counts (no)" $?
# a line longer than any buffer is one line: its tail is no setting (4080:
# a multiple of 255, where a 256-byte fgets would start a "line")
printf 'OTHER=%s' "$(head -c 4074 /dev/zero | tr '\0' x)" >>"$cfg"
echo "MRPOOL_CDI_RDMA=yes" >>"$cfg"
"$tool" cdi --update && spec_check "$spec" '[d["name"] for d in doc["devices"]] == ["default"]'
ok "cdi --update: MRPOOL_CDI_RDMA=yes after 4080 bytes of a line is not a setting (no)" $?
cp "$spec" "$root/spec.before"
echo "MRPOOL_CDI_RDMA=maybe" >"$cfg"
"$tool" cdi --update 2>"$root/err"
[ $? = 1 ] && grep -q "mrpool-cdi:1: MRPOOL_CDI_RDMA is 'maybe'" "$root/err" && cmp -s "$spec" "$root/spec.before"
ok "cdi --update with MRPOOL_CDI_RDMA=maybe: exit 1, file and line said, the spec left as it was" $?
"$tool" cdi --update --no-rdma >/dev/null 2>&1
[ $? = 2 ]
ok "cdi --update --no-rdma: usage error (2): the choice is the file's" $?
# The writers lock run/mrpool/cdi.lock (run/mrpool made 0700, the lock
# 0600: no other user can open it) and read the nodes under the lock.
lockdir=$root/run/mrpool lock=$root/run/mrpool/cdi.lock
[ "$(stat -c %a "$lockdir")" = 700 ] && [ "$(stat -c %a "$lock")" = 600 ]
ok "cdi --update: its lock run/mrpool/cdi.lock, mode 0600, in run/mrpool, mode 0700" $?
# flocked INODE [->]: an flock on the file numbered INODE is held (with
# "->", waited for) by someone, in /proc/locks ("N: FLOCK ... MAJ:MIN:INO").
flocked() {
	grep -qE "^[0-9]+: ${2:+$2 }FLOCK .* [0-9a-f]+:[0-9a-f]+:$1 " /proc/locks
}
# Another user holding an flock on run/cdi (which anyone may open, as
# /run/cdi is 0755) delays no writer: nobody, through setpriv, as root.
if [ "$(id -u)" = 0 ]; then
	chmod 755 "$root" "$root/run"
	holder=(setpriv --reuid=65534 --regid=65534 --clear-groups)
else
	holder=()
fi
# shellcheck disable=SC2016 # $1 is the inner shell's
"${holder[@]}" sh -c 'exec 9<"$1" && flock 9 && exec sleep 1000' sh "$root/run/cdi" &
hpid=$!
held=1
for _ in $(seq 200); do
	flocked "$(stat -c %i "$root/run/cdi")" && { held=0; break; }
	sleep 0.05
done
echo "MRPOOL_CDI_RDMA=no" >"$cfg"
rm -f "$spec"
MRPOOLCTL_CDI_LOCK_WAIT=3 timeout 20 "$tool" cdi --update 2>"$root/err"
st=$?
kill "$hpid"; wait "$hpid" 2>/dev/null
[ "$held" = 0 ] && [ "$st" = 0 ] && [ ! -s "$root/err" ] && spec_check "$spec" '[d["name"] for d in doc["devices"]] == ["default"]'
ok "cdi --update while another user (nobody, or the caller not root) holds an flock on run/cdi: done, not delayed" $?
# A holder of the lock past the bound (MRPOOLCTL_CDI_LOCK_WAIT, the
# tests' shorter wait): exit 1, said, the spec left as it was.
cp "$spec" "$root/spec.before"
exec 9<"$lock"
flock 9
MRPOOLCTL_CDI_LOCK_WAIT=1 timeout 20 "$tool" cdi --update 2>"$root/err"
st=$?
flock -u 9
exec 9<&-
[ "$st" = 1 ] && grep -q 'cdi.lock: still locked after 1 s.*not written' "$root/err" && cmp -s "$spec" "$root/spec.before"
ok "cdi --update with its lock held past the bound: exit 1, says the lock is still held, the spec as it was" $?
# One started while the lock is held waits (a waiter on the lock's inode
# in /proc/locks, no spec written), and once it has the lock its spec has
# the node that came meanwhile.
echo "MRPOOL_CDI_RDMA=yes" >"$cfg"
rm -f "$spec"
exec 9<"$lock"
flock 9
"$tool" cdi --update &
upd=$!
waiting=1
for _ in $(seq 200); do
	flocked "$(stat -c %i "$lock")" '->' && { waiting=0; break; }
	sleep 0.05
done
[ ! -e "$spec" ]
nospec=$?
touch "$ib/uverbs7"
flock -u 9
exec 9<&-
wait "$upd" && [ "$waiting" = 0 ] && [ "$nospec" = 0 ] &&
	spec_check "$spec" '"/dev/infiniband/uverbs7" in [x["path"] for x in doc["devices"][1]["containerEdits"]["deviceNodes"]]'
ok "cdi --update waits for its lock, then reads the nodes: uverbs7, added meanwhile, is in its spec" $?
pids=()
for _ in $(seq 16); do "$tool" cdi --update & pids+=($!); done
st=0
for p in "${pids[@]}"; do wait "$p" || st=1; done
[ "$st" = 0 ] && [ "$(find "$root/run/cdi" -type f | wc -l)" = 1 ] &&
	spec_check "$spec" 'len(doc["devices"][1]["containerEdits"]["deviceNodes"]) == 6'
ok "cdi --update: 16 writers side by side all succeed, one whole spec, no temporary left" $?
rm -rf "${root:?}/etc" "$root/run" "$root/spec.before"

rm -f "$ib"/uverbs* "$ib/rdma_cm"
"$tool" cdi >"$out" 2>"$root/err" && spec_check "$out" '[d["name"] for d in doc["devices"]] == ["default"]' &&
	grep -q "no 'rdma' device" "$root/err"
ok "cdi without RDMA nodes: only default, says why on stderr" $?
rm -rf "${root:?}/dev"

echo "1..$n"
exit $failed
