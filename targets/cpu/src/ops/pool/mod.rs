//! The pooling family (`ferrite_hal::op::Family::Pool`).

pub mod reference;
