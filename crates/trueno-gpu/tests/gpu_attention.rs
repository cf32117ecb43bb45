//! Decode attention and the KV-cache append on the device against their f64 / CPU
//! references: ragged sequence lengths in one batch, grouped-query and multi-query
//! heads, every head dimension, lengths past the capacity, empty sequences, NaN
//! propagation, bf16 and f16 caches, and the shape errors. Skipped without a GPU.

mod common;
use common::device::{Half, POISON, Rng, assert_close, ctx, halves, poisoned, small};

use half::{bf16, f16};
use trueno_gpu::memory::FloatElem;

use trueno_gpu::kernels::attention::{DecodeShape, reference};
use trueno_gpu::kernels::decode_split::DecodePath;
use trueno_gpu::kernels::kv_cache;

fn run<C: FloatElem>(
    ctx: &trueno_gpu::driver::Context,
    shape: DecodeShape,
    q: &[f32],
    k: &[C],
    v: &[C],
    lens: &[u32],
) -> Vec<f32> {
    run_on(ctx, DecodePath::for_cache(C::TYPE), shape, q, (k, v), lens)
}

fn run_on<C: FloatElem>(
    ctx: &trueno_gpu::driver::Context,
    path: DecodePath,
    shape: DecodeShape,
    q: &[f32],
    (k, v): (&[C], &[C]),
    lens: &[u32],
) -> Vec<f32> {
    let (dq, dk, dv, dl) = (
        ctx.upload(q).unwrap(),
        ctx.upload(k).unwrap(),
        ctx.upload(v).unwrap(),
        ctx.upload(lens).unwrap(),
    );
    let mut out = poisoned(ctx, q.len());
    let scale = 1.0 / (shape.dim as f32).sqrt();
    let mut s = ctx.stream().unwrap().record();
    s.decode_attention_with(path, (&dq, &dk, &dv), &dl, &out, shape, scale)
        .unwrap();
    s.sync().unwrap();
    out.to_vec().unwrap()
}

fn shape(
    batch: usize,
    heads_q: usize,
    heads_kv: usize,
    capacity: usize,
    dim: usize,
) -> DecodeShape {
    DecodeShape {
        batch,
        heads_q,
        heads_kv,
        capacity,
        dim,
    }
}

/// The f64 reference over a 16-bit cache's values, at the tests' scale.
fn reference_16bit<T: Half>(
    q: &[f32],
    (k, v): (&[T], &[T]),
    lens: &[u32],
    sh: DecodeShape,
) -> Vec<f32> {
    let wide = |x: &[T]| -> Vec<f32> { x.iter().map(|h| h.to_f64() as f32).collect() };
    let dims = (sh.heads_q, sh.heads_kv, sh.capacity, sh.dim);
    let scale = 1.0 / (sh.dim as f32).sqrt();
    reference(q, &wide(k), &wide(v), lens, dims, scale)
}

#[test]
fn decode_attention_matches_an_f64_softmax_over_ragged_lengths() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(17);
    let mut cases = vec![
        (shape(1, 4, 4, 1, 64), vec![1u32]),
        (shape(2, 8, 2, 300, 128), vec![300, 17]),
        (shape(4, 4, 1, 1000, 256), vec![0, 999, 1000, 1005]),
        (shape(1, 32, 8, 5000, 128), vec![4097]),
        (shape(3, 6, 3, 129, 64), vec![64, 65, 129]),
        (shape(2, 8, 1, 200, 256), vec![200, 3]),
        (shape(1, 12, 2, 257, 64), vec![256]),
        (shape(2, 16, 2, 333, 128), vec![333, 100]),
        (shape(1, 8, 1, 90, 64), vec![77]),
        // Eight heads a block, two blocks a group; two heads a block at dimension 256.
        (shape(2, 16, 1, 150, 64), vec![150, 31]),
        (shape(1, 4, 2, 77, 256), vec![70]),
    ];
    if !small() {
        cases.push((shape(1, 32, 8, 32768, 128), vec![30001]));
    }
    for (sh, lens) in cases {
        let q = rng.vec(sh.batch * sh.heads_q * sh.dim, -1.0, 1.0);
        let cache = sh.batch * sh.heads_kv * sh.capacity * sh.dim;
        let k = rng.vec(cache, -1.0, 1.0);
        let v = rng.vec(cache, -1.0, 1.0);
        let got = run(&ctx, sh, &q, &k, &v, &lens);
        let clamped: Vec<u32> = lens.iter().map(|&l| l.min(sh.capacity as u32)).collect();
        let scale = 1.0 / (sh.dim as f32).sqrt();
        let dims = (sh.heads_q, sh.heads_kv, sh.capacity, sh.dim);
        let want = reference(&q, &k, &v, &clamped, dims, scale);
        assert_close(&format!("{sh:?} {lens:?}"), &got, &want, 1e-3, 5e-5);
        // An empty sequence attends to nothing: zeros, not NaN.
        for (b, &l) in lens.iter().enumerate() {
            if l == 0 {
                let row = &got[b * sh.heads_q * sh.dim..][..sh.heads_q * sh.dim];
                assert!(row.iter().all(|&x| x == 0.0), "{sh:?}: empty sequence {b}");
            }
        }
    }
}

/// A 16-bit cache gives what an f32 cache holding the same (rounded) values gives: the
/// kernel widens each element exactly, so the f32 path's tolerance holds.
fn check_16bit<T: Half + FloatElem>(ctx: &trueno_gpu::driver::Context, rng: &mut Rng) {
    let shapes = [
        (
            DecodeShape {
                batch: 2,
                heads_q: 8,
                heads_kv: 2,
                capacity: 300,
                dim: 128,
            },
            vec![300u32, 17],
        ),
        (
            DecodeShape {
                batch: 3,
                heads_q: 6,
                heads_kv: 3,
                capacity: 129,
                dim: 64,
            },
            vec![64, 0, 129],
        ),
        (
            DecodeShape {
                batch: 1,
                heads_q: 8,
                heads_kv: 1,
                capacity: 1000,
                dim: 256,
            },
            vec![999],
        ),
        (
            DecodeShape {
                batch: 1,
                heads_q: 16,
                heads_kv: 2,
                capacity: 200,
                dim: 128,
            },
            vec![187],
        ),
    ];
    for (sh, lens) in shapes {
        let q = rng.vec(sh.batch * sh.heads_q * sh.dim, -1.0, 1.0);
        let cache = sh.batch * sh.heads_kv * sh.capacity * sh.dim;
        let k: Vec<T> = halves(rng, cache);
        let v: Vec<T> = halves(rng, cache);
        let want = reference_16bit(&q, (&k, &v), &lens, sh);
        for path in [DecodePath::Simt, DecodePath::Mma] {
            let got = run_on(ctx, path, sh, &q, (&k, &v), &lens);
            let what = format!(
                "{} cache {path:?} {sh:?} {lens:?}",
                std::any::type_name::<T>()
            );
            assert_close(&what, &got, &want, 1e-3, 5e-5);
        }
    }
}

/// The tensor-core kernel at every group size it tiles differently (one head, odd
/// groups, one full tile of 16, past it), lengths at and around its 64-row tiles and
/// chunk ends, every head dimension; rows past each sequence hold NaN (they must land
/// as zeros, never read into an output) and one query head is NaN (its own output only).
fn check_mma_groups<T: Half + FloatElem>(ctx: &trueno_gpu::driver::Context, rng: &mut Rng) {
    let cases = [
        (shape(2, 4, 4, 130, 64), vec![1u32, 130]),
        (shape(1, 28, 4, 300, 128), vec![257]),
        (shape(3, 64, 8, 200, 128), vec![63, 64, 65]),
        (shape(1, 16, 1, 1100, 64), vec![1025]),
        (shape(2, 34, 2, 129, 128), vec![128, 0]),
        (shape(1, 32, 1, 96, 256), vec![96]),
        (shape(1, 12, 4, 2200, 256), vec![2111]),
        // Chunks of several tiles (on an H100 3 and 9 of 64 rows), around the stages.
        (shape(1, 8, 8, 9000, 128), vec![8999]),
        (shape(1, 16, 8, 9000, 256), vec![7001]),
    ];
    for (sh, lens) in cases {
        let mut q = rng.vec(sh.batch * sh.heads_q * sh.dim, -1.0, 1.0);
        let bad_head = sh.heads_q - 1;
        q[bad_head * sh.dim + 3] = f32::NAN;
        let mut k: Vec<T> = halves(rng, sh.batch * sh.heads_kv * sh.capacity * sh.dim);
        let mut v: Vec<T> = halves(rng, k.len());
        for (b, &len) in lens.iter().enumerate() {
            for h in 0..sh.heads_kv {
                let row0 = (b * sh.heads_kv + h) * sh.capacity;
                let past = (row0 + len as usize) * sh.dim..(row0 + sh.capacity) * sh.dim;
                k[past.clone()].fill(T::from_f32(f32::NAN));
                v[past].fill(T::from_f32(f32::INFINITY));
            }
        }
        let got = run_on(ctx, DecodePath::Mma, sh, &q, (&k, &v), &lens);
        let mut want = reference_16bit(&q, (&k, &v), &lens, sh);
        // The poisoned head (every case's first sequence has keys) is NaN throughout (the
        // reference's softmax, which skips NaN maxima, says 0 there); every other head as
        // the reference.
        for x in &mut want[bad_head * sh.dim..][..sh.dim] {
            *x = f32::NAN;
        }
        let what = format!("{} cache {sh:?} {lens:?}", std::any::type_name::<T>());
        assert_close(&what, &got, &want, 1e-3, 5e-5);
        for (i, head) in got.chunks(sh.dim).enumerate() {
            let poisoned_head = i == bad_head;
            assert_eq!(
                head.iter().all(|x| x.is_nan()),
                poisoned_head,
                "{what}: head {i}"
            );
            assert!(
                poisoned_head || head.iter().all(|x| x.is_finite()),
                "{what}: head {i}"
            );
        }
    }
}

#[test]
fn tensor_core_decode_matches_the_reference_at_every_group_size() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(29);
    check_mma_groups::<bf16>(&ctx, &mut rng);
    check_mma_groups::<f16>(&ctx, &mut rng);
}

#[test]
fn sixteen_bit_caches_attend_like_f32_caches_of_the_same_values() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(23);
    check_16bit::<bf16>(&ctx, &mut rng);
    check_16bit::<f16>(&ctx, &mut rng);
}

/// Appending into a 16-bit cache rounds each value to nearest (even), bit for bit what
/// `half`'s conversion gives, and leaves every other row as it was.
fn check_append_16bit<T: Half + FloatElem>(ctx: &trueno_gpu::driver::Context, rng: &mut Rng) {
    let sh = DecodeShape {
        batch: 2,
        heads_q: 4,
        heads_kv: 2,
        capacity: 9,
        dim: 64,
    };
    let cache_len = sh.batch * sh.heads_kv * sh.capacity * sh.dim;
    let k0: Vec<T> = halves(rng, cache_len);
    let step = sh.batch * sh.heads_kv * sh.dim;
    // Values spanning magnitudes, so rounding (and f16's subnormals) is exercised.
    let kn: Vec<f32> = rng
        .vec(step, -1.0, 1.0)
        .into_iter()
        .enumerate()
        .map(|(i, x)| x * 10f32.powi((i % 9) as i32 - 6))
        .collect();
    let positions = [3u32, 8];
    let mut kc = ctx.upload(&k0).unwrap();
    let vc = ctx.upload(&k0).unwrap();
    let (dkn, dp) = (ctx.upload(&kn).unwrap(), ctx.upload(&positions).unwrap());
    let mut s = ctx.stream().unwrap().record();
    s.kv_append(&dkn, &dkn, &kc, &vc, &dp, sh).unwrap();
    s.sync().unwrap();
    let mut want: Vec<u16> = k0.iter().map(|h| h.to_bits()).collect();
    for (b, &p) in positions.iter().enumerate() {
        for h in 0..sh.heads_kv {
            for e in 0..sh.dim {
                let src = (b * sh.heads_kv + h) * sh.dim + e;
                let dst = ((b * sh.heads_kv + h) * sh.capacity + p as usize) * sh.dim + e;
                want[dst] = T::from_f32(kn[src]).to_bits();
            }
        }
    }
    let got: Vec<u16> = kc.to_vec().unwrap().iter().map(|h| h.to_bits()).collect();
    assert_eq!(got, want, "{}", std::any::type_name::<T>());
}

#[test]
fn kv_append_rounds_into_sixteen_bit_caches() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(29);
    check_append_16bit::<bf16>(&ctx, &mut rng);
    check_append_16bit::<f16>(&ctx, &mut rng);
}

#[test]
fn a_nan_query_poisons_its_own_head_only() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(18);
    // Two heads a block, and eight: the poisoned head shares its block with the others.
    for (heads_q, heads_kv, bad) in [(4, 2, 1), (8, 1, 5)] {
        let sh = DecodeShape {
            batch: 1,
            heads_q,
            heads_kv,
            capacity: 700,
            dim: 64,
        };
        let mut q = rng.vec(heads_q * 64, -1.0, 1.0);
        q[bad * 64 + 5] = f32::NAN;
        let k = rng.vec(heads_kv * 700 * 64, -1.0, 1.0);
        let v = rng.vec(heads_kv * 700 * 64, -1.0, 1.0);
        let got = run(&ctx, sh, &q, &k, &v, &[650]);
        for (h, head) in got.chunks(64).enumerate() {
            assert_eq!(
                head.iter().all(|x| x.is_nan()),
                h == bad,
                "{sh:?} head {h}: {head:?}"
            );
            assert!(h == bad || head.iter().all(|x| x.is_finite()));
        }
    }
}

#[test]
fn kv_append_writes_each_sequence_at_its_position() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(19);
    let sh = DecodeShape {
        batch: 3,
        heads_q: 8,
        heads_kv: 4,
        capacity: 50,
        dim: 128,
    };
    let cache_len = sh.batch * sh.heads_kv * sh.capacity * sh.dim;
    let (k0, v0) = (rng.vec(cache_len, -1.0, 1.0), rng.vec(cache_len, -1.0, 1.0));
    let step = sh.batch * sh.heads_kv * sh.dim;
    let (kn, vn) = (rng.vec(step, -1.0, 1.0), rng.vec(step, -1.0, 1.0));
    // The last sequence is full: its row is left out.
    let positions = [7u32, 49, 50];
    let (mut kc, mut vc) = (ctx.upload(&k0).unwrap(), ctx.upload(&v0).unwrap());
    let (dkn, dvn, dp) = (
        ctx.upload(&kn).unwrap(),
        ctx.upload(&vn).unwrap(),
        ctx.upload(&positions).unwrap(),
    );
    let mut s = ctx.stream().unwrap().record();
    s.kv_append(&dkn, &dvn, &kc, &vc, &dp, sh).unwrap();
    s.sync().unwrap();
    let dims = (sh.heads_kv, sh.capacity, sh.dim);
    assert_eq!(
        kc.to_vec().unwrap(),
        kv_cache::reference(&k0, &kn, &positions, dims, 1)
    );
    assert_eq!(
        vc.to_vec().unwrap(),
        kv_cache::reference(&v0, &vn, &positions, dims, 1)
    );
}

/// A prompt's keys and values in one launch: each sequence's tokens from its start row,
/// the rows past the capacity left out (a start far past it, even `u32::MAX`, writes
/// nothing: the row index must not wrap), into f32 caches and, rounded, 16-bit ones.
#[test]
fn kv_append_tokens_writes_each_prompt_from_its_start() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(23);
    let sh = DecodeShape {
        batch: 4,
        heads_q: 4,
        heads_kv: 2,
        capacity: 40,
        dim: 64,
    };
    let cache_len = sh.batch * sh.heads_kv * sh.capacity * sh.dim;
    let dims = (sh.heads_kv, sh.capacity, sh.dim);
    for tokens in [1usize, 5, 17] {
        // From the start; ending in the middle or running past the end; full; far past.
        let positions = [0u32, 30, 40, u32::MAX];
        let n = sh.batch * tokens * sh.heads_kv * sh.dim;
        let (kn, vn) = (rng.vec(n, -1.0, 1.0), rng.vec(n, -1.0, 1.0));
        let (k0, v0) = (rng.vec(cache_len, -1.0, 1.0), rng.vec(cache_len, -1.0, 1.0));
        let (mut kc, mut vc) = (ctx.upload(&k0).unwrap(), ctx.upload(&v0).unwrap());
        let k16: Vec<bf16> = k0.iter().map(|&x| bf16::from_f32(x)).collect();
        let (mut kb, vb) = (ctx.upload(&k16).unwrap(), ctx.upload(&k16).unwrap());
        let (dkn, dvn) = (ctx.upload(&kn).unwrap(), ctx.upload(&vn).unwrap());
        let dp = ctx.upload(&positions).unwrap();
        let mut s = ctx.stream().unwrap().record();
        s.kv_append_tokens(&dkn, &dvn, &kc, &vc, &dp, sh, tokens)
            .unwrap();
        s.kv_append_tokens(&dkn, &dvn, &kb, &vb, &dp, sh, tokens)
            .unwrap();
        s.sync().unwrap();
        let want_k = kv_cache::reference(&k0, &kn, &positions, dims, tokens);
        assert_eq!(kc.to_vec().unwrap(), want_k, "{tokens} tokens: keys");
        assert_eq!(
            vc.to_vec().unwrap(),
            kv_cache::reference(&v0, &vn, &positions, dims, tokens),
            "{tokens} tokens: values"
        );
        let got: Vec<u16> = kb.to_vec().unwrap().iter().map(|h| h.to_bits()).collect();
        // The untouched rows were bf16 already; the written ones are rounded f32.
        let want: Vec<u16> = want_k
            .iter()
            .map(|&x| bf16::from_f32(x).to_bits())
            .collect();
        assert_eq!(got, want, "{tokens} tokens: bf16 keys");
    }
}

#[test]
fn decode_shapes_and_lengths_are_checked_before_launch() {
    let Some(ctx) = ctx() else { return };
    let ok = DecodeShape {
        batch: 1,
        heads_q: 4,
        heads_kv: 2,
        capacity: 16,
        dim: 64,
    };
    let q = ctx.upload(&vec![0.5f32; 4 * 64]).unwrap();
    let kv = ctx.upload(&vec![0.5f32; 2 * 16 * 64]).unwrap();
    let kv2 = ctx.upload(&vec![0.5f32; 2 * 16 * 64]).unwrap();
    let lens = ctx.upload(&[16u32]).unwrap();
    let out = poisoned(&ctx, 4 * 64);
    let new = ctx.upload(&vec![1.0f32; 2 * 64]).unwrap();
    let mut s = ctx.stream().unwrap().record();
    for (bad, needle) in [
        (DecodeShape { heads_kv: 3, ..ok }, "multiple"),
        (DecodeShape { dim: 96, ..ok }, "head dimension"),
        (DecodeShape { capacity: 0, ..ok }, "zero-size"),
        (DecodeShape { capacity: 17, ..ok }, "expected"),
    ] {
        let e = s
            .decode_attention(&q, &kv, &kv2, &lens, &out, bad, 0.125)
            .unwrap_err();
        assert!(e.to_string().contains(needle), "{bad:?}: {e}");
    }
    assert!(
        s.decode_attention(&q, &kv, &kv2, &lens, &q, ok, 0.125)
            .is_err()
    );
    // The tensor cores take 16-bit caches only.
    let e = s
        .decode_attention_with(DecodePath::Mma, (&q, &kv, &kv2), &lens, &out, ok, 0.125)
        .unwrap_err();
    assert!(e.to_string().contains("bf16 or f16"), "{e}");
    let e = s.kv_append(&new, &new, &kv, &kv, &lens, ok).unwrap_err();
    assert!(e.to_string().contains("same buffer"), "{e}");
    let e = s
        .kv_append_tokens(&new, &new, &kv, &kv2, &lens, ok, 0)
        .unwrap_err();
    assert!(e.to_string().contains("0 tokens"), "{e}");
    // One token's keys given for two.
    assert!(
        s.kv_append_tokens(&new, &new, &kv, &kv2, &lens, ok, 2)
            .is_err()
    );
    s.sync().unwrap();
    assert!(poisoned(&ctx, 1).to_vec().unwrap()[0].to_bits() == POISON);
}
