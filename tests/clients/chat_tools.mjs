// chat_tools.mjs - the real `openai` client's chat completions with tools
// against a running `rewind serve` (started by tests/server/test_clients_chat.sh
// once per chat template): a request with tools (auto), the two-turn tool
// loop exactly as the SDK's users write it (the assistant message with
// tool_calls as the SDK returned it / as agents rebuild it, then the tool
// result), streamed with the SDK's own stream helper and raw chunks, extra
// fields a UI sends, reasoning fields where the template thinks, forced
// calls (required, named) whole and streamed and the loop after them.
// Usage: REWIND_URL=http://127.0.0.1:PORT REWIND_THINKS=0|1 node chat_tools.mjs
import assert from "node:assert/strict";
import OpenAI from "openai";

const client = new OpenAI({ baseURL: `${process.env.REWIND_URL}/v1`, apiKey: "none", maxRetries: 0 });
const thinks = process.env.REWIND_THINKS === "1";
const model = "rewind";
const tools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "The weather of a city",
      parameters: { type: "object", properties: { city: { type: "string", maxLength: 12 } }, required: ["city"] },
    },
  },
];
const base = { model, max_tokens: 6, temperature: 0 };

function checkMessage(m) {
  assert.equal(m.role, "assistant");
  // content is a string, or null when the turn is only tool calls
  assert.ok(typeof m.content === "string" || (m.content === null && m.tool_calls?.length > 0), JSON.stringify(m));
  for (const c of m.tool_calls ?? []) {
    assert.equal(c.type, "function");
    assert.equal(typeof c.id, "string");
    JSON.parse(c.function.arguments); // arguments are JSON text
  }
  if (thinks) assert.equal(typeof m.reasoning_content, "string", JSON.stringify(m));
}

// turn 1: a question with tools
const first = await client.chat.completions.create({
  ...base,
  messages: [
    { role: "developer", content: "You are terse." },
    { role: "user", content: "What is the weather in Paris?" },
  ],
  tools,
  tool_choice: "auto",
  parallel_tool_calls: true,
});
checkMessage(first.choices[0].message);
assert.ok(["stop", "length", "tool_calls"].includes(first.choices[0].finish_reason));

// turn 2: the call as the SDK hands it back, the tool's result
const history = [
  { role: "developer", content: "You are terse." },
  { role: "user", content: "What is the weather in Paris?" },
  {
    role: "assistant",
    content: null,
    tool_calls: [
      { id: "call_abc123", type: "function", function: { name: "get_weather", arguments: JSON.stringify({ city: "Paris" }) } },
    ],
  },
  { role: "tool", tool_call_id: "call_abc123", content: JSON.stringify({ temp_c: 21, sky: "clear" }) },
];
const second = await client.chat.completions.create({ ...base, messages: history, tools });
checkMessage(second.choices[0].message);
assert.ok(second.usage.prompt_tokens > first.usage.prompt_tokens);
// the follow-up shares its start with turn 1: served by the prefix cache
assert.ok(second.usage.prompt_tokens_details.cached_tokens > 0, JSON.stringify(second.usage));

// turn 3: the model's reply appended as returned, a new question
const third = await client.chat.completions.create({
  ...base,
  messages: [...history, second.choices[0].message, { role: "user", content: "And in Rome?" }],
  tools,
});
checkMessage(third.choices[0].message);

// streamed, with the SDK's helper: its final message is the deltas put together
const stream = client.chat.completions.stream({ ...base, messages: history, tools, stream_options: { include_usage: true } });
let deltas = "";
let reasoning = "";
for await (const chunk of stream) {
  const d = chunk.choices[0]?.delta;
  if (d?.content) deltas += d.content;
  if (d?.reasoning_content) reasoning += d.reasoning_content;
}
const final = await stream.finalChatCompletion();
assert.equal(final.choices[0].message.content ?? "", deltas);
assert.equal(final.choices[0].message.content ?? "", second.choices[0].message.content ?? "");
if (thinks) assert.equal(reasoning, second.choices[0].message.reasoning_content);

// raw chunks: role first, finish_reason last, usage at the end
const raw = await client.chat.completions.create({ ...base, messages: history, tools, stream: true, stream_options: { include_usage: true } });
const chunks = [];
for await (const c of raw) chunks.push(c);
assert.equal(chunks[0].choices[0].delta.role, "assistant");
const fin = chunks.filter((c) => c.choices[0]?.finish_reason);
assert.equal(fin.length, 1);
assert.ok(chunks.at(-1).usage.prompt_tokens > 0);

// fields a UI sends that we do not use are ignored (a 200), and
// chat_template_kwargs / reasoning_effort are accepted
const extra = await client.chat.completions.create({
  ...base,
  messages: [{ role: "user", content: "hi" }],
  // @ts-ignore extras outside the SDK's types
  cache_prompt: true,
  chat_template_kwargs: { enable_thinking: false },
  reasoning_effort: "low",
});
checkMessage({ ...extra.choices[0].message, reasoning_content: thinks ? extra.choices[0].message.reasoning_content ?? "" : undefined });

// forced calls (tool_choice "required" and a named function): a grammar over
// the model's own call format, so even a random model answers with a call
// whose arguments fit the schema; then the loop goes on with its result
for (const tool_choice of ["required", { type: "function", function: { name: "get_weather" } }]) {
  const q = [{ role: "user", content: "Weather in Paris?" }];
  const forced = await client.chat.completions.create({
    ...base, max_tokens: 300, messages: q, tools, tool_choice, parallel_tool_calls: false,
  });
  const m = forced.choices[0].message;
  assert.equal(forced.choices[0].finish_reason, "tool_calls", JSON.stringify(forced.choices[0]));
  assert.equal(m.tool_calls.length, 1);
  assert.equal(m.tool_calls[0].function.name, "get_weather");
  const args = JSON.parse(m.tool_calls[0].function.arguments);
  assert.equal(typeof args.city, "string");
  assert.ok(args.city.length <= 12);
  // streamed with the SDK's helper: the call put together from its deltas
  const st = client.chat.completions.stream({
    ...base, max_tokens: 300, messages: q, tools, tool_choice, parallel_tool_calls: false,
  });
  const done = await st.finalChatCompletion();
  assert.deepEqual(done.choices[0].message.tool_calls.map((c) => [c.function.name, c.function.arguments]),
    m.tool_calls.map((c) => [c.function.name, c.function.arguments]));
  // the tool loop: the message as the SDK returned it, then the result
  const next = await client.chat.completions.create({
    ...base,
    messages: [...q, m, { role: "tool", tool_call_id: m.tool_calls[0].id, content: "sunny" }],
    tools,
  });
  checkMessage(next.choices[0].message);
  assert.ok(next.usage.prompt_tokens_details.cached_tokens > 0);
}

// our 400s reach the SDK as its BadRequestError
await assert.rejects(
  client.chat.completions.create({ ...base, messages: [{ role: "wizard", content: "x" }] }),
  (e) => e instanceof OpenAI.BadRequestError && /role/.test(e.message),
);
console.log("ok");
