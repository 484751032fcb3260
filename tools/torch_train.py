#!/usr/bin/env python3
"""torch_train.py - nanoGPT's train.py loop in PyTorch on the CPU, the other side of nanogpt's CPU speed
comparison.

The model is the one nanogpt trains (and tools/reference.py defines): GPT-2 as nanoGPT writes it, with the
vocabulary padded to Vp = the next multiple of 64 (padded wte rows zero) and the padded logits kept out
of the softmax. The loop is nanoGPT train.py's, in float32 on the CPU:
  - get_batch: batch_size random windows of block_size + 1 tokens from np.memmap(uint16) train.bin/val.bin
  - lr: linear warmup lr * (it + 1) / (warmup_iters + 1), cosine decay to min_lr until lr_decay_iters,
    then min_lr (constant learning_rate with --decay_lr 0)
  - at iter_num % eval_interval == 0: estimate_loss over eval_iters batches of train and of val
    (model.eval(), no grad); keeps the best val loss
  - gradient_accumulation_steps micro-steps, each loss divided by the number of micro-steps, the next
    batch fetched right after each forward; clip_grad_norm_(grad_clip) when grad_clip > 0; AdamW with
    weight decay on the parameters with dim >= 2 and none on the rest; zero_grad(set_to_none=True)
  - every log_interval: the last micro-step's loss and the time of the iteration
  - iterations 0..max_iters inclusive (the loop stops once iter_num > max_iters)
Attention is nanoGPT's non-flash path (torch 1.13 has no scaled_dot_product_attention): the masked
T x T softmax. Initialisation is nanoGPT's: weights N(0, 0.02), c_proj weights N(0, 0.02/sqrt(2L)),
zero biases, LayerNorm weights 1.

Defaults are nanoGPT's shakespeare_char CPU recipe (README: "best validation loss 1.88"):
    python3 tools/torch_train.py --data_dir data/shakespeare_char
is the same as
    python3 tools/torch_train.py --data_dir data/shakespeare_char --batch_size 12 --block_size 64 \\
        --n_layer 4 --n_head 4 --n_embd 128 --max_iters 2000 --lr_decay_iters 2000 --dropout 0 \\
        --eval_iters 20 --eval_interval 250 --log_interval 10 --learning_rate 1e-3 --min_lr 1e-4 \\
        --beta2 0.99 --warmup_iters 100 --weight_decay 0.1 --grad_clip 1.0 --bias 0 --seed 1337
The data dir holds train.bin and val.bin (raw uint16 token ids, as nanoGPT's prepare.py writes them);
the vocabulary size comes from --vocab_size.

At the end it prints labelled lines for a benchmark script to read:
    best_val_loss  the lowest val loss of all evaluations
    final_val_loss the val loss of the last evaluation
    iters          optimizer steps taken (max_iters + 1)
    wall_s         seconds for the whole loop, evaluations included
    train_s        seconds spent in training iterations (batches, forward, backward, clip, AdamW)
    eval_s         seconds spent in estimate_loss
    ms_per_iter    train_s / iters * 1000 (evaluations excluded)
    tokens_per_s   training tokens per second of train_s
"""
import argparse
import ctypes
import math
import os
import sys
import time

# torch's OpenMP threads and OpenBLAS's own pthreads share the cores; with libgomp's default spin-wait
# the OpenMP workers keep spinning after each elementwise op while OpenBLAS wants those cores (2x slower
# per iteration on a 2-core machine). Must be set before libgomp loads, i.e. before torch is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402


# ----------------------------------------------------------------------------------------------------
# model


class LayerNorm(nn.Module):
    """LayerNorm with an optional bias (PyTorch's nn.LayerNorm cannot leave out only the bias)."""

    def __init__(self, n, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.bias = nn.Parameter(torch.zeros(n)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, a):
        super().__init__()
        assert a.n_embd % a.n_head == 0
        self.n_head = a.n_head
        self.c_attn = nn.Linear(a.n_embd, 3 * a.n_embd, bias=a.bias)  # q, k, v in that order
        self.c_proj = nn.Linear(a.n_embd, a.n_embd, bias=a.bias)
        self.attn_dropout = nn.Dropout(a.dropout)
        self.resid_dropout = nn.Dropout(a.dropout)
        mask = torch.tril(torch.ones(a.block_size, a.block_size, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, a.block_size, a.block_size), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, NH, T, hs)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, NH, T, T)
        att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.c_fc = nn.Linear(a.n_embd, 4 * a.n_embd, bias=a.bias)
        self.c_proj = nn.Linear(4 * a.n_embd, a.n_embd, bias=a.bias)
        self.dropout = nn.Dropout(a.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))  # exact erf GELU


class Block(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.ln_1 = LayerNorm(a.n_embd, a.bias)
        self.attn = CausalSelfAttention(a)
        self.ln_2 = LayerNorm(a.n_embd, a.bias)
        self.mlp = MLP(a)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.V = a.vocab_size
        self.Vp = (a.vocab_size + 63) // 64 * 64
        self.block_size = a.block_size
        self.wte = nn.Embedding(self.Vp, a.n_embd)  # also the lm_head (tied)
        self.wpe = nn.Embedding(a.block_size, a.n_embd)
        self.drop = nn.Dropout(a.dropout)
        self.h = nn.ModuleList([Block(a) for _ in range(a.n_layer)])
        self.ln_f = LayerNorm(a.n_embd, a.bias)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * a.n_layer))
        with torch.no_grad():
            self.wte.weight[self.V:].zero_()  # padded rows: zero, and they stay zero

    def forward(self, idx, targets):
        B, T = idx.shape
        assert T <= self.block_size
        pos = torch.arange(T, dtype=torch.long)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        logits = F.linear(x, self.wte.weight[:self.V])  # the padded rows never reach the softmax
        loss = F.cross_entropy(logits.view(-1, self.V), targets.view(-1))
        return logits, loss


# ----------------------------------------------------------------------------------------------------
# environment


def blas_in_use():
    """The BLAS/LAPACK shared objects this process has mapped (what torch's matmuls call)."""
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if "blas" in path or "lapack" in path or "mkl" in path:
                libs.add(path)
    return sorted(libs)


def set_threads(n):
    """torch's intra-op threads and, when torch's matmuls go to OpenBLAS, OpenBLAS's own threads."""
    torch.set_num_threads(n)
    for path in blas_in_use():
        if "openblas" in os.path.basename(path):
            try:
                ctypes.CDLL(path).openblas_set_num_threads(n)
            except (OSError, AttributeError):
                pass


# ----------------------------------------------------------------------------------------------------
# training


def parse_args(argv):
    p = argparse.ArgumentParser(description="nanoGPT's train.py loop on the CPU (see the file's doc)")

    def flag(s):
        return s.lower() in ("1", "true", "yes")

    p.add_argument("--data_dir", default="data/shakespeare_char")
    p.add_argument("--vocab_size", type=int, default=65)
    p.add_argument("--batch_size", type=int, default=12)
    p.add_argument("--block_size", type=int, default=64)
    p.add_argument("--n_layer", type=int, default=4)
    p.add_argument("--n_head", type=int, default=4)
    p.add_argument("--n_embd", type=int, default=128)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--bias", type=flag, default=False, help="0/1 (nanoGPT's default: False)")
    p.add_argument("--max_iters", type=int, default=2000)
    p.add_argument("--lr_decay_iters", type=int, default=2000)
    p.add_argument("--decay_lr", type=flag, default=True)
    p.add_argument("--learning_rate", type=float, default=1e-3)
    p.add_argument("--min_lr", type=float, default=1e-4)
    p.add_argument("--warmup_iters", type=int, default=100)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.99)
    p.add_argument("--weight_decay", type=float, default=0.1)
    p.add_argument("--grad_clip", type=float, default=1.0)
    p.add_argument("--gradient_accumulation_steps", type=int, default=1)
    p.add_argument("--eval_interval", type=int, default=250)
    p.add_argument("--eval_iters", type=int, default=20)
    p.add_argument("--log_interval", type=int, default=10)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--threads", type=int, default=os.cpu_count(),
                   help="torch.set_num_threads and OpenBLAS threads (default: all cores)")
    p.add_argument("--foreach", type=flag, default=False,
                   help="AdamW(foreach=...); torch 1.13 has no fused AdamW; single-tensor is faster "
                        "for these small models on the CPU")
    return p.parse_args(argv)


def main(argv=None):
    a = parse_args(argv)
    set_threads(a.threads)
    torch.manual_seed(a.seed)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"OMP_WAIT_POLICY {os.environ.get('OMP_WAIT_POLICY')}, "
          f"BLAS {' '.join(blas_in_use()) or 'none mapped'}")

    def get_batch(split):
        # a fresh memmap per batch, as nanoGPT does (it avoids a memory leak of long-lived memmaps)
        data = np.memmap(os.path.join(a.data_dir, f"{split}.bin"), dtype=np.uint16, mode="r")
        ix = torch.randint(len(data) - a.block_size, (a.batch_size,))
        x = torch.stack([torch.from_numpy(data[i:i + a.block_size].astype(np.int64)) for i in ix])
        y = torch.stack([torch.from_numpy(data[i + 1:i + 1 + a.block_size].astype(np.int64))
                         for i in ix])
        return x, y

    def get_lr(it):
        if it < a.warmup_iters:
            return a.learning_rate * (it + 1) / (a.warmup_iters + 1)
        if it > a.lr_decay_iters:
            return a.min_lr
        ratio = (it - a.warmup_iters) / (a.lr_decay_iters - a.warmup_iters)
        coeff = 0.5 * (1.0 + math.cos(math.pi * ratio))
        return a.min_lr + coeff * (a.learning_rate - a.min_lr)

    model = GPT(a)
    nparams = sum(p.numel() for p in model.parameters()) - model.wpe.weight.numel()
    print(f"number of parameters: {nparams / 1e6:.2f}M (V {model.V}, Vp {model.Vp}; wpe excluded)")
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    nodecay = [p for p in params if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": a.weight_decay}, {"params": nodecay, "weight_decay": 0.0}],
        lr=a.learning_rate, betas=(a.beta1, a.beta2), foreach=a.foreach)
    print(f"decayed tensors {len(decay)} ({sum(p.numel() for p in decay):,} parameters), "
          f"non-decayed tensors {len(nodecay)} ({sum(p.numel() for p in nodecay):,} parameters)")

    @torch.no_grad()
    def estimate_loss():
        out = {}
        model.eval()
        for split in ("train", "val"):
            losses = torch.zeros(a.eval_iters)
            for k in range(a.eval_iters):
                X, Y = get_batch(split)
                _, loss = model(X, Y)
                losses[k] = loss.item()
            out[split] = losses.mean().item()
        model.train()
        return out

    best_val_loss, final_val_loss = float("inf"), float("nan")
    train_s = eval_s = 0.0
    iter_num = 0
    X, Y = get_batch("train")
    t_start = t0 = time.time()
    while True:
        lr = get_lr(iter_num) if a.decay_lr else a.learning_rate
        for group in optimizer.param_groups:
            group["lr"] = lr
        if iter_num % a.eval_interval == 0:
            te = time.time()
            losses = estimate_loss()
            eval_s += time.time() - te
            print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}",
                  flush=True)
            final_val_loss = losses["val"]
            best_val_loss = min(best_val_loss, losses["val"])
        tt = time.time()
        for micro_step in range(a.gradient_accumulation_steps):
            _, loss = model(X, Y)
            loss = loss / a.gradient_accumulation_steps
            X, Y = get_batch("train")  # fetched while nanoGPT's GPU would be busy
            loss.backward()
        if a.grad_clip != 0.0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        t1 = time.time()
        train_s += t1 - tt
        dt, t0 = t1 - t0, t1
        if iter_num % a.log_interval == 0:
            lossf = loss.item() * a.gradient_accumulation_steps
            print(f"iter {iter_num}: loss {lossf:.4f}, time {dt * 1000:.2f}ms", flush=True)
        iter_num += 1
        if iter_num > a.max_iters:
            break
    wall_s = time.time() - t_start
    tokens = iter_num * a.gradient_accumulation_steps * a.batch_size * a.block_size
    print(f"best_val_loss {best_val_loss:.4f}")
    print(f"final_val_loss {final_val_loss:.4f}")
    print(f"iters {iter_num}")
    print(f"wall_s {wall_s:.1f}")
    print(f"train_s {train_s:.1f}")
    print(f"eval_s {eval_s:.1f}")
    print(f"ms_per_iter {train_s / iter_num * 1000:.2f}")
    print(f"tokens_per_s {tokens / train_s:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
