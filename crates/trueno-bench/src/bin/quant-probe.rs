//! Best-of-N timing of the integer row dot on cache-resident rows, per format and ISA: the
//! kernel's own cost, without DRAM in the way (tuning aid; the criterion bench is the record).
//!
//! `cargo run --release -p trueno-bench --bin quant-probe [ROWS] [COLS]` (default 64 x 4096,
//! which stays in L2 for every format).

use std::time::Instant;

use trueno_quant::{FORMATS, Isa, activation_format, dot_q8, quantize, quantize_rows};

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<usize>().expect("a number"));
    let rows = args.next().unwrap_or(64);
    let cols = args.next().unwrap_or(4096);
    let w: Vec<f32> = (0..rows * cols)
        .map(|i| ((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as f32 / 16777216.0 - 0.5)
        .collect();
    let x: Vec<f32> = w[..cols].iter().map(|v| v * 3.0).collect();
    println!("| format | isa | ns / row | weights / ns | GB/s of weights |");
    println!("|---|---|---:|---:|---:|");
    for info in FORMATS {
        let Some(af) = activation_format(info.format) else {
            continue;
        };
        let q = quantize_rows(info.format, &w, cols).expect("quantize");
        let act = quantize(af, &x).expect("quantize x");
        let rb = q.len() / rows;
        for (backend, isa) in Isa::available() {
            let mut best = f64::INFINITY;
            let mut sink = 0.0f32;
            for _ in 0..30 {
                let t = Instant::now();
                for row in q.chunks_exact(rb) {
                    sink += dot_q8(isa, info.format, row, &act).expect("dot");
                }
                best = best.min(t.elapsed().as_secs_f64());
            }
            std::hint::black_box(sink);
            let per_row = best * 1e9 / rows as f64;
            println!(
                "| {} | {backend:?} {isa} | {per_row:.0} | {:.2} | {:.1} |",
                info.name,
                cols as f64 / per_row,
                rb as f64 / per_row
            );
        }
    }
}
