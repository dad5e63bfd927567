/* seq.c - a sequence: token ids plus one cache/state.h state per layer;
 * exact rewind to any position, snapshots (clone / copy), and the
 * checkpoint retention policy of its recurrent layers.
 *
 * Retention. After a pass that leaves the sequence at length L, the
 * recurrent layers keep checkpoints at
 *   fine:   multiples of 16 in [L-31, L]  (with the log from the fine one at
 *           or below L-16, any rewind to a position >= L-16 is a replay of
 *           at most 15 tokens of the recurrence alone, no matmul)
 *   recent: multiples of 64 in [L-319, L] (a rewind to a position >= L-256
 *           recomputes at most 63 tokens)
 *   older:  multiples of 1024 (of 64 where that grid costs at most an
 *           eighth of the budget: old_step), and every marked position
 *           (message boundaries: rw_model_seq_mark)
 * within a byte budget (rw_model_seq_set_checkpoint_budget): when over it,
 * older ones go first (oldest first), then recent ones, then marks; fine
 * ones always stay. Marks outlive recent ones because they are where a
 * later request is expected to diverge (a message boundary, the prompt's
 * end: a server's sequences live on in its prefix cache), while a recent
 * one only bounds the recomputation of an arbitrary rewind. What this
 * guarantees:
 *   - after a pass of at least 31 tokens ending at T, a rewind to any
 *     position >= T-16 replays under 16 tokens and computes no matmul;
 *   - speculative decoding's pattern (from length P append K+1 <= 16
 *     tokens, rewind to any position in [P, P+K+1], repeat) never computes
 *     a matmul to rewind;
 *   - a rewind to any position >= T-256 recomputes at most 63 tokens (when
 *     the budget holds the recent ones after the marks: the default budget
 *     does, for up to 256 MiB of checkpoints).
 * A sliding-window layer (cache/state.h) keeps the window of each kept
 * position instead of a checkpoint: those of the fine and recent ones lie
 * in its ring (RING_SPAN below the length, beside the live window), which
 * it holds in any case, so the budget counts only the others' windows;
 * and below the ring a dense span of every page, where every position
 * restores by itself (plan_keep; by default the whole sequence).
 * A rewind keeps what was retained below its target but cannot bring back
 * what the retention at a greater length dropped (a short pass after a long
 * rewind may lack the log just below where it started). A rewind further
 * back lands on the nearest kept
 * checkpoint (position 0 always exists) and recomputes the rest with the
 * model; rw_model_seq_rewind_cost says which before anything is done.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "models/model_int.h"

#define FINE_STEP 16
#define FINE_SPAN 31
#define RECENT_STEP 64
#define RECENT_SPAN 256
#define OLD_STEP 1024
#define DEFAULT_CKPT_BUDGET ((size_t)256 << 20)
/* A sliding-window layer's windows of the positions from RING_SPAN below
 * the length overlap its live window: it holds W + RING_SPAN positions
 * (and the pass's tokens while it runs, up to MDL_UBATCH). */
#define RING_SPAN (RECENT_SPAN + RECENT_STEP - 1)
/* A sliding layer keeps the full KV when the model's context is no longer
 * than its ring at its largest: then the ring could not save memory, and
 * the full KV rewinds anywhere without recomputation. */
#define RING_EXTRA (RING_SPAN + MDL_UBATCH + RW_KV_PAGE)

static rw_status default_layer_state(const rw_model *m, int il, rw_kv_type kv_type, int64_t max_ctx,
                                     rw_layer_state **out, rw_error *err) {
    if (il == rw_models__mtp_h_index(m)) { /* the hidden rows, f32: key half | value half (model_int.h) */
        const int e = m->hp.n_embd;
        return rw_kv_state_new(RW_KV_F32, 1, e - e / 2, e / 2, max_ctx, out, err);
    }
    const int64_t w = rw_models__layer_window(m, il);
    if (w > 0 && m->hp.n_ctx_train > w + RING_EXTRA) /* by the model alone: its state files have one layout */
        return rw_kv_state_new_window(kv_type, m->hp.n_head_kv, m->hp.head_dim_k, m->hp.head_dim_v, w, max_ctx, out,
                                      err);
    return rw_kv_state_new(kv_type, m->hp.n_head_kv, m->hp.head_dim_k, m->hp.head_dim_v, max_ctx, out, err);
}

static rw_status new_layers(const rw_model *m, rw_kv_type kv_type, int64_t max_ctx, rw_layer_state ***out,
                            rw_error *err) {
    rw_layer_state **L = calloc((size_t)rw_models__n_states(m), sizeof *L);
    if (!L) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    rw_status st = RW_OK;
    for (int il = 0; il < rw_models__n_states(m) && !st; il++)
        st = m->arch->new_layer_state && il < m->hp.n_layer ? m->arch->new_layer_state(m, il, kv_type, max_ctx, &L[il], err)
                                      : default_layer_state(m, il, kv_type, max_ctx, &L[il], err);
    if (st) {
        for (int il = 0; il < rw_models__n_states(m); il++) rw_state_free(L[il]);
        free(L);
        return st;
    }
    *out = L;
    return RW_OK;
}

static void free_layers(const rw_model *m, rw_layer_state **L) {
    if (!L) return;
    for (int il = 0; il < rw_models__n_states(m); il++) rw_state_free(L[il]);
    free(L);
}

static size_t default_budget(const rw_model_seq *s);

rw_status rw_model_seq_new(const rw_model *m, rw_kv_type kv_type, int64_t max_ctx, rw_model_seq **out,
                           rw_error *err) {
    *out = NULL;
    if (max_ctx < 0) return rw_errorf(err, RW_ERR_INVALID_ARG, "negative context size");
    if (kv_type != RW_KV_F32 && kv_type != RW_KV_F16) return rw_errorf(err, RW_ERR_INVALID_ARG, "unknown KV type");
    rw_model_seq *s = calloc(1, sizeof *s);
    if (!s) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    s->m = (rw_model *)m; /* forward passes use the model's scratch: see model.h on reentrancy */
    s->kv_type = kv_type;
    s->max_ctx = max_ctx ? max_ctx : m->hp.n_ctx_train;
    rw_status st = new_layers(m, kv_type, s->max_ctx, &s->layer, err);
    if (st) {
        free(s);
        return st;
    }
    s->ckpt_budget = default_budget(s);
    atomic_fetch_add(&s->m->n_seqs, 1);
    *out = s;
    return RW_OK;
}

void rw_model_seq_free(rw_model_seq *s) {
    if (!s) return;
    atomic_fetch_sub(&s->m->n_seqs, 1);
    free_layers(s->m, s->layer);
    free(s->tokens);
    free(s->marks);
    free(s);
}

int64_t rw_model_seq_length(const rw_model_seq *s) { return s->len; }
int64_t rw_model_seq_max_ctx(const rw_model_seq *s) { return s->max_ctx; }
const int32_t *rw_model_seq_tokens(const rw_model_seq *s) { return s->tokens; }
const rw_model *rw_model_seq_model(const rw_model_seq *s) { return s->m; }
rw_kv_type rw_model_seq_kv_type(const rw_model_seq *s) { return s->kv_type; }

size_t rw_model_seq_bytes(const rw_model_seq *s) {
    size_t b = sizeof *s + (size_t)s->tok_cap * sizeof(int32_t) + (size_t)s->cap_marks * sizeof(int64_t);
    for (int il = 0; il < rw_models__n_states(s->m); il++) b += rw_state_bytes(s->layer[il]);
    return b;
}

void rw_model_seq_bytes_by_kind(const rw_model_seq *s, size_t *kv, size_t *recurrent) {
    *kv = *recurrent = 0;
    for (int il = 0; il < rw_models__n_states(s->m); il++)
        *(rw_rec_state_checkpoint_bytes(s->layer[il]) ? recurrent : kv) += rw_state_bytes(s->layer[il]);
}

typedef struct {
    void (*fn)(void *ctx, const void *block, size_t bytes, bool kv);
    void *ctx;
    bool kv;
} each_ctx;

static void each_one(void *ctx, const void *block, size_t bytes) {
    const each_ctx *e = ctx;
    e->fn(e->ctx, block, bytes, e->kv);
}

void rw_model_seq_each_block(const rw_model_seq *s, void (*fn)(void *ctx, const void *block, size_t bytes, bool kv),
                             void *ctx) {
    for (int il = 0; il < rw_models__n_states(s->m); il++) {
        each_ctx e = {.fn = fn, .ctx = ctx, .kv = rw_rec_state_checkpoint_bytes(s->layer[il]) == 0};
        s->layer[il]->ops->each_block(s->layer[il], each_one, &e);
    }
}

void rw_model_seq_set_checkpoint_budget(rw_model_seq *s, size_t bytes) { s->ckpt_budget = bytes; }
void rw_model_seq_limit_checkpoints(rw_model_seq *s, int n) {
    if (n > 0) s->ckpt_budget = (size_t)n * rw_model_seq_checkpoint_bytes(s);
}
void rw_model_seq_set_rewindable(rw_model_seq *s, bool rewindable) { s->no_ckpt = !rewindable; }

/* Bytes of one checkpoint of the whole sequence and of one logged token. */
size_t rw_model_seq_checkpoint_bytes(const rw_model_seq *s) {
    size_t b = 0;
    for (int il = 0; il < rw_models__n_states(s->m); il++)
        b += rw_rec_state_checkpoint_bytes(s->layer[il]) + rw_kv_state_window_bytes(s->layer[il]);
    return b;
}

/* The same, for the recurrent layers alone and the sliding-window ones alone. */
static size_t rec_bytes(const rw_model_seq *s) {
    size_t b = 0;
    for (int il = 0; il < rw_models__n_states(s->m); il++) b += rw_rec_state_checkpoint_bytes(s->layer[il]);
    return b;
}
static size_t win_bytes(const rw_model_seq *s) {
    size_t b = 0;
    for (int il = 0; il < rw_models__n_states(s->m); il++) b += rw_kv_state_window_bytes(s->layer[il]);
    return b;
}
/* One page of every sliding-window layer (what the dense span costs per
 * RW_KV_PAGE positions), and the widest window. */
static size_t win_page_bytes(const rw_model_seq *s, int64_t *max_w) {
    size_t b = 0;
    *max_w = 0;
    for (int il = 0; il < rw_models__n_states(s->m); il++)
        if (rw_kv_state_window_bytes(s->layer[il])) {
            b += rw_kv_page_bytes(rw_kv_state_cache(s->layer[il]));
            if (rw_models__layer_window(s->m, il) > *max_w) *max_w = rw_models__layer_window(s->m, il);
        }
    return b;
}

size_t rw_model_seq_log_bytes_per_token(const rw_model_seq *s) {
    size_t b = 0;
    for (int il = 0; il < rw_models__n_states(s->m); il++) b += rw_rec_state_log_bytes_per_token(s->layer[il]);
    return b;
}

int rw_model_seq_checkpoints(const rw_model_seq *s, int64_t *pos, int cap) {
    for (int il = 0; il < rw_models__n_states(s->m); il++) {
        int k = s->layer[il]->ops->checkpoints(s->layer[il], pos, cap);
        if (rw_rec_state_checkpoint_bytes(s->layer[il])) return k; /* every recurrent layer keeps the same */
    }
    return 0;
}

rw_status rw_model_seq_mark(rw_model_seq *s, int64_t pos, rw_error *err) {
    if (pos <= 0 || pos > s->max_ctx) return rw_errorf(err, RW_ERR_RANGE, "mark at %lld out of range", (long long)pos);
    int i = 0;
    while (i < s->n_marks && s->marks[i] < pos) i++;
    if (i < s->n_marks && s->marks[i] == pos) return RW_OK;
    if (s->n_marks == s->cap_marks) {
        int cap = s->cap_marks ? 2 * s->cap_marks : 8;
        int64_t *mk = realloc(s->marks, (size_t)cap * sizeof *mk);
        if (!mk) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        s->marks = mk, s->cap_marks = cap;
    }
    memmove(s->marks + i + 1, s->marks + i, (size_t)(s->n_marks - i) * sizeof *s->marks);
    s->marks[i] = pos;
    s->n_marks++;
    return RW_OK;
}

/* ---- retention ---- */

enum { KEEP_FINE = 3, KEEP_MARK = 2, KEEP_RECENT = 1, KEEP_OLD = 0 };

/* The positions kept at length L (ascending, at most cap) with each one's
 * class (the highest that names it). */
static void add_pos(int64_t *pos, int *cls, int *n, int cap, int64_t v, int c) {
    for (int i = 0; i < *n; i++)
        if (pos[i] == v) {
            if (c > cls[i]) cls[i] = c;
            return;
        }
    if (*n == cap) return;
    int i = *n;
    while (i > 0 && pos[i - 1] > v) pos[i] = pos[i - 1], cls[i] = cls[i - 1], i--;
    pos[i] = v, cls[i] = c;
    (*n)++;
}

#define MAX_KEEP 256

/* The step of the old checkpoints at length L: RECENT_STEP, so that a
 * rewind or a prefix-cache hit anywhere recomputes at most 63 tokens, when
 * that grid costs at most an eighth of the budget (a short-convolution
 * state is a few columns of the hidden size: a grid of them over the whole
 * context is cheaper than one page of KV), else doubled up to OLD_STEP (a
 * DeltaNet or Mamba2 state of a real model is tens of MiB: one per 1024
 * positions, as before). Half of MAX_KEEP at most, for the others. */
static int64_t old_step(const rw_model_seq *s, int64_t L) {
    const size_t per = rec_bytes(s);
    int64_t step = RECENT_STEP;
    while (step < OLD_STEP && (!per || L / step > MAX_KEEP / 2 || (size_t)(L / step) * per > s->ckpt_budget / 8))
        step *= 2;
    return step;
}

static int retained(const rw_model_seq *s, int64_t L, int64_t *pos, int *cls, int cap) {
    int n = 0;
    if (s->no_ckpt) return 0;
    const int64_t step = old_step(s, L);
    for (int64_t v = step; v <= L; v += step) add_pos(pos, cls, &n, cap, v, KEEP_OLD);
    for (int i = 0; i < s->n_marks && s->marks[i] <= L; i++) add_pos(pos, cls, &n, cap, s->marks[i], KEEP_MARK);
    for (int64_t v = (L - RECENT_SPAN) / RECENT_STEP * RECENT_STEP; v <= L; v += RECENT_STEP)
        if (v > 0) add_pos(pos, cls, &n, cap, v, KEEP_RECENT);
    for (int64_t v = (L - FINE_SPAN + FINE_STEP - 1) / FINE_STEP * FINE_STEP; v <= L; v += FINE_STEP)
        if (v > 0) add_pos(pos, cls, &n, cap, v, KEEP_FINE);
    return n;
}

/* What kept position v costs at length L: a checkpoint of every recurrent
 * layer, and a window of every sliding-window layer unless v's window lies
 * in the ring (RING_SPAN), which the layer holds in any case. */
static size_t keep_cost(int64_t v, int64_t L, size_t per_rec, size_t per_win) {
    return per_rec + (v < L - RING_SPAN ? per_win : 0);
}

/* Drops entries of the lowest class, oldest first, until what they cost
 * (keep_cost at length L) is within budget. */
static int apply_budget(int64_t *pos, int *cls, int n, int64_t L, size_t per_rec, size_t per_win, size_t budget) {
    size_t total = 0;
    for (int i = 0; i < n; i++) total += keep_cost(pos[i], L, per_rec, per_win);
    for (int c = KEEP_OLD; c < KEEP_FINE; c++) {
        for (int i = 0; i < n && total > budget;) {
            if (cls[i] == c) {
                total -= keep_cost(pos[i], L, per_rec, per_win);
                memmove(pos + i, pos + i + 1, (size_t)(n - i - 1) * sizeof *pos);
                memmove(cls + i, cls + i + 1, (size_t)(n - i - 1) * sizeof *cls);
                n--;
            } else {
                i++;
            }
        }
    }
    return n;
}

/* The ring's lowest page at length L for windows up to w positions: the
 * window of L - RING_SPAN starts there. */
static int64_t ring_lo_page(int64_t L, int64_t w) {
    const int64_t v = L - RING_SPAN, lo = v + 1 - w;
    return v <= 0 || lo <= 0 ? 0 : lo / RW_KV_PAGE;
}

/* The retention at length L within the budget: the positions kept
 * (ascending, with their classes; returns how many) and *dense, the
 * position from which on the sliding-window layers keep every window
 * (L: none beyond the live one).
 *
 * A model whose only rewind-limited layers slide (gemma3, gpt-oss) spends
 * the budget on its marks first, then on a dense span below the ring (one
 * page of every sliding layer per RW_KV_PAGE positions, newest first:
 * every position in it restores without recomputation, so a prefix-cache
 * hit anywhere in it recomputes nothing), then on the old windows below
 * the span with what is left, newest first. Pages are counted once: the
 * span's, the ring's and the windows inside them overlap nothing else; a
 * window below the span counts at its bound (from above). A model with
 * recurrent layers keeps its checkpoints as before (a dense grid of them
 * would cost a whole state each). */
static int plan_keep(const rw_model_seq *s, int64_t L, int64_t *pos, int *cls, int64_t *dense) {
    int k = retained(s, L, pos, cls, MAX_KEEP);
    int64_t w;
    const size_t pr = rec_bytes(s), pw = win_bytes(s), pp = win_page_bytes(s, &w);
    const size_t B = s->ckpt_budget;
    *dense = L;
    if (!pp || pr || s->no_ckpt) return apply_budget(pos, cls, k, L, pr, pw, B);
    int64_t old[MAX_KEEP];
    int n_old = 0, j = 0;
    for (int i = 0; i < k; i++)
        if (cls[i] == KEEP_OLD) old[n_old++] = pos[i];
        else pos[j] = pos[i], cls[j] = cls[i], j++;
    k = apply_budget(pos, cls, j, L, 0, pw, B); /* the marks that fit without a span */
    /* the longest span (e pages below the ring's lowest, lo) that fits with
     * the marks whose windows start below it; the span's first position
     * is the first whose window starts in its lowest page */
    const int64_t lo = ring_lo_page(L, w);
    int64_t best = 0;
    size_t best_left = 0;
    for (int64_t e = 0; e <= lo; e++) {
        size_t cost = (size_t)e * pp;
        for (int i = 0; i < k && cost <= B; i++)
            if (pos[i] < L - RING_SPAN && (pos[i] + 1 - w) / RW_KV_PAGE < lo - e) cost += pw;
        if (cost <= B) best = e, best_left = B - cost;
        if ((size_t)e * pp > B) break;
    }
    if (lo - best <= 0) *dense = 0;
    else if (best > 0) *dense = (lo - best) * RW_KV_PAGE + w - 1;
    else *dense = L - RING_SPAN > 0 ? L - RING_SPAN : 0;
    for (int i = n_old - 1; i >= 0; i--)
        if (old[i] < *dense && pw <= best_left) {
            best_left -= pw;
            add_pos(pos, cls, &k, MAX_KEEP, old[i], KEEP_OLD);
        }
    return k;
}

/* The default budget: 256 MiB of checkpoints; a model whose only
 * rewind-limited layers slide adds its whole dense span at max_ctx, so
 * that every position of its sequences restores by itself (their memory is
 * then the full KV's: see docs/cache-layer.md). */
static size_t default_budget(const rw_model_seq *s) {
    int64_t w;
    const size_t pp = win_page_bytes(s, &w);
    if (!pp || rec_bytes(s)) return DEFAULT_CKPT_BUDGET;
    return DEFAULT_CKPT_BUDGET + (size_t)ring_lo_page(s->max_ctx, w) * pp;
}

size_t rw_model_seq_bytes_at(const rw_model *m, rw_kv_type kv_type, int64_t n_ctx, int max_checkpoints) {
    rw_model_seq *s = NULL; /* freed below: only its states' shapes are read */
    rw_error err;
    if (n_ctx <= 0 || rw_model_seq_new(m, kv_type, n_ctx, &s, &err)) return 0;
    /* the token array and tables grow by doubling: up to twice their need */
    size_t total = sizeof *s + 2 * (size_t)n_ctx * sizeof(int32_t) + 64 * sizeof(int64_t);
    const int64_t pages = (n_ctx + RW_KV_PAGE - 1) / RW_KV_PAGE;
    for (int i = 0; i < rw_models__n_states(m); i++) {
        rw_kv_cache *c = rw_kv_state_cache(s->layer[i]);
        total += rw_state_bytes(s->layer[i]); /* an empty KV state: its tables; a recurrent one: all of it */
        if (!c) continue;
        int64_t held = pages; /* a sliding-window layer: its ring and a pass's tokens, pages straddling both ends */
        if (rw_kv_state_window_bytes(s->layer[i])) {
            const int64_t ring = rw_models__layer_window(m, i) + RING_SPAN + MDL_UBATCH;
            if ((ring + RW_KV_PAGE - 1) / RW_KV_PAGE + 2 < held) held = (ring + RW_KV_PAGE - 1) / RW_KV_PAGE + 2;
        }
        total += (size_t)held * rw_kv_page_bytes(c) + (size_t)pages * 4 * sizeof(void *);
    }
    const size_t per = rw_model_seq_checkpoint_bytes(s);
    if (per) {
        int64_t pos[MAX_KEEP], w;
        int cls[MAX_KEEP];
        const int k = retained(s, n_ctx, pos, cls, MAX_KEEP);
        size_t want = 2 * per; /* and two marks */
        for (int i = 0; i < k; i++) want += keep_cost(pos[i], n_ctx, rec_bytes(s), win_bytes(s));
        const size_t pp = win_page_bytes(s, &w);
        if (pp && !rec_bytes(s)) want += (size_t)ring_lo_page(n_ctx, w) * pp; /* the dense span at its longest */
        const size_t budget = max_checkpoints > 0 ? (size_t)max_checkpoints * per : default_budget(s);
        total += want < budget ? want : budget;
        total += (size_t)RECENT_SPAN * rw_model_seq_log_bytes_per_token(s);
    }
    rw_model_seq_free(s);
    return total;
}

/* Before a pass: the checkpoints the retention after it will not keep (keep,
 * ascending, k of them) go now, except the newest one at or below the
 * pass's start, where a failed pass goes back to (forward.c). A long
 * prompt's passes then hold about the budget's checkpoints at once rather
 * than the previous pass's set and the next one's together (their memory
 * stays with the process: cache/state.h's pool). The logs stay as they are. */
static void drop_before_pass(rw_model_seq *s, const int64_t *keep, int k) {
    int64_t have[MAX_KEEP], pos[MAX_KEEP + 1];
    int cls[MAX_KEEP + 1];
    const int nh = rw_model_seq_checkpoints(s, have, MAX_KEEP);
    int64_t below = -1;
    bool drops = false; /* most passes (a decode step's) drop nothing: no layer is visited then */
    for (int i = 0, j = 0; i < nh && i < MAX_KEEP; i++) {
        if (have[i] <= s->len) below = have[i];
        while (j < k && keep[j] < have[i]) j++;
        if (j == k || keep[j] != have[i]) drops = true;
    }
    if (!drops) return;
    int n = 0;
    for (int i = 0; i < k; i++) add_pos(pos, cls, &n, MAX_KEEP + 1, keep[i], KEEP_FINE);
    if (below >= 0) add_pos(pos, cls, &n, MAX_KEEP + 1, below, KEEP_FINE);
    for (int il = 0; il < rw_models__n_states(s->m); il++) s->layer[il]->ops->retain(s->layer[il], pos, n, 0);
}

void rw_model_seq_plan_until(rw_model_seq *s, int64_t n) { s->plan_until = n; }

/* The length a pass ending at L plans its retention for (model.h). */
static int64_t planned_len(const rw_model_seq *s, int64_t L) { return s->plan_until > L ? s->plan_until : L; }

/* The plan of a pass to L: the retention at L, or at plan_until while the
 * pass ends below it (model.h); cuts only inside the pass. A log that would
 * start past L is none: log_from > L logs nothing (cache/state.h). */
void rw_models__seq_plan_pass(rw_model_seq *s, int64_t n) {
    const int64_t L = s->len + n, R = planned_len(s, L);
    int64_t pos[MAX_KEEP], dense;
    int cls[MAX_KEEP];
    const int k = plan_keep(s, R, pos, cls, &dense);
    drop_before_pass(s, pos, k);
    s->n_cuts = 0;
    for (int i = 0; i < k && pos[i] <= L && s->n_cuts < (int)(sizeof s->cuts / sizeof s->cuts[0]); i++)
        if (pos[i] >= s->len) s->cuts[s->n_cuts++] = pos[i];
    int64_t lf = R - FINE_STEP;
    s->log_from = s->no_ckpt ? R : lf <= 0 ? 0 : lf / FINE_STEP * FINE_STEP;
}

void rw_models__seq_retain(rw_model_seq *s) {
    int64_t pos[MAX_KEEP], dense;
    int cls[MAX_KEEP];
    const int64_t R = planned_len(s, s->len);
    const int k = plan_keep(s, R, pos, cls, &dense);
    int64_t lf = s->len - FINE_STEP;
    lf = s->no_ckpt ? s->len : lf <= 0 ? 0 : lf / FINE_STEP * FINE_STEP;
    /* a sliding layer's "log" is its dense span (cache/state.h retain) */
    for (int il = 0; il < rw_models__n_states(s->m); il++)
        s->layer[il]->ops->retain(s->layer[il], pos, k, rw_kv_state_window_bytes(s->layer[il]) ? dense : lf);
}

/* ---- tokens ---- */

rw_status rw_models__seq_push_tokens(rw_model_seq *s, const int32_t *t, int64_t n, rw_error *err) {
    if (s->len + n > s->tok_cap) {
        int64_t cap = s->tok_cap ? s->tok_cap : 256;
        while (cap < s->len + n) cap *= 2;
        int32_t *tk = realloc(s->tokens, (size_t)cap * sizeof *tk);
        if (!tk) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        s->tokens = tk, s->tok_cap = cap;
    }
    memmove(s->tokens + s->len, t, (size_t)n * sizeof *t);
    return RW_OK;
}

/* ---- rewind ---- */

/* The position every layer can return to by itself, and the replay cost. */
static int64_t seq_restore_point(const rw_model_seq *s, int64_t n, int64_t *replay) {
    int64_t p = n, r = 0;
    for (int il = 0; il < rw_models__n_states(s->m); il++) {
        if (il == rw_models__mtp_kv_index(s->m)) continue; /* lags: goes to min(its length, p) */
        int64_t ri;
        int64_t pi = s->layer[il]->ops->restore_point(s->layer[il], n, &ri);
        if (pi < p) p = pi;
        if (ri > r) r = ri;
    }
    if (replay) *replay = p == n ? r : 0;
    return p;
}

rw_status rw_model_seq_rewind_cost(const rw_model_seq *s, int64_t n, int64_t *replay, int64_t *recompute) {
    if (n < 0 || n > s->len) return RW_ERR_RANGE;
    int64_t r;
    const int64_t p = seq_restore_point(s, n, &r);
    if (replay) *replay = r;
    if (recompute) *recompute = n - p;
    return RW_OK;
}

/* Every layer back to the restore point p <= n that all of them reach by
 * themselves (each at length >= n; a failed pass may leave them at
 * different lengths), then s->len = p. The tokens p..n-1 stay in s->tokens
 * past the length for the caller to recompute (forward.c): the sequence
 * never runs the model itself. */
rw_status rw_models__seq_restore(rw_model_seq *s, int64_t n, rw_threadpool *pool, int64_t *restored, rw_error *err) {
    const int64_t p = seq_restore_point(s, n, NULL);
    rw_status st = RW_OK;
    /* the MTP block's KV keeps its positions below n: the recomputation
     * gives the same hidden rows it was made from */
    for (int il = 0; il < rw_models__n_states(s->m) && !st; il++)
        st = s->layer[il]->ops->rewind(s->layer[il], il == rw_models__mtp_kv_index(s->m) ? rw_models__state_target(s, il, n) : p,
                                       pool, err);
    if (st) {
        /* Out of memory part-way: layers disagree; the only safe state left
         * is the empty sequence (position 0 needs no memory to restore). */
        for (int il = 0; il < rw_models__n_states(s->m); il++) s->layer[il]->ops->rewind(s->layer[il], 0, pool, NULL);
        s->len = 0;
        *restored = 0;
        return st;
    }
    s->len = p;
    *restored = p;
    return RW_OK;
}


/* ---- snapshots ---- */

rw_status rw_model_seq_copy(rw_model_seq *dst, const rw_model_seq *src, rw_error *err) {
    if (dst == src) return RW_OK;
    if (dst->m != src->m || dst->kv_type != src->kv_type || dst->max_ctx < src->len)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "sequence copy between different models or settings");
    /* Clone every layer first; swap in only when all succeeded. */
    rw_layer_state **L = calloc((size_t)rw_models__n_states(src->m), sizeof *L);
    int64_t *marks = src->n_marks ? malloc((size_t)src->n_marks * sizeof *marks) : NULL;
    rw_status st = L && (!src->n_marks || marks) ? RW_OK : rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    for (int il = 0; il < rw_models__n_states(src->m) && !st; il++) st = src->layer[il]->ops->clone(src->layer[il], &L[il], err);
    if (!st && src->len > dst->tok_cap) {
        int32_t *tk = realloc(dst->tokens, (size_t)src->len * sizeof *tk);
        if (!tk) st = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        else dst->tokens = tk, dst->tok_cap = src->len;
    }
    if (st) {
        if (L) free_layers(src->m, L);
        free(marks);
        return st;
    }
    free_layers(dst->m, dst->layer);
    dst->layer = L;
    if (src->len) memcpy(dst->tokens, src->tokens, (size_t)src->len * sizeof *dst->tokens);
    dst->len = src->len;
    if (marks) memcpy(marks, src->marks, (size_t)src->n_marks * sizeof *marks);
    free(dst->marks);
    dst->marks = marks, dst->n_marks = dst->cap_marks = src->n_marks;
    dst->ckpt_budget = src->ckpt_budget;
    dst->no_ckpt = src->no_ckpt;
    return RW_OK;
}

rw_status rw_model_seq_clone(const rw_model_seq *s, rw_model_seq **out, rw_error *err) {
    rw_model_seq *c;
    rw_status st = rw_model_seq_new(s->m, s->kv_type, s->max_ctx, &c, err);
    if (st) return st;
    if ((st = rw_model_seq_copy(c, s, err))) {
        rw_model_seq_free(c);
        return st;
    }
    *out = c;
    return RW_OK;
}

/* Used by seq_file.c: replaces the layers and tokens of s (takes L and tokens). */
void rw_models__seq_adopt(rw_model_seq *s, rw_layer_state **L, int32_t *tokens, int64_t n) {
    free_layers(s->m, s->layer);
    free(s->tokens);
    s->layer = L;
    s->tokens = tokens;
    s->len = s->tok_cap = n;
}

rw_status rw_models__seq_new_layers(const rw_model_seq *s, rw_layer_state ***out, rw_error *err) {
    return new_layers(s->m, s->kv_type, s->max_ctx, out, err);
}
void rw_models__seq_free_layers(const rw_model_seq *s, rw_layer_state **L) { free_layers(s->m, L); }
