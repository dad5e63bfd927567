/* gguf.h - GGUF reader and writer.
 *
 * File layout (all integers little-endian; version 2 and 3 are read):
 *
 *   OFFSET  SIZE  DESCRIPTION
 *   0       4     magic "GGUF"
 *   4       4     version (u32)
 *   8       8     n_tensors (u64)
 *   16      8     n_kv (u64)
 *   24      ...   n_kv key/value pairs:   key (string), value type (u32), value
 *   ...     ...   n_tensors tensor infos: name (string), n_dims (u32),
 *                 ne[n_dims] (u64 each), type (u32), offset (u64, relative to
 *                 the data section, a multiple of the alignment)
 *   ...     ...   zero padding up to a multiple of the alignment
 *   data    ...   tensor data; each tensor starts at data + offset
 *
 *   string = length (u64) + bytes (no terminator)
 *   array  = element type (u32) + count (u64) + elements (arrays may nest)
 *   alignment = general.alignment (u32, a power of two) or 32
 *
 * The reader maps the file read-only and never trusts it: every length,
 * count and offset is checked against the bytes that remain before use, and
 * any violation is an RW_ERR_FORMAT error whose message names the byte offset
 * and the key or tensor concerned. Values point into the mapping, so they live
 * as long as the rw_gguf that returned them.
 *
 * A split model (llama.cpp's gguf-split: split.count > 1) is several files
 * named PREFIX-00001-of-0000N.gguf .. PREFIX-0000N-of-0000N.gguf, each a GGUF
 * holding some of the tensors, the first also all the metadata. Opening the
 * first part opens the others and presents one model: the first part's
 * metadata and every part's tensors in part order (split.c).
 */
#ifndef RW_GGUF_GGUF_H
#define RW_GGUF_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/dtype.h"
#include "base/status.h"

#define RW_GGUF_MAX_DIMS 4
#define RW_GGUF_DEFAULT_ALIGNMENT 32

typedef enum {
    RW_GGUF_UINT8 = 0,
    RW_GGUF_INT8 = 1,
    RW_GGUF_UINT16 = 2,
    RW_GGUF_INT16 = 3,
    RW_GGUF_UINT32 = 4,
    RW_GGUF_INT32 = 5,
    RW_GGUF_FLOAT32 = 6,
    RW_GGUF_BOOL = 7,
    RW_GGUF_STRING = 8,
    RW_GGUF_ARRAY = 9,
    RW_GGUF_UINT64 = 10,
    RW_GGUF_INT64 = 11,
    RW_GGUF_FLOAT64 = 12,
    RW_GGUF_TYPE_COUNT
} rw_gguf_type;

/* A string inside the file: not NUL-terminated, may hold any bytes. */
typedef struct {
    const char *ptr;
    uint64_t len;
} rw_gguf_str;

typedef struct rw_gguf_value rw_gguf_value;

/* One metadata value. Scalars are widened: unsigned types and bool in u,
 * signed in i, float32/float64 in f (float32 widening is exact). */
struct rw_gguf_value {
    rw_gguf_type type;
    union {
        uint64_t u;
        int64_t i;
        double f;
        rw_gguf_str str;
        struct {
            rw_gguf_type type;    /* element type */
            uint64_t n;           /* element count */
            const uint8_t *raw;   /* numeric/bool elements, packed little-endian, unaligned */
            rw_gguf_value *items; /* string or array elements (n of them), else NULL */
        } arr;
    };
};

typedef struct {
    const char *key; /* NUL-terminated copy */
    rw_gguf_value value;
} rw_gguf_kv;

typedef struct {
    const char *name;            /* NUL-terminated copy */
    rw_dtype type;
    uint32_t n_dims;             /* 1..RW_GGUF_MAX_DIMS */
    uint64_t ne[RW_GGUF_MAX_DIMS]; /* ggml order, ne[0] contiguous; unused dims are 1 */
    uint64_t offset;             /* relative to the data section */
    uint64_t file_offset;        /* absolute offset in the file */
    uint64_t nbytes;
    const void *data;            /* points into the mapping */
    uint32_t part;               /* the file of a split model holding it (0: the first, or the only one) */
} rw_gguf_tensor;

typedef struct rw_gguf rw_gguf;

/* Opens and validates a GGUF file (mmap, read-only). On success *out owns the
 * mapping; free it with rw_gguf_close. On failure *out is NULL and err says
 * what is wrong and at which offset. The first part of a split model opens
 * all its parts (each validated alike; any other part is refused with the
 * first part's name in the message). */
rw_status rw_gguf_open(const char *path, rw_gguf **out, rw_error *err);

/* Same over a caller-owned buffer that must outlive the rw_gguf (used by the
 * fuzzer and tests). One file only: split keys are not followed. */
rw_status rw_gguf_open_memory(const void *data, size_t size, rw_gguf **out, rw_error *err);

void rw_gguf_close(rw_gguf *g); /* no-op on NULL */

/* True once a read of the mapped file hit a page the file no longer has (it
 * was truncated on disk): the tensor data is then partly zeros, for good.
 * Needs rw_mapped_file_guard_install; false for rw_gguf_open_memory. */
bool rw_gguf_faulted(const rw_gguf *g);
/* Gives back the memory pages of bytes [p, p + n) of one of g's mapped
 * files (the whole pages inside that range) to the page cache: the
 * process's resident size drops, and a later read of them maps them again
 * from the file. For a model that keeps a copy of some weights in another
 * layout. False (nothing done) where the range is not in a mapped file
 * (rw_gguf_open_memory). */
bool rw_gguf_release_pages(const rw_gguf *g, const void *p, size_t n);

/* A split model's files: n_parts (1 for a plain file) and part i, itself an
 * rw_gguf of that one file (part 0 is g itself), owned by g. The
 * file-level getters below (version, alignment, data offset, file data and
 * size) describe part 0; rw_gguf_total_size is the bytes of every part. */
uint32_t rw_gguf_n_parts(const rw_gguf *g);
const rw_gguf *rw_gguf_part(const rw_gguf *g, uint32_t i); /* NULL past the last */
uint64_t rw_gguf_total_size(const rw_gguf *g);

uint32_t rw_gguf_version(const rw_gguf *g);
uint32_t rw_gguf_alignment(const rw_gguf *g);
uint64_t rw_gguf_data_offset(const rw_gguf *g); /* absolute offset of the data section */
const void *rw_gguf_file_data(const rw_gguf *g);
size_t rw_gguf_file_size(const rw_gguf *g);

/* Metadata in file order. */
size_t rw_gguf_n_kv(const rw_gguf *g);
const rw_gguf_kv *rw_gguf_kv_at(const rw_gguf *g, size_t i);
const rw_gguf_value *rw_gguf_get(const rw_gguf *g, const char *key); /* NULL if absent */

/* Typed getters. Each returns RW_ERR_NOT_FOUND if the key is absent and
 * RW_ERR_FORMAT if the value has an incompatible type or does not fit. */
rw_status rw_gguf_get_u32(const rw_gguf *g, const char *key, uint32_t *out, rw_error *err);
rw_status rw_gguf_get_i64(const rw_gguf *g, const char *key, int64_t *out, rw_error *err);
rw_status rw_gguf_get_f32(const rw_gguf *g, const char *key, float *out, rw_error *err);
rw_status rw_gguf_get_bool(const rw_gguf *g, const char *key, bool *out, rw_error *err);
rw_status rw_gguf_get_str(const rw_gguf *g, const char *key, rw_gguf_str *out, rw_error *err);
/* Copies a string value into buf as a C string; fails if it does not fit or
 * holds a NUL byte. */
rw_status rw_gguf_get_cstr(const rw_gguf *g, const char *key, char *buf, size_t cap, rw_error *err);

/* Array element access (v must be an RW_GGUF_ARRAY). Integer/bool elements
 * read through _int, float or integer elements through _float. Return false
 * on a type mismatch or i out of range. */
bool rw_gguf_arr_int(const rw_gguf_value *v, uint64_t i, int64_t *out);
bool rw_gguf_arr_float(const rw_gguf_value *v, uint64_t i, double *out);
bool rw_gguf_arr_str(const rw_gguf_value *v, uint64_t i, rw_gguf_str *out);

/* Size in bytes of one scalar of type t (0 for string, array and invalid). */
size_t rw_gguf_type_size(rw_gguf_type t);
const char *rw_gguf_type_name(rw_gguf_type t);

/* Tensors in file order. */
size_t rw_gguf_n_tensors(const rw_gguf *g);
const rw_gguf_tensor *rw_gguf_tensor_at(const rw_gguf *g, size_t i);
const rw_gguf_tensor *rw_gguf_find_tensor(const rw_gguf *g, const char *name); /* NULL if absent */

/* ---- Writer ----
 * Builds a GGUF file from metadata and tensors, laid out as gguf-py and
 * llama.cpp lay it out: version 3, kv and tensor infos in insertion order,
 * each tensor's data at the next multiple of the alignment (zero padding).
 * Reading a file and writing back all its kvs and tensors reproduces it byte
 * for byte. */
typedef struct rw_gguf_writer rw_gguf_writer;

/* Fills dst (nbytes) with a tensor's data at write time, so that large
 * models can be written without holding every tensor in memory. */
typedef rw_status (*rw_gguf_fill_fn)(void *ctx, const rw_gguf_tensor *info, void *dst, rw_error *err);

rw_gguf_writer *rw_gguf_writer_new(void); /* NULL on out of memory; free with _free */
void rw_gguf_writer_free(rw_gguf_writer *w); /* no-op on NULL */

/* Adds a deep copy of value under key. A key added twice is an error.
 * general.alignment, if added, sets the alignment used for the data. */
rw_status rw_gguf_writer_add_kv(rw_gguf_writer *w, const char *key, const rw_gguf_value *value, rw_error *err);
rw_status rw_gguf_writer_add_u32(rw_gguf_writer *w, const char *key, uint32_t v, rw_error *err);
rw_status rw_gguf_writer_add_i32(rw_gguf_writer *w, const char *key, int32_t v, rw_error *err);
rw_status rw_gguf_writer_add_u64(rw_gguf_writer *w, const char *key, uint64_t v, rw_error *err);
rw_status rw_gguf_writer_add_f32(rw_gguf_writer *w, const char *key, float v, rw_error *err);
rw_status rw_gguf_writer_add_bool(rw_gguf_writer *w, const char *key, bool v, rw_error *err);
rw_status rw_gguf_writer_add_str(rw_gguf_writer *w, const char *key, const char *v, rw_error *err);
rw_status rw_gguf_writer_add_arr_str(rw_gguf_writer *w, const char *key, const char *const *v, uint64_t n, rw_error *err);
rw_status rw_gguf_writer_add_arr_i32(rw_gguf_writer *w, const char *key, const int32_t *v, uint64_t n, rw_error *err);
rw_status rw_gguf_writer_add_arr_u32(rw_gguf_writer *w, const char *key, const uint32_t *v, uint64_t n, rw_error *err);
rw_status rw_gguf_writer_add_arr_f32(rw_gguf_writer *w, const char *key, const float *v, uint64_t n, rw_error *err);
rw_status rw_gguf_writer_add_arr_bool(rw_gguf_writer *w, const char *key, const bool *v, uint64_t n, rw_error *err);

/* Whether a file without tensors still gets zero padding after its header up
 * to the alignment: current gguf-py and llama.cpp write it (the default),
 * older writers did not. Files with tensors are always padded. */
void rw_gguf_writer_set_pad_empty(rw_gguf_writer *w, bool pad);

/* Adds a tensor. Either data (borrowed: must stay valid until the file is
 * written) or fill (called once at write time with ctx) supplies the bytes. */
rw_status rw_gguf_writer_add_tensor(rw_gguf_writer *w, const char *name, rw_dtype type, uint32_t n_dims,
                                    const uint64_t *ne, const void *data, rw_gguf_fill_fn fill, void *ctx,
                                    rw_error *err);

/* Writes the file to path.tmp and renames it to path, so path holds either
 * what it held before or the complete new file. */
rw_status rw_gguf_writer_write(rw_gguf_writer *w, const char *path, rw_error *err);
/* Writes to an open stream (no rename safety). */
rw_status rw_gguf_writer_write_stream(rw_gguf_writer *w, FILE *f, rw_error *err);

/* ---- Split and merge (split.c) ----
 * As llama.cpp's gguf-split, byte for byte: the model of in (itself plain or
 * split) written as parts PREFIX-00001-of-0000N.gguf.., a new part begun
 * every max_tensors tensors, or (max_tensors 0) before the tensor that
 * would take the part's tensor data (each padded to 32 bytes) past
 * max_bytes; the first part has all the metadata, every part split.no,
 * split.count and split.tensors.count. *n_parts (may be NULL) gets N. */
rw_status rw_gguf_split(const char *in, const char *out_prefix, uint32_t max_tensors, uint64_t max_bytes,
                        uint32_t *n_parts, rw_error *err);
/* The parts of a split model (first_part names the first) as one file, as
 * gguf-split --merge writes it (the first part's metadata with split.count
 * set to 0, every tensor in part order). */
rw_status rw_gguf_merge(const char *first_part, const char *out, rw_error *err);

#endif
