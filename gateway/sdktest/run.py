"""Drives the citizen gateway with the official OpenAI Python SDK.

Started by gateway/sdk_test.go (TestOpenAIPythonSDK) with the gateway's
address and key in the environment; exits non-zero if any check fails.
Prints the ids of every acknowledged completion as "ACKED <json>" for the
Go side to check against the event store.
"""
import json
import os
import sys
import traceback

import openai
from openai import OpenAI

client = OpenAI(base_url=os.environ["CITIZEN_BASE_URL"] + "/v1", api_key=os.environ["CITIZEN_API_KEY"], max_retries=0)
acked = []


def user(text):
    return [{"role": "user", "content": text}]


def test_stored_completions_update_and_delete():
    kept = client.chat.completions.create(model="citizen", messages=user("keep me"), store=True, metadata={"topic": "a"})
    plain = client.chat.completions.create(model="citizen", messages=user("no flag"))
    hidden = client.chat.completions.create(model="citizen", messages=user("do not store"), store=False)
    acked.extend([kept.id, plain.id, hidden.id])

    up = client.chat.completions.update(kept.id, metadata={"topic": "b"})
    assert up.id == kept.id and up.metadata == {"topic": "b"}, up
    assert client.chat.completions.retrieve(kept.id).metadata == {"topic": "b"}
    assert [c.id for c in client.chat.completions.list(metadata={"topic": "b"})] == [kept.id]
    assert [c.id for c in client.chat.completions.list(metadata={"topic": "a"})] == []
    listed = [c.id for c in client.chat.completions.list(limit=2)]  # auto-pagination
    assert kept.id in listed and plain.id in listed, listed
    assert hidden.id not in listed, "store=False is listed"
    try:
        client.chat.completions.retrieve(hidden.id)
        raise AssertionError("store=False completion retrievable")
    except openai.NotFoundError:
        pass
    msgs = [m.content for m in client.chat.completions.messages.list(kept.id)]
    assert msgs == ["keep me"], msgs

    deleted = client.chat.completions.delete(kept.id)
    assert deleted.id == kept.id and deleted.deleted and deleted.object == "chat.completion.deleted", deleted
    for call in (lambda: client.chat.completions.retrieve(kept.id), lambda: client.chat.completions.delete(kept.id),
                 lambda: client.chat.completions.update(kept.id, metadata={})):
        try:
            call()
            raise AssertionError("a deleted completion answered")
        except openai.NotFoundError:
            pass
    assert kept.id not in [c.id for c in client.chat.completions.list(limit=100)]


def test_update_validation():
    c = client.chat.completions.create(model="citizen", messages=user("v"))
    acked.append(c.id)
    try:
        client.chat.completions.update(c.id, metadata={str(i): "v" for i in range(17)})
        raise AssertionError("17 metadata pairs accepted")
    except openai.BadRequestError as e:
        assert e.param == "metadata", e


def test_responses():
    r = client.responses.create(model="citizen", input="hello", instructions="be brief")
    assert r.id.startswith("resp_") and r.status == "completed" and r.model == "citizen@v1", r
    assert r.output_text == "echo: hello", r.output_text
    assert r.usage.output_tokens == len("echo: hello")
    acked.append(r.id.replace("resp_", "chatcmpl-"))

    text, final = "", None
    with client.responses.stream(model="citizen", input=[{"role": "user", "content": "stream me"}]) as stream:
        for ev in stream:
            if ev.type == "response.output_text.delta":
                text += ev.delta
        final = stream.get_final_response()
    assert text == "echo: stream me" and final.output_text == text, (text, final)
    acked.append(final.id.replace("resp_", "chatcmpl-"))

    tools = [{"type": "function", "name": "get_weather", "strict": False,
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
    r = client.responses.create(model="citizen", input="weather?", tools=tools, tool_choice="required")
    call = next(o for o in r.output if o.type == "function_call")
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "x"}, call
    acked.append(r.id.replace("resp_", "chatcmpl-"))
    r2 = client.responses.create(model="citizen", tools=tools, input=[
        {"role": "user", "content": "weather?"},
        {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}])
    assert r2.output_text == "tool said: sunny", r2.output_text
    acked.append(r2.id.replace("resp_", "chatcmpl-"))


def test_embeddings():
    # The SDK asks for base64 and decodes it.
    e = client.embeddings.create(model="citizen", input=["abc", "eeee e"])
    assert [d.index for d in e.data] == [0, 1] and e.data[1].embedding == [6.0, 5.0, 1.0], e
    f = client.embeddings.create(model="citizen", input="abc", encoding_format="float")
    assert f.data[0].embedding == [3.0, 1.0, 1.0], f


failed = 0
for name, fn in list(globals().items()):
    if name.startswith("test_") and callable(fn):
        try:
            fn()
            print("ok  ", name)
        except Exception:
            failed += 1
            print("FAIL", name)
            traceback.print_exc(file=sys.stdout)
print("ACKED " + json.dumps(acked))
sys.exit(1 if failed else 0)
