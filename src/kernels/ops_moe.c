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

/* ids[0..k): the k largest of l[0..n), largest first and the lowest index
 * first among equals, which is what k strict-greater scans (next_best)
 * choose, the order the routing has always had. One pass keeps the best k
 * so far in that order: an expert enters only when strictly greater than
 * the k-th, past every kept one it does not exceed (about n compares for
 * 512 experts and 10 a token, against k * k * n for the scans). A NaN
 * orders nothing, so with one the scans run instead. */
static void top_k(const float *l, int n, int k, int32_t *ids) {
    int cnt = 0;
    bool nan = false;
    for (int e = 0; e < n; e++) {
        const float v = l[e];
        nan |= v != v;
        if (cnt == k && !(v > l[ids[k - 1]])) continue;
        int p = cnt < k ? cnt++ : k - 1;
        for (; p > 0 && v > l[ids[p - 1]]; p--) ids[p] = ids[p - 1];
        ids[p] = e;
    }
    for (int j = 0; nan && j < k; j++) ids[j] = next_best(l, n, ids, j);
}

void rw_moe_route_topk_softmax(const float *logits, int n_expert, int k, int32_t *ids, float *weights) {
    top_k(logits, n_expert, k, ids);
    for (int j = 0; j < k; j++) weights[j] = logits[ids[j]];
    rw_softmax(weights, weights, k);
}

void rw_moe_route(const float *logits, int n_expert, int k, bool normalize, float scale, int32_t *ids, float *weights,
                  float *probs) {
    rw_softmax(logits, probs, n_expert);
    top_k(probs, n_expert, k, ids);
    for (int j = 0; j < k; j++) weights[j] = probs[ids[j]];
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
