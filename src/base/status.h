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

/* The codes (RW_STATUS_MAP), rw_status, rw_error, rw_status_name() and
 * rw_status_message() are public: they are defined in include/rewind.h. */
#include "rewind.h"

/* Sets err (if non-NULL) to code and a printf-formatted message; returns code
 * so callers can write `return rw_errorf(err, RW_ERR_FORMAT, "...")`. */
rw_status rw_errorf(rw_error *err, rw_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepends "prefix: " to an existing message (for adding context such as a
 * file name on the way up). */
void rw_error_prefix(rw_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
