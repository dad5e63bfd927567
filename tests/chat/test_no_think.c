/* test_no_think.c - enable_thinking false and reasoning_effort none reach a
 * template whose switch is "/no_think" in the conversation (Nemotron Nano
 * v2's): its generation prompt then opens an empty think block, and the
 * marker itself is not rendered; without them it thinks. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "chat/history.h"
#include "chat/output.h"
#include "harness.h"

static char *render(const rw_chat_template *t, const rw_chat_caps *caps, int enable_thinking, const char *effort,
                    const char *kwargs) {
    json_t *msgs = json_pack("[{s:s,s:s},{s:s,s:s}]", "role", "system", "content", "Be brief.", "role", "user",
                             "content", "Hello there");
    json_t *kw = kwargs ? json_loads(kwargs, 0, NULL) : NULL;
    rw_chat_prompt_opts o = {.messages = msgs, .add_generation_prompt = true, .enable_thinking = enable_thinking,
                             .reasoning_effort = effort, .kwargs = kw};
    char *out = NULL;
    size_t len = 0;
    rw_error err = {0};
    CHECK_MSG(rw_chat_render_messages(t, caps, &o, &out, &len, &err) == RW_OK, "%s", err.msg);
    json_decref(msgs);
    json_decref(kw);
    return out;
}

int main(void) {
    size_t n = 0;
    char *src = rw_test_read_file(rw_test_fixture_path("chat/templates/NVIDIA-Nemotron-Nano-v2.jinja"), &n);
    if (!src) rw_test_skip("no ../shared/fixtures");
    rw_chat_template *t = NULL;
    rw_error err = {0};
    CHECK_MSG(rw_chat_template_parse(src, n, &t, &err) == RW_OK, "%s", err.msg);
    rw_chat_caps caps;
    rw_chat_template_caps(t, &caps);
    CHECK(caps.no_think_switch);
    char *on = render(t, &caps, -1, NULL, NULL), *off = render(t, &caps, 0, NULL, NULL),
         *none = render(t, &caps, -1, "none", NULL), *kw = render(t, &caps, -1, NULL, "{\"enable_thinking\":false}");
    CHECK_MSG(on && strstr(on, "<think>\n") && !strstr(on, "<think></think>"), "default: %s", on ? on : "");
    const char *offs[] = {off, none, kw};
    for (int i = 0; i < 3; i++) {
        CHECK_MSG(offs[i] && strstr(offs[i], "<think></think>"), "thinking off (%d): %s", i, offs[i] ? offs[i] : "");
        CHECK_MSG(offs[i] && !strstr(offs[i], "/no_think") && strstr(offs[i], "Hello there"), "marker shown (%d): %s",
                  i, offs[i] ? offs[i] : "");
    }
    free(on), free(off), free(none), free(kw);
    /* a template without the switch is left alone: Qwen3's reads enable_thinking itself */
    rw_chat_template_free(t);
    free(src);
    src = rw_test_read_file(rw_test_fixture_path("chat/templates/Qwen-Qwen3-0.6B.jinja"), &n);
    CHECK(src && rw_chat_template_parse(src, n, &t, &err) == RW_OK);
    rw_chat_template_caps(t, &caps);
    CHECK(!caps.no_think_switch);
    char *q = render(t, &caps, 0, NULL, NULL);
    CHECK_MSG(q && !strstr(q, "/no_think"), "%s", q ? q : "");
    free(q);
    rw_chat_template_free(t);
    free(src);
    return rw_test_done();
}
