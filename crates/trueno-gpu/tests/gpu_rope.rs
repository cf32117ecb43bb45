//! Rotary position embedding on the GPU against an f64 reference: both pairings, decode
//! (one token) and prefill shapes, head dims 2 to 128, positions from 0 to 100000, the
//! standard and a scaled frequency table, in place and out of place; and the errors that
//! must come before a launch.
//!
//! Without a CUDA device each test prints SKIPPED and passes (`TRUENO_REQUIRE_GPU=1`
//! makes that a failure).

mod common;
use common::device::{POISON, Rng, ctx, poisoned};
use trueno_gpu::kernels::rope::{RopeMode, inv_freq, reference};

#[test]
fn rope_matches_the_f64_reference() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(0x0e0e);
    // (tokens, heads, dim): tiny, ragged, decode, prefill, a dim that is no power of two.
    let shapes = [
        (1, 1, 2),
        (3, 5, 64),
        (1, 32, 128),
        (17, 8, 128),
        (64, 4, 96),
    ];
    for mode in RopeMode::ALL {
        for &(tokens, heads, dim) in &shapes {
            let std = inv_freq(10000.0, dim);
            let scaled: Vec<f32> = inv_freq(500000.0, dim).iter().map(|f| f / 8.0).collect();
            for freqs in [std, scaled] {
                let n = tokens * heads * dim;
                let x = rng.vec(n, -2.0, 2.0);
                let positions: Vec<u32> = (0..tokens)
                    .map(|t| match t {
                        0 => 0,
                        1 => 1,
                        _ => (rng.next() % 100_000) as u32,
                    })
                    .collect();
                let want = reference(mode, &x, &positions, &freqs, heads);
                let xd = ctx.upload(&x).unwrap();
                let pd = ctx.upload(&positions).unwrap();
                let fd = ctx.upload(&freqs).unwrap();
                let mut out = poisoned(&ctx, n);
                let mut inplace = ctx.upload(&x).unwrap();
                let mut s = ctx.stream().unwrap().record();
                s.rope(mode, &xd, &pd, &fd, &out, tokens, heads, dim)
                    .unwrap();
                s.rope(mode, &inplace, &pd, &fd, &inplace, tokens, heads, dim)
                    .unwrap();
                s.sync().unwrap();
                let what = format!("{} {tokens}x{heads}x{dim}", mode.name());
                for got in [out.to_vec().unwrap(), inplace.to_vec().unwrap()] {
                    for (row, head) in got.chunks(dim).enumerate() {
                        let pos = positions[row / heads] as f64;
                        for (i, &f) in freqs.iter().enumerate() {
                            let (j, k) = mode.pair(i, dim);
                            let base = row * dim;
                            // The f32 angle (2^-24 relative), its reduction and the
                            // hardware sine/cosine (about 2^-20 absolute), the products.
                            let theta = pos * f as f64;
                            let mass = (x[base + j].abs() + x[base + k].abs()) as f64;
                            let bound = mass * (theta * 2f64.powi(-23) + 2f64.powi(-18));
                            for e in [j, k] {
                                let g = head[e];
                                assert!(g.to_bits() != POISON, "{what}: element never written");
                                let err = (g as f64 - want[base + e] as f64).abs();
                                assert!(
                                    err <= bound,
                                    "{what} row {row} pair {i} pos {pos}: got {g}, want {} (err {err:e} > {bound:e})",
                                    want[base + e]
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn rope_rejects_bad_shapes_before_launch() {
    let Some(ctx) = ctx() else { return };
    let x = ctx.alloc::<f32>(2 * 3 * 8).unwrap();
    let pos = ctx.alloc::<u32>(2).unwrap();
    let short_pos = ctx.alloc::<u32>(1).unwrap();
    let f = ctx.alloc::<f32>(4).unwrap();
    let short_f = ctx.alloc::<f32>(3).unwrap();
    let mut s = ctx.stream().unwrap().record();
    for mode in RopeMode::ALL {
        assert!(s.rope(mode, &x, &pos, &f, &x, 2, 3, 8).is_ok());
        assert!(
            s.rope(mode, &x, &short_pos, &f, &x, 2, 3, 8).is_err(),
            "positions"
        );
        assert!(
            s.rope(mode, &x, &pos, &short_f, &x, 2, 3, 8).is_err(),
            "inv_freq"
        );
        assert!(s.rope(mode, &x, &pos, &f, &x, 2, 4, 8).is_err(), "x length");
        assert!(
            s.rope(mode, &x, &pos, &f, &x, 2, 6, 4).is_err(),
            "freqs for dim 4"
        );
        assert!(
            s.rope(mode, &x, &pos, &f, &x, 0, 3, 8).is_err(),
            "no tokens"
        );
    }
    s.sync().unwrap();
}
