/* output.h - a model's generated text split into what an API returns:
 * content, reasoning (<think>...</think>) and tool calls, incrementally
 * (streaming) or at once, independent of any HTTP API.
 *
 * The parser is fed the generated text in pieces as the engine produces them
 * (any split, even inside a UTF-8 character or a marker) and reports events
 * through a callback: content and reasoning pieces, and for each tool call
 * its begin (index, id, name), its arguments as pieces of a JSON object text,
 * and its end. Text that might be the start of a marker is held back until
 * the next piece shows what it is, so no markup of a call or of a think
 * block ever reaches a content event. A call that does not parse (bad JSON,
 * unknown structure, cut off by the token limit) is given back as content,
 * never dropped: a call's events are sent once the whole call has parsed.
 *
 * With stream_args (for streaming responses), a Qwen XML call is instead
 * sent as it comes: its begin once <function=NAME> is complete, then its
 * parameters ({"k":v, then ,"k":v, ..., then } at </function>): a string
 * parameter's text (the schema allows a string and not null, or says
 * nothing) as it comes, escaped, so a long argument (a file's text) does not
 * wait; any other parameter when its </parameter> closes. A call that breaks after its begin is
 * then closed with the parameters it had (its arguments stay a well-formed
 * object) and the text from the break on is content. A Hermes JSON call
 * ({"name": N, "arguments": {...}} inside <tool_call>, name first) likewise:
 * its begin once the name is read, then its arguments as they are validated,
 * compact (whitespace outside strings dropped), closed at the last sure point
 * if they break; so are the JSON calls of LLAMA3 (a bare object, or after
 * <|python_tag|>), MISTRAL, NEMOTRON, GRANITE (each call of a list in turn)
 * and DEEPSEEK (each <｜tool▁call▁begin｜> whose arguments are an object). Well-formed calls give the same calls either way (the same
 * texts for XML; for JSON the same values, numbers and escapes as the model
 * wrote them). Other shapes and formats are sent whole.
 *
 * Feeding the whole text in one piece or byte by byte gives the same events'
 * concatenated texts (the pieces may be cut differently); the non-streaming
 * rw_chat_output_parse is that concatenation.
 *
 * Formats (rw_tool_format), chosen from the chat template with
 * rw_chat_detect_caps (as llama.cpp detects them) or set by the user:
 *   QWEN_XML  Qwen3.5 / Qwen3-Coder:
 *             <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n</function>\n</tool_call>
 *             VALUE converted by the tool's JSON schema (tools_json): a string
 *             parameter stays a string; number, integer, boolean, object,
 *             array, null parsed as JSON (kept a string if it does not parse).
 *   HERMES    Hermes / Qwen2.5 / Qwen3: <tool_call>{"name": N, "arguments": {...}}</tool_call>
 *   LLAMA3    Llama 3.x: a message that is one JSON object {"name": N, "parameters": {...}}
 *             (or "arguments"), several separated by ';' or newlines; or
 *             <|python_tag|> followed by such objects; or <|python_tag|> followed by
 *             a built-in tool's call NAME.call(key="value", ...) (brave_search,
 *             wolfram_alpha, ...: a call of NAME) or by code (a call of "python",
 *             or of "ipython" / "code_interpreter" where the tools name that and not
 *             "python", with {"code": the text}); the text runs to the end.
 *   GRANITE   Granite 3.x / 4.x: <|tool_call|>[{"name": N, "arguments": {...}}, ...]
 *             (Granite 4.0's template uses HERMES's <tool_call> form: it detects as HERMES).
 *   DEEPSEEK  DeepSeek R1 / V3: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
 *             ```json\n{...}\n```<｜tool▁call▁end｜> ... <｜tool▁calls▁end｜>, or V3.1's
 *             <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>.
 *   NEMOTRON  Nemotron Nano v2: <TOOLCALL>[{"name": N, "arguments": {...}}, ...]</TOOLCALL>
 *   LFM2      LFM2 / LFM2.5: <|tool_call_start|>[NAME(key=value, ...), ...]<|tool_call_end|>
 *             (values Python literals; a JSON list of call objects is taken too).
 *   MISTRAL   Mistral: [TOOL_CALLS][{"name": N, "arguments": {...}}, ...] (the marker is
 *             a control token: without it, a message that is such a list).
 *   GENERIC   the fallback for templates we do not know: <tool_call>JSON</tool_call>
 *             as HERMES, plus a message that is one bare {"name", "arguments"}
 *             object (or a list of them) as LLAMA3.
 *   NONE      no tool-call parsing: all of it is content.
 *
 * Reasoning: with RW_REASONING_DEEPSEEK, text between the template's think
 * markers (default <think> and </think>) is reasoning. in_reasoning says the
 * prompt already opened the block (Qwen3.5's generation prompt ends in
 * "<think>\n"; see rw_chat_prompt_opens_reasoning), so the output starts as
 * reasoning until the close marker. A think block is recognised only before
 * any content or call (leading whitespace aside), as the templates place it.
 * With RW_REASONING_NONE the markers and reasoning stay in the content.
 */
#ifndef RW_CHAT_OUTPUT_H
#define RW_CHAT_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* rw_tool_format (and RW_TOOL_FMT_LAST) is public: include/rewind.h. */

/* DeepSeek's call markers (<｜tool▁calls▁begin｜> ...), as UTF-8 */
#define RW_CHAT_DS_CALLS_BEGIN "<\uff5ctool\u2581calls\u2581begin\uff5c>"
#define RW_CHAT_DS_CALLS_END "<\uff5ctool\u2581calls\u2581end\uff5c>"
#define RW_CHAT_DS_CALL_BEGIN "<\uff5ctool\u2581call\u2581begin\uff5c>"
#define RW_CHAT_DS_CALL_END "<\uff5ctool\u2581call\u2581end\uff5c>"
#define RW_CHAT_DS_SEP "<\uff5ctool\u2581sep\uff5c>"

/* rw_reasoning_format is public (include/rewind.h). */

/* "none", "generic", "qwen-xml", "hermes", "llama3", "granite", "harmony",
 * "deepseek", "nemotron", "lfm2", "mistral" (the names of --tool-format);
 * parse returns false for an unknown name. */
const char *rw_tool_format_name(rw_tool_format f);
bool rw_tool_format_parse(const char *name, rw_tool_format *out);

/* rw_chat_caps, what a template shows about its model's output and its
 * inputs, is public (include/rewind.h); rw_chat_detect_caps reads the
 * source alone and sets the rendered capabilities all true. */

void rw_chat_detect_caps(const char *tmpl_src, size_t len, rw_chat_caps *out);

/* True if a rendered prompt leaves a think block open for the model: its
 * last `open` marker has no `close` after it (Qwen3.5's, DeepSeek-R1's
 * generation prompts). open/close NULL: the defaults. */
bool rw_chat_prompt_opens_reasoning(const char *prompt, size_t len, const char *open, const char *close);

typedef struct {
    rw_tool_format tool_format;
    rw_reasoning_format reasoning;
    const char *think_open, *think_close; /* NULL: "<think>", "</think>" (copied) */
    bool in_reasoning;      /* the prompt opened the think block: output starts as reasoning */
    const char *tools_json; /* the request's tools array (OpenAI shape), or NULL: QWEN_XML converts
                               parameter values by these schemas; copied */
    const char *id_prefix;  /* tool call ids: id_prefix + 24 hex digits; NULL: "call_" (copied) */
    uint64_t id_seed;       /* the ids' random part comes from this (the server passes fresh randomness;
                               tests a constant, so ids are reproducible) */
    bool stream_args;       /* stream a call's arguments as they come (for streaming responses), see below */
    bool cut;               /* the token limit cut the output (rw_chat_output_set_cut) */
    int max_calls;          /* > 0: the calls after this many are dropped, and so is all text after
                               the last one (parallel_tool_calls false): see rw_chat_output_calls_done */
} rw_chat_output_opts;

/* rw_chat_event_kind, rw_chat_event and rw_chat_event_fn are public
 * (include/rewind.h), as are the parser's functions declared below. */

typedef struct rw_chat_output rw_chat_output;

/* A parser for one generated message. The caller owns *out: free it with
 * rw_chat_output_free. */
rw_status rw_chat_output_new(const rw_chat_output_opts *o, rw_chat_output **out, rw_error *err);
void rw_chat_output_free(rw_chat_output *p); /* no-op on NULL */

/* Feeds the next piece of generated text; events for what is now certain go
 * to fn. Errors: only the callback's status, or RW_ERR_NOMEM. */
rw_status rw_chat_output_feed(rw_chat_output *p, const char *text, size_t len, rw_chat_event_fn fn, void *user,
                              rw_error *err);
/* The generation ended: text held back is resolved (an unfinished call or
 * marker becomes content; an unclosed think block stays reasoning). Feed no
 * more after this. */
rw_status rw_chat_output_finish(rw_chat_output *p, rw_chat_event_fn fn, void *user, rw_error *err);

/* The token limit cut the generation (set before finish): at finish, a call
 * that is not complete (its end marker not seen, or its JSON not closed) and
 * a trailing piece of a call marker are dropped instead of given back as
 * content, so no call markup reaches the content; a streamed call already
 * begun is closed with what it had. A bare JSON message (LLAMA3, GRANITE,
 * GENERIC, MISTRAL) is dropped when it starts as a call ({"name"...), else
 * it stays content (a JSON answer cut short). A marker's start followed by
 * U+FFFD (the engine's end for a character the limit cut) is dropped too. */
void rw_chat_output_set_cut(rw_chat_output *p, bool cut);

/* Calls completed so far (for finish_reason "tool_calls"). */
int rw_chat_output_n_calls(const rw_chat_output *p);
/* With max_calls: that many calls are complete, so nothing more the model
 * writes will be sent (the generation can stop). */
bool rw_chat_output_calls_done(const rw_chat_output *p);
/* Whether the think block is open now (reasoning is being generated): the
 * server's thinking budget counts tokens while this holds. */
bool rw_chat_output_in_reasoning(const rw_chat_output *p);

/* ---- non-streaming ---- */

/* rw_chat_tool_call and rw_chat_parsed are public (include/rewind.h). */

/* The whole generated text at once (the concatenation of the events of
 * feed + finish). The caller frees *out with rw_chat_parsed_free. */
rw_status rw_chat_output_parse(const rw_chat_output_opts *o, const char *text, size_t len, rw_chat_parsed *out,
                               rw_error *err);
void rw_chat_parsed_free(rw_chat_parsed *m);

#endif
