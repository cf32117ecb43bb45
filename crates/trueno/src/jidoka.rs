//! Jidoka ("stop the line"): opt-in checks that turn a NaN or infinity in an output into an
//! error at the operation that produced it, instead of silent corruption downstream.

use crate::error::{Result, TruenoError};

/// Which non-finite values an [`crate::Engine`] with this guard rejects in its outputs.
///
/// ```
/// use trueno::{Engine, JidokaGuard, TruenoError};
/// let e = Engine::auto().with_guard(JidokaGuard::reject_non_finite());
/// let mut out = [0.0; 2];
/// let err = e.div_into(&[1.0, 1.0], &[1.0, 0.0], &mut out).unwrap_err();
/// assert!(matches!(err, TruenoError::NonFinite { index: 1, .. }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JidokaGuard {
    reject_nan: bool,
    reject_inf: bool,
}

impl JidokaGuard {
    /// Rejects NaN and ±infinity.
    pub fn reject_non_finite() -> Self {
        JidokaGuard {
            reject_nan: true,
            reject_inf: true,
        }
    }

    /// Rejects NaN only (infinities may be legitimate, e.g. masked attention scores).
    pub fn reject_nan() -> Self {
        JidokaGuard {
            reject_nan: true,
            reject_inf: false,
        }
    }

    /// `Err(NonFinite)` naming the first rejected element of `out`, else `Ok`.
    pub fn check(&self, op: &'static str, out: &[f32]) -> Result<()> {
        const CHUNK: usize = 1024;
        let bad = |v: f32| (self.reject_nan && v.is_nan()) || (self.reject_inf && v.is_infinite());
        for (c, chunk) in out.chunks(CHUNK).enumerate() {
            // Branch-free scan of the chunk first (vectorises); locate only on a hit.
            if chunk.iter().fold(false, |acc, &v| acc | bad(v)) {
                let i = chunk.iter().position(|&v| bad(v)).unwrap_or(0);
                return Err(TruenoError::NonFinite {
                    op,
                    index: c * CHUNK + i,
                    value: chunk[i],
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_first_bad_element_across_chunks() {
        let mut v = vec![1.0f32; 3000];
        assert!(JidokaGuard::reject_non_finite().check("t", &v).is_ok());
        v[2500] = f32::INFINITY;
        v[2900] = f32::NAN;
        let e = JidokaGuard::reject_non_finite().check("t", &v).unwrap_err();
        assert_eq!(
            e,
            TruenoError::NonFinite {
                op: "t",
                index: 2500,
                value: f32::INFINITY
            }
        );
        match JidokaGuard::reject_nan().check("t", &v).unwrap_err() {
            TruenoError::NonFinite { index, value, .. } => {
                assert_eq!(index, 2900);
                assert!(value.is_nan());
            }
            e => panic!("{e:?}"),
        }
    }
}
