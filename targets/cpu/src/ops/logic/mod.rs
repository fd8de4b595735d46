//! The logic family (`ferrite_hal::op::Family::Logic`): comparisons, boolean logic, Where.

pub mod reference;
