//! The indexing family (`ferrite_hal::op::Family::Indexing`): gathers and scatters by index
//! tensors.

pub mod reference;
