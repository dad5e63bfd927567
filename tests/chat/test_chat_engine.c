/* test_chat_engine.c - the Jinja interpreter piece by piece: whitespace
 * control, expressions, Python spellings, scoping, filters, tests, methods,
 * errors and limits. */
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "harness.h"

/* Renders src with messages (JSON) and returns the output or "ERROR: msg". */
static char *render(const char *src, const char *messages) {
    static char buf[1 << 16];
    rw_chat_template *t;
    rw_error err = {0};
    if (rw_chat_template_parse(src, strlen(src), &t, &err) != RW_OK) {
        snprintf(buf, sizeof buf, "ERROR: %s", err.msg);
        return buf;
    }
    rw_chat_render_opts o = {.messages_json = messages ? messages : "[]", .enable_thinking = -1, .bos_token = "<s>",
                             .now = "2025-03-14T09:26:53"};
    char *out;
    size_t len;
    if (rw_chat_template_render(t, &o, &out, &len, &err) != RW_OK) snprintf(buf, sizeof buf, "ERROR: %s", err.msg);
    else {
        snprintf(buf, sizeof buf, "%s", out);
        free(out);
    }
    rw_chat_template_free(t);
    return buf;
}

#define EXPECT(src, msgs, want)                                                                          \
    do {                                                                                                 \
        const char *got_ = render(src, msgs);                                                            \
        CHECK_MSG(!strcmp(got_, want), "template %s\n    got  [%s]\n    want [%s]", #src, got_, want); \
    } while (0)

static void expect_error(const char *src, const char *fragment) {
    const char *got = render(src, NULL);
    CHECK_MSG(!strncmp(got, "ERROR: ", 7) && strstr(got, fragment), "template %s: got [%s], want an error with [%s]", src,
              got, fragment);
}

int main(void) {
    /* whitespace control, trim_blocks, lstrip_blocks, trailing newline */
    EXPECT("a  {{- 'b' -}}  c", NULL, "abc");
    EXPECT("{% if true %}\nx\n{% endif %}\n", NULL, "x\n");
    EXPECT("  {% if true %}y{% endif %}", NULL, "y");
    EXPECT("  {{ 'z' }}", NULL, "  z");
    EXPECT("a{# comment #}\nb", NULL, "ab");
    EXPECT("{%- set x = 1 %}  {{ x }}", NULL, "  1");

    /* +%} and +#} keep the newline trim_blocks would remove; raw blocks */
    EXPECT("{% if true +%}\nA{% endif %}|{# c +#}\nB", NULL, "\nA|\nB");
    EXPECT("{% raw %}\nA{{ x }}{% if %}\n  {% endraw %}\nB|{% raw -%}  C  {%- endraw %}", NULL, "\nA{{ x }}{% if %}\nB|C");
    expect_error("{% raw %}abc", "endraw");

    /* values print as Python prints them */
    EXPECT("{{ true }} {{ none }} {{ 2 }} {{ 2.0 }} {{ 0.1 + 0.2 }} {{ [1, 'a'] }} {{ {'k': none} }}", NULL,
           "True None 2 2.0 0.30000000000000004 [1, 'a'] {'k': None}");
    EXPECT("{{ 1e20 }} {{ 1.5e-7 }} {{ -3 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }}", NULL, "1e+20 1.5e-07 -2 2 3.5 1024");
    EXPECT("{{ \"it's\" ~ 1 ~ none }}", NULL, "it's1None");
    EXPECT("{{ [\"it's\"] }}", NULL, "[\"it's\"]");

    /* repr() escapes what Python's str.isprintable() rejects; json.dumps only controls below 0x20 */
    EXPECT("{{ ['a\xc2\xa0" "b', 'z\xe2\x80\x8b" "w', 'c\x01', 'd\x7f', '\xf0\x9f\x98\x80', 'e\xcc\x81', 'tab\t'] }}", NULL,
           "['a\\xa0" "b', 'z\\u200b" "w', 'c\\x01', 'd\\x7f', '\xf0\x9f\x98\x80', 'e\xcc\x81', 'tab\\t']");
    EXPECT("{{ ['x\x7f" "y', 'c\x01'] | tojson }}", NULL, "[\"x\x7f" "y\", \"c\\u0001\"]");
    /* \r\n and lone \r in the source are read as \n, as Jinja's lexer does */
    EXPECT("a\r\nb\rc{{ 'x\r\ny' | length }}\r\n", NULL, "a\nb\nc3");

    /* Jinja's precedence: ~ binds tighter than + and -, unary minus before filters; chained comparisons */
    EXPECT("{{ 1 + 2 ~ 3 if false else 'x' ~ 2 * 3 }}|{{ -3 | abs }}|{{ -'ab' | length if false else 1 }}", NULL, "x6|3|1");
    expect_error("{{ 1 + 2 ~ 3 }}", "unsupported operand");
    EXPECT("{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ 1 == 1 in [True] }}{{ '' == 1 < [] }}", NULL, "TrueFalseTrueFalse");
    EXPECT("{{ 2 is in [1, 2] }}{{ 'k' is in {'k': 1} }}{{ 6 is divisibleby 3 }}", NULL, "TrueTrueTrue");

    /* filters over any iterable, type errors where Python raises them */
    EXPECT("{{ 'abc' | join('-') }}|{{ {'x': 1, 'y': 2} | join }}|{{ [3, 1.5, 2] | sum }}|{{ ['b', 'A', 'c'] | max }}|{{ [] | min }}|"
           "{{ [{'n': 2}, {'n': 5}] | max(attribute='n') }}|{{ 'ab' | first }}|{{ ns is defined }}|{{ [nothing] }}",
           NULL, "a-b-c|xy|6.5|c||{'n': 5}|a|False|[Undefined]");
    expect_error("{{ 5 | length }}", "len()");
    expect_error("{{ none | join }}", "not iterable");
    expect_error("{{ [1] | abs }}", "abs()");
    expect_error("{{ true[1:] }}", "sliced");
    expect_error("{{ 'a' is odd }}", "integers");
    EXPECT("{{ '\n' is lower }}{{ 'ab1' is lower }}{{ 'Ab' is upper }}", NULL, "FalseTrueFalse");

    EXPECT("{{ 'ab'.center(7, '*') }}|{{ 'a\nb\r\nc'.splitlines() }}|{{ ['b', 'A', 'c'] | sort }}|"
           "{{ [{'n': 2}, {'n': 1}] | sort(attribute='n', reverse=true) | map(attribute='n') | join }}|"
           "{{ 2.5 | round }}{{ 2.345 | round(2) }}{{ 1234 | round(-2) }}|{{ 3 is ge 3 }}", NULL,
           "***ab**|['a', 'b', 'c']|['A', 'b', 'c']|21|2.02.351200|True");
    expect_error("{{ 'x'.nosuch() }}", "nosuch");
    /* 64-bit integers: overflow is a clear error (Python would grow the number), never undefined behaviour */
    expect_error("{{ 9223372036854775807 + 1 }}", "overflow");
    expect_error("{{ 2 ** 64 }}", "overflow");
    expect_error("{{ (-9223372036854775807 - 1) // -1 }}", "overflow");
    expect_error("{{ -(-9223372036854775807 - 1) }}", "overflow");
    expect_error("{{ 1e300 | int }}", "range");
    EXPECT("{{ 2 ** 62 }} {{ (-2) ** 63 }} {{ 'abc'[2::9223372036854775807] }} {{ 7 % -1 }}", NULL,
           "4611686018427387904 -9223372036854775808 c 0");

    /* tuples: a list that prints as Python prints a tuple */
    EXPECT("{{ (1, 2) }}{{ (1,) }}{{ () }}{{ (1, 2) | list }}{{ (1, 2) == [1, 2] }}{{ (1, 2)[1:] }}{{ (1, 2) + (3,) }}"
           "{{ {'a': 1} | items | list }}{{ (1, 2) | tojson }}", NULL,
           "(1, 2)(1,)()[1, 2]False(2,)(1, 2, 3)[('a', 1)][1, 2]");
    /* a filter or test named by a value that is a slice of a longer string */
    EXPECT("{{ [1, 2] | select('odd,x'.split(',')[0]) | list }}", NULL, "[1]");

    /* tojson takes json.dumps's arguments (transformers' order: ensure_ascii, indent, separators, sort_keys) */
    EXPECT("{{ {'b': 1, 'a': [1, 2]} | tojson(sort_keys=true) }}{{ {'b': 1, 'a': [1, 2]} | tojson(separators=(',', ':')) }}"
           "{{ '\xc3\xa9\xf0\x9f\x98\x80' | tojson(ensure_ascii=true) }}{{ {true: 1, none: 2, 1.5: 3} | tojson }}", NULL,
           "{\"a\": [1, 2], \"b\": 1}{\"b\":1,\"a\":[1,2]}\"\\u00e9\\ud83d\\ude00\"{\"true\": 1, \"null\": 2, \"1.5\": 3}");
    expect_error("{{ namespace(a=1) | tojson }}", "not JSON serializable");
    /* indent as Jinja 3.1: empty lines stay empty unless blank, a string width is the indentation */
    EXPECT("{{ 'a\nb\n\nc\n' | indent(2) }}|{{ 'a\nb' | indent(2, true) }}|{{ 'a\n\nb' | indent(2, blank=true) }}|"
           "{{ 'a\nb' | indent('> ') }}", NULL, "a\n  b\n\n  c\n|  a\n  b|a\n  \n  b|a\n> b");

    /* select/map/items/unique give generators in Jinja: always true, no len(), no index, not JSON */
    EXPECT("{{ 'yes' if [] | select('odd') else 'no' }}|{{ [1, 2] | map('string') | join(',') }}|{{ [3, 1] | reverse | first }}|"
           "{{ [1] | select is sequence }}{{ [1] | select is iterable }}|{{ ([1, 2] | select('odd'))[0] }}|"
           "{% for x in [1, 2, 3] | reject('odd') %}{{ x }}{% endfor %}|{{ [1, 1] | unique | list }}|{{ not {} | items }}",
           NULL, "yes|1,2|1|FalseTrue||2|[1]|False");
    expect_error("{{ [1] | select | length }}", "len()");
    expect_error("{{ [1] | map('string') | tojson }}", "not JSON serializable");

    /* and/or return operands; truthiness */
    EXPECT("{{ '' or 'x' }} {{ 'a' and 'b' }} {{ [] or {} }} {{ not none }}", NULL, "x b {} True");
    EXPECT("{{ 'yes' if [] else 'no' }} {{ 'yes' if 'a' }}", NULL, "no yes");

    /* messages, attribute vs item access, undefined */
    const char *m = "[{\"role\":\"user\",\"content\":\"Hi\",\"n\":null}]";
    EXPECT("{{ messages[0].role }}|{{ messages[0]['content'] }}|{{ messages[0].missing }}|{{ messages[-1].n }}", m, "user|Hi||None");
    EXPECT("{{ messages[0].missing is defined }} {{ messages[0].n is none }} {{ messages[0].n is defined }}", m,
           "False True True");
    EXPECT("{{ foo is undefined }} {{ foo | default('d') }} {{ '' | default('d', true) }}", NULL, "True d d");

    /* loops: loop variables, filters, else, unpacking, scoping */
    EXPECT("{% for x in [1,2,3] %}{{ loop.index0 }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}", NULL, "01,12,23");
    EXPECT("{% for x in [1,2,3,4] if x is even %}{{ x }}{{ loop.length }}{% endfor %}", NULL, "2242");
    EXPECT("{% for x in [] %}a{% else %}empty{% endfor %}", NULL, "empty");
    EXPECT("{% for k, v in {'a': 1, 'b': 2} | items %}{{ k }}={{ v }};{% endfor %}", NULL, "a=1;b=2;");
    EXPECT("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}", NULL, "1");
    EXPECT("{% set ns = namespace(x=1) %}{% for i in [1] %}{% set ns.x = 2 %}{% endfor %}{{ ns.x }}", NULL, "2");
    EXPECT("{% for x in [1,2,3] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 3 %}{% break %}{% endif %}{{ x }}{% endfor %}",
           NULL, "1");
    EXPECT("{% for x in [1,2] %}{{ loop.previtem is defined }}{{ loop.nextitem }}{% endfor %}", NULL, "False2True");

    EXPECT("{% for x in 'abc' %}{{ loop.cycle('o', 'e') }}{{ loop.depth }}{{ loop.depth0 }}{% endfor %}|{{ '\\101\\x42\\u00e9' }}", NULL,
           "o10e10o10|AB\xc3\xa9");

    /* macros: defaults, keyword args, recursion, value use */
    EXPECT("{% macro f(a, b='B') %}[{{ a }}{{ b }}]{% endmacro %}{{ f(1) }}{{ f(2, b='c') }}{{ f(3)|length }}", NULL,
           "[1B][2c]4");
    EXPECT("{% macro r(n) %}{% if n > 0 %}{{ n }}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(3) }}", NULL, "321");
    /* a macro sees the names of the scope it was defined in (a loop body, another macro), not its caller's */
    EXPECT("{% for i in [1, 2] %}{% macro inner() %}{{ i }}{% endmacro %}{{ inner() }}{% endfor %}|"
           "{% macro outer(a) %}{% macro inner() %}{{ a }}{% endmacro %}{{ inner() }}{% endmacro %}{{ outer(7) }}|"
           "{% macro m() %}{{ y }}{% endmacro %}{% for y in [5] %}{{ m() }}{% endfor %}", NULL, "12|7|");

    /* filters */
    EXPECT("{{ {'b': [1, 2], 'a': 'x\"y'} | tojson }}", NULL, "{\"b\": [1, 2], \"a\": \"x\\\"y\"}");
    EXPECT("{{ {'a': [1], 'b': {}} | tojson(indent=2) }}", NULL, "{\n  \"a\": [\n    1\n  ],\n  \"b\": {}\n}");
    EXPECT("{{ '\xc3\xa9<&>' | tojson }}", NULL, "\"\xc3\xa9<&>\"");
    EXPECT("{{ '  a b \xc2\xa0' | trim }}|{{ 'h\xc3\xa9' | length }}|{{ [1,2] | join('-') }}|{{ 'ab' | upper }}", NULL,
           "a b|2|1-2|AB");
    EXPECT("{{ [{'r':'a'},{'r':'b'}] | selectattr('r', 'equalto', 'b') | list | length }}", NULL, "1");
    EXPECT("{{ [1,2,3] | reject('equalto', 2) | list }}{{ [3,1] | first }}{{ [3,1] | last }}", NULL, "[1, 3]31");
    EXPECT("{{ 5 | string ~ 'x' }}{{ 'Abc' | lower }}{{ '3' | int + 1 }}", NULL, "5xabc4");

    /* tests */
    EXPECT("{{ 'a' is string }}{{ {} is mapping }}{{ 'a' is iterable }}{{ false is false }}{{ 0 is false }}", NULL,
           "TrueTrueTrueTrueFalse");

    /* string methods and slicing */
    EXPECT("{{ 'a,b,,c'.split(',') }}{{ ' x '.strip() }}{{ 'xxhixx'.strip('x') }}{{ 'abc'.startswith('ab') }}", NULL,
           "['a', 'b', '', 'c']xhiTrue");
    EXPECT("{{ 'hello'[1:3] }}{{ 'hello'[::-1] }}{{ [1,2,3][-1] }}{{ [1,2,3][:-1] }}{{ 'h\xc3\xa9llo'[1] }}", NULL,
           "elolleh3[1, 2]\xc3\xa9");
    EXPECT("{{ 'a<think>b</think>c'.split('</think>')[-1] }}{{ 'x'.replace('x', 'yy') }}", NULL, "cyy");
    EXPECT("{{ {'a': 1}.items() | list }}{{ {'a': 1}.get('b', 7) }}", NULL, "[('a', 1)]7");

    /* globals */
    EXPECT("{{ strftime_now('%d %b %Y') }}|{{ range(3) | list }}|{{ bos_token }}", NULL, "14 Mar 2025|[0, 1, 2]|<s>");

    /* errors: raise_exception, type errors, syntax errors, sandbox, limits */
    expect_error("{{ raise_exception('No system role') }}", "No system role");
    expect_error("{{ 'a' + none }}", "unsupported operand");
    expect_error("{% if x %}", "missing");
    expect_error("{{ 1 + }}", "unexpected token");
    expect_error("{% frobnicate %}", "unknown");
    expect_error("{{ [1].append(2) }}", "immutable");
    expect_error("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "too deeply");
    expect_error("{% set r = range(8000) %}{% for i in r %}{% for j in r %}{% endfor %}{% endfor %}", "steps");
    expect_error("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}"
                 "{% endfor %}{{ ns.s }}", "MiB");
    expect_error("{{ 'unterminated }}", "unterminated");
    /* a very long elif chain is walked without recursion; deep statement nesting inside recursive macros stops at
     * the depth limit */
    {
        size_t n_elif = 50000, cap = 64 + n_elif * 17;
        char *src = malloc(cap);
        CHECK(src != NULL);
        if (src) {
            size_t n = (size_t)snprintf(src, cap, "{%% if false %%}a");
            for (size_t i = 0; i < n_elif; i++) n += (size_t)snprintf(src + n, cap - n, "{%% elif false %%}b");
            snprintf(src + n, cap - n, "{%% else %%}E{%% endif %%}");
            EXPECT(src, NULL, "E");
            free(src);
        }
        char deep[8192];
        size_t n = (size_t)snprintf(deep, sizeof deep, "{%% macro r(n) %%}");
        for (int i = 0; i < 150; i++) n += (size_t)snprintf(deep + n, sizeof deep - n, "{%% if true %%}");
        n += (size_t)snprintf(deep + n, sizeof deep - n, "{{ r(n + 1) }}");
        for (int i = 0; i < 150; i++) n += (size_t)snprintf(deep + n, sizeof deep - n, "{%% endif %%}");
        snprintf(deep + n, sizeof deep - n, "{%% endmacro %%}{{ r(0) }}");
        expect_error(deep, "too deeply");
    }
    /* values nested without end: a clear error, not a stack overflow in equality, repr or tojson */
    expect_error("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}"
                 "{{ ns.x == ns.x }}", "nested too deeply");
    expect_error("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", "nested too deeply");
    EXPECT("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns == ns.me }}{{ [ns] == [ns.me] }}", NULL, "TrueTrue");
    /* attribute or item access on an undefined value fails, as Jinja's default Undefined does */
    expect_error("{{ nothing.attr }}", "'nothing' is undefined");
    expect_error("{{ messages[5].role }}", "undefined");
    expect_error("{{ {}.a.b is defined }}", "'a' is undefined");
    expect_error("{% for k, v in 'ab' | items %}{% endfor %}", "mapping");
    EXPECT("{{ ({}.a) is defined }}|{{ [][0] }}|{{ nothing | items | list }}", NULL, "False||[]");
    {
        char deep[2000];
        size_t n = 0;
        n += (size_t)snprintf(deep + n, sizeof deep - n, "{{ ");
        for (int i = 0; i < 400; i++) deep[n++] = '(';
        deep[n++] = '1';
        for (int i = 0; i < 400; i++) deep[n++] = ')';
        snprintf(deep + n, sizeof deep - n, " }}");
        expect_error(deep, "deeply");
    }
    CHECK(!strncmp(render("x", "not json"), "ERROR: messages: invalid JSON", 29));

    /* the template keeps its own copy of the source: the caller may free it right after parsing */
    {
        const char *text = "A{% for m in messages %}[{{ m.role }}]{% endfor %}\n  {%- if true %} B{% endif %}";
        char *src = strdup(text);
        rw_chat_template *t = NULL;
        rw_error err = {0};
        CHECK(src && rw_chat_template_parse(src, strlen(src), &t, &err) == RW_OK);
        memset(src, '#', strlen(src));
        free(src);
        rw_chat_render_opts o = {.messages_json = "[{\"role\":\"user\"}]", .enable_thinking = -1};
        char *out = NULL;
        size_t len = 0;
        CHECK(t && rw_chat_template_render(t, &o, &out, &len, &err) == RW_OK);
        CHECK_MSG(out && !strcmp(out, "A[user] B"), "got [%s]", out ? out : "(null)");
        free(out);
        rw_chat_template_free(t);
    }
    return rw_test_done();
}
