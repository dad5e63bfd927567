/* sampler.c - greedy and temperature sampling (sampler.h). */
#include "engine/sampler.h"

#include <math.h>

void rw_sampler_init(rw_sampler *s, float temp, uint64_t seed) {
    s->temp = temp;
    s->state = seed;
}

int32_t rw_argmax(const float *logits, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (logits[i] > logits[best] || (logits[best] != logits[best] && logits[i] == logits[i])) best = i;
    return (int32_t)best;
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int32_t rw_sampler_sample(rw_sampler *s, const float *logits, int64_t n) {
    const int32_t best = rw_argmax(logits, n);
    if (!(s->temp > 0.0f)) return best;
    /* softmax(l / T) without a buffer: sum, then walk to the drawn mass. */
    const double mx = logits[best], inv_t = 1.0 / s->temp;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        if (logits[i] == logits[i]) sum += exp((logits[i] - mx) * inv_t);
    const double u = (double)(splitmix64(&s->state) >> 11) * (1.0 / 9007199254740992.0) * sum;
    double acc = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (logits[i] != logits[i]) continue;
        acc += exp((logits[i] - mx) * inv_t);
        if (u < acc) return (int32_t)i;
    }
    return best;
}
