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

/* CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320), table built once. */
static uint32_t crc_table[256];
static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t rw_crc32(uint32_t crc, const void *p, size_t n) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, crc_init);
    const uint8_t *s = p;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = crc_table[(crc ^ s[i]) & 0xff] ^ (crc >> 8);
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
