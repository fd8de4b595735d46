//! Packed models on this machine: [`runner`] loads a `.frt` (or packs an `.onnx` in memory) and
//! runs it on a device (the CPU, Vulkan, CUDA, or firmware under QEMU through [`qemu`]),
//! [`bench`](mod@bench) measures it, [`firmware`] builds a model's own firmware, [`plan_view`] shows its
//! plan; [`npy`] and [`files`] read and write the user's arrays and files safely, [`inputs`] matches
//! and checks them against the model's inputs, and [`error`] says why a run failed.

pub mod bench;
pub mod error;
pub mod files;
pub mod firmware;
pub mod inputs;
pub mod npy;
pub mod plan_view;
pub mod qemu;
pub mod runner;
