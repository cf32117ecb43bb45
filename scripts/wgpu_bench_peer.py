#!/usr/bin/env python3
"""PyTorch (cuBLAS SGEMM, CUDA elementwise) on wgpu-bench's shapes, in the same command, and
the comparison tables with trueno-gpu's CUDA path from gpu-bench's output.

Usage: wgpu_bench_peer.py WGPU_JSONL [CUDA_JSONL] [--md OUT.md]
Torch times are medians of CUDA-event pairs after warm-up; TF32 is off, so the matmul peer
is true FP32 SGEMM. Ratios are trueno-wgpu / peer throughput (above 1: wgpu faster).
"""
import json, statistics, sys

import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def timed(fn, warm=3, reps=20):
    for _ in range(warm):
        fn()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def load(path):
    return [json.loads(l) for l in open(path) if l.strip().startswith("{")]


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    md = sys.argv[sys.argv.index("--md") + 1] if "--md" in sys.argv else None
    if md in args:
        args.remove(md)
    wgpu = load(args[0])
    cuda = load(args[1]) if len(args) > 1 else []
    dev = next((r for r in wgpu if r["kind"] == "wgpu_device"), {})
    lines = [f"wgpu adapter: {dev.get('name')} ({dev.get('backend')}, driver {dev.get('driver')}); "
             f"torch {torch.__version__} on {torch.cuda.get_device_name()}", ""]
    lines += ["| matmul n | trueno-wgpu TFLOP/s | trueno-gpu (CUDA) TFLOP/s | cuBLAS SGEMM TFLOP/s | wgpu / cuBLAS |",
              "|---:|---:|---:|---:|---:|"]
    for r in (r for r in wgpu if r["kind"] == "wgpu_matmul"):
        n = r["size"]
        a = torch.rand(n, n, device="cuda")
        b = torch.rand(n, n, device="cuda")
        c = torch.empty(n, n, device="cuda")
        ms = timed(lambda: torch.matmul(a, b, out=c), reps=10 if n >= 8192 else 20)
        tf = 2 * n**3 / (ms * 1e-3) / 1e12
        cu = next((x["tflops"] for x in cuda if x.get("kind") == "gemm"
                   and x.get("variant") == "Tiled" and x.get("size") == n), None)
        cu_s = f"{cu:.2f}" if cu is not None else "-"
        lines.append(f"| {n} | {r['tflops']:.2f} | {cu_s} | {tf:.2f} | {r['tflops'] / tf:.2f}x |")
    lines += ["", "| elementwise (n) | trueno-wgpu GB/s | trueno-gpu (CUDA) GB/s | torch GB/s | wgpu / torch | wgpu / torch copy |",
              "|---|---:|---:|---:|---:|---:|"]
    ew = [r for r in wgpu if r["kind"] == "wgpu_elementwise"]
    torch_gbs = {}
    for r in ew:
        n = r["n"]
        x = torch.rand(n, device="cuda")
        y = torch.rand(n, device="cuda")
        o = torch.empty(n, device="cuda")
        fn, words = {
            "copy": (lambda: o.copy_(x), 2),
            "scale": (lambda: torch.mul(x, 1.5, out=o), 2),
            "add": (lambda: torch.add(x, y, out=o), 3),
        }[r["op"]]
        ms = timed(fn)
        torch_gbs[r["op"]] = words * n * 4 / (ms * 1e-3) / 1e9
    for r in ew:
        cu = next((x for x in cuda if x.get("kind") == "elementwise" and x.get("op") == r["op"]
                   and x.get("n") == r["n"]), None)
        cu_s = f"{cu['bytes'] / (cu['ms'] * 1e-3) / 1e9:.0f}" if cu else "-"
        t = torch_gbs[r["op"]]
        lines.append(f"| {r['op']} ({r['n']}) | {r['gbs']:.0f} | {cu_s} | {t:.0f} | {r['gbs'] / t:.2f}x "
                     f"| {r['gbs'] / torch_gbs['copy']:.2f}x |")
    lines += ["", "| crossover op | n | CPU ms | wgpu ms (host slices in and out) |", "|---|---:|---:|---:|"]
    for r in (r for r in wgpu if r["kind"] == "crossover"):
        lines.append(f"| {r['op']} | {r['n']} | {r['cpu_ms']:.4f} | {r['gpu_ms']:.4f} |")
    text = "\n".join(lines)
    print(text)
    if md:
        open(md, "w").write(text + "\n")


if __name__ == "__main__":
    main()
