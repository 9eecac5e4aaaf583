// Drives the citizen gateway with the official OpenAI Node SDK. Started by
// gateway/sdk_test.go with the gateway's address and keys in the
// environment; exits non-zero on the first failed assertion. Prints the ids
// of every acknowledged completion as "ACKED <json>" for the Go side to
// check against the event store.
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const base = process.env.CITIZEN_BASE_URL;
const key = process.env.CITIZEN_API_KEY;
const limitedKey = process.env.CITIZEN_LIMITED_KEY;
const control = process.env.CITIZEN_CONTROL_URL;
const bodyLimit = Number(process.env.CITIZEN_BODY_LIMIT);
assert.ok(base && key && limitedKey && control && bodyLimit, 'missing environment');

const client = new OpenAI({ baseURL: base + '/v1', apiKey: key, maxRetries: 0 });
const acked = [];
const user = (content) => [{ role: 'user', content }];

async function ctl(path) {
  const r = await fetch(control + path, { method: 'POST' });
  assert.equal(r.status, 200, `control ${path}`);
  return r.json();
}

const tests = {
  async nonStreaming() {
    const { data, response, request_id } = await client.chat.completions
      .create({ model: 'citizen', messages: user('hello'), metadata: { conversation_id: 'sdk-1' } })
      .withResponse();
    assert.match(data.id, /^chatcmpl-[0-9a-f-]{36}$/);
    assert.equal(data.object, 'chat.completion');
    assert.equal(data.model, 'citizen@v1');
    assert.equal(data.choices.length, 1);
    assert.equal(data.choices[0].message.role, 'assistant');
    assert.equal(data.choices[0].message.content, 'echo: hello');
    assert.equal(data.choices[0].finish_reason, 'stop');
    assert.equal(data.usage.completion_tokens, [...'echo: hello'].length);
    assert.equal(data.usage.total_tokens, data.usage.prompt_tokens + data.usage.completion_tokens);
    assert.ok(data.system_fingerprint);
    assert.ok(request_id && request_id === response.headers.get('x-request-id'));
    assert.equal(response.headers.get('x-citizen-model-version'), 'v1');
    acked.push(data.id);
  },

  async streamingWithoutUsage() {
    const stream = await client.chat.completions.create({ model: 'citizen', messages: user('stream me'), stream: true });
    let text = '';
    let id;
    let finish;
    for await (const chunk of stream) {
      assert.equal(chunk.object, 'chat.completion.chunk');
      assert.ok(!('usage' in chunk), 'usage must not be sent unasked');
      id ??= chunk.id;
      assert.equal(chunk.id, id);
      for (const c of chunk.choices) {
        text += c.delta.content ?? '';
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    assert.equal(text, 'echo: stream me');
    assert.equal(finish, 'stop');
    acked.push(id);
  },

  async streamingWithUsage() {
    const stream = await client.chat.completions.create({
      model: 'citizen', messages: user('count'), stream: true, stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    const last = chunks.at(-1);
    assert.deepEqual(last.choices, []);
    assert.equal(last.usage.completion_tokens, [...'echo: count'].length);
    for (const c of chunks.slice(0, -1)) assert.equal(c.usage, null);
    acked.push(last.id);
  },

  async logprobs() {
    const r = await client.chat.completions.create({ model: 'citizen', messages: user('lp'), logprobs: true, top_logprobs: 2 });
    const lp = r.choices[0].logprobs.content;
    assert.equal(lp.length, [...r.choices[0].message.content].length);
    assert.equal(lp.map((t) => t.token).join(''), r.choices[0].message.content);
    for (const t of lp) {
      assert.ok(t.logprob <= 0);
      assert.equal(t.top_logprobs.length, 2);
      assert.deepEqual(t.bytes, [...Buffer.from(t.token, 'utf8')]);
    }
    acked.push(r.id);
  },

  async toolCallRoundTrip() {
    const tools = [{
      type: 'function',
      function: { name: 'get_weather', description: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
    }];
    const messages = user('please use the tool');
    const first = await client.chat.completions.create({ model: 'citizen', messages, tools, tool_choice: 'required' });
    const msg = first.choices[0].message;
    assert.equal(first.choices[0].finish_reason, 'tool_calls');
    assert.equal(msg.tool_calls.length, 1);
    const call = msg.tool_calls[0];
    assert.equal(call.type, 'function');
    assert.equal(call.function.name, 'get_weather');
    assert.deepEqual(JSON.parse(call.function.arguments), { city: 'x' });
    messages.push(msg, { role: 'tool', tool_call_id: call.id, content: 'sunny' });
    const second = await client.chat.completions.create({ model: 'citizen', messages, tools });
    assert.equal(second.choices[0].message.content, 'tool said: sunny');
    acked.push(first.id, second.id);

    // The SDK's stream helper assembles streamed tool-call deltas.
    const runner = client.chat.completions.stream({ model: 'citizen', messages: user('tool please'), tools });
    const final = await runner.finalChatCompletion();
    assert.equal(final.choices[0].message.tool_calls[0].function.name, 'get_weather');
    assert.deepEqual(JSON.parse(final.choices[0].message.tool_calls[0].function.arguments), { city: 'x' });
    acked.push(final.id);
  },

  async jsonSchema() {
    const r = await client.chat.completions.create({
      model: 'citizen', messages: user('give json'),
      response_format: {
        type: 'json_schema',
        json_schema: { name: 'answer', strict: true, schema: { type: 'object', properties: { answer: { type: 'string' }, score: { type: 'number' } }, required: ['answer', 'score'], additionalProperties: false } },
      },
    });
    const v = JSON.parse(r.choices[0].message.content);
    assert.equal(typeof v.answer, 'string');
    assert.equal(typeof v.score, 'number');
    acked.push(r.id);
  },

  async nGreaterThanOne() {
    const r = await client.chat.completions.create({ model: 'citizen', messages: user('many'), n: 3 });
    assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
    assert.equal(new Set(r.choices.map((c) => c.message.content)).size, 3);
    acked.push(r.id);
  },

  async pinnedVersionAndModels() {
    const models = await client.models.list();
    const ids = [];
    for await (const m of models) ids.push(m.id);
    assert.deepEqual(ids, ['citizen', 'citizen@v1', 'citizen@v2']);
    const r = await client.chat.completions.create({ model: 'citizen@v2', messages: user('pin') });
    assert.equal(r.model, 'citizen@v2');
    acked.push(r.id);
    const got = await client.chat.completions.retrieve(r.id);
    assert.equal(got.id, r.id);
    assert.equal(got.choices[0].message.content, 'echo: pin');
    const msgs = [];
    for await (const m of client.chat.completions.messages.list(r.id)) msgs.push(m);
    assert.deepEqual(msgs.map((m) => [m.role, m.content]), [['user', 'pin']]);
    const listed = [];
    for await (const c of client.chat.completions.list({ limit: 2 })) listed.push(c.id);
    assert.ok(listed.includes(r.id), 'auto-pagination over stored completions reaches the new one');
    assert.equal(new Set(listed).size, listed.length);
  },

  async errors() {
    const bad = new OpenAI({ baseURL: base + '/v1', apiKey: 'sk-nope', maxRetries: 0 });
    await assert.rejects(bad.chat.completions.create({ model: 'citizen', messages: user('x') }), (e) => {
      assert.ok(e instanceof OpenAI.AuthenticationError);
      assert.equal(e.status, 401);
      assert.equal(e.code, 'invalid_api_key');
      assert.ok(e.requestID);
      return true;
    });
    await assert.rejects(client.chat.completions.create({ model: 'gpt-nope', messages: user('x') }), (e) => {
      assert.ok(e instanceof OpenAI.NotFoundError);
      assert.equal(e.code, 'model_not_found');
      return true;
    });
    await assert.rejects(client.chat.completions.create({ model: 'citizen', messages: user('x'), top_logprobs: 2 }), (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError);
      assert.equal(e.param, 'top_logprobs');
      assert.equal(e.type, 'invalid_request_error');
      return true;
    });
    await assert.rejects(client.chat.completions.create({ model: 'citizen', messages: [] }), OpenAI.BadRequestError);
    await assert.rejects(client.chat.completions.create({ model: 'citizen', messages: user('x'.repeat(bodyLimit + 1)) }), (e) => {
      assert.ok(e instanceof OpenAI.APIError);
      assert.equal(e.status, 413);
      return true;
    });
    const limited = new OpenAI({ baseURL: base + '/v1', apiKey: limitedKey, maxRetries: 0 });
    const ok = await limited.chat.completions.create({ model: 'citizen', messages: user('one') });
    acked.push(ok.id);
    await assert.rejects(limited.chat.completions.create({ model: 'citizen', messages: user('two') }), (e) => {
      assert.ok(e instanceof OpenAI.RateLimitError);
      assert.equal(e.status, 429);
      assert.ok(Number(e.headers.get('retry-after')) >= 1);
      return true;
    });
  },

  async retriesOn503And429() {
    const retrying = new OpenAI({ baseURL: base + '/v1', apiKey: key, maxRetries: 2 });
    let before = (await ctl('/calls')).calls;
    await ctl('/fail?k=2&status=503&retry_ms=5');
    const r = await retrying.chat.completions.create({ model: 'citizen', messages: user('retry') });
    assert.equal(r.choices[0].message.content, 'echo: retry');
    assert.equal((await ctl('/calls')).calls - before, 3, 'two failures and one success');
    acked.push(r.id);

    before = (await ctl('/calls')).calls;
    await ctl('/fail?k=3&status=429&retry_ms=5');
    await assert.rejects(retrying.chat.completions.create({ model: 'citizen', messages: user('give up') }), (e) => {
      assert.ok(e instanceof OpenAI.RateLimitError);
      assert.equal(e.headers.get('retry-after-ms'), '5');
      return true;
    });
    assert.equal((await ctl('/calls')).calls - before, 3, 'one try and two retries');

    // Streaming requests are retried too when the engine fails before output.
    await ctl('/fail?k=1&status=503&retry_ms=5');
    const s = await retrying.chat.completions.create({ model: 'citizen', messages: user('s'), stream: true });
    let text = '';
    let id;
    for await (const c of s) { id = c.id; text += c.choices[0]?.delta?.content ?? ''; }
    assert.equal(text, 'echo: s');
    acked.push(id);
  },

  async feedback() {
    const r = await client.chat.completions.create({ model: 'citizen', messages: user('rate me') });
    acked.push(r.id);
    const fb = await client.post('/feedback', { body: { interaction_id: r.id, feedback_id: 'sdk-fb-1', rating: 1, text: 'nice' } });
    assert.equal(fb.interaction_id, r.id.replace('chatcmpl-', ''));
    const again = await client.post('/feedback', { body: { interaction_id: r.id, feedback_id: 'sdk-fb-1', rating: 1, text: 'nice' } });
    assert.equal(again.event_id, fb.event_id);
  },

  async storedCompletionsUpdateDeleteAndStoreFalse() {
    const kept = await client.chat.completions.create({ model: 'citizen', messages: user('keep me'), store: true, metadata: { topic: 'a' } });
    const hidden = await client.chat.completions.create({ model: 'citizen', messages: user('do not store'), store: false });
    acked.push(kept.id, hidden.id);
    const up = await client.chat.completions.update(kept.id, { metadata: { topic: 'b' } });
    assert.equal(up.id, kept.id);
    assert.deepEqual(up.metadata, { topic: 'b' });
    assert.deepEqual((await client.chat.completions.retrieve(kept.id)).metadata, { topic: 'b' });
    const filtered = [];
    for await (const c of client.chat.completions.list({ metadata: { topic: 'b' } })) filtered.push(c.id);
    assert.deepEqual(filtered, [kept.id]);
    const all = [];
    for await (const c of client.chat.completions.list({ limit: 100, order: 'desc' })) all.push(c.id);
    assert.ok(all.includes(kept.id));
    assert.ok(!all.includes(hidden.id), 'store: false is not listed');
    await assert.rejects(client.chat.completions.retrieve(hidden.id), OpenAI.NotFoundError);
    const del = await client.chat.completions.delete(kept.id);
    assert.deepEqual(del, { id: kept.id, object: 'chat.completion.deleted', deleted: true });
    await assert.rejects(client.chat.completions.retrieve(kept.id), OpenAI.NotFoundError);
    await assert.rejects(client.chat.completions.delete(kept.id), OpenAI.NotFoundError);
  },

  async responsesText() {
    const r = await client.responses.create({ model: 'citizen', input: 'hello', instructions: 'be brief' });
    assert.match(r.id, /^resp_[0-9a-f-]{36}$/);
    assert.equal(r.object, 'response');
    assert.equal(r.status, 'completed');
    assert.equal(r.model, 'citizen@v1');
    assert.equal(r.output_text, 'echo: hello');
    assert.equal(r.usage.output_tokens, [...'echo: hello'].length);
    acked.push(r.id.replace('resp_', 'chatcmpl-'));
  },

  async responsesStream() {
    const stream = await client.responses.create({ model: 'citizen', input: [{ role: 'user', content: 'stream me' }], stream: true });
    let text = '';
    let final;
    for await (const ev of stream) {
      if (ev.type === 'response.output_text.delta') text += ev.delta;
      if (ev.type === 'response.completed') final = ev.response;
    }
    assert.equal(text, 'echo: stream me');
    assert.equal(final.status, 'completed');
    assert.equal(final.output[0].content[0].text, text);
    acked.push(final.id.replace('resp_', 'chatcmpl-'));
  },

  async responsesTools() {
    const tools = [{ type: 'function', name: 'get_weather', strict: false,
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }];
    const r = await client.responses.create({ model: 'citizen', input: 'weather?', tools, tool_choice: 'required' });
    const call = r.output.find((o) => o.type === 'function_call');
    assert.equal(call.name, 'get_weather');
    assert.deepEqual(JSON.parse(call.arguments), { city: 'x' });
    acked.push(r.id.replace('resp_', 'chatcmpl-'));
    const r2 = await client.responses.create({ model: 'citizen', tools, input: [
      { role: 'user', content: 'weather?' }, call, { type: 'function_call_output', call_id: call.call_id, output: 'sunny' }] });
    assert.equal(r2.output_text, 'tool said: sunny');
    acked.push(r2.id.replace('resp_', 'chatcmpl-'));
  },

  async embeddings() {
    // The SDK asks for base64 and decodes it.
    const e = await client.embeddings.create({ model: 'citizen', input: ['abc', 'eeee e'] });
    assert.equal(e.object, 'list');
    assert.equal(e.data.length, 2);
    assert.deepEqual(Array.from(e.data[1].embedding), [6, 5, 1]);
    const f = await client.embeddings.create({ model: 'citizen', input: 'abc', encoding_format: 'float' });
    assert.deepEqual(f.data[0].embedding, [3, 1, 1]);
  },
};

let failed = 0;
for (const [name, fn] of Object.entries(tests)) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e?.stack ?? e}`);
  }
}
console.log('ACKED ' + JSON.stringify(acked));
process.exit(failed ? 1 : 0);
