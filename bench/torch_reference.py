"""PyTorch reference for bench/train-step.ts: the same GPT (pre-LN, learned positions, tanh-GELU MLP, tied LM
head) and the same measurements (forward+backward+AdamW ms/step; KV-cache sampling tok/s).

Usage: OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/torch_reference.py --threads 2 --shapes '<json>'
Prints one JSON object on the last line of stdout.
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, h, m):
        super().__init__()
        self.h = h
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, m * d)
        self.fc2 = nn.Linear(m * d, d)

    def attn(self, x, cache=None, pos=None):
        B, T, D = x.shape
        hd = D // self.h
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
        q = q.view(B, T, self.h, hd).transpose(1, 2)
        k = k.view(B, T, self.h, hd).transpose(1, 2)
        v = v.view(B, T, self.h, hd).transpose(1, 2)
        if cache is None:
            s = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
            mask = torch.ones(T, T, dtype=torch.bool).tril()
            s = s.masked_fill(~mask, -1e9)
            o = F.softmax(s, dim=-1) @ v
            new_cache = (k, v)
        else:
            kc, vc = cache
            kc[:, :, pos : pos + T] = k
            vc[:, :, pos : pos + T] = v
            s = (q @ kc[:, :, : pos + T].transpose(-2, -1)) / math.sqrt(hd)
            o = F.softmax(s, dim=-1) @ vc[:, :, : pos + T]
            new_cache = (kc, vc)
        return self.proj(o.transpose(1, 2).reshape(B, T, D)), new_cache

    def forward(self, x, cache=None, pos=None):
        a, c = self.attn(x, cache, pos)
        x = x + a
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))
        return x, c


class GPT(nn.Module):
    def __init__(self, V, C, D, L, H, M=4):
        super().__init__()
        self.wte = nn.Embedding(V, D)
        self.wpe = nn.Embedding(C, D)
        self.blocks = nn.ModuleList([Block(D, H, M) for _ in range(L)])
        self.lnf = nn.LayerNorm(D)

    def forward(self, idx, caches=None, pos=0):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(pos, pos + T))
        new = []
        for i, b in enumerate(self.blocks):
            x, c = b(x, None if caches is None else caches[i], pos)
            new.append(c)
        return self.lnf(x) @ self.wte.weight.t(), new


def train_ms(s, steps):
    V, C, D, L, H = s["vocab"], s["context"], s["dModel"], s["nLayers"], s["nHeads"]
    B, T = s["batch"], s["seq"]
    model = GPT(V, C, D, L, H)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.0)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, V, (B, T), generator=g)
    y = torch.randint(0, V, (B, T), generator=g)
    times = []
    for i in range(steps + 2):
        t0 = time.perf_counter()
        logits, _ = model(x)
        loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times[2:])


def sft_ms(s):
    """Mean ms per SFT step over s["steps"] after s["warmup"] of them. Each step is a list of micro-batches
    {"T": padded length, "lengths": [datum lengths]} — the embedded trainer's own chunks, so both do the same FLOPs —
    with gradients accumulated over them and one AdamW step; pad targets ignored (ignore_index), the loss the mean
    over the step's real tokens."""
    V, C, D, L, H = s["vocab"], s["context"], s["dModel"], s["nLayers"], s["nHeads"]
    model = GPT(V, C, D, L, H)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.0)
    g = torch.Generator().manual_seed(0)
    times = []
    for step in s["steps"]:
        chunks = []
        for c in step:
            x = torch.randint(0, V, (len(c["lengths"]), c["T"]), generator=g)
            y = torch.randint(0, V, (len(c["lengths"]), c["T"]), generator=g)
            for r, n in enumerate(c["lengths"]):
                y[r, n:] = -100
            chunks.append((x, y))
        real = sum(sum(c["lengths"]) for c in step)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        for x, y in chunks:
            logits, _ = model(x)
            loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1), ignore_index=-100, reduction="sum") / real
            loss.backward()
        opt.step()
        times.append((time.perf_counter() - t0) * 1000)
    measured = times[s["warmup"]:]
    return sum(measured) / len(measured)


def blas_info():
    """Which BLAS this process really runs: the shared libraries mapped after a matrix product (/proc/self/maps),
    classified (openblas | mkl | blis | reference | unknown), and torch's build config line for BLAS."""
    a = torch.randn(64, 64)
    (a @ a).sum().item()
    libs = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                name = path.rsplit("/", 1)[-1]
                if any(k in name for k in ("blas", "lapack", "mkl", "blis")):
                    libs.add(path)
    except OSError:
        pass
    resolved = sorted({__import__("os").path.realpath(p) for p in libs})
    text = " ".join(resolved)
    if "openblas" in text:
        kind = "openblas"
    elif "mkl" in text:
        kind = "mkl"
    elif "blis" in text:
        kind = "blis"
    elif "/blas/libblas" in text or "libblas.so" in text:
        kind = "reference"
    else:
        kind = "unknown"
    keys = ("BLAS_INFO", "LAPACK_INFO", "USE_MKLDNN", "USE_OPENMP", "PERF_WITH_AVX512")
    build = {}
    for line in torch.__config__.show().splitlines():
        for part in line.replace("- Build settings:", "").split(","):
            k, _, v = part.strip().partition("=")
            if k in keys:
                build[k] = v
    return {"kind": kind, "libraries": resolved, "build": build}


@torch.no_grad()
def sample(s, reps):
    V, C, D, L, H = s["vocab"], s["context"], s["dModel"], s["nLayers"], s["nHeads"]
    B, P, N = s["rows"], s["prompt"], s["newTokens"]
    model = GPT(V, C, D, L, H)
    hd = D // H
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, V, (B, P), generator=g)
    res = []
    for r in range(reps + 1):
        t0 = time.perf_counter()
        caches = [(torch.zeros(B, H, P + N, hd), torch.zeros(B, H, P + N, hd)) for _ in range(L)]
        logits, caches = model(prompt, caches, 0)
        t1 = time.perf_counter()
        tok = torch.multinomial(F.softmax(logits[:, -1], -1), 1, generator=g)
        for i in range(N - 1):
            logits, caches = model(tok, caches, P + i)
            tok = torch.multinomial(F.softmax(logits[:, -1], -1), 1, generator=g)
        t2 = time.perf_counter()
        res.append((t2 - t0, (t2 - t1) / max(1, N - 1)))
    res = res[1:]
    total = statistics.median(x[0] for x in res)
    step = statistics.median(x[1] for x in res)
    return {"tok_s": B * N / total, "decode_step_ms": step * 1000}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--shapes", required=True, help="JSON list of {name, kind: train|sft|sample, ...shape}")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    out = {"torch": torch.__version__, "threads": torch.get_num_threads(), "blas": blas_info(), "results": {}}
    for s in json.loads(a.shapes):
        if s["kind"] == "train":
            out["results"][s["name"]] = {"train_ms": train_ms(s, a.steps)}
        elif s["kind"] == "sft":
            out["results"][s["name"]] = {"train_ms": sft_ms(s)}
        else:
            out["results"][s["name"]] = sample(s, max(2, a.steps // 2))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
