/* daemon/core/notify.c - see notify.h. */
#include "notify.h"
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>

int notify_listen_fd(void)
{
	int n = sd_listen_fds(1);

	if (n < 0) {
		log_warn("sd_listen_fds: %s", strerror(-n));
		return -1;
	}
	if (n == 0)
		return -1;
	if (n > 1)
		log_warn("systemd passed %d sockets; using the first", n);
	if (sd_is_socket_unix(SD_LISTEN_FDS_START, SOCK_STREAM, 1, NULL, 0) <= 0) {
		log_warn("the socket systemd passed is not a listening unix stream socket; ignoring it");
		return -1;
	}
	return SD_LISTEN_FDS_START;
}

void notify_ready(void)
{
	sd_notify(0, "READY=1");
}

void notify_stopping(void)
{
	sd_notify(0, "STOPPING=1");
}

void notify_status(const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	int n = snprintf(buf, sizeof(buf), "STATUS=");

	va_start(ap, fmt);
	vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	sd_notify(0, buf);
}

uint64_t notify_watchdog_usec(void)
{
	uint64_t usec = 0;

	return sd_watchdog_enabled(0, &usec) > 0 ? usec : 0;
}

void notify_watchdog(void)
{
	sd_notify(0, "WATCHDOG=1");
}
