//! The kernels, one folder per `ferrite_hal` op family (the families of `hal/src/op/` and
//! `core/src/rules/`): each holds the portable `reference` kernels and the host's optimised
//! strategies. A family imports only from `base`, `isa`, `micro` and itself
//! (`scripts/layers.py` checks it).

pub mod conv;
pub mod elementwise;
pub mod indexing;
pub mod logic;
pub mod matmul;
pub mod movement;
pub mod pool;
pub mod quantize;
pub mod recurrent;
pub mod reduce;
