//! Algebraic properties, checked with proptest on every backend the host supports.

mod common;

use common::engines;
use proptest::prelude::*;

fn vec_pair() -> impl Strategy<Value = (Vec<f32>, Vec<f32>)> {
    (0usize..300).prop_flat_map(|n| {
        (
            prop::collection::vec(-1e3f32..1e3, n),
            prop::collection::vec(-1e3f32..1e3, n),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn add_and_mul_commute((a, b) in vec_pair()) {
        for (backend, e) in engines() {
            let (mut ab, mut ba) = (vec![0.0; a.len()], vec![0.0; a.len()]);
            e.add_into(&a, &b, &mut ab).unwrap();
            e.add_into(&b, &a, &mut ba).unwrap();
            prop_assert_eq!(&ab, &ba, "add on {}", backend);
            e.mul_into(&a, &b, &mut ab).unwrap();
            e.mul_into(&b, &a, &mut ba).unwrap();
            prop_assert_eq!(&ab, &ba, "mul on {}", backend);
        }
    }

    #[test]
    fn dot_is_symmetric_and_dot_with_self_is_squared_norm((a, b) in vec_pair()) {
        for (backend, e) in engines() {
            prop_assert_eq!(e.dot(&a, &b).unwrap(), e.dot(&b, &a).unwrap(), "on {}", backend);
            let n2 = e.norm_l2(&a).unwrap();
            let d = e.dot(&a, &a).unwrap();
            prop_assert!((d - n2 * n2).abs() <= 1e-5 * d.max(1e-30), "on {}: {} vs {}", backend, d, n2 * n2);
        }
    }

    #[test]
    fn softmax_is_a_distribution(x in prop::collection::vec(-80f32..80.0, 1..500)) {
        for (backend, e) in engines() {
            let mut p = vec![0.0; x.len()];
            e.softmax_into(&x, &mut p).unwrap();
            let total: f64 = p.iter().map(|&v| v as f64).sum();
            prop_assert!((total - 1.0).abs() <= 1e-5, "on {}: sum {}", backend, total);
            prop_assert!(p.iter().all(|&v| (0.0..=1.0).contains(&v)), "on {}", backend);
            // argmax is preserved.
            prop_assert_eq!(e.argmax(&p).unwrap(), e.argmax(&x).unwrap(), "on {}", backend);
        }
    }

    #[test]
    fn norms_obey_the_triangle_inequality((a, b) in vec_pair()) {
        for (backend, e) in engines() {
            let mut s = vec![0.0; a.len()];
            e.add_into(&a, &b, &mut s).unwrap();
            for (name, norm) in [
                ("l1", trueno::Engine::norm_l1 as fn(&trueno::Engine, &[f32]) -> trueno::Result<f32>),
                ("l2", trueno::Engine::norm_l2),
                ("linf", trueno::Engine::norm_linf),
            ] {
                let (ns, na, nb) = (norm(&e, &s).unwrap(), norm(&e, &a).unwrap(), norm(&e, &b).unwrap());
                prop_assert!(ns <= (na + nb) * (1.0 + 1e-5), "{} on {}: {} > {} + {}", name, backend, ns, na, nb);
            }
        }
    }

    #[test]
    fn activations_respect_their_ranges(x in prop::collection::vec(-100f32..100.0, 0..300)) {
        for (backend, e) in engines() {
            let mut y = vec![0.0; x.len()];
            e.sigmoid_into(&x, &mut y).unwrap();
            prop_assert!(y.iter().all(|v| (0.0..=1.0).contains(v)), "sigmoid on {}", backend);
            e.tanh_into(&x, &mut y).unwrap();
            prop_assert!(y.iter().all(|v| (-1.0..=1.0).contains(v)), "tanh on {}", backend);
            e.relu_into(&x, &mut y).unwrap();
            let mut z = y.clone();
            e.relu_inplace(&mut z).unwrap();
            prop_assert_eq!(&y, &z, "relu idempotent on {}", backend);
            e.clamp_into(&x, -2.0, 3.0, &mut y).unwrap();
            prop_assert!(y.iter().all(|v| (-2.0..=3.0).contains(v)), "clamp on {}", backend);
            e.softplus_into(&x, &mut y).unwrap();
            prop_assert!(y.iter().zip(&x).all(|(s, &v)| *s >= v.max(0.0) - 1e-6 * v.abs()), "softplus >= relu on {}", backend);
        }
    }

    #[test]
    fn exp_and_ln_are_inverse(x in prop::collection::vec(-80f32..80.0, 0..300)) {
        for (backend, e) in engines() {
            let mut y = vec![0.0; x.len()];
            e.exp_into(&x, &mut y).unwrap();
            e.ln_inplace(&mut y).unwrap();
            for (a, b) in x.iter().zip(&y) {
                prop_assert!((a - b).abs() <= 3e-7 * a.abs().max(1.0), "on {}: ln(exp({})) = {}", backend, a, b);
            }
        }
    }
}
