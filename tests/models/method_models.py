#!/usr/bin/env python3
"""Pairs of models planned as the methods of one program (`kiln plan
--method`), with inputs and the outputs PyTorch computes:

  encoder / decoder   an encoder over 6 tokens and a decoder over 4 that
                      attends to the encoder's output; both embed tokens with
                      one table (the decoder's output layer reuses it)
  prefill / decode    a one-layer GPT (2 heads of 8): prefill reads 4 tokens
                      and returns the logits and the key and value cache;
                      decode reads the next token and that cache and returns
                      the logits and the cache one position longer

The key and value cache is a method input and output the application
keeps (docs/runtime.md says why). The decode step's expected logits are
the full 5-token forward's last row, so a cache passed wrongly shows.

    method_models.py DIR   writes DIR/NAME.onnx, DIR/NAME_inI.npy and
                           DIR/NAME_outI.npy for each of the four methods
"""
import os
import sys

import numpy as np
import torch
from torch import nn

VOCAB, D, HEADS, PREFILL, ENC = 32, 16, 2, 4, 6
DH = D // HEADS


class Shared(nn.Module):
    """The weights the methods of one pair share."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(VOCAB, D)
        self.pos = nn.Parameter(torch.randn(PREFILL + 1, D) * 0.1)
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)
        self.norm = nn.LayerNorm(D)
        self.mlp = nn.Sequential(nn.Linear(D, 2 * D), nn.ReLU(), nn.Linear(2 * D, D))

    def heads(self, x):
        return x.reshape(1, -1, HEADS, DH).transpose(1, 2)

    def logits(self, h):
        return self.norm(h) @ self.embed.weight.t()


def attend(q, k, v, mask=None):
    s = q @ k.transpose(-1, -2) / float(DH) ** 0.5
    if mask is not None:
        s = s + mask
    return torch.softmax(s, dim=-1) @ v


class Gpt(nn.Module):
    """Prefill (tokens) or decode (token, past k, past v)."""

    def __init__(self, shared, decode):
        super().__init__()
        self.w, self.decode = shared, decode

    def forward(self, tokens, past_k=None, past_v=None):
        w, n = self.w, tokens.shape[1]
        start = PREFILL if self.decode else 0
        x = w.embed(tokens) + w.pos[start:start + n]
        q, k, v = w.qkv(x).chunk(3, dim=-1)
        q, k, v = w.heads(q), w.heads(k), w.heads(v)
        if self.decode:
            k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
            mask = None
        else:
            mask = torch.triu(torch.full((n, n), -1e9), diagonal=1)
        a = attend(q, k, v, mask).transpose(1, 2).reshape(1, n, D)
        h = x + w.proj(a)
        h = h + w.mlp(w.norm(h))
        return w.logits(h), k, v


class Encoder(nn.Module):
    def __init__(self, shared):
        super().__init__()
        self.w = shared

    def forward(self, tokens):
        w = self.w
        x = w.embed(tokens)
        return w.norm(x + w.mlp(x))


class Decoder(nn.Module):
    def __init__(self, shared):
        super().__init__()
        self.w = shared

    def forward(self, tokens, memory):
        w = self.w
        x = w.embed(tokens) + w.pos[:tokens.shape[1]]
        q = w.heads(w.qkv(x)[..., :D])
        kv = w.qkv(memory)
        k, v = w.heads(kv[..., D:2 * D]), w.heads(kv[..., 2 * D:])
        a = attend(q, k, v).transpose(1, 2).reshape(1, tokens.shape[1], D)
        return w.logits(x + w.proj(a))


def export(out_dir, name, model, inputs, input_names, output_names):
    path = os.path.join(out_dir, name + ".onnx")
    torch.onnx.export(model, tuple(inputs), path, opset_version=17, input_names=input_names,
                      output_names=output_names)
    with torch.no_grad():
        outs = model(*inputs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    for i, a in enumerate(inputs):
        np.save(os.path.join(out_dir, f"{name}_in{i}.npy"), a.numpy())
    for i, o in enumerate(outs):
        np.save(os.path.join(out_dir, f"{name}_out{i}.npy"), o.numpy())
    return outs


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    shared = Shared().eval()
    gen = torch.Generator().manual_seed(1)
    src = torch.randint(0, VOCAB, (1, ENC), generator=gen)
    tgt = torch.randint(0, VOCAB, (1, PREFILL), generator=gen)
    (memory,) = export(out_dir, "encoder", Encoder(shared).eval(), [src], ["tokens"], ["memory"])
    export(out_dir, "decoder", Decoder(shared).eval(), [tgt, memory], ["tokens", "memory"], ["logits"])
    _, k, v = export(out_dir, "prefill", Gpt(shared, False).eval(), [tgt], ["tokens"], ["logits", "k", "v"])
    nxt = torch.randint(0, VOCAB, (1, 1), generator=gen)
    export(out_dir, "decode", Gpt(shared, True).eval(), [nxt, k, v], ["token", "past_k", "past_v"],
           ["logits", "k", "v"])
    # The decode step's logits are the last row of the whole sequence's.
    with torch.no_grad():
        full = torch.cat([tgt, nxt], dim=1)
        w = shared
        x = w.embed(full) + w.pos[:PREFILL + 1]
        q, kk, vv = (w.heads(t) for t in w.qkv(x).chunk(3, dim=-1))
        mask = torch.triu(torch.full((PREFILL + 1, PREFILL + 1), -1e9), diagonal=1)
        a = attend(q, kk, vv, mask).transpose(1, 2).reshape(1, PREFILL + 1, D)
        h = x + w.proj(a)
        h = h + w.mlp(w.norm(h))
        np.save(os.path.join(out_dir, "full_last_logits.npy"), w.logits(h)[:, -1:].numpy())


if __name__ == "__main__":
    main()
