//! Each family's word codec: its kinds' parameters written as and read back from 32-bit words.

pub(super) mod conv;
pub(super) mod elementwise;
pub(super) mod indexing;
pub(super) mod logic;
pub(super) mod matmul;
pub(super) mod movement;
pub(super) mod pool;
pub(super) mod quantize;
pub(super) mod recurrent;
pub(super) mod reduce;
