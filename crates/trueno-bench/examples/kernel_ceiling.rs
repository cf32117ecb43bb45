//! How close an AVX-512 8x32 register tile can come to the FMA probe on this CPU, with
//! nothing but its own loop: `kernel_ceiling [KC]` (default 256).
//!
//! The issue-4 bar asks a whole one-thread GEMM for 85% of `fma_peak_gflops`, a loop of
//! FMAs on registers. trueno's k loop (`gemm::micro`, as LLVM emits it: two B loads, then
//! per row a `vbroadcastss` and two FMAs) is written here in assembly, so no compiler
//! choice is in the figure, and run on one packed A panel (8 x KC) and one packed B panel
//! (KC x 32) that stay in L1, then with A panels streamed from L2 (64 of them, 512 KiB
//! at KC 256), as the BLIS sweep does. Beside them: the same loop with each A value
//! broadcast inside the FMA (`{1to16}`), the same 16 FMAs a step with no loads at all, and
//! the probe itself. All alternate in bursts for `SECS` seconds (default 3), each keeping
//! its best burst, so they share the VM's quiet moments. What the tile loses here it
//! loses before packing or C, which a whole call adds. On a VM, `taskset -c 1` keeps the
//! loops and the probe's thread on one vCPU (the probe runs on a thread of its own).
//! x86-64 with AVX-512 only.

#[cfg(target_arch = "x86_64")]
use std::time::Instant;

/// A panels cycled through in the L2 form (8 x KC floats each).
#[cfg(target_arch = "x86_64")]
const L2_PANELS: usize = 64;

#[cfg(target_arch = "x86_64")]
mod tile {
    use std::arch::asm;

    /// The loop's three forms.
    #[derive(Clone, Copy, PartialEq)]
    pub enum Form {
        /// Two B loads, then a broadcast and two FMAs a row: trueno's compiled loop.
        Broadcast,
        /// Two B loads, then two FMAs a row that each broadcast A from memory.
        Embedded,
        /// The same 16 FMAs a step on registers: the loop's control, no loads.
        NoLoads,
    }

    /// Row `$i`/`$j` accumulators (columns 0-15 / 16-31) of one k step, A's value at byte
    /// `$off` of the step: broadcast into zmm18, then two FMAs.
    macro_rules! broadcast_row {
        ($off:literal, $i:literal, $j:literal) => {
            concat!(
                "vbroadcastss zmm18, [{a} + ",
                $off,
                "]\n",
                "vfmadd231ps zmm",
                $i,
                ", zmm0, zmm18\n",
                "vfmadd231ps zmm",
                $j,
                ", zmm1, zmm18\n",
            )
        };
    }

    /// B row p's 32 floats into zmm0 and zmm1.
    macro_rules! load_b {
        () => {
            "vmovups zmm0, [{b}]\nvmovups zmm1, [{b} + 64]\n"
        };
    }

    /// `broadcast_row` with the broadcast inside each FMA.
    macro_rules! embedded_row {
        ($off:literal, $i:literal, $j:literal) => {
            concat!(
                "vfmadd231ps zmm",
                $i,
                ", zmm0, dword ptr [{a} + ",
                $off,
                "]{{1to16}}\n",
                "vfmadd231ps zmm",
                $j,
                ", zmm1, dword ptr [{a} + ",
                $off,
                "]{{1to16}}\n",
            )
        };
    }

    /// `broadcast_row` with A's value already in register `$r`.
    macro_rules! register_row {
        ($r:literal, $i:literal, $j:literal) => {
            concat!(
                "vfmadd231ps zmm",
                $i,
                ", zmm0, zmm",
                $r,
                "\n",
                "vfmadd231ps zmm",
                $j,
                ", zmm1, zmm",
                $r,
                "\n",
            )
        };
    }

    /// The tile's loop: `$setup` once, the 16 accumulators (zmm2-17) zeroed, then `$step`
    /// (which reads B row p from zmm0/zmm1 and A's eight values at `{a}`) kc times, A and B
    /// advancing a step each time; the sum of two accumulators stored at `{o}`.
    /// One k step: B's row loaded, then the eight rows of the tile by `$row`, each A
    /// value at its byte offset, into its pair of accumulators.
    macro_rules! step_of {
        ($row:ident) => {
            concat!(
                load_b!(),
                $row!(0, 2, 3),
                $row!(4, 4, 5),
                $row!(8, 6, 7),
                $row!(12, 8, 9),
                $row!(16, 10, 11),
                $row!(20, 12, 13),
                $row!(24, 14, 15),
                $row!(28, 16, 17),
            )
        };
    }

    macro_rules! tile_loop {
        ($a:expr, $b:expr, $kc:expr, $o:expr, $setup:expr, $step:expr) => {
            asm!(
                concat!(
                    $setup,
                    "vpxord zmm2, zmm2, zmm2\n",
                    "vmovaps zmm3, zmm2\n", "vmovaps zmm4, zmm2\n", "vmovaps zmm5, zmm2\n",
                    "vmovaps zmm6, zmm2\n", "vmovaps zmm7, zmm2\n", "vmovaps zmm8, zmm2\n",
                    "vmovaps zmm9, zmm2\n", "vmovaps zmm10, zmm2\n", "vmovaps zmm11, zmm2\n",
                    "vmovaps zmm12, zmm2\n", "vmovaps zmm13, zmm2\n", "vmovaps zmm14, zmm2\n",
                    "vmovaps zmm15, zmm2\n", "vmovaps zmm16, zmm2\n", "vmovaps zmm17, zmm2\n",
                    ".p2align 6\n",
                    "2:\n",
                    $step,
                    "add {a}, 32\n",
                    "add {b}, 128\n",
                    "dec {k}\n",
                    "jnz 2b\n",
                    "vaddps zmm2, zmm2, zmm17\n",
                    "vmovups [{o}], zmm2\n",
                    "vzeroupper\n",
                ),
                a = inout(reg) $a => _,
                b = inout(reg) $b => _,
                k = inout(reg) $kc => _,
                o = in(reg) $o,
                out("zmm0") _, out("zmm1") _, out("zmm2") _, out("zmm3") _, out("zmm4") _,
                out("zmm5") _, out("zmm6") _, out("zmm7") _, out("zmm8") _, out("zmm9") _,
                out("zmm10") _, out("zmm11") _, out("zmm12") _, out("zmm13") _,
                out("zmm14") _, out("zmm15") _, out("zmm16") _, out("zmm17") _,
                out("zmm18") _, out("zmm19") _, out("zmm20") _, out("zmm21") _,
                out("zmm22") _, out("zmm23") _, out("zmm24") _, out("zmm25") _,
                options(nostack),
            )
        };
    }

    /// One 8 x 32 tile over `kc` k steps: A packed k-major (8 floats a step), B packed
    /// (32 floats a step); returns a lane of the sum so the work is used.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `a` holds 8 * kc floats and `b` 32 * kc; kc >= 1.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn run(form: Form, a: *const f32, b: *const f32, kc: usize) -> f32 {
        let mut out = [0.0f32; 16];
        let o = out.as_mut_ptr();
        // SAFETY: the caller guarantees AVX-512F and that the loop's reads (a + 32 bytes
        // and b + 128 bytes a step, kc steps) stay inside `a` and `b`; the only write is
        // one 64-byte store to `out`. Every register the code touches is declared.
        unsafe {
            match form {
                Form::Broadcast => tile_loop!(a, b, kc, o, "", step_of!(broadcast_row)),
                Form::Embedded => tile_loop!(a, b, kc, o, "", step_of!(embedded_row)),
                // B's first row and A's first step loaded once, before the loop.
                Form::NoLoads => tile_loop!(
                    a,
                    b,
                    kc,
                    o,
                    concat!(
                        load_b!(),
                        "vbroadcastss zmm18, [{a}]\nvbroadcastss zmm19, [{a} + 4]\n",
                        "vbroadcastss zmm20, [{a} + 8]\nvbroadcastss zmm21, [{a} + 12]\n",
                        "vbroadcastss zmm22, [{a} + 16]\nvbroadcastss zmm23, [{a} + 20]\n",
                        "vbroadcastss zmm24, [{a} + 24]\nvbroadcastss zmm25, [{a} + 28]\n",
                    ),
                    concat!(
                        register_row!(18, 2, 3),
                        register_row!(19, 4, 5),
                        register_row!(20, 6, 7),
                        register_row!(21, 8, 9),
                        register_row!(22, 10, 11),
                        register_row!(23, 12, 13),
                        register_row!(24, 14, 15),
                        register_row!(25, 16, 17),
                    )
                ),
            }
        }
        out[0]
    }
}

#[cfg(target_arch = "x86_64")]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    use tile::Form;
    if !std::arch::is_x86_feature_detected!("avx512f") {
        println!("kernel_ceiling: this CPU has no AVX-512F; nothing to measure");
        return Ok(());
    }
    let kc: usize = match std::env::args().nth(1) {
        Some(s) => s.parse().map_err(|_| format!("not a depth: {s}"))?,
        None => 256,
    };
    if kc == 0 {
        return Err("KC must be at least 1".into());
    }
    let secs: f64 = std::env::var("SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3.0);
    let a: Vec<f32> = (0..8 * kc * L2_PANELS)
        .map(|i| (i % 7) as f32 * 0.01)
        .collect();
    let b: Vec<f32> = (0..32 * kc).map(|i| (i % 5) as f32 * 0.01).collect();
    let flops_a_tile = 2.0 * 8.0 * 32.0 * kc as f64;
    // Tiles a burst: about 2 ms of work at 200 GFLOP/s.
    let tiles = ((4e8 / flops_a_tile) as usize).max(L2_PANELS);
    let forms = [
        ("8x32 loop, A and B in L1", Form::Broadcast, 1),
        ("8x32 loop, A panels from L2", Form::Broadcast, L2_PANELS),
        ("8x32 loop, {1to16} FMAs, in L1", Form::Embedded, 1),
        ("8x32 loop's FMAs, no loads", Form::NoLoads, 1),
    ];
    let mut best = [0.0f64; 4];
    let mut probe = 0.0f64;
    let mut sink = 0.0f32;
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < secs {
        for (f, &(_, form, panels)) in forms.iter().enumerate() {
            let t = Instant::now();
            for i in 0..tiles {
                let ap = a[(i % panels) * 8 * kc..].as_ptr();
                // SAFETY: AVX-512F was detected above; panel `i % panels` holds 8 * kc
                // floats of `a` and `b` holds 32 * kc, and kc >= 1.
                sink += unsafe { tile::run(form, ap, b.as_ptr(), kc) };
            }
            let rate = flops_a_tile * tiles as f64 / t.elapsed().as_secs_f64() / 1e9;
            best[f] = best[f].max(rate);
        }
        probe = probe.max(trueno::gemm::fma_rate_gflops(1, 1_500_000));
    }
    std::hint::black_box(sink);
    println!("| one thread, KC {kc} | best GFLOP/s | share of the FMA probe |");
    println!("|---|---:|---:|");
    println!("| FMA probe (`fma_rate_gflops`) | {probe:.1} | 100% |");
    for ((name, _, _), rate) in forms.iter().zip(best) {
        println!("| {name} | {rate:.1} | {:.0}% |", 100.0 * rate / probe);
    }
    Ok(())
}

#[cfg(not(target_arch = "x86_64"))]
fn main() {
    println!("kernel_ceiling: x86-64 with AVX-512 only");
}
