//! A plan prepared on a real GPU: one device allocation for the arena at the planned offsets,
//! the weights uploaded once, the kernels loaded once per device, and the whole run — inputs
//! in from pinned host memory, every step, outputs and the status word back out — captured once
//! as a CUDA graph. A run copies the inputs into the pinned buffer, launches the graph, waits
//! on an event with a timeout and copies the outputs out: no allocation, module load or
//! launch-argument encoding per run.

use crate::launch::{Arg, Command, Kernel};
use crate::plan::{check_host_arena, check_status, Lowered};
use crate::{kernels, CudaError};
use cudarc::driver::result as driver;
use cudarc::driver::sys::{self, CUdeviceptr};
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaGraph, CudaModule, CudaSlice, CudaStream, DevicePtr,
    PinnedHostSlice,
};
use cudarc::nvrtc::Ptx;
use ferrite_hal::{Location, Plan};
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The kernels of one GPU, compiled and loaded on first use and shared by its programs.
#[derive(Default)]
pub(crate) struct Loaded {
    modules: BTreeMap<&'static str, Arc<CudaModule>>,
    functions: BTreeMap<Kernel, CudaFunction>,
}

impl Loaded {
    fn function(
        &mut self,
        ctx: &Arc<CudaContext>,
        arch: &str,
        kernel: Kernel,
    ) -> Result<CudaFunction, CudaError> {
        if let Some(f) = self.functions.get(&kernel) {
            return Ok(f.clone());
        }
        let module = match self.modules.get(kernel.module()) {
            Some(m) => m.clone(),
            None => {
                let source = kernels::MODULES
                    .iter()
                    .find(|m| m.name == kernel.module())
                    .ok_or(CudaError::CorruptPlan("a kernel without a module"))?;
                let ptx = kernels::compile(source, arch)?;
                let m = ctx
                    .load_module(Ptx::from_src(ptx))
                    .map_err(CudaError::during("cuModuleLoadData"))?;
                self.modules.insert(source.name, m.clone());
                m
            }
        };
        let f = module
            .load_function(kernel.entry())
            .map_err(CudaError::during("cuModuleGetFunction"))?;
        self.functions.insert(kernel, f.clone());
        Ok(f)
    }
}

/// `(arena offset, pinned offset, bytes)` of one graph input or output.
type Transfer = (usize, usize, usize);

fn transfers(ranges: &[(usize, usize)]) -> Vec<Transfer> {
    let mut at = 0;
    ranges
        .iter()
        .map(|&(offset, bytes)| {
            let t = (offset, at, bytes);
            at += bytes;
            t
        })
        .collect()
}

/// A plan captured as a CUDA graph on one GPU.
///
/// Field order is drop order: the graph goes before the memory it uses; `Drop` first waits for
/// any run still in flight (one that timed out), so nothing is freed under a running kernel.
pub(crate) struct GpuProgram {
    graph: CudaGraph,
    done: CudaEvent,
    /// A run timed out and may still be running.
    pending: bool,
    inputs: Vec<Transfer>,
    outputs: Vec<Transfer>,
    arena_bytes: usize,
    pinned_in: PinnedHostSlice<u8>,
    pinned_out: PinnedHostSlice<u8>,
    status_host: PinnedHostSlice<u32>,
    _status: CudaSlice<u32>,
    _arena: CudaSlice<u8>,
    _weights: CudaSlice<u8>,
    stream: Arc<CudaStream>,
}

impl Drop for GpuProgram {
    fn drop(&mut self) {
        let _ = self.stream.synchronize();
    }
}

/// Device bytes a plan needs besides its arena: the weights and the status word.
pub(crate) fn device_bytes(plan: &dyn Plan) -> usize {
    plan.arena_bytes()
        .saturating_add(plan.weights().len())
        .saturating_add(4)
}

impl GpuProgram {
    pub fn new(
        ctx: &Arc<CudaContext>,
        arch: &str,
        loaded: &mut Loaded,
        plan: &dyn Plan,
    ) -> Result<GpuProgram, CudaError> {
        let lowered = Lowered::new(plan)?;
        ctx.bind_to_thread()
            .map_err(CudaError::during("cuCtxSetCurrent"))?;
        let (free, _) = ctx
            .mem_get_info()
            .map_err(CudaError::during("cuMemGetInfo"))?;
        let needed = device_bytes(plan);
        if needed > free {
            return Err(CudaError::OutOfMemory { needed, free });
        }
        // Every kernel the plan uses, before any allocation.
        let mut functions = BTreeMap::new();
        for command in &lowered.commands {
            if let Command::Launch(l) = command {
                functions.insert(l.kernel, loaded.function(ctx, arch, l.kernel)?);
            }
        }
        let stream = ctx
            .new_stream()
            .map_err(CudaError::during("cuStreamCreate"))?;
        let alloc = CudaError::during("cuMemAlloc");
        let arena = stream
            .alloc_zeros::<u8>(lowered.arena_bytes.max(1))
            .map_err(&alloc)?;
        let weights = if plan.weights().is_empty() {
            stream.alloc_zeros::<u8>(1).map_err(&alloc)?
        } else {
            stream
                .clone_htod(plan.weights())
                .map_err(CudaError::during("cuMemcpyHtoD"))?
        };
        let status = stream.alloc_zeros::<u32>(1).map_err(&alloc)?;
        let pinned = CudaError::during("cuMemHostAlloc");
        // SAFETY: pinned buffers are written before they are read: inputs by each run, outputs
        // and status by the graph.
        let (mut pinned_in, mut pinned_out, mut status_host) = unsafe {
            (
                ctx.alloc_pinned_with_flags::<u8>(
                    lowered.input_bytes().max(1),
                    sys::CU_MEMHOSTALLOC_WRITECOMBINED,
                )
                .map_err(&pinned)?,
                ctx.alloc_pinned_with_flags::<u8>(lowered.output_bytes().max(1), 0)
                    .map_err(&pinned)?,
                ctx.alloc_pinned_with_flags::<u32>(1, 0).map_err(&pinned)?,
            )
        };
        stream
            .synchronize()
            .map_err(CudaError::during("cuStreamSynchronize"))?;

        let pointers = Pointers {
            arena: arena.device_ptr(&stream).0,
            weights: weights.device_ptr(&stream).0,
            status: status.device_ptr(&stream).0,
            pinned_in: pinned_in
                .as_mut_ptr()
                .map_err(CudaError::during("cuEventSynchronize"))?,
            pinned_out: pinned_out
                .as_mut_ptr()
                .map_err(CudaError::during("cuEventSynchronize"))?,
            status_host: status_host
                .as_mut_ptr()
                .map_err(CudaError::during("cuEventSynchronize"))?,
        };
        let inputs = transfers(&lowered.inputs);
        let outputs = transfers(&lowered.outputs);

        stream
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(CudaError::during("cuStreamBeginCapture"))?;
        let recorded = record(&stream, &pointers, &functions, &lowered, &inputs, &outputs);
        // End the capture whatever happened, so the stream is usable (and droppable) again.
        let graph = stream.end_capture(sys::CUgraphInstantiate_flags(0));
        recorded?;
        let graph = graph
            .map_err(CudaError::during("cuStreamEndCapture"))?
            .ok_or(CudaError::CorruptPlan("the captured graph is empty"))?;
        graph.upload().map_err(CudaError::during("cuGraphUpload"))?;
        let done = ctx
            .new_event(None)
            .map_err(CudaError::during("cuEventCreate"))?;
        Ok(GpuProgram {
            graph,
            done,
            pending: false,
            inputs,
            outputs,
            arena_bytes: lowered.arena_bytes,
            pinned_in,
            pinned_out,
            status_host,
            _status: status,
            _arena: arena,
            _weights: weights,
            stream,
        })
    }

    /// One inference: inputs in, the graph, outputs out, within `timeout`.
    pub fn run(&mut self, arena: &mut [u8], timeout: Duration) -> Result<(), CudaError> {
        check_host_arena(arena, self.arena_bytes)?;
        if self.pending {
            // The last run timed out: it must finish before its buffers are touched again.
            self.wait(timeout)?;
        }
        let sync = CudaError::during("cuEventSynchronize");
        let staged = self.pinned_in.as_mut_slice().map_err(&sync)?;
        for &(offset, at, bytes) in &self.inputs {
            staged[at..at + bytes].copy_from_slice(&arena[offset..offset + bytes]);
        }
        self.graph
            .launch()
            .map_err(CudaError::during("cuGraphLaunch"))?;
        self.done
            .record(&self.stream)
            .map_err(CudaError::during("cuEventRecord"))?;
        self.pending = true;
        self.wait(timeout)?;
        check_status(self.status_host.as_slice().map_err(&sync)?[0])?;
        let results = self.pinned_out.as_slice().map_err(&sync)?;
        for &(offset, at, bytes) in &self.outputs {
            arena[offset..offset + bytes].copy_from_slice(&results[at..at + bytes]);
        }
        Ok(())
    }

    /// Waits up to `timeout` for the run in flight; on success nothing is pending. A launch
    /// that failed on the device (an illegal address, ...) surfaces here as a driver error.
    fn wait(&mut self, timeout: Duration) -> Result<(), CudaError> {
        let start = Instant::now();
        let mut polls = 0u32;
        while !self
            .done
            .try_is_complete()
            .map_err(CudaError::during("cuGraphLaunch"))?
        {
            if start.elapsed() > timeout {
                return Err(CudaError::Timeout {
                    millis: timeout.as_millis(),
                });
            }
            // Spin briefly (small models finish in microseconds), then sleep between polls.
            polls += 1;
            if polls < 1000 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        self.pending = false;
        Ok(())
    }
}

/// The addresses a capture needs.
struct Pointers {
    arena: CUdeviceptr,
    weights: CUdeviceptr,
    status: CUdeviceptr,
    pinned_in: *mut u8,
    pinned_out: *mut u8,
    status_host: *mut u32,
}

impl Pointers {
    fn device(&self, location: Location) -> CUdeviceptr {
        match location {
            Location::Arena(o) => self.arena + o as u64,
            Location::Weights(o) => self.weights + o as u64,
        }
    }
}

/// Enqueues one whole run on `stream` (which is capturing).
fn record(
    stream: &CudaStream,
    at: &Pointers,
    functions: &BTreeMap<Kernel, CudaFunction>,
    lowered: &Lowered,
    inputs: &[Transfer],
    outputs: &[Transfer],
) -> Result<(), CudaError> {
    let s = stream.cu_stream();
    // SAFETY (every call below): the device pointers lie inside this program's allocations
    // (the core verified every tensor's range against the arena and weights), the pinned
    // ranges inside the pinned buffers, and each launch's arguments follow its kernel's
    // signature (checked by the host emulator in CI).
    unsafe {
        for &(offset, pinned, bytes) in inputs {
            let src = std::slice::from_raw_parts(at.pinned_in.add(pinned), bytes);
            driver::memcpy_htod_async(at.arena + offset as u64, src, s)
                .map_err(CudaError::during("cuMemcpyHtoDAsync"))?;
        }
        driver::memset_d8_async(at.status, 0, 4, s)
            .map_err(CudaError::during("cuMemsetD8Async"))?;
        for command in &lowered.commands {
            match command {
                Command::Launch(launch) => {
                    let f = functions
                        .get(&launch.kernel)
                        .ok_or(CudaError::CorruptPlan("a kernel was not loaded"))?;
                    let mut values: Vec<Vec<u64>> = launch
                        .args
                        .iter()
                        .map(|arg| match arg {
                            Arg::Tensor(l) => vec![at.device(*l)],
                            Arg::Null => vec![0],
                            Arg::Status => vec![at.status],
                            Arg::Words(w) => words_as_u64(w),
                        })
                        .collect();
                    let mut params: Vec<*mut c_void> = values
                        .iter_mut()
                        .map(|v| v.as_mut_ptr() as *mut c_void)
                        .collect();
                    let [gx, gy, gz] = launch.grid;
                    let [bx, by, bz] = launch.block;
                    driver::launch_kernel(
                        f.cu_function(),
                        (gx, gy, gz),
                        (bx, by, bz),
                        0,
                        s,
                        &mut params,
                    )
                    .map_err(CudaError::during("cuLaunchKernel"))?;
                }
                Command::Zero { dst, bytes } => {
                    driver::memset_d8_async(at.arena + *dst as u64, 0, *bytes, s)
                        .map_err(CudaError::during("cuMemsetD8Async"))?;
                }
                Command::Copy { src, dst, bytes } => {
                    driver::memcpy_dtod_async(at.arena + *dst as u64, at.device(*src), *bytes, s)
                        .map_err(CudaError::during("cuMemcpyDtoDAsync"))?;
                }
            }
        }
        for &(offset, pinned, bytes) in outputs {
            let dst = std::slice::from_raw_parts_mut(at.pinned_out.add(pinned), bytes);
            driver::memcpy_dtoh_async(dst, at.arena + offset as u64, s)
                .map_err(CudaError::during("cuMemcpyDtoHAsync"))?;
        }
        let status = std::slice::from_raw_parts_mut(at.status_host, 1);
        driver::memcpy_dtoh_async(status, at.status, s)
            .map_err(CudaError::during("cuMemcpyDtoHAsync"))?;
    }
    Ok(())
}

/// Words packed into 8-byte-aligned storage (the driver copies each parameter's bytes from it).
fn words_as_u64(words: &[u32]) -> Vec<u64> {
    words
        .chunks(2)
        .map(|c| c[0] as u64 | (c.get(1).copied().unwrap_or(0) as u64) << 32)
        .collect()
}
