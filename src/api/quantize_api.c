/* quantize_api.c - rw_quantize_file and rw_quantize_type (include/rewind.h)
 * over src/quantize. */
#include "api/api_int.h"
#include "quantize/quantize.h"
#include "models/model.h"
#include "rewind.h"

void rw_quantize_params_init(rw_quantize_params *p, size_t size) {
    const rw_quantize_params d = {.struct_size = sizeof d};
    rw_api__params_out(p, size, &d, sizeof d);
}

/* A tensor type by name into *out; NULL leaves RW_TYPE_COUNT (none). */
static rw_status tensor_type(const char *name, const char *what, rw_dtype *out, rw_error *err) {
    *out = RW_TYPE_COUNT;
    if (name && !rw_dtype_from_name(name, out))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "%s: unknown tensor type \"%s\"", what, name);
    return RW_OK;
}

rw_status rw_quantize_file(const char *in_path, const char *out_path, const char *type, const rw_quantize_params *p,
                           rw_error *err) {
    rw_quantize_params q = rw_quantize_params_default();
    rw_status s = rw_api__params_in(&q, sizeof q, RW_API__QUANTIZE_PARAMS_V1, p, "rw_quantize_params", err);
    rw_quantize_options o = {.type = type,
                             .pure = q.pure,
                             .allow_requantize = q.allow_requantize,
                             .n_threads = q.n_threads,
                             .imatrix = q.imatrix,
                             .tensor_types = q.tensor_types};
    if (!s) s = tensor_type(q.output_type, "output_type", &o.output_type, err);
    if (!s) s = tensor_type(q.token_embd_type, "token_embd_type", &o.token_embd_type, err);
    return s ? s : rw_quantize_write(in_path, out_path, &o, err);
}

const char *rw_quantize_type(size_t i) {
    const rw_quantize_ftype *f = i < 1000 ? rw_quantize_ftype_at((int)i) : NULL;
    return f ? f->name : NULL;
}

/* The public collector is the model's (models/imatrix.c). */
rw_status rw_imatrix_begin(rw_model *m, bool process_output, rw_imatrix_collector **out, rw_error *err) {
    if (!out) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_imatrix_begin: out is NULL");
    *out = NULL;
    if (!m) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_imatrix_begin: no model");
    rw_model_imatrix *c = NULL;
    rw_status s = rw_model_imatrix_begin(m, process_output, &c, err);
    *out = (rw_imatrix_collector *)c;
    return s;
}

rw_status rw_imatrix_save(const rw_imatrix_collector *c, const char *path, const char *dataset, uint32_t chunk_count,
                          uint32_t chunk_size, rw_error *err) {
    if (!c || !path) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_imatrix_save: a collector and a path are needed");
    return rw_model_imatrix_save((const rw_model_imatrix *)c, path, dataset, chunk_count, chunk_size, err);
}

void rw_imatrix_end(rw_imatrix_collector *c) { rw_model_imatrix_end((rw_model_imatrix *)c); }
