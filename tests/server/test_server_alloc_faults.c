/* test_server_alloc_faults.c - allocation failures injected into one server
 * request (tests/alloc_faults.h): for N = 1, 2, ... the Nth allocation after
 * arming fails while a server starts on the qwen35 fixture's engine, answers
 * one chat completion over loopback HTTP and stops. Each run must end with
 * an answer, an error status or a failed start (never a crash), hold no more
 * blocks afterwards than before, and the same request right after without
 * faults must give the reference answer. The server's threads make the
 * allocation order vary a little from run to run; the loop ends at the
 * first N that no allocation reaches. The same for a completions request
 * with a list of prompts (echo with the prompts' logprobs, token ids).
 * Skipped in the sanitizer build. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "alloc_faults.h"
#include "chat/chat.h"
#include "engine/engine.h"
#include "harness.h"
#include "server/server.h"
#include "tools/http_client.h"

#if FAULTS
static rw_engine *g_engine;
static rw_tokenizer *g_tok;
static rw_chat_template *g_tmpl;
static char *g_bos, *g_eos;

/* One request to a fresh server; the answer's choices' texts (chat: the
 * messages' content) into out. */
static int serve_once(const char *path, const char *body, result *out) {
    const rw_server_config sc = {.model_id = "fixture"};
    rw_server *s = NULL;
    rw_error err = {0};
    rw_status st = rw_server_start(g_engine, g_tok, g_tmpl, g_bos, g_eos, &sc, &s, &err);
    if (st) return st;
    rw_http_request rq = {.port = rw_server_port(s),
                          .method = "POST",
                          .path = path,
                          .body = body,
                          .body_len = strlen(body),
                          .timeout_ms = 30000};
    rw_http_response r = {0};
    int status = rw_http_do(&rq, &r, &err) == RW_OK ? r.status : -1;
    int ret = status == 200 ? 0 : status > 0 ? status : RW_ERR_IO;
    if (!ret && out) {
        json_t *j = r.body ? json_loads(r.body, JSON_ALLOW_NUL, NULL) : NULL;
        json_t *choices = json_object_get(j, "choices");
        if (!json_array_size(choices)) ret = RW_ERR_FORMAT;
        for (size_t i = 0; i < json_array_size(choices); i++) {
            json_t *c = json_array_get(choices, i);
            json_t *msg = json_object_get(c, "message");
            const char *text = json_string_value(json_object_get(msg ? msg : c, msg ? "content" : "text"));
            if (text) put(out, text, strlen(text));
            else ret = RW_ERR_FORMAT;
        }
        json_decref(j);
    }
    rw_http_response_free(&r);
    rw_server_stop(s);
    /* the engine retires the request on its own thread: let it */
    for (int i = 0; i < 200; i++) {
        rw_engine_stats st2 = {0};
        rw_engine_get_stats(g_engine, &st2);
        if (!st2.running && !st2.queued) break;
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000000L}, NULL);
    }
    return ret;
}

static int phase_request(result *out) {
    return serve_once("/v1/chat/completions",
                      "{\"messages\":[{\"role\":\"user\",\"content\":\"Say hello to the tests.\"}],\"max_tokens\":4,"
                      "\"temperature\":0}",
                      out);
}

static int phase_list(result *out) {
    return serve_once("/v1/completions",
                      "{\"prompt\":[\"Say hello\",[1,2,3]],\"max_tokens\":3,\"temperature\":0,\"echo\":true,"
                      "\"return_token_ids\":true,\"logprobs\":2}",
                      out);
}
#endif

int main(void) {
#if !FAULTS
    rw_test_skip("ASan's allocator replaces malloc: no fault injection in the sanitizer build");
#else
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures");
    rw_error err = {0};
    rw_gguf *g = NULL;
    rw_model *m = NULL;
    const char *path = rw_test_fixture_path("qwen35/qwen35-Q8_0.gguf");
    if (rw_gguf_open(path, &g, &err) || rw_model_load(g, &m, &err) || rw_tokenizer_load(g, &g_tok, &err) ||
        rw_chat_template_from_gguf(g, &g_tmpl, &g_bos, &g_eos, &err)) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        return 1;
    }
    /* no prefix cache: a request's state would stay there, which the leak
     * count would take for a leak */
    const rw_engine_config ec = {.n_threads = 1, .max_running = 2, .max_queued = 4, .n_ctx = 256,
                                 .prefill_chunk = 32, .kv_type = RW_KV_F32};
    CHECK(rw_engine_new(m, g_tok, &ec, &g_engine, &err) == RW_OK);
    if (g_engine) {
        const phase ph = {"server request", phase_request}, pl = {"list of prompts", phase_list};
        fault_loop(&ph);
        /* two sequences that surely decode side by side: both batch slots and
         * the output head's scattered rows then hold the buffers they keep
         * between requests, which the list's two short prompts reach only
         * when its requests happen to overlap */
        CHECK(serve_once("/v1/completions",
                         "{\"prompt\":\"Say hello\",\"n\":2,\"max_tokens\":24,\"temperature\":0,\"ignore_eos\":true}",
                         NULL) == 0);
        fault_loop(&pl);
    }
    rw_engine_free(g_engine);
    rw_chat_template_free(g_tmpl);
    free(g_bos);
    free(g_eos);
    rw_tokenizer_free(g_tok);
    rw_model_free(m);
    rw_gguf_close(g);
    return rw_test_done();
#endif
}
