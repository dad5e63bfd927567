/* ops_rope.c - the multi-section (M-RoPE / IMROPE) rotation cache (ops.h).
 *
 * Every stream's angle is advanced by the same running float product as in
 * rw_rope_cache, so a stream whose position equals p yields exactly the
 * angles rw_rope_cache yields at p. */
#include <math.h>

#include "kernels/ops.h"

/* Which of the four position streams pair i uses. */
static int stream_of(int i, const int s[4], bool interleaved) {
    const int sect = i % (s[0] + s[1] + s[2] + s[3]);
    if (interleaved) {
        if (sect % 3 == 1 && sect < 3 * s[1]) return 1;
        if (sect % 3 == 2 && sect < 3 * s[2]) return 2;
        if (sect % 3 == 0 && sect < 3 * s[0]) return 0;
        return 3;
    }
    if (sect < s[0]) return 0;
    if (sect < s[0] + s[1]) return 1;
    if (sect < s[0] + s[1] + s[2]) return 2;
    return 3;
}

void rw_rope_cache_multi(const float pos[4], const int sections[4], bool interleaved, int n_rot, float base,
                         float freq_scale, const float *freq_factors, float *cs) {
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    float theta[4] = {pos[0], pos[1], pos[2], pos[3]};
    const bool any = sections[0] + sections[1] + sections[2] + sections[3] > 0;
    for (int i = 0; i < n_rot / 2; i++) {
        const float ff = freq_factors ? freq_factors[i] : 1.0f;
        const float th = theta[any ? stream_of(i, sections, interleaved) : 0];
        const float t = freq_scale * (th / ff);
        cs[2 * i] = cosf(t);
        cs[2 * i + 1] = sinf(t);
        for (int s = 0; s < 4; s++) theta[s] *= theta_scale;
    }
}
