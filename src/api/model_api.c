/* model_api.c - rw_model_open / rw_model_close and the read-only calls on an
 * open model: tokenization and chat rendering (include/rewind.h). */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api/api_int.h"
#include "kernels/matmul.h"

void rw_model_params_init(rw_model_params *p, size_t size) {
    const rw_model_params d = {.struct_size = sizeof d};
    rw_api__params_out(p, size, &d, sizeof d);
}

rw_api__bundle *rw_api__bundle_of(const rw_model *m, rw_error *err) {
    rw_api__bundle *b = m ? rw_model_api_data(m) : NULL;
    if (!b) rw_errorf(err, RW_ERR_INVALID_ARG, "not a model from rw_model_open");
    return b;
}

/* The params' process-wide settings (settings_api.c), applied before the
 * weights are bound: panels are packed for the chosen kernels. */
static rw_status apply_params(const rw_model_params *p, rw_error *err) {
    rw_status st = RW_OK;
    if (p->kernels && *p->kernels) st = rw_set_kernels(p->kernels, err);
    if (!st && p->numerics && *p->numerics) st = rw_set_numerics(p->numerics, err);
    return st;
}

static void bundle_free(rw_api__bundle *b) {
    if (!b) return;
    rw_threadpool_free(b->pool);
    rw_chat_template_free(b->tmpl);
    free(b->bos);
    free(b->eos);
    free(b->rerank);
    rw_tokenizer_free(b->tok);
    rw_gguf_close(b->g);
    for (int i = 0; i < b->n_lora; i++) free((char *)b->lora[i].path);
    free(b->lora);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

/* Opens and applies params' LoRA adapters, keeping their paths and scales
 * in b (the model owns each adapter's mapping once applied). */
static rw_status add_adapters(rw_api__bundle *b, rw_model *m, const rw_model_params *p, rw_error *err) {
    if (p->n_lora < 0 || (p->n_lora > 0 && !p->lora))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_model_params: lora is NULL or n_lora negative");
    if (p->n_lora == 0) return RW_OK;
    b->lora = calloc((size_t)p->n_lora, sizeof *b->lora); /* freed by bundle_free, with the paths */
    if (!b->lora) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    for (int i = 0; i < p->n_lora; i++) {
        const rw_lora_adapter *a = &p->lora[i];
        if (!a->path) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_model_params: lora[%d].path is NULL", i);
        if (!(a->scale == a->scale) || a->scale > 1e6f || a->scale < -1e6f)
            return rw_errorf(err, RW_ERR_INVALID_ARG, "lora %s: scale %g is not a finite number", a->path,
                             (double)a->scale);
        rw_gguf *ag = NULL;
        rw_status st = rw_gguf_open(a->path, &ag, err);
        if (!st) st = rw_model_add_lora(m, ag, a->scale, err);
        if (st) {
            rw_gguf_close(ag); /* still ours when adding failed */
            rw_error_prefix(err, "lora %s", a->path);
            return st;
        }
        char *path = strdup(a->path);
        if (!path) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        b->lora[b->n_lora++] = (rw_lora_adapter){.path = path, .scale = a->scale};
    }
    return RW_OK;
}

int rw_model_lora_count(const rw_model *m) {
    const rw_api__bundle *b = m ? rw_model_api_data(m) : NULL;
    return b ? b->n_lora : 0;
}

rw_status rw_model_lora_get(const rw_model *m, int i, const char **path, float *scale, rw_error *err) {
    const rw_api__bundle *b = m ? rw_model_api_data(m) : NULL;
    if (!b || i < 0 || i >= b->n_lora) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_model_lora_get: no adapter %d", i);
    if (path) *path = b->lora[i].path;
    if (scale) *scale = b->lora[i].scale;
    return RW_OK;
}

rw_status rw_model_open(const char *path, const rw_model_params *params, rw_model **out, rw_error *err) {
    if (!out) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_model_open: out is NULL");
    *out = NULL;
    if (!path) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_model_open: path is NULL");
    rw_model_params mp = rw_model_params_default();
    rw_status st = rw_api__params_in(&mp, sizeof mp, RW_API__MODEL_PARAMS_V1, params, "rw_model_params", err);
    if (st) return st;
    params = &mp;
    st = apply_params(params, err);
    if (st) return st;
    rw_api__bundle *b = calloc(1, sizeof *b); /* freed by rw_model_close (or below on failure) */
    if (!b) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&b->mu, NULL);
    b->pool_threads = params->n_threads > 0 ? params->n_threads : 0;
    rw_model *m = NULL;
    if ((st = rw_gguf_open(path, &b->g, err)) || (st = rw_model_load(b->g, &m, err)) ||
        (st = rw_tokenizer_load(b->g, &b->tok, err)))
        goto fail;
    if ((st = add_adapters(b, m, params, err))) goto fail;
    if (params->chat_template) {
        /* the file's BOS/EOS texts still apply to an override */
        rw_chat_template *file_tmpl = NULL;
        rw_error ferr = {0}; /* the file's own template may be what the override replaces: only memory fails */
        if (rw_chat_template_from_gguf(b->g, &file_tmpl, &b->bos, &b->eos, &ferr) == RW_ERR_NOMEM) {
            st = rw_errorf(err, RW_ERR_NOMEM, "%s", ferr.msg);
            goto fail;
        }
        rw_chat_template_free(file_tmpl);
        if ((st = rw_chat_template_parse(params->chat_template, strlen(params->chat_template), &b->tmpl, err))) {
            rw_error_prefix(err, "chat_template");
            goto fail;
        }
    } else if (rw_chat_template_from_gguf(b->g, &b->tmpl, &b->bos, &b->eos, &b->tmpl_err) == RW_ERR_NOMEM) {
        st = rw_errorf(err, RW_ERR_NOMEM, "%s", b->tmpl_err.msg);
        goto fail;
    }
    /* A file's template that does not parse leaves the model usable for
     * everything but chat rendering (completions, tokens, embeddings), as
     * llama.cpp loads such a file: the chat calls report the parse error. */
    /* the reranker's prompt (rw_model_text_get): NULL when the file has none or it is not a usable string
     * (as rewind serve has always read it; out of memory reads the same: the server then uses its default) */
    b->rerank = rw_chat_rerank_template_from_gguf(b->g);
    rw_model_set_api_data(m, b);
    atomic_fetch_add(&rw_api__open_models, 1);
    *out = m;
    return RW_OK;
fail:
    rw_error_prefix(err, "%s", path);
    rw_model_free(m);
    bundle_free(b);
    return st;
}

void rw_model_close(rw_model *m) {
    if (!m) return;
    rw_api__bundle *b = rw_model_api_data(m);
    rw_model_free(m); /* the weights point into b->g: the model goes first */
    bundle_free(b);
    atomic_fetch_sub(&rw_api__open_models, 1);
}

const char *rw_architecture(size_t i) { return rw_models__arch_name(i); }

const char *rw_model_arch(const rw_model *m) { return rw_model_get_hparams(m)->arch; }
int32_t rw_model_n_vocab(const rw_model *m) { return (int32_t)rw_model_get_hparams(m)->n_vocab; }
int64_t rw_model_n_ctx_train(const rw_model *m) { return rw_model_get_hparams(m)->n_ctx_train; }

bool rw_model_token_is_eog(const rw_model *m, int32_t token) {
    rw_api__bundle *b = rw_model_api_data(m);
    return b && rw_tokenizer_is_eog(b->tok, token);
}

rw_status rw_model_tokenize(const rw_model *m, const char *text, size_t len, bool add_special, bool parse_special,
                            int32_t **ids, size_t *n_ids, rw_error *err) {
    if (ids) *ids = NULL;
    if (n_ids) *n_ids = 0;
    rw_api__bundle *b = rw_api__bundle_of(m, err);
    if (!b) return RW_ERR_INVALID_ARG;
    if (!text || !ids || !n_ids) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_model_tokenize: NULL argument");
    return rw_tokenize(b->tok, text, len, add_special, parse_special, ids, n_ids, err);
}

rw_status rw_model_detokenize(const rw_model *m, const int32_t *ids, size_t n, bool render_special, char **out,
                              size_t *out_len, rw_error *err) {
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    rw_api__bundle *b = rw_api__bundle_of(m, err);
    if (!b) return RW_ERR_INVALID_ARG;
    if ((!ids && n) || !out) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_model_detokenize: NULL argument");
    const int32_t n_vocab = rw_tokenizer_n_vocab(b->tok);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= n_vocab)
            return rw_errorf(err, RW_ERR_INVALID_ARG, "token %zu is %d, outside the vocabulary [0, %d)", i,
                             (int)ids[i], (int)n_vocab);
    size_t len = 0;
    rw_status st = rw_detokenize(b->tok, ids, n, render_special, out, &len, err);
    if (!st && out_len) *out_len = len;
    return st;
}

rw_status rw_api__tokenize_prompt(const rw_api__bundle *b, const char *prompt, int32_t **ids, size_t *n,
                                  rw_error *err) {
    if (!prompt) return rw_errorf(err, RW_ERR_INVALID_ARG, "the prompt is NULL");
    return rw_tokenize(b->tok, prompt, strlen(prompt), true, true, ids, n, err);
}

rw_status rw_chat_render_json(const rw_model *m, const char *messages_json, const char *tools_json,
                              bool add_generation_prompt, int enable_thinking, char **out, rw_error *err) {
    if (out) *out = NULL;
    rw_api__bundle *b = rw_api__bundle_of(m, err);
    if (!b) return RW_ERR_INVALID_ARG;
    if (!messages_json || !out) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_chat_render_json: NULL argument");
    const rw_chat_render_opts o = {.messages_json = messages_json,
                                   .tools_json = tools_json,
                                   .add_generation_prompt = add_generation_prompt,
                                   .enable_thinking = enable_thinking < 0 ? -1 : enable_thinking ? 1 : 0,
                                   .bos_token = b->bos,
                                   .eos_token = b->eos};
    size_t len;
    if (!b->tmpl) return rw_errorf(err, RW_ERR_TEMPLATE, "the file's chat template: %s", b->tmpl_err.msg);
    return rw_chat_template_render(b->tmpl, &o, out, &len, err);
}

rw_status rw_chat_render(const rw_model *m, const rw_chat_message *msgs, size_t n_msgs, bool add_generation_prompt,
                         char **out, rw_error *err) {
    if (!out || (!msgs && n_msgs)) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_chat_render: NULL argument");
    *out = NULL;
    json_t *arr = json_array(); /* freed below */
    if (!arr) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n_msgs; i++) {
        if (!msgs[i].role || !msgs[i].content) {
            json_decref(arr);
            return rw_errorf(err, RW_ERR_INVALID_ARG, "message %zu has no role or content", i);
        }
        json_t *msg = json_pack("{s:s, s:s}", "role", msgs[i].role, "content", msgs[i].content);
        if (!msg || json_array_append_new(arr, msg)) {
            json_decref(arr);
            return rw_errorf(err, RW_ERR_INVALID_ARG, "message %zu is not valid UTF-8", i);
        }
    }
    char *js = json_dumps(arr, JSON_COMPACT); /* freed below */
    json_decref(arr);
    if (!js) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    rw_status st = rw_chat_render_json(m, js, NULL, add_generation_prompt, -1, out, err);
    free(js);
    return st;
}
