// agent_apis.mjs - the real `openai` and `@anthropic-ai/sdk` clients against
// a running `rewind serve` (started by tests/server/test_clients_node.sh):
// Responses with a function call in the history and previous_response_id,
// streamed and not; Messages with tool_use / tool_result blocks, streamed
// and not, count_tokens; each SDK's own error classes for our errors;
// forced calls (required / any / named) whole and streamed, and the loop
// after them; legacy completions with a list of prompts, base URL without /v1.
// Usage: REWIND_URL=http://127.0.0.1:PORT REWIND_KEY=KEY node agent_apis.mjs
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";

const url = process.env.REWIND_URL;
const key = process.env.REWIND_KEY;
const model = "rewind";
// (the city an enum: a random-weight model's free string in a forced call
// may not end within the token limit)
const weatherSchema = {
  type: "object",
  properties: { city: { type: "string", enum: ["Paris", "Oslo"] } },
  required: ["city"],
};

async function responses() {
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0 });
  const first = await client.responses.create({
    model,
    instructions: "Be brief.",
    input: "What is the weather in Paris?",
    max_output_tokens: 8,
    temperature: 0,
  });
  assert.match(first.id, /^resp_/);
  assert.ok(["completed", "incomplete"].includes(first.status), first.status);
  assert.equal(typeof first.output_text, "string");
  assert.ok(first.usage.input_tokens > 0);

  // the turn an agent sends after running the tool: the call and its output
  const tools = [{ type: "function", name: "get_weather", parameters: weatherSchema, strict: false }];
  const second = await client.responses.create({
    model,
    instructions: "Be brief.",
    previous_response_id: first.id,
    input: [
      { type: "function_call", call_id: "call_1", name: "get_weather", arguments: JSON.stringify({ city: "Paris" }) },
      { type: "function_call_output", call_id: "call_1", output: JSON.stringify({ sky: "sunny" }) },
    ],
    tools,
    tool_choice: "auto",
    max_output_tokens: 8,
    temperature: 0,
  });
  assert.equal(second.previous_response_id, first.id);
  assert.ok(second.usage.input_tokens > first.usage.input_tokens);
  // the first turn's prompt is served by the prefix cache
  assert.ok(second.usage.input_tokens_details.cached_tokens >= first.usage.input_tokens,
    JSON.stringify(second.usage));

  // streamed: the SDK's own accumulation equals the deltas, and the final
  // response the non-streamed one
  const stream = client.responses.stream({
    model,
    instructions: "Be brief.",
    previous_response_id: first.id,
    input: [
      { type: "function_call", call_id: "call_1", name: "get_weather", arguments: JSON.stringify({ city: "Paris" }) },
      { type: "function_call_output", call_id: "call_1", output: JSON.stringify({ sky: "sunny" }) },
    ],
    tools,
    max_output_tokens: 8,
    temperature: 0,
  });
  let deltas = "";
  const types = [];
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === "response.output_text.delta") deltas += ev.delta;
  }
  const final = await stream.finalResponse();
  assert.equal(types[0], "response.created");
  assert.ok(["response.completed", "response.incomplete"].includes(types.at(-1)), types.at(-1));
  // (the SDK sets output_text on created responses, not on a stream's final one)
  const finalText = final.output.filter((o) => o.type === "message")
    .flatMap((o) => o.content).filter((c) => c.type === "output_text").map((c) => c.text).join("");
  assert.equal(finalText, deltas);
  assert.equal(finalText, second.output_text);

  const again = await client.responses.retrieve(second.id);
  assert.equal(again.id, second.id);

  await assert.rejects(
    client.responses.create({ model, input: "x", previous_response_id: "resp_missing" }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400,
  );
}

async function messages() {
  const client = new Anthropic({ baseURL: url, apiKey: key, maxRetries: 0 });
  const tools = [{ name: "get_weather", description: "Weather of a city", input_schema: weatherSchema }];
  const history = [
    { role: "user", content: "What is the weather in Paris?" },
    {
      role: "assistant",
      content: [
        { type: "text", text: "Let me check." },
        { type: "tool_use", id: "toolu_01", name: "get_weather", input: { city: "Paris" } },
      ],
    },
    {
      role: "user",
      content: [{ type: "tool_result", tool_use_id: "toolu_01", content: [{ type: "text", text: "sunny" }] }],
    },
  ];
  const params = { model, max_tokens: 8, temperature: 0, system: "Be brief.", messages: history, tools };
  const msg = await client.messages.create(params);
  assert.equal(msg.type, "message");
  assert.equal(msg.role, "assistant");
  assert.equal(msg.content[0].type, "text");
  assert.ok(["end_turn", "max_tokens"].includes(msg.stop_reason), msg.stop_reason);

  const count = await client.messages.countTokens({ model, system: "Be brief.", messages: history, tools });
  assert.equal(count.input_tokens, msg.usage.input_tokens + msg.usage.cache_read_input_tokens);

  // streamed: the SDK's text events and final message equal the whole one
  const stream = client.messages.stream(params);
  let text = "";
  stream.on("text", (t) => { text += t; });
  const final = await stream.finalMessage();
  assert.equal(text, msg.content[0].text);
  assert.equal(final.content[0].text, msg.content[0].text);
  assert.equal(final.stop_reason, msg.stop_reason);
  assert.equal(final.usage.output_tokens, msg.usage.output_tokens);

  const wrong = new Anthropic({ baseURL: url, apiKey: "wrong", maxRetries: 0 });
  await assert.rejects(wrong.messages.create(params),
    (e) => e instanceof Anthropic.AuthenticationError && e.error?.error?.type === "authentication_error");
  await assert.rejects(client.messages.create({ ...params, max_tokens: 5000 } /* beyond the context */),
    (e) => e instanceof Anthropic.BadRequestError && e.error?.error?.type === "invalid_request_error");
}

// Forced calls (the grammar): the model must call, the arguments follow the
// schema; the agent runs the tool and the loop goes on.
async function forcedResponses() {
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0 });
  const tools = [{ type: "function", name: "get_weather", parameters: weatherSchema, strict: true }];
  for (const tool_choice of ["required", { type: "function", name: "get_weather" }]) {
    const r = await client.responses.create({
      model, input: "What is the weather in Paris?", tools, tool_choice, max_output_tokens: 100, temperature: 0,
    });
    const call = r.output.find((o) => o.type === "function_call");
    assert.ok(call, JSON.stringify(r.output));
    assert.equal(call.name, "get_weather");
    assert.equal(typeof JSON.parse(call.arguments).city, "string");
    // streamed with the SDK's helper: the same call
    const stream = client.responses.stream({
      model, input: "What is the weather in Paris?", tools, tool_choice, max_output_tokens: 100, temperature: 0,
    });
    let args = "";
    stream.on("response.function_call_arguments.delta", (ev) => { args += ev.delta; });
    const final = await stream.finalResponse();
    const fcall = final.output.find((o) => o.type === "function_call");
    assert.equal(fcall.arguments, call.arguments);
    assert.equal(args, call.arguments);
    // the tool's result, continuing from the stored response
    const next = await client.responses.create({
      model, previous_response_id: r.id, tools,
      input: [{ type: "function_call_output", call_id: call.call_id, output: JSON.stringify({ sky: "sunny" }) }],
      max_output_tokens: 8, temperature: 0,
    });
    assert.ok(next.usage.input_tokens_details.cached_tokens >= r.usage.input_tokens, JSON.stringify(next.usage));
  }
}

async function forcedMessages() {
  const client = new Anthropic({ baseURL: url, apiKey: key, maxRetries: 0 });
  const tools = [{ name: "get_weather", description: "Weather of a city", input_schema: weatherSchema }];
  const messages = [{ role: "user", content: "What is the weather in Paris?" }];
  for (const tool_choice of [{ type: "any" }, { type: "tool", name: "get_weather" }]) {
    const params = { model, max_tokens: 100, temperature: 0, tools, tool_choice, messages };
    const msg = await client.messages.create(params);
    assert.equal(msg.stop_reason, "tool_use");
    const use = msg.content.find((b) => b.type === "tool_use");
    assert.equal(use.name, "get_weather");
    assert.equal(typeof use.input.city, "string");
    // streamed: the SDK assembles the input from input_json_delta
    const final = await client.messages.stream(params).finalMessage();
    const suse = final.content.find((b) => b.type === "tool_use");
    assert.deepEqual(suse.input, use.input);
    assert.equal(final.stop_reason, "tool_use");
    // the loop: the call and its result
    const next = await client.messages.create({
      model, max_tokens: 8, temperature: 0, tools,
      messages: [...messages, { role: "assistant", content: msg.content },
        { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "sunny" }] }],
    });
    assert.equal(next.type, "message");
    assert.ok(next.usage.cache_read_input_tokens > 0, JSON.stringify(next.usage));
  }
}

// the served model under its --alias, in each SDK's own shape; an unknown
// id is each SDK's NotFoundError
async function models() {
  const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0 });
  const listed = [];
  for await (const m of openai.models.list()) listed.push(m.id);
  assert.deepEqual(listed, [model]);
  assert.equal((await openai.models.retrieve(model)).id, model);
  await assert.rejects(openai.models.retrieve("no-such-model"), OpenAI.NotFoundError);
  const anthropic = new Anthropic({ baseURL: url, apiKey: key, maxRetries: 0 });
  const page = await anthropic.models.list();
  assert.deepEqual(page.data.map((m) => [m.type, m.id]), [["model", model]]);
  assert.ok(!Number.isNaN(Date.parse(page.data[0].created_at)), page.data[0].created_at);
  assert.equal((await anthropic.models.retrieve(model)).id, model);
  await assert.rejects(anthropic.models.retrieve("no-such-model"), Anthropic.NotFoundError);
}

// the legacy completions with a list of prompts, through a base URL without
// /v1 (as llama-server answers it): n choices per prompt, each the tokens of
// its prompt alone; streamed, every chunk a text piece
async function completionsList() {
  const client = new OpenAI({ baseURL: url, apiKey: key, maxRetries: 0 });
  const base = { model, max_tokens: 6, temperature: 0 };
  const prompts = ["The weather in Paris", "Count: one, two,"];
  const alone = [];
  for (const p of prompts) alone.push((await client.completions.create({ ...base, prompt: p })).choices[0].text);
  const both = await client.completions.create({ ...base, prompt: prompts, n: 2 });
  assert.equal(both.choices.length, 4);
  both.choices.forEach((c, i) => {
    assert.equal(c.index, i);
    assert.equal(c.text, alone[Math.floor(i / 2)]);
  });
  assert.ok(both.usage.prompt_tokens > 0 && both.usage.completion_tokens > 0, JSON.stringify(both.usage));
  const texts = ["", ""];
  let finished = 0;
  const stream = await client.completions.create({ ...base, prompt: prompts, stream: true });
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      assert.equal(typeof c.text, "string", JSON.stringify(chunk));
      texts[c.index] += c.text;
      if (c.finish_reason) finished++;
    }
  }
  assert.deepEqual(texts, alone);
  assert.equal(finished, 2);
}

// Scoring a text as lm-evaluation-harness's local-completions does: token
// ids, echo + logprobs, one token generated; the continuation's logprobs
// are the prompt's tail. Generated greedily first, scored after: the same
// values, and each is the top alternative (greedy).
async function completionsScore() {
  const client = new OpenAI({ baseURL: url, apiKey: key, maxRetries: 0 });
  const ctx = [11, 22, 33, 44, 55, 66];
  const gen = await client.completions.create({
    model, prompt: ctx, max_tokens: 4, temperature: 0, logprobs: 1, ignore_eos: true, return_token_ids: true,
  });
  const cont = gen.choices[0].token_ids;
  assert.equal(cont.length, 4);
  const scored = await client.completions.create({
    model, prompt: [[...ctx, ...cont]], echo: true, logprobs: 1, max_tokens: 1, temperature: 0,
  });
  const lp = scored.choices[0].logprobs;
  assert.equal(lp.token_logprobs.length, ctx.length + cont.length + 1);
  assert.equal(lp.token_logprobs[0], null);
  const tail = lp.token_logprobs.slice(ctx.length, -1);
  assert.deepEqual(tail, gen.choices[0].logprobs.token_logprobs);
  lp.top_logprobs.slice(ctx.length, -1).forEach((top, i) => assert.equal(Math.max(...Object.values(top)), tail[i]));
  const only = await client.completions.create({
    model, prompt: [[...ctx, ...cont]], echo: true, logprobs: 1, max_tokens: 0,
  });
  assert.deepEqual(only.choices[0].logprobs.token_logprobs, lp.token_logprobs.slice(0, -1));
  assert.equal(only.usage.completion_tokens, 0);
}

await models();
await completionsList();
await completionsScore();
await responses();
await messages();
await forcedResponses();
await forcedMessages();
console.log("ok");
