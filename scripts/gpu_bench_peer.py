#!/usr/bin/env python3
"""PyTorch on the same shapes as gpu-bench, in the same command, and the comparison table.

Usage: gpu_bench_peer.py TRUENO_JSONL [--md OUT.md] [--json OUT.jsonl]
Times each peer op with CUDA events (median of per-run pairs after warm-up), rotating
input sets the way gpu-bench does so neither side measures L2. The table's ratio is
torch time / trueno time: above 1 means trueno is faster.
"""
import json, statistics, sys, time

import torch
import torch.nn.functional as F

ROTATE_BYTES = 256 << 20
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def sets_for(nbytes):
    return max(1, min(16, -(-ROTATE_BYTES // nbytes)))


def bench(fn, sets, quick):
    warm, reps = (2, 5) if quick else (5, 30)
    for i in range(warm):
        fn(i % sets)
    times = []
    for i in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(i % sets)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def graph_ms(calls, quick):
    """Milliseconds per call of `calls` (one per rotated input set), from CUDA-graph
    replays of all of them in turn (median of replays, divided by their number): GPU time
    without Python's dispatch between calls, which small kernels' event pairs include."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for c in calls:
            c()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for c in calls:
            c()
    ms = bench(lambda i: g.replay(), 1, quick) / len(calls)
    del g
    return ms


def graph_read_ms(nbytes, quick):
    """torch.sum over `nbytes` (rotated copies), timed by `graph_ms`."""
    sets = max(2, sets_for(nbytes))
    bufs = [torch.rand(nbytes // 4, device="cuda") for _ in range(sets)]
    outs = [torch.empty((), device="cuda") for _ in range(sets)]
    calls = [lambda b=b, o=o: torch.sum(b, dim=0, out=o) for b, o in zip(bufs, outs)]
    ms = graph_ms(calls, quick)
    del bufs, outs
    return ms


def timed(call, quick, copies=4):
    """A peer call's per-call event time and its time in a CUDA graph (`copies` calls,
    the same inputs, replayed); the graph time is None where capture fails."""
    t = bench(lambda i: call(), 1, quick)
    try:
        tg = graph_ms([call] * copies, quick)
    except RuntimeError as e:
        print(f"graph capture failed: {str(e).splitlines()[0][:80]}", file=sys.stderr)
        tg = None
    return t, tg


def in_graph(r, tg):
    """The note for a peer timed in a graph, against trueno's queued time."""
    return f"; peer in a graph {1000*tg:.1f} us{queued(r, tg)}" if tg else ""


def queued(r, graph_ms_):
    """trueno's runs queued back to back (gpu-bench's `queued_ms`) against the peer's
    graph time: both without host launch latency."""
    q = r.get("queued_ms")
    return f"; trueno queued {1000*q:.1f} us ({graph_ms_ / q:.2f}x)" if q else ""


def rand(n, sets):
    base = torch.rand(n, device="cuda") * 4 - 2
    return [base.clone() for _ in range(sets)]


def main():
    rows_in = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
    # gpu-bench says whether it ran --quick (older files: guessed from the gemm rows).
    dev0 = next((r for r in rows_in if r["kind"] == "device"), {})
    quick = dev0.get("quick", len([r for r in rows_in if r["kind"] == "gemm"]) <= 2)
    md_path = sys.argv[sys.argv.index("--md") + 1] if "--md" in sys.argv else None
    table, peer = [], []
    dev = next(r for r in rows_in if r["kind"] == "device")

    ew = [r for r in rows_in if r["kind"] in ("elementwise", "reduce")]
    copy_gbs = None
    copy_graph_gbs = None

    def share(gbs):
        # " = N% of copy" once the copy ceiling is measured, and the share of the copy
        # timed as trueno's products are (back to back in a CUDA graph) where it is.
        if not copy_gbs:
            return ""
        graph = f" ({100*gbs/copy_graph_gbs:.0f}% of the copy in a graph)" if copy_graph_gbs else ""
        return f" = {100*gbs/copy_gbs:.0f}% of copy{graph}"

    # The copy ceiling, measured in every run (the bandwidth rows are shares of it).
    n = ew[0]["n"] if ew else 64 << 20
    sets = min(2, sets_for(n * 4))
    xs, ys = rand(n, sets), rand(n, sets)
    o = torch.empty(n, device="cuda")
    ms = bench(lambda i: o.copy_(xs[i]), sets, quick)
    copy_gbs = 2 * n * 4 / ms / 1e6
    table.append(("copy (torch, the ceiling)", f"{n>>20}M", None, ms, None, f"{copy_gbs:.0f} GB/s"))
    # The same copies back to back in a CUDA graph, as trueno's products are timed: one
    # copy between two events reads 5-10% under this on an H200 (session 63).
    gms = graph_ms([lambda i=i: o.copy_(xs[i % sets]) for i in range(4)], quick)
    copy_graph_gbs = 2 * n * 4 / gms / 1e6
    table.append(("copy (torch, in a graph)", f"{n>>20}M", None, gms, None, f"{copy_graph_gbs:.0f} GB/s"))
    if ew:
        peers = {
            "add": lambda i: torch.add(xs[i], ys[i], out=o),
            "mul": lambda i: torch.mul(xs[i], ys[i], out=o),
            "scale": lambda i: torch.mul(xs[i], 1.5, out=o),
            "relu": lambda i: F.relu(xs[i]),
            "gelu": lambda i: F.gelu(xs[i]),
            "silu": lambda i: F.silu(xs[i]),
            "swiglu": lambda i: F.silu(xs[i]) * ys[i],
            "sum": lambda i: xs[i].sum(),
            "max": lambda i: xs[i].max(),
            "argmax": lambda i: xs[i].argmax(),
        }
        for r in ew:
            t = bench(peers[r["op"]], sets, quick)
            gbs = r["bytes"] / r["ms"] / 1e6
            table.append((r["op"], f"{n>>20}M", r["ms"], t, t / r["ms"], f"{gbs:.0f} GB/s = {100*gbs/copy_gbs:.0f}% of copy"))
            peer.append({"op": r["op"], "torch_ms": t})
    del xs, ys, o

    for r in [r for r in rows_in if r["kind"] == "rows"]:
        rows, cols = r["rows"], r["cols"]
        n = rows * cols
        sets = sets_for(n * 4)
        xs, rs = rand(n, sets), rand(n, sets)
        xs = [x.view(rows, cols) for x in xs]
        rs = [x.view(rows, cols) for x in rs]
        g, b = torch.rand(cols, device="cuda"), torch.rand(cols, device="cuda")
        fn = {
            "softmax": lambda i: torch.softmax(xs[i], dim=-1),
            "layernorm": lambda i: F.layer_norm(xs[i], (cols,), g, b, 1e-5),
            "rmsnorm": lambda i: F.rms_norm(xs[i], (cols,), g, 1e-5),
            "add_rmsnorm": lambda i: F.rms_norm(xs[i] + rs[i], (cols,), g, 1e-5),
        }[r["op"]]
        t = bench(fn, sets, quick)
        tg = graph_ms([lambda i=i: fn(i) for i in range(sets)], quick)
        gbs = r["bytes"] / r["ms"] / 1e6
        extra = f"{gbs:.0f} GB/s" + share(gbs) + f"; torch in a graph {1000*tg:.1f} us{queued(r, tg)}"
        table.append((r["op"], f"{rows}x{cols}", r["ms"], t, t / r["ms"], extra))

    for r in [r for r in rows_in if r["kind"] == "gemm"]:
        s = r["size"]
        a, b = torch.rand(s, s, device="cuda"), torch.rand(s, s, device="cuda")
        c = torch.empty(s, s, device="cuda")
        t, tg = timed(lambda: torch.matmul(a, b, out=c), quick)
        tf = 2 * s**3 / (t * 1e-3) / 1e12
        table.append((f"sgemm {r['variant'].lower()}", f"{s}", r["ms"], t, t / r["ms"], f"{r['tflops']:.1f} vs cuBLAS {tf:.1f} TFLOP/s = {100*r['tflops']/tf:.0f}%{in_graph(r, tg)}"))

    # Tensor-core GEMM: cuBLAS bf16 (torch.matmul, bf16 out; the kernel rows write f32,
    # twice the output bytes; the "bf16 out" rows match it). Rows with a bias against
    # torch.addmm (cuBLASLt's bias epilogue), with bias + GELU against
    # torch._addmm_activation (cuBLASLt's bias + GELU epilogue, tanh form) or addmm then
    # F.gelu where that private op is missing; activation-only rows against the plain
    # matmul (their cost over it).
    def addmm_gelu(bias, a, b):
        try:
            return torch._addmm_activation(bias, a, b, use_gelu=True)
        except (AttributeError, RuntimeError):
            return F.gelu(torch.addmm(bias, a, b))

    for r in [r for r in rows_in if r["kind"] == "gemm_mma"]:
        s = r["size"]
        a = (torch.rand(s, s, device="cuda") * 2 - 1).to(torch.bfloat16)
        b = (torch.rand(s, s, device="cuda") * 2 - 1).to(torch.bfloat16)
        c = torch.empty(s, s, device="cuda", dtype=torch.bfloat16)
        bias = (torch.rand(s, device="cuda") * 2 - 1).to(torch.bfloat16)
        if r.get("peer") == "addmm_gelu":
            t, tg = timed(lambda: addmm_gelu(bias, a, b), quick)
        elif r.get("peer") == "addmm":
            t, tg = timed(lambda: torch.addmm(bias, a, b, out=c), quick)
        elif r.get("peer") == "matmul_bt":
            t, tg = timed(lambda: torch.matmul(a, b.t(), out=c), quick)
        else:
            t, tg = timed(lambda: torch.matmul(a, b, out=c), quick)
        tf = 2 * s**3 / (t * 1e-3) / 1e12
        note = f"{r['tflops']:.1f} vs cuBLAS {tf:.1f} TFLOP/s = {100*r['tflops']/tf:.0f}%"
        if "plain_ms" in r and r["type"] != "bf16 out":
            note += f"; {r['ms']/r['plain_ms']:.2f}x the plain product's time"
        note += in_graph(r, tg)
        table.append((f"gemm mma {r['type']}", f"{s}", r["ms"], t, t / r["ms"], note))

    # TF32: cuBLAS with TF32 allowed (torch.backends.cuda.matmul.allow_tf32), f32 in and
    # out, on the same layouts: a @ b.t() for the transposed-B ("nt") rows, a @ b for
    # row-major B ("nn"); squares ("size") and a prefill's shapes (tokens x out x in).
    for r in [r for r in rows_in if r["kind"] in ("gemm_tf32", "gemm_tf32_shape")]:
        m, n, k = (r["m"], r["n"], r["k"]) if "m" in r else (r["size"],) * 3
        nt = r["layout"] == "nt"
        a = torch.rand(m, k, device="cuda") * 2 - 1
        b = torch.rand(*((n, k) if nt else (k, n)), device="cuda") * 2 - 1
        c = torch.empty(m, n, device="cuda")
        torch.backends.cuda.matmul.allow_tf32 = True
        t, tg = timed(lambda: torch.matmul(a, b.t() if nt else b, out=c), quick)
        torch.backends.cuda.matmul.allow_tf32 = False
        tf = 2 * m * n * k / (t * 1e-3) / 1e12
        note = f"{r['tflops']:.1f} vs cuBLAS TF32 {tf:.1f} TFLOP/s = {100*r['tflops']/tf:.0f}%"
        if "transpose_ms" in r:
            note += f"; the transpose alone {1000*r['transpose_ms']:.0f} us"
        if "tuned" in r:
            tune = ", ".join(f"{name} {1000*ms:.1f}" for name, ms in r["tune_ms"].items())
            note += f"; tuned {r['tuned']}, rule {r['rule']}; tuning us: {tune}"
        note += in_graph(r, tg)
        if "size" in r:
            table.append((f"gemm {r['type']}", f"{m}", r["ms"], t, t / r["ms"], note))
        else:
            op = "gemm_tf32 x wT" if nt else "gemm_tf32_kn x w"
            if "tuned" in r:
                op += " (tuned)"
            table.append((op, f"{m}x{n}x{k}", r["ms"], t, t / r["ms"], note))

    # Tuned GEMM configurations: cuBLAS bf16 (torch.matmul, bf16 out) at the same shape.
    for r in [r for r in rows_in if r["kind"] == "gemm_tune"]:
        m, n, k = r["m"], r["n"], r["k"]
        a = (torch.rand(m, k, device="cuda") * 2 - 1).to(torch.bfloat16)
        b = (torch.rand(k, n, device="cuda") * 2 - 1).to(torch.bfloat16)
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        t, tg = timed(lambda: torch.matmul(a, b, out=c), quick)
        tf = 2 * m * n * k / (t * 1e-3) / 1e12
        tune = ", ".join(f"{name} {1000*ms:.0f}" for name, ms in r["tune_ms"].items())
        note = (f"{r['tflops']:.0f} vs cuBLAS {tf:.0f} TFLOP/s; tuned {r['tuned']}, rule {r['rule']} "
                f"({r['rule_ms']/r['ms']:.2f}x the tuned time); tuning us: {tune}{in_graph(r, tg)}")
        table.append(("gemm tuned bf16", f"{m}x{n}x{k}", r["ms"], t, t / r["ms"], note))

    # Split-K sweeps: each cut's queued time against cuBLAS in a graph on the same shape
    # (SGEMM with TF32 off; bf16 in and out), timed once per shape.
    split_peer = {}
    for r in [r for r in rows_in if r["kind"] == "gemm_split"]:
        m, n, k = r["m"], r["n"], r["k"]
        dt = torch.float32 if r["type"].startswith("sgemm") else torch.bfloat16
        key = (dt, m, n, k)
        if key not in split_peer:
            a = (torch.rand(m, k, device="cuda") * 2 - 1).to(dt)
            b = (torch.rand(k, n, device="cuda") * 2 - 1).to(dt)
            c = torch.empty(m, n, device="cuda", dtype=dt)
            split_peer[key] = timed(lambda: torch.matmul(a, b, out=c), quick)
        t, tg = split_peer[key]
        note = (f"{r['tflops']:.1f} TFLOP/s queued; the rule's cut {1000*r['rule_ms']:.1f} us"
                f"{in_graph(r, tg)}; rule {tg / r['rule_ms']:.2f}x" if tg else "")
        table.append((f"gemm split {r['type']}", f"{m}x{n}x{k} s{r['splits']}", r["ms"], t, t / r["ms"], note))

    # FlashAttention forward: torch SDPA's flash (FlashAttention-2) and cuDNN backends on
    # the same [batch, seq, heads, dim] tensors (viewed as SDPA's [batch, heads, seq, dim]).
    # Each shape's peers are timed once, for every trueno kernel ("path") measured on it.
    fa_peers = {}
    for r in [r for r in rows_in if r["kind"] == "flash_attn"]:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        bsz, seq, h, d, causal = r["batch"], r["seq"], r["heads"], r["dim"], r["causal"]
        key = (bsz, seq, h, d, causal)
        if key not in fa_peers:
            qkv = [(torch.rand(bsz, seq, h, d, device="cuda") * 4 - 2).to(torch.bfloat16).transpose(1, 2) for _ in range(3)]
            peers = []
            for name, backend in [("flash", SDPBackend.FLASH_ATTENTION), ("cuDNN", SDPBackend.CUDNN_ATTENTION)]:
                try:
                    with sdpa_kernel(backend):
                        t, tg = timed(lambda: F.scaled_dot_product_attention(*qkv, is_causal=causal), quick)
                except RuntimeError as e:
                    peers.append((name, None, str(e).splitlines()[0][:60], None))
                    continue
                peers.append((name, t, None, tg))
            fa_peers[key] = peers
            del qkv
        flops = 4 * bsz * seq * seq * h * d / (2 if causal else 1)
        notes, first = [], None
        for name, t, err, tg in fa_peers[key]:
            if t is None:
                notes.append(f"{name}: unavailable ({err})")
                continue
            notes.append(f"{name} {flops / (t * 1e-3) / 1e12:.0f} TFLOP/s ({t / r['ms']:.2f}x){in_graph(r, tg)}")
            first = first or t
        shape = f"{bsz}x{seq}, {h} heads x {d}{', causal' if causal else ''}"
        label = f"flash attention bf16 ({r.get('path', 'mma')})"
        table.append((label, shape, r["ms"], first, first / r["ms"] if first else None, f"{r['tflops']:.0f} TFLOP/s; " + "; ".join(notes)))

    # Decode attention: torch SDPA on the same cache (grouped-query heads expanded by
    # SDPA's enable_gqa), one query token; f32 caches get an f32 query, bf16 caches a
    # bf16 one (SDPA needs one dtype; trueno's query and output stay f32).
    # Rows of one shape and dtype (paged, or another chunk kernel) share one SDPA timing.
    sdpa = {}
    for r in [r for r in rows_in if r["kind"] == "decode_attn"]:
        cap, hq, hkv, d = r["context"], r["heads_q"], r["heads_kv"], r["dim"]
        # (a paged row, "bf16 paged16", is priced against the same contiguous SDPA call)
        dt = torch.bfloat16 if r.get("cache", "").startswith("bf16") else torch.float32
        key = (cap, hq, hkv, d, dt)
        if key not in sdpa:
            q = (torch.rand(1, hq, 1, d, device="cuda") * 2 - 1).to(dt)
            k = (torch.rand(1, hkv, cap, d, device="cuda") * 2 - 1).to(dt)
            v = (torch.rand(1, hkv, cap, d, device="cuda") * 2 - 1).to(dt)
            # Eight calls in the graph: the kernels are short.
            sdpa[key] = timed(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), quick, 8)
            del k, v
        t, tg = sdpa[key]
        gbs = r["bytes"] / r["ms"] / 1e6
        label = f"decode attention {r.get('cache', 'f32')} cache ({r.get('path', 'simt')})"
        graph = f"; SDPA in a graph {1000*tg:.1f} us{queued(r, tg)}" if tg else ""
        if tg and r.get("graph_ms"):
            graph += f"; trueno in a graph {1000*r['graph_ms']:.1f} us ({tg / r['graph_ms']:.2f}x)"
        table.append((label, f"{cap} ctx, {hq}/{hkv} heads x {d}", r["ms"], t, t / r["ms"], f"{gbs:.0f} GB/s{share(gbs)}{graph}"))

    # Quantized GEMV: the peer is cuBLAS's bf16 GEMV on the same shape (half the bytes of
    # f32, twice Q8_0's), and the bar is the copy bandwidth measured above. "sum of the
    # same bytes" is a reduction over as many bytes (torch.sum over rotated copies,
    # captured once in a CUDA graph and replayed, so Python's dispatch between calls is
    # not timed): what streaming those bytes costs at that size on this GPU.
    read_ms = {}
    for r in [r for r in rows_in if r["kind"] == "qgemv"]:
        if r["bytes"] not in read_ms:
            read_ms[r["bytes"]] = graph_read_ms(r["bytes"], quick)
    for r in [r for r in rows_in if r["kind"] == "qgemv"]:
        rows, cols = r["rows"], r["cols"]
        sets = sets_for(rows * cols * 2)
        ws = [(torch.rand(rows, cols, device="cuda") - 0.5).to(torch.bfloat16) for _ in range(sets)]
        xv = torch.rand(cols, device="cuda").to(torch.bfloat16)
        t = bench(lambda i: torch.mv(ws[i], xv), sets, quick)
        ys = [torch.empty(rows, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
        tg = graph_ms([lambda w=w, y=y: torch.mv(w, xv, out=y) for w, y in zip(ws, ys)], quick)
        gbs = r["bytes"] / r["ms"] / 1e6
        bf_gbs = (rows * cols + rows + cols) * 2 / t / 1e6
        rd = read_ms[r["bytes"]]
        ours = ""
        if r.get("graph_ms"):
            g_gbs = r["bytes"] / r["graph_ms"] / 1e6
            ours = f"; trueno in a graph {1000*r['graph_ms']:.1f} us, {g_gbs:.0f} GB/s{share(g_gbs)} ({tg / r['graph_ms']:.2f}x)"
        table.append((f"qgemv {r['format']}", f"{rows}x{cols}", r["ms"], t, t / r["ms"], f"{gbs:.0f} GB/s{share(gbs)}; torch bf16 mv {bf_gbs:.0f} GB/s, in a graph {1000*tg:.1f} us{queued(r, tg)}{ours}; sum of the same bytes in a graph {1000*rd:.1f} us"))
        del ys
        del ws

    # Batched quantized GEMV: the peer is cuBLAS's bf16 GEMM with as many columns
    # (torch.matmul on bf16 weights of the same shape); the notes give the batch's time
    # against one vector's, per vector.
    for r in [r for r in rows_in if r["kind"] == "qgemv_batch"]:
        rows, cols, n = r["rows"], r["cols"], r["vectors"]
        sets = sets_for(rows * cols * 2)
        ws = [(torch.rand(rows, cols, device="cuda") - 0.5).to(torch.bfloat16) for _ in range(sets)]
        xm = torch.rand(cols, n, device="cuda").to(torch.bfloat16)
        t = bench(lambda i: ws[i] @ xm, sets, quick)
        tg = graph_ms([lambda w=w: w @ xm for w in ws], quick)
        gbs = r["bytes"] / r["ms"] / 1e6
        per = n * r["single_ms"] / r["ms"]
        alt = ""
        if "qgemm_queued_ms" in r:
            qz, qg = r["quantized_queued_ms"], r["qgemm_queued_ms"]
            alt = f"; queued with the activations' quantization {1000*qz:.1f} us, trueno's qgemm from f32 {1000*qg:.1f} us ({qg / qz:.2f}x)"
        table.append((f"qgemv {r['format']} x{n}", f"{rows}x{cols}", r["ms"], t, t / r["ms"], f"{gbs:.0f} GB/s{share(gbs)}; {per:.2f}x {n} one-vector launches; cuBLAS in a graph {1000*tg:.1f} us{queued(r, tg)}{alt}"))
        del ws

    # Dequantization to f32: the bar is the copy bandwidth; the peer is torch's bf16 ->
    # f32 conversion of the same shape (the nearest dense op: 2 bytes in, 4 out a value).
    for r in [r for r in rows_in if r["kind"] == "dequant"]:
        rows, cols = r["rows"], r["cols"]
        sets = sets_for(rows * cols * 6)
        ws = [(torch.rand(rows, cols, device="cuda") - 0.5).to(torch.bfloat16) for _ in range(sets)]
        t = bench(lambda i: ws[i].float(), sets, quick)
        tg = graph_ms([lambda w=w: w.float() for w in ws], quick)
        gbs = r["bytes"] / r["ms"] / 1e6
        table.append((f"dequantize {r['format']}", f"{rows}x{cols}", r["ms"], t, t / r["ms"], f"{gbs:.0f} GB/s{share(gbs)}; torch bf16->f32 {rows*cols*6/t/1e6:.0f} GB/s{in_graph(r, tg)}"))
        del ws

    # Token embeddings: the peer gathers the same rows from an f32 table (F.embedding).
    tables = {}
    for r in [r for r in rows_in if r["kind"] == "embedding"]:
        vocab, cols, n = r["vocab"], r["cols"], r["tokens"]
        if (vocab, cols) not in tables:
            tables = {(vocab, cols): torch.rand(vocab, cols, device="cuda")}
        tab = tables[(vocab, cols)]
        ids = torch.randint(0, vocab, (n,), device="cuda")
        t, tg = timed(lambda: F.embedding(ids, tab), quick)
        gbs = r["bytes"] / r["ms"] / 1e6
        table.append((f"embedding rows {r['format']}", f"{n} of {vocab}x{cols}", r["ms"], t, t / r["ms"], f"{gbs:.0f} GB/s; torch f32 table{in_graph(r, tg)}"))
    del tables

    # A prefill's quantized projection: the peer is cuBLAS's bf16 GEMM on bf16 weights
    # of the same shape (X W^T, torch.matmul; its activations already bf16).
    for r in [r for r in rows_in if r["kind"] == "qgemm"]:
        t_, rows, cols = r["tokens"], r["rows"], r["cols"]
        wb = (torch.rand(rows, cols, device="cuda") - 0.5).to(torch.bfloat16)
        xb = torch.rand(t_, cols, device="cuda").to(torch.bfloat16)
        yb = torch.empty(t_, rows, device="cuda", dtype=torch.bfloat16)
        t, tg = timed(lambda: torch.matmul(xb, wb.t(), out=yb), quick)
        tf = 2 * t_ * rows * cols / (r["ms"] * 1e-3) / 1e12
        tf_peer = 2 * t_ * rows * cols / (t * 1e-3) / 1e12
        # On GPU time: the routed op (qgemm, as callers run it) against cuBLAS in a graph.
        routed = {"queued_ms": r["routed_queued_ms"]} if "routed_queued_ms" in r else {}
        table.append((f"qgemm {r['format']}", f"{t_} x {rows}x{cols}", r["ms"], t, t / r["ms"], f"{tf:.0f} vs cuBLAS bf16 {tf_peer:.0f} TFLOP/s; dequantize {1000*r['dequant_ms']:.1f} us{in_graph(r, tg)}; routed{queued(routed, tg) if tg else ''}"))
        for fz in [z for z in rows_in if z["kind"] == "qgemm_fused" and (z["format"], z["tokens"], z["rows"], z["cols"]) == (r["format"], t_, rows, cols)]:
            tz = 2 * t_ * rows * cols / (fz["ms"] * 1e-3) / 1e12
            table.append((f"qgemm fused {r['format']} m{fz['tile']}", f"{t_} x {rows}x{cols}", fz["ms"], t, t / fz["ms"], f"{tz:.0f} vs cuBLAS bf16 {tf_peer:.0f} TFLOP/s; unfused {r['ms']:.4f} ms{in_graph(fz, tg)}"))
        del wb, xb, yb

    # RoPE: Hugging Face's apply_rotary_pos_emb (q * cos + rotate_half(q) * sin) with the
    # cos/sin tables built outside the timed region, as a model shares them across layers.
    for r in [r for r in rows_in if r["kind"] == "rope"]:
        t_, h, d = r["tokens"], r["heads"], r["dim"]
        sets = sets_for(t_ * h * d * 4)
        xs = [x.view(t_, h, d) for x in rand(t_ * h * d, sets)]
        inv = 1.0 / (10000 ** (torch.arange(0, d, 2, device="cuda", dtype=torch.float64) / d))
        fr = torch.arange(t_, device="cuda", dtype=torch.float64)[:, None] * inv[None, :]
        emb = torch.cat((fr, fr), dim=-1)
        cos, sin = emb.cos().float()[:, None, :], emb.sin().float()[:, None, :]
        def rot(x):
            x1, x2 = x[..., : d // 2], x[..., d // 2 :]
            return torch.cat((-x2, x1), dim=-1)
        t = bench(lambda i: xs[i] * cos + rot(xs[i]) * sin, sets, quick)
        tg = graph_ms([lambda x=x: x * cos + rot(x) * sin for x in xs], quick)
        gbs = r["bytes"] / r["ms"] / 1e6
        table.append(("rope neox", f"{t_}x{h}x{d}", r["ms"], t, t / r["ms"], f"{gbs:.0f} GB/s{share(gbs)}; torch in a graph {1000*tg:.1f} us{queued(r, tg)}"))

    for r in [r for r in rows_in if r["kind"] == "module"]:
        table.append((f"module {r['family']}", "build + JIT load", None, None, None, f"build {r['build_ms']:.2f} ms, load {r['load_ms']:.2f} ms"))
    for r in [r for r in rows_in if r["kind"] == "launch"]:
        x = torch.ones(4, device="cuda")
        o = torch.empty(4, device="cuda")
        for _ in range(100):
            torch.add(x, x, out=o)
        torch.cuda.synchronize()
        n = 20000
        t0 = time.perf_counter()
        for _ in range(n):
            torch.add(x, x, out=o)
        enq = (time.perf_counter() - t0) / n * 1e6
        torch.cuda.synchronize()
        tot = (time.perf_counter() - t0) / n * 1e6
        table.append(("launch overhead", "4 elements", r["total_us"] / 1e3, tot / 1e3, tot / r["total_us"], f"enqueue {r['enqueue_us']:.2f} us vs torch {enq:.2f} us"))

    lines = [f"GPU: {dev['name']} (sm_{dev['sm'].replace('.', '')}, {dev['sms']} SMs), torch {torch.__version__}", "",
             "| op | shape | trueno ms | torch ms | torch/trueno | notes |", "|---|---|---:|---:|---:|---|"]
    f = lambda v: "" if v is None else f"{v:.4f}"
    for op, shape, ms, t, ratio, note in table:
        lines.append(f"| {op} | {shape} | {f(ms)} | {f(t)} | {'' if ratio is None else f'{ratio:.2f}x'} | {note} |")
    text = "\n".join(lines)
    print(text)
    if md_path:
        open(md_path, "w").write(text + "\n")


if __name__ == "__main__":
    main()
