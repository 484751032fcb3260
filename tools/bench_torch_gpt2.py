#!/usr/bin/env python3
"""bench_torch_gpt2.py - the PyTorch peer of `nanogpt bench`: the same GPT-2 trained the way a PyTorch user
would make it fast on one GPU (torch.compile, F.scaled_dot_product_attention, fused AdamW, bf16 autocast).

    python3 tools/bench_torch_gpt2.py [--steps 20 --warmup 3 --batch_size 12 --grad_accum 1 ...]
    python3 tools/bench_torch_gpt2.py --kernels [--chunk 4096]     torch.matmul at every GEMM shape of a step,
                                                                   scaled_dot_product_attention, LayerNorm and
                                                                   the loss over one classifier chunk, and
                                                                   decoding's products (1 and 10 rows)

The model is nanoGPT's GPT (pre-LayerNorm blocks, GELU MLP, tied lm_head, no biases by default, vocabulary
padded to 50304 as nanoGPT does), on random tokens. Defaults are GPT-2 124M at block 1024 and the batch of
`nanogpt bench` with nanoGPT's defaults (12 sequences per micro-batch). Step times are taken with
torch.cuda.synchronize() around each optimizer step; tokens/s uses the median. Memory: the peak that
torch's allocator handed out and reserved, and the device memory in use (cudaMemGetInfo) at the end.

Lines for test/gpu.sh to read:
    bench_result tokens_per_s=... memory_bytes=...      (training mode)
    kernel NAME MS ms X TFLOP/s (or X GB/s)              (--kernels, the names `nanogpt bench --kernels` prints)
Needs a CUDA GPU and PyTorch 2 (torch.compile, scaled_dot_product_attention); it says so and exits 2 otherwise.
"""
import argparse
import math
import sys
import time

import torch
import torch.nn as nn
from torch.nn import functional as F


class Block(nn.Module):
    def __init__(self, C, NH, bias, dropout):
        super().__init__()
        self.NH, self.dropout = NH, dropout
        self.ln_1 = nn.LayerNorm(C, bias=bias)
        self.c_attn = nn.Linear(C, 3 * C, bias=bias)
        self.c_proj = nn.Linear(C, C, bias=bias)
        self.ln_2 = nn.LayerNorm(C, bias=bias)
        self.c_fc = nn.Linear(C, 4 * C, bias=bias)
        self.mlp_proj = nn.Linear(4 * C, C, bias=bias)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.NH, C // self.NH).transpose(1, 2) for t in (q, k, v))
        p = self.dropout if self.training else 0.0  # nanoGPT's four places: attention, both residual branches, embeddings
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        x = x + F.dropout(self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C)), p, self.training)
        return x + F.dropout(self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)))), p, self.training)


class GPT(nn.Module):
    def __init__(self, L, NH, C, T, Vp, bias, dropout):
        super().__init__()
        self.dropout = dropout
        self.wte = nn.Embedding(Vp, C)
        self.wpe = nn.Embedding(T, C)
        self.blocks = nn.ModuleList([Block(C, NH, bias, dropout) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C, bias=bias)
        self.lm_head = nn.Linear(C, Vp, bias=False)
        self.lm_head.weight = self.wte.weight
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith(("c_proj.weight", "mlp_proj.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = F.dropout(self.wte(idx) + self.wpe(torch.arange(T, device=idx.device)), self.dropout, self.training)
        for b in self.blocks:
            x = b(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.view(-1))


DECODE_CALLS = 32  # nanogpt.c's


def timed(fn, reps=5):
    """best of reps calls after one warm-up call, in seconds"""
    fn()
    torch.cuda.synchronize()
    best = 1e30
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best


def kernels(a):
    dev, dt = "cuda", torch.bfloat16
    N, C = a.batch_size * a.block_size, a.n_embd
    shapes = [("qkv", N, C, 3 * C), ("attn proj", N, C, C), ("fc", N, C, 4 * C), ("mlp proj", N, 4 * C, C),
              ("classifier chunk", a.chunk, C, a.vocab_padded)]
    for name, n, c, oc in shapes:
        x = torch.randn(n, c, device=dev, dtype=dt)
        w = torch.randn(oc, c, device=dev, dtype=dt)
        dy = torch.randn(n, oc, device=dev, dtype=dt)
        s = timed(lambda: torch.matmul(x, w.t()))
        print(f"kernel {'matmul ' + name + ' fwd':31s} {1e3 * s:10.5f} ms {2 * n * c * oc / s / 1e12:.1f} TFLOP/s")
        # the backward's two products, each alone: the input gradient, and the weight gradient added into the
        # gradient that is there (beta = 1), as nanogpt's accumulates
        dw = torch.zeros(oc, c, device=dev, dtype=dt)
        for product, fn in (("dinp", lambda: torch.matmul(dy, w)), ("dweight", lambda: dw.addmm_(dy.t(), x))):
            s = timed(fn)
            print(f"kernel {'matmul ' + name + ' ' + product:31s} {1e3 * s:10.5f} ms {2 * n * c * oc / s / 1e12:.1f} TFLOP/s")
    B, NH, T, hs = a.batch_size, a.n_head, a.block_size, a.n_embd // a.n_head
    q, k, v = (torch.randn(B, NH, T, hs, device=dev, dtype=dt, requires_grad=True) for _ in range(3))
    causal = 2.0 * 2.0 * B * NH * (T * (T + 1) / 2) * hs
    s = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    print(f"kernel {'attention fwd':31s} {1e3 * s:10.5f} ms {causal / s / 1e12:.1f} TFLOP/s")
    do = torch.randn(B, NH, T, hs, device=dev, dtype=dt)

    def fwd_bwd():
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y.backward(do)
    s_fb = timed(fwd_bwd)
    s_b = max(s_fb - s, 1e-9)
    print(f"kernel {'attention bwd':31s} {1e3 * s_b:10.5f} ms {2.5 * causal / s_b / 1e12:.1f} TFLOP/s")

    # the memory-bound ops, in GB/s of the bytes each must move at least (its inputs read once, its outputs
    # written once): LayerNorm over the N x C activations, and the loss over one classifier chunk as autocast
    # runs it (F.cross_entropy upcasts the bf16 logits to fp32), forward and backward, in eager mode. LayerNorm's
    # backward here writes dx (3 N C values moved); nanogpt's adds into dinp (4 N C): test/gpu.sh compares times
    x = torch.randn(N, C, device=dev, dtype=dt, requires_grad=True)
    g, b = torch.randn(C, device=dev, dtype=dt, requires_grad=True), torch.randn(C, device=dev, dtype=dt, requires_grad=True)
    dy = torch.randn(N, C, device=dev, dtype=dt)
    s = timed(lambda: F.layer_norm(x, (C,), g, b))
    print(f"kernel {'layernorm fwd':31s} {1e3 * s:10.5f} ms {2 * N * C * 2 / s / 1e9:.0f} GB/s")

    def ln_fwd_bwd():
        x.grad = g.grad = b.grad = None
        F.layer_norm(x, (C,), g, b).backward(dy)
    s_b = max(timed(ln_fwd_bwd) - s, 1e-9)
    print(f"kernel {'layernorm bwd':31s} {1e3 * s_b:10.5f} ms {3 * N * C * 2 / s_b / 1e9:.0f} GB/s")
    z = torch.randn(a.chunk, a.vocab_padded, device=dev, dtype=dt, requires_grad=True)
    t = torch.randint(0, a.vocab_size, (a.chunk,), device=dev)

    def loss_fwd_bwd():
        z.grad = None
        F.cross_entropy(z.float(), t).backward()
    s = timed(loss_fwd_bwd)
    print(f"kernel {'classifier loss':31s} {1e3 * s:10.5f} ms {2 * a.chunk * a.vocab_padded * 2 / s / 1e9:.0f} GB/s")

    # decoding's products (sampling with a KV cache): 1 and 10 rows, one a sample, by each weight matrix, in GB/s
    # of the bytes a call must move at least (the weights, the rows in and out); DECODE_CALLS calls back to back a
    # timing, as a decode runs them and as `nanogpt bench --kernels` times its own
    for name, c, oc in (("qkv", C, 3 * C), ("attn proj", C, C), ("fc", C, 4 * C), ("mlp proj", 4 * C, C), ("classifier", C, a.vocab_padded)):
        w = torch.randn(oc, c, device=dev, dtype=dt)
        for rows in (1, 10):
            x = torch.randn(rows, c, device=dev, dtype=dt)

            def calls():
                for _ in range(DECODE_CALLS):
                    torch.matmul(x, w.t())
            s = timed(calls) / DECODE_CALLS
            print(f"kernel {f'decode {name} x{rows}':31s} {1e3 * s:10.5f} ms {(oc * c + rows * c + rows * oc) * 2 / s / 1e9:.0f} GB/s")

    # decoding's attention: one new position of 1 and of 10 sequences against a KV cache of the whole block, in GB/s
    # of the bytes a call must move at least (the cache's keys and values, the new rows of q, k, v and the output)
    for rows in (1, 10):
        q = torch.randn(rows, NH, 1, hs, device=dev, dtype=dt)
        kc, vc = (torch.randn(rows, NH, T, hs, device=dev, dtype=dt) for _ in range(2))

        def calls():
            for _ in range(DECODE_CALLS):
                F.scaled_dot_product_attention(q, kc, vc)
        s = timed(calls) / DECODE_CALLS
        print(f"kernel {f'kv-cache attention x{rows}':31s} {1e3 * s:10.5f} ms {(rows * 2 * T * C + rows * 4 * C) * 2 / s / 1e9:.0f} GB/s")


def train(a):
    torch.manual_seed(1337)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    model = GPT(a.n_layer, a.n_head, a.n_embd, a.block_size, a.vocab_padded, bool(a.bias), a.dropout).cuda()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), fused=True)
    step_model = torch.compile(model) if a.compile else model
    B, T, GA = a.batch_size, a.block_size, a.grad_accum
    gen = torch.Generator(device="cuda").manual_seed(1)
    times = []
    for i in range(a.warmup + a.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(GA):
            idx = torch.randint(0, a.vocab_size, (B, T), device="cuda", generator=gen)
            tgt = torch.randint(0, a.vocab_size, (B, T), device="cuda", generator=gen)
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                loss = step_model(idx, tgt) / GA
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
    times.sort()
    med = times[len(times) // 2]
    free, total = torch.cuda.mem_get_info()
    tok = B * T * GA / med
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}: n_layer {a.n_layer}, n_head {a.n_head}, "
          f"n_embd {a.n_embd}, block_size {T}, vocab {a.vocab_size}, dropout {a.dropout}, micro-batch {B} x accumulation {GA}, compile {bool(a.compile)}")
    print(f"step         {1e3 * med:.2f} ms (median), {tok:.0f} tokens/s")
    print(f"memory       allocated peak {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB, reserved peak "
          f"{torch.cuda.max_memory_reserved() / 2**30:.2f} GiB, device in use {(total - free) / 2**30:.2f} GiB")
    print(f"bench_result tokens_per_s={tok:.0f} memory_bytes={total - free}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n_layer", type=int, default=12)
    p.add_argument("--n_head", type=int, default=12)
    p.add_argument("--n_embd", type=int, default=768)
    p.add_argument("--block_size", type=int, default=1024)
    p.add_argument("--vocab_size", type=int, default=50257)
    p.add_argument("--bias", type=int, default=0)
    p.add_argument("--dropout", type=float, default=0.0, help="nanoGPT's dropout (its shakespeare_char recipe: 0.2)")
    p.add_argument("--batch_size", type=int, default=12)
    p.add_argument("--grad_accum", type=int, default=1)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--compile", type=int, default=1)
    p.add_argument("--kernels", action="store_true")
    p.add_argument("--chunk", type=int, default=4096, help="rows of the classifier chunk (nanogpt bench prints its own)")
    a = p.parse_args()
    a.vocab_padded = (a.vocab_size + 63) // 64 * 64
    if not torch.cuda.is_available() or not hasattr(F, "scaled_dot_product_attention"):
        print(f"bench_torch_gpt2.py needs a CUDA GPU and PyTorch 2 (this is torch {torch.__version__}, "
              f"cuda {'yes' if torch.cuda.is_available() else 'no'})")
        sys.exit(2)
    kernels(a) if a.kernels else train(a)


if __name__ == "__main__":
    main()
