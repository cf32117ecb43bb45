//! The integer quantized matrix-vector path's kernel choices on the GPU: for each shape
//! a device routes to a variant (one wave, late activations, Q4_K's one pass, Q4_K on
//! the tensor cores at either width), the variant it picks, against the f64 reference
//! where chosen (`common::q8k`). The products themselves at every format and width:
//! `gpu_qgemv_q8k.rs`.
//!
//! Without a CUDA device each test prints SKIPPED and passes (`TRUENO_REQUIRE_GPU=1`
//! makes that a failure).

mod common;
use common::device::{Rng, cpu_format as cpu, ctx, small};
use common::q8k::{assert_rows, quantize_and_multiply, random_product_matches, reference};
use trueno_gpu::kernels::qgemv::QuantFormat;
use trueno_gpu::kernels::qgemv_dp4a::{QgemvQ8kKernel, QgemvQ8kOneWaveKernel};
use trueno_gpu::kernels::qgemv_late::{QgemvQ8kLateKernel, late_wins};
use trueno_gpu::kernels::qgemv_q4k_mma_one::{QgemvQ8kMmaOneKernel, TileWarps, mma_one_for};
use trueno_gpu::kernels::qgemv_q6k_mma_one::{QgemvQ6kMmaOneKernel, TileBlocks, q6k_mma_one_for};
use trueno_gpu::kernels::qgemv_q6k_mma_one_bulk::BulkRing;
use trueno_gpu::kernels::qgemv_wide::{QgemvQ8kWideKernel, WIDE_MIN_WAVES};
use trueno_gpu::kernels::{Family, Kernel};
use trueno_quant::QuantFormat as CpuFormat;

#[test]
fn rows_in_one_wave_take_the_one_wave_variant() {
    let Some(ctx) = ctx() else { return };
    // The `dp4a` kernels' routing (Q4_K to Q6_K run on the tensor cores by default).
    ctx.set_qgemv_tensor_cores(false);
    let mut rng = Rng(0x0e5e);
    // More rows than three eight-warp blocks a multiprocessor hold (Q6_K's two-step
    // kernel, 80 registers), no more than four (its one-step variant, 54; Q5_K's
    // four-step one, 52), the last block ragged.
    let rows = 32 * ctx.device().multiprocessors as usize - 3;
    let mut widths = vec![3 * 256];
    if !small() {
        widths.push(37 * 256);
    }
    let d = ctx.device();
    for f in QgemvQ8kOneWaveKernel::FORMATS {
        for &cols in &widths {
            let chosen = random_product_matches(&ctx, &mut rng, f, (rows, cols));
            assert_eq!(chosen, QgemvQ8kOneWaveKernel(f).name(), "{rows} rows");
        }
        // Three times the rows: several waves either way, the default kernel (or, on a
        // device with an H200's bandwidth a multiprocessor, the late-activation one).
        let want = match late_wins(d.peak_bandwidth_gbs, d.multiprocessors) {
            true => QgemvQ8kLateKernel(f).name(),
            false => QgemvQ8kKernel(f).name(),
        };
        let chosen = random_product_matches(&ctx, &mut rng, f, (3 * rows, 3 * 256));
        assert_eq!(chosen, want);
    }
}

/// Q6_K and Q8_0 take the late-activation kernel wherever the device calls for it
/// ([`late_wins`]); there, against the reference at a ragged shape.
#[test]
fn late_activations_match_the_reference_where_chosen() {
    let Some(ctx) = ctx() else { return };
    // The `dp4a` kernels' routing (Q6_K runs on the tensor cores by default).
    ctx.set_qgemv_tensor_cores(false);
    let d = ctx.device();
    if !late_wins(d.peak_bandwidth_gbs, d.multiprocessors) {
        eprintln!(
            "SKIPPED: {} does not take the late-activation kernel",
            d.name
        );
        return;
    }
    let mut rng = Rng(0x1a7e);
    for f in QgemvQ8kLateKernel::FORMATS {
        // Several waves (no one-wave variant applies), a ragged last block; 19
        // super-blocks a row: whole passes (four steps for Q8_0, two for Q6_K) and a
        // step left for three lanes of four.
        let chosen = random_product_matches(&ctx, &mut rng, f, (6000 + 5, 19 * 256));
        assert_eq!(chosen, QgemvQ8kLateKernel(f).name());
    }
}

/// Q4_K's many 4096-wide rows take the one-pass kernel where the device calls for it
/// (`wide_wins`): there, against the reference with a ragged last block, at the fewest
/// rows that take it (five waves of its blocks as the driver places them). The rows
/// repeat 613 random ones (a prime: neighbours and whole blocks apart always differ), so
/// that quantizing and the reference stay quick.
#[test]
fn many_4096_wide_q4_k_rows_take_the_one_pass_kernel_where_chosen() {
    let Some(ctx) = ctx() else { return };
    // The `dp4a` kernels' routing (Q4_K runs on the tensor cores by default).
    ctx.set_qgemv_tensor_cores(false);
    let d = ctx.device();
    if !late_wins(d.peak_bandwidth_gbs, d.multiprocessors) {
        eprintln!("SKIPPED: {} does not take the one-pass kernel", d.name);
        return;
    }
    let (f, cols, unique) = (QuantFormat::Q4K, 4096, 613);
    let wide = QgemvQ8kWideKernel(f);
    let per_sm = ctx
        .function(Family::Qgemv, &wide.name())
        .unwrap()
        .resident_blocks(256)
        .unwrap();
    let blocks = WIDE_MIN_WAVES as usize * (per_sm * d.multiprocessors) as usize;
    let rows = 8 * (blocks - 1) + 5;
    let mut rng = Rng(0x3de);
    let x = rng.vec(cols, -1.0, 1.0);
    let act = trueno_quant::quantize(CpuFormat::Q8K, &x).unwrap();
    let dense = rng.vec(unique * cols, -2.0, 2.0);
    let some = trueno_quant::quantize_rows(cpu(f), &dense, cols).unwrap();
    let row_bytes = some.len() / unique;
    let w: Vec<u8> = some
        .chunks(row_bytes)
        .cycle()
        .take(rows)
        .flatten()
        .copied()
        .collect();
    let some_want = reference(f, &some, &act, unique, cols);
    let want: Vec<_> = (0..rows).map(|r| some_want[r % unique]).collect();
    let wd = ctx.upload_quant(f, rows, cols, &w).unwrap();
    assert_eq!(ctx.qgemv_q8k_kernel(&wd).unwrap().name(), wide.name());
    let (_, y) = quantize_and_multiply(&ctx, &wd, &x);
    assert_rows(&format!("{} {rows}x{cols}", wide.name()), &y, &want);
    // A block fewer: the default kernel; as many rows of 4352 (a step past one pass),
    // only chosen, too.
    let fewer = ctx.upload_quant(f, rows - 8, cols, &w[..(rows - 8) * row_bytes]);
    let wider = ctx.upload_quant(f, rows, 17 * 256, &vec![0u8; rows * 17 * 144]);
    for m in [fewer.unwrap(), wider.unwrap()] {
        let chosen = ctx.qgemv_q8k_kernel(&m).unwrap().name();
        assert_eq!(
            chosen,
            QgemvQ8kKernel(f).name(),
            "{}x{}",
            m.rows(),
            m.cols()
        );
    }
}

/// Q4_K and Q5_K on the tensor cores, at the width `mma_one_for` gives: sixteen warps a
/// tile where the tiles fit a wave of them (one row; a tile and one; the last rows of
/// that wave, the last tile one row), eight past it (the last tile one row, 15 and 1
/// short of full; for Q5_K up to two waves of eight, its `dp4a` kernels a row past);
/// the `dp4a` kernels with the tensor cores off; each against the reference, with
/// super-blocks fewer than a tile's warps, as many and one past, ragged.
#[test]
fn q4_k_and_q5_k_on_the_tensor_cores_match_the_reference_at_ragged_tiles() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(0x3a71);
    let sms = ctx.device().multiprocessors as usize;
    let dp4a = |chosen: &str| !chosen.contains("_mma1");
    for f in QgemvQ8kMmaOneKernel::FORMATS {
        let named = |w| QgemvQ8kMmaOneKernel(f, w).name();
        // Tiles a multiprocessor holds, sixteen and eight warps a tile: 64 registers a
        // thread for Q4_K, 128 for Q5_K (the design `mma_one_for` routes by).
        let (per_sm16, per_sm8) = match f {
            QuantFormat::Q5K => (1, 2),
            _ => (2, 4),
        };
        // The rows of a wave of sixteen-warp tiles.
        let wave16 = 16 * sms * per_sm16;
        for (warps, rows, nb) in [
            (TileWarps::Sixteen, 1, 1),
            (TileWarps::Sixteen, 17, 16),
            (TileWarps::Sixteen, 33, 3),
            (TileWarps::Sixteen, wave16 - 15, 17),
            (TileWarps::Eight, wave16 + 1, 9),
            (TileWarps::Eight, wave16 + 17, 8),
            (TileWarps::Eight, wave16 + 31, 1),
        ] {
            let chosen = random_product_matches(&ctx, &mut rng, f, (rows, nb * 256));
            assert_eq!(chosen, named(warps), "{rows}x{}", nb * 256);
        }
        if f == QuantFormat::Q5K {
            // Two waves of eight-warp tiles.
            let last = 2 * 16 * sms * per_sm8;
            let chosen = random_product_matches(&ctx, &mut rng, f, (last - 15, 2 * 256));
            assert_eq!(chosen, named(TileWarps::Eight), "{} rows", last - 15);
            let chosen = random_product_matches(&ctx, &mut rng, f, (last + 1, 2 * 256));
            assert!(dp4a(&chosen), "{} rows: {chosen}", last + 1);
        }
        // The tensor cores turned off: the `dp4a` kernels.
        ctx.set_qgemv_tensor_cores(false);
        for rows in [33, wave16 + 1] {
            let chosen = random_product_matches(&ctx, &mut rng, f, (rows, 3 * 256));
            assert!(dp4a(&chosen), "{rows} rows, tensor cores off: {chosen}");
        }
        ctx.set_qgemv_tensor_cores(true);
    }
    // The other formats never take it.
    for g in [QuantFormat::Q6K, QuantFormat::Q8_0, QuantFormat::Q4_0] {
        assert!(mma_one_for(g, 1, sms as u32).is_none());
        let chosen = random_product_matches(&ctx, &mut rng, g, (33, 256));
        assert!(dp4a(&chosen), "{}: {chosen}", g.name());
    }
}

/// Q6_K on the tensor cores at the residency `q6k_mma_one_for` gives, each against the
/// reference: within a wave of tiles at two blocks a multiprocessor only for rows of 32
/// super-blocks or more (one row; a tile and one; ragged), two blocks up to two waves
/// (staged in shared memory for such rows), three past. (Rows of 4096 columns on a device
/// with bulk copies: the next test.) Rows of whole 1024-column groups (4 super-blocks a
/// row: fewer than a tile's eight warps, the first four starting 0, 2, 4 and 6 bytes
/// past an 8-byte boundary; 8; 32 and 36, 0 and 8 mod 16), of 4 mod 8 bytes (6, 10, 34
/// super-blocks: tiles of every other row) and of 2 or 6 mod 8 (3, 5, 7, 33, 35, 37, 39:
/// every fourth row), row counts that end inside a group's tiles. The `dp4a` kernels:
/// within a wave with shorter rows (12 super-blocks: 4096 columns would take the copy
/// engine's tiles on sm_90), the tensor cores off.
#[test]
fn q6_k_on_the_tensor_cores_matches_the_reference_at_every_row_alignment() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(0x6a6b);
    let f = QuantFormat::Q6K;
    let dev = ctx.device().qgemv_device();
    let sms = dev.sms as usize;
    // The rows of a wave of tiles at two blocks a multiprocessor.
    let wave = 16 * sms * 2;
    for (blocks, rows, nb) in [
        (TileBlocks::StagedTwo, 1, 32),
        (TileBlocks::StagedTwo, 17, 36),
        (TileBlocks::StagedTwo, 33, 32),
        (TileBlocks::StagedTwo, 1, 33),
        (TileBlocks::StagedTwo, 50, 34),
        (TileBlocks::StagedTwo, 20, 35),
        (TileBlocks::StagedTwo, 40, 37),
        (TileBlocks::StagedTwo, wave + 17, 39),
        (TileBlocks::StagedTwo, 2 * wave - 40, 33),
        (TileBlocks::Two, wave + 1, 4),
        (TileBlocks::Two, wave + 1, 6),
        (TileBlocks::Two, wave + 17, 5),
        (TileBlocks::Two, 2 * wave - 15, 8),
        (TileBlocks::Two, 2 * wave - 70, 10),
        (TileBlocks::Three, 2 * wave + 1, 4),
        (TileBlocks::Three, 2 * wave + 31, 8),
        (TileBlocks::Three, 2 * wave + 1, 5),
        (TileBlocks::Three, 2 * wave + 3, 3),
        (TileBlocks::Three, 2 * wave + 45, 7),
        (TileBlocks::Three, 2 * wave + 9, 6),
    ] {
        let cols = nb * 256;
        assert_eq!(q6k_mma_one_for(rows, cols, dev).map(|k| k.0), Some(blocks));
        let chosen = random_product_matches(&ctx, &mut rng, f, (rows, cols));
        let want = QgemvQ6kMmaOneKernel(blocks).name();
        assert_eq!(chosen, want, "{rows}x{cols}");
    }
    let dp4a = |chosen: &str| !chosen.contains("_mma1");
    for (rows, nb) in [(wave - 15, 12), (wave - 40, 6), (wave - 70, 5)] {
        let cols = nb * 256;
        assert!(q6k_mma_one_for(rows, cols, dev).is_none(), "{rows}x{cols}");
        let chosen = random_product_matches(&ctx, &mut rng, f, (rows, cols));
        assert!(dp4a(&chosen), "{rows}x{cols}: {chosen}");
    }
    ctx.set_qgemv_tensor_cores(false);
    let chosen = random_product_matches(&ctx, &mut rng, f, (2 * wave + 1, 5 * 256));
    assert!(dp4a(&chosen), "tensor cores off: {chosen}");
    ctx.set_qgemv_tensor_cores(true);
}

/// Q6_K rows of 4096 columns on a device with bulk copies take the copy engine's tiles
/// (`bulk_ring_for`), each against the reference: a tile a multiprocessor (the fewest
/// rows that take them), one tile a block at three blocks a multiprocessor up to three
/// tiles each and at four up to four, the last tile ragged; a persistent ring of two
/// past that, with blocks of two tiles and some of three, and with every block's ring
/// around three times and more (both stages' barriers through several phases). Every
/// warp's offset past an 8-byte boundary comes up (super-blocks `w` and `w + 8` of warp
/// `w` start `210 w mod 8` bytes past one). Fewer tiles than multiprocessors: not taken.
#[test]
fn q6_k_rows_of_4096_columns_take_the_copy_engines_tiles() {
    let Some(ctx) = ctx() else { return };
    let dev = ctx.device().qgemv_device();
    if !dev.bulk_copies {
        eprintln!("SKIPPED: {} has no bulk copies", ctx.device().name);
        return;
    }
    let mut rng = Rng(0xb01c);
    let f = QuantFormat::Q6K;
    let (sms, cols) = (dev.sms as usize, 4096);
    let ring = BulkRing::RING_OF_TWO.on(dev.sms);
    let mut cases = vec![
        (BulkRing::ONE_OF_THREE, 16 * sms),
        (BulkRing::ONE_OF_THREE, 48 * sms - 5),
        (BulkRing::ONE_OF_FOUR, 64 * sms - 9),
        (ring, 64 * sms + 1),
        (ring, 80 * sms - 7),
    ];
    if !small() {
        cases.push((ring, 112 * sms + 3));
    }
    for (want, rows) in cases {
        let got = q6k_mma_one_for(rows, cols, dev).map(|k| k.0);
        assert_eq!(got, Some(TileBlocks::Bulk(want)), "{rows}x{cols}");
        let chosen = random_product_matches(&ctx, &mut rng, f, (rows, cols));
        assert_eq!(chosen, QgemvQ6kMmaOneKernel(TileBlocks::Bulk(want)).name());
    }
    let rows = 16 * sms - 16;
    assert!(q6k_mma_one_for(rows, cols, dev).is_none(), "{rows} rows");
}
