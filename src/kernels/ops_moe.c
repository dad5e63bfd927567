/* ops_moe.c - top-k expert routing of one token (ops.h). */
#include "kernels/ops.h"

#include <string.h>

enum { MAX_MARKED = 4096 }; /* experts a route marks in a bitmap; more take the scan of ids */

/* Index of the largest of l[0..n) not yet taken (marked in the bitmap, or
 * without one in ids[0..j)): a strict-greater scan, so the lowest index
 * wins a tie. */
static int next_best(const float *l, int n, const uint64_t *taken, const int32_t *ids, int j) {
    int best = -1;
    for (int e = 0; e < n; e++) {
        bool t = false;
        if (taken) t = taken[e >> 6] >> (e & 63) & 1;
        else
            for (int m = 0; m < j && !t; m++) t = ids[m] == e;
        if (!t && (best < 0 || l[e] > l[best])) best = e;
    }
    return best;
}

/* ids[0..k): the k largest of l[0..n) in k strict-greater scans (the
 * order the routing has always had: largest first, the lowest index first
 * among equals), an expert once taken marked so that each scan is one
 * pass over l (k * n rather than k * k * n: 512 experts, 10 a token). */
static void top_k(const float *l, int n, int k, int32_t *ids) {
    uint64_t bits[MAX_MARKED / 64];
    uint64_t *taken = n <= MAX_MARKED ? bits : NULL;
    if (taken) memset(bits, 0, (size_t)(n + 63) / 64 * sizeof bits[0]);
    for (int j = 0; j < k; j++) {
        ids[j] = next_best(l, n, taken, ids, j);
        if (taken && ids[j] >= 0) taken[ids[j] >> 6] |= 1ull << (ids[j] & 63);
    }
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
