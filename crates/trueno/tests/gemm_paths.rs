//! GEMM's shape-specific paths against the f64 reference: thin products with B
//! transposed (run as Cᵀ = op(B)ᵀ op(A)ᵀ), thin products of one or two B panels past
//! their deeper blocks, an A past one block read in place for a thin B
//! (in cache, and streaming from memory with the thin tile), thin products wider than
//! their packed B block, a C whose tiles are prefetched and an A packed for its far-apart
//! rows, B's panels packed by the micro-kernel's first pass over them (a B past L2:
//! `gemm_b_past_l2.rs`), shallow products over a C past two L2 sweeping A's panels
//! outside B's, an A a few rows past its block height, thin products split across
//! threads (over the inner dimension on Zen and for one row of C, by columns elsewhere), few-row products reading B in
//! place, up to eight rows of C over a row-major B as axpys over B's rows, and ragged
//! last row panels in their edge tiles.

mod common;

use common::gemm_ref::{
    Case, OPS, assert_no_b_pass, b_pass_time, check, check_each, check_each_in, check_row_major,
    one_thread, pool,
};
use common::{Rng, engines};
use trueno::Transpose;

#[test]
fn thin_products_with_b_transposed_match_the_reference_on_every_isa() {
    // x·Wᵀ shapes (few rows of C, B stored n x k) run as Cᵀ = op(B)ᵀ op(A)ᵀ, with C
    // written through its transpose: 2-16 rows take the one-vector kernel, up to 128 the
    // full one; k past one KC block (later blocks add into the transposed C), ragged
    // tiles on every side, both layouts of A, beta 0 over NaN and beta != 0. Shallow
    // ones of many rows run as given where that costs less than the swap: 64 x 300 x 32
    // and 24 x 600 x 16 on every tile, 48 x 97 x 96 on the tiles that write a
    // transposed C element by element (AVX2's, SSE2's) but swapped on AVX-512's: both
    // ways.
    let mut rng = Rng::new(31);
    let engines = engines();
    for (i, &(m, n, k)) in [
        (2, 67, 300),
        (7, 129, 600),
        (8, 96, 1030),
        (16, 200, 257),
        (17, 300, 600),
        (40, 333, 129),
        (128, 257, 520),
        (64, 300, 32),
        (24, 600, 16),
        (48, 97, 96),
    ]
    .iter()
    .enumerate()
    {
        for ta in [Transpose::No, Transpose::Yes] {
            let case = Case::taking_turn((m, n, k), (ta, Transpose::Yes), i, i % 4);
            check_each(&engines, &mut rng, &case, "x·Wᵀ", false);
        }
    }
}

#[test]
fn a_last_column_panel_of_one_vector_runs_the_narrow_tile_and_matches_the_reference() {
    // A last panel of C's columns at most one vector wide runs the one-vector tile on
    // the padded panel: edges of 4, 8, 9 and 16 columns (every ISA's vector or less on
    // some), plain and swapped (x·Wᵀ, where the edge is C's last rows), beta 0 over NaN
    // and beta != 0, k within one block and past it.
    let mut rng = Rng::new(67);
    let engines = engines();
    for (i, &(m, n, k, tb)) in [
        (48, 300, 256, Transpose::Yes),
        (100, 517, 700, Transpose::Yes),
        (200, 200, 200, Transpose::No),
        (129, 1040, 300, Transpose::No),
        (33, 1001, 64, Transpose::No),
        (70, 260, 520, Transpose::No),
    ]
    .iter()
    .enumerate()
    {
        let case = Case::taking_turn((m, n, k), (Transpose::No, tb), i, i % 3);
        check_each(&engines, &mut rng, &case, "narrow last panel", false);
    }
}

#[test]
fn a_past_one_block_read_in_place_for_a_thin_b_matches_the_reference() {
    // At most four B panels wide: A is read in place however many rows it has (more than
    // any MC block here), panel by panel across B's panels; row strides of 1024 floats
    // (all rows on one L1 set) and ragged ones, k past the thin depth (`kc_thin_b`:
    // 640-1344 for the SIMD tiles on the machines we know, 2048 for the 4x4 scalar one
    // on a 48 KiB L1), both layouts of B.
    let mut rng = Rng::new(37);
    let engines = engines();
    for (i, &(m, n, k, pad)) in [(1030, 100, 520, 0), (1100, 33, 1024, 0), (1029, 7, 2100, 3)]
        .iter()
        .enumerate()
    {
        for tb in [Transpose::No, Transpose::Yes] {
            let case = Case::taking_turn((m, n, k), (Transpose::No, tb), i, pad);
            check_each(&engines, &mut rng, &case, "thin B", false);
        }
    }
}

#[test]
fn thin_products_of_one_or_two_b_panels_past_their_deeper_blocks_match_the_reference() {
    // A B of one or two panels runs blocks four or two times `kc_thin_b` deep (up to
    // 8192 on the machines we know): k past two such blocks with a ragged last one, a
    // thin side of 3 and 20 columns (plain) and of 45 and 20 rows (`x·Wᵀ`, swapped: C's
    // rows are the thin side), one or two panels of the AVX-512 and AVX2 tiles (more on
    // the narrower ones, which then keep `kc_thin_b` or are not thin), beta 0 over NaN
    // and beta != 0.
    let mut rng = Rng::new(73);
    let engines = engines();
    for (i, &(m, n, k, tb)) in [
        (37, 3, 17_000, Transpose::No),
        (50, 20, 9_000, Transpose::No),
        (45, 40, 5_000, Transpose::Yes),
        (20, 90, 9_000, Transpose::Yes),
    ]
    .iter()
    .enumerate()
    {
        let case = Case::taking_turn((m, n, k), (Transpose::No, tb), i, i % 3);
        check_each(&engines, &mut rng, &case, "thin B, deep", false);
    }
}

#[test]
fn thin_products_whose_a_streams_from_memory_run_the_thin_tile_and_match_the_reference() {
    // Past a quarter of L3 an A read in place for a thin B takes the backend's thin tile
    // (AVX2: 4x16), sized here from the detected L3 so every machine runs it; both
    // betas, a ragged A row stride.
    let mut rng = Rng::new(41);
    let l3 = trueno::gemm::CacheSizes::detect().l3;
    let engines: Vec<_> = engines()
        .into_iter()
        .filter(|(b, _)| trueno::gemm::thin_blocking_for(*b).is_some())
        .collect();
    let k = 1030;
    let m = l3 / 4 / (k * 4) + 7;
    for i in 0..2 {
        let case = Case::taking_turn((m, 40, k), (Transpose::No, Transpose::No), i, i * 3);
        check_each(&engines, &mut rng, &case, "thin B, A from memory", true);
    }
}

#[test]
fn thin_products_wider_than_their_b_block_match_the_reference_on_every_isa() {
    // A of one block (at most MC rows) packs B in blocks of `nc_one_block` columns (half
    // of L2 where that leaves page-long row pieces): C two blocks and a ragged piece wide,
    // k within one KC block and (at KC 256) past it, both layouts of A, beta 0 over NaN and beta != 0.
    // On Zen, B's rows a few floats apart make one stream and are packed whole
    // (`one_block_nc`); 65 floats apart (260 bytes) they are not, and go in blocks there too.
    let mut rng = Rng::new(41);
    for (backend, e) in engines() {
        let n = 2 * trueno::gemm::blocking_for(backend).nc_one_block + 37;
        for (i, &(m, k, pad)) in [(9, 300, 1), (33, 70, 2), (17, 70, 65)].iter().enumerate() {
            for ta in [Transpose::No, Transpose::Yes] {
                let case = Case::taking_turn((m, n, k), (ta, Transpose::No), i, pad);
                let what = format!("{} thin, {n} wide", backend.name());
                one_thread(|| check(&e, &mut rng, &case, &what));
            }
        }
    }
}

#[test]
fn a_c_past_a_quarter_of_l2_and_a_rows_pages_apart_match_the_reference_on_every_isa() {
    // A C over half of L2, updated with beta not 0, has its tiles' lines prefetched
    // during the k loop (here 650 KiB: on L2s up to 1 MiB, not on a 2 MiB one); at KC
    // 256 (not at Zen 4's 512) the last KC block, 44 steps, is too short to carry them
    // all, so some go out before it;
    // a one-block A with rows more than a page apart (lda 1100) is packed, not read in
    // place. Ragged tiles, beta 0 over NaN and beta != 0.
    let shapes = [(260, 640, 300, 5), (40, 700, 1100, 0)];
    check_row_major(43, &shapes, "big C / far A rows", false);
}

#[test]
fn b_panels_packed_by_their_first_tile_match_the_reference_on_every_isa() {
    // A row-major B within L2 is packed by the first micro-kernel call that reads each
    // panel (the later A blocks and panels read the copy): A of one block and of several
    // (more rows than MC on the machines we know, so blocks after the first read what
    // the first packed), k within one KC block and past it, a ragged last B panel (packed
    // by `pack_b`) and ragged rows, beta 0 over NaN and beta != 0; and 128^3-like shapes
    // that the B-outer sweep now takes instead of the thin one. Last, a deep B of few
    // columns, larger than L2 but each KC block within it (`fuse_b_block` on Zen: every
    // k block's panels packed by the first A block's tiles, a ragged last block).
    let shapes = [
        (100, 200, 70, 0),
        (1100, 161, 90, 3),
        (300, 257, 600, 1),
        (128, 128, 128, 0),
        (100, 100, 250, 2),
        (200, 100, 1400, 0),
    ];
    check_row_major(47, &shapes, "B packed in the sweep", false);
}

#[test]
fn blocks_over_c_rows_4_kib_apart_sweep_a_outer_and_match_the_reference_on_every_isa() {
    // An A of two blocks (600 rows over MC 512 on a 2 MiB L2) over a B past L2 that the
    // pass packs, whose KC x 1000 block is within half of L2, into a C of rows 1024
    // floats (4 KiB) apart: the blocks sweep A's panels outside B's (`sweeps_a_outer`,
    // not on Zen or where the block outgrows half of L2: then the usual sweep). A ragged
    // last B panel and k block, beta 0 over NaN and beta != 0; a ragged last A panel.
    let shapes = [(600, 1000, 600, 24), (605, 1000, 700, 24)];
    check_row_major(83, &shapes, "A-outer over aliasing C rows", true);
}

#[test]
fn shallow_products_over_a_c_past_two_l2_sweep_a_outer_and_match_the_reference_on_every_isa() {
    // A product at most 512 deep over a C past two L2 (and a B within a quarter of L3)
    // sweeps A's panels outside B's (`shallow_sweeps_a_outer`) on a Zen core, and on
    // another where B comes back from L2 (within half of it, or one A block's row-major B,
    // packed by its first A panel: these 60-deep ones from a 512 KiB L2 up): one block
    // of A read in place (60 deep: a B past the unpacked grid's reach), one packed for
    // its transposed A, and several blocks (500 deep, past MC x KC on Zen 4); C's rows
    // 1024 floats apart and 1000 or 2000 (a ragged last B panel), ragged A rows, op(B) as
    // given and transposed, beta 0 over NaN and beta != 0, every ISA. One block of A over
    // a row-major B has its first A panel's tiles pack B, blocks of B's columns within
    // half of L2 (`shallow_first_a_panel_packs_b`: 2000 columns 100 deep are two or more
    // such blocks); the rest a pass. Where the sweep is not taken (the deeper cases on
    // another core) they check the B-outer sweep that other tests cover.
    use trueno::gemm::{CacheSizes, CoreFamily};
    // C just past two L2 at 1000 and 2000 columns.
    let l2 = CacheSizes::detect().l2;
    let (m, wide_m) = (2 * l2 / 4000 + 13, 2 * l2 / 8000 + 9);
    let (no, yes) = (Transpose::No, Transpose::Yes);
    let cases = [
        ((m, 1024, 60, 0), (no, no)),
        ((m + 3, 1000, 500, 5), (no, no)),
        ((m + 6, 1000, 64, 2), (no, yes)),
        ((m + 5, 1024, 100, 0), (yes, no)),
        ((wide_m, 2000, 100, 3), (no, no)),
        ((wide_m + 2, 2000, 100, 0), (yes, no)),
    ];
    let (mut rng, engines) = (Rng::new(89), engines());
    for (i, ((m, n, k, pad), ops)) in cases.into_iter().enumerate() {
        let case = Case::taking_turn((m, n, k), ops, i, pad);
        check_each(&engines, &mut rng, &case, "shallow, C past two L2", true);
    }
    // The path: over a row-major B the first A panel packs B's panels (no pass), where
    // the B-outer sweep's first tiles would; over a transposed one the pass does.
    if CoreFamily::detect() != CoreFamily::Zen && l2 < 512 << 10 {
        eprintln!("path not asserted: a 60-deep B past half of this core's L2");
        return;
    }
    assert_no_b_pass((m, 1024, 60), no);
    let pass = b_pass_time((m, 1024, 60), yes);
    assert!(
        pass > std::time::Duration::ZERO,
        "transposed B not packed by a pass"
    );
}

#[test]
fn an_a_a_few_rows_past_its_block_height_matches_the_reference_on_every_isa() {
    // Past KC deep, rows up to one micro-panel past MC join the block before them (one
    // block of MC + 1 or MC + MR rows; a third block of MC + 2), one more row makes a
    // block of its own (MR + 1 rows); 70 deep, an A of more than MC rows is one block
    // (all of it within MC x KC floats). Both layouts of A, ragged tiles, beta 0 over NaN
    // and beta != 0.
    let mut rng = Rng::new(53);
    for (backend, e) in engines() {
        let bl = trueno::gemm::blocking_for(backend);
        let (mc, mr) = (bl.mc, bl.mr);
        for (i, &(m, k)) in [
            (mc + 1, bl.kc + 9),
            (mc + mr, bl.kc + 9),
            (mc + mr + 1, bl.kc + 9),
            (2 * mc + 2, bl.kc + 9),
            (mc + 1, 70),
            (2 * mc + 2, 70),
        ]
        .iter()
        .enumerate()
        {
            let ta = [Transpose::No, Transpose::Yes][i % 2];
            let n = 5 * bl.nr + 3;
            let case = Case::taking_turn((m, n, k), (ta, Transpose::No), i, i % 3);
            let what = format!("{} {m} rows, MC {mc}", backend.name());
            one_thread(|| check(&e, &mut rng, &case, &what));
        }
    }
}

#[test]
fn thin_products_split_over_the_inner_dimension_match_the_reference() {
    // Few rows of C, a long k: where the core packs B's rows as one stream (Zen), and
    // for the one-row C, each thread of the pool takes a range of k into its own copy of
    // C (the first with beta), summed afterwards; elsewhere a band of C's columns (the
    // ranges themselves are tested in `gemm::api`'s unit tests on every host). Two and
    // three threads (ranges of unequal length), every transpose pair, beta 0 over a
    // NaN-filled C and beta != 0.
    if cfg!(target_arch = "wasm32") {
        return;
    }
    let mut rng = Rng::new(29);
    let e = trueno::engine().unwrap();
    for threads in [2, 3] {
        let pool = pool(threads);
        for (i, &(m, n, k)) in [
            (7, 300, 1100),
            (128, 33, 1501),
            (1, 2100, 1100),
            (31, 97, 2000),
        ]
        .iter()
        .enumerate()
        {
            for (j, (ta, tb)) in OPS.into_iter().enumerate() {
                let (alpha, beta) = [(-1.5, 0.0), (1.0, 1.0), (0.5, -1.5)][(i + j) % 3];
                let case = Case {
                    m,
                    n,
                    k,
                    ta,
                    tb,
                    alpha,
                    beta,
                    pad: (i + j) % 4,
                };
                pool.install(|| check(e, &mut rng, &case, "split k"));
            }
        }
    }
}

#[test]
fn few_row_products_reading_b_in_place_match_the_reference_on_every_isa() {
    // A few rows of A (at most eight micro-panels on a Zen core, one elsewhere) times a
    // row-major B past the unpacked path's reach and within half of L3 and 16 MiB read B
    // in place, KC cut to half of L1 (the one-block depth for a Zen core's 32-float
    // panels; the other shapes here pack B elsewhere), each panel's first tile asking
    // for its rows ahead (`Block::ahead_panels`): several k blocks (later ones add into
    // C), a ragged last B panel (packed), ragged rows (a
    // four-row edge tile, five rows, 47), rows of B padded off the page grid, and 12 and
    // 30 rows over a B of 2 KiB rows (its rows crowd L1's sets: in place up to three
    // panels where the first tiles would otherwise pack B). One thread and two (bands of
    // columns), beta 0 over NaN and beta != 0.
    let shapes = [
        (16, 700, 600, 0),
        (5, 300, 900, 3),
        (47, 520, 400, 1),
        (12, 512, 520, 0),
        (30, 512, 520, 0),
    ];
    check_row_major(71, &shapes, "few rows, B in place", false);
    if cfg!(target_arch = "wasm32") {
        return;
    }
    let (mut rng, pool, engines) = (Rng::new(73), pool(2), engines());
    for (i, &(m, n, k, pad)) in shapes.iter().enumerate() {
        let case = Case::taking_turn((m, n, k), (Transpose::No, Transpose::No), i + 1, pad);
        let what = format!("two threads, {m}x{n}x{k}");
        check_each_in(&pool, &engines, &mut rng, &case, &what);
    }
}

#[test]
fn a_few_rows_over_a_row_major_b_as_axpys_match_the_reference_on_every_isa() {
    // Fewer than four rows of C over a row-major B take `row_axpys` whatever B's size,
    // and up to eight where B's rows span more than L2 (last below, beside the packed
    // run on the same operands):
    // B's rows added four at a time and then one by one (k 1, 3, 4, 9, 301), C's rows
    // in whole vectors and a ragged last one (n one under, at and over a vector of
    // every ISA, 1001), A either way round, beta 0 over NaN and beta != 0, rows padded.
    // The packed path on the same operands too; one thread, and two (bands of columns,
    // or ranges of k where B is deep enough).
    let mut rng = Rng::new(79);
    let engines = engines();
    let pool = (!cfg!(target_arch = "wasm32")).then(|| pool(2));
    let mut turn = 0;
    for m in 1..=3 {
        for (n, k) in [(15, 9), (16, 4), (17, 301), (33, 1), (1001, 3), (7, 13)] {
            for ta in [Transpose::No, Transpose::Yes] {
                let case = Case::taking_turn((m, n, k), (ta, Transpose::No), turn, turn % 3);
                turn += 1;
                check_each(&engines, &mut rng, &case, "row axpys", false);
                if let Some(pool) = &pool {
                    let what = format!("two threads, {m}x{n}x{k} row axpys");
                    check_each_in(pool, &engines, &mut rng, &case, &what);
                }
            }
        }
    }
    // Deep enough for two threads to take a range of k each (into their own C).
    let past_l2 = trueno::gemm::CacheSizes::detect().l2 / (4 * 67) + 5;
    for m in 4..=9 {
        let case = Case::taking_turn((m, 67, past_l2), (Transpose::No, Transpose::No), m, 1);
        check_each(&engines, &mut rng, &case, "row axpys, B past L2", false);
        if let Some(pool) = &pool {
            let what = format!("two threads, {m}x67x{past_l2} row axpys");
            check_each_in(pool, &engines, &mut rng, &case, &what);
        }
    }
}

#[test]
fn products_cut_into_bands_of_rows_or_columns_match_the_reference() {
    // Products past the unpacked path's reach on two and three threads, each cut into
    // bands of C's columns or of its rows, whichever the rule picks on the ISA's tile (its
    // choices are unit-tested in `gemm::api`): a B past L2 as wide as A is tall (300 rows
    // by 1024 columns: columns on two threads on AVX2's and AVX-512's tiles, rows on
    // three), a B within L2, a taller A, ragged sizes. Every ISA, every transpose pair,
    // beta 0 over a NaN-filled C and beta != 0.
    if cfg!(target_arch = "wasm32") {
        return;
    }
    let past_l2 = trueno::gemm::CacheSizes::detect().l2 / 4096 + 40;
    let mut rng = Rng::new(67);
    let engines = engines();
    for threads in [2, 3] {
        let pool = pool(threads);
        let shapes = [
            (300, 1024, past_l2),
            (241, 240, 250),
            (130, 515, 260),
            (300, 190, 270),
        ];
        for (i, &(m, n, k)) in shapes.iter().enumerate() {
            let ops = OPS[(i + threads) % 4];
            let case = Case::taking_turn((m, n, k), ops, i + threads, i % 3);
            let what = format!("{threads} threads, {m}x{n}x{k}");
            check_each_in(&pool, &engines, &mut rng, &case, &what);
        }
    }
}

#[test]
fn ragged_last_row_panels_of_every_height_run_their_edge_tiles_and_match_the_reference() {
    // Whole row panels and a last one of 1 to 7 rows (where MR is 8: the four-row edge
    // tile up to four, the six-row one at five or six, the full tile at seven; where it
    // is 6, the four-row tile up to four), and four to seven rows alone: over a B the
    // unpacked grid reads in place (the grid's last band in the same edge tiles; each
    // case also forced through the packed loops) and over one past its reach (packed, or
    // read in place under one panel). Every ISA, the four transpose pairs in turn, rows
    // padded or not, beta 0 over NaN and beta != 0.
    let mut rng = Rng::new(79);
    let engines = engines();
    for (i, m) in (9..=15).chain([4, 5, 6, 7, 21, 22]).enumerate() {
        for (n, k) in [(40, 24), (300, 400)] {
            let case = Case::taking_turn((m, n, k), OPS[i % 4], i, i % 2);
            check_each(&engines, &mut rng, &case, &format!("{m}x{n}x{k}"), false);
        }
    }
}

#[test]
fn products_past_the_small_bar_with_b_within_reach_run_unpacked_on_every_isa() {
    // Past `SMALL_MACS` (48^3 multiply-adds), a row-major B within a third of L2 (192 KiB
    // at most) still skips packing: tiles across op(A) and B where they lie, the right
    // edge's tile read with masked (or copied) tail loads, the bottom edge's rows
    // repeated. A transposed B within half of L1 does too, transposed into a buffer
    // first. Ragged edges in both dimensions, A in both layouts, rows wider than the
    // matrix, beta 0 over NaN and beta != 0; k sized from the detected caches so that B
    // is within reach. Each is asserted unpacked (`gemm_profiled` reports no kernel time
    // for the unpacked path) on the ISAs with masked tail loads (on the others C's 131
    // columns are ragged, so packed), and the same m x n with B just past reach packed.
    let caches = trueno::gemm::CacheSizes::detect();
    let n = 131;
    let mut rng = Rng::new(61);
    let engines: Vec<_> = engines()
        .into_iter()
        .filter(|(b, _)| *b != trueno::backend::Backend::Gpu)
        .collect();
    for tb in [Transpose::No, Transpose::Yes] {
        let reach = match tb {
            // `B_REACH_MAX`: 192 KiB whatever L2.
            Transpose::No => (caches.l2 / 3).min(192 << 10),
            Transpose::Yes => caches.l1 / 2,
        };
        let (k_in, k_past) = (reach / 4 / n * 3 / 4, reach / 4 / n + 1);
        for (i, &(m, k, unpacked)) in [(61, k_in, true), (40, k_in, true), (61, k_past, false)]
            .iter()
            .enumerate()
        {
            assert!(
                m * n * k > 48 * 48 * 48,
                "{m}x{n}x{k} is past the small bar"
            );
            for ta in [Transpose::No, Transpose::Yes] {
                let case = Case::taking_turn((m, n, k), (ta, tb), i, 1 + i % 2);
                check_each(&engines, &mut rng, &case, &format!("{m}x{n}x{k}"), true);
                let a = match ta {
                    Transpose::No => trueno::Matrix::from_fn(m, k, |i, j| (i + j) as f32),
                    Transpose::Yes => trueno::Matrix::from_fn(k, m, |i, j| (i + j) as f32),
                };
                let b = match tb {
                    Transpose::No => trueno::Matrix::from_fn(k, n, |i, j| (i ^ j) as f32),
                    Transpose::Yes => trueno::Matrix::from_fn(n, k, |i, j| (i ^ j) as f32),
                };
                let (a, b) = (a.unwrap(), b.unwrap());
                for (backend, e) in &engines {
                    let mut c = trueno::Matrix::zeros(m, n).unwrap();
                    let cv = &mut c.view_mut();
                    let p =
                        one_thread(|| e.gemm_profiled(1.0, a.view(), ta, b.view(), tb, 0.0, cv));
                    let kernel = p.unwrap().kernel;
                    // ISAs without masked loads take the grid only for whole vectors.
                    use trueno::backend::Backend::{Avx, Avx2, Avx512};
                    let masked = matches!(backend, Avx | Avx2 | Avx512);
                    let want = unpacked && (masked || n % backend.lanes() == 0);
                    assert_eq!(
                        kernel == std::time::Duration::ZERO,
                        want,
                        "{} {m}x{n}x{k} {ta:?} {tb:?}: unpacked expected {want}",
                        backend.name()
                    );
                }
            }
        }
    }
}
