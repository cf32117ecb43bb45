//! The two lattices of the value analysis: how a value varies across a block's threads
//! (constant, uniform, warp-uniform, affine in the lane, divergent) and where an address
//! points, with the arithmetic that carries lane strides through `add`/`mul`.

/// How a value varies across the threads of a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Val {
    /// No definition seen (yet).
    Bottom,
    /// The same known integer in every thread.
    Const(i64),
    /// The same in every thread of the block.
    Uniform,
    /// The same across a warp, different between warps (`%tid.x / 32`).
    WarpUniform,
    /// `c * lane + (warp-uniform)`: `c` units per lane (`%tid.x * 4 + base`).
    Affine(i64),
    /// Varies by thread in no form tracked here.
    Divergent,
}

impl Val {
    /// Whether threads of one block may see different values.
    pub fn varies(self) -> bool {
        matches!(self, Val::WarpUniform | Val::Affine(_) | Val::Divergent)
    }

    fn rank(self) -> u8 {
        match self {
            Val::Bottom => 0,
            Val::Const(_) => 1,
            Val::Uniform => 2,
            Val::WarpUniform => 3,
            Val::Affine(_) => 4,
            Val::Divergent => 5,
        }
    }

    /// The least value covering both (for several definitions of one register).
    pub fn join(self, o: Val) -> Val {
        use Val::*;
        match (self, o) {
            (Bottom, x) | (x, Bottom) => x,
            (Const(a), Const(b)) if a == b => Const(a),
            (Const(_), Const(_)) => Uniform,
            (Affine(a), Affine(b)) if a == b => Affine(a),
            (Affine(_), _) | (_, Affine(_)) => Divergent,
            (a, b) => {
                if a.rank() >= b.rank() {
                    a
                } else {
                    b
                }
            }
        }
    }

    /// A non-affine combination of two values: uniform stays uniform, anything
    /// thread-dependent becomes divergent.
    pub(super) fn opaque(self, o: Val) -> Val {
        use Val::*;
        match (self, o) {
            (Bottom, _) | (_, Bottom) => Bottom,
            (Affine(_), _) | (_, Affine(_)) | (Divergent, _) | (_, Divergent) => Divergent,
            (WarpUniform, _) | (_, WarpUniform) => WarpUniform,
            _ => Uniform,
        }
    }

    pub(super) fn add(self, o: Val, sign: i64) -> Val {
        use Val::*;
        match (self, o) {
            (Const(a), Const(b)) => Const(a.wrapping_add(sign.wrapping_mul(b))),
            (Affine(a), Affine(b)) => match a.wrapping_add(sign.wrapping_mul(b)) {
                0 => WarpUniform,
                c => Affine(c),
            },
            (Affine(a), Const(_) | Uniform | WarpUniform) => Affine(a),
            (Const(_) | Uniform | WarpUniform, Affine(b)) => Affine(sign.wrapping_mul(b)),
            (a, b) => a.opaque(b),
        }
    }

    pub(super) fn mul(self, o: Val) -> Val {
        use Val::*;
        match (self, o) {
            (Const(a), Const(b)) => Const(a.wrapping_mul(b)),
            (Affine(_), Const(0)) | (Const(0), Affine(_)) => Const(0),
            (Affine(a), Const(b)) | (Const(b), Affine(a)) => Affine(a.wrapping_mul(b)),
            (a, b) => a.opaque(b),
        }
    }
}

/// Where an address points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prov {
    /// Not known to be an address.
    None,
    /// A `.shared` window address (`mov.u32 %r, smem`, `cvta.to.shared`): right for
    /// `ld.shared`, wrong for a generic `ld`.
    SharedWindow,
    /// A generic address made from a shared one (`cvta.shared`).
    SharedGeneric,
    /// A `.global` window address (`cvta.to.global`, a `.global` variable).
    Global,
    /// A `.local` address.
    Local,
    /// Pointers of different kinds meet here.
    Mixed,
}

impl Prov {
    /// The least provenance covering both.
    pub fn join(self, o: Prov) -> Prov {
        match (self, o) {
            (Prov::None, x) | (x, Prov::None) => x,
            (a, b) if a == b => a,
            _ => Prov::Mixed,
        }
    }
}
