//! Operations written once, generic over [`crate::simd::Simd`]. Nothing here names an ISA;
//! `dispatch` instantiates these bodies per ISA.

pub(crate) mod convert;
pub(crate) mod elementwise;
pub(crate) mod map;
pub(crate) mod math;
pub(crate) mod reduce;
pub(crate) mod softmax;

pub(crate) use convert::HalfFormat;
pub(crate) use elementwise::{BinaryOp, UnaryOp};
pub(crate) use reduce::{Reduce2Op, ReduceOp};
