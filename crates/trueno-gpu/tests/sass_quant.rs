//! The quantized matrix-vector and row-dequantization kernels in machine code (the
//! ptxas / cuobjdump wheel, as `ptxas.rs`): which instructions multiply and load, and in
//! what order a pass's loads and products come. Without the tools the tests say so and
//! pass, unless `TRUENO_REQUIRE_PTXAS=1` (CI sets it).

mod common;
use common::sass::Sass;

use trueno_gpu::ptx::Target;

/// Global loads from the first `op` to the next branch: the loads among a pass's math
/// (none where the pass's loads end a block of their own, `end_block`).
fn loads_after_first(code: &str, op: &str) -> usize {
    code.lines()
        .skip_while(|l| !l.contains(op))
        .take_while(|l| !l.contains("BRA"))
        .filter(|l| l.contains("LDG"))
        .count()
}

/// A variant kernel holds at most `cap` registers on `target`, and fewer than `default`
/// (what the variants are chosen for: more blocks a multiprocessor).
fn fewer_registers(
    sass: &Sass,
    k: &dyn trueno_gpu::kernels::Kernel,
    default: &dyn trueno_gpu::kernels::Kernel,
    cap: u32,
    target: Target,
) {
    let (regs, theirs) = (sass.registers(k, target), sass.registers(default, target));
    assert!(
        regs <= cap && regs < theirs,
        "{} on {target:?}: {regs} registers against the default's {theirs}",
        k.name()
    );
}

/// The integer quantized matrix-vector kernels' machine code: their products are IDP.4A
/// (four 8-bit products per instruction: unsigned weight bytes by signed activation
/// bytes, Q8_0's signed by signed), the activations arrive in 16-byte loads, and so do
/// Q4_K's and Q5_K's weights; Q6_K's 2-byte aligned quant runs in aligned 8-byte loads,
/// Q8_0's and Q4_0's blocks in aligned 32-bit ones, on every target.
#[test]
fn the_integer_qgemv_multiplies_bytes_in_dp4a() {
    let Some(sass) = Sass::find() else { return };
    use trueno_gpu::kernels::qgemv::QuantFormat;
    use trueno_gpu::kernels::qgemv_dp4a::QgemvQ8kKernel;
    for f in QgemvQ8kKernel::FORMATS {
        // In the two-step pass alone: eight products and two activation loads a step;
        // Q4_K/Q5_K's header and quants (and fifth bits) in 16-byte loads, Q6_K's runs in
        // six 8-byte loads and scales and `d` in three 16-bit ones, Q8_0's 9 words, Q4_0's 5.
        let (idp, wide, dwords, narrow, words) = match f {
            QuantFormat::Q6K => ("IDP.4A.U8.S8", 4, 12, 6, 0),
            QuantFormat::Q8_0 => ("IDP.4A.S8.S8", 4, 0, 0, 18),
            QuantFormat::Q4_0 => ("IDP.4A.U8.S8", 4, 0, 0, 10),
            _ => ("IDP.4A.U8.S8", 8, 0, 0, 0),
        };
        for target in common::checked_targets(&QgemvQ8kKernel(f)) {
            let (stem, code) = sass.of(&QgemvQ8kKernel(f), target);
            let count = |op: &str| code.matches(op).count();
            for (op, least) in [
                (idp, 16),
                ("LDG.E.128 ", wide),
                ("LDG.E.64 ", dwords),
                ("LDG.E.U16 ", narrow),
                ("LDG.E ", words),
            ] {
                assert!(count(op) >= least, "{stem}: {} {op}\n{code}", count(op));
            }
            // A pass's loads all leave before its first product (`end_block`): from the
            // first IDP to the next branch, no load. Q5_K keeps ptxas's interleaving.
            if f != QuantFormat::Q5K {
                let among = loads_after_first(&code, "IDP.4A");
                assert_eq!(among, 0, "{stem}: loads among a pass's products\n{code}");
            }
        }
    }
}

/// The one-wave variant (`QgemvQ8kOneWaveKernel`, Q6_K): at most 64 registers, so four
/// eight-warp blocks fit a multiprocessor (the wave `one_wave_wins` counts on); its
/// one-step passes still issue their loads before their products.
#[test]
fn the_one_wave_qgemv_variants_fit_four_blocks_and_load_first() {
    let Some(sass) = Sass::find() else { return };
    use trueno_gpu::kernels::qgemv_dp4a::QgemvQ8kOneWaveKernel;
    for f in QgemvQ8kOneWaveKernel::FORMATS {
        for target in [Target::Sm80, Target::Sm90] {
            let k = QgemvQ8kOneWaveKernel(f);
            let (stem, code) = sass.of(&k, target);
            assert!(
                code.matches("IDP.4A").count() >= 8,
                "{stem}: products\n{code}"
            );
            let among = loads_after_first(&code, "IDP.4A");
            assert_eq!(among, 0, "{stem}: loads among a pass's products\n{code}");
            let regs = sass.registers(&k, target);
            assert!(regs <= 64, "{stem}: {regs} registers");
        }
    }
}

/// The late-activation kernels (`QgemvQ8kLateKernel`, Q6_K and Q8_0): at most 64
/// registers, so four eight-warp blocks a multiprocessor (what they are chosen for: the
/// default kernels hold three and two); a pass's activation loads come among its
/// products, not before them with its weights.
#[test]
fn the_late_activation_qgemv_fits_four_blocks_with_its_weights_first() {
    let Some(sass) = Sass::find() else { return };
    use trueno_gpu::kernels::qgemv_dp4a::QgemvQ8kKernel;
    use trueno_gpu::kernels::qgemv_late::QgemvQ8kLateKernel;
    for f in QgemvQ8kLateKernel::FORMATS {
        for target in [Target::Sm80, Target::Sm90] {
            let k = QgemvQ8kLateKernel(f);
            let (stem, code) = sass.of(&k, target);
            assert!(
                code.matches("IDP.4A").count() >= 8,
                "{stem}: products\n{code}"
            );
            assert!(
                loads_after_first(&code, "IDP.4A") > 0,
                "{stem}: no activation load among the products\n{code}"
            );
            fewer_registers(&sass, &k, &QgemvQ8kKernel(f), 64, target);
        }
    }
}

/// The one-vector tensor-core kernels (`QgemvQ8kMmaOneKernel`): eight IMMA.16832.U8.S8
/// a super-block for Q4_K (unsigned weight bytes, the high nibbles masked in place),
/// sixteen for Q5_K (its fifth bits a second product a step), no IDP; a super-block's
/// 16-byte weight loads (six, Q5_K ten) and two of activations all before its first
/// product (only the activations' sums, one 16-byte load after the pin, may come among
/// them); no more registers than the blocks a multiprocessor it asks for allow (Q4_K 64,
/// Q5_K 128), no spill; at both widths.
#[test]
fn the_one_vector_k_quant_qgemv_multiplies_on_the_integer_tensor_cores() {
    let Some(sass) = Sass::find() else { return };
    use trueno_gpu::kernels::qgemv::QuantFormat;
    use trueno_gpu::kernels::qgemv_q4k_mma_one::{QgemvQ8kMmaOneKernel, TileWarps};
    for f in QgemvQ8kMmaOneKernel::FORMATS {
        // Products and 16-byte weight loads a pass; registers a thread the blocks a
        // multiprocessor allow (Q4_K four of eight warps or two of sixteen, Q5_K two or one).
        let (products, loads, cap) = match f {
            QuantFormat::Q5K => (16, 10, 128),
            _ => (8, 6, 64),
        };
        for (target, warps) in [Target::Sm80, Target::Sm90]
            .into_iter()
            .flat_map(|t| [TileWarps::Eight, TileWarps::Sixteen].map(|w| (t, w)))
        {
            let k = QgemvQ8kMmaOneKernel(f, warps);
            let (stem, code) = sass.of(&k, target);
            let count = |op: &str| code.matches(op).count();
            // The first super-block (before the wait) and the loop's.
            assert_eq!(count("IMMA.16832.U8.S8"), 2 * products, "{stem}\n{code}");
            assert_eq!(count("IDP.4A"), 0, "{stem}");
            // From the first pass's first product to the next branch.
            let wide_among = code
                .lines()
                .skip_while(|l| !l.contains("IMMA"))
                .take_while(|l| !l.contains("BRA"))
                .filter(|l| l.contains("LDG.E.128"))
                .count();
            assert!(wide_among <= 1, "{stem}: loads among the products\n{code}");
            // Each pass's weights, two of activations and one of their sums, in the first
            // pass and the loop's.
            assert!(count("LDG.E.128") >= 2 * (loads + 3), "{stem}\n{code}");
            assert!(sass.registers(&k, target) <= cap, "{stem}: over {cap}");
        }
    }
}

/// Q6_K's one-vector tensor-core kernel (`QgemvQ6kMmaOneKernel`): a loop for each of
/// the four offsets a warp's super-blocks can start at, eight IMMA.16832.U8.S8 a pass,
/// no IDP; among a pass's products only the activations' sums (one 8-byte load a half)
/// and scale, every weight load before them; registers within the blocks a
/// multiprocessor each variant asks for (two blocks of 256 threads 128, three 85), no
/// spill. The staged form's weights arrive by `cp.async` (LDGSTS), 16 bytes at a time.
#[test]
fn the_one_vector_q6_k_qgemv_multiplies_on_the_integer_tensor_cores() {
    let Some(sass) = Sass::find() else { return };
    use trueno_gpu::kernels::qgemv_q6k_mma_one::{QgemvQ6kMmaOneKernel, TileBlocks};
    for (blocks, cap) in [
        (TileBlocks::Two, 128),
        (TileBlocks::Three, 85),
        (TileBlocks::StagedTwo, 128),
    ] {
        for target in [Target::Sm80, Target::Sm90] {
            let k = QgemvQ6kMmaOneKernel(blocks);
            let (stem, code) = sass.of(&k, target);
            let count = |op: &str| code.matches(op).count();
            assert_eq!(count("IMMA.16832.U8.S8"), 4 * 8, "{stem}\n{code}");
            assert_eq!(count("IDP.4A"), 0, "{stem}");
            // From each pass's first product to its next branch.
            let lines: Vec<&str> = code.lines().collect();
            let mut passes = 0;
            for (i, l) in lines.iter().enumerate() {
                // A pass's first: no product since the last branch.
                let since_branch = lines[..i].iter().rev().take_while(|l| !l.contains("BRA"));
                if !l.contains("IMMA") || since_branch.clone().any(|l| l.contains("IMMA")) {
                    continue;
                }
                passes += 1;
                let among = lines[i..]
                    .iter()
                    .take_while(|l| !l.contains("BRA"))
                    .filter(|l| l.contains("LDG"))
                    .count();
                assert!(
                    among <= 3,
                    "{stem}: {among} loads among a pass's products\n{code}"
                );
            }
            assert_eq!(passes, 4, "{stem}\n{code}");
            assert!(sass.registers(&k, target) <= cap, "{stem}: over {cap}");
            // The staged form's weights: seven 16-byte copies a lane and step, for the
            // first step and in the loop, a loop per offset; the others load them.
            let copies = if blocks == TileBlocks::StagedTwo {
                4 * 2 * 7
            } else {
                0
            };
            assert_eq!(count("LDGSTS.E.BYPASS.128"), copies, "{stem}\n{code}");
            assert_eq!(count("LDGSTS"), copies, "{stem}");
        }
    }
}

/// Q6_K's copy-engine form (`TileBlocks::Bulk`, sm_90): its weights arrive by bulk
/// copies (UBLKCP: the first tiles', one a stage, and the refill), never by the other
/// forms' loads or `cp.async` (its only global loads are the activations', five a
/// super-block in each of the four offset loops), read from shared memory; eight
/// IMMA.16832.U8.S8 a super-block in each loop; registers within the blocks a
/// multiprocessor it asks for (three: 85, four: 64, two: 128).
#[test]
fn the_q6_k_copy_engine_form_takes_its_weights_by_bulk_copies() {
    let Some(sass) = Sass::find() else { return };
    use trueno_gpu::kernels::qgemv_q6k_mma_one::{QgemvQ6kMmaOneKernel, TileBlocks};
    use trueno_gpu::kernels::qgemv_q6k_mma_one_bulk::BulkRing;
    for (ring, cap) in [
        (BulkRing::ONE_OF_THREE, 85),
        (BulkRing::ONE_OF_FOUR, 64),
        (BulkRing::RING_OF_TWO, 128),
    ] {
        let k = QgemvQ6kMmaOneKernel(TileBlocks::Bulk(ring));
        let (stem, code) = sass.of(&k, Target::Sm90);
        let count = |op: &str| code.matches(op).count();
        assert_eq!(count("IMMA.16832.U8.S8"), 4 * 8, "{stem}\n{code}");
        assert_eq!(count("UBLKCP"), ring.stages as usize + 1, "{stem}\n{code}");
        assert_eq!(count("LDG"), 4 * 5, "{stem}\n{code}");
        assert_eq!(count("LDGSTS"), 0, "{stem}");
        assert!(count("LDS") >= 4 * 2 * 8, "{stem}\n{code}");
        assert!(
            sass.registers(&k, Target::Sm90) <= cap,
            "{stem}: over {cap}"
        );
    }
}

/// Q4_K's one-pass kernel (`QgemvQ8kWideKernel`): a 4096-wide row's four steps of quants
/// in four 16-byte loads before it waits for the previous grid, headers and activations
/// among the products; fewer registers than the default kernel and no more than 56, so
/// four eight-warp blocks a multiprocessor on every target.
#[test]
fn the_one_pass_q4_k_qgemv_holds_four_steps_of_quants_before_its_wait() {
    let Some(sass) = Sass::find() else { return };
    use trueno_gpu::kernels::qgemv_dp4a::QgemvQ8kKernel;
    use trueno_gpu::kernels::qgemv_wide::QgemvQ8kWideKernel;
    for f in QgemvQ8kWideKernel::FORMATS {
        let k = QgemvQ8kWideKernel(f);
        let (stem, code) = sass.of(&k, Target::Sm90);
        let before: Vec<&str> = code
            .lines()
            .take_while(|l| !l.contains("ACQBULK"))
            .filter(|l| l.contains("LDG"))
            .collect();
        // Steps of four 144-byte super-blocks: offsets 0, 576, 1152, 1728 from one
        // pointer (the default kernel's four are two steps' headers and quants).
        let offset = |l: &str| {
            let addr = l.split('[').nth(2).unwrap_or("");
            let hex = addr.split_once("+0x").map_or("0", |(_, o)| o);
            let digits: String = hex.chars().take_while(char::is_ascii_hexdigit).collect();
            u32::from_str_radix(&digits, 16).ok()
        };
        let mut offsets: Vec<_> = before.iter().map(|l| offset(l)).collect();
        offsets.sort();
        let want = [0, 576, 1152, 1728].map(Some);
        assert_eq!(offsets, want, "{stem}: {before:?}");
        assert!(before.iter().all(|l| l.contains("LDG.E.128")), "{stem}");
        for target in [Target::Sm80, Target::Sm90] {
            let (stem, code) = sass.of(&k, target);
            assert!(
                loads_after_first(&code, "IDP.4A") > 0,
                "{stem}: no header or activation load among the products\n{code}"
            );
            fewer_registers(&sass, &k, &QgemvQ8kKernel(f), 56, target);
        }
    }
}

/// The float-activation K-quant products issue a pass's loads before its math
/// (`qgemv_k::end_block`): from the first FFMA to the next branch, no load.
#[test]
fn the_k_quant_qgemv_loads_a_pass_before_its_math() {
    let Some(sass) = Sass::find() else { return };
    use trueno_gpu::kernels::float_type::FloatType;
    use trueno_gpu::kernels::qgemv::{QgemvKernel, QuantFormat};
    for f in [QuantFormat::Q4K, QuantFormat::Q5K, QuantFormat::Q6K] {
        for act in FloatType::ALL {
            for target in [Target::Sm80, Target::Sm90] {
                let (stem, code) = sass.of(&QgemvKernel(f, act), target);
                let among = loads_after_first(&code, "FFMA");
                assert!(code.contains("FFMA"), "{stem}: no FFMA");
                assert_eq!(among, 0, "{stem}: loads among a pass's math\n{code}");
            }
        }
    }
}

/// The row-dequantization kernels write each lane's two runs of four values in 16-byte
/// stores, and Q4_K / Q5_K read their headers in one 16-byte load, on every target.
#[test]
fn dequantized_rows_leave_in_16_byte_stores() {
    let Some(sass) = Sass::find() else { return };
    use trueno_gpu::kernels::dequant::DequantRowsKernel;
    use trueno_gpu::kernels::qgemv::QuantFormat;
    for f in QuantFormat::ALL {
        for target in common::checked_targets(&DequantRowsKernel(f)) {
            let (stem, code) = sass.of(&DequantRowsKernel(f), target);
            let count = |op: &str| code.matches(op).count();
            assert_eq!(count("STG.E.128 "), 2, "{stem}\n{code}");
            if matches!(f, QuantFormat::Q4K | QuantFormat::Q5K) {
                assert_eq!(count("LDG.E.128 "), 1, "{stem}\n{code}");
            }
        }
    }
}

/// Overlapped launches (sm_90): the integer products let the next kernel start
/// (`PREEXIT`) and issue their first pass's weight loads (or copies: `cp.async`, the copy
/// engine's UBLKCP) before they wait for the previous grid (`ACQBULK`), their activations
/// after; the activations' quantization waits before its first load. sm_80 code has
/// neither instruction.
#[test]
fn the_integer_qgemv_loads_weights_before_waiting_for_the_previous_grid() {
    let Some(sass) = Sass::find() else { return };
    use trueno_gpu::kernels::Kernel;
    use trueno_gpu::kernels::float_type::FloatType;
    use trueno_gpu::kernels::qgemv_dp4a::{QgemvQ8kKernel, QgemvQ8kOneWaveKernel};
    use trueno_gpu::kernels::qgemv_late::QgemvQ8kLateKernel;
    use trueno_gpu::kernels::qgemv_wide::QgemvQ8kWideKernel;
    use trueno_gpu::kernels::quantize_q8k::QuantizeQ8kKernel;
    let loads_before_wait = |code: &str| {
        code.lines()
            .take_while(|l| !l.contains("ACQBULK"))
            .filter(|l| l.contains("LDG") || l.contains("UBLKCP"))
            .count()
    };
    let mut kernels: Vec<Box<dyn Kernel>> = QgemvQ8kKernel::FORMATS
        .map(|f| Box::new(QgemvQ8kKernel(f)) as Box<dyn Kernel>)
        .into();
    kernels.extend(
        QgemvQ8kOneWaveKernel::FORMATS
            .map(|f| Box::new(QgemvQ8kOneWaveKernel(f)) as Box<dyn Kernel>),
    );
    kernels.extend(
        QgemvQ8kLateKernel::FORMATS.map(|f| Box::new(QgemvQ8kLateKernel(f)) as Box<dyn Kernel>),
    );
    kernels.extend(
        QgemvQ8kWideKernel::FORMATS.map(|f| Box::new(QgemvQ8kWideKernel(f)) as Box<dyn Kernel>),
    );
    use trueno_gpu::kernels::qgemv_q4k_mma_one::{QgemvQ8kMmaOneKernel, TileWarps};
    for f in QgemvQ8kMmaOneKernel::FORMATS {
        kernels.extend(
            [TileWarps::Eight, TileWarps::Sixteen]
                .map(|w| Box::new(QgemvQ8kMmaOneKernel(f, w)) as Box<dyn Kernel>),
        );
    }
    use trueno_gpu::kernels::qgemv_q6k_mma_one::QgemvQ6kMmaOneKernel;
    kernels.extend(QgemvQ6kMmaOneKernel::ALL.map(|k| Box::new(k) as Box<dyn Kernel>));
    for k in &kernels {
        let (stem, code) = sass.of(k.as_ref(), Target::Sm90);
        assert!(
            code.contains("PREEXIT") && code.contains("ACQBULK"),
            "{stem}\n{code}"
        );
        let early = loads_before_wait(&code);
        // A copy-engine kernel's first tile (or two): one copy each.
        let least = if code.contains("UBLKCP") { 1 } else { 2 };
        assert!(
            early >= least,
            "{stem}: {early} loads before the wait\n{code}"
        );
        if !k.targets().contains(&Target::Sm80) {
            continue;
        }
        let (stem, code) = sass.of(k.as_ref(), Target::Sm80);
        assert!(
            !code.contains("ACQBULK") && !code.contains("PREEXIT"),
            "{stem}"
        );
    }
    for t in FloatType::ALL {
        let (stem, code) = sass.of(&QuantizeQ8kKernel(t), Target::Sm90);
        assert!(code.contains("ACQBULK"), "{stem}\n{code}");
        assert_eq!(loads_before_wait(&code), 0, "{stem}\n{code}");
    }
}
