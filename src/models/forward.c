/* forward.c - the forward pass shared by every architecture: embedding,
 * the architecture's layers, final norm and output head (model_int.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quant.h"
#include "kernels/ops.h"
#include "kernels/ops_model.h"
#include "models/model_int.h"

/* Copies embedding rows, converted to f32 (ggml's get_rows: exact). */
static rw_status embed(rw_model *m, const int32_t *tokens, int64_t n, rw_error *err) {
    const rw_gguf_tensor *te = m->tok_embd;
    const int e = m->hp.n_embd;
    uint64_t row_bytes;
    rw_dtype_row_bytes(te->type, (uint64_t)e, &row_bytes);
    for (int64_t t = 0; t < n; t++) {
        const void *row = (const char *)te->data + (size_t)tokens[t] * row_bytes;
        rw_status st = rw_dequantize_row(te->type, row, m->sc.x + t * e, e);
        if (st) return rw_errorf(err, st, "token_embd.weight: cannot convert type %s", rw_dtype_name(te->type));
        const float es = m->hp.embedding_scale;
        if (es != 0.0f && es != 1.0f)
            for (int i = 0; i < e; i++) m->sc.x[t * e + i] *= es;
    }
    return RW_OK;
}

/* Runs one pass over the rows of b (tokens at b->seg positions). Embedding
 * and RoPE tables per row; then the layers. layer_out (if any) receives the
 * residual stream after each layer at layer_out + il * layer_stride. */
static rw_status run_pass(rw_model *m, const int32_t *tokens, const rw_models__batch *b, float *layer_out, size_t layer_stride,
                          rw_error *err) {
    const rw_model_hparams *hp = &m->hp;
    rw_status st;
    if ((st = embed(m, tokens, b->n, err))) return st;
    rw_models__rope_rows(m, b);
    for (int il = 0; il < hp->n_layer; il++) {
        if ((st = m->arch->layer(m, il, b, err))) return st;
        if (layer_out)
            memcpy(layer_out + (size_t)il * layer_stride, m->sc.x, (size_t)b->n * (size_t)hp->n_embd * sizeof(float));
    }
    return RW_OK;
}

/* Logits of the given rows of the pass (rows[i] of m->sc.x) into dst[i]. The
 * rows are gathered and go through the output head together, in groups. */
#define HEAD_GROUP 32
static rw_status head_rows(rw_model *m, const int64_t *rows, float *const *dst, int64_t n, rw_threadpool *pool,
                           rw_error *err) {
    const rw_model_hparams *hp = &m->hp;
    const int e = hp->n_embd;
    const int64_t V = hp->n_vocab;
    rw_status st = RW_OK;
    for (int64_t g = 0; g < n && !st; g += HEAD_GROUP) {
        const int64_t k = n - g < HEAD_GROUP ? n - g : HEAD_GROUP;
        for (int64_t i = 0; i < k; i++) rw_rmsnorm(m->sc.x + rows[g + i] * e, m->output_norm, e, hp->rms_eps, m->sc.xn + i * e);
        /* straight into the destination when it is one block of rows */
        bool direct = true;
        for (int64_t i = 1; i < k && direct; i++) direct = dst[g + i] == dst[g] + i * V;
        float *out = dst[g];
        if (!direct) {
            if (m->sc.logits_rows < k) { /* owned by the scratch (rw_models__scratch_free) */
                free(m->sc.logits);
                m->sc.logits_rows = 0;
                if (!(m->sc.logits = malloc((size_t)k * (size_t)V * sizeof(float))))
                    return rw_errorf(err, RW_ERR_NOMEM, "out of memory for logits");
                m->sc.logits_rows = k;
            }
            out = m->sc.logits;
        }
        if ((st = rw_models__matmul(&m->output, m->sc.xn, k, out, pool, err))) break;
        const float ls = hp->logit_scale;
        for (int64_t i = 0; i < k; i++) {
            float *o = out + i * V;
            if (ls != 0.0f && ls != 1.0f) { /* times 1/scale, as ggml_scale(logits, 1/logit_scale) */
                const float inv = 1.0f / ls;
                for (int64_t j = 0; j < V; j++) o[j] *= inv;
            }
            const float cap = hp->final_logit_softcap;
            if (cap > 0.0f) { /* cap * tanh(logits / cap), rounded as ggml's scale, tanh, scale */
                const float inv = 1.0f / cap;
                for (int64_t j = 0; j < V; j++) o[j] = tanhf(o[j] * inv) * cap;
            }
            if (!direct) memcpy(dst[g + i], o, (size_t)V * sizeof *o);
        }
    }
    return st;
}

static rw_status check_items(const rw_model *m, const rw_batch_item *items, int n_items, rw_error *err) {
    if (n_items <= 0 || !items) return rw_errorf(err, RW_ERR_INVALID_ARG, "forward: no sequences");
    for (int i = 0; i < n_items; i++) {
        const rw_batch_item *it = &items[i];
        if (!it->seq || !it->tokens || it->n <= 0) return rw_errorf(err, RW_ERR_INVALID_ARG, "forward: no tokens");
        if (it->seq->m != m) return rw_errorf(err, RW_ERR_INVALID_ARG, "forward: sequence belongs to another model");
        for (int j = 0; j < i; j++)
            if (items[j].seq == it->seq) return rw_errorf(err, RW_ERR_INVALID_ARG, "forward: a sequence appears twice");
        for (int64_t t = 0; t < it->n; t++)
            if (it->tokens[t] < 0 || it->tokens[t] >= m->hp.n_vocab)
                return rw_errorf(err, RW_ERR_RANGE, "token id %d at index %lld is outside the vocabulary (%lld)",
                                 (int)it->tokens[t], (long long)t, (long long)m->hp.n_vocab);
        if (it->seq->len + it->n > it->seq->max_ctx)
            return rw_errorf(err, RW_ERR_CONTEXT, "%lld tokens after %lld exceed the context size %lld",
                             (long long)it->n, (long long)it->seq->len, (long long)it->seq->max_ctx);
    }
    return RW_OK;
}

/* The shared pass loop: items split into passes of at most MDL_UBATCH rows
 * in item order. A token's result does not depend on the split. */
static rw_status rewind_to(rw_model_seq *s, int64_t n, rw_threadpool *pool, rw_error *err);

static rw_status weights_lost(rw_error *err) {
    return rw_errorf(err, RW_ERR_IO,
                     "the model file was truncated on disk while in use: its weights are lost; open it again");
}

static rw_status forward_items(rw_model *m, const rw_batch_item *items, int n_items, float *layer_out,
                               rw_threadpool *pool, rw_error *err) {
    const rw_model_hparams *hp = &m->hp;
    rw_status st = check_items(m, items, n_items, err);
    if (st) return st;
    if (rw_model_weights_lost(m)) return weights_lost(err);
    int64_t *old_len = malloc((size_t)n_items * sizeof *old_len);
    rw_models__seg *seg = malloc((size_t)n_items * sizeof *seg);
    int32_t *tok = malloc(MDL_UBATCH * sizeof *tok);
    int64_t *rows = malloc(MDL_UBATCH * sizeof *rows);
    float **dst = malloc(MDL_UBATCH * sizeof *dst);
    if (!old_len || !seg || !tok || !rows || !dst) {
        st = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < n_items; i++) old_len[i] = items[i].seq->len;
    for (int i = 0; i < n_items && !st; i++) st = rw_models__seq_push_tokens(items[i].seq, items[i].tokens, items[i].n, err);
    if (st) goto done;
    const int64_t total_rows = n_items == 1 ? items[0].n : 0;
    int it = 0;
    int64_t off = 0; /* next token of item it */
    while (it < n_items && !st) {
        /* gather up to MDL_UBATCH rows */
        int ns = 0;
        int64_t nrow = 0, n_ctx = 0;
        int first_item = it;
        int64_t first_off = off;
        while (it < n_items && nrow < MDL_UBATCH) {
            const rw_batch_item *x = &items[it];
            int64_t k = x->n - off;
            if (k > MDL_UBATCH - nrow) k = MDL_UBATCH - nrow;
            rw_model_seq *s = x->seq;
            seg[ns] = (rw_models__seg){.s = s, .row0 = nrow, .n = k, .pos0 = s->len};
            memcpy(tok + nrow, s->tokens + s->len, (size_t)k * sizeof *tok);
            if (s->len + k > n_ctx) n_ctx = s->len + k;
            rw_models__seq_plan_pass(s, k);
            nrow += k, ns++;
            off += k;
            if (off == x->n) it++, off = 0;
        }
        if ((st = rw_models__scratch_reserve(m, nrow, n_ctx, rw_threadpool_size(pool), err))) break;
        const rw_models__batch b = {.n = nrow, .n_seg = ns, .seg = seg, .pool = pool};
        float *lo = layer_out ? layer_out + (size_t)first_off * (size_t)hp->n_embd : NULL;
        if ((st = run_pass(m, tok, &b, lo, (size_t)total_rows * (size_t)hp->n_embd, err))) break;
        if (m->mtp_on) { /* the MTP block's second input: every row's post-norm hidden */
            const int e = hp->n_embd;
            rw_rmsnorm_groups(m->sc.x, m->output_norm, 0, (int)nrow, e, hp->rms_eps, m->sc.xn);
            if ((st = rw_models__mtp_store_hidden(m, &b, m->sc.xn, err))) break;
        }
        /* final-norm hidden rows wanted from this pass (embeddings) */
        for (int i = 0; i < ns; i++) {
            const rw_batch_item *x = &items[first_item + i];
            const int64_t item_off = seg[i].pos0 - old_len[first_item + i];
            const int e = hp->n_embd;
            if (!x->hidden) continue;
            if (x->all_hidden) {
                rw_rmsnorm_groups(m->sc.x + seg[i].row0 * e, m->output_norm, 0, (int)seg[i].n, e, hp->rms_eps,
                                  x->hidden + item_off * e);
            } else if (item_off + seg[i].n == x->n) {
                rw_rmsnorm(m->sc.x + (seg[i].row0 + seg[i].n - 1) * e, m->output_norm, e, hp->rms_eps, x->hidden);
            }
        }
        /* logits wanted from this pass */
        int64_t nr = 0;
        for (int i = 0; i < ns; i++) {
            const rw_batch_item *x = &items[first_item + i];
            const int64_t item_off = seg[i].pos0 - old_len[first_item + i];
            if (!x->logits) continue;
            if (x->all_logits) {
                for (int64_t t = 0; t < seg[i].n; t++)
                    rows[nr] = seg[i].row0 + t, dst[nr++] = x->logits + (item_off + t) * hp->n_vocab;
            } else if (item_off + seg[i].n == x->n) {
                rows[nr] = seg[i].row0 + seg[i].n - 1, dst[nr++] = x->logits;
            }
        }
        for (int i = 0; i < ns; i++) {
            seg[i].s->len += seg[i].n;
            rw_models__seq_retain(seg[i].s);
        }
        if (nr && (st = head_rows(m, rows, dst, nr, pool, err))) break;
    }
    /* a pass that read zeros for pages the file lost computed nothing
     * meaningful, even if it ran to the end */
    if (!st && rw_model_weights_lost(m)) st = weights_lost(err);
    if (st) /* every sequence back to where it was */
        for (int i = 0; i < n_items; i++) rewind_to(items[i].seq, old_len[i], pool, NULL);
done:
    free(old_len), free(seg), free(tok), free(rows), free(dst);
    return st;
}

/* Exact rewind: the layers back to their restore point p (seq.c), then the
 * tokens p..n-1 computed again. */
static rw_status rewind_to(rw_model_seq *s, int64_t n, rw_threadpool *pool, rw_error *err) {
    int64_t p = n;
    rw_status st = rw_models__seq_restore(s, n, pool, &p, err);
    if (st || p == n) return st;
    const rw_batch_item item = {.seq = s, .tokens = s->tokens + p, .n = n - p};
    return forward_items(s->m, &item, 1, NULL, pool, err);
}

rw_status rw_model_seq_rewind(rw_model_seq *s, int64_t n, rw_threadpool *pool, rw_error *err) {
    if (n < 0 || n > s->len)
        return rw_errorf(err, RW_ERR_RANGE, "cannot rewind a sequence of %lld tokens to %lld", (long long)s->len,
                         (long long)n);
    if (n == s->len) return RW_OK;
    return rewind_to(s, n, pool, err);
}

rw_status rw_model_seq_truncate(rw_model_seq *s, int64_t n, rw_error *err) { return rw_model_seq_rewind(s, n, NULL, err); }

rw_status rw_model_forward(rw_model *m, rw_model_seq *s, const rw_forward_args *a, rw_error *err) {
    if (!a || !a->tokens || a->n <= 0) return rw_errorf(err, RW_ERR_INVALID_ARG, "forward: no tokens");
    const rw_batch_item item = {.seq = s, .tokens = a->tokens, .n = a->n, .logits = a->logits,
                                .all_logits = a->all_logits};
    return forward_items(m, &item, 1, a->layer_out, a->pool, err);
}

rw_status rw_model_forward_batch(rw_model *m, const rw_batch_item *items, int n_items, rw_threadpool *pool,
                                 rw_error *err) {
    return forward_items(m, items, n_items, NULL, pool, err);
}
