//! [`Vector<f32>`]: an owned buffer with allocating, `_into` and in-place forms of every
//! operation, run on the process-wide [`crate::engine()`].

use std::ops::{Deref, DerefMut};

use crate::engine::engine;
use crate::error::Result;

/// An owned, contiguous vector of `T` (operations are implemented for `f32`).
///
/// ```
/// use trueno::Vector;
/// let a = Vector::from_slice(&[1.0, 2.0, 3.0]);
/// let b = Vector::from_slice(&[4.0, 5.0, 6.0]);
/// assert_eq!(a.add(&b)?.as_slice(), &[5.0, 7.0, 9.0]);
/// assert_eq!(a.dot(&b)?, 32.0);
/// let p = a.softmax()?;
/// assert!((p.sum()? - 1.0).abs() < 1e-6);
/// # Ok::<(), trueno::TruenoError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Vector<T = f32> {
    data: Vec<T>,
}

impl<T: Copy> Vector<T> {
    /// Copies `s` into a new vector.
    pub fn from_slice(s: &[T]) -> Self {
        Vector { data: s.to_vec() }
    }

    /// Takes ownership of `v` (no copy).
    pub fn from_vec(v: Vec<T>) -> Self {
        Vector { data: v }
    }

    /// The elements.
    pub fn as_slice(&self) -> &[T] {
        &self.data
    }

    /// The elements, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.data
    }

    /// Gives back the buffer.
    pub fn into_vec(self) -> Vec<T> {
        self.data
    }
}

impl Vector<f32> {
    /// `n` zeros.
    pub fn zeros(n: usize) -> Self {
        Vector { data: vec![0.0; n] }
    }
}

impl<T> Deref for Vector<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.data
    }
}

impl<T> DerefMut for Vector<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.data
    }
}

impl<T> From<Vec<T>> for Vector<T> {
    fn from(data: Vec<T>) -> Self {
        Vector { data }
    }
}

impl<T> FromIterator<T> for Vector<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Vector {
            data: iter.into_iter().collect(),
        }
    }
}

/// Allocating and in-place methods for one-input ops, forwarding to `Engine`.
macro_rules! vector_unary {
    ($($name:ident, $inplace:ident => $into:ident, $einplace:ident ($($p:ident: $t:ty),*);)*) => {
        impl Vector<f32> {
            $(
                #[doc = concat!("New vector; see [`crate::Engine::", stringify!($into), "`].")]
                pub fn $name(&self $(, $p: $t)*) -> Result<Vector<f32>> {
                    let mut out = vec![0.0; self.len()];
                    engine()?.$into(&self.data, $($p,)* &mut out)?;
                    Ok(Vector { data: out })
                }
                #[doc = concat!("In place; see [`crate::Engine::", stringify!($into), "`].")]
                pub fn $inplace(&mut self $(, $p: $t)*) -> Result<()> {
                    engine()?.$einplace(&mut self.data $(, $p)*)
                }
            )*
        }
    };
}

vector_unary! {
    abs, abs_inplace => abs_into, abs_inplace();
    neg, neg_inplace => neg_into, neg_inplace();
    sqrt, sqrt_inplace => sqrt_into, sqrt_inplace();
    recip, recip_inplace => recip_into, recip_inplace();
    scale, scale_inplace => scale_into, scale_inplace(alpha: f32);
    add_scalar, add_scalar_inplace => add_scalar_into, add_scalar_inplace(c: f32);
    clamp, clamp_inplace => clamp_into, clamp_inplace(lo: f32, hi: f32);
    exp, exp_inplace => exp_into, exp_inplace();
    ln, ln_inplace => ln_into, ln_inplace();
    relu, relu_inplace => relu_into, relu_inplace();
    leaky_relu, leaky_relu_inplace => leaky_relu_into, leaky_relu_inplace(alpha: f32);
    elu, elu_inplace => elu_into, elu_inplace(alpha: f32);
    sigmoid, sigmoid_inplace => sigmoid_into, sigmoid_inplace();
    tanh, tanh_inplace => tanh_into, tanh_inplace();
    gelu, gelu_inplace => gelu_into, gelu_inplace();
    gelu_erf, gelu_erf_inplace => gelu_erf_into, gelu_erf_inplace();
    silu, silu_inplace => silu_into, silu_inplace();
    softplus, softplus_inplace => softplus_into, softplus_inplace();
    hardswish, hardswish_inplace => hardswish_into, hardswish_inplace();
    mish, mish_inplace => mish_into, mish_inplace();
    softmax, softmax_inplace => softmax_into, softmax_inplace();
    log_softmax, log_softmax_inplace => log_softmax_into, log_softmax_inplace();
    normalize, normalize_inplace => normalize_into, normalize_inplace();
}

/// Allocating and in-place methods for two-input ops.
macro_rules! vector_binary {
    ($($name:ident, $inplace:ident => $into:ident, $einplace:ident ($($p:ident: $t:ty),*);)*) => {
        impl Vector<f32> {
            $(
                #[doc = concat!("New vector; see [`crate::Engine::", stringify!($into), "`].")]
                pub fn $name(&self, other: &Vector<f32> $(, $p: $t)*) -> Result<Vector<f32>> {
                    let mut out = vec![0.0; self.len()];
                    engine()?.$into(&self.data, &other.data, $($p,)* &mut out)?;
                    Ok(Vector { data: out })
                }
                #[doc = concat!("In place (`self` is the first operand); see [`crate::Engine::", stringify!($into), "`].")]
                pub fn $inplace(&mut self, other: &Vector<f32> $(, $p: $t)*) -> Result<()> {
                    engine()?.$einplace(&mut self.data, &other.data $(, $p)*)
                }
            )*
        }
    };
}

vector_binary! {
    add, add_inplace => add_into, add_inplace();
    sub, sub_inplace => sub_into, sub_inplace();
    mul, mul_inplace => mul_into, mul_inplace();
    div, div_inplace => div_into, div_inplace();
    minimum, minimum_inplace => minimum_into, minimum_inplace();
    maximum, maximum_inplace => maximum_into, maximum_inplace();
    lerp, lerp_inplace => lerp_into, lerp_inplace(t: f32);
}

/// Reductions and two-vector scalars.
macro_rules! vector_scalar {
    ($($name:ident -> $ret:ty;)*) => {
        impl Vector<f32> {
            $(
                #[doc = concat!("See [`crate::Engine::", stringify!($name), "`].")]
                pub fn $name(&self) -> Result<$ret> {
                    engine()?.$name(&self.data)
                }
            )*
        }
    };
    ($(pair $name:ident;)*) => {
        impl Vector<f32> {
            $(
                #[doc = concat!("See [`crate::Engine::", stringify!($name), "`].")]
                pub fn $name(&self, other: &Vector<f32>) -> Result<f32> {
                    engine()?.$name(&self.data, &other.data)
                }
            )*
        }
    };
}

vector_scalar! {
    sum -> f32; max -> f32; min -> f32; argmax -> usize; argmin -> usize; mean -> f32;
    variance -> f32; stddev -> f32; norm_l1 -> f32; norm_l2 -> f32; norm_linf -> f32;
}

vector_scalar! {
    pair dot; pair cosine; pair euclidean; pair manhattan;
}

impl Vector<f32> {
    /// `alpha * x + self` in place (BLAS axpy with `self` as y).
    pub fn axpy(&mut self, alpha: f32, x: &Vector<f32>) -> Result<()> {
        engine()?.axpy(alpha, &x.data, &mut self.data)
    }

    /// `self * b + c` as a new vector (fused where the ISA has FMA).
    pub fn fma(&self, b: &Vector<f32>, c: &Vector<f32>) -> Result<Vector<f32>> {
        let mut out = vec![0.0; self.len()];
        engine()?.fma_into(&self.data, &b.data, &c.data, &mut out)?;
        Ok(Vector { data: out })
    }
}
