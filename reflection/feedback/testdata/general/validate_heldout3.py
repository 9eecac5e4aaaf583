#!/usr/bin/env python3
"""Validate heldout3.jsonl against GUIDE.md's schema and the kind columns.

Usage: python3 validate_heldout3.py [--partial] [FILE]
--partial allows the provisional writing ids (w0001...) used before the final shuffle.
This script only checks and counts; it writes no records.
"""
import collections, datetime, json, re, sys

KINDS = """all_caps emoji typo_heavy sarcasm self_retraction mixed partial_correction
buried_correction computed_correction unit_correction status_correction
question_implying_correction hedged_correction terse_correction explicit_correction
confirmation negated_complaint negated_praise length_complaint tone_complaint
format_request doubt complaint question_no_correction praise policy_complaint
off_topic neutral""".split()
ANY = {"all_caps", "emoji", "typo_heavy"}
POS_EMPTY = {"self_retraction", "confirmation", "negated_complaint", "praise"}
NEG_EMPTY = {"negated_praise", "length_complaint", "tone_complaint", "doubt", "complaint"}
NEG_SET = {"partial_correction", "buried_correction", "computed_correction", "unit_correction",
           "status_correction", "question_implying_correction", "hedged_correction",
           "terse_correction", "explicit_correction"}
ZERO_EMPTY = {"format_request", "question_no_correction", "policy_complaint", "off_topic", "neutral"}
# mixed: -1, correction usually set; sarcasm: mostly -1, correction when implied
FIELDS = ["id", "lang", "kind", "question", "answer", "text", "polarity", "correction", "split"]
LANGS = {"en", "de", "es", "fr", "it", "pt", "nl"}
STATUS = {"processing", "shipped", "in transit", "out for delivery", "delivered", "cancelled",
          "pending", "refunded", "returned", "open", "in progress", "resolved", "closed",
          "on hold", "lost"}
NUM = r"-?\d+(?:\.\d+)?"
DAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
TIME = r"(?:[01]\d|2[0-3]):[0-5]\d"
UNITS_D = ["second", "minute", "hour", "day", "business day", "night", "week", "month", "year"]
QUNITS = ["mm", "cm", "m", "km", "in", "ft", "mi", "g", "kg", "oz", "lb", "mL", "cL", "L", "gal",
          "fl oz", "°C", "°F", "K", "km/h", "mph"]

def duration_ok(s):
    parts = re.findall(r"(\d+(?:\.\d+)?) (" + "|".join(u + "s?" for u in sorted(UNITS_D, key=len, reverse=True)) + r")(?: |$)", s + "")
    rebuilt = " ".join(n + " " + u for n, u in parts)
    if not parts or rebuilt != s:
        return False
    for n, u in parts:
        if (float(n) == 1) != (not u.endswith("s")):
            return False
    return True

def canonical(c):
    forms = [
        ("number", rf"{NUM}"),
        ("money", r"(?:\$|€|£|R\$)\d+(?:\.\d\d)?|[A-Z]{3} \d+(?:\.\d\d)?"),
        ("percentage", rf"{NUM}%"),
        ("time", TIME),
        ("time range", rf"{TIME}-{TIME}"),
        ("weekday", rf"{DAY}(?:-{DAY})?"),
        ("duration range", r"\d+-\d+ (?:" + "|".join(u + "s" for u in UNITS_D) + ")"),
        ("quantity", rf"{NUM} (?:" + "|".join(re.escape(u) for u in QUNITS) + ")"),
        ("yes/no", r"yes|no"),
    ]
    for name, rx in forms:
        if re.fullmatch(rx, c):
            if name == "money" and c.endswith(".00"):
                return None
            return name
    if re.fullmatch(r"\d{4}-\d\d-\d\d", c):
        try:
            datetime.date.fromisoformat(c)
            return "date"
        except ValueError:
            return None
    if c in STATUS:
        return "status"
    if duration_ok(c):
        return "duration"
    # names, places, words, text fields
    if c != c.strip() or c[0] in "\"'“”‘’«" or c[-1] in ".,;:!?\"'“”’»":
        return None
    if re.match(r"[\d$€£]", c):  # looks numeric but matched no numeric form
        return None
    return "name"

def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    partial = "--partial" in sys.argv
    path = args[0] if args else "heldout3.jsonl"
    errors, recs = [], []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            try:
                r = json.loads(line)
            except Exception as e:
                errors.append(f"line {n}: does not parse: {e}"); continue
            if not isinstance(r, dict) or list(r.keys()) != FIELDS:
                errors.append(f"line {n}: fields {list(r) if isinstance(r, dict) else type(r)}"); continue
            recs.append((n, r))
    seen_ids, seen_text = set(), {}
    for n, r in recs:
        e = lambda m: errors.append(f"line {n} ({r['id']}): {m}")
        for k in FIELDS:
            if k == "polarity":
                if type(r[k]) is not int: e("polarity not int")
            elif not isinstance(r[k], str): e(f"{k} not a string")
        idrx = r"(?:h3-\d{4}|w\d{4})" if partial else r"h3-\d{4}"
        if not re.fullmatch(idrx, str(r["id"])): e("bad id")
        if r["id"] in seen_ids: e("duplicate id")
        seen_ids.add(r["id"])
        if r["split"] != "heldout3": e("split")
        if r["lang"] not in LANGS: e("lang")
        if r["polarity"] not in (-1, 0, 1): e("polarity")
        k, p, c = r["kind"], r["polarity"], r["correction"]
        if k not in KINDS: e("kind"); continue
        if not r["question"].strip() or not r["answer"].strip() or not r["text"].strip(): e("empty field")
        if k in POS_EMPTY and (p != 1 or c): e("kind wants +1 and empty correction")
        if k in NEG_EMPTY and (p != -1 or c): e("kind wants -1 and empty correction")
        if k in NEG_SET and (p != -1 or not c): e("kind wants -1 and a correction")
        if k in ZERO_EMPTY and (p != 0 or c): e("kind wants 0 and empty correction")
        if k == "mixed" and p != -1: e("mixed wants -1")
        if c and p != -1: e("a correction comes with polarity -1")
        if c:
            form = canonical(c)
            if form is None: e(f"correction {c!r} matches no canonical form")
            if k == "status_correction" and form != "status": e("status_correction wants a status word")
        key = (r["lang"], r["text"].casefold())
        if key in seen_text: e(f"same text as line {seen_text[key]}")
        seen_text[key] = n
    kinds = collections.Counter(r["kind"] for _, r in recs)
    langs = collections.Counter(r["lang"] for _, r in recs)
    print(f"records: {len(recs)}")
    print("langs:", dict(langs.most_common()))
    print("polarity:", dict(collections.Counter(r["polarity"] for _, r in recs)))
    print("non-empty corrections:", sum(1 for _, r in recs if r["correction"]))
    print("kinds:", " ".join(f"{k}={kinds.get(k,0)}" for k in KINDS))
    if not partial:
        for k in KINDS:
            if kinds.get(k, 0) < 15: errors.append(f"kind {k} has {kinds.get(k,0)} < 15 records")
        if len(langs) < 7: errors.append("fewer than 7 languages")
    for m in errors: print("ERROR", m)
    print("OK" if not errors else f"{len(errors)} errors")
    return 1 if errors else 0

if __name__ == "__main__":
    sys.exit(main())
