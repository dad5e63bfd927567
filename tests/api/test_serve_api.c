/* test_serve_api.c - the serving section of the public API (include/rewind.h)
 * as an embedder uses it: the model's tokenizer and template handles agree
 * with the model's own calls, size fields are checked, grammar and schema
 * errors name the place, engine settings read back, a token-level request
 * gives the text rw_engine_run gives with ids and logprobs besides, and the
 * chat output parser finds a tool call. Includes only rewind.h besides the
 * harness. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "rewind.h"

typedef struct {
    char text[4096];
    size_t len;
    int32_t ids[256];
    int n_ids, n_lp, done;
    size_t ev_size;
    rw_done_reason finish;
} tok_collected;

static void on_tokens(void *user, const rw_token_event *ev) {
    tok_collected *c = user;
    c->ev_size = ev->size;
    if (ev->text_len && c->len + ev->text_len < sizeof c->text) {
        memcpy(c->text + c->len, ev->text, ev->text_len);
        c->len += ev->text_len;
    }
    for (int i = 0; i < ev->n_tokens && c->n_ids < 256; i++) c->ids[c->n_ids++] = ev->tokens[i];
    if (ev->logprobs) c->n_lp += ev->n_tokens;
    if (ev->done) {
        c->done++;
        c->finish = ev->finish;
    }
}

typedef struct {
    int calls, content;
    char name[64];
} chat_seen;

static rw_status on_chat(void *user, const rw_chat_event *ev) {
    chat_seen *s = user;
    if (ev->kind == RW_CHAT_EV_CALL_BEGIN) {
        s->calls++;
        snprintf(s->name, sizeof s->name, "%s", ev->name);
    } else if (ev->kind == RW_CHAT_EV_CONTENT) s->content += (int)ev->len;
    return RW_OK;
}

int main(void) {
    rw_error err;
    /* records and parameters that need no model */
    CHECK(rw_errorf(&err, RW_ERR_RANGE, "x=%d", 7) == RW_ERR_RANGE && !strcmp(err.msg, "x=7"));
    CHECK(rw_grammar_check("root ::= \"a\" | \"b\"", 18, NULL, &err) == RW_OK);
    CHECK(rw_grammar_check("root ::= undefined-rule", 23, NULL, &err) == RW_ERR_INVALID_ARG);
    CHECK_MSG(strstr(err.msg, "line") != NULL, "%s", err.msg);
    char *g = NULL;
    const char *schema = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}";
    CHECK_MSG(!rw_schema_to_gbnf(schema, strlen(schema), "args", -1, &g, &err), "%s", err.msg);
    CHECK(g && strstr(g, "args ::=") && !strstr(g, "root ::="));
    rw_free(g);
    CHECK(rw_schema_to_gbnf("{\"type\":\"nope\"}", 15, NULL, 0, &g, &err) != RW_OK && g == NULL);
    CHECK(!rw_json_object_gbnf(NULL, 0, &g, &err) && g && strstr(g, "root ::="));
    if (g) CHECK(rw_grammar_check(g, strlen(g), NULL, &err) == RW_OK);
    rw_free(g);
    rw_tool_format f = RW_TOOL_FMT_NONE;
    CHECK(rw_tool_format_parse("hermes", &f) && f == RW_TOOL_FMT_HERMES && !strcmp(rw_tool_format_name(f), "hermes"));
    CHECK(!rw_tool_format_parse("nope", &f) && f == RW_TOOL_FMT_HERMES);

    /* the chat output parser: a hermes call after some content */
    rw_chat_output_params op = rw_chat_output_params_default();
    op.tool_format = RW_TOOL_FMT_HERMES;
    rw_chat_output *p = NULL;
    CHECK_MSG(!rw_chat_output_open(&op, &p, &err), "%s", err.msg);
    const char *out =
        "Let me look.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
    chat_seen seen = {0};
    for (size_t i = 0; p && i < strlen(out); i += 5) {
        const size_t n = strlen(out) - i < 5 ? strlen(out) - i : 5;
        CHECK(!rw_chat_output_feed(p, out + i, n, on_chat, &seen, &err));
    }
    if (p) CHECK(!rw_chat_output_finish(p, on_chat, &seen, &err));
    CHECK(seen.calls == 1 && !strcmp(seen.name, "get_weather") && seen.content == 12);
    CHECK(p && rw_chat_output_n_calls(p) == 1);
    rw_chat_output_free(p);
    rw_chat_parsed parsed;
    CHECK_MSG(!rw_chat_output_parse_all(&op, out, strlen(out), &parsed, &err), "%s", err.msg);
    CHECK(parsed.n_calls == 1 && !strcmp(parsed.content, "Let me look.") && strstr(parsed.calls[0].arguments, "Oslo"));
    rw_chat_parsed_free(&parsed);
    rw_chat_output_params old = op;
    old.struct_size = 8; /* a size no version had */
    CHECK(rw_chat_output_open(&old, &p, &err) == RW_ERR_INVALID_ARG && p == NULL);

    const char *path = rw_test_fixture_path("qwen35/qwen35-Q8_0.gguf");
    if (!rw_test_fixtures()) rw_test_skip("no fixtures");
    rw_model *m = NULL;
    CHECK_MSG(!rw_model_open(path, NULL, &m, &err), "%s", err.msg);
    if (!m) return rw_test_done();

    /* the tokenizer handle agrees with the model's calls */
    const rw_tokenizer *t = rw_model_tokenizer(m);
    CHECK(t && rw_tokenizer_n_vocab(t) == rw_model_n_vocab(m));
    int32_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    const char *text = "Hello, world! <|im_start|>";
    CHECK(!rw_tokenize(t, text, strlen(text), false, true, &a, &na, &err));
    CHECK(!rw_model_tokenize(m, text, strlen(text), false, true, &b, &nb, &err));
    CHECK(na == nb && na > 0 && !memcmp(a, b, na * sizeof *a));
    CHECK(rw_tokenizer_find_control(t, text, strlen(text)) == 14);
    char piece[64];
    size_t total = 0;
    for (size_t i = 0; i < na; i++) total += rw_token_to_piece(t, a[i], true, piece, sizeof piece);
    CHECK(total == strlen(text));
    CHECK(rw_tokenizer_is_eog(t, a[na - 1]) == rw_model_token_is_eog(m, a[na - 1]));
    rw_free(a);
    rw_free(b);

    /* the template handle renders what rw_chat_render_json renders */
    const char *msgs = "[{\"role\":\"user\",\"content\":\"Say hi.\"}]";
    char *r1 = NULL, *r2 = NULL;
    rw_template_vars v = rw_template_vars_default();
    v.messages_json = msgs;
    v.enable_thinking = 0;
    size_t rlen = 0;
    CHECK_MSG(!rw_chat_template_apply(rw_model_chat_template(m), &v, &r1, &rlen, &err), "%s", err.msg);
    CHECK_MSG(!rw_chat_render_json(m, msgs, NULL, true, 0, &r2, &err), "%s", err.msg);
    CHECK(r1 && r2 && !strcmp(r1, r2) && rlen == strlen(r1));
    v.struct_size = 4; /* a size no version had */
    char *r3 = NULL;
    CHECK(rw_chat_template_apply(rw_model_chat_template(m), &v, &r3, NULL, &err) == RW_ERR_INVALID_ARG && !r3);
    size_t src_len = 0;
    CHECK(rw_chat_template_source(rw_model_chat_template(m), &src_len) && src_len > 0);

    /* the engine: settings by key, a token-level request equal to rw_engine_run */
    rw_engine_params ep = rw_engine_params_default();
    ep.run.n_ctx = 512;
    ep.max_running = 3;
    rw_engine *e = NULL;
    CHECK_MSG(!rw_engine_open(m, &ep, &e, &err), "%s", err.msg);
    if (e) {
        CHECK_EQ_INT(rw_engine_setting_get(e, RW_ENGINE_N_CTX), 512);
        CHECK_EQ_INT(rw_engine_setting_get(e, RW_ENGINE_MAX_RUNNING), 3);
        CHECK_EQ_INT(rw_engine_setting_get(e, RW_ENGINE_SETTING_COUNT), -1);
        CHECK(rw_engine_get_model(e) == m);
        rw_gen_options go = rw_gen_options_default();
        go.max_tokens = 12;
        go.ignore_eos = true;
        char *want = NULL;
        rw_gen_result res;
        CHECK_MSG(!rw_engine_run(e, r1, &go, &want, &res, &err), "%s", err.msg);
        int32_t *ids = NULL;
        size_t n = 0;
        CHECK(!rw_tokenize(t, r1, strlen(r1), true, true, &ids, &n, &err));
        rw_request_params rp = rw_request_params_default();
        rp.max_tokens = 12;
        rp.ignore_eos = true;
        rp.n_logprobs = 2;
        tok_collected c = {0};
        uint64_t id = 0;
        CHECK_MSG(!rw_engine_submit_tokens(e, ids, (int64_t)n, &rp, on_tokens, &c, &id, &err), "%s", err.msg);
        for (int i = 0; i < 2000 && !__atomic_load_n(&c.done, __ATOMIC_ACQUIRE); i++) {
            struct timespec ts = {0, 5000000};
            nanosleep(&ts, NULL);
        }
        CHECK(c.done == 1 && c.finish == RW_DONE_LENGTH && c.n_ids == 12 && c.n_lp == 12);
        CHECK(c.ev_size == sizeof(rw_token_event));
        CHECK_MSG(want && c.len == strlen(want) && !memcmp(c.text, want, c.len), "%.*s | %s", (int)c.len, c.text,
                  want ? want : "");
        rp.struct_size = 16;
        CHECK(rw_engine_submit_tokens(e, ids, (int64_t)n, &rp, on_tokens, &c, &id, &err) == RW_ERR_INVALID_ARG &&
              id == 0);
        rw_free(ids);
        rw_free(want);
        rw_engine_close(e);
    }
    rw_free(r1);
    rw_free(r2);
    rw_model_close(m);
    return rw_test_done();
}
