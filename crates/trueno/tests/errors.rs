//! Bad input returns the right `TruenoError` variant, naming what was wrong.

use trueno::{Backend, Engine, TruenoError, Vector};

#[test]
fn clamp_rejects_unordered_or_nan_bounds() {
    let e = trueno::engine().unwrap();
    let mut out = [0.0; 2];
    for (lo, hi) in [(2.0, 1.0), (f32::NAN, 1.0), (0.0, f32::NAN)] {
        let err = e.clamp_into(&[1.0, 2.0], lo, hi, &mut out).unwrap_err();
        assert!(
            matches!(err, TruenoError::InvalidArgument { op: "clamp", .. }),
            "{err}"
        );
    }
    assert!(e.clamp_into(&[1.0, 2.0], 1.0, 1.0, &mut out).is_ok());
}

#[test]
fn asking_for_an_unsupported_backend_is_an_error_not_a_fallback() {
    // Devices are never in the CPU engine; each target also names ISAs of the others.
    let foreign: &[Backend] = if cfg!(target_arch = "aarch64") {
        &[Backend::Sse2, Backend::Avx512, Backend::WasmSimd128]
    } else if cfg!(target_arch = "wasm32") {
        &[Backend::Sse2, Backend::Neon]
    } else {
        &[Backend::Neon, Backend::WasmSimd128]
    };
    // Cuda lives in trueno-gpu; Gpu needs the `gpu` feature (and then an adapter).
    let devices: &[Backend] = if cfg!(feature = "gpu") {
        &[Backend::Cuda]
    } else {
        &[Backend::Gpu, Backend::Cuda]
    };
    for &b in foreign.iter().chain(devices) {
        match Engine::new(b) {
            Err(TruenoError::UnsupportedBackend { backend, reason }) => {
                assert_eq!(backend, b);
                assert!(!reason.is_empty());
            }
            other => panic!("{b}: {other:?}"),
        }
    }
    for b in Backend::ALL
        .into_iter()
        .filter(|&b| b.is_cpu() || b == Backend::Gpu)
    {
        assert_eq!(Engine::new(b).is_ok(), b.is_available(), "{b}");
    }
}

#[test]
fn unknown_backend_names_are_rejected_with_the_accepted_list() {
    let err = "sse9".parse::<Backend>().unwrap_err();
    match &err {
        TruenoError::UnknownBackend { name, expected } => {
            assert_eq!(name, "sse9");
            assert!(expected.contains("avx512"));
        }
        e => panic!("{e:?}"),
    }
    assert!(err.to_string().contains("sse9"));
}

#[test]
fn vector_methods_report_length_mismatch() {
    let a = Vector::from_slice(&[1.0, 2.0, 3.0]);
    let b = Vector::from_slice(&[1.0, 2.0]);
    let err = a.add(&b).unwrap_err();
    assert_eq!(
        err,
        TruenoError::LengthMismatch {
            op: "add",
            what: "b",
            expected: 3,
            got: 2
        }
    );
    assert!(err.to_string().contains("add"));
    assert!(matches!(a.dot(&b), Err(TruenoError::LengthMismatch { .. })));
    // With matching inputs, a short output is what the error names.
    let e = trueno::engine().unwrap();
    let err = e.add_into(&a, &a, &mut [0.0; 2]).unwrap_err();
    assert_eq!(
        err,
        TruenoError::LengthMismatch {
            op: "add",
            what: "out",
            expected: 3,
            got: 2
        }
    );
    assert!(matches!(
        Vector::zeros(0).max(),
        Err(TruenoError::EmptyInput { op: "max" })
    ));
}

#[test]
fn jidoka_guard_turns_non_finite_outputs_into_errors() {
    let e = Engine::auto().with_guard(trueno::JidokaGuard::reject_non_finite());
    let mut out = [0.0; 3];
    assert!(matches!(
        e.ln_into(&[1.0, 0.0, 2.0], &mut out),
        Err(TruenoError::NonFinite {
            op: "ln",
            index: 1,
            ..
        })
    ));
    assert!(e.ln_into(&[1.0, 3.0, 2.0], &mut out).is_ok());
    assert!(matches!(
        e.sum(&[f32::MAX, f32::MAX]),
        Err(TruenoError::NonFinite { op: "sum", .. })
    ));
    let nan_only = Engine::auto().with_guard(trueno::JidokaGuard::reject_nan());
    assert!(nan_only.exp_into(&[100.0, 0.0, 1.0], &mut out).is_ok());
    assert!(nan_only.sqrt_into(&[1.0, -1.0, 1.0], &mut out).is_err());
}
