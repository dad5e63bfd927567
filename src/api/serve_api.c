/* serve_api.c - the public calls a server built on the library needs beyond
 * the basic ones (include/rewind.h, "building a server on the library"):
 * the model's tokenizer and template as handles, the template's variables,
 * grammar and schema compilation with plain arguments, and the engine's
 * settings by key. Each is a thin wrapper where the internal signature takes
 * a struct whose layout is not published; the functions whose internal
 * signature is fit to publish are declared in the header as they are. */
#include <stdlib.h>
#include <string.h>

#include "api/api_int.h"
#include "chat/output.h"
#include "grammar/grammar.h"

const rw_tokenizer *rw_model_tokenizer(const rw_model *m) {
    const rw_api__bundle *b = m ? rw_model_api_data(m) : NULL;
    return b ? b->tok : NULL;
}

const rw_chat_template *rw_model_chat_template(const rw_model *m) {
    const rw_api__bundle *b = m ? rw_model_api_data(m) : NULL;
    return b ? b->tmpl : NULL;
}

void rw_template_vars_init(rw_template_vars *p, size_t size) {
    const rw_template_vars d = {.struct_size = sizeof d, .add_generation_prompt = true, .enable_thinking = -1};
    rw_api__params_out(p, size, &d, sizeof d);
}

/* The size a caller built against this header or an older one passes: the
 * first version had every field up to extra_json. */
#define VARS_SIZE_V1 (offsetof(rw_template_vars, extra_json) + sizeof(const char *))

rw_status rw_chat_template_apply(const rw_chat_template *t, const rw_template_vars *v, char **out, size_t *out_len,
                                 rw_error *err) {
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    if (!t || !v || !out)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_chat_template_apply: NULL template, vars or out");
    rw_template_vars vars = rw_template_vars_default();
    rw_status vst = rw_api__params_in(&vars, sizeof vars, VARS_SIZE_V1, v, "rw_template_vars", err);
    if (vst) return vst;
    v = &vars;
    if (!v->messages_json) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_chat_template_apply: no messages_json");
    const rw_chat_render_opts o = {.messages_json = v->messages_json,
                                   .tools_json = v->tools_json,
                                   .add_generation_prompt = v->add_generation_prompt,
                                   .enable_thinking = v->enable_thinking,
                                   .bos_token = v->bos_token,
                                   .eos_token = v->eos_token,
                                   .now = v->now,
                                   .extra_json = v->extra_json};
    size_t len = 0;
    rw_status st = rw_chat_template_render(t, &o, out, &len, err);
    if (out_len) *out_len = st ? 0 : len;
    return st;
}

rw_status rw_grammar_check(const char *gbnf, size_t len, const char *root, rw_error *err) {
    if (!gbnf) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_grammar_check: NULL grammar");
    rw_grammar *g = NULL;
    rw_status st = rw_grammar_compile(gbnf, len, root, &g, err);
    rw_grammar_free(g);
    return st;
}

rw_status rw_grammar_match(const char *gbnf, size_t len, const char *root, const char *text, size_t text_len,
                           bool *prefix, bool *complete, rw_error *err) {
    if (prefix) *prefix = false;
    if (complete) *complete = false;
    if (!gbnf || (!text && text_len)) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_grammar_match: NULL grammar or text");
    rw_grammar *g = NULL;
    rw_grammar_matcher *m = NULL;
    rw_status st = rw_grammar_compile(gbnf, len, root, &g, err);
    if (!st) st = rw_grammar_matcher_new(g, NULL, &m, err); /* bytes only: no vocabulary */
    if (!st) {
        rw_error aerr = {0};
        const bool ok = !text_len || rw_grammar_matcher_accept_bytes(m, text, text_len, &aerr);
        if (aerr.code) st = rw_errorf(err, aerr.code, "%s", aerr.msg);
        else {
            if (prefix) *prefix = ok;
            if (complete) *complete = ok && rw_grammar_matcher_can_end(m);
        }
    }
    rw_grammar_matcher_free(m);
    rw_grammar_free(g);
    return st;
}

rw_status rw_schema_to_gbnf(const char *schema, size_t len, const char *rule, int max_ws, char **gbnf, rw_error *err) {
    if (gbnf) *gbnf = NULL;
    if (!schema || !gbnf) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_schema_to_gbnf: NULL schema or gbnf");
    const rw_schema_opts o = {.name = rule, .max_ws = max_ws};
    return rw_grammar_schema_to_gbnf(schema, len, &o, gbnf, err);
}

rw_status rw_json_object_gbnf(const char *rule, int max_ws, char **gbnf, rw_error *err) {
    if (gbnf) *gbnf = NULL;
    if (!gbnf) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_json_object_gbnf: NULL gbnf");
    const rw_schema_opts o = {.name = rule, .max_ws = max_ws};
    return rw_grammar_json_object_gbnf(&o, gbnf, err);
}

int64_t rw_engine_setting_get(const rw_engine *e, rw_engine_setting key) {
    if (!e) return -1;
    const rw_engine_config *c = rw_engine_get_config(e);
    switch (key) {
    case RW_ENGINE_N_CTX: return c->n_ctx;
    case RW_ENGINE_MAX_RUNNING: return c->max_running;
    case RW_ENGINE_MAX_QUEUED: return c->max_queued;
    case RW_ENGINE_PREFILL_CHUNK: return c->prefill_chunk;
    case RW_ENGINE_CACHE_BYTES: return (int64_t)c->cache_bytes;
    case RW_ENGINE_CACHE_DIR_BYTES: return c->cache_dir ? (int64_t)c->cache_dir_bytes : 0;
    case RW_ENGINE_MAX_STATE_BYTES: return (int64_t)c->max_state_bytes;
    case RW_ENGINE_MAX_CHECKPOINTS: return c->max_checkpoints;
    case RW_ENGINE_DRAFT_MAX: return c->draft || c->spec_sources ? (c->draft_max ? c->draft_max : 4) : 0;
    case RW_ENGINE_SETTING_COUNT: break;
    }
    return -1;
}

void rw_request_params_init(rw_request_params *p, size_t size) {
    const rw_request_params d = {
        .struct_size = sizeof d, .top_p = 1.0f, .repeat_penalty = 1.0f, .max_tokens = 256, .n_logprobs = -1};
    rw_api__params_out(p, size, &d, sizeof d);
}

/* The size of the first rw_request_params: every field up to render_special. */
#define REQUEST_SIZE_V1 (offsetof(rw_request_params, render_special) + sizeof(bool))

rw_status rw_engine_submit_tokens(rw_engine *e, const int32_t *ids, int64_t n, const rw_request_params *p,
                                  rw_token_event_fn cb, void *user, uint64_t *id, rw_error *err) {
    if (id) *id = 0;
    if (!e || !p || !cb)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_engine_submit_tokens: NULL engine, params or callback");
    rw_request_params rp = rw_request_params_default();
    rw_status pst = rw_api__params_in(&rp, sizeof rp, REQUEST_SIZE_V1, p, "rw_request_params", err);
    if (pst) return pst;
    p = &rp;
    rw_gen_params g = {.sampling = rw_sampler_params_default()};
    g.sampling.temperature = p->temperature;
    g.sampling.top_k = p->top_k;
    g.sampling.top_p = p->top_p;
    g.sampling.min_p = p->min_p;
    g.sampling.presence_penalty = p->presence_penalty;
    g.sampling.frequency_penalty = p->frequency_penalty;
    g.sampling.repeat_penalty = p->repeat_penalty;
    g.sampling.penalty_last_n = p->penalty_last_n;
    g.sampling.min_keep = p->min_keep;
    g.sampling.seed = p->seed;
    g.sampling.logit_bias = p->logit_bias;
    g.sampling.n_logit_bias = p->n_logit_bias;
    g.max_tokens = p->max_tokens;
    g.stop = p->stop;
    g.n_stop = p->n_stop;
    g.ignore_eos = p->ignore_eos;
    g.marks = p->marks;
    g.n_marks = p->n_marks;
    g.n_logprobs = p->n_logprobs;
    g.grammar = p->grammar;
    g.grammar_root = p->grammar_root;
    g.grammar_after = p->grammar_after;
    g.render_special = p->render_special;
    g.prompt_logprobs = p->prompt_logprobs;
    g.n_prompt_top = p->n_prompt_top;
    /* rw_gen_event is rw_token_event: the callback goes to the engine as it is */
    return rw_engine_submit(e, ids, n, &g, cb, user, id, err);
}

void rw_chat_output_params_init(rw_chat_output_params *p, size_t size) {
    const rw_chat_output_params d = {.struct_size = sizeof d, .reasoning = RW_REASONING_DEEPSEEK};
    rw_api__params_out(p, size, &d, sizeof d);
}

/* The size of the first rw_chat_output_params: every field up to max_calls. */
#define OUTPUT_SIZE_V1 (offsetof(rw_chat_output_params, max_calls) + sizeof(int))

/* The internal options of public parameters (checked). */
static rw_status output_opts(const rw_chat_output_params *p, rw_chat_output_opts *o, rw_error *err) {
    if (!p) return rw_errorf(err, RW_ERR_INVALID_ARG, "chat output: NULL params");
    rw_chat_output_params cp = rw_chat_output_params_default();
    rw_status cst = rw_api__params_in(&cp, sizeof cp, OUTPUT_SIZE_V1, p, "rw_chat_output_params", err);
    if (cst) return cst;
    p = &cp;
    *o = (rw_chat_output_opts){.tool_format = p->tool_format,
                               .reasoning = p->reasoning,
                               .think_open = p->think_open,
                               .think_close = p->think_close,
                               .in_reasoning = p->in_reasoning,
                               .tools_json = p->tools_json,
                               .id_prefix = p->id_prefix,
                               .id_seed = p->id_seed,
                               .stream_args = p->stream_args,
                               .cut = p->cut,
                               .max_calls = p->max_calls};
    return RW_OK;
}

rw_status rw_chat_output_open(const rw_chat_output_params *p, rw_chat_output **out, rw_error *err) {
    if (!out) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_chat_output_open: NULL out");
    *out = NULL;
    rw_chat_output_opts o;
    rw_status st = output_opts(p, &o, err);
    return st ? st : rw_chat_output_new(&o, out, err);
}

rw_status rw_chat_output_parse_all(const rw_chat_output_params *p, const char *text, size_t len, rw_chat_parsed *out,
                                   rw_error *err) {
    if (!out || (!text && len)) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_chat_output_parse_all: NULL text or out");
    memset(out, 0, sizeof *out);
    rw_chat_output_opts o;
    rw_status st = output_opts(p, &o, err);
    return st ? st : rw_chat_output_parse(&o, text ? text : "", len, out, err);
}

rw_status rw_engine_submit_embedding(rw_engine *e, const int32_t *ids, int64_t n, rw_pooling pooling,
                                     const int32_t *logit_ids, int n_logit_ids, rw_embed_event_fn cb, void *user,
                                     uint64_t *id, rw_error *err) {
    if (id) *id = 0;
    if (!e) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_engine_submit_embedding: NULL engine");
    if (pooling == RW_POOLING_FILE) {
        pooling = rw_model_pooling(rw_engine_get_model(e));
        if (pooling == RW_POOLING_FILE) pooling = RW_POOLING_LAST;
    }
    const rw_embed_params p = {.pooling = (rw_pool_kind)pooling, .logit_ids = logit_ids, .n_logit_ids = n_logit_ids};
    /* rw_embed_callback takes rw_embed_event, the public event: cb goes as it is */
    return rw_engine_submit_embed(e, ids, n, &p, cb, user, id, err);
}
