/* version.c - the library's version and its allocator for returned memory. */
#include <stdlib.h>

#include "rewind.h"

const char *rw_version(void) { return RW_VERSION_STRING; }

/* Everything the API returns is malloc'd by the library's C runtime; freeing
 * it through the library keeps that true for embedders with another one. */
void rw_free(void *p) { free(p); }
