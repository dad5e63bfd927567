/* test_sampler.c - greedy ties, NaN handling, temperature draws. */
#include <math.h>

#include "engine/sampler.h"
#include "harness.h"

int main(void) {
    const float a[] = {1.0f, 3.0f, 3.0f, -2.0f};
    CHECK_EQ_INT(rw_argmax(a, 4), 1);
    const float b[] = {NAN, -5.0f, NAN, -1.0f};
    CHECK_EQ_INT(rw_argmax(b, 4), 3);
    rw_sampler s;
    rw_sampler_init(&s, 0.0f, 1);
    CHECK_EQ_INT(rw_sampler_sample(&s, a, 4), 1);
    /* T = 1 over logits {0, log 3}: token 1 about 3/4 of the time. */
    const float c[] = {0.0f, logf(3.0f)};
    rw_sampler_init(&s, 1.0f, 42);
    int ones = 0;
    for (int i = 0; i < 20000; i++) ones += rw_sampler_sample(&s, c, 2);
    CHECK_MSG(ones > 14600 && ones < 15400, "%d of 20000", ones);
    /* Same seed, same draws. */
    rw_sampler s1, s2;
    rw_sampler_init(&s1, 0.7f, 7);
    rw_sampler_init(&s2, 0.7f, 7);
    for (int i = 0; i < 100; i++) CHECK_EQ_INT(rw_sampler_sample(&s1, c, 2), rw_sampler_sample(&s2, c, 2));
    /* A very low temperature behaves greedily. */
    rw_sampler_init(&s, 1e-4f, 3);
    for (int i = 0; i < 100; i++) {
        int32_t t = rw_sampler_sample(&s, a, 4);
        CHECK_MSG(t == 1 || t == 2, "drew %d", (int)t);
    }
    return rw_test_done();
}
