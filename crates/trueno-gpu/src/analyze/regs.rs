//! A function's registers: declared types and widths, numbered on first mention, looked
//! up by name through a fast string hash.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::ast::RegDecl;

/// A register's width class, for pressure and the predicate limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Width {
    /// `.pred`.
    Pred,
    /// 8 to 32 bits: one hardware register.
    B32,
    /// 64 bits: two.
    B64,
    /// 128 bits: four.
    B128,
}

impl Width {
    fn of(ty: &str) -> Width {
        match ty {
            "pred" => Width::Pred,
            t if t.ends_with("64") => Width::B64,
            t if t.ends_with("128") => Width::B128,
            _ => Width::B32,
        }
    }

    /// 32-bit hardware registers a value of this width takes (0 for predicates).
    pub fn slots(self) -> u32 {
        match self {
            Width::Pred => 0,
            Width::B32 => 1,
            Width::B64 => 2,
            Width::B128 => 4,
        }
    }
}

/// FNV-1a: register names are short and trusted to be what the file says; SipHash's
/// flood resistance buys nothing here and costs a third of the lookups' time.
#[derive(Default)]
pub struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

/// A map keyed by names, hashed with [`Fnv`].
pub type NameMap<V> = HashMap<String, V, BuildHasherDefault<Fnv>>;

/// The function's registers, numbered in order of first mention.
#[derive(Clone, Debug, Default)]
pub struct Registers {
    /// Name of each register id.
    pub names: Vec<String>,
    /// Declared type (`f32`, `pred`...) of each.
    pub types: Vec<String>,
    /// Width class of each (times its vector width).
    pub slots: Vec<u32>,
    /// Whether each is a predicate.
    pub is_pred: Vec<bool>,
    ids: NameMap<u32>,
    singles: NameMap<usize>,
    ranges: NameMap<(u32, usize)>,
}

impl Registers {
    pub(super) fn new(decls: &[RegDecl]) -> Self {
        let mut r = Registers::default();
        for (k, d) in decls.iter().enumerate() {
            match d.range {
                Some(n) => {
                    r.ranges.insert(d.name.clone(), (n, k));
                }
                None => {
                    r.singles.insert(d.name.clone(), k);
                }
            }
        }
        r
    }

    /// The id of a declared register, numbering it on first sight.
    pub(super) fn id(&mut self, name: &str, decls: &[RegDecl]) -> Option<u32> {
        if let Some(&id) = self.ids.get(name) {
            return Some(id);
        }
        let decl = match self.singles.get(name) {
            Some(&k) => k,
            None => {
                let digits = name.len() - name.bytes().rev().take_while(u8::is_ascii_digit).count();
                let (prefix, index) = name.split_at(digits);
                let index: u64 = index.parse().ok()?;
                let &(n, k) = self.ranges.get(prefix)?;
                // `%r<6>` declares %r0..%r5.
                if index >= n as u64 || (index > 0 && name.as_bytes()[digits] == b'0') {
                    return None;
                }
                k
            }
        };
        let d = &decls[decl];
        let id = self.names.len() as u32;
        self.names.push(name.to_string());
        self.types.push(d.ty.clone());
        let w = Width::of(&d.ty);
        self.slots.push(w.slots() * d.vector.max(1));
        self.is_pred.push(w == Width::Pred);
        self.ids.insert(name.to_string(), id);
        Some(id)
    }

    /// How many registers were numbered.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether none were.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The id of `name`, if it is a register this function mentions.
    pub fn get(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied()
    }
}
