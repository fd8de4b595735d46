//! The recurrent family (`ferrite_hal::op::Family::Recurrent`): RNN, GRU and LSTM.

#[cfg(all(feature = "std", target_arch = "x86_64"))]
mod avx2;
#[cfg(all(feature = "std", target_arch = "x86_64"))]
mod fma;
mod operands;
pub mod reference;
