//! FlashAttention forward on the device against an f64 softmax of the same 16-bit
//! inputs: packed variable-length batches (empty, 1-token and tile-ragged sequences),
//! causal and not, queries fewer and more than keys, GQA and MQA, every head dimension,
//! flat and peaked softmaxes, and the shape errors; the log-sum-exp output against an f64
//! one, with the output unchanged by asking for it; every case on each kernel the device
//! runs (`mma.sync`, and on Hopper the wgmma kernel). Skipped without a GPU.

mod common;
use common::device::{Half, Rng, ctx, halves, small};

use half::{bf16, f16};
use trueno_gpu::driver::Context;
use trueno_gpu::kernels::flash_attention::{
    FlashPath, FlashShape, HEAD_DIMS, reference, reference_lse,
};

/// One case: per-sequence query and key lengths, heads, dim, causal, scale.
struct Case<'a> {
    lens: &'a [(usize, usize)],
    heads: (usize, usize),
    dim: usize,
    causal: bool,
    scale: f32,
}

fn offsets(lens: impl Iterator<Item = usize>) -> Vec<u32> {
    let mut cu = vec![0u32];
    for l in lens {
        cu.push(cu.last().unwrap() + l as u32);
    }
    cu
}

fn check<T: Half>(ctx: &Context, rng: &mut Rng, c: &Case) {
    let (hq, hkv) = c.heads;
    let cu_q = offsets(c.lens.iter().map(|l| l.0));
    let cu_k = offsets(c.lens.iter().map(|l| l.1));
    let shape = FlashShape {
        batch: c.lens.len(),
        heads_q: hq,
        heads_kv: hkv,
        dim: c.dim,
        total_q: *cu_q.last().unwrap() as usize,
        total_k: *cu_k.last().unwrap() as usize,
        max_seqlen_q: c.lens.iter().map(|l| l.0).max().unwrap(),
        causal: c.causal,
    };
    let q: Vec<T> = halves(rng, shape.total_q * hq * c.dim);
    let k: Vec<T> = halves(rng, shape.total_k * hkv * c.dim);
    let v: Vec<T> = halves(rng, shape.total_k * hkv * c.dim);
    let f = |x: &[T]| -> Vec<f32> { x.iter().map(|&h| h.to_f64() as f32).collect() };
    let want = reference(&f(&q), &f(&k), &f(&v), &cu_q, &cu_k, shape, c.scale);

    let (dq, dk, dv) = (
        ctx.upload(&q).unwrap(),
        ctx.upload(&k).unwrap(),
        ctx.upload(&v).unwrap(),
    );
    let (dcq, dck) = (ctx.upload(&cu_q).unwrap(), ctx.upload(&cu_k).unwrap());
    let want_lse = reference_lse(&f(&q), &f(&k), &cu_q, &cu_k, shape, c.scale);
    for path in paths(ctx) {
        let mut out = ctx.upload(&vec![T::from_f32(f32::NAN); q.len()]).unwrap();
        let mut s = ctx.stream().unwrap().record();
        let io = (&dq, &dk, &dv, &out);
        s.flash_attention_with(path, io, None, (&dcq, &dck), shape, c.scale)
            .unwrap();
        s.sync().unwrap();
        let got = out.to_vec().unwrap();
        // Again with the log-sum-exp: the same output bit for bit.
        let mut lse = ctx.upload(&vec![f32::NAN; hq * shape.total_q]).unwrap();
        let mut out2 = ctx.upload(&vec![T::from_f32(f32::NAN); q.len()]).unwrap();
        let mut s = ctx.stream().unwrap().record();
        let io = (&dq, &dk, &dv, &out2);
        s.flash_attention_with(path, io, Some(&lse), (&dcq, &dck), shape, c.scale)
            .unwrap();
        s.sync().unwrap();
        let same = out2.to_vec().unwrap();
        assert!(
            got.iter()
                .zip(&same)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "{path:?}: the output changed with the lse"
        );
        let lse = lse.to_vec().unwrap();
        let what = format!(
            "{path:?} {} d{} heads {hq}/{hkv} causal {} scale {} lens {:?}",
            std::any::type_name::<T>(),
            c.dim,
            c.causal,
            c.scale,
            c.lens
        );
        // The probabilities are rounded to T before P V (at most UNIT of each weight,
        // so UNIT of max |v| in the output) and the output once more (UNIT of it); the
        // f32 scores and exponentials add far less. Twice that, for the approximate ex2.
        let bound = |w: f64| 2.0 * T::UNIT * (1.0 + w.abs()) + 1e-6;
        // Scores are exact products of 16-bit values summed in f32 (dim roundings of at
        // most scale * dim in size), then ex2.approx and lg2.approx (2^-22 each).
        let lse_bound = |w: f64| {
            1e-5 * (1.0 + w.abs()) + (c.dim * c.dim) as f64 * c.scale as f64 * 2f64.powi(-23)
        };
        for (i, (&g, &w)) in lse.iter().zip(&want_lse).enumerate() {
            let (h, tok) = (i / shape.total_q, i % shape.total_q);
            if w == f32::NEG_INFINITY {
                assert_eq!(g, w, "{what}: lse head {h} token {tok}");
            } else {
                assert!(
                    (g as f64 - w as f64).abs() <= lse_bound(w as f64),
                    "{what}: lse head {h} token {tok}: got {g}, want {w}"
                );
            }
        }
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            let g = g.to_f64();
            let (tok, h, e) = (i / (hq * c.dim), i / c.dim % hq, i % c.dim);
            assert!(
                (g - w as f64).abs() <= bound(w as f64),
                "{what}: token {tok} head {h} elem {e}: got {g}, want {w}"
            );
        }
    }
}

/// The kernels this device runs: `mma.sync` everywhere, the wgmma kernel on Hopper.
fn paths(ctx: &Context) -> Vec<FlashPath> {
    let mut p = vec![FlashPath::Mma];
    if ctx.has_sm90a() {
        p.push(FlashPath::Wgmma);
    } else {
        eprintln!("no sm_90a device: the wgmma FlashAttention kernel is not run here");
    }
    p
}

fn check_both(ctx: &Context, rng: &mut Rng, c: &Case) {
    check::<bf16>(ctx, rng, c);
    check::<f16>(ctx, rng, c);
}

#[test]
fn flash_attention_matches_an_f64_softmax_on_ragged_batches() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(17);
    // Self-attention lengths: one token, tile-ragged, an empty sequence, several tiles.
    let long: &[(usize, usize)] = if small() {
        &[(1, 1), (37, 37), (0, 0), (130, 130)]
    } else {
        &[(1, 1), (37, 37), (0, 0), (130, 130), (64, 64), (300, 300)]
    };
    for dim in HEAD_DIMS.map(|d| d as usize) {
        for causal in [false, true] {
            check_both(
                &ctx,
                &mut rng,
                &Case {
                    lens: long,
                    heads: (4, 2),
                    dim,
                    causal,
                    scale: 1.0 / (dim as f32).sqrt(),
                },
            );
        }
    }
}

#[test]
fn head_dim_64_runs_both_block_heights() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(41);
    // Query sequences of at most `SHORT_SEQ` (1024) tokens take the two-warpgroup
    // Hopper kernel at head dim 64 (128-row blocks), longer ones the three-warpgroup one
    // (192 rows): one batch each side of the line, ragged.
    let short: &[(usize, usize)] = &[(1024, 1024), (37, 37), (200, 1000)];
    let long: &[(usize, usize)] = &[(1100, 1100), (5, 5), (193, 193)];
    for lens in [short, long] {
        for causal in [false, true] {
            check_both(
                &ctx,
                &mut rng,
                &Case {
                    lens,
                    heads: (2, 1),
                    dim: 64,
                    causal,
                    scale: 0.125,
                },
            );
        }
    }
}

#[test]
fn causal_masks_align_bottom_right_when_query_and_key_lengths_differ() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(29);
    // A suffix of 5 queries over 300 keys (chunked prefill), 70 queries over 3 keys (most
    // rows see nothing and must be zeros), 33 over 97.
    for dim in [64, 128] {
        for causal in [true, false] {
            check_both(
                &ctx,
                &mut rng,
                &Case {
                    lens: &[(5, 300), (70, 3), (33, 97)],
                    heads: (6, 1),
                    dim,
                    causal,
                    scale: 0.2,
                },
            );
        }
    }
}

#[test]
fn grouped_heads_and_peaked_softmaxes() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(41);
    for (heads, scale) in [((8, 8), 0.125f32), ((8, 1), 1.0), ((12, 3), 4.0)] {
        check_both(
            &ctx,
            &mut rng,
            &Case {
                lens: &[(129, 129), (65, 200)],
                heads,
                dim: 64,
                causal: true,
                scale,
            },
        );
    }
}

#[test]
fn non_finite_keys_and_values_stay_in_their_own_sequence() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(53);
    // Sequence 0 ends mid-tile, so its last key/value tile reaches into sequence 1,
    // whose keys and values are Inf and NaN: sequence 0's rows must not see them.
    let (cu, hq, hkv) = ([0u32, 37, 77], 2, 1);
    for dim in HEAD_DIMS.map(|d| d as usize) {
        for causal in [false, true] {
            let shape = FlashShape {
                batch: 2,
                heads_q: hq,
                heads_kv: hkv,
                dim,
                total_q: 77,
                total_k: 77,
                max_seqlen_q: 40,
                causal,
            };
            let q: Vec<bf16> = halves(&mut rng, 77 * hq * dim);
            let mut k: Vec<bf16> = halves(&mut rng, 77 * hkv * dim);
            let mut v: Vec<bf16> = halves(&mut rng, 77 * hkv * dim);
            for (i, x) in k[37 * dim..].iter_mut().enumerate() {
                *x = [bf16::INFINITY, bf16::NAN][i % 2];
            }
            for (i, x) in v[37 * dim..].iter_mut().enumerate() {
                *x = [bf16::NAN, bf16::NEG_INFINITY][i % 2];
            }
            let f = |x: &[bf16]| -> Vec<f32> { x.iter().map(|h| h.to_f32()).collect() };
            let want = reference(&f(&q), &f(&k), &f(&v), &cu, &cu, shape, 0.1);
            let (dq, dk, dv) = (
                ctx.upload(&q).unwrap(),
                ctx.upload(&k).unwrap(),
                ctx.upload(&v).unwrap(),
            );
            let dcu = ctx.upload(&cu).unwrap();
            for path in paths(&ctx) {
                let mut out = ctx.alloc::<bf16>(q.len()).unwrap();
                let mut s = ctx.stream().unwrap().record();
                s.flash_attention_with(path, (&dq, &dk, &dv, &out), None, (&dcu, &dcu), shape, 0.1)
                    .unwrap();
                s.sync().unwrap();
                let got = out.to_vec().unwrap();
                for (i, (g, &w)) in got[..37 * hq * dim].iter().zip(&want).enumerate() {
                    let g = g.to_f64();
                    assert!(
                        (g - w as f64).abs() <= 2.0 * 2f64.powi(-8) * (1.0 + w.abs() as f64),
                        "{path:?} d{dim} causal {causal} value {i}: got {g}, want {w}"
                    );
                }
            }
        }
    }
}

#[test]
fn blocks_in_several_launch_groups_each_take_their_own_tile() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(53);
    // At head dims 128 and 256 blocks go out in groups of about 128 (`ORDER_BLOCKS`):
    // here 3-5 query tiles a sequence, so groups of 25-42 (head, sequence) pairs, and 10
    // sequences x 8 heads make several groups, the last one short. A tile taken twice
    // or never leaves its rows NaN or wrong.
    let lens: &[(usize, usize)] = &[
        (300, 300),
        (1, 1),
        (129, 129),
        (0, 0),
        (257, 257),
        (64, 64),
        (200, 200),
        (37, 37),
        (300, 300),
        (130, 130),
    ];
    for dim in [128, 256] {
        for causal in [true, false] {
            check_both(
                &ctx,
                &mut rng,
                &Case {
                    lens,
                    heads: (8, 2),
                    dim,
                    causal,
                    scale: 1.0 / (dim as f32).sqrt(),
                },
            );
        }
    }
}

#[test]
fn queries_without_any_keys_give_zeros() {
    let Some(ctx) = ctx() else { return };
    // Two sequences of queries, no key tokens at all: every row sees nothing.
    let shape = FlashShape {
        batch: 2,
        heads_q: 2,
        heads_kv: 1,
        dim: 128,
        total_q: 7,
        total_k: 0,
        max_seqlen_q: 4,
        causal: false,
    };
    let q = ctx.upload(&vec![bf16::ONE; 7 * 2 * 128]).unwrap();
    let kv = ctx.alloc::<bf16>(0).unwrap();
    let mut out = ctx.upload(&vec![bf16::NAN; 7 * 2 * 128]).unwrap();
    let (cu_q, cu_k) = (
        ctx.upload(&[0u32, 3, 7]).unwrap(),
        ctx.upload(&[0u32, 0, 0]).unwrap(),
    );
    let mut s = ctx.stream().unwrap().record();
    s.flash_attention(&q, &kv, &kv, &out, &cu_q, &cu_k, shape, 0.1)
        .unwrap();
    s.sync().unwrap();
    assert!(out.to_vec().unwrap().iter().all(|x| x.to_f32() == 0.0));
    if ctx.has_sm90a() {
        let mut s = ctx.stream().unwrap().record();
        let io = (&q, &kv, &kv, &out);
        let e = s
            .flash_attention_with(FlashPath::Wgmma, io, None, (&cu_q, &cu_k), shape, 0.1)
            .unwrap_err();
        assert!(e.to_string().contains("tensor map"), "{e}");
    }
}

#[test]
fn flash_attention_rejects_what_it_cannot_serve() {
    let Some(ctx) = ctx() else { return };
    let shape = FlashShape {
        batch: 1,
        heads_q: 2,
        heads_kv: 1,
        dim: 64,
        total_q: 4,
        total_k: 4,
        max_seqlen_q: 4,
        causal: false,
    };
    let q = ctx.upload(&vec![bf16::ONE; 4 * 2 * 64]).unwrap();
    let kv = ctx.upload(&vec![bf16::ONE; 4 * 64]).unwrap();
    let out = ctx.alloc::<bf16>(4 * 2 * 64).unwrap();
    let small_out = ctx.alloc::<bf16>(8).unwrap();
    let q16 = ctx.upload(&[f16::ONE; 8]).unwrap();
    let cu = ctx.upload(&[0u32, 4]).unwrap();
    let lse7 = ctx.alloc::<f32>(7).unwrap();
    let mut s = ctx.stream().unwrap().record();
    // The log-sum-exp needs heads_q * total_q = 8 values.
    let e = s
        .flash_attention_lse(&q, &kv, &kv, &out, &lse7, &cu, &cu, shape, 1.0)
        .unwrap_err();
    assert!(e.to_string().contains("lse"), "{e}");
    let mut err = |shape: FlashShape, out, scale| {
        s.flash_attention(&q, &kv, &kv, out, &cu, &cu, shape, scale)
            .unwrap_err()
            .to_string()
    };
    let e = err(FlashShape { dim: 80, ..shape }, &out, 1.0);
    assert!(e.contains("head dim"), "{e}");
    let e = err(
        FlashShape {
            heads_kv: 3,
            ..shape
        },
        &out,
        1.0,
    );
    assert!(e.contains("multiple"), "{e}");
    let e = err(shape, &out, -1.0);
    assert!(e.contains("scale"), "{e}");
    let e = err(shape, &q, 1.0);
    assert!(e.contains("alias"), "{e}");
    let e = err(
        FlashShape {
            total_q: 5,
            ..shape
        },
        &out,
        1.0,
    );
    assert!(e.contains("flash_attention q"), "{e}");
    let e = err(shape, &small_out, 1.0);
    assert!(e.contains("flash_attention out"), "{e}");
    if !ctx.has_sm90a() {
        let e = s
            .flash_attention_with(
                FlashPath::Wgmma,
                (&q, &kv, &kv, &out),
                None,
                (&cu, &cu),
                shape,
                1.0,
            )
            .unwrap_err();
        assert!(e.to_string().contains("sm_90a"), "{e}");
    }
    // f16 goes through the same checks.
    assert!(
        s.flash_attention(&q16, &q16, &q16, &q16, &cu, &cu, shape, 1.0)
            .is_err()
    );
    s.sync().unwrap();
}
