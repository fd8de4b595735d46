//! The CPU's step dispatch, one module per op family (`ferrite_hal::op::Family`, a column of
//! hal's op table, as the verifier's rules in `ferrite-core`): each family's `run` takes its
//! kinds' operands out of the carved step and calls their kernels. `run_step_inline`
//! dispatches by family; on a firmware whose selection spans many families it calls each
//! family's `run` out of line (see `out_of_line`), so the deepest frame is one family's,
//! not the union of every kernel's locals. The families whose kernels read the step's
//! context (kept state, layouts, threads: conv, matmul, pool, recurrent) get it as their
//! first argument.
//!
//! Adding an op: one arm in its family's `run` here (the kernel itself in the family's folder
//! under `ops/`); a new family, one module here and one arm in `run_step_inline`.

#[macro_use]
mod operands;

mod conv;
mod dispatch;
mod elementwise;
mod indexing;
mod logic;
mod matmul;
mod movement;
mod pool;
mod quantize;
mod recurrent;
mod reduce;
mod run;

pub use run::{
    run_step, run_step_after, run_step_in, run_step_selected, run_step_selected_in, step_operands,
    step_operands_and_scratch,
};
