/* detect.c - what a chat template shows about its model (output.h): the
 * tool call format, think markers and the switches it reads, found by the
 * markers in its source, as llama.cpp picks its chat format. */
#include <string.h>

#include "chat/output.h"

static bool has(const char *s, size_t n, const char *lit) { return memmem(s, n, lit, strlen(lit)) != NULL; }

void rw_chat_detect_caps(const char *src, size_t n, rw_chat_caps *out) {
    memset(out, 0, sizeof *out);
    if (has(src, n, "<|channel|>") && has(src, n, "<|message|>")) out->tool_format = RW_TOOL_FMT_HARMONY;
    else if (has(src, n, "<function=") && has(src, n, "<parameter=")) out->tool_format = RW_TOOL_FMT_QWEN_XML;
    else if (has(src, n,
                 "<\xef\xbd\x9ctool\xe2\x96\x81"
                 "call\xe2\x96\x81"
                 "begin\xef\xbd\x9c>"))
        out->tool_format = RW_TOOL_FMT_DEEPSEEK; /* <｜tool▁call▁begin｜> */
    else if (has(src, n, "<TOOLCALL>")) out->tool_format = RW_TOOL_FMT_NEMOTRON;
    /* LFM2 writes its tools list with <|tool_list_start|>; LFM2.5's template only as "List of tools: [" */
    else if (has(src, n, "<|tool_call_start|>") || has(src, n, "<|tool_list_start|>") ||
             (has(src, n, "List of tools: [") && has(src, n, "<|im_start|>")))
        out->tool_format = RW_TOOL_FMT_LFM2;
    else if (has(src, n, "<|tool_call|>")) out->tool_format = RW_TOOL_FMT_GRANITE;
    else if (has(src, n, "<tool_call>")) out->tool_format = RW_TOOL_FMT_HERMES;
    else if (has(src, n, "<|python_tag|>") || (has(src, n, "<|start_header_id|>") && has(src, n, "ipython")))
        out->tool_format = RW_TOOL_FMT_LLAMA3;
    else if (has(src, n, "[TOOL_CALLS]")) out->tool_format = RW_TOOL_FMT_MISTRAL;
    else out->tool_format = RW_TOOL_FMT_GENERIC;
    out->has_think = has(src, n, "<think>") || has(src, n, "</think>");
    strcpy(out->think_open, "<think>");
    strcpy(out->think_close, "</think>");
    out->reads_enable_thinking = has(src, n, "enable_thinking");
    out->reads_reasoning_effort = has(src, n, "reasoning_effort");
    out->no_think_switch = has(src, n, "'/no_think'") || has(src, n, "\"/no_think\"");
    /* Mistral's templates raise unless every tool call id is 9 alphanumerics */
    out->tool_ids_9 = has(src, n, "length 9") || has(src, n, "[TOOL_CALLS]");
    out->system_role = out->tool_calls = out->parallel_calls = out->tool_results = true;
}

bool rw_chat_prompt_opens_reasoning(const char *prompt, size_t len, const char *open, const char *close) {
    if (!open || !*open) open = "<think>";
    if (!close || !*close) close = "</think>";
    size_t ko = strlen(open), kc = strlen(close);
    const char *last = NULL;
    for (const char *p = prompt; (p = memmem(p, len - (size_t)(p - prompt), open, ko)); p += ko) last = p;
    if (!last) return false;
    last += ko;
    return memmem(last, len - (size_t)(last - prompt), close, kc) == NULL;
}
