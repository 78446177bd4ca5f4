/* daemon/core/notify.h - systemd integration (the only file that touches
 * sd-daemon): socket activation, READY=1, STATUS=, WATCHDOG=1, STOPPING=1.
 * Everything is a no-op when not started by systemd.
 */
#ifndef FERRY_NOTIFY_H
#define FERRY_NOTIFY_H

#include <stdint.h>

/* The listening socket systemd passed (ferryd.socket), or -1. */
int notify_listen_fd(void);

void notify_ready(void);
void notify_stopping(void);
void notify_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Watchdog period the unit asked for, in microseconds; 0 if none. */
uint64_t notify_watchdog_usec(void);
void notify_watchdog(void);

#endif
