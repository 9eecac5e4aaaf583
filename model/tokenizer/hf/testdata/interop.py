#!/usr/bin/env python3
"""Reference side of interop_test.go: encodes and decodes with Python's `tokenizers`.

Usage: interop.py REQUEST.json RESULT.json

REQUEST: {"texts": [...], "n_special": N, "n_small": M,
          "tokenizers": {name: {"path": tokenizer.json[, "pretok_only": "1"]} | {"gguf": file.gguf, "save": out.json}},
          "random_ids": {name: [[id, ...], ...]}}
RESULT:  {name: {"plain", "special", "ordinary": [[ids]], "decode", "decode_random",
                 "decode_random_skip": [str], "pretok": [[piece]]},   (pretok: the pre-tokenizer alone)
         "_normalize": {form: [str]}}   (pretok_only and _normalize: the first M texts)

A "gguf" tokenizer is built here from the file's tokenizer.ggml.* metadata, independently of the
Go code: vocab and merges as stored, control tokens as special added tokens, user-defined ones as
non-special added tokens, the pre-tokenizer named by tokenizer.ggml.pre, and saved to "save".
"""
import json
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

LLAMA3_RE = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2_RE = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"


def from_gguf(path, save):
    import gguf
    r = gguf.GGUFReader(path)
    f = r.fields
    tokens = f["tokenizer.ggml.tokens"].contents()
    types = f["tokenizer.ggml.token_type"].contents()
    merges = [tuple(m.split(" ")) for m in f["tokenizer.ggml.merges"].contents()]
    pre = f["tokenizer.ggml.pre"].contents()
    ignore = pre == "llama-bpe"
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges, ignore_merges=ignore))
    bl = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    bl_plain = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)
    if pre in ("gpt2", "default"):
        tok.pre_tokenizer = bl
    elif pre == "smollm":
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), bl])
    elif pre == "llama-bpe":
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3_RE), "isolated"), bl_plain])
    elif pre == "qwen2":
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN2_RE), "isolated"), bl_plain])
    else:
        raise SystemExit("unknown pre " + pre)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(tokens, types) if ty in (2, 3)])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t, ty in zip(tokens, types) if ty == 4])
    tok.save(save)
    return tok


def main():
    req = json.load(open(sys.argv[1], encoding="utf-8"))
    texts = req["texts"]
    out = {}
    n_small = req["n_small"]
    out["_normalize"] = {form: [getattr(normalizers, form)().normalize_str(t) for t in texts[:n_small]]
                         for form in ("NFC", "NFD", "NFKC", "NFKD")}
    for name, spec in req["tokenizers"].items():
        tok = Tokenizer.from_file(spec["path"]) if "path" in spec else from_gguf(spec["gguf"], spec["save"])
        r = {}
        if spec.get("pretok_only"):
            out[name] = {"pretok": [[p for p, _ in tok.pre_tokenizer.pre_tokenize_str(t)] for t in texts[:n_small]]}
            continue
        r["plain"] = [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
        r["special"] = [e.ids for e in tok.encode_batch(texts[:req["n_special"]], add_special_tokens=True)]
        tok.encode_special_tokens = True
        r["ordinary"] = [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
        tok.encode_special_tokens = False
        r["decode"] = tok.decode_batch(r["plain"], skip_special_tokens=False)
        r["pretok"] = [[p for p, _ in tok.pre_tokenizer.pre_tokenize_str(t)] for t in texts]
        rnd = req["random_ids"].get(name, [])
        r["decode_random"] = tok.decode_batch(rnd, skip_special_tokens=False)
        r["decode_random_skip"] = tok.decode_batch(rnd, skip_special_tokens=True)
        out[name] = r
    json.dump(out, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)


if __name__ == "__main__":
    main()
