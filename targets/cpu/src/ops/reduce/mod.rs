//! The reduction family (`ferrite_hal::op::Family::Reduce`): reductions, arg-max, top-k,
//! cumulative sums, determinants and tree ensembles.

pub mod reference;
pub mod trees;
