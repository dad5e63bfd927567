/* gguf_int.h - private to src/gguf: the parsed file. */
#ifndef RW_GGUF_GGUF_INT_H
#define RW_GGUF_GGUF_INT_H

#include "base/arena.h"
#include "base/mapped_file.h"
#include "gguf/gguf.h"

/* Open-addressing index from a name to its position in an array; slots hold
 * position + 1 (0 = empty). cap is a power of two, at least twice the count. */
typedef struct {
    size_t *slots;
    size_t cap;
} gguf_name_index;

struct rw_gguf {
    rw_mapped_file map;       /* owned mapping, or zeroed for rw_gguf_open_memory */
    const uint8_t *data;      /* whole file */
    size_t size;
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset;     /* absolute start of the tensor data section */
    rw_gguf_kv *kvs;          /* n_kv, in file order (arena) */
    size_t n_kv;
    rw_gguf_tensor *tensors;  /* n_tensors, in file order (arena) */
    size_t n_tensors;
    gguf_name_index kv_index;
    gguf_name_index tensor_index;
    rw_arena arena;           /* owns kvs, tensors, names, array items, indexes */
    rw_gguf **parts;          /* a split model's parts 1..n_parts-1 (owned, closed with g); NULL for one file */
    uint32_t n_parts;         /* 1 for one file */
};

uint64_t rw_gguf__hash(const char *s);

/* reader.c: (re)builds g's tensor name index over g->tensors[0..n_tensors);
 * a name seen twice is an RW_ERR_FORMAT error. */
rw_status rw_gguf__index_tensors(rw_gguf *g, rw_error *err);
/* reader.c: rw_gguf_open of one file, not following split keys. */
rw_status rw_gguf__open_one(const char *path, rw_gguf **out, rw_error *err);

#endif
