"""Reference renderer for citizen's model/template parity test.

Reads a JSON list of cases from argv[1], renders each with transformers'
chat-template machinery (transformers.utils.chat_template_utils, the code
behind apply_chat_template(tokenize=False)) and writes a JSON list of
{"ok": bool, "text": str, "error": str} to argv[2].

Each case: template, messages (OpenAI JSON), tools (list or null),
add_generation_prompt, bos_token / eos_token (optional), kwargs (dict),
now (ISO time that strftime_now formats).
"""
import datetime
import json
import sys

import transformers.utils.chat_template_utils as chat_template_utils
from transformers.utils.chat_template_utils import render_jinja_template

_now = None


class _FixedClock(datetime.datetime):
    """Stands in for datetime in chat_template_utils so that strftime_now
    formats the case's time."""

    @classmethod
    def now(cls, tz=None):
        return _now


chat_template_utils.datetime = _FixedClock


def template_messages(messages):
    # vLLM's convention: a tool call's JSON-object arguments reach the
    # template as a mapping.
    out = []
    for m in messages:
        m = dict(m)
        if m.get("tool_calls"):
            calls = []
            for c in m["tool_calls"]:
                c = dict(c)
                f = dict(c["function"])
                args = f.get("arguments")
                if isinstance(args, str) and args.strip().startswith("{"):
                    try:
                        parsed = json.loads(args.strip())
                    except ValueError:
                        parsed = None
                    if isinstance(parsed, dict):
                        f["arguments"] = parsed
                c["function"] = f
                calls.append(c)
            m["tool_calls"] = calls
        out.append(m)
    return out


def render(case):
    global _now
    _now = datetime.datetime.fromisoformat(case["now"])
    kwargs = dict(case.get("kwargs") or {})
    for k in ("bos_token", "eos_token"):
        if case.get(k):
            kwargs[k] = case[k]
    rendered, _ = render_jinja_template(
        conversations=[template_messages(case["messages"])],
        tools=case.get("tools"),
        chat_template=case["template"],
        add_generation_prompt=case.get("add_generation_prompt", False),
        **kwargs,
    )
    return rendered[0]


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)
    results = []
    for case in cases:
        try:
            results.append({"ok": True, "text": render(case), "error": ""})
        except Exception as e:  # the Go side must fail too
            results.append({"ok": False, "text": "", "error": f"{type(e).__name__}: {e}"})
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(results, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
