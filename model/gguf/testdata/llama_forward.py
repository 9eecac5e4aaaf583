#!/usr/bin/env python3
"""An independent Llama forward pass in NumPy (float64) over a GGUF checkpoint, for the Go tests.

Usage: llama_forward.py MODEL.gguf IDS_JSON OUT_PREFIX

Dequantizes every tensor with gguf-py (gguf.quants.dequantize), undoes llama.cpp's q/k row
permutation (reshape(n_head, head_dim/2, 2, in).swapaxes(1, 2)), runs the model on the token ids
and writes the logits [len(ids), vocab] as little-endian float32 to OUT_PREFIX.f32. It also
writes OUT_PREFIX.permuted.f32: the same pass over the first PERMUTED_TOKENS ids with q/k left
permuted, the mistake the Go test must be able to tell apart.
"""
import json
import sys

import numpy as np
import gguf
from gguf.quants import dequantize

PERMUTED_TOKENS = 32


def main():
    path, ids, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    r = gguf.GGUFReader(path)

    def meta(key):
        return r.fields[key].contents()

    L = meta("llama.block_count")
    C = meta("llama.embedding_length")
    H = meta("llama.attention.head_count")
    KV = meta("llama.attention.head_count_kv")
    theta = float(str(np.float32(meta("llama.rope.freq_base"))))
    eps = float(str(np.float32(meta("llama.attention.layer_norm_rms_epsilon"))))
    hd = C // H
    tensors = {t.name: t for t in r.tensors}

    def W(name):
        t = tensors[name]
        a = dequantize(t.data, t.tensor_type).astype(np.float64)
        return a.reshape([int(d) for d in reversed(t.shape)])

    def unpermute(w, n):
        return w.reshape(n, hd // 2, 2, w.shape[1]).swapaxes(1, 2).reshape(w.shape)

    E = W("token_embd.weight")
    head = W("output.weight") if "output.weight" in tensors else E
    layers = []
    for l in range(L):
        p = f"blk.{l}."
        layers.append({k: W(p + k + ".weight") for k in
                       ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"]})
    norm = W("output_norm.weight")

    T = len(ids)
    inv = theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]
    cos_all = np.cos(np.concatenate([ang, ang], -1))[:, None, :]
    sin_all = np.sin(np.concatenate([ang, ang], -1))[:, None, :]
    mask = np.triu(np.full((T, T), -np.inf), 1)

    def rms(x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w

    def rope(x):  # [T, heads, hd], split halves as Hugging Face rotates
        n = x.shape[0]
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return x * cos_all[:n] + np.concatenate([-x2, x1], -1) * sin_all[:n]

    def forward(undo, ids):
        T = len(ids)
        x = E[ids]
        for lw in layers:
            wq, wk = lw["attn_q"], lw["attn_k"]
            if undo:
                wq, wk = unpermute(wq, H), unpermute(wk, KV)
            h = rms(x, lw["attn_norm"])
            q = rope((h @ wq.T).reshape(T, H, hd))
            k = rope((h @ wk.T).reshape(T, KV, hd))
            v = (h @ lw["attn_v"].T).reshape(T, KV, hd)
            k, v = np.repeat(k, H // KV, axis=1), np.repeat(v, H // KV, axis=1)
            s = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd) + mask[:T, :T]
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            o = np.einsum("hts,shd->thd", s, v).reshape(T, H * hd)
            x = x + o @ lw["attn_output"].T
            h = rms(x, lw["ffn_norm"])
            g, u = h @ lw["ffn_gate"].T, h @ lw["ffn_up"].T
            x = x + (g / (1 + np.exp(-g)) * u) @ lw["ffn_down"].T
        return rms(x, norm) @ head.T

    forward(True, ids).astype("<f4").tofile(out + ".f32")
    forward(False, ids[:PERMUTED_TOKENS]).astype("<f4").tofile(out + ".permuted.f32")


if __name__ == "__main__":
    main()
