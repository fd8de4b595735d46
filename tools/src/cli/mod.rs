//! The `ferrite` commands, one module each; `main.rs` parses the command line and dispatches.

pub(crate) mod bench;
pub(crate) mod check;
pub(crate) mod common;
pub(crate) mod devices;
pub(crate) mod inspect;
pub(crate) mod pack;
pub(crate) mod run;
