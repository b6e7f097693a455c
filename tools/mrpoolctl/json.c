// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * JSON output (--json): a small streaming writer on stdout. Each document
 * is one line, so watch and monitor print one object per line (JSON
 * Lines) and a consumer can read them as they come. The writer tracks
 * nesting only to place commas; keys and strings are escaped per RFC 8259.
 */
#include "mrpoolctl.h"

#include <stdio.h>
#include <string.h>

bool ctl_json;

/* Depth of nesting, and whether the container at each depth has items. */
#define CTL_JSON_DEPTH	16
static int ctl_json_depth;
static bool ctl_json_items[CTL_JSON_DEPTH];

/*
 * Length of the well-formed UTF-8 sequence at @p (RFC 3629: no overlong
 * forms, no surrogates, at most U+10FFFF), or 0.
 */
static size_t ctl_utf8_len(const unsigned char *p)
{
	size_t n, i;

	if (*p >= 0xc2 && *p <= 0xdf)
		n = 2;
	else if (*p >= 0xe0 && *p <= 0xef)
		n = 3;
	else if (*p >= 0xf0 && *p <= 0xf4)
		n = 4;
	else
		return 0;
	for (i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	if ((*p == 0xe0 && p[1] < 0xa0) || (*p == 0xed && p[1] > 0x9f) ||
	    (*p == 0xf0 && p[1] < 0x90) || (*p == 0xf4 && p[1] > 0x8f))
		return 0;
	return n;
}

/*
 * A task's comm or a device's reason is any bytes: what is not UTF-8
 * becomes U+FFFD, so the document stays valid JSON.
 */
static void ctl_json_string(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n;

	putchar('"');
	for (; *p; p++) {
		if (*p >= 0x80) {
			n = ctl_utf8_len(p);
			if (n) {
				fwrite(p, 1, n, stdout);
				p += n - 1;
			} else {
				fputs("\\ufffd", stdout);
			}
		} else if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", stdout);
		else if (*p == '\t')
			fputs("\\t", stdout);
		else if (*p < 0x20 || *p == 0x7f)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

/* The comma before an item and its key, if it is in an object. */
static void ctl_json_item(const char *key)
{
	if (ctl_json_depth > 0) {
		if (ctl_json_items[ctl_json_depth])
			putchar(',');
		ctl_json_items[ctl_json_depth] = true;
	}
	if (key) {
		ctl_json_string(key);
		putchar(':');
	}
}

static void ctl_json_open(const char *key, char c)
{
	ctl_json_item(key);
	putchar(c);
	if (ctl_json_depth + 1 < CTL_JSON_DEPTH)
		ctl_json_depth++;
	ctl_json_items[ctl_json_depth] = false;
}

/* Closing the outermost container ends the line (and the document). */
static void ctl_json_close(char c)
{
	putchar(c);
	if (ctl_json_depth > 0)
		ctl_json_depth--;
	if (!ctl_json_depth)
		putchar('\n');
}

void ctl_json_obj(const char *key)
{
	ctl_json_open(key, '{');
}

void ctl_json_obj_end(void)
{
	ctl_json_close('}');
}

void ctl_json_arr(const char *key)
{
	ctl_json_open(key, '[');
}

void ctl_json_arr_end(void)
{
	ctl_json_close(']');
}

void ctl_json_str(const char *key, const char *v)
{
	ctl_json_item(key);
	if (v)
		ctl_json_string(v);
	else
		fputs("null", stdout);
}

void ctl_json_int(const char *key, long long v)
{
	ctl_json_item(key);
	printf("%lld", v);
}

void ctl_json_uint(const char *key, unsigned long long v)
{
	ctl_json_item(key);
	printf("%llu", v);
}

/* A finite number with up to 3 decimals (rates, seconds). */
void ctl_json_double(const char *key, double v)
{
	ctl_json_item(key);
	printf("%.3f", v);
}

void ctl_json_null(const char *key)
{
	ctl_json_item(key);
	fputs("null", stdout);
}

void ctl_json_bool(const char *key, bool v)
{
	ctl_json_item(key);
	fputs(v ? "true" : "false", stdout);
}

/*
 * Plain decimal only: a hex pfn stays a string as the kernel printed it,
 * and a leading zero is not octal here.
 */
static bool ctl_json_decimal(const char *s, long long *v)
{
	const char *d = s + (*s == '-');

	if (!*d || (d[0] == '0' && d[1]) || strspn(d, "0123456789") != strlen(d))
		return false;
	return ctl_parse_ll(s, v);
}

/*
 * A text cell of a table or a sysfs file: an integer stays a number, the
 * tables' "-" (none) and "?" (unreadable) become null, the rest a string.
 */
void ctl_json_cell(const char *key, const char *text)
{
	long long v;

	if (!text || !strcmp(text, "-") || !strcmp(text, "?"))
		ctl_json_null(key);
	else if (ctl_json_decimal(text, &v))
		ctl_json_int(key, v);
	else
		ctl_json_str(key, text);
}

/*
 * Columns of free text (a task's comm, a name, a reason): a string
 * whatever it looks like, since a comm may well be "123" or "-".
 */
static bool ctl_json_text_col(const char *name)
{
	static const char *const text[] = { "comm", "name", "reason" };
	size_t i;

	for (i = 0; i < ARRAY_SIZE(text); i++)
		if (!strcmp(name, text[i]))
			return true;
	return false;
}

/* A table as an array of objects keyed by the (lower-case) column names. */
void ctl_json_table(const char *key, const struct ctl_table *t)
{
	const char *cell;
	size_t r, c;

	ctl_json_arr(key);
	for (r = 0; r < t->nrows; r++) {
		ctl_json_obj(NULL);
		for (c = 0; c < t->ncols; c++) {
			cell = ctl_table_cell(t, r, c);
			if (cell && ctl_json_text_col(t->head[c]))
				ctl_json_str(t->head[c], cell);
			else
				ctl_json_cell(t->head[c], cell);
		}
		ctl_json_obj_end();
	}
	ctl_json_arr_end();
}
