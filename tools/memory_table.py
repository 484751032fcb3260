#!/usr/bin/env python3
"""memory_table.py - the memory plan of GPT-2 124M (block 1024, 65,536 tokens per step, bf16) at a range
of budgets, as a markdown table for docs/memory.md, next to what nanoGPT and llm.c need for the same run.

    python3 tools/memory_table.py [./nanogpt]

nanogpt's numbers come from `nanogpt plan --json` (the planner itself). The other two columns are
computed here from each project's own accounting, for batch 64 x 1024 in one micro-step as the user asked:
  llm.c  train_gpt2.cu's fill_in_activation_sizes (cuDNN attention, its default recompute=1) plus
         bf16 params and grads, fp32 master weights and AdamW m, v; its logits buffer holds all (B, T, Vp).
  nanoGPT PyTorch under bf16 autocast: fp32 params, grads, AdamW m, v (16 bytes per parameter); activations
         by Korthikanti et al. 2022 (34 * T * B * C bytes per layer with flash attention); the full bf16
         logits (B*T*Vp) plus the fp32 copy F.cross_entropy makes of them. An estimate, not a measurement.
"""
import json
import subprocess
import sys

GIB = 1024 ** 3
L, NH, C, V, Vp, T, B = 12, 12, 768, 50257, 50304, 1024, 64


def plan(binary, budget_gib):
    cmd = [binary, "plan", "data/openwebtext/train_gpt2.cfg", "--batch_size=64", "--gradient_accumulation_steps=1",
           "--device=cuda", f"--max_memory={budget_gib}GiB", "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    return json.loads(out.stdout)


def llmc_bytes():
    N = 124475904
    BT = B * T
    acts_bf16 = (BT * C  # encoded
                 + L * BT * C  # ln1
                 + L * BT * C  # atty
                 + L * BT * C  # residual2
                 + L * BT * C  # ln2
                 + L * BT * 4 * C  # fch
                 + BT * 4 * C  # fch_gelu (recompute=1)
                 + L * BT * C  # residual3
                 + BT * C  # lnf
                 + L * BT * 3 * C  # qkvr
                 + BT * max(3 * C, NH * T, Vp)  # output: the logits of the whole batch
                 + BT * 4 * C + BT * C)  # scratch
    acts_f32 = 2 * L * BT * 2 + L * B * NH * T + 2 * BT + BT  # ln stats, attention stats, lnf stats, losses
    return N * (2 + 2 + 4 + 4 + 4) + 2 * acts_bf16 + 4 * acts_f32


def nanogpt_bytes():
    N = 124439808 + 47 * 768  # nanoGPT pads the vocabulary to 50304 too
    logits = B * T * Vp
    return 16 * N + L * 34 * T * B * C + 2 * logits + 4 * logits


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "./nanogpt"
    print("| budget | micro-batch x accum | recompute | logits chunk | eval micro-batch | moments | params+grads | "
          "master+moments | activations | logits | arena |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for b in [2.33, 2.68, 4, 6, 8, 12, 24, 80]:
        p = plan(binary, b)
        by = p["bytes"]
        g = lambda x: f"{x / GIB:.2f}"
        print(f"| {b} GiB | {p['micro_batch']} x {p['gradient_accumulation_steps']} | {p['recompute']} | {p['logits_chunk']} | "
              f"{p['eval_micro_batch']} | {p['moments']} | {g(by['params'] + by['grads'])} | {g(by['master'] + by['moments'])} | "
              f"{g(by['activations'] + by['work'] + by['batch'] + by['scratch'])} | {g(by['logits'])} | {g(p['device_bytes'])} GiB |")
    print()
    print(f"llm.c (train_gpt2.cu, B=64 T=1024 in one micro-step): {llmc_bytes() / GIB:.1f} GiB")
    print(f"nanoGPT (PyTorch, bf16 autocast, batch 64 x 1024, estimate): {nanogpt_bytes() / GIB:.1f} GiB")


if __name__ == "__main__":
    main()
