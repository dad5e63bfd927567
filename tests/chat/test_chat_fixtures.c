/* test_chat_fixtures.c - every entry of ../shared/fixtures/chat/expected.json
 * (15 real templates x 12 conversations x render settings) rendered byte for
 * byte as transformers renders it, and every expected error raised. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "harness.h"

static json_t *find_case(json_t *cases, const char *name) {
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c) if (!strcmp(json_string_value(json_object_get(c, "name")), name)) return c;
    return NULL;
}

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures");
    json_error_t je;
    json_t *expected = json_load_file(rw_test_fixture_path("chat/expected.json"), 0, &je);
    json_t *cases_root = json_load_file(rw_test_fixture_path("chat/cases.json"), 0, &je);
    CHECK(expected && cases_root);
    if (!expected || !cases_root) return rw_test_done();
    json_t *cases = json_object_get(cases_root, "cases");
    const char *now = json_string_value(json_object_get(json_object_get(cases_root, "environment"), "strftime_now_fixed_datetime"));
    size_t i, passed = 0, total = 0;
    json_t *e;
    json_array_foreach(expected, i, e) {
        const char *tname = json_string_value(json_object_get(e, "template"));
        char path[512];
        snprintf(path, sizeof path, "chat/templates/%s", tname);
        size_t len;
        char *src = rw_test_read_file(rw_test_fixture_path(path), &len);
        CHECK_MSG(src != NULL, "cannot read %s", path);
        if (!src) continue;
        rw_chat_template *t = NULL;
        rw_error err = {0};
        rw_status s = rw_chat_template_parse(src, len, &t, &err);
        CHECK_MSG(s == RW_OK, "%s: parse: %s", tname, err.msg);
        json_t *c = find_case(cases, json_string_value(json_object_get(e, "case")));
        char *msgs = json_dumps(json_object_get(c, "messages"), JSON_PRESERVE_ORDER | JSON_COMPACT);
        json_t *tools = json_object_get(c, "tools");
        char *tools_s = tools ? json_dumps(tools, JSON_PRESERVE_ORDER | JSON_COMPACT) : NULL;
        json_t *et = json_object_get(e, "enable_thinking");
        rw_chat_render_opts o = {
            .messages_json = msgs,
            .tools_json = tools_s,
            .add_generation_prompt = json_is_true(json_object_get(e, "add_generation_prompt")),
            .enable_thinking = json_is_null(et) || !et ? -1 : json_is_true(et),
            .bos_token = json_string_value(json_object_get(e, "bos_token")),
            .eos_token = json_string_value(json_object_get(e, "eos_token")),
            .now = now,
        };
        total++;
        if (!s) {
            char *out = NULL;
            size_t out_len = 0;
            s = rw_chat_template_render(t, &o, &out, &out_len, &err);
            bool want_error = json_is_true(json_object_get(e, "expected_error"));
            if (want_error) {
                const char *msg = json_string_value(json_object_get(e, "error"));
                CHECK_MSG(s != RW_OK, "%s/%s: expected error '%s'", tname, json_string_value(json_object_get(e, "case")), msg);
                if (s && json_is_true(json_object_get(e, "error_from_raise_exception")))
                    CHECK_MSG(!strcmp(err.msg, msg), "%s: error '%s', expected '%s'", tname, err.msg, msg);
                if (s) passed++;
            } else {
                const char *want = json_string_value(json_object_get(e, "output"));
                size_t want_len = json_string_length(json_object_get(e, "output"));
                bool ok = s == RW_OK && out_len == want_len && !memcmp(out, want, want_len);
                if (ok) passed++;
                else if (s) CHECK_MSG(false, "%s/%s: %s", tname, json_string_value(json_object_get(e, "case")), err.msg);
                else {
                    size_t k = 0;
                    while (k < out_len && k < want_len && out[k] == want[k]) k++;
                    CHECK_MSG(false, "%s/%s (agp=%d think=%d): differs at byte %zu: got \"%.60s\" want \"%.60s\"", tname,
                              json_string_value(json_object_get(e, "case")), o.add_generation_prompt, o.enable_thinking, k,
                              out + (k > 10 ? k - 10 : 0), want + (k > 10 ? k - 10 : 0));
                }
            }
            free(out);
        }
        free(msgs);
        free(tools_s);
        rw_chat_template_free(t);
        free(src);
    }
    printf("%zu of %zu renders exact\n", passed, total);
    json_decref(expected);
    json_decref(cases_root);
    return rw_test_done();
}
