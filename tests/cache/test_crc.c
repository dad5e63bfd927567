/* test_crc.c - the CRC-32 of state and cache files: the fast version
 * (eight bytes a step) against the bytewise reference on random buffers
 * of every length up to 70 and odd offsets, split and whole (a running
 * CRC continues the same), and the standard check value. */
#include <stdlib.h>
#include <string.h>

#include "cache/state.h"
#include "harness.h"

int main(void) {
    CHECK(rw_crc32(0, "123456789", 9) == 0xCBF43926u);
    CHECK(rw_crc32_ref(0, "123456789", 9) == 0xCBF43926u);
    uint8_t buf[4096 + 16];
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < sizeof buf; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
    for (size_t off = 0; off < 9; off++)
        for (size_t n = 0; n <= 70; n++) CHECK(rw_crc32(7, buf + off, n) == rw_crc32_ref(7, buf + off, n));
    CHECK(rw_crc32(0, buf, 4096) == rw_crc32_ref(0, buf, 4096));
    for (size_t cut = 0; cut <= 4096; cut += 123)
        CHECK(rw_crc32(rw_crc32(0, buf, cut), buf + cut, 4096 - cut) == rw_crc32_ref(0, buf, 4096));
    return rw_test_done();
}
