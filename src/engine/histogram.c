/* histogram.c - the engine's latency and batch-size histograms
 * (rw_histogram, engine.h): fixed bucket bounds, counts, sum. */
#include <string.h>

#include "engine/engine_int.h"

void rw_engine__hist_init(rw_histogram *h, const double *bounds, int n) {
    memset(h, 0, sizeof *h);
    h->n_bounds = n < RW_HIST_MAX ? n : RW_HIST_MAX;
    memcpy(h->bounds, bounds, (size_t)h->n_bounds * sizeof *bounds);
}

void rw_engine__hist_observe(rw_histogram *h, double v) {
    int i = 0;
    while (i < h->n_bounds && v > h->bounds[i]) i++;
    h->counts[i]++;
    h->sum += v;
    h->count++;
}
