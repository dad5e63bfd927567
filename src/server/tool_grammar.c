/* tool_grammar.c - the GBNF of a forced tool call (server_int.h): the model's
 * own call format around the JSON schema compiler's rules for each tool's
 * parameters (grammar/grammar.h), so what it writes parses as a call whose
 * arguments validate against the tool's schema.
 *
 *   hermes, generic  <tool_call>\n{"name": "N", "arguments": ARGS}\n</tool_call>
 *   llama3           {"name": "N", "parameters": ARGS}
 *   granite          [{"name": "N", "arguments": ARGS}, ...]   (its <|tool_call|> is a
 *                    control token no grammar can write: the bare list parses the same)
 *   qwen-xml         <tool_call>\n<function=N>\n<parameter=K>\nV\n</parameter>\n...</function>\n</tool_call>
 *                    with the properties in the schema's order (the required ones always,
 *                    the others optional); V, where the schema allows a string, its
 *                    text as written (an enum's or const's strings; else no '<' or
 *                    newline, at most maxLength bytes: a pattern or format is not
 *                    enforced there), otherwise the JSON of the property's schema.
 *   deepseek         <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>N\n```json\nARGS\n```<｜tool▁call▁end｜>
 *                    ("\n" and more calls) <｜tool▁calls▁end｜>
 *   nemotron         <TOOLCALL>[{"name": "N", "arguments": ARGS}, ...]</TOOLCALL>
 *   mistral          [{"name": "N", "arguments": ARGS}, ...]   (its [TOOL_CALLS] is a control token, as
 *                    granite's)
 *   lfm2             <|tool_call_start|>[N(K=V, ...), ...]<|tool_call_end|> with the required
 *                    properties first, then the optional ones, each V the JSON of its schema
 *                    (JSON's literals are Python's to the parser).
 *   harmony          [<|channel|>analysis<|message|>REASONING<|end|><|start|>assistant]
 *                    <|channel|>commentary to=functions.N <|constrain|>json<|message|>ARGS
 *                    (gpt-oss: it may reason first, as it was trained to; one call, which
 *                    its <|call|> ends; the markers are control tokens, which the engine
 *                    lets a grammar write when the output renders them). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the DeepSeek call markers, as the library's parser reads them (macros:
 * no library symbol) */
#include "chat/output.h"
#include "server/server_int.h"

typedef struct {
    char *p;
    size_t n, cap;
    bool oom;
} buf;

static void put(buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void puts_(buf *b, const char *s) { put(b, s, strlen(s)); }

/* A GBNF string literal of s. */
static void lit(buf *b, const char *s) {
    put(b, "\"", 1);
    for (; *s; s++) {
        char e[8];
        if (*s == '"' || *s == '\\') snprintf(e, sizeof e, "\\%c", *s);
        else if (*s == '\n') snprintf(e, sizeof e, "\\n");
        else if (*s == '\t') snprintf(e, sizeof e, "\\t");
        else if ((unsigned char)*s < 0x20) snprintf(e, sizeof e, "\\x%02X", (unsigned char)*s);
        else {
            e[0] = *s;
            e[1] = 0;
        }
        puts_(b, e);
    }
    put(b, "\"", 1);
}

/* The schema compiler's rules for schema, named name. */
static rw_status schema_rules(buf *b, const json_t *schema, const char *name, rw_error *err) {
    char *txt = json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!txt) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    char *g = NULL;
    rw_status st = rw_schema_to_gbnf(txt, strlen(txt), name, -1, &g, err);
    free(txt);
    if (!st) puts_(b, g);
    free(g);
    return st;
}

/* An XML parameter value for a schema that allows a string: the text as
 * it is written between the tags (the parser keeps it a string), one of an
 * enum's or a const's strings, or any text without '<' or a newline (at
 * most maxLength bytes). 0: the schema allows no string (its value is JSON). */
static int xml_string_rule(buf *b, const char *vn, const json_t *s) {
    json_t *en = json_object_get(s, "enum"), *cn = json_object_get(s, "const"), *x;
    size_t i;
    if (json_is_string(cn)) {
        puts_(b, vn);
        puts_(b, " ::= ");
        lit(b, json_string_value(cn));
        puts_(b, "\n");
        return 1;
    }
    if (json_is_array(en) && json_array_size(en)) {
        json_array_foreach(en, i, x) if (!json_is_string(x)) return 0;
        puts_(b, vn);
        puts_(b, " ::= ");
        json_array_foreach(en, i, x) {
            if (i) puts_(b, " | ");
            lit(b, json_string_value(x));
        }
        puts_(b, "\n");
        return 1;
    }
    json_t *ty = json_object_get(s, "type");
    bool str = json_is_string(ty) && !strcmp(json_string_value(ty), "string");
    json_array_foreach(ty, i, x) if (json_is_string(x) && !strcmp(json_string_value(x), "string")) str = true;
    if (!str) return 0;
    json_t *ml = json_object_get(s, "maxLength");
    char rule[160];
    if (json_is_integer(ml) && json_integer_value(ml) >= 0 && json_integer_value(ml) <= 4096)
        snprintf(rule, sizeof rule, "%s ::= [^<\\n]{0,%lld}\n", vn, (long long)json_integer_value(ml));
    else snprintf(rule, sizeof rule, "%s ::= [^<\\n]*\n", vn);
    puts_(b, rule);
    return 1;
}

static bool required(const json_t *params, const char *key) {
    size_t q;
    json_t *r;
    json_array_foreach(json_object_get(params, "required"), q,
                       r) if (json_is_string(r) && !strcmp(json_string_value(r), key)) return true;
    return false;
}

/* LFM2's NAME(K=V, ...): the required properties in the schema's order, then
 * the optional ones, each optional; with none required, the first written
 * may be any of them (so no comma leads). */
static rw_status pythonic_rule(buf *b, const char *rn, const char *name, const json_t *params, int i, rw_error *err) {
    json_t *props = json_object_get(params, "properties"), *ps;
    const char *key;
    const char *keys[64];
    int n = 0, n_req = 0;
    for (int pass = 0; pass < 2; pass++) /* required first */
        json_object_foreach(props, key, ps) if (n < 64 && required(params, key) == (pass == 0)) {
            keys[n++] = key;
            n_req += pass == 0;
        }
    buf vals = {0};
    rw_status st = RW_OK;
    for (int k = 0; k < n && !st; k++) { /* p-K ::= "key=" value */
        char vn[64], pn[64];
        snprintf(vn, sizeof vn, "t%d-v%d", i, k);
        snprintf(pn, sizeof pn, "t%d-p%d", i, k);
        char kv[600];
        snprintf(kv, sizeof kv, "%.500s=", keys[k]);
        puts_(&vals, pn);
        puts_(&vals, " ::= ");
        lit(&vals, kv);
        put(&vals, " ", 1);
        puts_(&vals, vn);
        puts_(&vals, "\n");
        st = schema_rules(&vals, json_object_get(props, keys[k]), vn, err);
    }
    char head[600];
    snprintf(head, sizeof head, "%.500s(", name);
    puts_(b, rn);
    puts_(b, " ::= ");
    lit(b, head);
    char pn[64];
    if (n_req) {
        for (int k = 0; k < n; k++) {
            if (k < n_req) snprintf(pn, sizeof pn, " %st%d-p%d", k ? "\", \" " : "", i, k);
            else snprintf(pn, sizeof pn, " (\", \" t%d-p%d)?", i, k);
            puts_(b, pn);
        }
    } else if (n) { /* ( p0 (", " p1)? ... | p1 (", " p2)? ... | ... )? */
        puts_(b, " (");
        for (int first = 0; first < n; first++) {
            snprintf(pn, sizeof pn, "%s t%d-p%d", first ? " |" : "", i, first);
            puts_(b, pn);
            for (int k = first + 1; k < n; k++) {
                snprintf(pn, sizeof pn, " (\", \" t%d-p%d)?", i, k);
                puts_(b, pn);
            }
        }
        puts_(b, " )?");
    }
    puts_(b, " \")\"\n");
    if (vals.p) puts_(b, vals.p);
    if (vals.oom) b->oom = true;
    free(vals.p);
    return st;
}

/* Tool i's call rule "call-i" (and its helpers). */
static rw_status call_rule(buf *b, rw_tool_format f, const json_t *fn, int i, rw_error *err) {
    const char *name = json_string_value(json_object_get(fn, "name"));
    json_t *params = json_object_get(fn, "parameters");
    json_t *any = NULL;
    if (!json_is_object(params)) params = any = json_pack("{s:s}", "type", "object");
    char rn[48], head[600];
    rw_status st = RW_OK;
    if (f == RW_TOOL_FMT_QWEN_XML) {
        snprintf(rn, sizeof rn, "call-%d", i);
        puts_(b, rn);
        puts_(b, " ::= ");
        snprintf(head, sizeof head, "<tool_call>\n<function=%.500s>\n", name);
        lit(b, head);
        json_t *props = json_object_get(params, "properties"), *req = json_object_get(params, "required");
        const char *key;
        json_t *ps;
        int k = 0;
        buf vals = {0};
        json_object_foreach(props, key, ps) {
            bool required = false;
            size_t q;
            json_t *r;
            json_array_foreach(req, q, r) if (json_is_string(r) && !strcmp(json_string_value(r), key)) required = true;
            char vn[64];
            snprintf(vn, sizeof vn, "t%d-p%d", i, k++);
            char open[600];
            snprintf(open, sizeof open, "<parameter=%.500s>\n", key);
            puts_(b, " (");
            lit(b, open);
            put(b, " ", 1);
            puts_(b, vn);
            put(b, " ", 1);
            lit(b, "\n</parameter>\n");
            puts_(b, required ? ")" : ")?");
            if (!xml_string_rule(&vals, vn, ps) && (st = schema_rules(&vals, ps, vn, err))) break;
        }
        puts_(b, " ");
        lit(b, "</function>\n</tool_call>");
        puts_(b, "\n");
        if (vals.p) puts_(b, vals.p);
        if (vals.oom) b->oom = true;
        free(vals.p);
    } else if (f == RW_TOOL_FMT_LFM2) {
        snprintf(rn, sizeof rn, "call-%d", i);
        st = pythonic_rule(b, rn, name, params, i, err);
    } else {
        char an[48];
        snprintf(an, sizeof an, "t%d-args", i);
        snprintf(rn, sizeof rn, "call-%d", i);
        puts_(b, rn);
        puts_(b, " ::= ");
        const char *key = f == RW_TOOL_FMT_LLAMA3 ? "parameters" : "arguments";
        json_t *nj = json_string(name);
        char *nq = nj ? json_dumps(nj, JSON_ENCODE_ANY) : NULL;
        json_decref(nj);
        const bool hermes = f == RW_TOOL_FMT_HERMES || f == RW_TOOL_FMT_GENERIC;
        if (f == RW_TOOL_FMT_DEEPSEEK) snprintf(head, sizeof head, RW_CHAT_DS_CALL_BEGIN "function" RW_CHAT_DS_SEP "%.500s\n```json\n", name);
        else if (f == RW_TOOL_FMT_HARMONY)
            snprintf(head, sizeof head, "<|channel|>commentary to=functions.%.500s <|constrain|>json<|message|>", name);
        else
            snprintf(head, sizeof head, "%s{\"name\": %.500s, \"%s\": ", hermes ? "<tool_call>\n" : "",
                     nq ? nq : "\"\"", key);
        free(nq);
        lit(b, head);
        put(b, " ", 1);
        puts_(b, an);
        put(b, " ", 1);
        if (f != RW_TOOL_FMT_HARMONY) /* its body is the arguments alone */
            lit(b, hermes ? "}\n</tool_call>" : f == RW_TOOL_FMT_DEEPSEEK ? "\n```" RW_CHAT_DS_CALL_END : "}");
        puts_(b, "\n");
        st = schema_rules(b, params, an, err);
    }
    json_decref(any);
    return st;
}

rw_status rw_server__tool_grammar(rw_tool_format f, const char *tools_json, const char *only, bool parallel,
                                  bool reasoning, char **out, rw_error *err) {
    *out = NULL;
    if (f == RW_TOOL_FMT_NONE) return rw_errorf(err, RW_ERR_UNSUPPORTED, "forced tool calls need a tool format");
    json_error_t je;
    json_t *tools = tools_json ? json_loads(tools_json, 0, &je) : NULL;
    if (!json_is_array(tools) || !json_array_size(tools)) {
        json_decref(tools);
        return rw_errorf(err, RW_ERR_INVALID_ARG, "a forced tool call needs tools");
    }
    buf b = {0}, calls = {0};
    rw_status st = RW_OK;
    int n = 0;
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *fn = json_object_get(t, "function");
        if (!fn) fn = t;
        const char *name = json_string_value(json_object_get(fn, "name"));
        if (!name || (only && strcmp(name, only))) continue;
        if ((st = call_rule(&b, f, fn, (int)i, err))) break;
        char rn[48];
        snprintf(rn, sizeof rn, "%scall-%zu", n ? " | " : "", i);
        puts_(&calls, rn);
        n++;
    }
    json_decref(tools);
    if (!st && !n) st = rw_errorf(err, RW_ERR_INVALID_ARG, "tool_choice names \"%.100s\", which is not in tools", only);
    if (!st) {
        buf root = {0};
        puts_(&root, "call ::= ");
        puts_(&root, calls.p);
        puts_(&root, "\n");
        char r[256];
        const char *more = parallel ? " ( \", \" call ){0,7}" : "";
        if (f == RW_TOOL_FMT_GRANITE || f == RW_TOOL_FMT_MISTRAL)
            snprintf(r, sizeof r, "root ::= \"[\" call%s \"]\"\n", more);
        else if (f == RW_TOOL_FMT_NEMOTRON)
            snprintf(r, sizeof r, "root ::= \"<TOOLCALL>[\" call%s \"]</TOOLCALL>\"\n", more);
        else if (f == RW_TOOL_FMT_LFM2)
            snprintf(r, sizeof r, "root ::= \"<|tool_call_start|>[\" call%s \"]<|tool_call_end|>\"\n", more);
        else if (f == RW_TOOL_FMT_DEEPSEEK)
            snprintf(r, sizeof r, "root ::= \"%s\" call%s \"%s\"\n", RW_CHAT_DS_CALLS_BEGIN, parallel ? " ( \"\\n\" call ){0,7}" : "",
                     RW_CHAT_DS_CALLS_END);
        else if (f == RW_TOOL_FMT_HARMONY && !reasoning) snprintf(r, sizeof r, "root ::= call\n");
        else if (f == RW_TOOL_FMT_HARMONY) /* reasoning: any text without a marker (they start "<|") */
            snprintf(r, sizeof r,
                     "root ::= ( \"<|channel|>analysis<|message|>\" reasoning \"<|end|><|start|>assistant\" )? call\n"
                     "reasoning ::= ( [^<] | \"<\" [^|] )*\n");
        else snprintf(r, sizeof r, "root ::= call%s\n", parallel ? " ( \"\\n\" call ){0,7}" : "");
        puts_(&root, r);
        puts_(&root, b.p ? b.p : "");
        if (root.oom || b.oom || calls.oom) st = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        else *out = root.p;
        if (st) free(root.p);
    }
    free(b.p);
    free(calls.p);
    return st;
}
