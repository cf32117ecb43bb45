//! The PTX analyzer end to end: every trueno kernel analyzes clean and close to ptxas's
//! register count; every detector fires on its planted-bug fixture and on no clean kernel;
//! nvcc and Triton PTX parses and analyzes; strict mode reports what non-strict allows.

use std::path::{Path, PathBuf};

mod common;
#[path = "analyze/exceptions.rs"]
mod exceptions;

use trueno_gpu::analyze::ptxas::parse_verbose;
use trueno_gpu::analyze::{Config, DETECTORS, Severity, Space, analyze};
use trueno_gpu::kernels::all_kernels;
use trueno_gpu::ptx::Target;

use exceptions::{INTENDED, Stray};

fn fixtures(dir: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/ptx")
        .join(dir);
    let mut v: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "ptx"))
        .collect();
    v.sort();
    v
}

fn config(arch: &str) -> Config {
    Config {
        arch: trueno_gpu::analyze::Arch::parse(arch).unwrap(),
        ..Config::default()
    }
}

#[test]
fn every_trueno_kernel_analyzes_without_findings_beyond_the_intended() {
    for k in all_kernels() {
        for target in common::checked_targets(&*k) {
            let ptx = k.emit_ptx(target).unwrap();
            let a = analyze(&ptx, &config(target.name())).unwrap();
            assert_eq!(a.kernels.len(), 1);
            let r = &a.kernels[0];
            assert!(
                r.unknown_opcodes.is_empty(),
                "{}: {:?}",
                r.name,
                r.unknown_opcodes
            );
            for f in &r.findings {
                assert!(
                    INTENDED.iter().any(|&(pre, post, d)| {
                        r.name.starts_with(pre) && r.name.ends_with(post) && d == f.detector
                    }),
                    "{} {}: {f:?}",
                    r.name,
                    target.name()
                );
                assert!(f.severity < Severity::Critical);
            }
        }
    }
}

/// Our register estimate (most 32-bit values live at once, plus a fixed overhead) against
/// `ptxas -v`, for every kernel on sm_80 and sm_90. The stated margin: within 12 registers
/// or 25%, whichever is larger. ptxas rematerialises, schedules and reserves registers a
/// PTX-level liveness cannot see; measured on 2026-11-22 (CUDA 13.5 ptxas, the PyPI wheel) the largest gap
/// was 11 registers.
/// Kernels allowed to stray one way: [`exceptions::one_sided`].
#[test]
fn register_estimates_are_within_the_stated_margin_of_ptxas() {
    let Some(ptxas) = common::ptxas() else {
        assert!(
            !common::required(),
            "TRUENO_REQUIRE_PTXAS is set but ptxas was not found"
        );
        eprintln!("SKIPPED: ptxas not found; run scripts/setup-ptxas.sh .venv-cuda or set PTXAS");
        return;
    };
    let mut report = Vec::new();
    let mut worst = 0i64;
    let (names, jobs) = common::every_kernel_ptx();
    let logs = common::assemble_each(&ptxas, &jobs);
    for ((name, (ptx, target)), log) in names.iter().zip(&jobs).zip(logs) {
        let target = *target;
        let log = log.unwrap_or_else(|log| panic!("{name}: {log}"));
        let theirs = parse_verbose(&log)[0].registers as i64;
        let a = analyze(ptx, &config(target.name())).unwrap();
        let ours = a.kernels[0].registers.estimated as i64;
        // Warpgroups that trade registers (`setmaxnreg`): ptxas reports the cap at
        // entry, not a need; what must hold is that the most values live at once fit
        // the largest limit a warpgroup raises itself to.
        if let Some(raised) = ptx
            .lines()
            .filter_map(|l| l.trim().strip_prefix("setmaxnreg.inc.sync.aligned.u32 "))
            .filter_map(|v| v.trim_end_matches(';').parse::<i64>().ok())
            .max()
        {
            report.push(format!(
                "{name:<30} {} ours {ours:>3} setmaxnreg.inc {raised}",
                target.name()
            ));
            assert!(ours + 12 <= raised, "{}", report.join("\n"));
            continue;
        }
        let gap = (ours - theirs).abs();
        let margin = 12.max(theirs / 4);
        if let Some((stray, why)) = exceptions::one_sided(name) {
            // Unbounded the one way, within the margin the other.
            report.push(format!(
                "{name:<30} {} ours {ours:>3} ptxas {theirs:>3} ({why})",
                target.name()
            ));
            let held = match stray {
                Stray::EstimateAbove => ours + margin >= theirs,
                Stray::PtxasAbove => ours <= theirs + margin,
            };
            assert!(held, "{}", report.join("\n"));
            continue;
        }
        report.push(format!(
            "{name:<30} {} ours {ours:>3} ptxas {theirs:>3} gap {gap:>2} margin {margin}",
            target.name()
        ));
        assert!(gap <= margin, "{}", report.join("\n"));
        worst = worst.max(gap);
    }
    eprintln!("{}\nlargest gap {worst}", report.join("\n"));
}

#[test]
fn each_detector_fires_on_its_planted_bug_and_only_there() {
    let files = fixtures("bugs");
    for (id, _) in DETECTORS {
        let file = files
            .iter()
            .find(|p| p.file_stem().is_some_and(|s| s == id))
            .unwrap_or_else(|| panic!("no fixture for detector {id}"));
        let text = std::fs::read_to_string(file).unwrap();
        let a = analyze(&text, &Config::default()).unwrap();
        let fired: Vec<&str> = a
            .kernels
            .iter()
            .flat_map(|k| &k.findings)
            .map(|f| f.detector)
            .collect();
        assert_eq!(fired, vec![id], "{}", file.display());
    }
    assert_eq!(files.len(), DETECTORS.len(), "a fixture without a detector");
}

/// Named kernels in the nvcc fixture (kernels.cu) and in each Triton file.
#[test]
fn nvcc_and_triton_ptx_parse_and_analyze() {
    for file in fixtures("nvcc") {
        let text = std::fs::read_to_string(&file).unwrap();
        let a = analyze(&text, &Config::default())
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let names: Vec<&str> = a.kernels.iter().map(|k| k.name.as_str()).collect();
        for want in [
            "vec_add",
            "transpose_tiled",
            "block_sum",
            "softmax_warp",
            "sgemm_tiled",
            "poly_local",
            "wmma_16x16",
        ] {
            assert!(names.contains(&want), "{}: {names:?}", file.display());
        }
        for k in &a.kernels {
            assert!(
                k.unknown_opcodes.is_empty(),
                "{} {}: {:?}",
                file.display(),
                k.name,
                k.unknown_opcodes
            );
            assert_ne!(
                k.worst(),
                Some(Severity::Critical),
                "{} {}: {:?}",
                file.display(),
                k.name,
                k.findings
            );
        }
        // What the analysis should see in kernels whose behaviour is known.
        let get = |n: &str| a.kernels.iter().find(|k| k.name == n).unwrap();
        let vec_add = get("vec_add");
        assert!(vec_add.max_loop_depth >= 1);
        let loads: u32 = vec_add
            .memory_totals
            .iter()
            .filter(|(s, _)| matches!(s, Space::Global | Space::Generic))
            .map(|(_, t)| t.loads)
            .sum();
        assert!(
            loads >= 2,
            "{}: {:?}",
            file.display(),
            vec_add.memory_totals
        );
        // The tensor-core op is in the entry, or (with -G) in a device function it calls.
        assert!(
            a.kernels
                .iter()
                .any(|k| k.mix.iter().any(|(c, _)| *c == "tensor") && k.intensity.flops > 0.0),
            "{}",
            file.display()
        );
        let poly = get("poly_local");
        assert!(
            poly.findings.iter().any(|f| f.detector == "local-memory")
                || file.to_string_lossy().contains("debug")
        );
    }
    for file in fixtures("triton") {
        let text = std::fs::read_to_string(&file).unwrap();
        let a = analyze(&text, &Config::default())
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert_eq!(a.kernels.len(), 1, "{}", file.display());
        let k = &a.kernels[0];
        assert!(
            k.unknown_opcodes.is_empty(),
            "{}: {:?}",
            file.display(),
            k.unknown_opcodes
        );
        assert_ne!(
            k.worst(),
            Some(Severity::Critical),
            "{}: {:?}",
            file.display(),
            k.findings
        );
        assert!(k.instructions > 20);
    }
}

/// `ptx` analyzes clean without `strict`, and with it reports a finding `expected` accepts.
fn assert_allowed_unless_strict(
    ptx: &str,
    expected: impl Fn(&trueno_gpu::analyze::Finding) -> bool,
) {
    let lax = analyze(ptx, &Config::default()).unwrap();
    assert!(
        lax.kernels[0].findings.is_empty(),
        "{:?}",
        lax.kernels[0].findings
    );
    let strict = Config {
        strict: true,
        ..Config::default()
    };
    let found = analyze(ptx, &strict).unwrap().kernels[0].findings.clone();
    assert!(found.iter().any(expected), "{found:?}");
}

/// Complementary guarded writes (`@p mov r, a; @!p mov r, b`) define `r` on every path;
/// non-strict trusts them, strict does not.
#[test]
fn strict_mode_reports_what_non_strict_allows() {
    let ptx = ".version 8.0\n.target sm_90\n.address_size 64\n\
        .visible .entry k(.param .u64 o) {\n\
          .reg .pred %p<1>; .reg .b32 %r<2>; .reg .b64 %rd<3>;\n\
          ld.param.u64 %rd0, [o];\n\
          mov.u32 %r0, %tid.x;\n\
          setp.lt.u32 %p0, %r0, 16;\n\
          @%p0 mov.u32 %r1, 1;\n\
          @!%p0 mov.u32 %r1, 2;\n\
          mul.wide.u32 %rd1, %r0, 4;\n\
          add.s64 %rd2, %rd0, %rd1;\n\
          st.global.u32 [%rd2], %r1;\n\
          ret;\n\
        }";
    assert_allowed_unless_strict(ptx, |f| f.detector == "undefined-read" && f.pos.line == 13);
}

/// A shared exchange inside one warp, ordered by `bar.warp.sync`: allowed unless strict
/// (a block barrier is what orders threads of different warps).
#[test]
fn warp_synchronous_exchange_is_allowed_unless_strict() {
    let ptx = ".version 8.0\n.target sm_90\n.address_size 64\n\
        .visible .entry k(.param .u64 o) {\n\
          .reg .b32 %r<4>; .reg .f32 %f<2>; .reg .b64 %rd<3>;\n\
          .shared .align 4 .b8 s[132];\n\
          ld.param.u64 %rd0, [o];\n\
          mov.u32 %r0, %tid.x;\n\
          mov.u32 %r1, s;\n\
          shl.b32 %r2, %r0, 2;\n\
          add.s32 %r3, %r1, %r2;\n\
          mov.f32 %f0, 0f3F800000;\n\
          st.shared.f32 [%r3], %f0;\n\
          bar.warp.sync -1;\n\
          ld.shared.f32 %f1, [%r3+4];\n\
          mul.wide.u32 %rd1, %r0, 4;\n\
          add.s64 %rd2, %rd0, %rd1;\n\
          st.global.f32 [%rd2], %f1;\n\
          ret;\n\
        }";
    assert_allowed_unless_strict(ptx, |f| f.detector == "missing-barrier");
}

/// Well-formed but odd input: no functions, a prototype only, an empty body, a label at
/// the very end, unknown opcodes kept and reported.
#[test]
fn edge_inputs() {
    assert!(analyze("", &Config::default()).unwrap().kernels.is_empty());
    let a = analyze(".extern .func f(.param .b32 x);", &Config::default()).unwrap();
    assert!(a.kernels.is_empty());
    let a = analyze(".entry k() { }", &Config::default()).unwrap();
    assert_eq!(a.kernels[0].instructions, 0);
    let a = analyze(
        ".entry k() { .reg .b32 %r<1>; frobnicate.b32 %r0, 1; bra $END; $END: }",
        &Config::default(),
    )
    .unwrap();
    assert_eq!(a.kernels[0].unknown_opcodes[0].0, "frobnicate");
    // Launch bounds at the edge of u32 (the occupancy target multiplies them).
    let a = analyze(
        ".entry k() .maxntid 4294967295, 2, 1 .minnctapersm 4294967295 { ret; }",
        &Config::default(),
    )
    .unwrap();
    assert_eq!(a.kernels[0].occupancy.blocks_per_sm, 0);
    assert!(
        a.kernels[0]
            .findings
            .iter()
            .all(|f| f.detector != "missing-label")
    );
}

mod fuzz {
    //! The parser and every analysis on mutated valid files and on token soup: any input
    //! gives a report or a parse error, never a panic. Bounded (256 cases per property) so
    //! CI spends seconds here; `PROPTEST_CASES=100000` runs longer.

    use super::*;
    use proptest::prelude::*;

    fn corpus() -> Vec<String> {
        let mut texts: Vec<String> = ["bugs", "triton"]
            .iter()
            .flat_map(|d| fixtures(d))
            .map(|p| std::fs::read_to_string(p).unwrap())
            .collect();
        for k in all_kernels().iter().take(6) {
            texts.push(k.emit_ptx(Target::Sm90).unwrap());
        }
        texts
    }

    const ALPHABET: &[u8] = b"{}[]();,.%@!|<>+-=0123456789abcdfxyz$_ \n\t\"/*";

    #[derive(Clone, Debug)]
    enum Edit {
        Delete(usize, usize),
        Insert(usize, Vec<u8>),
        Duplicate(usize, usize, usize),
        Truncate(usize),
        SwapLines(usize, usize),
    }

    fn edit() -> impl Strategy<Value = Edit> {
        prop_oneof![
            (any::<usize>(), 0usize..64).prop_map(|(a, n)| Edit::Delete(a, n)),
            (
                any::<usize>(),
                prop::collection::vec(prop::sample::select(ALPHABET), 1..16)
            )
                .prop_map(|(a, b)| Edit::Insert(a, b)),
            (any::<usize>(), 0usize..200, any::<usize>())
                .prop_map(|(a, n, to)| Edit::Duplicate(a, n, to)),
            any::<usize>().prop_map(Edit::Truncate),
            (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::SwapLines(a, b)),
        ]
    }

    fn apply(text: &str, edits: &[Edit]) -> String {
        let mut b = text.as_bytes().to_vec();
        for e in edits {
            let len = b.len().max(1);
            match e {
                Edit::Delete(a, n) => {
                    let a = a % len;
                    let end = (a + n).min(b.len());
                    if a < end {
                        b.drain(a..end);
                    }
                }
                Edit::Insert(a, bytes) => {
                    let a = (a % len).min(b.len());
                    b.splice(a..a, bytes.iter().copied());
                }
                Edit::Duplicate(a, n, to) => {
                    let a = a % len;
                    let end = (a + n).min(b.len());
                    let piece: Vec<u8> = b.get(a..end).unwrap_or(&[]).to_vec();
                    let to = (to % len).min(b.len());
                    b.splice(to..to, piece);
                }
                Edit::Truncate(a) => b.truncate(a % len),
                Edit::SwapLines(x, y) => {
                    let s = String::from_utf8_lossy(&b).to_string();
                    let mut lines: Vec<&str> = s.lines().collect();
                    if !lines.is_empty() {
                        let (x, y) = (x % lines.len(), y % lines.len());
                        lines.swap(x, y);
                    }
                    b = lines.join("\n").into_bytes();
                }
            }
        }
        String::from_utf8_lossy(&b).to_string()
    }

    proptest! {
        #[test]
        fn mutated_files_never_panic(
            pick in any::<usize>(),
            edits in prop::collection::vec(edit(), 1..5),
            strict in any::<bool>(),
        ) {
            let corpus = corpus();
            let text = apply(&corpus[pick % corpus.len()], &edits);
            let _ = analyze(&text, &Config { strict, ..Config::default() });
        }

        #[test]
        fn token_soup_never_panics(
            bytes in prop::collection::vec(prop::sample::select(ALPHABET), 0..400),
        ) {
            let text = format!(".entry k() {{ .reg .b32 %r<4>; .reg .pred %p<2>; {} }}",
                String::from_utf8_lossy(&bytes));
            let _ = analyze(&text, &Config::default());
            let _ = analyze(&String::from_utf8_lossy(&bytes), &Config::default());
        }
    }
}

/// Shifts and masks at the edges of i64: the lane-stride arithmetic must not overflow.
#[test]
fn extreme_constants_do_not_overflow() {
    let ptx = ".entry k(.param .u64 o) {\n\
        .reg .b64 %rd<8>; .reg .b32 %r<2>; .reg .f32 %f<1>;\n\
        mov.u32 %r0, %tid.x;\n\
        cvt.u64.u32 %rd0, %r0;\n\
        shl.b64 %rd1, %rd0, 62;\n\
        mul.lo.s64 %rd2, %rd1, 9223372036854775807;\n\
        shr.u64 %rd3, %rd2, 62;\n\
        and.b64 %rd4, %rd0, 9223372036854775807;\n\
        and.b64 %rd5, %rd0, -1;\n\
        add.s64 %rd6, %rd2, %rd1;\n\
        div.u64 %rd7, %rd2, 9223372036854775807;\n\
        ld.global.f32 %f0, [%rd6];\n\
        st.shared.f32 [%rd2], %f0;\n\
        st.global.f32 [%rd7+-9223372036854775807], %f0;\n\
        ret; }";
    for strict in [false, true] {
        analyze(
            ptx,
            &Config {
                strict,
                ..Config::default()
            },
        )
        .unwrap();
    }
}

/// A 2-D block addressed `row * pitch + col`: with `.reqntid 32, 8` a warp is one row, so
/// the access is coalesced; without it `%tid.y` could change inside a warp.
#[test]
fn required_block_width_makes_rows_warp_uniform() {
    let kernel = |directive: &str| {
        format!(
            ".version 8.0\n.target sm_90\n.address_size 64\n\
            .visible .entry k(.param .u64 o) {directive} {{\n\
              .reg .b32 %r<4>; .reg .b64 %rd<3>; .reg .f32 %f<1>;\n\
              ld.param.u64 %rd0, [o];\n\
              mov.u32 %r0, %tid.x;\n\
              mov.u32 %r1, %tid.y;\n\
              shl.b32 %r2, %r1, 5;\n\
              add.s32 %r3, %r2, %r0;\n\
              mul.wide.u32 %rd1, %r3, 4;\n\
              add.s64 %rd2, %rd0, %rd1;\n\
              ld.global.f32 %f0, [%rd2];\n\
              st.global.f32 [%rd2], %f0;\n\
              ret;\n\
            }}"
        )
    };
    let pattern = |text: String| {
        let a = analyze(&text, &Config::default()).unwrap();
        a.kernels[0]
            .memory
            .iter()
            .find(|m| m.space == Space::Global)
            .unwrap()
            .pattern
    };
    use trueno_gpu::analyze::Pattern;
    assert_eq!(pattern(kernel(".reqntid 32, 8, 1")), Pattern::Coalesced);
    assert_eq!(pattern(kernel(".maxntid 256, 1, 1")), Pattern::Irregular);
    assert_eq!(pattern(kernel(".reqntid 16, 16, 1")), Pattern::Irregular);
}

/// A `cp.async` copy lands when its thread waits for it, not when it is issued: waiting
/// and then taking the barrier orders it before other threads' loads; a barrier before
/// the wait does not (the data may land after it).
#[test]
fn cp_async_stores_land_at_the_wait_not_the_issue() {
    let kernel = |order: &str| {
        format!(
            ".version 8.0\n.target sm_80\n.address_size 64\n\
            .visible .entry k(.param .u64 g, .param .u64 o) {{\n\
              .reg .b32 %r<5>; .reg .f32 %f<1>; .reg .b64 %rd<5>;\n\
              .shared .align 16 .b8 s[4096];\n\
              ld.param.u64 %rd0, [g];\n\
              ld.param.u64 %rd3, [o];\n\
              mov.u32 %r0, %tid.x;\n\
              mov.u32 %r1, s;\n\
              shl.b32 %r2, %r0, 4;\n\
              add.s32 %r3, %r1, %r2;\n\
              mul.wide.u32 %rd1, %r0, 16;\n\
              add.s64 %rd2, %rd0, %rd1;\n\
              cp.async.cg.shared.global [%r3], [%rd2], 16;\n\
              cp.async.commit_group;\n\
              {order}\n\
              ld.shared.f32 %f0, [%r3+16];\n\
              add.s64 %rd4, %rd3, %rd1;\n\
              st.global.f32 [%rd4], %f0;\n\
              ret;\n\
            }}"
        )
    };
    let missing = |ptx: &str| {
        analyze(ptx, &Config::default()).unwrap().kernels[0]
            .findings
            .iter()
            .any(|f| f.detector == "missing-barrier")
    };
    assert!(!missing(&kernel("cp.async.wait_group 0;\nbar.sync 0;")));
    assert!(missing(&kernel("bar.sync 0;\ncp.async.wait_group 0;")));
    assert!(missing(&kernel("cp.async.wait_all;")));
    assert!(!missing(&kernel("cp.async.wait_all;\nbar.sync 0;")));
}
