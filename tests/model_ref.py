#!/usr/bin/python3
# model_ref.py: the PyTorch reference for lib/nn/model.c. Builds three tiny decoders from
# random (seeded) weights with plain torch modules written here (RMSNorm, rotate_half
# RoPE, GQA attention with repeat_kv, Qwen3's q/k norm, SwiGLU; no `transformers`),
# runs one (B=2, T=9) batch, and writes the fixtures tests/test_model.c compares with:
#
#   tests/fixtures/model/NAME/config.json         HF config
#   tests/fixtures/model/NAME/model.safetensors   initial weights w0, F32, HF names,
#                                                 already multiplied by the mask
#   tests/fixtures/model/NAME/expected.safetensors
#       tokens, targets (I32, (B, T)); logits (B, T, V); loss (1,) at w0
#       grad.NAME      d loss / d NAME at w0 (all weights, pruned ones included)
#       mask.NAME      U8 mask of each prunable weight (1 = keep)
#       grad2.NAME, grad3.NAME   raw gradients before AdamW steps 2 and 3
#       losses (4,)    loss before each of 3 AdamW steps, and after the third
#       gnorms (3,)    gradient norm before clipping at each step
#       step3.NAME     weights after the 3 steps
#
# The 3 steps, from w0: zero grads, forward, backward, grads *= mask,
# clip_grad_norm_(1.0), AdamW(lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 0.1,
# one parameter group), weights *= mask. The raw gradients of every step are kept so
# that the C test can follow exactly this trajectory (see check_adamw there).
#
# Run with Debian's python3-torch: /usr/bin/python3 tests/model_ref.py  (torch 1.13).
# The outputs are committed, so the C tests need no torch.
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "model")

CONFIGS = {
    # LLaMA with grouped-query attention, untied lm_head.
    "llama": dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=48,
                  intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=97, rms_norm_eps=1e-5, rope_theta=10000.0,
                  tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
                  max_position_embeddings=64, bos_token_id=1, eos_token_id=2,
                  hidden_act="silu", torch_dtype="float32"),
    # Qwen3: GQA, q/k norms, head_dim 12 given explicitly (hidden/heads would be 8), tied.
    "qwen3": dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", hidden_size=32,
                  intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=12, vocab_size=97, rms_norm_eps=1e-6,
                  rope_theta=1000000.0, tie_word_embeddings=True, attention_bias=False,
                  max_position_embeddings=64, hidden_act="silu", torch_dtype="float32"),
    # LLaMA with tied embeddings and every bias (attention_bias, mlp_bias), no GQA.
    "llama_tied": dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=32,
                       intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=4, vocab_size=89, rms_norm_eps=1e-5,
                       rope_theta=500000.0, tie_word_embeddings=True, attention_bias=True,
                       mlp_bias=True, max_position_embeddings=64, bos_token_id=1,
                       eos_token_id=2, hidden_act="silu", torch_dtype="float32"),
}
B, T = 2, 9
PRUNABLE = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def dims(cfg):
    C, NH = cfg["hidden_size"], cfg["num_attention_heads"]
    return dict(C=C, I=cfg["intermediate_size"], L=cfg["num_hidden_layers"], NH=NH,
                KV=cfg["num_key_value_heads"], HD=cfg.get("head_dim", C // NH),
                V=cfg["vocab_size"], qwen=cfg["model_type"] == "qwen3")


def make_weights(cfg, gen):
    d = dims(cfg)
    C, I, NH, KV, HD, V = d["C"], d["I"], d["NH"], d["KV"], d["HD"], d["V"]
    ab, mb = cfg.get("attention_bias", False), cfg.get("mlp_bias", False)
    w = {}

    def lin(name, out, inp, bias):
        w[name + ".weight"] = torch.randn(out, inp, generator=gen) / math.sqrt(inp)
        if bias:
            w[name + ".bias"] = 0.1 * torch.randn(out, generator=gen)

    def norm(name, n):
        w[name] = 1.0 + 0.1 * torch.randn(n, generator=gen)

    w["model.embed_tokens.weight"] = torch.randn(V, C, generator=gen) / math.sqrt(C)
    for l in range(d["L"]):
        p = f"model.layers.{l}."
        norm(p + "input_layernorm.weight", C)
        lin(p + "self_attn.q_proj", NH * HD, C, ab)
        lin(p + "self_attn.k_proj", KV * HD, C, ab)
        lin(p + "self_attn.v_proj", KV * HD, C, ab)
        lin(p + "self_attn.o_proj", C, NH * HD, ab)
        if d["qwen"]:
            norm(p + "self_attn.q_norm.weight", HD)
            norm(p + "self_attn.k_norm.weight", HD)
        norm(p + "post_attention_layernorm.weight", C)
        lin(p + "mlp.gate_proj", I, C, mb)
        lin(p + "mlp.up_proj", I, C, mb)
        lin(p + "mlp.down_proj", C, I, mb)
    norm("model.norm.weight", C)
    if not cfg["tie_word_embeddings"]:
        w["lm_head.weight"] = torch.randn(V, C, generator=gen) / math.sqrt(C)
    return w


# --- the model, as transformers' modeling_llama.py / modeling_qwen3.py compute it ----

def rms_norm(x, weight, eps):
    var = x.pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(var + eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rope_cos_sin(T, HD, theta):
    inv_freq = 1.0 / (theta ** (torch.arange(0, HD, 2, dtype=torch.int64).float() / HD))
    freqs = torch.arange(T).float()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()          # (T, HD)


def repeat_kv(x, n):
    b, kv, t, hd = x.shape
    return x[:, :, None, :, :].expand(b, kv, n, t, hd).reshape(b, kv * n, t, hd)


def forward(w, cfg, tokens):
    d = dims(cfg)
    NH, KV, HD, eps = d["NH"], d["KV"], d["HD"], cfg["rms_norm_eps"]
    Bn, Tn = tokens.shape
    cos, sin = rope_cos_sin(Tn, HD, cfg["rope_theta"])
    causal = torch.ones(Tn, Tn, dtype=torch.bool).tril()

    def lin(x, name):
        return F.linear(x, w[name + ".weight"], w.get(name + ".bias"))

    x = w["model.embed_tokens.weight"][tokens]
    for l in range(d["L"]):
        p = f"model.layers.{l}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = lin(h, p + "self_attn.q_proj").view(Bn, Tn, NH, HD)
        k = lin(h, p + "self_attn.k_proj").view(Bn, Tn, KV, HD)
        v = lin(h, p + "self_attn.v_proj").view(Bn, Tn, KV, HD)
        if d["qwen"]:
            q = rms_norm(q, w[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, w[p + "self_attn.k_norm.weight"], eps)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k, v = repeat_kv(k, NH // KV), repeat_kv(v, NH // KV)
        s = torch.matmul(q, k.transpose(2, 3)) * HD ** -0.5
        s = s.masked_fill(~causal, float("-inf"))
        a = torch.matmul(F.softmax(s, dim=-1, dtype=torch.float32), v)
        a = a.transpose(1, 2).reshape(Bn, Tn, NH * HD)
        x = x + lin(a, p + "self_attn.o_proj")
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        x = x + lin(F.silu(lin(h, p + "mlp.gate_proj")) * lin(h, p + "mlp.up_proj"), p + "mlp.down_proj")
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]
    return F.linear(x, head)


def loss_fn(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-1)


# --- safetensors, written by hand (Debian's python3 has no safetensors module) ----------

DT = {torch.float32: ("F32", "<f4"), torch.int32: ("I32", "<i4"), torch.uint8: ("U8", "u1")}


def save_safetensors(path, tensors, metadata=None):
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        raw = t.numpy().astype(DT[t.dtype][1]).tobytes()
        header[name] = {"dtype": DT[t.dtype][0], "shape": list(t.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def make_fixture(name, cfg, seed):
    gen = torch.Generator().manual_seed(seed)
    d = dims(cfg)
    w0 = make_weights(cfg, gen)
    tokens = torch.randint(0, d["V"], (B, T), generator=gen, dtype=torch.int64)
    # Next-token targets, the last position ignored, plus two ignored positions inside.
    targets = torch.full((B, T), -1, dtype=torch.int64)
    targets[:, :-1] = tokens[:, 1:]
    targets[0, 3] = -1
    targets[1, 0] = -1

    masks = {}
    for k, v in w0.items():
        if any(p + ".weight" in k for p in PRUNABLE):
            masks[k] = (torch.rand(v.shape, generator=gen) >= 0.5).to(torch.uint8)
            w0[k] = w0[k] * masks[k]

    # 1. logits, loss and gradients at w0.
    w = {k: v.clone().requires_grad_(True) for k, v in w0.items()}
    logits = forward(w, cfg, tokens)
    loss = loss_fn(logits, targets)
    loss.backward()
    exp = {"tokens": tokens.to(torch.int32), "targets": targets.to(torch.int32),
           "logits": logits.detach(), "loss": loss.detach().reshape(1)}
    for k, v in w.items():
        exp["grad." + k] = v.grad

    # 2. three masked AdamW steps from w0.
    w = {k: v.clone().requires_grad_(True) for k, v in w0.items()}
    params = list(w.values())
    opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
    losses, gnorms = [], []
    for step in range(3):
        opt.zero_grad()
        l = loss_fn(forward(w, cfg, tokens), targets)
        l.backward()
        if step > 0:
            for k, v in w.items():
                exp[f"grad{step + 1}." + k] = v.grad.clone()
        with torch.no_grad():
            for k, m in masks.items():
                w[k].grad.mul_(m)
        gnorms.append(float(torch.nn.utils.clip_grad_norm_(params, 1.0)))
        opt.step()
        with torch.no_grad():
            for k, m in masks.items():
                w[k].mul_(m)
        losses.append(float(l))
    with torch.no_grad():
        losses.append(float(loss_fn(forward(w, cfg, tokens), targets)))
    exp["losses"] = torch.tensor(losses)
    exp["gnorms"] = torch.tensor(gnorms)
    for k, m in masks.items():
        exp["mask." + k] = m
    for k, v in w.items():
        exp["step3." + k] = v.detach()

    out = os.path.join(OUT, name)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    save_safetensors(os.path.join(out, "model.safetensors"), w0, {"format": "pt"})
    save_safetensors(os.path.join(out, "expected.safetensors"), exp)
    print(f"{name}: loss {float(loss):.6f}, step losses {losses}, grad norms {gnorms}")


def main():
    torch.set_num_threads(1)
    for i, (name, cfg) in enumerate(CONFIGS.items()):
        make_fixture(name, cfg, 1234 + i)


if __name__ == "__main__":
    sys.exit(main())
