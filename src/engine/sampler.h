/* sampler.h - picks the next token from a row of logits.
 *
 * Temperature 0 (or below) is greedy: the highest logit, ties to the lowest
 * id. Otherwise a token is drawn from softmax(logits / temperature) with a
 * seeded generator (splitmix64), so a seed reproduces a generation. */
#ifndef RW_ENGINE_SAMPLER_H
#define RW_ENGINE_SAMPLER_H

#include <stdint.h>

typedef struct {
    float temp;
    uint64_t state; /* generator state */
} rw_sampler;

void rw_sampler_init(rw_sampler *s, float temp, uint64_t seed);

/* Index of the largest of n values (the lowest index among equal ones; NaN
 * never wins). n > 0. */
int32_t rw_argmax(const float *logits, int64_t n);

int32_t rw_sampler_sample(rw_sampler *s, const float *logits, int64_t n);

#endif
