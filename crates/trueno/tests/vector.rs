//! `Vector<f32>`: every method agrees with the `Engine` slice call it wraps, and the
//! allocating, in-place and error paths behave.

use trueno::{Vector, engine};

fn v(n: usize, seed: f32) -> Vector<f32> {
    (0..n)
        .map(|i| (i as f32 * 0.37 + seed).sin() * 3.0)
        .collect()
}

#[test]
fn unary_methods_match_the_engine_and_their_in_place_forms() {
    let x = v(133, 0.1);
    type Pair = (
        fn(&Vector<f32>) -> trueno::Result<Vector<f32>>,
        fn(&mut Vector<f32>) -> trueno::Result<()>,
    );
    type Slice = fn(&[f32], &mut [f32]) -> trueno::Result<()>;
    let cases: Vec<(&str, Pair, Slice)> = vec![
        ("exp", (Vector::exp, Vector::exp_inplace), |x, o| {
            engine()?.exp_into(x, o)
        }),
        ("tanh", (Vector::tanh, Vector::tanh_inplace), |x, o| {
            engine()?.tanh_into(x, o)
        }),
        ("gelu", (Vector::gelu, Vector::gelu_inplace), |x, o| {
            engine()?.gelu_into(x, o)
        }),
        ("relu", (Vector::relu, Vector::relu_inplace), |x, o| {
            engine()?.relu_into(x, o)
        }),
        (
            "softmax",
            (Vector::softmax, Vector::softmax_inplace),
            |x, o| engine()?.softmax_into(x, o),
        ),
        (
            "normalize",
            (Vector::normalize, Vector::normalize_inplace),
            |x, o| engine()?.normalize_into(x, o),
        ),
    ];
    for (name, (alloc, inplace), slice) in cases {
        let mut want = vec![f32::NAN; x.len()];
        slice(&x, &mut want).unwrap();
        assert_eq!(alloc(&x).unwrap().as_slice(), &want[..], "{name}");
        let mut y = x.clone();
        inplace(&mut y).unwrap();
        assert_eq!(y.as_slice(), &want[..], "{name} in place");
    }
    assert_eq!(
        x.scale(2.0).unwrap().as_slice(),
        x.iter().map(|v| v * 2.0).collect::<Vec<_>>()
    );
}

#[test]
fn binary_and_scalar_methods() {
    let (a, b) = (v(77, 0.3), v(77, 1.7));
    let sum: Vec<f32> = a.iter().zip(b.iter()).map(|(x, y)| x + y).collect();
    assert_eq!(a.add(&b).unwrap().as_slice(), &sum[..]);
    let mut c = a.clone();
    c.add_inplace(&b).unwrap();
    assert_eq!(c.as_slice(), &sum[..]);
    let mut y = b.clone();
    y.axpy(2.0, &a).unwrap();
    assert!(
        y.iter()
            .zip(a.iter().zip(b.iter()))
            .all(|(r, (x, z))| (r - (2.0 * x + z)).abs() < 1e-5)
    );
    assert_eq!(a.dot(&b).unwrap(), engine().unwrap().dot(&a, &b).unwrap());
    assert_eq!(a.argmax().unwrap(), engine().unwrap().argmax(&a).unwrap());
    assert!((a.cosine(&a).unwrap() - 1.0).abs() < 1e-6);
    assert_eq!(a.euclidean(&a).unwrap(), 0.0);
    let m = a.maximum(&b).unwrap();
    assert!(
        m.iter()
            .zip(a.iter().zip(b.iter()))
            .all(|(r, (x, z))| *r == x.max(*z))
    );
}

#[test]
fn construction_and_access() {
    let mut x = Vector::from_vec(vec![1.0, 2.0, 3.0]);
    x[1] = 5.0;
    assert_eq!(x.len(), 3);
    assert_eq!(x.as_slice(), &[1.0, 5.0, 3.0]);
    assert_eq!(Vector::zeros(2).into_vec(), vec![0.0, 0.0]);
    assert_eq!(Vector::from(vec![1.0f32]).sum().unwrap(), 1.0);
    assert!(Vector::zeros(0).mean().is_err());
    assert!(Vector::zeros(0).sum().unwrap() == 0.0);
}
