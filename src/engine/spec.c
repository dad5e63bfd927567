/* spec.c - speculative decoding steps (see spec.h for the protocol and the
 * adaptive rule). */
#include "engine/spec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The draft sampler's seed: another stream than the target's, so a draft
 * token and the target's acceptance test never share a uniform number. */
#define DRAFT_SEED_XOR 0x5bd1e9955bd1e995ull

struct rw_spec_seq {
    rw_model_seq *target; /* borrowed */
    rw_model_seq *draft;  /* owned (NULL once taken: rw_spec_seq_take_draft, or without a draft model) */
    const rw_model *dmodel; /* NULL without a draft model */
    /* the target's model, for its MTP block: the sequence's forward passes
     * use it mutably (its scratch) whatever the constness of the handle */
    rw_model *tmodel;
    unsigned src;   /* RW_SPEC_MTP | RW_SPEC_NGRAM */
    float *mh;      /* [n_embd] the MTP block's last output row (the next chained input) */
    bool ngram_step; /* this step's drafts are the n-gram lookup's */
    rw_sampler *sampler;  /* borrowed: the request's */
    rw_sampler *dsampler; /* owned: the draft's */
    rw_spec_params p;
    bool greedy;
    bool started;
    int64_t n_vocab;
    int32_t last;   /* newest token, processed by neither model */
    float *logits;  /* [k_max + 1][n_vocab] verify rows */
    float *q;       /* [k_max][n_vocab] draft distributions (sampled requests), else
                       NULL */
    float *dlogits; /* [n_vocab] the draft's last row */
    int32_t *feed;  /* the draft's first pass of a step: catch-up tokens + last */
    int64_t feed_cap;
    int32_t vtok[RW_SPEC_MAX_K + 1]; /* last, drafts */
    int32_t out[RW_SPEC_MAX_K + 1];
    int32_t k, n_out;
    int64_t len0;        /* the target's length at the step's start */
    int64_t dbase;       /* draft sampler's accepted count at the step's start */
    rw_spec_rule rule;
    rw_spec_stats st;
    rw_spec_end_fn end; /* may be NULL */
    void *end_ctx;
    rw_spec_mask_fn mask; /* may be NULL */
    void *mask_ctx;
    float *mlogits; /* [k_max + 1][n_vocab] the verify rows masked; owned, with a constraint only */
};

rw_spec_params rw_spec_params_default(void) {
    return (rw_spec_params){.k_max = 4, .adaptive = true, .draft_cost = 0.1f, .verify_cost = 0.25f, .ngram_n = 3,
                            .ngram_min_hits = 1};
}

void rw_spec_params_set_costs(rw_spec_params *p, const rw_model *m, bool draft_model) {
    if (p->sources & RW_SPEC_MTP) {
        float draft = 0, catch_up = 0;
        rw_model_mtp_costs(m, &draft, &catch_up);
        if (draft > 0) p->draft_cost = draft, p->catch_up_cost = catch_up;
    } else if ((p->sources & RW_SPEC_NGRAM) && !draft_model) {
        p->draft_cost = 0, p->catch_up_cost = 0;
    }
}

rw_status rw_spec_check_vocab(const rw_tokenizer *target, const rw_tokenizer *draft, rw_error *err) {
    int32_t nt = rw_tokenizer_n_vocab(target), nd = rw_tokenizer_n_vocab(draft);
    if (nt != nd)
        return rw_errorf(err, RW_ERR_INVALID_ARG,
                         "the draft's vocabulary has %d tokens, the target's %d: a "
                         "draft needs the same vocabulary",
                         (int)nd, (int)nt);
    for (int32_t i = 0; i < nt; i++) {
        const char *a = rw_tokenizer_token_text(target, i), *b = rw_tokenizer_token_text(draft, i);
        if (strcmp(a ? a : "", b ? b : ""))
            return rw_errorf(err, RW_ERR_INVALID_ARG,
                             "token %d differs between the target's and the draft's "
                             "vocabularies: a draft needs "
                             "the same vocabulary",
                             (int)i);
    }
    return RW_OK;
}

rw_status rw_spec_seq_new(const rw_model *draft_model, rw_model_seq *target, rw_sampler *sampler,
                          const rw_sampler_params *sp, const rw_spec_params *p, rw_spec_seq **out, rw_error *err) {
    *out = NULL;
    if (p->k_max < 0 || p->k_max > RW_SPEC_MAX_K || !(p->draft_cost >= 0) || !(p->verify_cost >= 0) ||
        !(p->catch_up_cost >= 0))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "draft-max must be in [0, %d]", RW_SPEC_MAX_K);
    if ((p->sources & RW_SPEC_NGRAM) && (p->ngram_n < 1 || p->ngram_n > 64 || p->ngram_min_hits < 1))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "n-gram drafts: the n-gram length must be in [1, 64], min hits >= 1");
    if (!draft_model && !(p->sources & (RW_SPEC_MTP | RW_SPEC_NGRAM)))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "speculative decoding without a draft source");
    rw_model *tm = (rw_model *)rw_model_seq_model(target);
    if ((p->sources & RW_SPEC_MTP) && draft_model)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "MTP drafts and a draft model cannot be combined");
    if ((p->sources & RW_SPEC_MTP) && !rw_model_mtp_enabled(tm))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "MTP drafts need the model's MTP block enabled");
    const int64_t nv = rw_model_get_hparams(tm)->n_vocab;
    if (draft_model && rw_model_get_hparams(draft_model)->n_vocab != nv)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "the draft model has %lld vocabulary rows, the target %lld",
                         (long long)rw_model_get_hparams(draft_model)->n_vocab, (long long)nv);
    rw_spec_seq *s = calloc(1, sizeof *s);
    if (!s) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    s->target = target;
    s->dmodel = draft_model;
    s->tmodel = tm;
    s->src = p->sources & (RW_SPEC_MTP | RW_SPEC_NGRAM);
    s->sampler = sampler;
    s->p = *p;
    s->greedy = !(sp->temperature > 0);
    s->n_vocab = nv;
    rw_spec_rule_init(&s->rule);
    rw_sampler_params dp = *sp;
    dp.seed ^= DRAFT_SEED_XOR;
    rw_status st = draft_model ? rw_model_seq_new(draft_model, rw_model_seq_kv_type(target),
                                                  rw_model_seq_max_ctx(target), &s->draft, err)
                               : RW_OK;
    if (!st) st = rw_sampler_new(&dp, nv, &s->dsampler, err);
    if (!st && (s->src & RW_SPEC_MTP) &&
        !(s->mh = malloc((size_t)rw_model_get_hparams(tm)->n_embd * sizeof *s->mh)))
        st = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    if (!st) {
        s->logits = malloc((size_t)(p->k_max + 1) * (size_t)nv * sizeof(float));
        s->dlogits = malloc((size_t)nv * sizeof(float));
        if (!s->greedy && p->k_max) s->q = malloc((size_t)p->k_max * (size_t)nv * sizeof(float));
        if (!s->logits || !s->dlogits || (!s->greedy && p->k_max && !s->q))
            st = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    if (st) {
        rw_spec_seq_free(s);
        return st;
    }
    *out = s;
    return RW_OK;
}

void rw_spec_seq_free(rw_spec_seq *s) {
    if (!s) return;
    rw_model_seq_free(s->draft);
    rw_sampler_free(s->dsampler);
    free(s->logits);
    free(s->q);
    free(s->dlogits);
    free(s->feed);
    free(s->mh);
    free(s->mlogits);
    free(s);
}

rw_status rw_spec_seq_set_constraint(rw_spec_seq *s, rw_spec_mask_fn fn, void *ctx, rw_error *err) {
    if (fn && !s->mlogits) {
        s->mlogits = malloc((size_t)(s->p.k_max + 1) * (size_t)s->n_vocab * sizeof(float));
        if (!s->mlogits) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    s->mask = fn;
    s->mask_ctx = ctx;
    return RW_OK;
}

rw_status rw_spec_seq_start(rw_spec_seq *s, int32_t last, rw_error *err) {
    if (last < 0 || last >= s->n_vocab) return rw_errorf(err, RW_ERR_INVALID_ARG, "token %d out of range", (int)last);
    rw_sampler_rewind(s->dsampler, 0);
    rw_status st = rw_sampler_accept(s->dsampler, last, err);
    if (st) return st;
    s->last = last;
    s->started = true;
    return RW_OK;
}

int32_t rw_spec_seq_plan(const rw_spec_seq *s, int64_t budget) {
    int64_t cap = s->p.k_max;
    if (budget - 1 < cap) cap = budget - 1;
    int64_t room = rw_model_seq_max_ctx(s->target) - rw_model_seq_length(s->target) - 1;
    if (room < cap) cap = room;
    if (cap <= 0) return 0;
    if (!s->p.adaptive) return (int32_t)cap;
    /* the tokens the model-based draft has not seen (n-gram lookups see everything) */
    const int64_t L = rw_model_seq_length(s->target);
    int64_t behind = 0;
    if (s->dmodel) behind = L - (s->draft ? rw_model_seq_length(s->draft) : 0);
    else if (s->src & RW_SPEC_MTP) behind = L - rw_model_seq_mtp_length(s->target);
    return rw_spec_rule_plan(&s->rule, &s->p, cap, budget, behind);
}

/* The n-gram draft (spec.h, RW_SPEC_NGRAM) of at most k tokens into out:
 * over the history H = the target's tokens then last (T tokens), the newest
 * earlier occurrence i of H's last n tokens, if they occur at least
 * min_hits times, continues as H[i+n], H[i+n+1], ...; past the end of H it
 * continues with the draft itself (a loop of period p repeats). */
static int32_t ngram_draft(const rw_spec_seq *s, int32_t k, int32_t *out) {
    const int32_t *t = rw_model_seq_tokens(s->target);
    const int64_t L = rw_model_seq_length(s->target), T = L + 1, n = s->p.ngram_n;
#define H(i) ((i) < L ? t[(i)] : s->last)
    if (k <= 0 || T < n + 1) return 0;
    int64_t best = -1;
    int hits = 0;
    for (int64_t i = T - n - 1; i >= 0 && hits < s->p.ngram_min_hits; i--) {
        int64_t j = 0;
        while (j < n && H(i + j) == H(T - n + j)) j++;
        if (j < n) continue;
        if (best < 0) best = i;
        hits++;
    }
    if (best < 0 || hits < s->p.ngram_min_hits) return 0;
    for (int32_t j = 0; j < k; j++) {
        const int64_t at = best + n + j;
        out[j] = at < T ? H(at) : out[at - T];
    }
#undef H
    return k;
}

/* Makes s->feed hold the tokens the draft (or the MTP block) has not seen,
 * from position `from` on, then last. */
static rw_status build_feed(rw_spec_seq *s, int64_t from, int64_t *n, rw_error *err) {
    const int64_t to = rw_model_seq_length(s->target);
    const int64_t need = to - from + 1;
    if (need > s->feed_cap) {
        int32_t *f = realloc(s->feed, (size_t)need * sizeof *f);
        if (!f) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        s->feed = f;
        s->feed_cap = need;
    }
    /* invariant: the draft's tokens are a prefix of the target's */
    memcpy(s->feed, rw_model_seq_tokens(s->target) + from, (size_t)(to - from) * sizeof *s->feed);
    s->feed[to - from] = s->last;
    *n = need;
    return RW_OK;
}

/* Rewinds the target and the draft and updates the statistics once the
 * target sampler has accepted out[0..n_out). */
static rw_status finish(rw_spec_seq *s, int64_t len0, rw_threadpool *pool, rw_error *err) {
    const int32_t a = s->n_out - 1;
    const int64_t keep = len0 + 1 + a;
    rw_status st = RW_OK;
    if (rw_model_seq_length(s->target) > keep) st = rw_model_seq_rewind(s->target, keep, pool, err);
    if (!st && s->draft && rw_model_seq_length(s->draft) > keep) st = rw_model_seq_rewind(s->draft, keep, pool, err);
    rw_sampler_rewind(s->dsampler, s->dbase);
    for (int32_t i = 0; !st && i < s->n_out; i++)
        st = rw_sampler_accept(s->dsampler, s->out[i], err);
    if (st) return st;
    s->last = s->out[s->n_out - 1];
    rw_spec_rule_update(&s->rule, &s->p, s->k, a);
    s->st.steps++;
    s->st.drafted += s->k;
    s->st.accepted += a;
    s->st.emitted += s->n_out;
    s->st.last_k = s->k;
    if (s->ngram_step) s->st.ngram_drafted += s->k, s->st.ngram_accepted += a;
    return RW_OK;
}

/* This step's n-gram draft, when it is the one taken (spec.h): into
 * vtok[1..], with one-hot draft distributions for a sampled request. */
static void take_ngram(rw_spec_seq *s) {
    s->ngram_step = false;
    if (s->k <= 0 || !(s->src & RW_SPEC_NGRAM)) return;
    int32_t g = ngram_draft(s, s->k, s->vtok + 1);
    /* a constraint cuts the draft where it would break it */
    for (int32_t j = 0; s->mask && j < g; j++) {
        memset(s->dlogits, 0, (size_t)s->n_vocab * sizeof *s->dlogits);
        if (!s->mask(s->mask_ctx, s->vtok + 1, j, s->dlogits) || s->dlogits[s->vtok[j + 1]] == -INFINITY) g = j;
    }
    const bool model_based = s->dmodel || (s->src & RW_SPEC_MTP);
    if (g == 0 || (g < s->k && model_based)) {
        if (!model_based) s->k = 0; /* nothing to draft with: a plain step */
        return;
    }
    s->ngram_step = true;
    s->k = g;
    for (int32_t j = 0; j < g; j++) {
        /* no drafts past the end of the output */
        if (j + 1 < s->k && s->end && s->end(s->end_ctx, s->vtok + 1, j + 1)) s->k = j + 1;
    }
    if (!s->greedy)
        for (int32_t j = 0; j < s->k; j++) {
            float *q = s->q + (size_t)j * (size_t)s->n_vocab;
            memset(q, 0, (size_t)s->n_vocab * sizeof *q);
            q[s->vtok[j + 1]] = 1.0f;
        }
}

rw_status rw_spec_draft(rw_model *draft_model, rw_spec_seq *const *seqs, const int64_t *budget, int n,
                        rw_threadpool *pool, rw_error *err) {
    if (n <= 0) return RW_OK;
    rw_batch_item *items = calloc((size_t)n, sizeof *items);
    rw_mtp_item *mitems = calloc((size_t)n, sizeof *mitems);
    rw_model *tmodel = NULL;
    rw_status st = RW_OK;
    if (!items || !mitems) {
        st = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        goto done;
    }
    int32_t kmax = 0;
    for (int i = 0; i < n; i++) {
        rw_spec_seq *s = seqs[i];
        if (!s->started || budget[i] < 1 || (s->dmodel && !s->draft) || (s->dmodel && s->dmodel != draft_model)) {
            st = rw_errorf(err, RW_ERR_INVALID_ARG, "speculative step on a sequence not started or with no budget");
            goto done;
        }
        s->k = rw_spec_seq_plan(s, budget[i]);
        s->dbase = rw_sampler_n_accepted(s->dsampler);
        s->len0 = rw_model_seq_length(s->target);
        s->vtok[0] = s->last;
        take_ngram(s);
        if (!s->ngram_step && s->k > kmax) kmax = s->k;
        if (s->src & RW_SPEC_MTP) tmodel = s->tmodel;
    }
    /* draft: pass j proposes d_j for every sequence drafting more than j
     * with a model (the draft model's and the MTP block's passes batched
     * apart) */
    for (int32_t j = 0; j < kmax; j++) {
        int m = 0, mm = 0;
        for (int i = 0; i < n; i++) {
            rw_spec_seq *s = seqs[i];
            if (s->ngram_step || s->k <= j) continue;
            if (s->draft) {
                rw_batch_item *it = &items[m++];
                *it = (rw_batch_item){.seq = s->draft, .logits = s->dlogits};
                if (j == 0) {
                    if ((st = build_feed(s, rw_model_seq_length(s->draft), &it->n, err))) goto done;
                    it->tokens = s->feed;
                } else {
                    it->tokens = &s->vtok[j];
                    it->n = 1;
                }
            } else { /* the MTP block: catch up to (last, h_{L-1}), then chain on its own rows */
                rw_mtp_item *it = &mitems[mm++];
                *it = (rw_mtp_item){.seq = s->target, .logits = s->dlogits, .h_out = s->mh};
                if (j == 0) {
                    if ((st = build_feed(s, rw_model_seq_mtp_length(s->target), &it->n, err))) goto done;
                    it->tokens = s->feed;
                } else {
                    it->tokens = &s->vtok[j];
                    it->n = 1;
                    it->h = s->mh;
                }
            }
        }
        if (m == 0 && mm == 0) break; /* every sequence stopped early (the end of its output) */
        if (m && (st = rw_model_forward_batch(draft_model, items, m, pool, err))) goto done;
        if (mm && (st = rw_model_mtp_forward(tmodel, mitems, mm, pool, err))) goto done;
        for (int i = 0; i < n; i++) {
            rw_spec_seq *s = seqs[i];
            if (s->ngram_step || s->k <= j) continue;
            /* the constraint first: a draft never breaks it; where nothing may
             * follow, the drafts stop (the verify pass checks the j so far) */
            if (s->mask && !s->mask(s->mask_ctx, s->vtok + 1, j, s->dlogits)) {
                s->k = j;
                continue;
            }
            int32_t d;
            if (s->greedy)
                d = rw_sampler_sample(s->dsampler, s->dlogits);
            else {
                float *q = s->q + (size_t)j * (size_t)s->n_vocab;
                rw_sampler_probs(s->dsampler, s->dlogits, q);
                d = rw_sampler_draw(s->dsampler, q);
            }
            if ((st = rw_sampler_accept(s->dsampler, d, err))) goto done;
            s->vtok[j + 1] = d;
            /* no drafts past the end of the output (the verify pass then
             * checks the k drafted so far) */
            if (j + 1 < s->k && s->end && s->end(s->end_ctx, s->vtok + 1, j + 1)) s->k = j + 1;
        }
    }
    /* the MTP block keeps its position len0 (last with the trunk's row:
     * exact, and last is output whatever the verification says); its chained
     * positions, made from its own rows, go */
    for (int i = 0; i < n; i++) {
        rw_spec_seq *s = seqs[i];
        if (!(s->src & RW_SPEC_MTP) || rw_model_seq_mtp_length(s->target) <= s->len0 + 1) continue;
        if ((st = rw_model_seq_mtp_rewind(s->target, s->len0 + 1, err))) goto done;
    }
done:
    free(items);
    free(mitems);
    return st;
}

rw_batch_item rw_spec_seq_verify_item(rw_spec_seq *s) {
    return (rw_batch_item){.seq = s->target, .tokens = s->vtok, .n = s->k + 1, .logits = s->logits, .all_logits = true};
}

rw_status rw_spec_seq_accept(rw_spec_seq *s, rw_threadpool *pool, rw_error *err) {
    if (rw_model_seq_length(s->target) != s->len0 + s->k + 1)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "speculative: the verify pass did not run");
    const float *rows = s->logits;
    int32_t k = s->k;
    if (s->mask) { /* row i: after the drafts before it (allowed: they were masked) */
        const size_t nv = (size_t)s->n_vocab;
        memcpy(s->mlogits, s->logits, (size_t)(s->k + 1) * nv * sizeof(float));
        /* a row no mask can be made for (nothing may follow, or the grammar's
         * work budget is spent) is never sampled from: the drafts are
         * verified up to the one before it, so the step ends where a step
         * without drafts would stop, and at row 0 the request ends with the
         * error, as without speculation */
        for (int32_t i = 0; i <= k; i++)
            if (!s->mask(s->mask_ctx, s->vtok + 1, i, s->mlogits + (size_t)i * nv)) {
                if (i == 0) { /* the verify pass's positions go: the sequence holds what was output */
                    rw_error e2 = {0};
                    if (rw_model_seq_length(s->target) > s->len0) rw_model_seq_rewind(s->target, s->len0, pool, &e2);
                    return rw_errorf(err, RW_ERR_INVALID_ARG, "grammar: no token can continue the output here");
                }
                k = i - 1;
            }
        rows = s->mlogits;
    }
    rw_status st = rw_spec_verify(s->sampler, rows, s->greedy ? NULL : s->q, s->vtok + 1, k, s->out, &s->n_out, err);
    if (!st) st = finish(s, s->len0, pool, err);
    return st;
}

rw_status rw_spec_step(rw_model *target_model, rw_model *draft_model, rw_spec_seq *const *seqs, const int64_t *budget,
                       int n, rw_threadpool *pool, rw_error *err) {
    if (n <= 0) return RW_OK;
    rw_status st = rw_spec_draft(draft_model, seqs, budget, n, pool, err);
    if (st) return st;
    rw_batch_item *items = calloc((size_t)n, sizeof *items);
    if (!items) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    /* verify: one pass over every sequence's last + drafts */
    for (int i = 0; i < n; i++) items[i] = rw_spec_seq_verify_item(seqs[i]);
    st = rw_model_forward_batch(target_model, items, n, pool, err);
    for (int i = 0; !st && i < n; i++) st = rw_spec_seq_accept(seqs[i], pool, err);
    free(items);
    return st;
}

void rw_spec_seq_set_end(rw_spec_seq *s, rw_spec_end_fn fn, void *ctx) {
    s->end = fn;
    s->end_ctx = ctx;
}

rw_model_seq *rw_spec_seq_take_draft(rw_spec_seq *s) {
    rw_model_seq *d = s->draft;
    s->draft = NULL;
    return d;
}

rw_status rw_spec_seq_set_draft(rw_spec_seq *s, rw_model_seq *draft, rw_error *err) {
    const int64_t n = rw_model_seq_length(draft);
    bool ok = rw_model_seq_model(draft) == s->dmodel && n <= rw_model_seq_length(s->target) &&
              rw_model_seq_kv_type(draft) == rw_model_seq_kv_type(s->target) &&
              rw_model_seq_max_ctx(draft) >= rw_model_seq_max_ctx(s->target);
    /* the invariant of build_feed: the draft's tokens are a prefix of the target's */
    if (ok && n) ok = !memcmp(rw_model_seq_tokens(draft), rw_model_seq_tokens(s->target), (size_t)n * sizeof(int32_t));
    if (!ok) {
        rw_model_seq_free(draft);
        return rw_errorf(err, RW_ERR_INVALID_ARG,
                         "speculative: a draft state must be of the draft model and hold a prefix of the target's "
                         "tokens");
    }
    rw_model_seq_free(s->draft);
    s->draft = draft;
    return RW_OK;
}

int32_t rw_spec_seq_output(const rw_spec_seq *s, const int32_t **tokens, const float **logits) {
    *tokens = s->out;
    *logits = s->mask ? s->mlogits : s->logits;
    return s->n_out;
}

const float *rw_spec_seq_raw_logits(const rw_spec_seq *s) { return s->logits; }

rw_spec_stats rw_spec_seq_stats(const rw_spec_seq *s) { return s->st; }

size_t rw_spec_seq_bytes(const rw_spec_seq *s) { return s->draft ? rw_model_seq_bytes(s->draft) : 0; }
