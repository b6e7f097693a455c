# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# shellcheck shell=bash
#
# Sourced by tools/check.sh and tools/check-debug.sh: runs their jobs side
# by side, one more at a time than the machine has cores (issue 31). Most
# of a VM run's time is one busy vCPU or a guest waiting (RDMA timeouts,
# trims, two-host handshakes): on this 2-core machine a job kept 0.4-0.9
# of a core busy, two at a time 1.4 of the two; nothing in the suite
# depends on timing (issue 8: it passes under tools/busy.sh).
#
#   job_add NAME CLASS FUNCTION [ARGS...]   queue a job (in the order to
#                                           start them: longest first)
#   jobs_run                                run them all; returns non-zero
#                                           if any job did
#
# A job runs FUNCTION ARGS in a subshell (with JOB set to its name), its output in $JOBS_DIR/NAME.log,
# its wall and CPU time a row of times.tsv (tools/timing.sh; a VM job adds
# its guests' figures itself). The console gets a line when a job starts
# and when it ends, with its VM runs' times ("[time]" lines of its log)
# and its failures ("not ok" lines).
#
# CLASS keeps apart what must not overlap:
#   host      host-side work: beside anything
#   vm        a VM run: beside host jobs and other VM runs
#   hostroot  changes the host's root, which every guest mounts (installs
#             packages): beside host jobs only, never beside a guest
# MRPOOL_CHECK_JOBS sets how many jobs run at once (default: the cores
# and one, at most one per 3 GiB of available memory; 1 runs them one by
# one).

JOBS_NAMES=() JOBS_CLASS=() JOBS_CMD=()

job_add() {	# name class function [args...]
	local name=$1 class=$2
	shift 2
	JOBS_NAMES+=("$name")
	JOBS_CLASS+=("$class")
	JOBS_CMD+=("$(printf '%q ' "$@")")
}

jobs_slots() {
	local n=${MRPOOL_CHECK_JOBS:-} mem
	if [ -z "$n" ]; then
		n=$(($(nproc) + 1))
		mem=$(awk '/^MemAvailable:/ {print int($2 / 3145728)}' /proc/meminfo)
		((mem >= n)) || n=$mem
	fi
	[[ $n =~ ^[0-9]+$ ]] && ((n >= 1)) || n=1
	echo "$n"
}

# May the job of class $1 start beside the running classes ($2: a list)?
jobs_fits() {
	case $1 in
	host) return 0 ;;
	vm) [[ " $2 " != *" hostroot "* ]] ;;
	hostroot) [[ " $2 " != *" vm "* && " $2 " != *" hostroot "* ]] ;;
	esac
}

jobs_run() {	# -> 0 if every job returned 0
	local slots i pid done_pid st rc=0 classes
	local -A pid_job=() pid_t0=()
	local -a pending=("${!JOBS_NAMES[@]}")
	slots=$(jobs_slots)
	mkdir -p "$JOBS_DIR"
	echo "[jobs] ${#pending[@]} jobs, $slots at a time (MRPOOL_CHECK_JOBS); logs in ${JOBS_DIR#"$PWD"/}/"
	while ((${#pending[@]} || ${#pid_job[@]})); do
		# Start the first pending jobs that fit, while a slot is free.
		local started=1
		while ((started && ${#pid_job[@]} < slots)); do
			started=0
			classes=''
			for pid in "${!pid_job[@]}"; do
				classes+=" ${JOBS_CLASS[${pid_job[$pid]}]}"
			done
			for i in "${!pending[@]}"; do
				local j=${pending[$i]}
				jobs_fits "${JOBS_CLASS[$j]}" "$classes" || continue
				unset "pending[$i]"
				pending=("${pending[@]}")
				echo "[jobs] start ${JOBS_NAMES[$j]}"
				(
					export JOB=${JOBS_NAMES[$j]}
					t0=$SECONDS
					eval "${JOBS_CMD[$j]}"
					st=$?
					timing_row step "${JOBS_NAMES[$j]}" $((SECONDS - t0)) "$(timing_cpu)" \
						"status $st"
					exit "$st"
				) >"$JOBS_DIR/${JOBS_NAMES[$j]}.log" 2>&1 </dev/null &
				pid_job[$!]=$j
				pid_t0[$!]=$SECONDS
				started=1
				break
			done
		done
		((${#pid_job[@]})) || break	# nothing runs and nothing fits: cannot be
		wait -n -p done_pid "${!pid_job[@]}"
		st=$?
		if [ -z "${done_pid:-}" ] || [ -z "${pid_job[$done_pid]:-}" ]; then
			continue
		fi
		i=${pid_job[$done_pid]}
		echo "[jobs] done  ${JOBS_NAMES[$i]}: status $st, $((SECONDS - pid_t0[$done_pid])) s"
		grep -a '^\[time\] ' "$JOBS_DIR/${JOBS_NAMES[$i]}.log" | sed 's/^\[time\]/[jobs]  /'
		grep -a '^not ok' "$JOBS_DIR/${JOBS_NAMES[$i]}.log" | tr -d '\r' | awk '!seen[$0]++' |
			head -n 20 | sed 's/^/[jobs]   /'
		((st == 0)) || rc=1
		unset "pid_job[$done_pid]" "pid_t0[$done_pid]"
	done
	if ((${#pending[@]})); then
		echo "[jobs] left unstarted (no slot fits them): ${pending[*]}"
		rc=1
	fi
	return "$rc"
}
