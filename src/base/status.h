/* status.h - the one list of error codes in rewind, and the error record.
 *
 * Every fallible library function returns an rw_status and, when given a
 * non-NULL rw_error, fills it with a one-line human-readable message that
 * says what went wrong and where (file offset, key name, tensor name...).
 * The library never exits or aborts on bad input; it returns one of these.
 */
#ifndef RW_BASE_STATUS_H
#define RW_BASE_STATUS_H

#include <stddef.h>

/* X(name, message): the enum, rw_status_name() and rw_status_message() are all
 * generated from this list so they cannot drift apart. */
#define RW_STATUS_MAP(X)                                                        \
    X(OK, "success")                                                           \
    X(ERR_INVALID_ARG, "invalid argument")                                     \
    X(ERR_NOMEM, "out of memory")                                              \
    X(ERR_IO, "input/output error")                                            \
    X(ERR_FORMAT, "malformed file")                                            \
    X(ERR_UNSUPPORTED, "unsupported feature")                                  \
    X(ERR_NOT_FOUND, "not found")                                              \
    X(ERR_RANGE, "value out of range")                                         \
    X(ERR_TEMPLATE, "template error")                                          \
    X(ERR_CONTEXT, "context overflow")                                         \
    X(ERR_CANCELLED, "cancelled")                                              \
    X(ERR_BUSY, "too many requests")                                           \
    X(ERR_INTERNAL, "internal error")

typedef enum {
#define RW_STATUS_ENUM(name, msg) RW_##name,
    RW_STATUS_MAP(RW_STATUS_ENUM)
#undef RW_STATUS_ENUM
        RW_STATUS_COUNT
} rw_status;

/* An error record filled by the function that failed. msg is always a
 * NUL-terminated single line (no newline). */
typedef struct rw_error {
    rw_status code;
    char msg[512];
} rw_error;

const char *rw_status_name(rw_status s);    /* "ERR_FORMAT" */
const char *rw_status_message(rw_status s); /* "malformed file" */

/* Sets err (if non-NULL) to code and a printf-formatted message; returns code
 * so callers can write `return rw_errorf(err, RW_ERR_FORMAT, "...")`. */
rw_status rw_errorf(rw_error *err, rw_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepends "prefix: " to an existing message (for adding context such as a
 * file name on the way up). */
void rw_error_prefix(rw_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
