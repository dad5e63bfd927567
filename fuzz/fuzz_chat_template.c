/* fuzz_chat_template.c - libFuzzer harness for the chat-template renderer.
 *
 * The input is split at its first NUL byte: the part before is the template
 * source, the part after the messages JSON (or a fixed conversation when
 * there is no NUL). Property: parsing either succeeds or fails with a
 * one-line error, rendering either succeeds or fails with an error; never a
 * crash, a hang, undefined behaviour or a leak. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"

static const char default_messages[] =
    "[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Hi\"},"
    "{\"role\":\"assistant\",\"content\":\"Hello\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":{\"a\":1}}}]},"
    "{\"role\":\"tool\",\"content\":\"42\"}]";

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    const unsigned char *nul = memchr(data, 0, size);
    size_t tlen = nul ? (size_t)(nul - data) : size;
    char *messages = NULL;
    if (nul) {
        size_t mlen = size - tlen - 1;
        messages = malloc(mlen + 1);
        if (!messages) return 0;
        memcpy(messages, nul + 1, mlen);
        messages[mlen] = 0;
    }
    rw_chat_template *t;
    rw_error err = {0};
    if (rw_chat_template_parse((const char *)data, tlen, &t, &err) == RW_OK) {
        rw_chat_render_opts o = {.messages_json = messages ? messages : default_messages,
                                 .tools_json = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{}}}]",
                                 .add_generation_prompt = true, .enable_thinking = 1, .bos_token = "<s>",
                                 .eos_token = "</s>", .now = "2025-03-14T09:26:53"};
        char *out = NULL;
        size_t len;
        /* a render error's text is free (raise_exception's message is passed on verbatim); success gives a buffer */
        if (rw_chat_template_render(t, &o, &out, &len, &err) == RW_OK && !out) __builtin_trap();
        free(out);
        rw_chat_template_free(t);
    } else if (!err.msg[0] || strchr(err.msg, '\n')) {
        __builtin_trap();
    }
    free(messages);
    return 0;
}
