/* daemon/core/log.c - see log.h. */
#include "log.h"
#include "../../proto/clock.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

int log_level = LOG_INFO;
static const char *log_ident = "ferryd";

void log_init(const char *ident, int level)
{
	log_ident = ident;
	log_level = level;
}

static void vlog(int prio, const char *fmt, va_list ap)
{
	char line[1024];
	int n;

	/* One write per line so that lines from several daemons sharing a
	 * terminal or a log file do not interleave mid-line. */
	n = snprintf(line, sizeof(line), "<%d>%s: ", prio, log_ident);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	fwrite(line, 1, (size_t)n, stderr);
}

void log_msg(int prio, const char *fmt, ...)
{
	va_list ap;

	if (prio > log_level)
		return;
	va_start(ap, fmt);
	vlog(prio, fmt, ap);
	va_end(ap);
}

int log_rl(struct log_ratelimit *rl, int prio, const char *fmt, ...)
{
	int saved = errno;
	long long now = (long long)proto_now_ms();
	unsigned burst = rl->burst ? rl->burst : LOG_RL_BURST;
	unsigned interval = rl->interval_ms ? rl->interval_ms : LOG_RL_INTERVAL_MS;
	va_list ap;

	if (prio > log_level)
		return 0;
	if (now - rl->window_start_ms >= interval) {
		if (rl->suppressed)
			log_msg(prio, "%u messages like \"%s\" suppressed in the last %lld s", rl->suppressed,
				rl->fmt, (now - rl->window_start_ms + 999) / 1000);
		rl->window_start_ms = now;
		rl->printed = rl->suppressed = 0;
	}
	if (rl->printed >= burst) {
		rl->suppressed++;
		rl->fmt = fmt;
		return 0;
	}
	rl->printed++;
	errno = saved;
	va_start(ap, fmt);
	vlog(prio, fmt, ap);
	va_end(ap);
	return 1;
}

int log_level_parse(const char *name)
{
	static const struct { const char *name; int level; } levels[] = {
		{ "err", LOG_ERR }, { "warning", LOG_WARNING }, { "notice", LOG_NOTICE },
		{ "info", LOG_INFO }, { "debug", LOG_DEBUG },
	};

	for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
		if (strcasecmp(name, levels[i].name) == 0)
			return levels[i].level;
	return -1;
}
