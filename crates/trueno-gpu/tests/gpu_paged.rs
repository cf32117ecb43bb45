//! Decode attention and the KV append over paged caches on the device against their
//! f64 / CPU references (`kernels::paged::reference`, `append_reference`: rows found
//! through the block table on the CPU): pages shuffled through the pool, page sizes from
//! 1 to 256 (a page smaller than, equal to and larger than a chunk), ragged lengths
//! (empty, mid-page, past the table), grouped-query heads, every head dimension, f32,
//! bf16 and f16 pools, and the shape errors. Skipped without a GPU.

mod common;
use common::device::{POISON, Rng, assert_close, ctx, poisoned};

use half::{bf16, f16};
use trueno_gpu::driver::Context;
use trueno_gpu::kernels::decode_split::DecodePath;
use trueno_gpu::kernels::paged::{PagedShape, append_reference, reference};
use trueno_gpu::memory::FloatElem;

/// A pool element type as the checks build and read it.
trait Elem: FloatElem + Copy {
    fn from_f32(x: f32) -> Self;
    fn to_f32(self) -> f32;
    fn bits(self) -> u32;
}
impl Elem for f32 {
    fn from_f32(x: f32) -> Self {
        x
    }
    fn to_f32(self) -> f32 {
        self
    }
    fn bits(self) -> u32 {
        self.to_bits()
    }
}
impl Elem for bf16 {
    fn from_f32(x: f32) -> Self {
        bf16::from_f32(x)
    }
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    fn bits(self) -> u32 {
        self.to_bits().into()
    }
}
impl Elem for f16 {
    fn from_f32(x: f32) -> Self {
        f16::from_f32(x)
    }
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    fn bits(self) -> u32 {
        self.to_bits().into()
    }
}

/// `n` distinct page ids out of `pool`, shuffled.
fn shuffled_pages(rng: &mut Rng, pool: usize, n: usize) -> Vec<u32> {
    let mut ids: Vec<u32> = (0..pool as u32).collect();
    for i in (1..ids.len()).rev() {
        let j = (rng.next() % (i as u64 + 1)) as usize;
        ids.swap(i, j);
    }
    ids.truncate(n);
    ids
}

fn shape(
    batch: usize,
    heads: (usize, usize),
    dim: usize,
    page: usize,
    max_pages: usize,
) -> PagedShape {
    PagedShape {
        batch,
        heads_q: heads.0,
        heads_kv: heads.1,
        dim,
        page_size: page,
        max_pages,
        // Spare pages, so the table's pages are scattered through the pool.
        pool_pages: batch * max_pages + 3,
    }
}

/// The pools as `T` and as the f32 values they hold.
fn pools<T: Elem>(rng: &mut Rng, len: usize) -> (Vec<T>, Vec<f32>) {
    let t: Vec<T> = rng
        .vec(len, -1.0, 1.0)
        .into_iter()
        .map(T::from_f32)
        .collect();
    let f = t.iter().map(|x| x.to_f32()).collect();
    (t, f)
}

fn check_decode<T: Elem>(ctx: &Context, rng: &mut Rng, path: DecodePath) {
    let cases = [
        (shape(1, (4, 4), 64, 1, 40), vec![37u32]),
        (shape(2, (8, 2), 128, 16, 20), vec![300, 17]),
        (shape(4, (4, 1), 256, 64, 16), vec![0, 999, 1024, 1100]),
        (shape(1, (32, 8), 128, 256, 20), vec![4097]),
        (shape(3, (6, 3), 64, 32, 5), vec![64, 65, 129]),
        // Eight heads a block over two groups; two heads a block at dimension 256.
        (shape(2, (16, 2), 128, 8, 12), vec![90, 96]),
        (shape(1, (2, 1), 256, 4, 9), vec![33]),
        // Groups of eight and of seven, of 17 (two tensor-core tiles), pages of one row.
        (shape(2, (64, 8), 128, 16, 40), vec![640, 333]),
        (shape(1, (28, 4), 128, 32, 10), vec![300]),
        (shape(1, (34, 2), 64, 1, 200), vec![199]),
    ];
    for (sh, lens) in cases {
        let q = rng.vec(sh.batch * sh.heads_q * sh.dim, -1.0, 1.0);
        let (k, kf) = pools::<T>(rng, sh.pool_len());
        let (v, vf) = pools::<T>(rng, sh.pool_len());
        let table = shuffled_pages(rng, sh.pool_pages, sh.batch * sh.max_pages);
        let (dq, dk, dv) = (
            ctx.upload(&q).unwrap(),
            ctx.upload(&k).unwrap(),
            ctx.upload(&v).unwrap(),
        );
        let (dt, dl) = (ctx.upload(&table).unwrap(), ctx.upload(&lens).unwrap());
        let mut out = poisoned(ctx, q.len());
        let scale = 1.0 / (sh.dim as f32).sqrt();
        let mut s = ctx.stream().unwrap().record();
        s.decode_attention_paged_with(path, (&dq, &dk, &dv), (&dt, &dl), &out, sh, scale)
            .unwrap();
        s.sync().unwrap();
        let got = out.to_vec().unwrap();
        let want = reference(&q, (&kf, &vf), &table, &lens, &sh, scale);
        let what = format!(
            "{} pools {path:?} {sh:?} {lens:?}",
            std::any::type_name::<T>()
        );
        assert_close(&what, &got, &want, 1e-3, 5e-5);
        for (b, &l) in lens.iter().enumerate() {
            if l == 0 {
                let row = &got[b * sh.heads_q * sh.dim..][..sh.heads_q * sh.dim];
                assert!(row.iter().all(|&x| x == 0.0), "{what}: empty sequence {b}");
            }
        }
    }
}

#[test]
fn paged_decode_attention_matches_an_f64_softmax_through_the_table() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(41);
    check_decode::<f32>(&ctx, &mut rng, DecodePath::Simt);
    for path in [DecodePath::Simt, DecodePath::Mma] {
        check_decode::<bf16>(&ctx, &mut rng, path);
        check_decode::<f16>(&ctx, &mut rng, path);
    }
}

/// Appends land where the table says (bit for bit: 16-bit pools hold each value rounded
/// to nearest, as `half` rounds it), positions past the table are left out, and every
/// other row is untouched.
fn check_append<T: Elem>(ctx: &Context, rng: &mut Rng) {
    let cases = [
        (shape(3, (4, 2), 64, 16, 4), 1),
        (shape(2, (8, 8), 128, 1, 9), 1),
        // A prompt: 7 tokens from each start, across page boundaries and past the table.
        (shape(3, (4, 2), 64, 4, 5), 7),
    ];
    for (sh, tokens) in cases {
        let capacity = (sh.max_pages * sh.page_size) as u32;
        let positions = match sh.batch {
            3 => vec![0u32, capacity - 1, capacity],
            _ => vec![5, 8],
        };
        let step = sh.batch * tokens * sh.heads_kv * sh.dim;
        let (k_new, v_new) = (rng.vec(step, -2.0, 2.0), rng.vec(step, -2.0, 2.0));
        let (k0, k0f) = pools::<T>(rng, sh.pool_len());
        let (v0, v0f) = pools::<T>(rng, sh.pool_len());
        let table = shuffled_pages(rng, sh.pool_pages, sh.batch * sh.max_pages);
        let (dkn, dvn) = (ctx.upload(&k_new).unwrap(), ctx.upload(&v_new).unwrap());
        let (mut dk, mut dv) = (ctx.upload(&k0).unwrap(), ctx.upload(&v0).unwrap());
        let (dt, dp) = (ctx.upload(&table).unwrap(), ctx.upload(&positions).unwrap());
        let mut s = ctx.stream().unwrap().record();
        s.kv_append_paged_tokens(&dkn, &dvn, &dk, &dv, &dt, &dp, sh, tokens)
            .unwrap();
        s.sync().unwrap();
        for (pool, f0, new) in [(&mut dk, &k0f, &k_new), (&mut dv, &v0f, &v_new)] {
            let got: Vec<T> = pool.to_vec().unwrap();
            let want = append_reference(f0, new, &table, &positions, &sh, tokens);
            for (i, (g, &w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(
                    g.bits(),
                    T::from_f32(w).bits(),
                    "{} {sh:?} {tokens} tokens, element {i}",
                    std::any::type_name::<T>()
                );
            }
        }
    }
}

#[test]
fn paged_append_writes_through_the_table() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(43);
    check_append::<f32>(&ctx, &mut rng);
    check_append::<bf16>(&ctx, &mut rng);
    check_append::<f16>(&ctx, &mut rng);
}

#[test]
fn paged_shapes_and_lengths_are_checked_before_launch() {
    let Some(ctx) = ctx() else { return };
    let sh = shape(1, (2, 1), 64, 16, 2);
    let q = ctx.upload(&[0.5f32; 128]).unwrap();
    let kv = ctx.upload(&vec![0.5f32; sh.pool_len()]).unwrap();
    let kv2 = ctx.upload(&vec![0.5f32; sh.pool_len()]).unwrap();
    let table = ctx.upload(&[0u32, 1]).unwrap();
    let lens = ctx.upload(&[3u32]).unwrap();
    let k_new = ctx.upload(&[1.0f32; 64]).unwrap();
    let mut out = poisoned(&ctx, 128);
    let mut s = ctx.stream().unwrap().record();
    let odd = PagedShape {
        page_size: 12,
        ..sh
    };
    let e = s
        .decode_attention_paged(&q, &kv, &kv2, &table, &lens, &out, odd, 1.0)
        .unwrap_err();
    assert!(e.to_string().contains("power of two"), "{e}");
    let wide = PagedShape { max_pages: 3, ..sh };
    let e = s
        .decode_attention_paged(&q, &kv, &kv2, &table, &lens, &out, wide, 1.0)
        .unwrap_err();
    assert!(e.to_string().contains("table"), "{e}");
    let small_pool = PagedShape {
        pool_pages: sh.pool_pages + 1,
        ..sh
    };
    assert!(
        s.decode_attention_paged(&q, &kv, &kv2, &table, &lens, &out, small_pool, 1.0)
            .is_err()
    );
    let e = s
        .kv_append_paged(&k_new, &k_new, &kv, &kv, &table, &lens, sh)
        .unwrap_err();
    assert!(e.to_string().contains("same buffer"), "{e}");
    s.sync().unwrap();
    // Nothing was launched: the output still holds its poison.
    assert!(out.to_vec().unwrap().iter().all(|x| x.to_bits() == POISON));
}
