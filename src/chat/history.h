/* history.h - a conversation as API clients send it, made what chat
 * templates expect, and rendered to a prompt.
 *
 * Clients (the openai SDK, agents) send an assistant turn that called tools
 * as {"role": "assistant", "content": null, "tool_calls": [{"id", "type":
 * "function", "function": {"name", "arguments": "<JSON text>"}}]} followed by
 * {"role": "tool", "tool_call_id", "content"} messages. Templates were
 * written for transformers' shapes: arguments as a mapping, content a
 * string. rw_chat_normalize_messages converts, as vLLM and mlx-lm do:
 *   - role "developer" becomes "system";
 *   - content: an array of text parts becomes their concatenated text;
 *     null or absent becomes "";
 *   - tool_calls[].function.arguments: a string that parses as a JSON object
 *     becomes that object (other strings stay strings); "type": "function"
 *     is added where missing; each call also gets top-level "name" and
 *     "arguments" copies (some templates read tool_call.name directly);
 *   - a tool message gets "name" (its call's function name, matched by
 *     tool_call_id) where it has none;
 *   - an assistant message's "reasoning" (as some clients send it) becomes
 *     "reasoning_content" (Qwen3's templates read that), and "thinking" is
 *     set too (gpt-oss's template reads that);
 *   - with caps->tool_ids_9, tool call ids are mapped (consistently between
 *     a call and its result) to 9 alphanumerics, which Mistral's template
 *     requires.
 * Messages are checked on the way: each must be an object with a known role
 * (system, developer, user, assistant, tool), content of a supported shape.
 * A failure is RW_ERR_INVALID_ARG with a message that names the field as
 * OpenAI does ("messages.[2].content: ...").
 */
#ifndef RW_CHAT_HISTORY_H
#define RW_CHAT_HISTORY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"
#include "chat/chat.h"
#include "chat/output.h"

/* The template's capabilities: rw_chat_detect_caps on its source, then
 * probe renders (a system message, a tool call, two calls, a tool result)
 * to see which shapes it renders; rw_chat_render_messages adapts the
 * conversation to what it lacks, as llama.cpp's polyfills do: a refused
 * system role is folded into the first user message; calls a template does
 * not render go into the assistant's content as {"tool_calls": [...]} JSON;
 * tool results it does not render become user messages {"tool_response":
 * {"tool", "content"}} (consecutive ones merged, for templates that require
 * turns to alternate); several calls in one message, where only one is
 * allowed, become one message per call, each followed by its result. */
/* rw_chat_template_caps(t, out) is public (include/rewind.h). */

/* msgs: a JSON array of messages (not modified). On success *out is a new
 * array the caller owns (json_decref). caps may be NULL. */
rw_status rw_chat_normalize_messages(const json_t *msgs, const rw_chat_caps *caps, json_t **out, rw_error *err);

typedef struct {
    const json_t *messages;   /* as the client sent them (normalized here) */
    const json_t *tools;      /* OpenAI tools array, or NULL / null: no tools (tool_choice "none" passes NULL) */
    bool add_generation_prompt;
    const json_t *kwargs;     /* chat_template_kwargs: an object whose every key becomes a template variable
                                 (after the standard ones, so it may set enable_thinking); NULL: none */
    int enable_thinking;      /* 0/1, or -1: not defined (unless kwargs sets it) */
    const char *reasoning_effort; /* NULL, or "none", "minimal", "low", "medium", "high": passed as the variable
                                     reasoning_effort; "none" also sets enable_thinking = 0 where the template
                                     has that switch and neither kwargs nor enable_thinking said otherwise */
    const char *bos_token, *eos_token;
} rw_chat_prompt_opts;

/* What rw_chat_render_messages renders, before rendering: the messages
 * normalized and adapted to the template (a JSON array), and the render
 * options with every variable (ro's strings point into this struct); vars
 * is ro as the public rw_template_vars. For callers that render more than
 * once (the public rw_chat_prepare's object is this struct). Clear with
 * rw_chat_prepared_clear. Errors as rw_chat_render_messages' before
 * rendering. */
struct rw_chat_prepared {
    json_t *messages;
    rw_chat_render_opts ro;
    rw_template_vars vars;
    char *messages_json, *tools_json, *extra_json; /* owned; ro and vars point at them */
    char *bos_token, *eos_token; /* NULL, or owned copies that ro and vars point at (set by the caller after
                                    rw_chat_prepare_json; rw_chat_prepared_clear frees them) */
};
rw_status rw_chat_prepare_json(const rw_chat_caps *caps, const rw_chat_prompt_opts *o, rw_chat_prepared *out,
                           rw_error *err);
void rw_chat_prepared_clear(rw_chat_prepared *p);

/* Normalizes o->messages (with t's caps, from rw_chat_template_caps), adapts
 * them to what the template lacks and renders it. On success *out is malloc'd (caller frees), *out_len bytes. Errors:
 * RW_ERR_INVALID_ARG (messages, kwargs), RW_ERR_TEMPLATE (the template
 * failed; the message says why), RW_ERR_NOMEM. */
rw_status rw_chat_render_messages(const rw_chat_template *t, const rw_chat_caps *caps, const rw_chat_prompt_opts *o,
                                  char **out, size_t *out_len, rw_error *err);

#endif
