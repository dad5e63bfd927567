/* mapped_file.h - a whole file mapped read-only into memory, and a guard
 * for files that shrink while they are mapped. */
#ifndef RW_BASE_MAPPED_FILE_H
#define RW_BASE_MAPPED_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct {
    const void *data; /* NULL for an empty file */
    size_t size;
} rw_mapped_file;

/* Maps path read-only. On success the caller owns the mapping and releases it
 * with rw_mapped_file_close. */
rw_status rw_mapped_file_open(const char *path, rw_mapped_file *out, rw_error *err);
void rw_mapped_file_close(rw_mapped_file *f); /* safe on a zeroed struct */

/* A file truncated (or failing with an I/O error) while mapped makes the next
 * read of a page past its new end raise SIGBUS, which kills the process.
 * rw_mapped_file_guard_install installs a process-wide SIGBUS handler that,
 * for an address inside a mapping opened here, replaces the mapping from
 * that page to its end with zero-filled memory and marks the file faulted;
 * the read then completes (with zeros) and whoever computes from the file
 * checks rw_mapped_file_faulted afterwards and fails. Any other SIGBUS goes
 * to the handler that was installed before (or kills the process, as
 * without the guard). Called by programs, once, before their threads start;
 * idempotent. Returns RW_ERR_IO if sigaction fails. */
rw_status rw_mapped_file_guard_install(rw_error *err);

/* True once a read of f hit a page the file no longer has. Sticky: the
 * zero-filled pages stay until the mapping is closed. */
bool rw_mapped_file_faulted(const rw_mapped_file *f);

/* Faults caught by the guard since the process started (for metrics). */
uint64_t rw_mapped_file_fault_count(void);

#endif
