/* output_int.h - private to src/chat's output parser: the JSON balance
 * scanner and the parsers of one call's text (call_parse.c). */
#ifndef RW_CHAT_OUTPUT_INT_H
#define RW_CHAT_OUTPUT_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chat/output.h"

/* Finds where a JSON object or array that starts after optional whitespace
 * ends, string-aware, without validating more than brackets and strings. */
typedef struct {
    size_t pos; /* next byte to look at */
    int depth;
    bool started, in_str, esc;
} rw_chat__jscan;

/* 1: the value ends at s->pos; 0: needs more text; -1: not an object/array. */
int rw_chat__jscan_run(rw_chat__jscan *s, const char *p, size_t n);

/* An incremental JSON validator (json_stream.c): reads p[pos..n) on each
 * call (p may have grown since), state kept across calls. Zero it, set pos
 * to where the value starts. */
typedef struct {
    size_t pos;
    int st, depth, num, ulen, litpos;
    unsigned uval; /* the \\u escape's code unit so far */
    bool hi;       /* a high surrogate escape waits for its low half */
    bool key;
    const char *lit;
    char stack[64];
    size_t safe;           /* the last safe point: the text up to it can be sent... */
    char safe_close[72];   /* ...and closed with these bytes into a well-formed value */
    size_t safe_close_len;
} rw_chat__jval;

/* 1: the value is complete (it ends at pos); 0: needs more; -1: broken at pos. */
int rw_chat__jval_feed(rw_chat__jval *v, const char *p, size_t n);

/* Calls parsed from one piece of text: names and arguments (compact JSON
 * object text), malloc'd. */
typedef struct {
    struct {
        char *name, *args;
    } *v;
    int n, cap;
} rw_chat__calls;

void rw_chat__calls_free(rw_chat__calls *c);

/* A JSON object {"name", "arguments" | "parameters"} or an array of them
 * (strict: every element must be a call). bare: the text was not inside a
 * call marker (a bare message), so a call also needs its arguments key, lest
 * an ordinary JSON answer with a "name" be taken for a call. */
bool rw_chat__parse_json_calls(const char *s, size_t n, bool bare, rw_chat__calls *out);

/* The body of a <tool_call> (or a bare <function=...>...</function> when
 * function): Qwen's XML form (values typed by the tools' schemas) or JSON. */
bool rw_chat__parse_call_body(const char *s, size_t n, bool function, const json_t *tools, rw_chat__calls *out);

/* DeepSeek's calls (R1's and V3.1's): an optional <｜tool▁calls▁begin｜>,
 * then <｜tool▁call▁begin｜>...<｜tool▁call▁end｜> blocks, an optional
 * <｜tool▁calls▁end｜>. partial: the text was cut, so a last call without
 * its end is left out (the complete ones stand). */
bool rw_chat__parse_deepseek(const char *s, size_t n, bool partial, rw_chat__calls *out);

/* pythonic.c: LFM2's [name(key=value, ...), ...] (or one such call without
 * the brackets), values Python (or JSON) literals. */
bool rw_chat__parse_py_calls(const char *s, size_t n, rw_chat__calls *out);
/* Llama 3.x's <|python_tag|> text that is not JSON: a built-in tool's
 * NAME.call(key=value, ...), else code, a call of the code tool ("python",
 * or "ipython" / "code_interpreter" where tools has that name and not
 * "python") with {"code": text}. */
bool rw_chat__parse_builtin_call(const char *s, size_t n, const json_t *tools, rw_chat__calls *out);

/* Appends a call: name copied, args (an object) dumped compact. */
bool rw_chat__add_call(rw_chat__calls *c, const char *name, size_t name_len, json_t *args);

/* A call name we accept: 1..256 bytes, no spaces, quotes or angle brackets. */
bool rw_chat__valid_name(const char *s, size_t n);

/* One Qwen XML parameter's text as a JSON value, typed by the schema of
 * tool fn's parameter key in tools (may be NULL). New reference. */
json_t *rw_chat__xml_value(const json_t *tools, const char *fn, const char *key, const char *v, size_t n);

/* Whether tool fn's parameter key is kept a string whatever its text (so it
 * can be streamed as it comes): the schema allows a string and not null, or
 * says nothing. */
bool rw_chat__xml_streams_as_string(const json_t *tools, const char *fn, const char *key);

/* The length of the well-formed UTF-8 sequence at s[0..n): 1..4; 0 when
 * the bytes there are invalid; -1 when n cuts a valid start short. */
int rw_chat__utf8_len(const unsigned char *s, size_t n);

/* The JSON string escape of s[0..n) as jansson writes it (no quotes; invalid
 * UTF-8 as U+FFFD): *out malloc'd (NULL when out of memory), *out_len bytes.
 * Returns the bytes of s consumed: all, unless !final and s ends inside a
 * character (the rest waits for more text). */
size_t rw_chat__json_escape(const char *s, size_t n, bool final, char **out, size_t *out_len);

/* Real numbers printed with 15 significant digits: a decimal the model wrote
 * with up to 15 digits (all of them in practice) comes back as written
 * (1.1, not jansson's default 1.1000000000000001). */
#define RW_CHAT_ARGS_DUMP (JSON_COMPACT | JSON_REAL_PRECISION(15))

/* A tool call's id: prefix + 24 hex digits from seed and the call's index
 * (reproducible for a seed). */
void rw_chat__call_id(const char *prefix, uint64_t seed, int index, char id[128]);

/* harmony.c: the parser of RW_TOOL_FMT_HARMONY output (gpt-oss), which
 * rw_chat_output hands its text to. */
typedef struct rw_chat__harmony rw_chat__harmony;
rw_status rw_chat__harmony_new(bool reasoning, const char *id_prefix, uint64_t id_seed, rw_chat__harmony **out);
void rw_chat__harmony_free(rw_chat__harmony *h);
/* Appends text and sends the events it decides; finished: the text is
 * complete (what is held is decided now). */
rw_status rw_chat__harmony_feed(rw_chat__harmony *h, const char *text, size_t len, bool finished, rw_chat_event_fn fn,
                                void *user);
int rw_chat__harmony_n_calls(const rw_chat__harmony *h);
bool rw_chat__harmony_in_reasoning(const rw_chat__harmony *h);

#endif
