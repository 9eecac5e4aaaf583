#!/usr/bin/env python3
"""Independent NumPy reference for citizen/model (Hugging Face LlamaForCausalLM semantics).

Reads config.json + model.safetensors (and the PEFT adapter in adapter/) written by
`go test ./model -run TestReferenceLogits -update`, computes the logits of the token
sequences in tokens.json in float64 exactly as transformers' modeling_llama does (RMSNorm,
RoPE with rotate_half over split halves, repeat_kv for GQA, causal softmax attention, SwiGLU,
tied or untied head), with and without the LoRA adapter (W + alpha/r * B @ A), and writes
expected.json. Run: python3 model/testdata/reference/gen.py
"""
import json, os, struct
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32"
        b, e = info["data_offsets"]
        out[name] = np.frombuffer(data[base + b:base + e], dtype="<f4").reshape(info["shape"]).astype(np.float64)
    return out

def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w

def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)

def forward(cfg, W, ids, lora=None):
    C, H, KV = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or C // H
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    T = len(ids)

    def lin(x, name):
        w = W[name + ".weight"]
        y = x @ w.T
        if lora is not None and name in lora["A"]:
            y = y + lora["scale"] * (x @ lora["A"][name].T) @ lora["B"][name].T
        return y

    inv_freq = 1.0 / (theta ** (np.arange(0, hd, 2) / hd))
    freqs = np.outer(np.arange(T), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)
    cos, sin = np.cos(emb), np.sin(emb)

    x = W["model.embed_tokens.weight"][ids]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms_norm(x, W[p + "input_layernorm.weight"], eps)
        q = lin(h, p + "self_attn.q_proj").reshape(T, H, hd).transpose(1, 0, 2)
        k = lin(h, p + "self_attn.k_proj").reshape(T, KV, hd).transpose(1, 0, 2)
        v = lin(h, p + "self_attn.v_proj").reshape(T, KV, hd).transpose(1, 0, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = np.repeat(k, H // KV, axis=0)
        v = np.repeat(v, H // KV, axis=0)
        s = q @ k.transpose(0, 2, 1) / np.sqrt(hd)
        s = s + np.triu(np.full((T, T), -np.inf), 1)
        s = np.exp(s - s.max(-1, keepdims=True))
        s = s / s.sum(-1, keepdims=True)
        o = (s @ v).transpose(1, 0, 2).reshape(T, H * hd)
        x = x + lin(o, p + "self_attn.o_proj")
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
        g = lin(h, p + "mlp.gate_proj")
        u = lin(h, p + "mlp.up_proj")
        x = x + lin(g / (1 + np.exp(-g)) * u, p + "mlp.down_proj")
    x = rms_norm(x, W["model.norm.weight"], eps)
    head = W["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else W["lm_head.weight"]
    return x @ head.T

def load_lora(path):
    acfg = json.load(open(os.path.join(path, "adapter_config.json")))
    t = load_safetensors(os.path.join(path, "adapter_model.safetensors"))
    lora = {"scale": acfg["lora_alpha"] / acfg["r"], "A": {}, "B": {}}
    for name, v in t.items():
        mod = name[len("base_model.model."):].rsplit(".lora_", 1)[0]
        lora["A" if ".lora_A." in name else "B"][mod] = v
    return lora

def main():
    cfg = json.load(open(os.path.join(HERE, "config.json")))
    W = load_safetensors(os.path.join(HERE, "model.safetensors"))
    lora = load_lora(os.path.join(HERE, "adapter"))
    seqs = json.load(open(os.path.join(HERE, "tokens.json")))
    out = {"base": [], "lora": []}
    for ids in seqs:
        out["base"].append(forward(cfg, W, ids).ravel().tolist())
        out["lora"].append(forward(cfg, W, ids, lora).ravel().tolist())
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(out, f)

if __name__ == "__main__":
    main()
