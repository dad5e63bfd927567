/* test_gguf_nesting.c - a GGUF metadata value of arrays nested 100,000 deep
 * (1.2 MB of array headers, each holding one array) is refused with the
 * reader's depth limit named, never a stack overflow; 2 levels still load. */
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "harness.h"

enum { T_UINT32 = 4, T_STRING = 8, T_ARRAY = 9 };

static size_t put(unsigned char *b, size_t o, const void *p, size_t n) {
    memcpy(b + o, p, n);
    return o + n;
}

/* a file with no tensors and one key "k" holding arrays nested depth deep around one u32 */
static unsigned char *nested(int depth, size_t *size) {
    unsigned char *b = calloc((size_t)depth * 12 + 128, 1);
    size_t o = 0;
    const uint32_t magic = 0x46554747, version = 3, t_arr = T_ARRAY, t_u32 = T_UINT32, v = 7;
    const uint64_t n_tensors = 0, n_kv = 1, klen = 1, one = 1;
    o = put(b, o, &magic, 4);
    o = put(b, o, &version, 4);
    o = put(b, o, &n_tensors, 8);
    o = put(b, o, &n_kv, 8);
    o = put(b, o, &klen, 8);
    o = put(b, o, "k", 1);
    o = put(b, o, &t_arr, 4); /* the value: an array */
    for (int d = 1; d < depth; d++) { /* of one array, ... */
        o = put(b, o, &t_arr, 4);
        o = put(b, o, &one, 8);
    }
    o = put(b, o, &t_u32, 4); /* ... of one u32 */
    o = put(b, o, &one, 8);
    o = put(b, o, &v, 4);
    *size = o;
    return b;
}

int main(void) {
    const int depths[] = {2, 12, 100000};
    for (int i = 0; i < 3; i++) {
        size_t n = 0;
        unsigned char *b = nested(depths[i], &n);
        rw_gguf *g = NULL;
        rw_error err = {0};
        rw_status st = rw_gguf_open_memory(b, n, &g, &err);
        if (depths[i] <= 2) CHECK_MSG(st == RW_OK, "depth %d: %s", depths[i], err.msg);
        else CHECK_MSG(st != RW_OK && strstr(err.msg, "nested"), "depth %d: %d %s", depths[i], (int)st, err.msg);
        rw_gguf_close(g);
        free(b);
    }
    return rw_test_done();
}
