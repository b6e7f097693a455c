# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# The summary of tools/check.sh and tools/check-debug.sh: one line per
# distinct test on stdout, then "N passed, N failed, N skipped" on stderr.
# Its arguments are TAP files, each after the settings that apply to it:
#   src=NAME   where it came from (VM:NAME for a VM run, lib, check, ...)
#   var=NAME   the variant that ran it (lib's sanitize, valgrind, ...)
#   plan=0|1   a binary's results must match its TAP plan
#   strict=0|1 a SKIP is a failure (a dedicated VM run)
# A section is the output of one binary; the settings of its file are
# kept at its start (awk has read those of the next file when it ends).
function newsec(name) {
	endsec()
	sec = name; ssrc = src; svar = var; splan = plan
	sres = 0; splanned = -1
	last = ""	# a nameless result takes the name of its own section's RUN
}
function endsec() {
	if (splan && sec != "") {
		k = ssrc ": " sec ": TAP plan matches the results"
		if (splanned != sres)
			res(k, 3, (svar != "" ? svar ": " : "") \
			    (splanned >= 0 ? "1.." splanned : "no plan") ", " sres " results")
	}
	sec = ""
}
function res(k, r, why) {
	if (!(k in rank)) { order[++n] = k; rank[k] = 0 }
	if (r > rank[k]) rank[k] = r
	if (why != "") note[k] = note[k] (note[k] == "" ? "" : "; ") why
}
FNR == 1 { endsec(); last = "" }
/^# selftest: / { newsec($3); next }
/^# build\// { n2 = $2; sub(/^build\/[a-z]+\//, "build/", n2); newsec(n2); next }
/^#  RUN / { last = $3; next }
/^1\.\.[0-9]+/ { if (splanned < 0) splanned = substr($1, 4) + 0; next }
/^(not )?ok [0-9]+/ {
	bad = /^not ok/
	num = bad ? $3 : $2
	line = $0
	skip = line ~ /# SKIP/
	name = line; sub(/^(not )?ok [0-9]+ */, "", name); sub(/ *# SKIP.*/, "", name)
	if (name == "") name = last
	k = src ": " sec ": #" num
	if (!(k in label)) label[k] = src ": " sec ": " name
	sres++
	if (bad) res(k, 3, var)
	else if (skip && strict) res(k, 3, "SKIP in a dedicated VM run: " substr(line, index(line, "# SKIP") + 7))
	else if (skip) { res(k, 1, ""); why[k] = substr(line, index(line, "# SKIP") + 7) }
	else res(k, 2, "")
	next
}
/^(not )?ok - / {
	k = $0; sub(/^(not )?ok - /, "", k); k = src ": " k
	res(k, /^not ok/ ? 3 : 2, "")
	next
}
END {
	endsec()
	for (i = 1; i <= n; i++) {
		k = order[i]; l = (k in label) ? label[k] : k
		if (rank[k] == 3) { print "not ok - " l (note[k] != "" ? " [" note[k] "]" : ""); f++ }
		else if (rank[k] == 2) { print "ok - " l; p++ }
		else { print "ok - " l " # SKIP " why[k]; s++ }
	}
	printf "%d passed, %d failed, %d skipped\n", p, f, s > "/dev/stderr"
}
