/* ops_moe.c - top-k expert routing of one token (ops.h). */
#include "kernels/ops.h"

/* Index of the largest of l[0..n) not yet in ids[0..j): a strict-greater
 * scan, so the lowest index wins a tie. */
static int next_best(const float *l, int n, const int32_t *ids, int j) {
    int best = -1;
    for (int e = 0; e < n; e++) {
        bool taken = false;
        for (int m = 0; m < j && !taken; m++) taken = ids[m] == e;
        if (!taken && (best < 0 || l[e] > l[best])) best = e;
    }
    return best;
}

void rw_moe_route_topk_softmax(const float *logits, int n_expert, int k, int32_t *ids, float *weights) {
    for (int j = 0; j < k; j++) {
        ids[j] = next_best(logits, n_expert, ids, j);
        weights[j] = logits[ids[j]];
    }
    rw_softmax(weights, weights, k);
}

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
