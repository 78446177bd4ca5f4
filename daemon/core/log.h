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

/* Rate-limited variant for per-item and per-frame paths: at most a few lines
 * per second per call site; the rest are counted and summarised. */
struct log_ratelimit {
	long long window_start_ms;
	unsigned printed, suppressed;
};
void log_rl(struct log_ratelimit *rl, int prio, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Parses "err", "warning", "notice", "info", "debug"; returns the LOG_* level or -1. */
int log_level_parse(const char *name);

#define log_err(...)     log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...)    log_msg(LOG_WARNING, __VA_ARGS__)
#define log_notice(...)  log_msg(LOG_NOTICE, __VA_ARGS__)
#define log_info(...)    log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...)   do { if (log_level >= LOG_DEBUG) log_msg(LOG_DEBUG, __VA_ARGS__); } while (0)

#define log_rl_warn(...) do { static struct log_ratelimit rl_; log_rl(&rl_, LOG_WARNING, __VA_ARGS__); } while (0)
#define log_rl_notice(...) do { static struct log_ratelimit rl_; log_rl(&rl_, LOG_NOTICE, __VA_ARGS__); } while (0)

#endif
