//! The recurrent family (`ferrite_hal::op::Family::Recurrent`): RNN, GRU and LSTM.

pub mod reference;
