/* error.c - a request's error record, filled printf-style, and the
 * server's log lines: kept apart from the routes (server.c) so that every
 * file that reports an error or logs depends on this one alone, which
 * depends on none of the server's. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "server/server_int.h"

/* A message cut by a size limit may end inside a UTF-8 character: drop
 * that partial character (the JSON writer would refuse the whole string). */
void rw_server__utf8_cut(char *msg, size_t cap) {
    size_t n = strlen(msg);
    if (n + 1 < cap) return; /* not cut */
    size_t i = n;
    while (i > 0 && ((unsigned char)msg[i - 1] & 0xC0) == 0x80) i--; /* continuation bytes */
    if (i == 0) return;
    unsigned char lead = (unsigned char)msg[i - 1];
    size_t want = lead < 0x80 ? 1 : (lead >> 5) == 6 ? 2 : (lead >> 4) == 14 ? 3 : (lead >> 3) == 30 ? 4 : 1;
    if (n - (i - 1) < want) msg[i - 1] = 0;
}

void rw_server__errorf(rw_server__error *e, int http, const char *type, const char *code, const char *param,
                       const char *fmt, ...) {
    e->http = http;
    e->type = type;
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    rw_server__utf8_cut(e->param, sizeof e->param);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    rw_server__utf8_cut(e->msg, sizeof e->msg);
}

/* A line through the library's log hook (rw_log), as "serve: ...". */
void rw_server__logf(rw_server *s, const char *fmt, ...) {
    (void)s;
    if (!rw_log_enabled(RW_LOG_INFO)) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    rw_log(RW_LOG_INFO, "serve: %s", line);
}
