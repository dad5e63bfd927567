/* test_chat_prepare_api.c - the public calls `rewind serve` and `rewind
 * generate` moved onto (include/rewind.h): a chat request prepared for a
 * template's capabilities (normalized, adapted, its variables owned by the
 * prepared object), rendered at once or in two steps with the same text;
 * a template's capabilities found by probing; a template and a tokenizer
 * read from a file without its weights; a text matched against a grammar;
 * the engine's full statistics filled to the caller's size. Includes only
 * rewind.h besides the harness. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "rewind.h"

/* A template that refuses a system message (as Gemma's) and renders every
 * other message as <role>content. */
static const char NO_SYSTEM[] =
    "{%- for m in messages %}{%- if m.role == 'system' %}{{ raise_exception('no system role') "
    "}}{%- endif %}<{{ m.role }}>{{ m.content }}\n{%- endfor %}";

static void no_model_checks(void) {
    rw_error err;
    /* grammars: prefix and complete */
    const char *g = "root ::= \"ab\" \"c\"?";
    bool prefix = true, complete = true;
    CHECK(!rw_grammar_match(g, strlen(g), NULL, "a", 1, &prefix, &complete, &err) && prefix && !complete);
    CHECK(!rw_grammar_match(g, strlen(g), NULL, "ab", 2, &prefix, &complete, &err) && prefix && complete);
    CHECK(!rw_grammar_match(g, strlen(g), NULL, "abc", 3, &prefix, &complete, &err) && prefix && complete);
    CHECK(!rw_grammar_match(g, strlen(g), NULL, "x", 1, &prefix, &complete, &err) && !prefix && !complete);
    CHECK(!rw_grammar_match(g, strlen(g), NULL, "", 0, &prefix, &complete, &err) && prefix && !complete);
    CHECK(rw_grammar_match("root ::= nope", 13, NULL, "a", 1, &prefix, &complete, &err) == RW_ERR_INVALID_ARG &&
          !prefix && !complete);

    /* preparation without capabilities: normalized, nothing adapted */
    rw_chat_request rq = rw_chat_request_default();
    CHECK(rq.struct_size == sizeof rq && rq.add_generation_prompt && rq.enable_thinking == -1);
    char bos[] = "<s>";
    rq.messages_json = "[{\"role\":\"developer\",\"content\":\"D\"},{\"role\":\"user\",\"content\":[{\"type\":"
                       "\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]}]";
    rq.bos_token = bos;
    rw_chat_prepared *p = NULL;
    CHECK_MSG(!rw_chat_prepare(NULL, &rq, &p, &err), "%s", err.msg);
    if (p) {
        size_t len = 0;
        const char *msgs = rw_chat_prepared_messages(p, &len);
        CHECK_MSG(msgs && len == strlen(msgs) && strstr(msgs, "\"role\":\"system\"") &&
                      strstr(msgs, "\"content\":\"ab\""),
                  "%s", msgs ? msgs : "(null)");
        const rw_template_vars *v = rw_chat_prepared_vars(p);
        CHECK(v && v->struct_size == sizeof *v && v->messages_json == msgs && v->add_generation_prompt);
        bos[1] = 'x'; /* the caller's strings were read during the call only */
        CHECK(v && v->bos_token && !strcmp(v->bos_token, "<s>") && v->eos_token == NULL && v->tools_json == NULL);
    }
    rw_chat_prepared_free(p);
    rw_chat_prepared_free(NULL);

    /* failures: *out NULL, the field named */
    rq = rw_chat_request_default();
    rq.messages_json = "[{\"role\": ";
    p = (rw_chat_prepared *)&rq;
    CHECK(rw_chat_prepare(NULL, &rq, &p, &err) == RW_ERR_INVALID_ARG && p == NULL);
    rq.messages_json = "[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"wizard\",\"content\":\"b\"}]";
    CHECK(rw_chat_prepare(NULL, &rq, &p, &err) == RW_ERR_INVALID_ARG && p == NULL);
    CHECK_MSG(!strncmp(err.msg, "messages.[1]", 12), "%s", err.msg);
    rq.messages_json = "[{\"role\":\"user\",\"content\":\"a\"}]";
    rq.kwargs_json = "[1]";
    CHECK(rw_chat_prepare(NULL, &rq, &p, &err) == RW_ERR_INVALID_ARG && p == NULL);
    rq.kwargs_json = NULL;
    rq.struct_size = 4; /* a size no version had */
    CHECK(rw_chat_prepare(NULL, &rq, &p, &err) == RW_ERR_INVALID_ARG && p == NULL);

    /* a template without a system role: found by probing, folded into the first user message */
    rw_chat_template *t = NULL;
    CHECK_MSG(!rw_chat_template_parse(NO_SYSTEM, strlen(NO_SYSTEM), &t, &err), "%s", err.msg);
    rw_chat_caps caps;
    rw_chat_template_caps(t, &caps);
    CHECK(!caps.system_role && !caps.tool_calls);
    rq = rw_chat_request_default();
    rq.messages_json = "[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"Hi\"}]";
    char *one = NULL, *two = NULL;
    size_t one_len = 0, two_len = 0;
    CHECK_MSG(!rw_chat_render_request(t, &caps, &rq, &one, &one_len, &err), "%s", err.msg);
    CHECK_MSG(one && !strcmp(one, "<user>S\n\nHi") && one_len == strlen(one), "%s", one ? one : err.msg);
    /* in two steps: the same text */
    CHECK(!rw_chat_prepare(&caps, &rq, &p, &err));
    CHECK(p && !rw_chat_template_apply(t, rw_chat_prepared_vars(p), &two, &two_len, &err));
    CHECK(one && two && one_len == two_len && !strcmp(one, two));
    rw_chat_prepared_free(p);
    rw_free(one);
    rw_free(two);
    /* without the capabilities the template refuses the system message */
    CHECK(rw_chat_render_request(t, NULL, &rq, &one, NULL, &err) == RW_ERR_TEMPLATE && one == NULL);
    CHECK_MSG(strstr(err.msg, "no system role") != NULL, "%s", err.msg);
    rw_chat_template_free(t);
    CHECK(rw_chat_template_parse("{% if %}", 8, &t, &err) == RW_ERR_TEMPLATE && t == NULL);
    rw_chat_template_caps(NULL, &caps);
    CHECK(caps.tool_format == RW_TOOL_FMT_GENERIC && !caps.system_role);
    CHECK(!strcmp(rw_pcache_reason_name(RW_PC_HIT), "hit") &&
          !strcmp(rw_pcache_reason_name(RW_PC_DIFFERENT_MODEL), "different_model"));
}

int main(void) {
    no_model_checks();
    const char *path = rw_test_fixture_path("qwen35/qwen35-Q8_0.gguf");
    if (!rw_test_fixtures()) rw_test_skip("no fixtures");
    rw_error err;

    /* a file's tokenizer and template without its weights equal the model's */
    rw_tokenizer *tok = NULL;
    CHECK_MSG(!rw_tokenizer_open(path, &tok, &err), "%s", err.msg);
    rw_chat_template *ft = NULL;
    char *bos = NULL, *eos = NULL;
    CHECK_MSG(!rw_chat_template_load(path, &ft, &bos, &eos, &err), "%s", err.msg);
    rw_tokenizer *no_tok = NULL;
    CHECK(rw_tokenizer_open("/nonexistent.gguf", &no_tok, &err) == RW_ERR_IO && no_tok == NULL);
    rw_chat_template *none = NULL;
    CHECK(rw_chat_template_load("/nonexistent.gguf", &none, NULL, NULL, &err) == RW_ERR_IO && none == NULL);
    rw_model *m = NULL;
    CHECK_MSG(!rw_model_open(path, NULL, &m, &err), "%s", err.msg);
    if (!m) return rw_test_done();
    int32_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    const char *text = "Hello, world! <|im_start|>";
    if (tok) {
        CHECK(rw_tokenizer_n_vocab(tok) == rw_model_n_vocab(m));
        CHECK(!rw_tokenize(tok, text, strlen(text), true, true, &a, &na, &err));
        CHECK(!rw_model_tokenize(m, text, strlen(text), true, true, &b, &nb, &err));
        CHECK(na == nb && na > 0 && !memcmp(a, b, na * sizeof *a));
    }
    rw_free(a);
    rw_free(b);
    rw_tokenizer_close(tok);
    size_t l1 = 0, l2 = 0;
    const char *s1 = ft ? rw_chat_template_source(ft, &l1) : NULL;
    const char *s2 = rw_chat_template_source(rw_model_chat_template(m), &l2);
    CHECK(s1 && s2 && l1 == l2 && !memcmp(s1, s2, l1));
    rw_chat_template_free(ft);
    rw_free(bos);
    rw_free(eos);

    /* the model's template: a conversation with a call prepares and renders */
    rw_chat_caps caps;
    rw_chat_template_caps(rw_model_chat_template(m), &caps);
    CHECK(caps.system_role && caps.tool_results); /* calls it renders or not: as text then */
    rw_chat_request rq = rw_chat_request_default();
    rq.messages_json = "[{\"role\":\"user\",\"content\":\"Weather?\"},{\"role\":\"assistant\",\"content\":null,"
                       "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                       "\"arguments\":\"{\\\"city\\\":\\\"Oslo\\\"}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\","
                       "\"content\":\"sunny\"}]";
    rq.enable_thinking = 0;
    char *r = NULL;
    CHECK_MSG(!rw_chat_render_request(rw_model_chat_template(m), &caps, &rq, &r, NULL, &err), "%s", err.msg);
    CHECK_MSG(r && strstr(r, "get_weather") && strstr(r, "Oslo") && strstr(r, "sunny"), "%s", r ? r : err.msg);
    rw_free(r);

    /* the full statistics, to the caller's size */
    rw_engine_params ep = rw_engine_params_default();
    ep.run.n_ctx = 256;
    ep.manual = true;
    rw_engine *e = NULL;
    CHECK_MSG(!rw_engine_open(m, &ep, &e, &err), "%s", err.msg);
    if (e) {
        rw_gen_options go = rw_gen_options_default();
        go.max_tokens = 5;
        go.ignore_eos = true;
        rw_gen_result res;
        CHECK_MSG(!rw_engine_run(e, "Hello", &go, NULL, &res, &err), "%s", err.msg);
        CHECK(rw_engine_step(e, &err) == 0); /* retires the finished request */
        rw_engine_stats st;
        memset(&st, 0xAB, sizeof st);
        CHECK(rw_engine_stats_full(e, &st, 8, &err) == RW_ERR_INVALID_ARG);
        CHECK(rw_engine_stats_full(e, &st, sizeof st, &err) == RW_OK);
        CHECK(st.struct_size == sizeof st && st.requests_finished == 1 && st.generated_tokens == 5);
        CHECK_MSG(st.running == 0 && st.queued == 0 && st.cache_enabled && !st.spec_enabled, "%d %d %d %d", st.running,
                  st.queued, st.cache_enabled, st.spec_enabled);
        CHECK(st.ttft.count == 1 && st.itl.count == 4);
        uint64_t reasons = 0;
        for (int i = 0; i < RW_PC_REASON_MAX; i++) reasons += st.recompute_reasons[i];
        CHECK(reasons == 1);
        /* a larger struct (a newer header's): the part this library has not is zeroed */
        unsigned char big[sizeof(rw_engine_stats) + 16];
        memset(big, 0xAB, sizeof big);
        CHECK(rw_engine_stats_full(e, (rw_engine_stats *)(void *)big, sizeof big, &err) == RW_OK);
        rw_engine_stats head;
        memcpy(&head, big, sizeof head);
        bool zero = true;
        for (size_t i = sizeof(rw_engine_stats); i < sizeof big; i++) zero = zero && big[i] == 0;
        CHECK(head.struct_size == sizeof(rw_engine_stats) && zero);
        CHECK(rw_engine_stats_full(NULL, &st, sizeof st, &err) == RW_ERR_INVALID_ARG);
        rw_engine_close(e);
    }
    rw_model_close(m);
    return rw_test_done();
}
