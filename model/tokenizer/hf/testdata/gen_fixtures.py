#!/usr/bin/env python3
"""Writes the small tokenizer.json fixtures under testdata/ with the `tokenizers` library.

Each fixture has the pipeline (normalizer, pre-tokenizer, post-processor, decoder, model
options, kinds of added tokens) of the model it is named after, with a small vocabulary
trained here on deterministic text:

  gpt2.json         GPT-2: ByteLevel(add_prefix_space=False) with its own regex.
  gpt2-prefix.json  RoBERTa-like: ByteLevel(add_prefix_space=True), RobertaProcessing,
                    <mask> with lstrip, plus single_word / rstrip / normalized added tokens.
  llama3.json       Llama 3: Split(Llama 3 regex) + ByteLevel(use_regex=False),
                    ignore_merges, <|begin_of_text|> template, reserved special tokens.
  qwen2.json        Qwen 2: NFC, Split(Qwen 2 regex) + ByteLevel(use_regex=False),
                    ChatML specials, non-special added tokens, a normalized added token.
  smollm2.json      SmolLM2: Digits(individual) + ByteLevel GPT-2 split, 17 control tokens
                    at ids 0-16, some bytes without a token.

Usage: python3 gen_fixtures.py   (needs tokenizers; run from anywhere)
"""
import json
import os
import random

from tokenizers import Tokenizer, AddedToken, Regex, decoders, models, normalizers, pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))

GPT2_RE = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_RE = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2_RE = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"

WORDS = ("the of and to in is you that it he was for on are as with his they at be this have from "
         "or one had by word but not what all were we when your can said there use an each which she "
         "do how their if will up other about out many then them these so some her would make like him "
         "into time has look two more write go see number no way could people my than first water been "
         "call who oil its now find long down day did get come made may part tokenizer token encode "
         "decode merge vocabulary function return struct package import error string byte").split()
SCRIPTS = ["Привет мир как дела", "Γειά σου κόσμε", "こんにちは世界", "你好世界，今天天气很好", "مرحبا بالعالم",
           "שלום עולם", "नमस्ते दुनिया", "안녕하세요 세계", "Xin chào thế giới", "café naïve Zürich señor",
           "สวัสดีชาวโลก", "Բարեւ աշխարհ", "გამარჯობა მსოფლიო"]
CODE = ["func main() {\n\tfmt.Println(\"hi\")\n}\n", "def f(x):\n    return x * 2\n",
        "if (a && b) { return c; }", "for i in range(10):\n    print(i)", "x := []int{1, 2, 3}",
        "SELECT * FROM users WHERE id = 42;", "<div class=\"a\">b</div>", "{\"key\": [1, 2.5, null]}"]


def byte_level(text):
    """The byte-level spelling of text (GPT-2's bytes_to_unicode)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    m = dict(zip(bs, map(chr, cs)))
    return "".join(m[b] for b in text.encode())


def training_text(seed=7, n=4000):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.random()
        if k < 0.55:
            words = [rng.choice(WORDS) for _ in range(rng.randint(3, 15))]
            if rng.random() < 0.3:
                words[0] = words[0].capitalize()
            s = " ".join(words) + rng.choice([".", ",", "!", "?", "", "\n", "'s", " don't", " I'll"])
        elif k < 0.75:
            s = rng.choice(SCRIPTS)
        elif k < 0.9:
            s = rng.choice(CODE)
        else:
            s = " ".join(str(rng.randint(0, 10 ** rng.randint(1, 6))) for _ in range(rng.randint(1, 5)))
        out.append(s)
    return out


def train(tok, vocab_size, special, alphabet=None):
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special, show_progress=False,
                                  initial_alphabet=alphabet if alphabet is not None else pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(training_text(), trainer=trainer)


def save(tok, name, edit=None):
    path = os.path.join(HERE, name)
    tok.save(path, pretty=False)
    if edit:
        with open(path) as f:
            d = json.load(f)
        edit(d)
        with open(path, "w") as f:
            json.dump(d, f, ensure_ascii=False, separators=(",", ":"))
    Tokenizer.from_file(path)  # still loads


def gpt2():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    train(tok, 1200, ["<|endoftext|>"])

    def edit(d):  # merges in the older "a b" string form
        d["model"]["merges"] = [" ".join(m) for m in d["model"]["merges"]]
    save(tok, "gpt2.json", edit)


def gpt2_prefix():
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    drop = {chr(0x100 + i) for i in (1, 2, 3)}
    train(tok, 1100, ["<s>", "<pad>", "</s>", "<unk>"], [c for c in sorted(pre_tokenizers.ByteLevel.alphabet()) if c not in drop])
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, normalized=False, special=True)])
    tok.add_tokens([AddedToken("cat", single_word=True, normalized=False),
                    AddedToken("[END]", rstrip=True, normalized=False),
                    AddedToken("hello world", normalized=True),
                    AddedToken(" <tab>", lstrip=True, rstrip=True, normalized=False)])
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    save(tok, "gpt2-prefix.json")


def llama3():
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_RE), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    train(tok, 1500, [])
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                "<|reserved_special_token_1|>", "<|start_header_id|>", "<|end_header_id|>",
                "<|eot_id|>"] + ["<|reserved_special_token_%d|>" % i for i in range(2, 12)]
    tok.add_special_tokens([AddedToken(s, normalized=False, special=True) for s in specials])
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True),
        processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                      pair="<|begin_of_text|> $A <|begin_of_text|>:1 $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)])])

    def edit(d):
        # Whole words in the vocabulary without merges that make them: with ignore_merges they
        # encode as one token.
        v = d["model"]["vocab"]
        n = max(v.values()) + 1
        for w in map(byte_level, [" tokenization", " supercalifragilistic", " Привет", "1234"]):
            if w not in v:
                v[w] = n
                n += 1
        for t in d["added_tokens"]:
            t["id"] += 4
        d["post_processor"]["processors"][1]["special_tokens"]["<|begin_of_text|>"]["ids"] = [bos + 4]
    save(tok, "llama3.json", edit)


def qwen2():
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_RE), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    train(tok, 1300, [])
    tok.add_special_tokens([AddedToken(s, normalized=False, special=True)
                            for s in ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]])
    tok.add_tokens([AddedToken("<tool_call>", normalized=False), AddedToken("</tool_call>", normalized=False),
                    AddedToken("cafe\u0301!", normalized=True)])
    save(tok, "qwen2.json")


def smollm2():
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<repo_name>", "<reponame>", "<file_sep>",
                "<filename>", "<gh_stars>", "<issue_start>", "<issue_comment>", "<issue_closed>",
                "<jupyter_start>", "<jupyter_text>", "<jupyter_code>", "<jupyter_output>",
                "<jupyter_script>", "<empty_output>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)])
    tok.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    tok.post_processor = processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True)
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    # Leave out the tokens of a few bytes (as SmolLM2 lacks 21): control bytes and bytes that
    # never occur in UTF-8.
    drop = {chr(0x100 + i) for i in (4, 6, 19, 20)} | {"À", "Á", "õ", "ÿ"}
    train(tok, 1000, specials, [c for c in alphabet if c not in drop])
    tok.add_special_tokens([AddedToken(s, normalized=False, special=True) for s in specials])
    save(tok, "smollm2.json")


if __name__ == "__main__":
    gpt2()
    gpt2_prefix()
    llama3()
    qwen2()
    smollm2()
