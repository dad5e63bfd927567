/* log.h - the library's one way to say something: through the embedder's
 * hook (rw_log_set in include/rewind.h). With no hook set the library is
 * silent; it never writes to stderr itself. */
#ifndef RW_BASE_LOG_H
#define RW_BASE_LOG_H

#include "rewind.h"

/* Formats and passes one line to the hook, if one is set and level is
 * within its max_level. Thread-safe. */
void rw_log(rw_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Whether a message of this level would reach a hook (to skip costly
 * formatting). */
bool rw_log_enabled(rw_log_level level);

#endif
