//! The movement family (`ferrite_hal::op::Family::Movement`): copies, transposes, concat,
//! split, slice, pad, and resampling.

pub mod reference;
pub mod resample;
