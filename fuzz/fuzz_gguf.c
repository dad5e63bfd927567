/* fuzz_gguf.c - libFuzzer harness for the GGUF reader and writer.
 *
 * Property: any input either fails with a one-line error, or parses into a
 * directory whose tensors lie inside the input; a parsed file written back by
 * the writer parses again with the same tensors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"

#define FUZZ_ASSERT(c)                                                     \
    do {                                                                   \
        if (!(c)) {                                                        \
            fprintf(stderr, "fuzz_gguf: property failed: %s\n", #c);       \
            __builtin_trap();                                              \
        }                                                                  \
    } while (0)

static void check_rewrite(const rw_gguf *g) {
    rw_error err;
    rw_gguf_writer *w = rw_gguf_writer_new();
    if (!w) return;
    for (size_t i = 0; i < rw_gguf_n_kv(g); i++) {
        const rw_gguf_kv *kv = rw_gguf_kv_at(g, i);
        FUZZ_ASSERT(rw_gguf_writer_add_kv(w, kv->key, &kv->value, &err) == RW_OK);
    }
    for (size_t i = 0; i < rw_gguf_n_tensors(g); i++) {
        const rw_gguf_tensor *t = rw_gguf_tensor_at(g, i);
        FUZZ_ASSERT(rw_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, NULL, NULL, &err) == RW_OK);
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    FUZZ_ASSERT(rw_gguf_writer_write_stream(w, f, &err) == RW_OK);
    fclose(f);
    rw_gguf *g2;
    rw_status s = rw_gguf_open_memory(buf, len, &g2, &err);
    if (s != RW_OK) fprintf(stderr, "rewritten file rejected: %s\n", err.msg);
    FUZZ_ASSERT(s == RW_OK);
    FUZZ_ASSERT(rw_gguf_n_tensors(g2) == rw_gguf_n_tensors(g) && rw_gguf_n_kv(g2) == rw_gguf_n_kv(g));
    for (size_t i = 0; i < rw_gguf_n_tensors(g); i++) {
        const rw_gguf_tensor *a = rw_gguf_tensor_at(g, i), *b = rw_gguf_tensor_at(g2, i);
        FUZZ_ASSERT(!strcmp(a->name, b->name) && a->nbytes == b->nbytes);
        FUZZ_ASSERT(a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0);
    }
    rw_gguf_close(g2);
    free(buf);
    rw_gguf_writer_free(w);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    rw_gguf *g;
    rw_error err = {0};
    if (rw_gguf_open_memory(data, size, &g, &err) != RW_OK) {
        FUZZ_ASSERT(err.msg[0] && !strchr(err.msg, '\n'));
        return 0;
    }
    for (size_t i = 0; i < rw_gguf_n_kv(g); i++) {
        const rw_gguf_kv *kv = rw_gguf_kv_at(g, i);
        uint32_t u;
        float fl;
        rw_gguf_get_u32(g, kv->key, &u, &err);
        rw_gguf_get_f32(g, kv->key, &fl, &err);
        if (kv->value.type == RW_GGUF_ARRAY && kv->value.arr.n) {
            int64_t x;
            double d;
            rw_gguf_str s;
            rw_gguf_arr_int(&kv->value, kv->value.arr.n - 1, &x);
            rw_gguf_arr_float(&kv->value, kv->value.arr.n - 1, &d);
            rw_gguf_arr_str(&kv->value, kv->value.arr.n - 1, &s);
        }
    }
    for (size_t i = 0; i < rw_gguf_n_tensors(g); i++) {
        const rw_gguf_tensor *t = rw_gguf_tensor_at(g, i);
        const unsigned char *p = t->data;
        FUZZ_ASSERT(p >= data && p + t->nbytes <= data + size);
        FUZZ_ASSERT(rw_gguf_find_tensor(g, t->name) == t);
    }
    check_rewrite(g);
    rw_gguf_close(g);
    return 0;
}
