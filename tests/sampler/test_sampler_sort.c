/* test_sampler_sort.c - rw_cand_select (the sampler's private top-m
 * selection: heap, qsort and the radix sort) against a plain insertion into
 * rw_cand_before order, on candidate sets with ties, zeros of both signs,
 * infinities, whole vocabularies and scattered ids. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sampler/sampler_int.h"
#include "harness.h"

static uint64_t rng = 7;
static uint32_t next(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}

static int cmp_ref(const void *a, const void *b) {
    const rw_cand *x = a, *y = b;
    return rw_cand_before(*x, *y) ? -1 : rw_cand_before(*y, *x) ? 1 : 0;
}

int main(void) {
    enum { NMAX = 6000 };
    rw_cand *c = malloc(NMAX * sizeof *c), *ref = malloc(NMAX * sizeof *ref);
    rw_sort_buf b = {.tmp = malloc(NMAX * sizeof(rw_cand)), .count = malloc(RW_RADIX_DIGITS * sizeof *b.count)};
    int *seen = calloc(1u << 20, sizeof *seen);
    const int64_t sizes[] = {1, 2, 7, 100, 1024, 1025, 3000, NMAX};
    for (int iter = 0; iter < 160; iter++) {
        const int64_t n = sizes[iter % 8];
        const bool all_ids = iter % 3 == 0; /* ids 0..n-1, shuffled */
        for (int64_t i = 0; i < n; i++) {
            int32_t id;
            if (all_ids)
                id = (int32_t)i;
            else
                do id = (int32_t)(next() % (1u << 20)); /* unique scattered ids */
                while (seen[id] == iter + 1);
            seen[id] = iter + 1;
            const uint32_t r = next() % 64;
            float l = r == 0          ? -INFINITY
                      : r == 1        ? INFINITY
                      : r == 2        ? -0.0f
                      : r == 3        ? 0.0f
                      : iter % 4 == 1 ? (float)(r % 5) /* heavy ties */
                                      : ((float)next() / 4294967296.0f - 0.5f) * (iter % 2 ? 1e-3f : 40.0f);
            c[i] = (rw_cand){.l = l, .id = id};
        }
        for (int64_t i = n - 1; i > 0; i--) { /* shuffle */
            const int64_t j = next() % (uint64_t)(i + 1);
            rw_cand t = c[i];
            c[i] = c[j];
            c[j] = t;
        }
        memcpy(ref, c, (size_t)n * sizeof *c);
        qsort(ref, (size_t)n, sizeof *ref, cmp_ref);
        const int64_t ms[] = {1, 20, 256, n / 8, n - 1, n};
        int64_t m = ms[iter % 6] < 1 ? 1 : ms[iter % 6];
        rw_cand_select(c, n, m, &b);
        if (m > n) m = n;
        int64_t bad = -1;
        for (int64_t i = 0; i < m && bad < 0; i++)
            if (c[i].id != ref[i].id || c[i].l != ref[i].l) bad = i;
        CHECK_MSG(bad < 0, "iter %d, n %lld m %lld: position %lld has %d, want %d", iter, (long long)n, (long long)m,
                  (long long)bad, bad < 0 ? 0 : (int)c[bad].id, bad < 0 ? 0 : (int)ref[bad].id);
        /* the rest is still the other candidates */
        long long sum_ids = 0, want_ids = 0;
        for (int64_t i = 0; i < n; i++) sum_ids += c[i].id, want_ids += ref[i].id;
        CHECK_EQ_INT(sum_ids, want_ids);
    }
    free(c);
    free(ref);
    free(b.tmp);
    free(b.count);
    free(seen);
    return rw_test_done();
}
