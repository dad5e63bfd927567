/* params_api.c - reading the embedder's parameter structs, which start with
 * struct_size (include/rewind.h): the fields the caller's struct has are
 * the caller's, the fields it lacks (it was built against an older header)
 * are the defaults. Why a size field and not opaque params with setters:
 * docs/api.md, "Compatibility". */
#include <string.h>

#include "api/api_int.h"

void rw_api__params_out(void *dst, size_t size, const void *defaults, size_t full) {
    if (!dst || size < sizeof size) return; /* not even struct_size fits */
    memset(dst, 0, size);                   /* a newer program's fields we do not know: zero, their default */
    memcpy(dst, defaults, size < full ? size : full);
    memcpy(dst, &size, sizeof size);
}

rw_status rw_api__params_in(void *dst, size_t dst_size, size_t v1_size, const void *src, const char *what,
                            rw_error *err) {
    if (!src) return RW_OK; /* NULL params: the defaults already in dst */
    size_t n;
    memcpy(&n, src, sizeof n); /* struct_size leads every sized struct */
    if (n == 0) n = v1_size;   /* a zeroed struct of the first sized layout */
    if (n < v1_size)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "%s: struct_size %zu is smaller than its first layout (%zu)", what,
                         n, v1_size);
    if (n > dst_size) {
        /* a newer header's struct: fine if the fields this library does
         * not know are left zero (the caller did not ask for them) */
        const unsigned char *tail = (const unsigned char *)src + dst_size;
        for (size_t i = 0; i < n - dst_size; i++)
            if (tail[i])
                return rw_errorf(err, RW_ERR_UNSUPPORTED,
                                 "%s: sets a field at byte %zu, past the %zu bytes this library (%s) knows", what,
                                 dst_size + i, dst_size, RW_VERSION_STRING);
        n = dst_size;
    }
    memcpy(dst, src, n);
    memcpy(dst, &dst_size, sizeof dst_size); /* dst now holds every field */
    return RW_OK;
}
