// structured_thinking.mjs - structured output with thinking on, sampled:
// 30 seeded requests at temperature > 0 against a running `rewind serve`
// whose chat template thinks by default (started by
// tests/server/test_clients_node.sh), over schemas with nested objects,
// arrays, enums, anyOf, $ref, number bounds (minimum/maximum and the
// exclusive ones), string patterns and formats (date, date-time, uuid,
// email), through the real `openai` client three ways: chat completions
// response_format json_schema, Responses text.format, and the SDK's parse()
// helper. Every answer must validate with ajv (+ ajv-formats, the full
// format checks: a date's day within its month), be the whole content, and
// come after a non-empty reasoning.
// Usage: REWIND_URL=http://127.0.0.1:PORT REWIND_KEY=KEY [REWIND_VERBOSE=1] node structured_thinking.mjs
import assert from "node:assert/strict";
import OpenAI from "openai";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

const client = new OpenAI({ baseURL: `${process.env.REWIND_URL}/v1`, apiKey: process.env.REWIND_KEY, maxRetries: 0 });
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv, { mode: "full" });

// Every string is bounded (maxLength, enum, pattern or format): a
// random-weight model's free string may not end within the token limit.
const str = (n) => ({ type: "string", maxLength: n });
const obj = (properties, required = Object.keys(properties)) => ({
  type: "object", properties, required, additionalProperties: false,
});
const schemas = {
  nested: obj({
    person: obj({ name: str(8), age: { type: "integer", minimum: 0, maximum: 120 } }),
    address: obj({ city: { enum: ["Paris", "Oslo", "Lima"] }, zip: { type: "string", pattern: "^[0-9]{5}$" } }),
  }),
  arrays: obj({
    tags: { type: "array", items: str(6), minItems: 1, maxItems: 3 },
    scores: { type: "array", items: { type: "number", minimum: 0, maximum: 1 }, maxItems: 2 },
    matrix: { type: "array", items: { type: "array", items: { type: "integer", minimum: -9, maximum: 9 }, maxItems: 2 }, maxItems: 2 },
  }),
  enums: obj({
    color: { type: "string", enum: ["red", "green", "blue"] },
    size: { enum: [1, 2, 3] },
    mode: { enum: ["on", "off", null, true] },
    flag: { type: "boolean" },
  }),
  anyOf: obj({
    value: { anyOf: [{ type: "integer", minimum: -5, maximum: 5 }, str(5), { type: "null" }] },
    shape: {
      anyOf: [
        obj({ kind: { const: "circle" }, r: { type: "number", exclusiveMinimum: 0, maximum: 10 } }),
        obj({ kind: { const: "square" }, side: { type: "integer", minimum: 1, maximum: 9 } }),
      ],
    },
  }),
  ref: {
    ...obj({ from: { $ref: "#/$defs/point" }, to: { $ref: "#/$defs/point" }, label: { $ref: "#/$defs/label" } }),
    $defs: {
      point: obj({ x: { type: "integer", minimum: -99, maximum: 99 }, y: { type: "integer", minimum: -99, maximum: 99 } }),
      label: { type: "string", enum: ["start", "end"] },
    },
  },
  bounds: obj({
    ratio: { type: "number", exclusiveMinimum: 0, exclusiveMaximum: 1 },
    temp: { type: "number", minimum: -40.5, maximum: 50 },
    step: { type: "integer", exclusiveMinimum: -3, exclusiveMaximum: 3 },
    big: { type: "integer", minimum: 1000, maximum: 100000 },
  }),
  patterns: obj({
    code: { type: "string", pattern: "^[A-Z]{3}-[0-9]{2,4}$" },
    hex: { type: "string", pattern: "^#[0-9a-f]{6}$" },
    word: { type: "string", pattern: "^(yes|no|maybe)$" },
  }),
  formats: obj({
    day: { type: "string", format: "date" },
    at: { type: "string", format: "date-time" },
    id: { type: "string", format: "uuid" },
    mail: { type: "string", format: "email", maxLength: 24 },
  }),
  mixed: {
    ...obj({
      items: {
        type: "array",
        minItems: 1,
        maxItems: 2,
        items: obj({ sku: { $ref: "#/$defs/sku" }, qty: { type: "integer", minimum: 1, maximum: 9 }, price: { type: "number", minimum: 0, maximum: 1000 } }),
      },
      status: { enum: ["open", "paid"] },
      due: { anyOf: [{ type: "string", format: "date" }, { type: "null" }] },
    }),
    $defs: { sku: { type: "string", pattern: "^[A-Z]{2}[0-9]{3}$" } },
  },
  optional: {
    type: "object",
    properties: { note: str(6), when: { type: "string", format: "date-time" }, n: { type: "integer", minimum: 0, maximum: 9 } },
    required: ["n"],
    additionalProperties: false,
  },
};
const names = Object.keys(schemas);
const validators = Object.fromEntries(names.map((n) => [n, ajv.compile(schemas[n])]));

const ways = ["chat", "responses", "parse"];
// A random-weight model spends much of the answer on the whitespace the
// grammar allows between tokens (up to a newline and 20 indent characters
// each time), so the answer gets room (these answers take 60 to 170
// tokens). Responses: the server's default reasoning budget with a schema,
// half of max_output_tokens; chat: the reasoning_budget extension, shorter
// (the test's time).
const max_tokens = 900;
const reasoning_budget = 64;
const max_output_tokens = 500;

async function one(i) {
  const name = names[i % names.length];
  const way = ways[Math.floor(i / names.length) % ways.length];
  const schema = schemas[name];
  const prompt = `Fill in the ${name} record as JSON.`;
  const seed = 7000 + i;
  const temperature = 0.7 + 0.05 * (i % 5);
  let content, reasoning, parsed, finish, usage;
  if (way === "responses") {
    const r = await client.responses.create({
      model: "rewind", input: prompt, max_output_tokens, temperature,
      text: { format: { type: "json_schema", name, schema, strict: true } },
      // @ts-ignore the seed is an extension here
      seed,
    });
    finish = r.status;
    usage = [r.usage.output_tokens_details.reasoning_tokens, r.usage.output_tokens];
    content = r.output_text;
    reasoning = r.output.filter((o) => o.type === "reasoning").flatMap((o) => o.content ?? []).map((c) => c.text).join("");
    parsed = r.status === "completed" ? JSON.parse(content) : null;
  } else {
    const req = {
      model: "rewind", messages: [{ role: "user", content: prompt }], max_tokens, temperature, seed, reasoning_budget,
      response_format: { type: "json_schema", json_schema: { name, schema, strict: true } },
    };
    const r = way === "parse" ? await client.chat.completions.parse(req) : await client.chat.completions.create(req);
    const m = r.choices[0].message;
    finish = r.choices[0].finish_reason;
    usage = [r.usage.completion_tokens_details.reasoning_tokens, r.usage.completion_tokens];
    content = m.content;
    reasoning = m.reasoning_content;
    if (finish === "stop") {
      parsed = way === "parse" ? m.parsed : JSON.parse(content);
      if (way === "parse") assert.deepEqual(parsed, JSON.parse(content));
    }
  }
  const where = `#${i} ${name} via ${way} (seed ${seed}, finish ${finish}, reasoning/all tokens ${usage})`;
  if (process.env.REWIND_VERBOSE) console.error(where);
  assert.ok(["stop", "completed"].includes(finish), `${where}: ${content}`);
  assert.ok(typeof reasoning === "string" && reasoning.length > 0, `${where}: no reasoning`);
  assert.ok(!reasoning.includes("</think>"), `${where}: the close in the reasoning`);
  assert.ok(validators[name](parsed), `${where}: ${content}\n${JSON.stringify(validators[name].errors)}`);
  return { way, content, reasoning };
}

// two at a time (the server's --parallel 2)
const n = 30;
let next = 0;
const done = [];
async function worker() {
  while (next < n) done.push(await one(next++));
}
await Promise.all([worker(), worker()]);
assert.equal(done.length, n);
for (const w of ways) assert.equal(done.filter((d) => d.way === w).length, 10, w);
// seeded: the same request again gives the same answer (Responses too,
// whose seed is our extension)
for (const i of [0, 10]) {
  const [a, b] = [await one(i), await one(i)];
  assert.deepEqual(a, b, `#${i} twice`);
}
console.log("ok");
