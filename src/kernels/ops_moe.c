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

/* ids[0..k): the k largest of l[0..n), largest first and the lowest index
 * first among equals, which is what k strict-greater scans choose (the
 * order the routing has always had). One pass keeps the best k so far in
 * that order: an expert enters only when strictly greater than the k-th,
 * past every kept one it does not exceed (k * n compares at most, about n
 * for 512 experts and 10 a token, against k * n for k scans). A NaN
 * orders nothing, so with one the k scans run instead, an expert once
 * taken marked in a bitmap. */
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
    if (!nan) return;
    uint64_t taken[MAX_MARKED / 64];
    uint64_t *bits = n <= MAX_MARKED ? taken : NULL;
    if (bits) memset(taken, 0, (size_t)(n + 63) / 64 * sizeof taken[0]);
    for (int j = 0; j < k; j++) {
        ids[j] = next_best(l, n, bits, ids, j);
        if (bits && ids[j] >= 0) bits[ids[j] >> 6] |= 1ull << (ids[j] & 63);
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
