//! GEMM over a B past L2 against the f64 reference: a B from memory read in place or
//! packed (rows a page long or off the page grid, under an A one panel past its block
//! height, split over threads by the inner dimension), and a B past eight L2 packed by
//! its first tiles instead of a pass (under sixteen A panels or more, or within half of
//! L3 under fewer; on Zen, rows of 16 KiB at any size and a transposed B deeper than
//! 128), with the path itself asserted where the rule takes it.

mod common;

use common::gemm_ref::{Case, Product, assert_no_b_pass, check_row_major, one_thread, pool};
use common::{Rng, engines};
use trueno::Transpose;

#[test]
fn a_b_from_memory_in_page_long_rows_matches_the_reference_on_every_isa() {
    // A row-major B past L3 whose rows are one 4 KiB page (1024 floats) is read in place
    // by a one-block A where L1 cannot keep a packed panel, packed where it can
    // (`b_in_place`), depth sized from the detected L3 so every machine runs it; k past
    // one KC block, a ragged A, beta 0 over NaN and beta != 0; 37 rows (four A panels or
    // more on every ISA) ask L2 for the next B panel as they go where it is read in
    // place, but a Zen core's first tiles pack it under fourteen A panels, so 115 rows
    // (fourteen or more on every ISA's tile) read it in place there; rows of 1040
    // floats, whole lines off the page grid, likewise. Up to eight rows take the row
    // axpys instead, which read B once in order (3 and 7 here).
    let l3 = trueno::gemm::CacheSizes::detect().l3;
    let (k, k_off_grid) = (l3 / 4096 + 9, l3 / 4160 + 9);
    let shapes = [
        (7, 1024, k, 0),
        (12, 1024, k, 0),
        (3, 1024, k, 0),
        (37, 1024, k, 0),
        (37, 1040, k_off_grid, 0),
        (115, 1024, k, 0),
        (115, 1040, k_off_grid, 0),
    ];
    check_row_major(53, &shapes, "B from memory", true);
}

#[test]
fn a_b_from_memory_under_an_a_one_panel_past_its_block_height_matches_the_reference() {
    // On a Zen core, an A up to one micro-panel past MC rows is one block where B comes
    // from memory, and each B panel is packed by its first tile (a transposed B's just
    // before it) while the tiles ask L2 for the next panel's rows rather than their C
    // tiles (`fills_b_past_l2`): MC + MR rows over a row-major B past L3 in page rows,
    // and over a transposed one (x·Wᵀ, W past L3, more rows of C than the swap takes), k
    // past one KC block (the first block overwrites a NaN-filled C, the later ones add to
    // it). Elsewhere the same rows take two blocks, which
    // `an_a_a_few_rows_past_its_block_height` covers.
    if trueno::gemm::CoreFamily::detect() != trueno::gemm::CoreFamily::Zen {
        eprintln!("skipped: not a Zen core, where this path is not taken");
        return;
    }
    // Whole panels on every ISA, so no pass packs a ragged last one.
    let deep = (trueno::gemm::CacheSizes::detect().l3 / 4096 + 9).next_multiple_of(64);
    let mut rng = Rng::new(61);
    let rows = rows_per_cpu_isa(|bl| Some(bl.mc + bl.mr));
    let heights: std::collections::BTreeSet<usize> = rows.iter().map(|r| r.0).collect();
    for (i, (m, tb)) in heights
        .into_iter()
        .flat_map(|m| [(m, Transpose::No), (m, Transpose::Yes)])
        .enumerate()
    {
        // One data set and reference per height and layout (most ISAs share one).
        let (n, k) = match tb {
            Transpose::No => (1024, deep),
            Transpose::Yes => (deep, 1024),
        };
        let case = Case::taking_turn((m, n, k), (Transpose::No, tb), 0, i % 2);
        let p = Product::new(&mut rng, &case);
        let a = trueno::Matrix::from_fn(m, k, |i, j| (i + j) as f32 * 1e-3).unwrap();
        let (br, bc) = if tb == Transpose::Yes { (n, k) } else { (k, n) };
        let b = trueno::Matrix::from_fn(br, bc, |i, j| (i ^ j) as f32 * 1e-3).unwrap();
        for (_, backend, e) in rows.iter().filter(|r| r.0 == m) {
            let what = format!("{} {m} rows, B from memory ({tb:?})", backend.name());
            one_thread(|| p.check(e, &what, false));
            // The path asserted: no packing pass (two blocks of A would have one).
            let mut c = trueno::Matrix::zeros(m, n).unwrap();
            let (no, cv) = (Transpose::No, &mut c.view_mut());
            let profile = one_thread(|| e.gemm_profiled(1.0, a.view(), no, b.view(), tb, 0.0, cv));
            let pack_b = profile.unwrap().pack_b;
            assert_eq!(
                pack_b,
                std::time::Duration::ZERO,
                "{what}: B packed by a pass"
            );
        }
    }
}

#[test]
fn a_b_past_eight_l2_packed_by_its_first_tiles_beside_c_tile_asks_matches_the_reference() {
    // Off Zen, a row-major B past eight L2 under a one-block A of sixteen panels or more
    // is packed by each panel's first tile, and where C is past half of L2 and beta is
    // not 0 every tile asks for its C tile and a share of the next panel's rows spread
    // over its k steps (`Block::next_beside_c`): 130 rows (a two-row edge panel), 4100
    // columns (a ragged last panel of four, packed by a pass), k past eight L2 and a
    // short last KC block that cannot carry all its asks; beta 0 over NaN and beta != 0,
    // every ISA. On Zen, rows of 16 KiB and more are packed by their first tiles too,
    // the tiles asking L2 for the next panel's rows (`Block::next_fill_to_l2`).
    let caches = trueno::gemm::CacheSizes::detect();
    let (m, n) = (130, 4100);
    let k = 8 * caches.l2 / (4 * n) + 77;
    if m * n * 4 <= caches.l2 / 2 {
        eprintln!("note: C within half of this L2, so its tiles are not asked for here");
    }
    let shapes = [(m, n, k, 0), (m + 3, n, k, 3)];
    check_row_major(67, &shapes, "B past eight L2, C asked for", true);
    // No pass (one had packed each KC x NC block first); on Zen too, where rows of
    // 16 KiB are packed by their first tiles within L3 (past it, as under CI's small
    // `TRUENO_CACHE_SIZES`, read in place or packed by them).
    assert_no_b_pass((m, n - 4, k), Transpose::No);
}

#[test]
fn a_b_past_eight_l2_within_half_of_l3_packed_by_the_first_tiles_of_few_a_panels_matches_the_reference()
 {
    // Off Zen, a row-major B past eight L2 but within half of L3 is packed by each
    // panel's first tile under a one-block A of any height (past half of L3 only from
    // sixteen A panels): 40 rows (five panels) and 43 (a three-row edge panel), 4100
    // columns (a ragged last panel of four, packed by a pass), k past eight L2 and a short
    // last KC block; beta 0 over NaN and beta != 0, every ISA.
    let caches = trueno::gemm::CacheSizes::detect();
    let (m, n) = (40, 4100);
    let k = 8 * caches.l2 / (4 * n) + 77;
    let shapes = [(m, n, k, 0), (m + 3, n, k, 3)];
    check_row_major(71, &shapes, "B within half of L3, few A panels", true);
    let zen = trueno::gemm::CoreFamily::detect() == trueno::gemm::CoreFamily::Zen;
    if !zen && k * (n - 4) * 4 > caches.l3 / 2 {
        eprintln!("note: a B past half of this L3: the pass packs it here");
        return;
    }
    // On Zen the 16 KiB rows of 4096 columns decide it within L3 (past it no pass packs
    // them either); 40 rows over them read B packed, not in place: they crowd L1's sets.
    assert_no_b_pass((m, n - 4, k), Transpose::No);
}

#[test]
fn a_b_from_memory_split_over_the_inner_dimension_matches_the_reference_read_in_place_or_packed() {
    // The same B past L3 on two and three threads: each takes a range of k (a part of
    // B that alone may fit L3) where the core packs B's rows as one stream (Zen), a band
    // of B's columns elsewhere, and is judged by the whole B, which streams from memory;
    // the staggered parts' lead calls too; three rows take the row axpys in each part.
    // Every ISA, beta 0 over NaN and beta != 0.
    if cfg!(target_arch = "wasm32") {
        return;
    }
    let l3 = trueno::gemm::CacheSizes::detect().l3;
    let k = l3 / 4096 + 9;
    let mut rng = Rng::new(59);
    let engines = engines();
    for threads in [2, 3] {
        let pool = pool(threads);
        for (i, m) in [12, 3].into_iter().enumerate() {
            let case = Case::taking_turn((m, 1024, k), (Transpose::No, Transpose::No), i, 0);
            // One data set and reference for every ISA; the default path only (it packs
            // or reads in place by the rule asserted below).
            let p = Product::new(&mut rng, &case);
            for (backend, e) in &engines {
                let what = format!("{} {threads} threads, B from memory", backend.name());
                pool.install(|| p.check(e, &what, false));
            }
        }
        for (backend, e) in &engines {
            // Whole panels only (1024 columns), so a B read in place packs nothing. A Zen
            // core packs it in the sweep (its first tiles, `fills_b_past_l2`; under
            // fourteen A panels even where L1 cannot keep the packed KC x NR panel), and
            // so do other cores where it is past eight L2 under enough A panels; other
            // cores read it in place where L1 cannot keep that panel (the Zen 4 VM's 32
            // KiB at KC 512) and pack it by a pass where it can (48 KiB at KC 256): no
            // pass, or a pass, asserted.
            if *backend != trueno::Backend::Gpu {
                let bl = trueno::gemm::blocking_for(*backend);
                let caches = trueno::gemm::CacheSizes::detect();
                let zen = trueno::gemm::CoreFamily::detect() == trueno::gemm::CoreFamily::Zen;
                // (Thirty rows spread the asks only where NR is at most twice the
                // number of A panels: `spreads_next_panel`.)
                let spreads = 30usize.div_ceil(bl.mr) * 2 >= bl.nr;
                let filled = zen || (spreads && k * 1024 * 4 > 8 * caches.l2);
                let no_pass = filled || bl.kc_one_block.min(k) * bl.nr * 4 > caches.l1 * 2 / 3;
                // Thirty rows: past the row axpys' eight in each thread's part (bands of
                // rows included), so the packed loops run.
                let a = trueno::Matrix::from_fn(30, k, |i, j| (i + j) as f32 * 1e-3).unwrap();
                let b = trueno::Matrix::from_fn(k, 1024, |i, j| (i ^ j) as f32 * 1e-3).unwrap();
                let mut c = trueno::Matrix::zeros(30, 1024).unwrap();
                let (no, cv) = (Transpose::No, &mut c.view_mut());
                let p = pool
                    .install(|| e.gemm_profiled(1.0, a.view(), no, b.view(), no, 0.0, cv))
                    .unwrap();
                let name = backend.name();
                assert_eq!(
                    p.pack_b == std::time::Duration::ZERO,
                    no_pass,
                    "{name} {threads} threads: B read in place or packed in the sweep"
                );
            }
        }
    }
}

#[test]
fn a_transposed_b_past_l2_under_a_one_block_a_packed_in_the_sweep_matches_the_reference() {
    // On a Zen core, an x·Wᵀ whose A is one block of more rows than the swap takes
    // (`run_transposed`: up to four tile widths) over a W past L2 and deeper than 128
    // has each of W's panels transposed just before its first tile (`fuse_b`) rather
    // than by a pass over each KC block. Per ISA, four tile widths and five rows (a
    // ragged edge panel), k 300 (a short last KC block where KC is under 300), W about
    // twice L2 with a ragged last panel; beta 0 over NaN, then beta 1 and -1.5; one
    // thread. Elsewhere the pass packs it, which the same data checks.
    let caches = trueno::gemm::CacheSizes::detect();
    let k = 300;
    let n = 2 * caches.l2 / (4 * k) + 7;
    let mut rng = Rng::new(73);
    let rows = rows_per_cpu_isa(|bl| Some(4 * bl.nr + 5).filter(|&m| m <= bl.mc));
    let heights: std::collections::BTreeSet<usize> = rows.iter().map(|r| r.0).collect();
    for (turn, m) in heights.into_iter().enumerate() {
        for beta_turn in 0..3 {
            let tb = (Transpose::No, Transpose::Yes);
            let case = Case::taking_turn((m, n, k), tb, turn + beta_turn, beta_turn % 2);
            let p = Product::new(&mut rng, &case);
            for (_, backend, e) in rows.iter().filter(|r| r.0 == m) {
                let what = format!("{} {m} rows, W past L2", backend.name());
                one_thread(|| p.check(e, &what, false));
            }
        }
    }
    if trueno::gemm::CoreFamily::detect() != trueno::gemm::CoreFamily::Zen {
        eprintln!("note: not a Zen core: a pass packs this W here");
        return;
    }
    // The path, on the best ISA's tile: whole panels, no pass.
    let bl = trueno::gemm::blocking_for(trueno::engine().unwrap().backend(trueno::OpClass::MatMul));
    assert_no_b_pass((4 * bl.nr + 5, n / 64 * 64, k), Transpose::Yes);
}

/// Each CPU ISA's engine with the row count `rows` gives its blocking (ISAs it gives
/// none left out), sorted by rows. Not the GPU engine: its products run on the GPU or,
/// as here, on the best CPU ISA's tile, whose own row already covers it.
fn rows_per_cpu_isa(
    rows: impl Fn(trueno::gemm::Blocking) -> Option<usize>,
) -> Vec<(usize, trueno::Backend, trueno::Engine)> {
    let mut all: Vec<_> = engines()
        .into_iter()
        .filter(|(b, _)| *b != trueno::Backend::Gpu)
        .filter_map(|(b, e)| rows(trueno::gemm::blocking_for(b)).map(|m| (m, b, e)))
        .collect();
    all.sort_by_key(|r| r.0);
    all
}
