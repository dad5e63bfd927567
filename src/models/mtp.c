/* mtp.c - the MTP (multi-token prediction) block's passes and per-sequence
 * states (model.h, model_int.h).
 *
 * A sequence of a model with the block on holds, after its n_layer states,
 *   layer[n_layer]      the block's attention KV, MTP positions 0..M-1;
 *   layer[n_layer + 1]  the trunk's post-norm hidden row of every position
 *                       0..len-1 (f32, stored as one "kv" head: the first
 *                       n_embd - n_embd/2 floats as its key row, the rest as
 *                       its value row).
 * MTP position k is computed from token x_k and h_{k-1} (zero for k = 0),
 * so the block's KV is a function of the sequence's tokens alone: whatever
 * the block skipped (plain decoding steps, a prefix-cache hit, a state
 * file) it recomputes exactly from the stored rows when it next drafts. The
 * hidden rows cost n_embd floats per token; the block's KV lags (M <= len
 * between drafting calls) and is cut back with the sequence.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "models/model_int.h"

#define MTP_UBATCH 512 /* most rows one pass computes */

bool rw_model_mtp_available(const rw_model *m) { return m->mtp_avail && m->arch->mtp_block; }
bool rw_model_mtp_enabled(const rw_model *m) { return m->mtp_on; }

rw_status rw_model_enable_mtp(rw_model *m, rw_error *err) {
    if (!rw_model_mtp_available(m))
        return rw_errorf(err, RW_ERR_UNSUPPORTED, "the model has no MTP block (%s.nextn_predict_layers)",
                         m->hp.arch);
    if (m->mtp_on) return RW_OK;
    if (atomic_load(&m->n_seqs) > 0)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "the MTP block must be enabled before the model's first sequence");
    m->mtp_on = true;
    return RW_OK;
}

int64_t rw_models__state_target(const rw_model_seq *s, int il, int64_t n) {
    if (il != rw_models__mtp_kv_index(s->m)) return n;
    const int64_t m = rw_state_length(s->layer[il]);
    return m < n ? m : n;
}

rw_status rw_models__mtp_store_hidden(rw_model *m, const rw_models__batch *b, const float *h, rw_error *err) {
    const int hi = rw_models__mtp_h_index(m);
    if (hi < 0) return RW_OK;
    const int64_t e = m->hp.n_embd, ek = e - e / 2;
    for (int i = 0; i < b->n_seg; i++) {
        const rw_models__seg *g = &b->seg[i];
        const float *r = h + g->row0 * e;
        rw_status st = rw_kv_state_append(g->s->layer[hi], g->n, r, e, r + ek, e, err);
        if (st) return st;
    }
    return RW_OK;
}

int64_t rw_model_seq_mtp_length(const rw_model_seq *s) {
    const int ki = rw_models__mtp_kv_index(s->m);
    return ki < 0 ? 0 : rw_state_length(s->layer[ki]);
}

rw_status rw_model_seq_mtp_rewind(rw_model_seq *s, int64_t n, rw_error *err) {
    const int ki = rw_models__mtp_kv_index(s->m);
    if (ki < 0) return n == 0 ? RW_OK : rw_errorf(err, RW_ERR_RANGE, "the sequence has no MTP state");
    return s->layer[ki]->ops->rewind(s->layer[ki], n, NULL, err);
}

rw_status rw_model_seq_mtp_hidden(const rw_model_seq *s, int64_t pos, float *out, rw_error *err) {
    const int hi = rw_models__mtp_h_index(s->m);
    if (hi < 0) return rw_errorf(err, RW_ERR_UNSUPPORTED, "the sequence has no MTP state");
    if (pos < 0 || pos >= rw_state_length(s->layer[hi]))
        return rw_errorf(err, RW_ERR_RANGE, "no hidden row at position %lld", (long long)pos);
    const rw_kv_cache *c = rw_kv_state_cache(s->layer[hi]);
    const int e = s->m->hp.n_embd;
    rw_kv_read_k(c, 0, 0, pos, out);
    rw_kv_read_v(c, 0, 0, pos, out + (e - e / 2));
    return RW_OK;
}

static rw_status check_items(const rw_model *m, const rw_mtp_item *it, int n, rw_error *err) {
    if (!m->mtp_on) return rw_errorf(err, RW_ERR_INVALID_ARG, "mtp: the MTP block is not enabled");
    if (n <= 0 || !it) return rw_errorf(err, RW_ERR_INVALID_ARG, "mtp: no sequences");
    for (int i = 0; i < n; i++) {
        const rw_model_seq *s = it[i].seq;
        if (!s || !it[i].tokens || it[i].n <= 0) return rw_errorf(err, RW_ERR_INVALID_ARG, "mtp: no tokens");
        if (s->m != m) return rw_errorf(err, RW_ERR_INVALID_ARG, "mtp: sequence belongs to another model");
        for (int j = 0; j < i; j++)
            if (it[j].seq == s) return rw_errorf(err, RW_ERR_INVALID_ARG, "mtp: a sequence appears twice");
        const int64_t m0 = rw_model_seq_mtp_length(s);
        if (m0 + it[i].n > s->max_ctx)
            return rw_errorf(err, RW_ERR_CONTEXT, "mtp: %lld positions after %lld exceed the context size %lld",
                             (long long)it[i].n, (long long)m0, (long long)s->max_ctx);
        if (!it[i].h && m0 + it[i].n - 1 > s->len)
            return rw_errorf(err, RW_ERR_INVALID_ARG, "mtp: positions past the sequence need their hidden rows");
        for (int64_t t = 0; t < it[i].n; t++) {
            if (it[i].tokens[t] < 0 || it[i].tokens[t] >= m->hp.n_vocab)
                return rw_errorf(err, RW_ERR_RANGE, "mtp: token id %d outside the vocabulary", (int)it[i].tokens[t]);
            /* the block's KV must stay a function of the sequence's tokens */
            if (m0 + t < s->len && it[i].tokens[t] != s->tokens[m0 + t])
                return rw_errorf(err, RW_ERR_INVALID_ARG, "mtp: token at position %lld differs from the sequence's",
                                 (long long)(m0 + t));
        }
    }
    return RW_OK;
}

/* The output head over the wanted rows of hout (rows[i]) into dst[i]. */
static rw_status head(rw_model *m, const rw_matrix *w, const float *hout, const int64_t *rows, float *const *dst,
                      int64_t nr, rw_threadpool *pool, rw_error *err) {
    const int64_t e = m->hp.n_embd, V = m->hp.n_vocab;
    bool direct = true; /* one block of consecutive rows into one block of logits */
    for (int64_t i = 1; i < nr && direct; i++) direct = rows[i] == rows[0] + i && dst[i] == dst[0] + i * V;
    if (direct) return rw_models__matmul(w, hout + rows[0] * e, nr, dst[0], pool, err);
    float *xs = malloc((size_t)nr * (size_t)e * sizeof *xs), *ys = malloc((size_t)nr * (size_t)V * sizeof *ys);
    rw_status st = xs && ys ? RW_OK : rw_errorf(err, RW_ERR_NOMEM, "out of memory for MTP logits");
    if (!st) {
        for (int64_t i = 0; i < nr; i++) memcpy(xs + i * e, hout + rows[i] * e, (size_t)e * sizeof *xs);
        st = rw_models__matmul(w, xs, nr, ys, pool, err);
    }
    for (int64_t i = 0; !st && i < nr; i++) memcpy(dst[i], ys + i * V, (size_t)V * sizeof *ys);
    free(xs), free(ys);
    return st;
}

rw_status rw_model_mtp_forward(rw_model *m, const rw_mtp_item *items, int n_items, rw_threadpool *pool,
                               rw_error *err) {
    rw_status st = check_items(m, items, n_items, err);
    if (st) return st;
    const int64_t e = m->hp.n_embd, V = m->hp.n_vocab;
    int64_t *m0 = malloc((size_t)n_items * sizeof *m0);
    rw_models__seg *seg = malloc((size_t)n_items * sizeof *seg);
    int32_t *tok = malloc(MTP_UBATCH * sizeof *tok);
    int64_t *rows = malloc(MTP_UBATCH * sizeof *rows);
    float **dst = malloc(MTP_UBATCH * sizeof *dst);
    float *hin = malloc((size_t)MTP_UBATCH * (size_t)e * sizeof *hin);
    float *hout = malloc((size_t)MTP_UBATCH * (size_t)e * sizeof *hout);
    if (!m0 || !seg || !tok || !rows || !dst || !hin || !hout) {
        st = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < n_items; i++) m0[i] = rw_model_seq_mtp_length(items[i].seq);
    int it = 0;
    int64_t off = 0;
    while (it < n_items && !st) {
        int ns = 0, first = it;
        int64_t nrow = 0, n_ctx = 0, first_off = off;
        while (it < n_items && nrow < MTP_UBATCH) {
            const rw_mtp_item *x = &items[it];
            int64_t k = x->n - off;
            if (k > MTP_UBATCH - nrow) k = MTP_UBATCH - nrow;
            const int64_t pos0 = m0[it] + off;
            seg[ns++] = (rw_models__seg){.s = x->seq, .row0 = nrow, .n = k, .pos0 = pos0};
            for (int64_t t = 0; t < k; t++) {
                const int64_t p = pos0 + t;
                float *h = hin + (nrow + t) * e;
                tok[nrow + t] = x->tokens[off + t];
                if (x->h) memcpy(h, x->h + (off + t) * e, (size_t)e * sizeof *h);
                else if (p == 0) memset(h, 0, (size_t)e * sizeof *h);
                else rw_model_seq_mtp_hidden(x->seq, p - 1, h, NULL);
            }
            if (pos0 + k > n_ctx) n_ctx = pos0 + k;
            nrow += k, off += k;
            if (off == x->n) it++, off = 0;
        }
        if ((st = rw_models__scratch_reserve(m, nrow, n_ctx, rw_threadpool_size(pool), err))) break;
        const rw_models__batch b = {.n = nrow, .n_seg = ns, .seg = seg, .pool = pool};
        rw_models__rope_rows(m, &b);
        const rw_matrix *w = NULL;
        if ((st = m->arch->mtp_block(m, tok, hin, &b, hout, &w, err))) break;
        int64_t nr = 0;
        for (int i = 0; i < ns; i++) {
            const rw_mtp_item *x = &items[first + i];
            const int64_t item_off = i == 0 ? first_off : 0;
            const bool last = item_off + seg[i].n == x->n;
            if (x->h_out && last) memcpy(x->h_out, hout + (seg[i].row0 + seg[i].n - 1) * e, (size_t)e * sizeof(float));
            if (!x->logits) continue;
            if (x->all_logits)
                for (int64_t t = 0; t < seg[i].n; t++)
                    rows[nr] = seg[i].row0 + t, dst[nr++] = x->logits + (item_off + t) * V;
            else if (last)
                rows[nr] = seg[i].row0 + seg[i].n - 1, dst[nr++] = x->logits;
        }
        if (nr && (st = head(m, w, hout, rows, dst, nr, pool, err))) break;
    }
    if (st)
        for (int i = 0; i < n_items; i++) rw_model_seq_mtp_rewind(items[i].seq, m0[i], NULL);
done:
    free(m0), free(seg), free(tok), free(rows), free(dst), free(hin), free(hout);
    return st;
}
