// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Tables: rows of text cells printed in aligned columns, numbers right
 * aligned. The debugfs views are "header line, then one line per object",
 * fields separated by spaces; ctl_table_load() reads any such file, so a
 * column the kernel adds shows up without a change here.
 */
#include "mrpoolctl.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

int ctl_table_init(struct ctl_table *t, size_t ncols, const char *const *head)
{
	size_t i;

	memset(t, 0, sizeof(*t));
	t->head = calloc(ncols ? ncols : 1, sizeof(*t->head));
	if (!t->head)
		return -ENOMEM;
	t->ncols = ncols;
	for (i = 0; i < ncols; i++) {
		t->head[i] = strdup(head[i]);
		if (!t->head[i]) {
			ctl_table_free(t);
			return -ENOMEM;
		}
	}
	return 0;
}

/* Copies @row (ncols cells; NULL cells become "-"). */
int ctl_table_add(struct ctl_table *t, const char *const *row)
{
	char **cells;
	size_t i, base;

	if (t->nrows == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 16;

		cells = realloc(t->cells, cap * t->ncols * sizeof(*cells));
		if (!cells)
			return -ENOMEM;
		t->cells = cells;
		t->cap = cap;
	}
	base = t->nrows * t->ncols;
	for (i = 0; i < t->ncols; i++) {
		t->cells[base + i] = strdup(row[i] && row[i][0] ? row[i] : "-");
		if (!t->cells[base + i]) {
			while (i--)
				free(t->cells[base + i]);
			return -ENOMEM;
		}
	}
	t->nrows++;
	return 0;
}

/* What the module never leaves inside a value (it escapes a comm's). */
#define CTL_BLANKS	" \t\n\v\f\r"

/* Split @line on blanks in place; returns the number of fields. */
static size_t ctl_split(char *line, char ***fields, size_t *cap)
{
	char *save = NULL, *tok;
	size_t n = 0;

	for (tok = strtok_r(line, CTL_BLANKS, &save); tok;
	     tok = strtok_r(NULL, CTL_BLANKS, &save)) {
		if (n == *cap) {
			size_t c = *cap ? 2 * *cap : 16;
			char **f = realloc(*fields, c * sizeof(*f));

			if (!f)
				return (size_t)-1;
			*fields = f;
			*cap = c;
		}
		(*fields)[n++] = tok;
	}
	return n;
}

/*
 * A comm as the module prints it: blanks and backslashes as octal escapes
 * (\040), so a name cannot add rows or shift columns. Undone in place.
 */
static void ctl_unescape(char *s)
{
	char *out = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' &&
		    s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 |
					(s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}

/*
 * A line with more fields than the header has a blank inside one value:
 * a module from before comms were escaped, or a free-text column that
 * comes last. The surplus is joined back into "comm" if there is one, else
 * the last column. Then the comm's escapes are undone.
 */
static int ctl_table_add_fields(struct ctl_table *t, char **fields, size_t n)
{
	const char **row;
	size_t extra, m, i, j, len;
	char *joined = NULL;
	int col, ret;

	row = calloc(t->ncols, sizeof(*row));
	if (!row)
		return -ENOMEM;
	extra = n > t->ncols ? n - t->ncols : 0;
	col = ctl_table_col(t, "comm");
	m = col >= 0 ? (size_t)col : t->ncols - 1;
	if (extra) {
		for (len = 1, j = m; j <= m + extra; j++)
			len += strlen(fields[j]) + 1;
		joined = malloc(len);
		if (!joined) {
			free(row);
			return -ENOMEM;
		}
		joined[0] = '\0';
		for (j = m; j <= m + extra; j++) {
			if (j > m)
				strcat(joined, " ");
			strcat(joined, fields[j]);
		}
	}
	for (i = 0, j = 0; i < t->ncols && j < n; i++) {
		if (i == m && extra) {
			row[i] = joined;
			j += extra + 1;
		} else {
			row[i] = fields[j++];
		}
	}
	if (col >= 0 && row[col])
		ctl_unescape((char *)row[col]);
	ret = ctl_table_add(t, row);
	free(joined);
	free(row);
	return ret;
}

/* A debugfs view: header line then rows. 0 or -errno. */
int ctl_table_load(struct ctl_table *t, const char *path)
{
	char *line = NULL, **fields = NULL;
	size_t lcap = 0, fcap = 0, n;
	bool have_head = false;
	FILE *f;
	int ret = 0;

	memset(t, 0, sizeof(*t));
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (getline(&line, &lcap, f) >= 0) {
		n = ctl_split(line, &fields, &fcap);
		if (n == (size_t)-1) {
			ret = -ENOMEM;
			break;
		}
		if (!n)
			continue;
		if (!have_head)
			ret = ctl_table_init(t, n, (const char *const *)fields);
		else
			ret = ctl_table_add_fields(t, fields, n);
		if (ret)
			break;
		have_head = true;
	}
	if (!ret && ferror(f))
		ret = -EIO;
	fclose(f);
	free(line);
	free(fields);
	if (!ret && !have_head)
		ret = ctl_table_init(t, 0, NULL);
	if (ret)
		ctl_table_free(t);
	return ret;
}

int ctl_table_col(const struct ctl_table *t, const char *name)
{
	size_t i;

	for (i = 0; i < t->ncols; i++)
		if (!strcmp(t->head[i], name))
			return (int)i;
	return -1;
}

const char *ctl_table_cell(const struct ctl_table *t, size_t row, size_t col)
{
	return t->cells[row * t->ncols + col];
}

static bool ctl_column_numeric(const struct ctl_table *t, size_t col)
{
	long long v;
	size_t r;

	for (r = 0; r < t->nrows; r++) {
		const char *c = ctl_table_cell(t, r, col);

		if (strcmp(c, "-") && !ctl_parse_ll(c, &v))
			return false;
	}
	return t->nrows > 0;
}

/*
 * @cell with control characters (a comm's newline, say) shown as '?': the
 * text view is one line per row whatever a task named itself.
 */
static const char *ctl_printable(const char *cell, char *buf, size_t size)
{
	size_t i;

	for (i = 0; cell[i] && i + 1 < size; i++)
		buf[i] = iscntrl((unsigned char)cell[i]) ? '?' : cell[i];
	buf[i] = '\0';
	return buf;
}

/* Upper-case header, numbers right aligned, the last column unpadded. */
void ctl_table_print(const struct ctl_table *t, FILE *f)
{
	char buf[256];
	size_t *width, r, c, len;
	const char *h;
	bool *right;
	int pad;

	if (!t->ncols)
		return;
	width = calloc(t->ncols, sizeof(*width));
	right = calloc(t->ncols, sizeof(*right));
	if (!width || !right) {
		free(width);
		free(right);
		return;
	}
	for (c = 0; c < t->ncols; c++) {
		width[c] = strlen(t->head[c]);
		for (r = 0; r < t->nrows; r++) {
			len = strlen(ctl_table_cell(t, r, c));
			if (len > width[c])
				width[c] = len;
		}
		right[c] = ctl_column_numeric(t, c);
	}
	for (c = 0; c < t->ncols; c++) {
		pad = (int)(width[c] - strlen(t->head[c]));
		if (c + 1 == t->ncols && !right[c])
			pad = 0;
		fprintf(f, "%s%*s", c ? "  " : "", right[c] ? pad : 0, "");
		for (h = t->head[c]; *h; h++)
			fputc(toupper((unsigned char)*h), f);
		fprintf(f, "%*s", right[c] ? 0 : pad, "");
	}
	fputc('\n', f);
	for (r = 0; r < t->nrows; r++) {
		for (c = 0; c < t->ncols; c++) {
			const char *cell = ctl_table_cell(t, r, c);
			int w = c + 1 == t->ncols && !right[c] ? 0 :
				(int)width[c];

			fprintf(f, "%s%*s", c ? "  " : "", right[c] ? w : -w,
				ctl_printable(cell, buf, sizeof(buf)));
		}
		fputc('\n', f);
	}
	free(width);
	free(right);
}

void ctl_table_free(struct ctl_table *t)
{
	size_t i;

	if (t->cells)
		for (i = 0; i < t->nrows * t->ncols; i++)
			free(t->cells[i]);
	if (t->head)
		for (i = 0; i < t->ncols; i++)
			free(t->head[i]);
	free(t->cells);
	free(t->head);
	memset(t, 0, sizeof(*t));
}

/*
 * Print debugfs mrpool/@file as a table and call @summary on it; @what
 * names a row in the "N rows" line when there is no summary. JSON:
 * {"@what": [row objects], "count": N}.
 */
int ctl_show_debugfs(const char *file, const char *what,
		     void (*summary)(const struct ctl_table *t))
{
	char path[CTL_PATH_MAX];
	struct ctl_table t;
	int ret;

	ctl_path(path, sizeof(path), CTL_DEBUGFS "/%s", file);
	ret = ctl_table_load(&t, path);
	if (ret) {
		ctl_warn_missing(ret, path);
		return CTL_FAIL;
	}
	if (ctl_json) {
		/* The summary is arithmetic over the rows: JSON users do it. */
		ctl_json_obj(NULL);
		ctl_json_table(what, &t);
		ctl_json_uint("count", t.nrows);
		ctl_json_obj_end();
	} else {
		ctl_table_print(&t, stdout);
		if (summary)
			summary(&t);
		else
			printf("%zu %s\n", t.nrows, what);
	}
	ctl_table_free(&t);
	return CTL_OK;
}
