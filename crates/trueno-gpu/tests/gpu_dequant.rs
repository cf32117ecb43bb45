//! Quantized rows to f32 on the GPU (`Stream::dequantize`, `Stream::embedding_rows`)
//! against trueno-quant's dequantization, every format, quantized and raw random blocks,
//! rows that are one group of 256 values, several, and (Q8_0 / Q4_0) a short last group;
//! ids out of order, repeated and past the table (NaN rows); hand-worked rows; the shape
//! errors that come before a launch.
//!
//! Without a CUDA device each test prints SKIPPED and passes (`TRUENO_REQUIRE_GPU=1`
//! makes that a failure).

mod common;
use common::device::{POISON, Rng, cpu_format as cpu, ctx, poisoned, small, weight_cases};
use trueno_gpu::kernels::qgemv::QuantFormat;

/// trueno-quant's rows and a bound per value: 2 eps times `|d sc q| + |dmin m|` (Q4_K /
/// Q5_K: the scale and min parts apart, by dequantizing with `dmin`, then `d`, zeroed;
/// the other formats' values are their scale part). The GPU forms `d sc q - dmin m` with
/// one rounding less or more than the CPU, never more than two apart.
fn reference(f: QuantFormat, w: &[u8], rows: usize, cols: usize) -> Vec<(f32, f64)> {
    let deq = |bytes: &[u8]| {
        let mut out = vec![0f32; rows * cols];
        trueno_quant::dequantize(cpu(f), bytes, &mut out).unwrap();
        out
    };
    let zeroed = |at: usize| {
        let mut v = w.to_vec();
        for b in v.chunks_exact_mut(f.block_bytes()) {
            b[at..at + 2].fill(0);
        }
        deq(&v)
    };
    let full = deq(w);
    let (scaled, mins) = if matches!(f, QuantFormat::Q4K | QuantFormat::Q5K) {
        (zeroed(2), zeroed(0))
    } else {
        (full.clone(), vec![0.0; rows * cols])
    };
    full.iter()
        .zip(scaled.iter().zip(&mins))
        .map(|(&v, (&s, &m))| {
            let mass = (s as f64).abs() + (m as f64).abs();
            (v, 2.0 * f32::EPSILON as f64 * mass)
        })
        .collect()
}

fn assert_rows(what: &str, got: &[f32], want: &[(f32, f64)]) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (&g, &(w, bound))) in got.iter().zip(want).enumerate() {
        assert!(g.to_bits() != POISON, "{what}: value {i} never written");
        let err = (g as f64 - w as f64).abs();
        assert!(
            err <= bound,
            "{what}: value {i} got {g}, want {w} (err {err:e} > {bound:e})"
        );
    }
}

/// Column counts per format: one group of 256, several, and for the 32-value blocks a
/// row of one block and rows whose last group is short (896: 28 blocks, Qwen2-0.5B's
/// width).
fn widths(f: QuantFormat) -> Vec<usize> {
    let mut w = vec![256, 3 * 256];
    if f.block_elems() == 32 {
        w.extend([32, 96, 896]);
    }
    if !small() {
        w.push(4096);
    }
    w
}

#[test]
fn dequantize_matches_trueno_quant() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(0xdec0);
    for f in QuantFormat::ALL {
        for cols in widths(f) {
            let rows = 7;
            for (kind, w) in weight_cases(&mut rng, f, rows, cols) {
                let wd = ctx.upload_quant(f, rows, cols, &w).unwrap();
                let mut out = poisoned(&ctx, rows * cols);
                let mut s = ctx.stream().unwrap().record();
                s.dequantize(&wd, &out).unwrap();
                s.sync().unwrap();
                let what = format!("{} {kind} {rows}x{cols}", f.name());
                assert_rows(&what, &out.to_vec().unwrap(), &reference(f, &w, rows, cols));
            }
        }
    }
}

#[test]
fn embedding_rows_follow_the_ids_and_past_the_table_are_nan() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(0xe3b);
    for f in QuantFormat::ALL {
        for cols in widths(f) {
            let rows = 11;
            let (_, w) = weight_cases(&mut rng, f, rows, cols)
                .into_iter()
                .next()
                .unwrap();
            let want = reference(f, &w, rows, cols);
            let wd = ctx.upload_quant(f, rows, cols, &w).unwrap();
            // Out of order, repeated, the first and last rows, one past, far past.
            let ids = [7u32, 0, 10, 7, 11, u32::MAX, 3];
            let idd = ctx.upload(&ids).unwrap();
            let mut out = poisoned(&ctx, ids.len() * cols);
            let mut s = ctx.stream().unwrap().record();
            s.embedding_rows(&wd, &idd, &out).unwrap();
            s.sync().unwrap();
            let got = out.to_vec().unwrap();
            for (t, &id) in ids.iter().enumerate() {
                let row = &got[t * cols..(t + 1) * cols];
                let what = format!("{} {cols} cols: id {id}", f.name());
                if id as usize >= rows {
                    assert!(
                        row.iter().all(|v| v.is_nan() && v.to_bits() != POISON),
                        "{what}"
                    );
                } else {
                    let id = id as usize;
                    assert_rows(&what, row, &want[id * cols..(id + 1) * cols]);
                }
            }
        }
    }
}

/// The docs' example and a K-quant row, worked by hand: a Q8_0 table whose row `r` has
/// scale `r + 1` and quants `0..32`; a Q4_K row with `d = 1`, `dmin = 0.5`, every 6-bit
/// scale 2 and min 1 and every quant 3: `1 * 2 * 3 - 0.5 * 1 = 5.5`.
#[test]
fn hand_worked_rows() {
    let Some(ctx) = ctx() else { return };
    let table: Vec<u8> = (0..3u8)
        .flat_map(|r| {
            let d = half::f16::from_f32(f32::from(r + 1)).to_le_bytes();
            d.into_iter().chain(0..32u8)
        })
        .collect();
    let table = ctx.upload_quant(QuantFormat::Q8_0, 3, 32, &table).unwrap();
    let ids = ctx.upload(&[2u32, 0]).unwrap();
    let mut out = poisoned(&ctx, 64);
    let mut block = vec![0u8; 144];
    block[..2].copy_from_slice(&half::f16::ONE.to_le_bytes());
    block[2..4].copy_from_slice(&half::f16::from_f32(0.5).to_le_bytes());
    block[4..8].fill(2); // scales of sub-blocks 0-3
    block[8..12].fill(1); // their mins
    block[12..16].fill(0x12); // sub-blocks 4-7: low nibble scale 2, high nibble min 1
    block[16..].fill(0x33);
    let k4 = ctx.upload_quant(QuantFormat::Q4K, 1, 256, &block).unwrap();
    let mut k4_out = poisoned(&ctx, 256);
    let mut s = ctx.stream().unwrap().record();
    s.embedding_rows(&table, &ids, &out).unwrap();
    s.dequantize(&k4, &k4_out).unwrap();
    s.sync().unwrap();
    let want: Vec<f32> = [3.0f32, 1.0]
        .iter()
        .flat_map(|&d| (0..32).map(move |q| d * q as f32))
        .collect();
    assert_eq!(out.to_vec().unwrap(), want);
    assert_eq!(k4_out.to_vec().unwrap(), vec![5.5f32; 256]);
}

#[test]
fn shapes_are_checked_before_launch() {
    let Some(ctx) = ctx() else { return };
    let w = ctx
        .upload_quant(QuantFormat::Q4K, 4, 512, &vec![0u8; 4 * 2 * 144])
        .unwrap();
    let ids = ctx.upload(&[1u32, 2]).unwrap();
    let none = ctx.alloc::<u32>(0).unwrap();
    let short = ctx.alloc::<f32>(2 * 512 - 1).unwrap();
    let whole_short = ctx.alloc::<f32>(4 * 512 - 4).unwrap();
    let row = ctx.alloc::<f32>(512).unwrap();
    let mut s = ctx.stream().unwrap().record();
    assert!(s.embedding_rows(&w, &ids, &short).is_err(), "output length");
    assert!(s.dequantize(&w, &whole_short).is_err(), "output length");
    assert!(s.embedding_rows(&w, &none, &row).is_err(), "no ids");
    s.sync().unwrap();
}

/// Dense tables (f32, bf16, f16) gathered by id: each row exactly its values widened to
/// f32, ids past the table NaN; a table that is not whole rows is refused.
#[test]
fn dense_embedding_rows_are_the_tables_values() {
    use half::{bf16, f16};
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(0xd3e);
    let (rows, cols) = (13, 96);
    let x = rng.vec(rows * cols, -4.0, 4.0);
    let ids = [12u32, 0, 5, 5, 13, u32::MAX];
    let idd = ctx.upload(&ids).unwrap();
    let check = |got: Vec<f32>, table: &[f32], what: &str| {
        for (t, &id) in ids.iter().enumerate() {
            let row = &got[t * cols..(t + 1) * cols];
            match table.get(id as usize * cols..(id as usize + 1) * cols) {
                Some(want) if (id as usize) < rows => assert_eq!(row, want, "{what} id {id}"),
                _ => assert!(
                    row.iter().all(|v| v.is_nan() && v.to_bits() != POISON),
                    "{what} id {id}"
                ),
            }
        }
    };
    let xb: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
    let xh: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
    let (df, db, dh) = (
        ctx.upload(&x).unwrap(),
        ctx.upload(&xb).unwrap(),
        ctx.upload(&xh).unwrap(),
    );
    let mut outs: Vec<_> = (0..3).map(|_| poisoned(&ctx, ids.len() * cols)).collect();
    let mut s = ctx.stream().unwrap().record();
    s.embedding_rows_dense(&df, cols, &idd, &outs[0]).unwrap();
    s.embedding_rows_dense(&db, cols, &idd, &outs[1]).unwrap();
    s.embedding_rows_dense(&dh, cols, &idd, &outs[2]).unwrap();
    assert!(
        s.embedding_rows_dense(&df, 97, &idd, &outs[0]).is_err(),
        "not whole rows"
    );
    assert!(
        s.embedding_rows_dense(&df, 0, &idd, &outs[0]).is_err(),
        "zero-width rows"
    );
    s.sync().unwrap();
    check(outs[0].to_vec().unwrap(), &x, "f32");
    let wide_b: Vec<f32> = xb.iter().map(|v| v.to_f32()).collect();
    check(outs[1].to_vec().unwrap(), &wide_b, "bf16");
    let wide_h: Vec<f32> = xh.iter().map(|v| v.to_f32()).collect();
    check(outs[2].to_vec().unwrap(), &wide_h, "f16");
}
