/* spec_rule.c - the adaptive drafting rule of speculative decoding (spec.h):
 * how many tokens to draft from the acceptance seen so far and the costs
 * of a verify pass and a draft pass, with probes that re-measure a draft
 * that stopped paying and give it up after two failures. */
#include "engine/spec.h"

#define DECAY 0.9          /* per drafting step, on both counts */
#define PROBE_AFTER 16     /* idle steps before the first probe */
#define MAX_FAILED_PROBES 2 /* then the sequence stops drafting */
#define MIN_GAIN 1.03      /* drafting must beat plain decoding by 3% */
#define CATCH_UP 0.25      /* a prefill token's cost / a decode step's (0.8B preset: 230 vs 58 tok/s) */
#define MAX_CATCH_UP 0.02  /* most of the remaining budget a catch-up may cost */

void rw_spec_rule_init(rw_spec_rule *r) {
    *r = (rw_spec_rule){.acc_a = 1.5, .acc_r = 0.5, .probe_every = PROBE_AFTER};
}

/* The k in 0..cap with the largest expected tokens per cost: a step with k
 * drafts emits E(k) = 1 + alpha + ... + alpha^k tokens for
 * C(k) = 1 + k (verify_cost + draft_cost) decode steps; 0 unless the best
 * beats plain decoding by MIN_GAIN. */
static int32_t best_k(const rw_spec_rule *r, const rw_spec_params *p, int64_t cap) {
    const double alpha = r->acc_a / (r->acc_a + r->acc_r);
    const double unit = (double)p->draft_cost + (double)p->verify_cost;
    double best = MIN_GAIN, e = 1, pw = 1;
    int32_t k_best = 0;
    for (int32_t k = 1; k <= cap; k++) {
        pw *= alpha;
        e += pw;
        const double gain = e / (1 + k * unit);
        if (gain > best) {
            best = gain;
            k_best = k;
        }
    }
    return k_best;
}

int32_t rw_spec_rule_plan(const rw_spec_rule *r, const rw_spec_params *p, int64_t cap, int64_t budget,
                          int64_t behind) {
    if (cap <= 0 || r->failed >= MAX_FAILED_PROBES) return 0;
    /* the draft's first pass catches up on the tokens it has not seen (the
     * prompt, at first): not worth it for a short remainder */
    const double per = p->catch_up_cost > 0 ? (double)p->catch_up_cost : CATCH_UP * (double)p->draft_cost;
    if (per * (double)behind > MAX_CATCH_UP * (double)budget) return 0;
    /* a probe makes the draft catch up on the idle tokens: only worth it
     * when more tokens remain than it waited for */
    if (r->idle >= r->probe_every) return budget > r->probe_every ? 1 : 0;
    return best_k(r, p, cap);
}

void rw_spec_rule_update(rw_spec_rule *r, const rw_spec_params *p, int32_t k, int32_t accepted) {
    if (k <= 0) {
        r->idle++;
        return;
    }
    const bool probe = p->adaptive && r->idle >= r->probe_every; /* as planned */
    r->acc_a = DECAY * r->acc_a + accepted;
    r->acc_r = DECAY * r->acc_r + (accepted < k ? 1 : 0);
    if (probe) {
        /* a probe fails when drafting still does not pay after it */
        if (best_k(r, p, p->k_max) == 0) {
            r->failed++;
            r->probe_every *= 2;
        } else {
            r->failed = 0;
            r->probe_every = PROBE_AFTER;
        }
    }
    r->idle = 0;
}
