#!/usr/bin/env python3
"""reference.py - the PyTorch reference GPT-2 that nanogpt (C) is tested against, and its fixture writer.

The model is GPT-2 exactly as nanoGPT defines it (token + learned position embeddings, pre-LayerNorm
blocks, causal self-attention with one qkv Linear split q,k,v in that order, exact-erf GELU MLP, final
LayerNorm, lm_head tied to wte, eps 1e-5, dropout 0), with the two changes nanogpt makes:
  - the vocabulary is padded to Vp = the next multiple of 64: wte has Vp rows, rows V..Vp-1 are zero;
  - the padded logits never enter the softmax: the loss is the mean cross-entropy over all B*T positions
    of a softmax over the first V logits only (so the padded rows get zero gradient and stay zero).
With bias=0 every Linear and every LayerNorm has no bias (nanoGPT's bias=False).

Parameters live in llm.c's order and layout, one tensor per kind with the layer as the first dimension
(Linear weights are (out_features, in_features) as in PyTorch); with bias=0 the tensors marked * are absent:
    wte (Vp, C), wpe (block_size, C), ln1w (L, C), ln1b* (L, C), qkvw (L, 3C, C), qkvb* (L, 3C),
    attprojw (L, C, C), attprojb* (L, C), ln2w (L, C), ln2b* (L, C), fcw (L, 4C, C), fcb* (L, 4C),
    fcprojw (L, C, 4C), fcprojb* (L, C), lnfw (C), lnfb* (C)

Fixture file (little-endian):
    int32   header[16]   magic 20261121, version 1, V, Vp, block_size, L, NH, C, bias, B, T, nsteps, 0,0,0,0
    float32 hyper[8]     lr, beta1, beta2, eps, weight_decay, grad_clip, 0, 0
    int32   tokens[B*T], targets[B*T]     row-major (B, T)
    float32 params[P]                     all parameters in the order above
    float32 logits[B*T*V]                 first V columns only
    float32 loss
    float32 grads[P]                      d loss / d params (padded wte rows: 0)
    float32 step_losses[nsteps]           nsteps AdamW steps on the same batch: the loss before each update
    float32 params_after[P]               the parameters after the nsteps updates
Each step is nanoGPT train.py's: forward + backward, clip_grad_norm_(all params, grad_clip) when
grad_clip > 0 (torch's rule: scale by min(1, grad_clip / (norm + 1e-6))), then torch.optim.AdamW with
weight_decay on wte, wpe, qkvw, attprojw, fcw, fcprojw (nanoGPT's dim >= 2 parameters) and 0 on the rest,
constant lr. Everything is computed in float64 from the float32-rounded parameters and hyperparameters
that the file stores (so the file is exact ground truth for what a reader of it starts from), then
stored as float32.

Known float32 sensitivity, for whoever sets the C test's tolerances: the gradient of the key part of
the qkv bias (qkvb[:, C:2C]) is exactly zero in exact arithmetic (softmax ignores a score shift that is
the same for every key), so in float32 it is rounding noise (~1e-10 here), and AdamW with eps 1e-8 turns
that into parameter moves of up to lr * noise / (noise + eps) per step, while the float64 truth leaves
those entries unchanged. Gradients that are sums of cancelling terms (small entries of qkvw, fcprojw) get
the same amplification, milder. PyTorch in float32 lands within 1.5e-4 (max abs) of params_after.

The parameters are deterministic from --seed (numpy's legacy RandomState, whose streams are frozen):
weights N(0, 0.02), attprojw and fcprojw N(0, 0.02/sqrt(2L)); to make the test strong the things nanoGPT
initialises to constants are randomised too: LayerNorm weights 1 + N(0, 0.1), all biases N(0, 0.02).
Tokens and targets are uniform in [0, V) from the same stream.

Regenerate the committed fixtures (byte-identical; run from the repository root with a python3 that has
torch, e.g. Debian's /usr/bin/python3 with python3-torch 1.13):
    python3 tools/reference.py fixture test/fixtures/gpt_tiny_bias.bin --bias 1
    python3 tools/reference.py fixture test/fixtures/gpt_tiny_nobias.bin --bias 0
(defaults: --seed 1337 --V 37 --block_size 16 --B 3 --T 12 --L 2 --NH 2 --C 32 --nsteps 10
 --lr 1e-2 --beta1 0.9 --beta2 0.95 --eps 1e-8 --weight_decay 0.1 --grad_clip 1.5; with grad_clip 1.5
 some of the 10 steps clip and some do not, in both fixtures).
The float64 math runs on one thread so that it is deterministic.
Sanity-check a fixture (reload it, recompute it in float64 and in float32, finite-difference a few
gradient entries, report the differences; exit status 1 on a mismatch):
    python3 tools/reference.py verify test/fixtures/gpt_tiny_bias.bin
"""
import argparse
import math
import os
import struct
import sys

os.environ["OMP_NUM_THREADS"] = "1"  # one thread: deterministic float64 sums
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(1)

MAGIC = 20261121
VERSION = 1
LN_EPS = 1e-5

# (name, present only with bias=1, shape as a function of the config), in file order
PARAM_SPECS = [
    ("wte", False, lambda c: (c["Vp"], c["C"])),
    ("wpe", False, lambda c: (c["block_size"], c["C"])),
    ("ln1w", False, lambda c: (c["L"], c["C"])),
    ("ln1b", True, lambda c: (c["L"], c["C"])),
    ("qkvw", False, lambda c: (c["L"], 3 * c["C"], c["C"])),
    ("qkvb", True, lambda c: (c["L"], 3 * c["C"])),
    ("attprojw", False, lambda c: (c["L"], c["C"], c["C"])),
    ("attprojb", True, lambda c: (c["L"], c["C"])),
    ("ln2w", False, lambda c: (c["L"], c["C"])),
    ("ln2b", True, lambda c: (c["L"], c["C"])),
    ("fcw", False, lambda c: (c["L"], 4 * c["C"], c["C"])),
    ("fcb", True, lambda c: (c["L"], 4 * c["C"])),
    ("fcprojw", False, lambda c: (c["L"], c["C"], 4 * c["C"])),
    ("fcprojb", True, lambda c: (c["L"], c["C"])),
    ("lnfw", False, lambda c: (c["C"],)),
    ("lnfb", True, lambda c: (c["C"],)),
]
# the parameters nanoGPT decays (its dim >= 2 tensors; ours carry an extra layer dimension)
DECAY = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"}


def padded_vocab(V):
    return (V + 63) // 64 * 64


def param_shapes(cfg):
    """[(name, shape)] in file order for this config (bias tensors only when cfg['bias'])."""
    return [(n, f(cfg)) for n, isbias, f in PARAM_SPECS if cfg["bias"] or not isbias]


# ----------------------------------------------------------------------------------------------------
# model


def forward(P, cfg, tokens, targets):
    """logits (B, T, V) and the mean cross-entropy loss; P maps names to tensors (any float dtype)."""
    B, T = tokens.shape
    C, NH, L, V = cfg["C"], cfg["NH"], cfg["L"], cfg["V"]
    hs = C // NH
    bias = bool(cfg["bias"])

    def b(name, l=None):
        if not bias:
            return None
        return P[name] if l is None else P[name][l]

    x = P["wte"][tokens] + P["wpe"][:T]  # (B, T, C)
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(L):
        h = F.layer_norm(x, (C,), P["ln1w"][l], b("ln1b", l), LN_EPS)
        qkv = F.linear(h, P["qkvw"][l], b("qkvb", l))  # (B, T, 3C)
        q, k, v = qkv.split(C, dim=2)
        q = q.view(B, T, NH, hs).transpose(1, 2)  # (B, NH, T, hs)
        k = k.view(B, T, NH, hs).transpose(1, 2)
        v = v.view(B, T, NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, NH, T, T)
        att = att.masked_fill(~causal, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + F.linear(y, P["attprojw"][l], b("attprojb", l))
        h = F.layer_norm(x, (C,), P["ln2w"][l], b("ln2b", l), LN_EPS)
        h = F.gelu(F.linear(h, P["fcw"][l], b("fcb", l)))  # exact erf GELU
        x = x + F.linear(h, P["fcprojw"][l], b("fcprojb", l))
    x = F.layer_norm(x, (C,), P["lnfw"], b("lnfb"), LN_EPS)
    # tied lm_head; the padded rows V..Vp-1 of wte give logits that are kept out of the softmax,
    # which is the same as never computing them
    logits = F.linear(x, P["wte"][:V])  # (B, T, V)
    loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
    return logits, loss


def train_steps(P, cfg, hyper, tokens, targets, nsteps, verbose=False):
    """nanoGPT train.py's step nsteps times on one batch. Updates P in place.
    Returns (step_losses, grad_norms)."""
    names = [n for n, _ in param_shapes(cfg)]
    groups = [
        {"params": [P[n] for n in names if n in DECAY], "weight_decay": hyper["weight_decay"]},
        {"params": [P[n] for n in names if n not in DECAY], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=hyper["lr"], betas=(hyper["beta1"], hyper["beta2"]),
                            eps=hyper["eps"], foreach=False)
    losses, norms = [], []
    for step in range(nsteps):
        _, loss = forward(P, cfg, tokens, targets)
        loss.backward()
        losses.append(loss.item())
        # the norm before clipping (clip_grad_norm_ returns it); with grad_clip 0 compute it anyway
        if hyper["grad_clip"] > 0:
            norm = torch.nn.utils.clip_grad_norm_([P[n] for n in names], hyper["grad_clip"])
        else:
            norm = torch.norm(torch.stack([P[n].grad.norm() for n in names]))
        norms.append(norm.item())
        opt.step()
        opt.zero_grad(set_to_none=True)
        if verbose:
            clipped = hyper["grad_clip"] > 0 and norms[-1] > hyper["grad_clip"]
            print(f"  step {step}: loss {losses[-1]:.6f}  grad norm {norms[-1]:.4f}"
                  f"{'  (clipped)' if clipped else ''}")
    return losses, norms


# ----------------------------------------------------------------------------------------------------
# parameters and fixtures


def init_params(cfg, seed):
    """Random float32-representable parameters and a batch, deterministic from seed.
    Returns ({name: float32 ndarray}, tokens, targets)."""
    rng = np.random.RandomState(seed)
    std = 0.02
    proj_std = 0.02 / math.sqrt(2 * cfg["L"])
    V = cfg["V"]
    out = {}
    for name, shape in param_shapes(cfg):
        if name == "wte":
            a = np.zeros(shape)
            a[:V] = rng.standard_normal((V,) + shape[1:]) * std  # padded rows stay zero
        elif name in ("attprojw", "fcprojw"):
            a = rng.standard_normal(shape) * proj_std
        elif name in ("ln1w", "ln2w", "lnfw"):
            a = 1.0 + 0.1 * rng.standard_normal(shape)
        else:  # the other weights and every bias
            a = rng.standard_normal(shape) * std
        out[name] = a.astype(np.float32)
    tokens = rng.randint(0, V, size=(cfg["B"], cfg["T"])).astype(np.int32)
    targets = rng.randint(0, V, size=(cfg["B"], cfg["T"])).astype(np.int32)
    return out, tokens, targets


def to_torch(params, dtype):
    return {n: torch.tensor(a, dtype=dtype, requires_grad=True) for n, a in params.items()}


def flat(P, cfg, what="data"):
    parts = []
    for n, _ in param_shapes(cfg):
        t = P[n] if what == "data" else P[n].grad
        parts.append(t.detach().reshape(-1).numpy().astype(np.float32))
    return np.concatenate(parts)


def compute(params, cfg, hyper, tokens, targets, dtype, verbose=False):
    """Everything the fixture holds after the inputs, computed in dtype, returned as float32 arrays."""
    tok = torch.tensor(tokens, dtype=torch.long)
    tgt = torch.tensor(targets, dtype=torch.long)
    P = to_torch(params, dtype)
    logits, loss = forward(P, cfg, tok, tgt)
    loss.backward()
    res = {
        "logits": logits.detach().numpy().astype(np.float32).reshape(-1),
        "loss": np.float32(loss.item()),
        "grads": flat(P, cfg, "grad"),
    }
    P = to_torch(params, dtype)
    losses, norms = train_steps(P, cfg, hyper, tok, tgt, cfg["nsteps"], verbose)
    res["step_losses"] = np.array(losses, dtype=np.float32)
    res["params_after"] = flat(P, cfg)
    res["grad_norms"] = norms
    return res


def f32(x):
    return float(np.float32(x))


def write_fixture(path, cfg, hyper, params, tokens, targets, res):
    hdr = [MAGIC, VERSION, cfg["V"], cfg["Vp"], cfg["block_size"], cfg["L"], cfg["NH"], cfg["C"],
           int(cfg["bias"]), cfg["B"], cfg["T"], cfg["nsteps"], 0, 0, 0, 0]
    hyp = [hyper["lr"], hyper["beta1"], hyper["beta2"], hyper["eps"], hyper["weight_decay"],
           hyper["grad_clip"], 0.0, 0.0]
    flatp = np.concatenate([params[n].reshape(-1) for n, _ in param_shapes(cfg)])
    with open(path, "wb") as f:
        f.write(struct.pack("<16i", *hdr))
        f.write(struct.pack("<8f", *hyp))
        f.write(np.asarray(tokens, dtype="<i4").tobytes())
        f.write(np.asarray(targets, dtype="<i4").tobytes())
        f.write(flatp.astype("<f4").tobytes())
        f.write(res["logits"].astype("<f4").tobytes())
        f.write(np.array([res["loss"]], dtype="<f4").tobytes())
        f.write(res["grads"].astype("<f4").tobytes())
        f.write(res["step_losses"].astype("<f4").tobytes())
        f.write(res["params_after"].astype("<f4").tobytes())


def read_fixture(path):
    """Returns (cfg, hyper, params {name: float32 array}, tokens, targets, stored results)."""
    with open(path, "rb") as f:
        data = f.read()
    hdr = struct.unpack_from("<16i", data, 0)
    if hdr[0] != MAGIC or hdr[1] != VERSION:
        raise ValueError(f"{path}: magic/version {hdr[0]}/{hdr[1]}, expected {MAGIC}/{VERSION}")
    keys = ["V", "Vp", "block_size", "L", "NH", "C", "bias", "B", "T", "nsteps"]
    cfg = dict(zip(keys, hdr[2:12]))
    h = struct.unpack_from("<8f", data, 64)
    hyper = dict(lr=h[0], beta1=h[1], beta2=h[2], eps=h[3], weight_decay=h[4], grad_clip=h[5])
    off = 64 + 32
    BT = cfg["B"] * cfg["T"]
    shapes = param_shapes(cfg)
    P = sum(int(np.prod(s)) for _, s in shapes)

    def take(n, dt):
        nonlocal off
        a = np.frombuffer(data, dtype=dt, count=n, offset=off)
        off += n * 4
        return a.copy()

    tokens = take(BT, "<i4").reshape(cfg["B"], cfg["T"])
    targets = take(BT, "<i4").reshape(cfg["B"], cfg["T"])
    flatp = take(P, "<f4")
    res = {"logits": take(BT * cfg["V"], "<f4"), "loss": take(1, "<f4")[0], "grads": take(P, "<f4"),
           "step_losses": take(cfg["nsteps"], "<f4"), "params_after": take(P, "<f4")}
    if off != len(data):
        raise ValueError(f"{path}: {len(data)} bytes, the header implies {off}")
    params, o = {}, 0
    for n, s in shapes:
        k = int(np.prod(s))
        params[n] = flatp[o:o + k].reshape(s).astype(np.float32)
        o += k
    return cfg, hyper, params, tokens, targets, res


# ----------------------------------------------------------------------------------------------------
# commands


def cmd_fixture(a):
    cfg = dict(V=a.V, Vp=padded_vocab(a.V), block_size=a.block_size, L=a.L, NH=a.NH, C=a.C,
               bias=int(a.bias), B=a.B, T=a.T, nsteps=a.nsteps)
    assert cfg["C"] % cfg["NH"] == 0 and cfg["T"] <= cfg["block_size"]
    # the float64 math uses exactly the float32 values the file stores
    hyper = dict(lr=f32(a.lr), beta1=f32(a.beta1), beta2=f32(a.beta2), eps=f32(a.eps),
                 weight_decay=f32(a.weight_decay), grad_clip=f32(a.grad_clip))
    params, tokens, targets = init_params(cfg, a.seed)
    print(f"{a.out}: {cfg}")
    res = compute(params, cfg, hyper, tokens, targets, torch.float64, verbose=True)
    write_fixture(a.out, cfg, hyper, params, tokens, targets, res)
    nparam = sum(p.size for p in params.values())
    print(f"loss {res['loss']:.6f} -> {res['step_losses'][-1]:.6f} after {cfg['nsteps'] - 1} updates; "
          f"P {nparam}; wrote {os.path.getsize(a.out)} bytes")


def compare(got, want):
    """(max abs diff, max rel diff, where, rms diff); the relative diff floors |want| at 1e-3 of the
    tensor's largest entry, so that entries that are nearly zero are compared absolutely."""
    got = np.asarray(got, dtype=np.float64).reshape(-1)
    want = np.asarray(want, dtype=np.float64).reshape(-1)
    d = np.abs(got - want)
    scale = np.max(np.abs(want))
    rel = d / np.maximum(np.abs(want), 1e-3 * scale + 1e-30)
    return d.max(), rel.max(), int(np.argmax(rel)), float(np.sqrt(np.mean(d * d)))


def cmd_verify(a):
    cfg, hyper, params, tokens, targets, stored = read_fixture(a.file)
    print(f"{a.file}: {cfg}\n  hyper {hyper}")
    ok = True
    # float64 must reproduce the file exactly (up to the last float32 bit); float32 within tolerances.
    # params_after is judged by its absolute difference (the parameters are O(1) and Adam moves each by
    # at most ~lr per step; float32 rounding in gradients that are sums of cancelling terms is amplified
    # by Adam's normalisation, to ~1e-4 here), the rest by the floored relative difference.
    for dtype, tol, tol_abs in ((torch.float64, 1e-6, 1e-6), (torch.float32, a.tol32, a.tol32_params)):
        res = compute(params, cfg, hyper, tokens, targets, dtype)
        print(f"  recomputed in {str(dtype).replace('torch.', '')}: grad norms "
              + " ".join(f"{n:.4f}" for n in res["grad_norms"]))
        for key in ("logits", "loss", "grads", "step_losses", "params_after"):
            dmax, rmax, i, rms = compare(res[key], stored[key])
            bad = (dmax > tol_abs) if key == "params_after" else not (rmax <= tol)
            ok &= not bad
            print(f"    {key:12s} max abs diff {dmax:.3e}  max rel diff {rmax:.3e} (at {i})"
                  f"  rms diff {rms:.3e}"
                  + (f"  FAIL (tol {tol_abs if key == 'params_after' else tol:.0e})" if bad else ""))
    # padded wte rows: zero in, zero gradient, zero out
    V, Vp, C = cfg["V"], cfg["Vp"], cfg["C"]
    pad = slice(V * C, Vp * C)
    padok = not (np.any(params["wte"][V:]) or np.any(stored["grads"][pad])
                 or np.any(stored["params_after"][pad]))
    ok &= padok
    print(f"  padded wte rows stay zero: {'yes' if padok else 'NO'}")
    # central finite differences in float64 on a few entries of every tensor
    rng = np.random.RandomState(0)
    tok = torch.tensor(tokens, dtype=torch.long)
    tgt = torch.tensor(targets, dtype=torch.long)
    offs, o = {}, 0
    for n, s in param_shapes(cfg):
        offs[n] = o
        o += int(np.prod(s))
    worst = 0.0
    for n, s in param_shapes(cfg):
        k = int(np.prod(s)) if n != "wte" else V * C
        for j in rng.choice(k, size=3, replace=False):
            h = 1e-5
            vals = []
            for sign in (1, -1):
                P = {m: torch.tensor(p, dtype=torch.float64) for m, p in params.items()}
                P[n].view(-1)[j] += sign * h
                vals.append(forward(P, cfg, tok, tgt)[1].item())
            fd = (vals[0] - vals[1]) / (2 * h)
            g = float(stored["grads"][offs[n] + j])
            err = abs(fd - g) / max(abs(g), 1e-4)
            worst = max(worst, err)
    fdok = worst < 1e-4
    ok &= fdok
    print(f"  finite differences (3 entries of every tensor): max rel diff {worst:.3e}"
          f"{'' if fdok else '  FAIL'}")
    print("ok" if ok else "FAIL")
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fixture", help="write a fixture")
    f.add_argument("out")
    f.add_argument("--bias", type=int, choices=(0, 1), required=True)
    f.add_argument("--seed", type=int, default=1337)
    f.add_argument("--V", type=int, default=37)
    f.add_argument("--block_size", type=int, default=16)
    f.add_argument("--B", type=int, default=3)
    f.add_argument("--T", type=int, default=12)
    f.add_argument("--L", type=int, default=2)
    f.add_argument("--NH", type=int, default=2)
    f.add_argument("--C", type=int, default=32)
    f.add_argument("--nsteps", type=int, default=10)
    f.add_argument("--lr", type=float, default=1e-2)
    f.add_argument("--beta1", type=float, default=0.9)
    f.add_argument("--beta2", type=float, default=0.95)
    f.add_argument("--eps", type=float, default=1e-8)
    f.add_argument("--weight_decay", type=float, default=0.1)
    f.add_argument("--grad_clip", type=float, default=1.5)
    v = sub.add_parser("verify", help="reload a fixture and recompute it (float64 and float32)")
    v.add_argument("file")
    v.add_argument("--tol32", type=float, default=1e-3,
                   help="max rel diff allowed for the float32 logits, loss, grads, step losses")
    v.add_argument("--tol32_params", type=float, default=5e-4,
                   help="max abs diff allowed for the float32 params_after")
    a = p.parse_args()
    if a.cmd == "fixture":
        cmd_fixture(a)
        return 0
    return cmd_verify(a)


if __name__ == "__main__":
    sys.exit(main())
