//! The host emulator (feature `emulator`): the CUDA kernels compiled as C++ (`emulator/host.cpp`)
//! and run on the CPU over the same command list the GPU program captures, with a "device"
//! arena and weights copy of its own, so inputs and outputs cross the same boundary.
//!
//! It exists so that CI, which has no GPU, runs the lowering and every kernel through the
//! conformance suites; it checks each launch's argument sizes against the kernel's signature.
//! Thread scheduling differs from a GPU's (blocks run one after another), so it cannot find
//! races; `scripts/gpu-check.sh` covers real GPUs.

use crate::launch::{Arg, Command, Kernel};
use crate::plan::{check_host_arena, check_status, Lowered};
use crate::CudaError;
use ferrite_hal::{Location, Plan};
use std::ffi::{c_char, c_int, c_void, CStr, CString};

extern "C" {
    fn ferrite_emulate(
        name: *const c_char,
        grid: *const u32,
        block: *const u32,
        args: *const *mut c_void,
        sizes: *const usize,
        count: usize,
    ) -> c_int;
    fn ferrite_emulated_count() -> usize;
    fn ferrite_emulated_name(index: usize) -> *const c_char;
}

/// The kernel names the emulator was built with.
pub fn emulated_kernels() -> Vec<String> {
    // SAFETY: the functions read a static table; names are NUL-terminated literals.
    unsafe {
        (0..ferrite_emulated_count())
            .filter_map(|i| {
                let p = ferrite_emulated_name(i);
                (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
            })
            .collect()
    }
}

/// A plan prepared for the emulator.
pub(crate) struct EmulatedProgram {
    lowered: Lowered,
    memory: Memory,
}

/// The emulated device's memory.
struct Memory {
    /// The arena, 8-byte aligned.
    arena: Vec<u64>,
    /// The "uploaded" weights.
    weights: Vec<u64>,
    status: Box<u32>,
}

fn words_for(bytes: usize) -> usize {
    bytes.div_ceil(8).max(1)
}

impl EmulatedProgram {
    pub fn new(plan: &dyn Plan) -> Result<EmulatedProgram, CudaError> {
        let lowered = Lowered::new(plan)?;
        let mut weights = vec![0u64; words_for(plan.weights().len())];
        bytes_mut(&mut weights)[..plan.weights().len()].copy_from_slice(plan.weights());
        Ok(EmulatedProgram {
            memory: Memory {
                arena: vec![0u64; words_for(lowered.arena_bytes)],
                weights,
                status: Box::new(0),
            },
            lowered,
        })
    }

    pub fn run(&mut self, arena: &mut [u8]) -> Result<(), CudaError> {
        check_host_arena(arena, self.lowered.arena_bytes)?;
        let memory = &mut self.memory;
        for &(offset, bytes) in &self.lowered.inputs {
            bytes_mut(&mut memory.arena)[offset..offset + bytes]
                .copy_from_slice(&arena[offset..offset + bytes]);
        }
        *memory.status = 0;
        for command in &self.lowered.commands {
            match command {
                Command::Launch(launch) => memory.launch(launch)?,
                Command::Zero { dst, bytes } => {
                    bytes_mut(&mut memory.arena)[*dst..*dst + *bytes].fill(0)
                }
                Command::Copy { src, dst, bytes } => {
                    let (dst, bytes) = (*dst, *bytes);
                    match *src {
                        Location::Arena(s) => {
                            bytes_mut(&mut memory.arena).copy_within(s..s + bytes, dst)
                        }
                        Location::Weights(s) => bytes_mut(&mut memory.arena)[dst..dst + bytes]
                            .copy_from_slice(&bytes_mut(&mut memory.weights)[s..s + bytes]),
                    }
                }
            }
        }
        check_status(*memory.status)?;
        for &(offset, bytes) in &self.lowered.outputs {
            arena[offset..offset + bytes]
                .copy_from_slice(&bytes_mut(&mut memory.arena)[offset..offset + bytes]);
        }
        Ok(())
    }
}

impl Memory {
    fn launch(&mut self, launch: &crate::launch::Launch) -> Result<(), CudaError> {
        let arena = self.arena.as_mut_ptr() as u64;
        let weights = self.weights.as_mut_ptr() as u64;
        let status = &mut *self.status as *mut u32 as u64;
        // Each argument's bytes, as cuLaunchKernel reads them: pointers as 64-bit addresses.
        let mut values: Vec<Vec<u32>> = launch
            .args
            .iter()
            .map(|arg| match arg {
                Arg::Tensor(Location::Arena(o)) => address(arena + *o as u64),
                Arg::Tensor(Location::Weights(o)) => address(weights + *o as u64),
                Arg::Null => address(0),
                Arg::Status => address(status),
                Arg::Words(w) => w.clone(),
            })
            .collect();
        let sizes: Vec<usize> = values.iter().map(|v| v.len() * 4).collect();
        let pointers: Vec<*mut c_void> = values
            .iter_mut()
            .map(|v| v.as_mut_ptr() as *mut c_void)
            .collect();
        let kernel = launch.kernel;
        let name = CString::new(kernel.entry()).map_err(|_| emulator_error(kernel, "name"))?;
        // SAFETY: the emulator checks the argument count and sizes against the kernel before
        // reading them; every pointer argument addresses this program's arena, weights or
        // status word, which the core's verified plan keeps every access inside.
        let result = unsafe {
            ferrite_emulate(
                name.as_ptr(),
                launch.grid.as_ptr(),
                launch.block.as_ptr(),
                pointers.as_ptr(),
                sizes.as_ptr(),
                sizes.len(),
            )
        };
        match result {
            0 => Ok(()),
            -1 => Err(emulator_error(kernel, "no such kernel in the emulator")),
            n => Err(CudaError::Emulator {
                kernel: kernel.entry(),
                why: format!(
                    "argument {} does not match the kernel's parameter ({} arguments given)",
                    n - 1,
                    sizes.len()
                ),
            }),
        }
    }
}

fn emulator_error(kernel: Kernel, why: &str) -> CudaError {
    CudaError::Emulator {
        kernel: kernel.entry(),
        why: why.to_string(),
    }
}

/// A 64-bit address as two words (little-endian, as the C ABI stores a pointer).
fn address(a: u64) -> Vec<u32> {
    vec![a as u32, (a >> 32) as u32]
}

fn bytes_mut(words: &mut [u64]) -> &mut [u8] {
    // SAFETY: u8 has no alignment or validity requirements; the length covers the same bytes.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, words.len() * 8) }
}

/// Builds the fake NVIDIA driver (`emulator/fake_libcuda.cpp`: the driver calls Ferrite makes,
/// implemented on the CPU with this emulator running the launches) as `dir/libcuda.so` with
/// g++, for tests that run the real GPU program without a GPU: a process whose library path
/// starts with `dir` opens it as the driver. Returns why not when there is no g++.
pub fn build_fake_driver(dir: &std::path::Path) -> Result<std::path::PathBuf, String> {
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("emulator/fake_libcuda.cpp");
    let library = dir.join("libcuda.so");
    let out = std::process::Command::new("g++")
        .args(["-std=c++20", "-O2", "-shared", "-fPIC", "-pthread"])
        .arg("-o")
        .arg(&library)
        .arg(&source)
        .output()
        .map_err(|e| format!("no g++ ({e})"))?;
    if !out.status.success() {
        return Err(format!(
            "fake_libcuda.cpp does not compile: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(library)
}
