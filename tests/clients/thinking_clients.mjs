// thinking_clients.mjs - the Vercel AI SDK (`ai` with
// `@ai-sdk/openai-compatible`) and LangChain (`@langchain/openai`) against a
// running `rewind serve` whose chat template thinks by default (Qwen3.5's
// opens <think>; started by tests/server/test_clients_node.sh): plain text,
// streamed text, forced tool calls and the tool loop after them, and
// structured output from a zod schema. The model reasons first (the
// reasoning is non-empty), then the server holds the schema for the answer:
// the JSON is the content, and the client's own parser accepts it.
// Usage: REWIND_URL=http://127.0.0.1:PORT REWIND_KEY=KEY node thinking_clients.mjs
import assert from "node:assert/strict";
import { z } from "zod";
import { generateText, streamText, generateObject, Output, tool } from "ai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { ChatOpenAI } from "@langchain/openai";
import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";

const url = process.env.REWIND_URL;
const key = process.env.REWIND_KEY;

// zod schemas as apps write them; every string bounded (a random-weight
// model's free string may not end within the token limit)
const City = z.enum(["Paris", "Oslo", "Lima"]);
const Weather = z.object({
  city: City,
  temp_c: z.number().int().min(-40).max(50),
  sky: z.enum(["clear", "cloudy", "rain"]),
  note: z.string().max(12),
});
const Recipe = z.object({
  name: z.string().min(1).max(10),
  servings: z.number().int().min(1).max(8),
  ingredients: z.array(z.object({ item: z.string().max(8), grams: z.number().min(0).max(500) })).min(1).max(2),
  vegan: z.boolean(),
});
const weatherInput = z.object({ city: City });

// ---- the Vercel AI SDK ----
async function aiSdk() {
  const provider = createOpenAICompatible({
    name: "rewind",
    baseURL: `${url}/v1`,
    apiKey: key,
    includeUsage: true,
    supportsStructuredOutputs: true, // response_format json_schema (else json_object)
  });
  const model = provider.chatModel("rewind");
  const base = { model, maxRetries: 0, temperature: 0, maxOutputTokens: 48 };

  // generateText: the reasoning comes apart from the text
  const t = await generateText({ ...base, prompt: "Say hello." });
  assert.ok(t.reasoningText && t.reasoningText.length > 0, `no reasoning: ${JSON.stringify(t.reasoning)}`);
  assert.equal(typeof t.text, "string");
  assert.ok(["stop", "length"].includes(t.finishReason), t.finishReason);
  assert.ok(t.usage.inputTokens > 0 && t.usage.outputTokens > 0, JSON.stringify(t.usage));

  // streamText: the deltas are the whole answer's, reasoning and text
  const s = streamText({ ...base, prompt: "Say hello." });
  let text = "";
  let reasoning = "";
  for await (const part of s.fullStream) {
    if (part.type === "text-delta") text += part.text;
    if (part.type === "reasoning-delta") reasoning += part.text;
    if (part.type === "error") throw part.error;
  }
  assert.equal(reasoning, t.reasoningText);
  assert.equal(text, t.text);
  assert.equal(await s.text, t.text);

  // a forced tool call (the model reasons, then the call is held to the
  // tool's schema) with the SDK's execute; then the loop goes on with the
  // SDK's own response messages (reasoning, call, result) as the history
  const tools = {
    get_weather: tool({
      description: "The weather of a city",
      inputSchema: weatherInput,
      execute: async ({ city }) => ({ city, temp_c: 21, sky: "clear" }),
    }),
  };
  const messages = [{ role: "user", content: "What is the weather in Paris?" }];
  const call = await generateText({
    ...base, maxOutputTokens: 400, messages, tools, toolChoice: { type: "tool", toolName: "get_weather" },
  });
  assert.equal(call.finishReason, "tool-calls", call.finishReason);
  assert.equal(call.toolCalls.length, 1);
  assert.equal(call.toolCalls[0].toolName, "get_weather");
  assert.ok(City.safeParse(call.toolCalls[0].input.city).success, JSON.stringify(call.toolCalls[0].input));
  assert.equal(call.toolResults[0].output.temp_c, 21);
  assert.ok(call.reasoningText && call.reasoningText.length > 0, "no reasoning before the call");
  const next = await generateText({ ...base, messages: [...messages, ...call.response.messages], tools, toolChoice: "none" });
  assert.equal(typeof next.text, "string");
  assert.ok(next.reasoningText && next.reasoningText.length > 0);
  // streamed, toolChoice "required" and one call (parallel_tool_calls
  // false through the provider's options, else a random-weight model goes on
  // calling until the limit): the call put together from its deltas
  const sc = streamText({
    ...base, maxOutputTokens: 400, messages, tools, toolChoice: "required",
    providerOptions: { rewind: { parallel_tool_calls: false } },
  });
  const streamedCalls = [];
  for await (const part of sc.fullStream) {
    if (part.type === "tool-call") streamedCalls.push(part);
    if (part.type === "error") throw part.error;
  }
  assert.equal(streamedCalls.length, 1, JSON.stringify(streamedCalls));
  assert.ok(City.safeParse(streamedCalls[0].input.city).success);
  assert.ok((await sc.reasoningText).length > 0);

  // structured output: generateText with Output.object, generateObject and
  // streamText's partial objects; the JSON is the text (not the reasoning).
  // 600 tokens: the server's default reasoning budget with a schema is half
  // of them, and a random-weight model spends much of the answer on the
  // whitespace the grammar allows between tokens
  for (const [schema, prompt] of [[Weather, "The weather in Oslo as JSON."], [Recipe, "A recipe as JSON."]]) {
    const o = await generateText({ ...base, maxOutputTokens: 600, prompt, output: Output.object({ schema }) });
    assert.ok(schema.safeParse(o.output).success, o.text);
    assert.deepEqual(JSON.parse(o.text), o.output);
    assert.ok(o.reasoningText && o.reasoningText.length > 0, "no reasoning before the object");
    const g = await generateObject({ ...base, maxOutputTokens: 600, prompt, schema });
    assert.deepEqual(g.object, o.output); // the same request at temperature 0
    assert.ok(g.reasoning && g.reasoning.length > 0);
    const so = streamText({ ...base, maxOutputTokens: 600, prompt, output: Output.object({ schema }) });
    let partials = 0;
    for await (const _ of so.partialOutputStream) partials++;
    assert.ok(partials > 0);
    assert.deepEqual(await so.output, o.output);
  }
  // sampled (temperature > 0, seeded): still valid
  for (let seed = 1; seed <= 3; seed++) {
    const o = await generateText({
      ...base, temperature: 0.9, seed, maxOutputTokens: 600, prompt: "A recipe.", output: Output.object({ schema: Recipe }),
    });
    assert.ok(Recipe.safeParse(o.output).success, o.text);
    assert.ok(o.reasoningText.length > 0);
  }
}

// ---- LangChain ----
async function langchain() {
  const chat = (maxTokens, more = {}) => new ChatOpenAI({
    model: "rewind", apiKey: key, configuration: { baseURL: `${url}/v1` }, temperature: 0, maxTokens, maxRetries: 0, ...more,
  });
  const llm = chat(48);

  // invoke: the reasoning in additional_kwargs, the answer in content
  const m = await llm.invoke("Say hello.");
  assert.equal(typeof m.content, "string");
  const rc = m.additional_kwargs.reasoning_content;
  assert.ok(typeof rc === "string" && rc.length > 0, `no reasoning: ${JSON.stringify(m.additional_kwargs)}`);
  assert.ok(m.usage_metadata.input_tokens > 0);

  // stream: the chunks add up to the same message
  let acc;
  for await (const chunk of await llm.stream("Say hello.")) acc = acc ? acc.concat(chunk) : chunk;
  assert.equal(acc.content, m.content);
  assert.equal(acc.additional_kwargs.reasoning_content, rc);

  // bindTools, forced: a call whose args fit the schema; then the loop
  // (the AIMessage as returned, the ToolMessage with its result)
  const bound = chat(400).bindTools(
    [{ name: "get_weather", description: "The weather of a city", schema: weatherInput }],
    { tool_choice: "get_weather" },
  );
  const q = new HumanMessage("What is the weather in Paris?");
  const ai = await bound.invoke([q]);
  assert.equal(ai.tool_calls.length, 1, JSON.stringify(ai));
  assert.equal(ai.tool_calls[0].name, "get_weather");
  assert.ok(City.safeParse(ai.tool_calls[0].args.city).success, JSON.stringify(ai.tool_calls[0].args));
  assert.ok(ai.additional_kwargs.reasoning_content.length > 0, "no reasoning before the call");
  const after = await llm.bindTools([{ name: "get_weather", description: "The weather of a city", schema: weatherInput }])
    .invoke([q, ai, new ToolMessage({ tool_call_id: ai.tool_calls[0].id, content: '{"sky":"clear"}' })]);
  assert.ok(after instanceof AIMessage);
  assert.equal(typeof after.content, "string");
  // streamed: the call put together from its chunks
  let calls;
  for await (const chunk of await bound.stream([q])) calls = calls ? calls.concat(chunk) : chunk;
  assert.equal(calls.tool_calls.length, 1);
  assert.deepEqual(calls.tool_calls[0].args, ai.tool_calls[0].args);

  // withStructuredOutput: response_format json_schema (the default for a
  // model not named gpt-3/gpt-4) and function calling (a forced call)
  for (const method of ["jsonSchema", "functionCalling"]) {
    for (const schema of [Weather, Recipe]) {
      const so = chat(600).withStructuredOutput(schema, { method, includeRaw: true, name: "answer" });
      const r = await so.invoke("Answer as JSON.");
      assert.equal(r.parsingError, undefined, `${method}: ${r.parsingError}`);
      assert.ok(schema.safeParse(r.parsed).success, `${method}: ${JSON.stringify(r.parsed)}`);
      if (method === "jsonSchema") assert.deepEqual(JSON.parse(r.raw.content), r.parsed);
      assert.ok(r.raw.additional_kwargs.reasoning_content.length > 0, `${method}: no reasoning`);
    }
  }
  // sampled and seeded
  for (let seed = 1; seed <= 3; seed++) {
    const r = await chat(600, { temperature: 0.9, modelKwargs: { seed } }).withStructuredOutput(Recipe).invoke("A recipe.");
    assert.ok(Recipe.safeParse(r).success, JSON.stringify(r));
  }
}

// the two side by side (the server's --parallel 2)
await Promise.all([aiSdk(), langchain()]);
console.log("ok");
