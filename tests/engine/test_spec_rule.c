/* test_spec_rule.c - the adaptive drafting rule (spec.h's rw_spec_rule)
 * simulated against a cost model, without models: speculative decoding must
 * never cost more than 5% over plain decoding, whatever the acceptance rate,
 * and must pay when the draft agrees.
 *
 * Cost model, in plain decode steps (what `rewind bench spec` measures on the
 * 0.8B preset): a verify pass of k drafts costs 1 + k * verify, each draft
 * pass `draft`; when a sequence drafts after idle steps (or for the first
 * time, after the prompt), the draft first catches up on the tokens it
 * missed, as a prefill costing CATCH_UP * draft per token. Each draft is accepted with probability
 * alpha (independently); a step emits the accepted prefix plus one token.
 * The rule plans with the same verify and draft costs (the README's
 * figures), so this checks the rule's logic - its estimate of alpha, its
 * probes and its stopping - not the cost figures themselves. The same for
 * the costs of the other draft sources (spec.h): the MTP block of a 0.8B /
 * 4B Qwen3.5 with its 248k-token head (a draft token streams the block and
 * the head: about 0.36 / 0.2 of a decode step; a catch-up token a quarter of
 * the block: about 0.01), and n-gram drafts (free). */
#include <stdlib.h>

#include "engine/spec.h"
#include "harness.h"

#define CATCH_UP 0.25 /* prefill cost per token relative to a decode step */

static uint64_t rng_state;
static double uniform(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

/* Cost of generating n tokens with the rule, in decode steps. */
static double simulate(const rw_spec_params *p, double alpha, int64_t prompt, int64_t n, double *drafted_share) {
    rw_spec_rule r;
    rw_spec_rule_init(&r);
    double cost = 0;
    int64_t done = 0, behind = prompt, drafted = 0;
    while (done < n) {
        const int64_t remaining = n - done;
        int64_t cap = p->k_max < remaining - 1 ? p->k_max : remaining - 1;
        const int32_t k = cap > 0 ? rw_spec_rule_plan(&r, p, cap, remaining, behind) : 0;
        int32_t a = 0;
        if (k > 0) {
            const double per = p->catch_up_cost > 0 ? p->catch_up_cost : CATCH_UP * p->draft_cost;
            cost += per * (double)behind + k * p->draft_cost + 1 + k * p->verify_cost;
            behind = 0;
            while (a < k && uniform() < alpha) a++;
            drafted += k;
        } else {
            cost += 1;
            behind++;
        }
        done += a + 1;
        rw_spec_rule_update(&r, p, k, a);
    }
    if (drafted_share) *drafted_share = (double)drafted / (double)n;
    return cost;
}

/* Never more than 5% over plain decoding, for every acceptance rate,
 * prompt and length. */
static void check_bound(const rw_spec_params *pp, const char *what) {
    const rw_spec_params p = *pp;
    static const int64_t lengths[] = {48, 200, 1000}, prompts[] = {16, 300, 2000};
    double worst = 0, worst_alpha = 0;
    for (int li = 0; li < 9; li++)
        for (int ai = 0; ai <= 20; ai++) {
            const double alpha = ai / 20.0;
            double total = 0;
            const int seeds = 200;
            for (int sd = 0; sd < seeds; sd++) {
                rng_state = 0x9E3779B97F4A7C15ull ^ (uint64_t)(sd * 7919 + li * 104729 + ai);
                total += simulate(&p, alpha, prompts[li / 3], lengths[li % 3], NULL);
            }
            const double ratio = total / seeds / (double)lengths[li % 3];
            if (ratio > worst) worst = ratio, worst_alpha = alpha;
            CHECK_MSG(ratio <= 1.05, "%s: alpha %.2f, prompt %lld, %lld tokens: %.3f x plain decoding", what, alpha,
                      (long long)prompts[li / 3], (long long)lengths[li % 3], ratio);
        }
    fprintf(stderr, "%s: worst mean cost %.3f x plain decoding (alpha %.2f)\n", what, worst, worst_alpha);
}

int main(void) {
    rw_spec_params p = rw_spec_params_default();
    CHECK(p.adaptive);
    check_bound(&p, "draft model (defaults)");
    rw_spec_params q = p;
    q.draft_cost = 0.36f, q.catch_up_cost = 0.01f;
    check_bound(&q, "MTP, 0.8B");
    q.draft_cost = 0.2f, q.catch_up_cost = 0.006f;
    check_bound(&q, "MTP, 4B");
    q.draft_cost = 0, q.catch_up_cost = 0;
    check_bound(&q, "n-gram");

    /* a draft that always agrees pays: K = 4 gives 5 tokens per verify pass */
    rng_state = 1;
    double share;
    const double all = simulate(&p, 1.0, 16, 1000, &share) / 1000.0;
    fprintf(stderr, "alpha 1: %.3f x plain, %.2f drafts per token\n", all, share);
    CHECK(all < 1.0 / (1 + p.k_max) * (1 + p.k_max * (p.verify_cost + p.draft_cost)) + 0.02);
    CHECK(all < 0.7);
    /* a useless draft is given up: after the first steps nothing is drafted */
    rng_state = 2;
    simulate(&p, 0.0, 16, 1000, &share);
    fprintf(stderr, "alpha 0: %.3f drafts per token\n", share);
    CHECK(share < 0.02);
    return rw_test_done();
}
