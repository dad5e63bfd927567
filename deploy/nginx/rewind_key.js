/* rewind_key.js - the routing key of a request to rewind replicas behind
 * nginx (njs, Debian's libnginx-mod-http-js; docs/scale-out.md).
 *
 * nginx.conf.in hashes this key onto a consistent-hash ring
 * (`hash $rewind_key consistent`), so requests with the same key reach the
 * same replica, whose prefix cache holds their prompt. The key, in order:
 *   1. the X-Session-Id header (an explicit conversation id);
 *   2. the request's user (`user`; Anthropic's `metadata.user_id`);
 *   3. /v1/responses with previous_response_id "resp_" + 16 hex digits + ...:
 *      those 16 digits, the key of the chain's root (the server names its
 *      responses so; docs/scale-out.md, "Response chains");
 *   4. a digest of the model and the first K bytes (K = $rewind_key_bytes,
 *      default 1024) of what starts the rendered prompt: the system prompt
 *      and the first user message (chat, Anthropic messages, responses'
 *      instructions + input), or the prompt (completions).
 * Every turn of a chat conversation repeats its system prompt and first
 * user message, so its turns share the key; conversations that share a
 * system prompt longer than K bytes share it too (one replica holds that
 * prefix once). Requests without a JSON body (GET /metrics, /v1/models)
 * get $request_id, i.e. spread at random.
 *
 * The key is 16 hex digits (the first 64 bits of a SHA-1). Which rule gave it
 * is put in $rewind_key_source (session, user, chain, prompt, none) for the
 * access log and the X-Rewind-Route-Source header. */
var crypto = require('crypto');

function digest(prefix, data) {
    return crypto.createHash('sha1').update(prefix).update(data).digest('hex').substring(0, 16);
}

/* The text of a message content: a string, or an array of parts whose text
 * is in .text (OpenAI text / input_text parts, Anthropic text blocks). */
function text(c) {
    if (typeof c === 'string') return c;
    var s = '';
    if (Array.isArray(c)) {
        for (var i = 0; i < c.length; i++) {
            var p = c[i];
            if (typeof p === 'string') s += p;
            else if (p && typeof p.text === 'string') s += p.text;
        }
    }
    return s;
}

/* System-like messages up to the first user message, then that message:
 * the part of a conversation that every later turn repeats. */
function head_of(messages, system) {
    var out = system || '';
    if (!Array.isArray(messages)) return typeof messages === 'string' ? out + '\u0000' + messages : out;
    for (var i = 0; i < messages.length; i++) {
        var m = messages[i];
        if (!m || typeof m !== 'object') continue;
        var role = m.role || (m.type === 'message' ? 'user' : '');
        if (role === 'system' || role === 'developer') out += text(m.content) + '\u0000';
        else if (role === 'user') return out + '\u0000' + text(m.content);
    }
    return out;
}

/* What starts the rendered prompt, by endpoint; null if nothing to go by. */
function prompt_head(uri, b) {
    if (uri.indexOf('/chat/completions') >= 0) return head_of(b.messages, '');
    if (uri.indexOf('/messages') >= 0) return head_of(b.messages, text(b.system) + '\u0000');
    if (uri.indexOf('/responses') >= 0) return head_of(b.input, text(b.instructions) + '\u0000');
    if (uri.indexOf('/completions') >= 0) {
        var p = b.prompt;
        if (Array.isArray(p) && p.length && typeof p[0] !== 'number') p = p[0]; /* a batch: its first prompt */
        if (Array.isArray(p)) return p.join(','); /* token ids */
        if (typeof p === 'string') return p;
    }
    return null;
}

function key(r) {
    var sid = r.headersIn['X-Session-Id'];
    if (sid) {
        r.variables.rewind_key_source = 'session';
        return digest('s\u0000', sid);
    }
    var b = null;
    try {
        if (r.requestText) b = JSON.parse(r.requestText);
    } catch (e) {
        b = null; /* not JSON: the replica will answer 400; any replica does */
    }
    if (!b || typeof b !== 'object') {
        r.variables.rewind_key_source = 'none';
        return r.variables.request_id;
    }
    var user = typeof b.user === 'string' && b.user ? b.user
             : b.metadata && typeof b.metadata.user_id === 'string' ? b.metadata.user_id : '';
    if (user) {
        r.variables.rewind_key_source = 'user';
        return digest('u\u0000', user);
    }
    var prev = b.previous_response_id;
    if (typeof prev === 'string' && /^resp_[0-9a-f]{16}/.test(prev)) {
        r.variables.rewind_key_source = 'chain';
        return prev.substring(5, 21);
    }
    var head = prompt_head(r.uri, b);
    if (head === null) {
        r.variables.rewind_key_source = 'none';
        return r.variables.request_id;
    }
    var k = parseInt(r.variables.rewind_key_bytes, 10);
    if (!(k > 0)) k = 1024;
    var model = typeof b.model === 'string' ? b.model : '';
    r.variables.rewind_key_source = 'prompt';
    return digest('p\u0000' + model + '\u0000', Buffer.from(head).subarray(0, k));
}

export default {key};
