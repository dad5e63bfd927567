/* status.c - names and messages of rw_status, and the error record helpers. */
#include "base/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const status_names[] = {
#define RW_STATUS_NAME(name, msg) #name,
    RW_STATUS_MAP(RW_STATUS_NAME)
#undef RW_STATUS_NAME
};

static const char *const status_messages[] = {
#define RW_STATUS_MSG(name, msg) msg,
    RW_STATUS_MAP(RW_STATUS_MSG)
#undef RW_STATUS_MSG
};

const char *rw_status_name(rw_status s) {
    if ((unsigned)s >= RW_STATUS_COUNT) return "ERR_UNKNOWN";
    return status_names[s];
}

const char *rw_status_message(rw_status s) {
    if ((unsigned)s >= RW_STATUS_COUNT) return "unknown error";
    return status_messages[s];
}

/* Replaces newlines so the message stays one line. */
static void one_line(char *s) {
    for (; *s; s++)
        if (*s == '\n' || *s == '\r') *s = ' ';
}

rw_status rw_errorf(rw_error *err, rw_status code, const char *fmt, ...) {
    if (!err) return code;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    one_line(err->msg);
    return code;
}

void rw_error_prefix(rw_error *err, const char *fmt, ...) {
    if (!err) return;
    char prefix[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    char old[sizeof err->msg];
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%s: %s", prefix, old);
    one_line(err->msg);
}
