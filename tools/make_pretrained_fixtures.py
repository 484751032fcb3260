#!/usr/bin/env python3
"""make_pretrained_fixtures.py - a tiny random GPT-2 in Hugging Face's and llm.c's file formats, and its logits.

test/test_pretrained.c loads these files through nanogpt's readers and checks that every reader gives the
same parameters and that nanogpt's model computes the logits stored here. The model is tiny and random:
    L = 2, NH = 2, C = 24, V = 100 (padded to Vp = 128, not a multiple of 64 unpadded), maxT = 24,
    weights N(0, 0.1), LayerNorm weights 1 + N(0, 0.2), every bias and LayerNorm bias N(0, 0.1)
(numpy's legacy RandomState, seed 1234, whose streams are frozen). The parameters are drawn in Hugging
Face's layout: Conv1D weights are (in, out), the transpose of a Linear's (out, in).

Files written (every one under 100 KB):
    test/fixtures/tiny_gpt2/model.safetensors       F32, names as in Hugging Face's `gpt2` repository (no
                                                    "transformer." prefix), with the attn.bias (F32 causal
                                                    mask, shape [1,1,maxT,maxT]) and attn.masked_bias (F32,
                                                    shape []) buffers a reader must skip; __metadata__
                                                    {"format": "pt"}
    test/fixtures/tiny_gpt2/model_bf16.safetensors  BF16 (round to nearest even), names with the
                                                    "transformer." prefix of a saved GPT2LMHeadModel, a tied
                                                    lm_head.weight copy and BOOL attn.bias buffers to skip
    test/fixtures/tiny_gpt2/model_f16.safetensors   F16 (round to nearest even), plain names, no buffers,
                                                    no __metadata__
    test/fixtures/tiny_gpt2/config.json             where n_head comes from: safetensors files do not store
                                                    it, so nanogpt reads config.json from the folder of the
                                                    .safetensors file, as in a Hugging Face download (the
                                                    usual gpt2 config keys, nested objects and arrays
                                                    included, so the JSON reader sees all value kinds)
    test/fixtures/tiny_gpt2_llmc_v3.bin             llm.c model file, version 3 (fp32)
    test/fixtures/tiny_gpt2_llmc_v5.bin             llm.c model file, version 5 (bf16, round to nearest even)
    test/fixtures/tiny_gpt2_logits.bin              a fixed batch and the model's logits, little-endian:
        int32   header[8]        magic 20261122, version 1, B, T, V, 0, 0, 0
        int32   tokens[B*T]      row-major (B, T), uniform in [0, V)
        float32 logits[B*T*V]    computed in float64 from the F32 parameters by tools/reference.py's
                                 forward() (nanoGPT's GPT-2: exact erf GELU), then rounded to float32

llm.c model file (llm.c's train_gpt2.py write_model): int32 header[256] = 20240326, version (3 fp32, 5 bf16),
maxT, V, L, NH, C, Vp, then zeros; then the parameters in llm.c's (= nanogpt's) order with wte padded to Vp
rows of zeros: wte (Vp,C) wpe (maxT,C) ln1w ln1b (L,C) qkvw (L,3C,C) qkvb (L,3C) attprojw (L,C,C) attprojb
(L,C) ln2w ln2b (L,C) fcw (L,4C,C) fcb (L,4C) fcprojw (L,C,4C) fcprojb (L,C) lnfw lnfb (C). Vp is 128 here,
which is both llm.c's padding (to 128) and nanogpt's (to 64).

Regenerate (byte-identical; from the repository root, with a python3 that has torch and numpy, e.g.
Debian's /usr/bin/python3 with python3-torch 1.13):
    python3 tools/make_pretrained_fixtures.py
"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402  (sets one thread for deterministic float64 sums)

import numpy as np  # noqa: E402
import torch  # noqa: E402

SEED = 1234
L, NH, C, V, MAXT = 2, 2, 24, 100, 24
B, T = 2, 24
LOGITS_MAGIC, LOGITS_VERSION = 20261122, 1
LLMC_MAGIC = 20240326

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "test", "fixtures")

# per-layer tensors in Hugging Face naming, with their Hugging Face shape and whether it is a Conv1D weight
LAYER_TENSORS = [
    ("ln_1.weight", (C,), False),
    ("ln_1.bias", (C,), False),
    ("attn.c_attn.weight", (C, 3 * C), True),
    ("attn.c_attn.bias", (3 * C,), False),
    ("attn.c_proj.weight", (C, C), True),
    ("attn.c_proj.bias", (C,), False),
    ("ln_2.weight", (C,), False),
    ("ln_2.bias", (C,), False),
    ("mlp.c_fc.weight", (C, 4 * C), True),
    ("mlp.c_fc.bias", (4 * C,), False),
    ("mlp.c_proj.weight", (4 * C, C), True),
    ("mlp.c_proj.bias", (C,), False),
]
# nanogpt's stacked tensor for each Hugging Face per-layer tensor
HF_TO_OURS = {
    "ln_1.weight": "ln1w", "ln_1.bias": "ln1b", "attn.c_attn.weight": "qkvw", "attn.c_attn.bias": "qkvb",
    "attn.c_proj.weight": "attprojw", "attn.c_proj.bias": "attprojb", "ln_2.weight": "ln2w", "ln_2.bias": "ln2b",
    "mlp.c_fc.weight": "fcw", "mlp.c_fc.bias": "fcb", "mlp.c_proj.weight": "fcprojw", "mlp.c_proj.bias": "fcprojb",
}


def make_hf_params(rng):
    """{Hugging Face name: float32 array in Hugging Face's layout}, in a fixed drawing order."""
    p = {}
    p["wte.weight"] = rng.standard_normal((V, C)) * 0.1
    p["wpe.weight"] = rng.standard_normal((MAXT, C)) * 0.1
    for i in range(L):
        for name, shape, _ in LAYER_TENSORS:
            if name.startswith("ln_") and name.endswith(".weight"):
                a = 1.0 + 0.2 * rng.standard_normal(shape)
            else:
                a = rng.standard_normal(shape) * 0.1
            p[f"h.{i}.{name}"] = a
    p["ln_f.weight"] = 1.0 + 0.2 * rng.standard_normal((C,))
    p["ln_f.bias"] = rng.standard_normal((C,)) * 0.1
    return {k: v.astype(np.float32) for k, v in p.items()}


def to_ours(hf):
    """nanogpt's / reference.py's layout: stacked per kind, Linear weights (out, in), wte padded to Vp."""
    Vp = reference.padded_vocab(V)
    wte = np.zeros((Vp, C), dtype=np.float32)
    wte[:V] = hf["wte.weight"]
    ours = {"wte": wte, "wpe": hf["wpe.weight"]}
    for name, _, conv in LAYER_TENSORS:
        layers = [hf[f"h.{i}.{name}"] for i in range(L)]
        if conv:
            layers = [a.T for a in layers]  # Conv1D (in, out) -> Linear (out, in)
        ours[HF_TO_OURS[name]] = np.ascontiguousarray(np.stack(layers)).astype(np.float32)
    ours["lnfw"] = hf["ln_f.weight"]
    ours["lnfb"] = hf["ln_f.bias"]
    return ours


def cfg():
    return dict(V=V, Vp=reference.padded_vocab(V), block_size=MAXT, L=L, NH=NH, C=C, bias=1)


def flat_ours(ours):
    return np.concatenate([ours[n].reshape(-1) for n, _ in reference.param_shapes(cfg())]).astype(np.float32)


# ---- encodings ----


def bf16_bytes(a):
    """float32 -> bfloat16 with round to nearest even (torch's conversion), little-endian bytes."""
    t = torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)).to(torch.bfloat16)
    return t.view(torch.int16).numpy().astype("<i2").tobytes()


def f16_bytes(a):
    return np.ascontiguousarray(a, dtype=np.float32).astype("<f2").tobytes()


def f32_bytes(a):
    return np.ascontiguousarray(a, dtype=np.float32).astype("<f4").tobytes()


def write_safetensors(path, tensors, metadata=None):
    """tensors: [(name, dtype, shape, raw bytes)]. Data in name order, header padded with spaces to 8 bytes."""
    header, blobs, off = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in sorted(tensors, key=lambda t: t[0]):
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def causal_mask():
    return np.tril(np.ones((MAXT, MAXT), dtype=np.float32)).reshape(1, 1, MAXT, MAXT)


def write_llmc(path, ours, version):
    hdr = [0] * 256
    hdr[:8] = [LLMC_MAGIC, version, MAXT, V, L, NH, C, reference.padded_vocab(V)]
    flat = flat_ours(ours)
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *hdr))
        f.write(f32_bytes(flat) if version == 3 else bf16_bytes(flat))


def main():
    rng = np.random.RandomState(SEED)
    hf = make_hf_params(rng)
    tokens = rng.randint(0, V, size=(B, T)).astype(np.int32)
    ours = to_ours(hf)

    folder = os.path.join(FIXTURES, "tiny_gpt2")
    os.makedirs(folder, exist_ok=True)
    shapes = {k: v.shape for k, v in hf.items()}

    # F32, names as in the `gpt2` repository, with the attention buffers
    t = [(k, "F32", shapes[k], f32_bytes(v)) for k, v in hf.items()]
    for i in range(L):
        t.append((f"h.{i}.attn.bias", "F32", (1, 1, MAXT, MAXT), f32_bytes(causal_mask())))
        t.append((f"h.{i}.attn.masked_bias", "F32", (), f32_bytes(np.array(-1e4))))
    write_safetensors(os.path.join(folder, "model.safetensors"), t, {"format": "pt"})

    # BF16, "transformer." prefix, tied lm_head copy, BOOL buffers
    t = [("transformer." + k, "BF16", shapes[k], bf16_bytes(v)) for k, v in hf.items()]
    t.append(("lm_head.weight", "BF16", shapes["wte.weight"], bf16_bytes(hf["wte.weight"])))
    for i in range(L):
        t.append((f"transformer.h.{i}.attn.bias", "BOOL", (1, 1, MAXT, MAXT),
                  causal_mask().astype(np.uint8).tobytes()))
    write_safetensors(os.path.join(folder, "model_bf16.safetensors"), t, {"format": "pt"})

    # F16, plain names, nothing else
    t = [(k, "F16", shapes[k], f16_bytes(v)) for k, v in hf.items()]
    write_safetensors(os.path.join(folder, "model_f16.safetensors"), t)

    config = {
        "activation_function": "gelu_new",
        "architectures": ["GPT2LMHeadModel"],
        "attn_pdrop": 0.1,
        "bos_token_id": V - 1,
        "embd_pdrop": 0.1,
        "eos_token_id": V - 1,
        "initializer_range": 0.02,
        "layer_norm_epsilon": 1e-05,
        "model_type": "gpt2",
        "n_ctx": MAXT,
        "n_embd": C,
        "n_head": NH,
        "n_layer": L,
        "n_positions": MAXT,
        "resid_pdrop": 0.1,
        "summary_first_dropout": 0.1,
        "summary_proj_to_labels": True,
        "summary_type": "cls_index",
        "summary_use_proj": True,
        "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
        "torch_dtype": None,
        "note": "tiny random GPT-2 for nanogpt's tests: \"tools/make_pretrained_fixtures.py\" \u00e9\u4e2d\U0001F600",
        "vocab_size": V,
    }
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, ensure_ascii=True)
        f.write("\n")

    write_llmc(os.path.join(FIXTURES, "tiny_gpt2_llmc_v3.bin"), ours, 3)
    write_llmc(os.path.join(FIXTURES, "tiny_gpt2_llmc_v5.bin"), ours, 5)

    # the logits, in float64 through reference.py's model
    P = {k: torch.tensor(v, dtype=torch.float64) for k, v in ours.items()}
    tok = torch.tensor(tokens, dtype=torch.long)
    logits, _ = reference.forward(P, cfg(), tok, torch.zeros_like(tok))
    path = os.path.join(FIXTURES, "tiny_gpt2_logits.bin")
    with open(path, "wb") as f:
        f.write(struct.pack("<8i", LOGITS_MAGIC, LOGITS_VERSION, B, T, V, 0, 0, 0))
        f.write(tokens.astype("<i4").tobytes())
        f.write(logits.numpy().astype("<f4").tobytes())

    for name in ("tiny_gpt2/model.safetensors", "tiny_gpt2/model_bf16.safetensors",
                 "tiny_gpt2/model_f16.safetensors", "tiny_gpt2/config.json", "tiny_gpt2_llmc_v3.bin",
                 "tiny_gpt2_llmc_v5.bin", "tiny_gpt2_logits.bin"):
        print(f"wrote test/fixtures/{name} ({os.path.getsize(os.path.join(FIXTURES, name))} bytes)")
    lg = logits.numpy()
    print(f"logits: mean {lg.mean():.4f}, std {lg.std():.4f}, max |logit| {np.abs(lg).max():.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
