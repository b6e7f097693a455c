// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mrpoolctl watch [SECONDS [COUNT]]: the pool's totals every SECONDS
 * (default 2, fractions allowed), with each counter's rate per second
 * since the previous sample, until COUNT samples (default: until SIGINT
 * or SIGTERM, which end it with status 0). Rates use the time measured
 * between the two reads, not the nominal interval, so a slow read does
 * not inflate them. A counter that went backwards (the module was
 * reloaded) has no rate for that sample.
 *
 * Text: one aligned line per sample. JSON: one object per line with the
 * totals, "counters" (absolute), "deltas" and "rates" (null in the first
 * sample, which has nothing to compare with) and "interval" in seconds.
 */
#define _GNU_SOURCE	/* ppoll() */
#include "mrpoolctl.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One counter of a sample: the f[] counters first, then stats/. */
struct ctl_counter {
	const char *name;	/* points into the ctl_pool it came from */
	long long value;
};

struct ctl_sample {
	struct ctl_pool pool;
	struct ctl_counter *c;
	size_t n;
	struct timespec when;		/* CLOCK_MONOTONIC */
	time_t wall;
};

static volatile sig_atomic_t ctl_watch_stop;

static void ctl_watch_signal(int sig)
{
	(void)sig;
	ctl_watch_stop = 1;
}

static void ctl_sample_free(struct ctl_sample *s)
{
	ctl_pool_free(&s->pool);
	free(s->c);
	memset(s, 0, sizeof(*s));
}

static int ctl_sample_read(struct ctl_sample *s)
{
	size_t i;
	int ret;

	memset(s, 0, sizeof(*s));
	ret = ctl_pool_read(&s->pool);
	if (ret)
		return ret;
	clock_gettime(CLOCK_MONOTONIC, &s->when);
	s->wall = time(NULL);
	s->c = calloc(CTL_NR_FIELDS + s->pool.nstats, sizeof(*s->c));
	if (!s->c)
		return -ENOMEM;
	for (i = 0; i < CTL_NR_FIELDS; i++)
		if (s->pool.f[i].have && s->pool.f[i].kind == CTL_COUNTER)
			s->c[s->n++] = (struct ctl_counter){ s->pool.f[i].name,
							     s->pool.f[i].value };
	for (i = 0; i < s->pool.nstats; i++)
		s->c[s->n++] = (struct ctl_counter){ s->pool.stats[i],
						     s->pool.stat_values[i] };
	return 0;
}

/* Counter @name's increase since @prev; false when there is none. */
static bool ctl_delta(const struct ctl_sample *prev, const char *name,
		      long long now, long long *delta)
{
	size_t i;

	if (!prev)
		return false;
	for (i = 0; i < prev->n; i++)
		if (!strcmp(prev->c[i].name, name)) {
			if ((unsigned long long)now <
			    (unsigned long long)prev->c[i].value)
				return false;
			*delta = (long long)((unsigned long long)now -
					     (unsigned long long)prev->c[i].value);
			return true;
		}
	return false;
}

static double ctl_elapsed(const struct ctl_sample *a, const struct ctl_sample *b)
{
	return (double)(b->when.tv_sec - a->when.tv_sec) +
	       (double)(b->when.tv_nsec - a->when.tv_nsec) / 1e9;
}

static long long ctl_field(const struct ctl_sample *s, int i)
{
	return s->pool.f[i].have ? s->pool.f[i].value : -1;
}

static void ctl_watch_json(const struct ctl_sample *prev,
			   const struct ctl_sample *s)
{
	static const int totals[] = { CTL_F_TOTAL, CTL_F_FREE, CTL_F_USED,
				      CTL_F_QUAR, CTL_F_MAX };
	double dt = prev ? ctl_elapsed(prev, s) : 0;
	long long d;
	size_t i;

	ctl_json_obj(NULL);
	ctl_json_int("time", (long long)s->wall);
	if (prev)
		ctl_json_double("interval", dt);
	else
		ctl_json_null("interval");
	for (i = 0; i < ARRAY_SIZE(totals); i++) {
		if (s->pool.f[totals[i]].have)
			ctl_json_uint(s->pool.f[totals[i]].name,
				      (unsigned long long)ctl_field(s, totals[i]));
		else
			ctl_json_null(s->pool.f[totals[i]].name);
	}
	ctl_json_obj("counters");
	for (i = 0; i < s->n; i++)
		ctl_json_uint(s->c[i].name, (unsigned long long)s->c[i].value);
	ctl_json_obj_end();
	if (!prev) {
		ctl_json_null("deltas");
		ctl_json_null("rates");
	} else {
		ctl_json_obj("deltas");
		for (i = 0; i < s->n; i++) {
			if (ctl_delta(prev, s->c[i].name, s->c[i].value, &d))
				ctl_json_int(s->c[i].name, d);
			else
				ctl_json_null(s->c[i].name);
		}
		ctl_json_obj_end();
		ctl_json_obj("rates");
		for (i = 0; i < s->n; i++) {
			if (dt > 0 && ctl_delta(prev, s->c[i].name,
						s->c[i].value, &d))
				ctl_json_double(s->c[i].name, (double)d / dt);
			else
				ctl_json_null(s->c[i].name);
		}
		ctl_json_obj_end();
	}
	ctl_json_obj_end();
}

/* Text: a few columns operators watch; the rest is in --json. */
static const char *const ctl_watch_rates[] = {
	"allocs", "frees", "alloc_failures", "grows", "trims", "quarantines",
};

static void ctl_watch_header(void)
{
	printf("%-8s %10s %10s %10s %10s", "TIME", "TOTAL", "USED", "FREE",
	       "QUAR");
	printf(" %8s %8s %8s %8s %8s %8s\n", "ALLOC/s", "FREE/s", "FAIL/s",
	       "GROW/s", "TRIM/s", "QUAR/s");
}

static void ctl_watch_text(const struct ctl_sample *prev,
			   const struct ctl_sample *s)
{
	static const int totals[] = { CTL_F_TOTAL, CTL_F_USED, CTL_F_FREE,
				      CTL_F_QUAR };
	double dt = prev ? ctl_elapsed(prev, s) : 0;
	char when[16], human[32];
	struct tm tm;
	long long d;
	size_t i, j;

	localtime_r(&s->wall, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	printf("%-8s", when);
	for (i = 0; i < ARRAY_SIZE(totals); i++)
		printf(" %10s", s->pool.f[totals[i]].have ?
		       ctl_human(human, sizeof(human),
				 (unsigned long long)ctl_field(s, totals[i])) :
		       "?");
	for (i = 0; i < ARRAY_SIZE(ctl_watch_rates); i++) {
		for (j = 0; j < s->n && strcmp(s->c[j].name,
					       ctl_watch_rates[i]); j++)
			;
		if (j < s->n && dt > 0 &&
		    ctl_delta(prev, s->c[j].name, s->c[j].value, &d))
			printf(" %8.1f", (double)d / dt);
		else
			printf(" %8s", "-");
	}
	putchar('\n');
}

static bool ctl_parse_seconds(const char *text, double *sec)
{
	char *end;

	errno = 0;
	*sec = strtod(text, &end);
	return !errno && !*end && end != text && isfinite(*sec) &&
	       *sec >= 0.1 && *sec <= 86400;
}

/*
 * Sleep until @deadline += @sec; false if a signal asked to stop. SIGINT
 * and SIGTERM are blocked but while ppoll() waits, so one that comes
 * between the stop check and the wait ends the wait, not the next one.
 */
static bool ctl_watch_sleep(struct timespec *deadline, double sec,
			    const sigset_t *unblocked)
{
	long long ns = (long long)(sec * 1e9);
	struct timespec now, left;

	deadline->tv_sec += ns / 1000000000;
	deadline->tv_nsec += ns % 1000000000;
	if (deadline->tv_nsec >= 1000000000) {
		deadline->tv_sec++;
		deadline->tv_nsec -= 1000000000;
	}
	while (!ctl_watch_stop) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		left.tv_sec = deadline->tv_sec - now.tv_sec;
		left.tv_nsec = deadline->tv_nsec - now.tv_nsec;
		if (left.tv_nsec < 0) {
			left.tv_sec--;
			left.tv_nsec += 1000000000;
		}
		if (left.tv_sec < 0)
			break;
		if (ppoll(NULL, 0, &left, unblocked) == 0)
			break;
	}
	return !ctl_watch_stop;
}

int ctl_cmd_watch(const struct ctl_cmd *cmd, int argc, char **argv)
{
	struct ctl_sample samples[2], *prev = NULL, *cur;
	struct sigaction sa = { .sa_handler = ctl_watch_signal };
	sigset_t block, unblocked;
	long long count = 0, n;
	struct timespec deadline;
	double sec = 2;
	int ret;

	if (argc > 3)
		return ctl_usage_error(cmd, "unexpected argument '%s'", argv[3]);
	if (argc > 1 && !ctl_parse_seconds(argv[1], &sec))
		return ctl_usage_error(cmd, "SECONDS: '%s' is not a number from 0.1 to 86400",
				       argv[1]);
	if (argc > 2 && (!ctl_parse_ll(argv[2], &count) || count < 1))
		return ctl_usage_error(cmd, "COUNT: '%s' is not a positive integer",
				       argv[2]);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigprocmask(SIG_BLOCK, &block, &unblocked);

	clock_gettime(CLOCK_MONOTONIC, &deadline);
	for (n = 0; !count || n < count; n++) {
		cur = &samples[n & 1];
		ret = ctl_sample_read(cur);
		if (ret) {
			ctl_sample_free(cur);
			if (prev)
				ctl_sample_free(prev);
			ctl_errno(ret, "no pool state to show");
			return CTL_FAIL;
		}
		/* Say what is missing once, not at every sample. */
		ctl_quiet = true;
		if (ctl_json) {
			ctl_watch_json(prev, cur);
		} else {
			if (n % 20 == 0)
				ctl_watch_header();
			ctl_watch_text(prev, cur);
		}
		if (prev)
			ctl_sample_free(prev);
		prev = cur;
		/* output that cannot be written (a full disk, a closed pipe) ends it */
		if (fflush(stdout) || ferror(stdout)) {
			ctl_sample_free(prev);
			ctl_errno(-EIO, "cannot write the samples");
			return CTL_FAIL;
		}
		if ((count && n + 1 >= count) ||
		    !ctl_watch_sleep(&deadline, sec, &unblocked))
			break;
	}
	if (prev)
		ctl_sample_free(prev);
	return CTL_OK;
}
