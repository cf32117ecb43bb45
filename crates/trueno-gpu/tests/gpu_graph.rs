//! CUDA graphs (`Stream::capture`, `Graph::launch`): captured work against the same ops
//! run on a stream and against the CPU reference; replays read their buffers afresh;
//! ops that allocate scratch (split-K) keep it for the graph's replays; a failed
//! capture leaves the stream usable; another thread's synchronous copies in the middle
//! of a capture leave it whole.
//!
//! Without a CUDA device each test prints SKIPPED and passes (`TRUENO_REQUIRE_GPU=1`
//! makes that a failure).

mod common;

use common::device::{Rng, ctx};
use trueno_gpu::GpuError;
use trueno_gpu::driver::Context;
use trueno_gpu::kernels::elementwise::ElementwiseOp;
use trueno_gpu::kernels::gemm::{self, GemmVariant};
use trueno_gpu::memory::DeviceBuffer;

/// Two launches captured and replayed twice, with new input copied in between from
/// pinned memory on the replaying stream: each replay computes from what the input
/// holds then.
#[test]
fn replays_read_their_inputs_afresh() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(11);
    let n = 1000;
    let first = rng.vec(n, -1.0, 1.0);
    let second = rng.vec(n, -1.0, 1.0);
    let x = ctx.upload(&first).unwrap();
    let y = ctx.alloc::<f32>(n).unwrap();
    let mut total = ctx.alloc::<f32>(1).unwrap();
    let mut pinned = ctx.alloc_host::<f32>(n).unwrap();
    pinned.copy_from_slice(&second);
    let relu_sum = |v: &[f32]| v.iter().map(|a| a.max(0.0) as f64).sum::<f64>();
    let mut s = ctx.stream().unwrap();
    let mut warm = s.record();
    warm.elementwise(ElementwiseOp::Relu, &x, None, &y, 1.0)
        .unwrap();
    warm.sum(&y, &total).unwrap();
    s = warm.sync().unwrap();
    let graph = s
        .capture(|s| {
            s.elementwise(ElementwiseOp::Relu, &x, None, &y, 1.0)?;
            s.sum(&y, &total)
        })
        .unwrap();
    let mut got = Vec::new();
    for input in [None, Some(&pinned)] {
        let mut run = s.record();
        if let Some(p) = input {
            run.copy_to_device_async(p, &x).unwrap();
        }
        graph.launch(&mut run).unwrap();
        s = run.sync().unwrap();
        got.push(total_of(&ctx, &total));
    }
    drop(graph);
    let want = [relu_sum(&first), relu_sum(&second)];
    for (g, w) in got.iter().zip(want) {
        assert!(
            (*g as f64 - w).abs() <= 1e-4 * w.abs().max(1.0),
            "{got:?} vs {want:?}"
        );
    }
    assert_ne!(got[0], got[1]);
    assert_eq!(total.to_vec().unwrap()[0], got[1]);
}

/// Reads one f32 through a copy (the graph still borrows `total`).
fn total_of(ctx: &Context, total: &DeviceBuffer<f32>) -> f32 {
    let mut out = ctx.alloc::<f32>(1).unwrap();
    out.copy_from_device(total).unwrap();
    out.to_vec().unwrap()[0]
}

/// A GEMM cut into four ranges (its partial products in scratch the op allocates during
/// the capture, kept by the graph) replayed twice, each time matching the CPU reference.
#[test]
fn captured_split_k_keeps_its_scratch() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(12);
    let (m, n, k) = (70, 68, 300);
    let a = rng.vec(m * k, -1.0, 1.0);
    let b = rng.vec(k * n, -1.0, 1.0);
    let want = gemm::reference(&a, &b, m, n, k);
    let (da, db) = (ctx.upload(&a).unwrap(), ctx.upload(&b).unwrap());
    let mut c = ctx.alloc::<f32>(m * n).unwrap();
    let sliced = GemmVariant::TiledSliced;
    let mut s = ctx.stream().unwrap();
    let mut warm = s.record();
    warm.gemm_split(sliced, 4, &da, &db, &c, m, n, k).unwrap();
    s = warm.sync().unwrap();
    c.fill_u32(0).unwrap();
    let graph = s
        .capture(|s| s.gemm_split(sliced, 4, &da, &db, &c, m, n, k))
        .unwrap();
    let mut run = s.record();
    graph.launch(&mut run).unwrap();
    graph.launch(&mut run).unwrap();
    s = run.sync().unwrap();
    drop(graph);
    let got = c.to_vec().unwrap();
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!((g - w).abs() <= 1e-4 * (1.0 + w.abs()), "[{i}] {g} vs {w}");
    }
    drop(s);
}

/// An op that fails its checks inside the capture fails the capture (the stream leaves
/// capture mode) and the stream runs work afterwards.
#[test]
fn a_failed_capture_leaves_the_stream_usable() {
    let Some(ctx) = ctx() else { return };
    let x = ctx.upload(&[1.0f32, 2.0, 3.0]).unwrap();
    let short = ctx.alloc::<f32>(2).unwrap();
    let mut total = ctx.alloc::<f32>(1).unwrap();
    let mut s = ctx.stream().unwrap();
    let e = s
        .capture(|s| {
            s.sum(&x, &total)?;
            s.elementwise(ElementwiseOp::Relu, &x, None, &short, 1.0)
        })
        .unwrap_err();
    assert!(
        matches!(e, GpuError::LengthMismatch { .. } | GpuError::Shape { .. }),
        "{e}"
    );
    let mut run = s.record();
    run.sum(&x, &total).unwrap();
    run.sync().unwrap();
    assert_eq!(total.to_vec().unwrap(), [6.0]);
}

/// Another thread uploads and reads back buffers (synchronous copies on the legacy
/// default stream, which waits for every blocking stream) while a capture records, in
/// the middle of it: both the copies and the capture succeed, and the graph computes
/// what the same ops compute on a stream. On a blocking capturing stream the driver
/// failed the capture (`CUDA_ERROR_STREAM_CAPTURE_IMPLICIT`).
#[test]
fn another_threads_copies_leave_a_capture_whole() {
    use std::sync::mpsc::channel;
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(5);
    let data = rng.vec(4096, -1.0, 1.0);
    let x = ctx.upload(&data).unwrap();
    let y = ctx.alloc::<f32>(data.len()).unwrap();
    let mut total = ctx.alloc::<f32>(1).unwrap();
    let mut s = ctx.stream().unwrap();
    let (go, copy) = channel::<()>();
    let (copied, wait) = channel::<Vec<f32>>();
    std::thread::scope(|scope| {
        let other = ctx.clone();
        let data = &data;
        scope.spawn(move || {
            while copy.recv().is_ok() {
                let mut b = other.upload(data).unwrap();
                copied.send(b.to_vec().unwrap()).unwrap();
            }
        });
        for round in 0..3 {
            let graph = s
                .capture(|s| {
                    s.elementwise(ElementwiseOp::Relu, &x, None, &y, 1.0)?;
                    go.send(()).unwrap();
                    let back = wait.recv().unwrap();
                    assert_eq!(back, *data, "round {round}: the other thread's copy");
                    s.sum(&y, &total)
                })
                .unwrap_or_else(|e| panic!("round {round}: {e}"));
            let mut run = s.record();
            graph.launch(&mut run).unwrap();
            s = run.sync().unwrap();
            drop(graph);
            let want: f64 = data.iter().map(|a| a.max(0.0) as f64).sum();
            let got = total.to_vec().unwrap()[0] as f64;
            assert!(
                (got - want).abs() <= 1e-4 * want.abs().max(1.0),
                "{got} vs {want}"
            );
        }
        drop(go);
    });
}

/// Decode attention (its flash-decoding partials in scratch allocated during the
/// capture) captured with the cache lengths in a device buffer: replays after the
/// lengths change match the same op run on a stream at each length, bitwise (the same
/// kernels on the same data).
#[test]
fn captured_decode_attention_follows_its_lengths() {
    use trueno_gpu::kernels::attention::DecodeShape;
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(13);
    let shape = DecodeShape {
        batch: 2,
        heads_q: 8,
        heads_kv: 2,
        capacity: 3000,
        dim: 128,
    };
    let cache = shape.batch * shape.heads_kv * shape.capacity * shape.dim;
    let k = ctx.upload(&rng.vec(cache, -1.0, 1.0)).unwrap();
    let v = ctx.upload(&rng.vec(cache, -1.0, 1.0)).unwrap();
    let q = ctx
        .upload(&rng.vec(shape.batch * shape.heads_q * 128, -1.0, 1.0))
        .unwrap();
    let scale = 1.0 / 128f32.sqrt();
    let rows = shape.batch * shape.heads_q * 128;
    let direct = |lens: &[u32]| {
        let lens = ctx.upload(lens).unwrap();
        let mut out = ctx.alloc::<f32>(rows).unwrap();
        let mut s = ctx.stream().unwrap().record();
        s.decode_attention(&q, &k, &v, &lens, &out, shape, scale)
            .unwrap();
        s.sync().unwrap();
        out.to_vec().unwrap()
    };
    let lens = ctx.upload(&[1u32, 1]).unwrap();
    let out = ctx.alloc::<f32>(rows).unwrap();
    let mut s = ctx.stream().unwrap();
    let graph = s
        .capture(|s| s.decode_attention(&q, &k, &v, &lens, &out, shape, scale))
        .unwrap();
    for step in [[17u32, 2999], [3000, 640]] {
        let mut pinned = ctx.alloc_host::<u32>(2).unwrap();
        pinned.copy_from_slice(&step);
        let mut run = s.record();
        run.copy_to_device_async(&pinned, &lens).unwrap();
        graph.launch(&mut run).unwrap();
        s = run.sync().unwrap();
        let mut got = ctx.alloc::<f32>(rows).unwrap();
        got.copy_from_device(&out).unwrap();
        let got = got.to_vec().unwrap();
        let want = direct(&step);
        assert!(
            got.iter()
                .zip(&want)
                .all(|(g, w)| g.to_bits() == w.to_bits()),
            "lengths {step:?}: the replay differs from the op on a stream"
        );
    }
}
