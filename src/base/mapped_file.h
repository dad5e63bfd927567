/* mapped_file.h - a whole file mapped read-only into memory. */
#ifndef RW_BASE_MAPPED_FILE_H
#define RW_BASE_MAPPED_FILE_H

#include <stddef.h>

#include "base/status.h"

typedef struct {
    const void *data; /* NULL for an empty file */
    size_t size;
} rw_mapped_file;

/* Maps path read-only. On success the caller owns the mapping and releases it
 * with rw_mapped_file_close. */
rw_status rw_mapped_file_open(const char *path, rw_mapped_file *out, rw_error *err);
void rw_mapped_file_close(rw_mapped_file *f); /* safe on a zeroed struct */

#endif
