//! `ferrite-jetson`: the smallest complete application of Ferrite on a Jetson (or any Linux
//! machine): load a packed `.frt`, run it on the first device of the user's list that can run
//! it — CUDA, then Vulkan, then the CPU, in the order given — and write the outputs.
//!
//! ```text
//! ferrite-jetson MODEL.frt [--device cuda,vulkan,cpu] [--input FILE.bin]... [--runs N] [--out-dir DIR]
//! ```
//!
//! Inputs and outputs are raw little-endian tensors (`numpy`: `x.astype('<f4').tofile(...)`),
//! in graph order; a missing input is all zeros. A device that is missing or refuses the model
//! (an op it lacks) is reported on one line and the next one is tried; if none can run it, the
//! program exits with status 1. Every error is one line; nothing panics on bad files.

use ferrite_core::{Model, Session};
use ferrite_hal::Device;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// The command line, parsed.
struct Args {
    model: PathBuf,
    devices: Vec<String>,
    inputs: Vec<PathBuf>,
    runs: usize,
    out_dir: Option<PathBuf>,
}

const USAGE: &str = "usage: ferrite-jetson MODEL.frt [--device cuda,vulkan,cpu] [--input FILE.bin]... [--runs N] [--out-dir DIR]";

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let mut model = None;
    let mut devices = vec!["cuda".to_string(), "vulkan".to_string(), "cpu".to_string()];
    let (mut inputs, mut runs, mut out_dir) = (Vec::new(), 1, None);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value; {USAGE}"));
        match arg.as_str() {
            "--device" => devices = value("--device")?.split(',').map(str::to_string).collect(),
            "--input" => inputs.push(PathBuf::from(value("--input")?)),
            "--runs" => {
                runs = value("--runs")?
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or("--runs needs a positive number")?
            }
            "--out-dir" => out_dir = Some(PathBuf::from(value("--out-dir")?)),
            "-h" | "--help" => return Err(USAGE.to_string()),
            _ if arg.starts_with('-') => return Err(format!("unknown option {arg}; {USAGE}")),
            _ if model.is_none() => model = Some(PathBuf::from(arg)),
            _ => return Err(format!("unexpected argument {arg}; {USAGE}")),
        }
    }
    Ok(Args {
        model: model.ok_or(USAGE)?,
        devices,
        inputs,
        runs,
        out_dir,
    })
}

/// A file's bytes in 16-byte-aligned memory, as the model reader requires.
struct Aligned {
    words: Vec<u128>,
    len: usize,
}

impl Aligned {
    fn zeroed(len: usize) -> Aligned {
        Aligned {
            words: vec![0; len.div_ceil(16)],
            len,
        }
    }

    fn read(path: &PathBuf) -> Result<Aligned, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut a = Aligned::zeroed(bytes.len());
        a.bytes_mut().copy_from_slice(&bytes);
        Ok(a)
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: u128 storage viewed as bytes; `len` ≤ its size.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr() as *const u8, self.len) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr() as *mut u8, self.len) }
    }
}

/// What one device produced.
struct Outcome {
    outputs: Vec<Vec<u8>>,
    median_us: f64,
}

/// Runs the model `runs` times on `device`; errors are one line.
fn infer<D: Device>(
    model: &Model<'_>,
    device: D,
    inputs: &[Vec<u8>],
    runs: usize,
) -> Result<Outcome, String> {
    let mut arena = Aligned::zeroed(model.arena_bytes());
    let mut session = Session::new(model, device, arena.bytes_mut()).map_err(|e| e.to_string())?;
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        for (i, bytes) in inputs.iter().enumerate() {
            session.set_input(i, bytes).map_err(|e| e.to_string())?;
        }
        session.run().map_err(|e| e.to_string())?;
        times.push(start.elapsed().as_secs_f64() * 1e6);
    }
    times.sort_by(f64::total_cmp);
    let outputs = (0..model.output_count())
        .map(|i| {
            session
                .output(i)
                .map(<[u8]>::to_vec)
                .map_err(|e| e.to_string())
        })
        .collect::<Result<_, _>>()?;
    Ok(Outcome {
        outputs,
        median_us: times[times.len() / 2],
    })
}

/// Tries one named device.
fn try_device(
    name: &str,
    model: &Model<'_>,
    inputs: &[Vec<u8>],
    runs: usize,
) -> Result<Outcome, String> {
    match name {
        "cuda" => {
            let device = ferrite_cuda::CudaDevice::new().map_err(|e| e.to_string())?;
            infer(model, device, inputs, runs)
        }
        "vulkan" => {
            let device = ferrite_vulkan::VulkanDevice::new().map_err(|e| e.to_string())?;
            infer(model, device, inputs, runs)
        }
        "cpu" => infer(model, ferrite_cpu::CpuDevice::new(), inputs, runs),
        other => Err(format!("unknown device '{other}' (cuda, vulkan or cpu)")),
    }
}

fn run() -> Result<(), String> {
    let args = parse_args()?;
    let file = Aligned::read(&args.model)?;
    let model = Model::load(file.bytes()).map_err(|e| format!("{}: {e}", args.model.display()))?;
    if args.inputs.len() > model.input_count() {
        return Err(format!(
            "the model has {} input(s), {} were given",
            model.input_count(),
            args.inputs.len()
        ));
    }
    let mut inputs = Vec::new();
    for i in 0..model.input_count() {
        let info = model.input(i).ok_or("the model lost an input")?;
        let bytes = match args.inputs.get(i) {
            Some(path) => std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?,
            None => vec![0; info.desc.bytes],
        };
        if bytes.len() != info.desc.bytes {
            return Err(format!(
                "input '{}' needs {} bytes ({} {:?}), the file has {}",
                info.name,
                info.desc.bytes,
                info.desc.dtype,
                info.desc.shape.dims(),
                bytes.len()
            ));
        }
        inputs.push(bytes);
    }
    for name in &args.devices {
        match try_device(name, &model, &inputs, args.runs) {
            Ok(outcome) => {
                println!(
                    "ran on {name}: median {:.1} us over {} run(s)",
                    outcome.median_us, args.runs
                );
                return write_outputs(&model, &outcome.outputs, args.out_dir.as_ref());
            }
            Err(e) => eprintln!("{name}: {e}"),
        }
    }
    Err(format!(
        "no device of {} can run this model",
        args.devices.join(",")
    ))
}

fn write_outputs(
    model: &Model<'_>,
    outputs: &[Vec<u8>],
    dir: Option<&PathBuf>,
) -> Result<(), String> {
    for (i, bytes) in outputs.iter().enumerate() {
        let info = model.output(i).ok_or("the model lost an output")?;
        let preview: Vec<String> = match info.desc.dtype {
            ferrite_hal::DType::F32 => bytes
                .chunks_exact(4)
                .take(4)
                .map(|c| format!("{:.5}", f32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                .collect(),
            _ => bytes.iter().take(8).map(|b| b.to_string()).collect(),
        };
        println!(
            "output {i} '{}' {} {:?}: {} ...",
            info.name,
            info.desc.dtype,
            info.desc.shape.dims(),
            preview.join(" ")
        );
        if let Some(dir) = dir {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let path = dir.join(format!("output_{i}.bin"));
            std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
