/* daemon/core/log.h - logging to stderr with syslog-level prefixes ("<3>...") so that
 * journald keeps the level.  Messages are lowercase, one line, no trailing
 * newline; "%m" works as in syslog (errno at the call).
 */
#ifndef FERRY_LOG_H
#define FERRY_LOG_H

#include <syslog.h>

extern int log_level;           /* messages above this LOG_* level are dropped */

void log_init(const char *ident, int level);
void log_msg(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Rate limiting, for every line that a client, a peer or anyone who can
 * connect can make us write (per item, per frame, per connection, per
 * refusal): at most burst lines per interval per call site; the rest are
 * counted, and the first line of the next interval from that site is
 * preceded by "N messages like "<format>" suppressed in the last S s", so
 * that a flood shows in the log as a count, not as lines.  A zeroed struct
 * means LOG_RL_BURST lines per LOG_RL_INTERVAL_MS. */
#define LOG_RL_BURST        10
#define LOG_RL_INTERVAL_MS  5000

struct log_ratelimit {
	unsigned burst;                 /* 0: LOG_RL_BURST */
	unsigned interval_ms;           /* 0: LOG_RL_INTERVAL_MS */
	long long window_start_ms;
	unsigned printed, suppressed;
	const char *fmt;                /* of the suppressed lines, for the summary */
};
/* Returns 1 if the line was written, 0 if it was suppressed (or above the
 * log level). */
int log_rl(struct log_ratelimit *rl, int prio, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Parses "err", "warning", "notice", "info", "debug"; returns the LOG_* level or -1. */
int log_level_parse(const char *name);

#define log_err(...)     log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...)    log_msg(LOG_WARNING, __VA_ARGS__)
#define log_notice(...)  log_msg(LOG_NOTICE, __VA_ARGS__)
#define log_info(...)    log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...)   do { if (log_level >= LOG_DEBUG) log_msg(LOG_DEBUG, __VA_ARGS__); } while (0)

/* Rate-limited variants, one limit per call site (see log_rl). */
#define log_rl_at(prio, ...) do { static struct log_ratelimit rl_; log_rl(&rl_, (prio), __VA_ARGS__); } while (0)
#define log_rl_err(...)    log_rl_at(LOG_ERR, __VA_ARGS__)
#define log_rl_warn(...)   log_rl_at(LOG_WARNING, __VA_ARGS__)
#define log_rl_notice(...) log_rl_at(LOG_NOTICE, __VA_ARGS__)
#define log_rl_info(...)   log_rl_at(LOG_INFO, __VA_ARGS__)

#endif
