"""hf_check.py CASES.jsonl: sets Hugging Face transformers against libbest on model folders
that our tools wrote; run by tests/t_hf_load.sh with the torch + transformers environment
of tests/hf_env.sh, one process for all the cases (importing torch takes seconds).

Each line of CASES.jsonl is one folder:
  {"name", "dir", "data": SHARD, "seq", "sparsity", "dtype",
   "prompt": TEXT or null, "tokenizer": PATH or null, "corrupt": null, "weight" or "rope_theta"}
and the environment gives BIN (best-eval) and TBIN (hf_logits, tests/hf_logits.c).

For a case, transformers must:
  load  AutoModelForCausalLM.from_pretrained(dir, dtype=float32) builds the class that
        config.json names, with no missing, unexpected or mismatched tensor; the file
        holds `dtype` weights; the prunable weights (the seven *_proj.weight of every
        block) hold at least `sparsity` zeros.
  logits on the first window of the shard, within LOGIT_TOL (max |ours - theirs| over
        max |theirs|, fp32 on both sides) of libbest's, both as best-eval's perplexity
        computes them (the whole window at once) and as its generation does (one token
        at a time with the KV cache); from hf_logits.
  ppl   the perplexity of `best-eval --json` over every window of the shard, within
        PPL_TOL relative, computed the same way (docs/best-eval.md).
  greedy with a prompt: `best-eval --generate PROMPT --temperature 0` gives exactly the
        token ids of transformers' generate(do_sample=False) from the same prompt ids
        (BOS when the folder has a SentencePiece tokenizer.model, then the text encoded
        with the `tokenizers` library from tokenizer.json; LLaMA's "" is BOS alone).
A case with "corrupt" is a control: transformers loads a copy of the folder with one
weight negated ("weight") or rope_theta divided by 100 ("rope_theta") while libbest
reads the folder itself, and the check must see a mismatch; it shows that a real
difference in how the two read a folder fails the test.

Prints one "ok - " or "not ok - " line per check (tests/lib.sh's protocol).
"""
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # local folders only: never ask the hub
import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM

import blas_info  # (tests/, this file's folder)
from safetensors_py import header

LOGIT_TOL = 1e-5
PPL_TOL = 1e-6
NEW_TOKENS = 40
PRUNABLE = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
BIN, TBIN = os.environ["BIN"], os.environ["TBIN"]
failed = False


def report(good, line):
    global failed
    failed |= not good
    print(("ok - " + line) if good else f"not ok - {line} [{blas_info.describe(torch=True)}]", flush=True)


def read_shard(path):
    raw = open(path, "rb").read()
    width = struct.unpack_from("<I", raw, 12)[0]
    return np.frombuffer(raw[64:], dtype="<u2" if width == 2 else "<u4").astype(np.int64)


def st_dtypes(folder):
    """The dtypes of the tensors in the folder's safetensors files."""
    names = [f for f in os.listdir(folder) if f.endswith(".safetensors")]
    return {t["dtype"] for f in names for t in header(os.path.join(folder, f))[0].values()}


def run(*args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{os.path.basename(args[0])} exited {r.returncode}: {r.stderr.strip()[-300:]}")
    return r.stdout


def corrupt_copy(folder, how, tmp):
    """A copy of folder that transformers reads differently from folder itself."""
    out = os.path.join(tmp, "corrupt")
    shutil.copytree(folder, out)
    if how == "rope_theta":
        cfg = json.load(open(os.path.join(out, "config.json")))
        cfg["rope_theta"] = cfg.get("rope_theta", 10000.0) / 100
        json.dump(cfg, open(os.path.join(out, "config.json"), "w"))
    else:  # one weight of the first block's v_proj negated: the largest, as pruning keeps it
        from safetensors.torch import load_file, save_file
        path = os.path.join(out, "model.safetensors")
        d = load_file(path)
        w = d["model.layers.0.self_attn.v_proj.weight"]
        i = int(w.abs().argmax())
        w.view(-1)[i] = -w.view(-1)[i]
        save_file(d, path, metadata={"format": "pt"})
    return out


def hf_ppl(m, toks, seq, batch=32):
    """best-eval's protocol: non-overlapping windows of seq, the first token of each context only."""
    nwin = len(toks) // seq
    wins = torch.from_numpy(toks[:nwin * seq].copy()).view(nwin, seq)
    total = 0.0
    with torch.no_grad():
        for i in range(0, nwin, batch):
            x = wins[i:i + batch]
            logits = m(x).logits[:, :-1].double()
            total += torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1),
                                                       reduction="sum").item()
    return math.exp(total / (nwin * (seq - 1))), nwin


def prompt_ids(c, cfg):
    tok = c["tokenizer"] or c["dir"]
    ids = []
    if os.path.exists(os.path.join(tok, "tokenizer.model")):
        ids.append(cfg.bos_token_id)
        if c["prompt"]:
            raise ValueError("a prompt for a SentencePiece tokenizer: only \"\" (BOS) is supported here")
    elif c["prompt"]:
        from tokenizers import Tokenizer
        ids += Tokenizer.from_file(os.path.join(tok, "tokenizer.json")).encode(c["prompt"], add_special_tokens=False).ids
    return ids


def check(c, tmp):
    name, folder = c["name"], c["dir"]
    hf_dir = corrupt_copy(folder, c["corrupt"], tmp) if c.get("corrupt") else folder
    control = bool(c.get("corrupt"))
    toks, seq = read_shard(c["data"]), c["seq"]
    m, info = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32, output_loading_info=True)
    m.eval()
    cfg = m.config
    problems = [f"{k}: {sorted(v)}" for k, v in info.items() if v]
    want_class = cfg.architectures[0]
    zeros = total = 0
    for pname, p in m.named_parameters():
        if pname.endswith(".weight") and pname.split(".")[-2] in PRUNABLE:
            zeros += int((p == 0).sum())
            total += p.numel()
    frac = zeros / total
    dtypes = st_dtypes(folder)
    dtype_ok = dtypes == {c["dtype"]}
    if not control:
        report(type(m).__name__ == want_class and not problems and dtype_ok and frac >= c["sparsity"] - 0.5 / total,
               f"{name}: transformers loads it as {type(m).__name__} (config: {want_class}), "
               f"{'all tensors' if not problems else '; '.join(problems)}, {'/'.join(sorted(dtypes))} weights, "
               f"{frac:.4f} of the prunable weights zero (pruned to {c['sparsity']})")

    # logits of the first window: libbest's two paths against transformers'
    ids = toks[:seq]
    lf = os.path.join(tmp, "logits.f32")
    run(os.path.join(TBIN, "hf_logits"), folder, lf, *map(str, ids))
    ours = np.fromfile(lf, dtype="<f4").reshape(2, seq, -1)
    with torch.no_grad():
        theirs = m(torch.from_numpy(ids.copy())[None]).logits[0].numpy()
    scale = float(np.abs(theirs).max())
    rel_eval = float(np.abs(ours[0] - theirs).max()) / scale
    rel_tok = float(np.abs(ours[1] - theirs).max()) / scale
    logits_ok = rel_eval <= LOGIT_TOL and rel_tok <= LOGIT_TOL
    logits_line = (f"logits of {seq} tokens x {theirs.shape[1]}: max difference / max |logit| "
                   f"{rel_eval:.1e} (window), {rel_tok:.1e} (one token at a time with the KV cache)")

    # perplexity over every window of the shard
    js = json.loads(run(os.path.join(BIN, "best-eval"), "--model", folder, "--data", c["data"],
                        "--seq", str(seq), "--json", "--quiet"))
    ppl, nwin = hf_ppl(m, toks, seq)
    rel_ppl = abs(js["ppl"] - ppl) / ppl
    ppl_ok = rel_ppl <= PPL_TOL and js["windows"] == nwin
    ppl_line = f"perplexity {ppl:.6f} there, {js['ppl']:.6f} in best-eval (rel {rel_ppl:.1e}, {nwin} windows of {seq})"

    # greedy generation
    gen_ok, gen_line = True, None
    if c.get("prompt") is not None:
        cmd = [os.path.join(BIN, "best-eval"), "--model", folder, "--generate", c["prompt"], "--temperature", "0",
               "--max-new-tokens", str(NEW_TOKENS), "--json", "--quiet"]
        if c["tokenizer"]:
            cmd += ["--tokenizer", c["tokenizer"]]
        ours_ids = json.loads(run(*cmd))["ids"]
        p = prompt_ids(c, cfg)
        stops = cfg.eos_token_id if isinstance(cfg.eos_token_id, list) else [cfg.eos_token_id]
        with torch.no_grad():
            g = m.generate(torch.tensor([p]), attention_mask=torch.ones(1, len(p), dtype=torch.long),
                           do_sample=False, num_beams=1, max_new_tokens=NEW_TOKENS, eos_token_id=stops,
                           pad_token_id=stops[0], output_scores=True, return_dict_in_generate=True)
        theirs_ids = g.sequences[0, len(p):].tolist()
        # how far the choices were from a tie: the smallest top-1 - top-2 gap on the way
        margin = min(float(s[0].topk(2).values[0] - s[0].topk(2).values[1]) for s in g.scores)
        gen_ok = ours_ids == theirs_ids
        same = next((i for i, (a, b) in enumerate(zip(ours_ids, theirs_ids)) if a != b), min(len(ours_ids), len(theirs_ids)))
        gen_line = (f"greedy from {len(p)} prompt ids: {len(ours_ids)} new ids in best-eval, {len(theirs_ids)} "
                    f"in transformers, {'the same' if gen_ok else f'first difference at {same}'} "
                    f"(smallest top-2 logit gap {margin:.2g})")

    if control:
        caught = [what for what, good in (("logits", logits_ok), ("perplexity", ppl_ok), ("greedy", gen_ok)) if not good]
        report(bool(caught), f"{name}: a mismatch is caught ({', '.join(caught) or 'by no check'}; "
                             f"{logits_line}; {ppl_line}{'; ' + gen_line if gen_line else ''})")
        return
    report(logits_ok, f"{name}: {logits_line}")
    report(ppl_ok, f"{name}: {ppl_line}")
    if gen_line:
        report(gen_ok, f"{name}: {gen_line}")


def main():
    print(f"# torch {torch.__version__}, transformers {transformers.__version__}", flush=True)
    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(1)  # tiny models: threads cost more than they give, more so on a busy machine
    for line in open(sys.argv[1]):
        c = json.loads(line)
        with tempfile.TemporaryDirectory() as tmp:
            try:
                check(c, tmp)
            except Exception as e:  # one clear line, then the next case
                report(False, f"{c['name']}: {type(e).__name__}: {str(e).strip()[-400:]}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
