/* state_io.c - byte buffers, CRC-32 and the operations-table check (state.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cache/state.h"

void rw_sbuf_put(rw_sbuf *b, const void *p, size_t n) {
    if (b->failed || n == 0) return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        uint8_t *d = realloc(b->data, cap);
        if (!d) {
            b->failed = true;
            return;
        }
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

/* Integers are little-endian on disk; this project targets x86-64 only. */
void rw_sbuf_put_u32(rw_sbuf *b, uint32_t v) { rw_sbuf_put(b, &v, 4); }
void rw_sbuf_put_u64(rw_sbuf *b, uint64_t v) { rw_sbuf_put(b, &v, 8); }

const void *rw_sread_ptr(rw_sreader *r, size_t n) {
    if (r->failed || n > r->len - r->off) {
        r->failed = true;
        return NULL;
    }
    const void *p = r->p + r->off;
    r->off += n;
    return p;
}

bool rw_sread(rw_sreader *r, void *dst, size_t n) {
    const void *p = rw_sread_ptr(r, n);
    if (p && n) memcpy(dst, p, n);
    return p != NULL;
}
bool rw_sread_u32(rw_sreader *r, uint32_t *v) { return rw_sread(r, v, 4); }
bool rw_sread_u64(rw_sreader *r, uint64_t *v) { return rw_sread(r, v, 8); }

/* CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320). The reference
 * takes a byte per step through one table; the fast one eight bytes per
 * step through eight tables ("slicing by 8": table k maps a byte to its
 * CRC after k more zero bytes), about five times faster, which matters for
 * the disk tier's writer (state files of a 0.8B model are ~100 MB, checked
 * twice). Same results: tests/cache/test_crc.c. Tables built once. */
static uint32_t crc_table[8][256];
static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (uint32_t i = 0; i < 256; i++)
            crc_table[t][i] = crc_table[0][crc_table[t - 1][i] & 0xff] ^ (crc_table[t - 1][i] >> 8);
}
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

uint32_t rw_crc32_ref(uint32_t crc, const void *p, size_t n) {
    pthread_once(&crc_once, crc_init);
    const uint8_t *s = p;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = crc_table[0][(crc ^ s[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

uint32_t rw_crc32(uint32_t crc, const void *p, size_t n) {
    pthread_once(&crc_once, crc_init);
    const uint8_t *s = p;
    crc = ~crc;
    for (; n >= 8; n -= 8, s += 8) { /* little-endian: the first byte is the lowest */
        uint32_t lo, hi;
        memcpy(&lo, s, 4);
        memcpy(&hi, s + 4, 4);
        lo ^= crc;
        crc = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^ crc_table[5][(lo >> 16) & 0xff] ^
              crc_table[4][lo >> 24] ^ crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff] ^
              crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
    }
    for (; n; n--, s++) crc = crc_table[0][(crc ^ *s) & 0xff] ^ (crc >> 8);
    return ~crc;
}

rw_status rw_state_ops_check(const rw_state_ops *o, rw_error *err) {
#define NEED(f)                                                                                                        \
    if (!o->f) return rw_errorf(err, RW_ERR_INTERNAL, "state kind %s lacks the operation " #f, o->kind ? o->kind : "?");
    if (!o) return rw_errorf(err, RW_ERR_INTERNAL, "state without an operations table");
    NEED(kind) NEED(free) NEED(length) NEED(bytes) NEED(restore_point) NEED(rewind) NEED(retain) NEED(checkpoints)
    NEED(clone) NEED(copy_from) NEED(each_block) NEED(save) NEED(load)
#undef NEED
    return RW_OK;
}
