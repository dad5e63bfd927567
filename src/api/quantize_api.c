/* quantize_api.c - rw_quantize_file and rw_quantize_type (include/rewind.h)
 * over src/quantize. */
#include "quantize/quantize.h"
#include "rewind.h"

rw_status rw_quantize_file(const char *in_path, const char *out_path, const char *type, unsigned flags, int n_threads,
                           rw_error *err) {
    if (flags & ~(RW_QUANTIZE_PURE | RW_QUANTIZE_ALLOW_REQUANTIZE))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_quantize_file: unknown flags 0x%x", flags);
    const rw_quantize_options o = {.type = type,
                                   .pure = flags & RW_QUANTIZE_PURE,
                                   .allow_requantize = flags & RW_QUANTIZE_ALLOW_REQUANTIZE,
                                   .n_threads = n_threads};
    return rw_quantize_write(in_path, out_path, &o, err);
}

const char *rw_quantize_type(size_t i) {
    const rw_quantize_ftype *f = i < 1000 ? rw_quantize_ftype_at((int)i) : NULL;
    return f ? f->name : NULL;
}
