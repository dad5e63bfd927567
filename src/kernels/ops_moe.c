/* ops_moe.c - top-k expert routing of one token (ops.h). */
#include "kernels/ops.h"

void rw_moe_route(const float *logits, int n_expert, int k, bool normalize, float scale, int32_t *ids,
                  float *weights, float *probs) {
    rw_softmax(logits, probs, n_expert);
    /* k passes of a strict-greater scan: the lowest index wins a tie, and an
     * expert already taken is skipped by index (k is small: 2..10). */
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < n_expert; e++) {
            bool taken = false;
            for (int m = 0; m < j && !taken; m++) taken = ids[m] == e;
            if (!taken && (best < 0 || probs[e] > probs[best])) best = e;
        }
        ids[j] = best;
        weights[j] = probs[best];
    }
    if (normalize) {
        double sum = 0.0;
        for (int j = 0; j < k; j++) sum += (double)weights[j];
        float s = (float)sum;
        if (s < 6.103515625e-5f) s = 6.103515625e-5f;
        for (int j = 0; j < k; j++) weights[j] /= s;
    }
    if (scale != 1.0f)
        for (int j = 0; j < k; j++) weights[j] *= scale;
}
