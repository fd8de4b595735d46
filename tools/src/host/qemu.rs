//! The `qemu-m0`, `qemu-m4`, `qemu-m7` and `qemu-m33` devices: Ferrite's real firmware
//! (`boards/qemu-*`) on QEMU's emulated Cortex-M0 (microbit), Cortex-M4F (mps2-an386), Cortex-M7
//! (mps2-an500) and Cortex-M33 (mps2-an505, with the DSP extension), driven from the host.
//!
//! The runner writes the packed model and raw inputs into a fresh directory, starts
//! `qemu-system-arm` with the firmware and the instruction-count plugin (`boards/qemu-plugin`),
//! and kills it after a timeout. The firmware reads the files over semihosting, verifies and runs
//! the model, and writes the outputs back; the plugin reports the instructions executed between
//! the firmware's `ferrite_marker` calls, i.e. exactly one inference. QEMU is not
//! cycle-accurate, so instructions (not time) are what it measures.

use crate::host::error::RunError;
use crate::host::inputs::check_inputs;
use crate::host::npy::NpyArray;
use ferrite_core::Model;
use ferrite_hal::Plan;
use object::{Object, ObjectSection, ObjectSymbol};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use wait_timeout::ChildExt;

/// An emulated board with Ferrite's firmware.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Board {
    /// `qemu-m0`: microbit (nRF51822, Cortex-M0, no FPU, 16 KiB RAM); the firmware embeds the
    /// digits demo model in flash and runs only that model.
    M0,
    /// `qemu-m4`: mps2-an386 (Cortex-M4F); any model up to 8 MiB, arena up to 8 MiB.
    M4,
    /// `qemu-m7`: mps2-an500 (Cortex-M7); any model up to 8 MiB, arena up to 8 MiB.
    M7,
    /// `qemu-m33`: mps2-an505 (Cortex-M33 with the DSP extension, ARMv8-M Mainline); any model
    /// up to 8 MiB, arena up to 8 MiB.
    M33,
}

impl Board {
    /// Every board.
    pub const ALL: [Board; 4] = [Board::M0, Board::M4, Board::M7, Board::M33];

    /// The `--device` name.
    pub fn device_name(self) -> &'static str {
        match self {
            Board::M0 => "qemu-m0",
            Board::M4 => "qemu-m4",
            Board::M7 => "qemu-m7",
            Board::M33 => "qemu-m33",
        }
    }

    /// The board by `--device` name.
    pub fn from_device_name(name: &str) -> Option<Board> {
        Board::ALL.into_iter().find(|b| b.device_name() == name)
    }

    /// QEMU's machine and CPU names.
    fn machine(self) -> [&'static str; 2] {
        match self {
            Board::M0 => ["microbit", "cortex-m0"],
            Board::M4 => ["mps2-an386", "cortex-m4"],
            Board::M7 => ["mps2-an500", "cortex-m7"],
            Board::M33 => ["mps2-an505", "cortex-m33"],
        }
    }

    /// A one-line description for reports.
    pub fn describe(self) -> &'static str {
        match self {
            Board::M0 => "Cortex-M0, QEMU microbit",
            Board::M4 => "Cortex-M4F, QEMU mps2-an386",
            Board::M7 => "Cortex-M7, QEMU mps2-an500",
            Board::M33 => "Cortex-M33, QEMU mps2-an505",
        }
    }

    /// Whether the firmware carries its model in flash (the host's model must be the same).
    pub fn embeds_model(self) -> bool {
        self == Board::M0
    }

    /// Where the firmware ELF is: `$FERRITE_FIRMWARE_QEMU_M0|M4|M7|M33`, or the boards workspace's
    /// build (`scripts/build-firmware.sh`).
    pub fn firmware_path(self) -> PathBuf {
        let (var, target, binary) = match self {
            Board::M0 => (
                "FERRITE_FIRMWARE_QEMU_M0",
                "thumbv6m-none-eabi",
                "qemu-microbit",
            ),
            Board::M4 => (
                "FERRITE_FIRMWARE_QEMU_M4",
                "thumbv7em-none-eabihf",
                "qemu-mps2-an386",
            ),
            Board::M7 => (
                "FERRITE_FIRMWARE_QEMU_M7",
                "thumbv7em-none-eabihf",
                "qemu-mps2-an500",
            ),
            Board::M33 => (
                "FERRITE_FIRMWARE_QEMU_M33",
                "thumbv8m.main-none-eabihf",
                "qemu-mps2-an505",
            ),
        };
        std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../boards/target")
                .join(target)
                .join("release")
                .join(binary)
        })
    }

    /// Why this board cannot run here, if it cannot: QEMU, the firmware or the plugin missing.
    pub fn unavailable(self) -> Option<String> {
        let qemu = Command::new("qemu-system-arm")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !qemu {
            return Some("qemu-system-arm is not installed".into());
        }
        let firmware = self.firmware_path();
        if !firmware.is_file() {
            return Some(format!(
                "firmware {} not built (scripts/build-firmware.sh)",
                firmware.display()
            ));
        }
        let plugin = plugin_path();
        if !plugin.is_file() {
            return Some(format!(
                "plugin {} not built (scripts/build-firmware.sh)",
                plugin.display()
            ));
        }
        None
    }
}

/// The plugin's argument: its path and the marker's address, and with
/// `$FERRITE_QEMU_HISTOGRAM` (a folder) set, the file it writes each translation block's
/// execution count to: `<folder>/<firmware file name>.blocks`, one per firmware a command runs
/// (`ferrite bench` runs the every-kernel firmware and the model's own). `scripts/qemu_hotspots.py`
/// reads it with the same firmware: where a model's instructions go.
fn plugin_args(plugin: &Path, marker: u64, firmware: &Path) -> String {
    let mut args = format!("{},marker={marker:#x}", plugin.display());
    if let Some(folder) = std::env::var_os("FERRITE_QEMU_HISTOGRAM") {
        let name = firmware.file_name().unwrap_or_default().to_string_lossy();
        let file = Path::new(&folder).join(format!("{name}.blocks"));
        args.push_str(",histogram=");
        args.push_str(&file.to_string_lossy());
    }
    args
}

/// Where the instruction-count plugin is: `$FERRITE_QEMU_PLUGIN`, or where
/// `scripts/build-firmware.sh` puts it.
pub fn plugin_path() -> PathBuf {
    std::env::var_os("FERRITE_QEMU_PLUGIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../boards/target/qemu-plugin/libinsn_count.so")
        })
}

/// How long one QEMU run may take before it is killed: `$FERRITE_QEMU_TIMEOUT` seconds, or 300.
pub fn timeout() -> Duration {
    let secs = std::env::var("FERRITE_QEMU_TIMEOUT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    Duration::from_secs(secs)
}

/// What the firmware's ELF occupies on a board.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FirmwareSize {
    /// Code and constants in flash (vector table, `.text`, `.rodata`, `.data` initialisers).
    pub flash_bytes: u64,
    /// Static RAM (`.data`, `.bss`, `.uninit`), without the PSRAM buffers that stand in for the
    /// model's flash and the arena.
    pub static_ram_bytes: u64,
}

/// One firmware run's results.
#[derive(Clone, Debug)]
pub struct QemuRun {
    /// The outputs, in graph-output order.
    pub outputs: Vec<NpyArray>,
    /// Instructions of each inference (identical across runs: QEMU is deterministic).
    pub instructions: Vec<u64>,
    /// Deepest stack the firmware reached (boot, file I/O, inference), from stack painting.
    pub stack_bytes: u64,
    /// Stack `Session::run` itself used below its caller, from stack painting: what an
    /// application must budget for inference.
    pub inference_stack_bytes: u64,
    /// The firmware's own size.
    pub firmware: FirmwareSize,
    /// Instructions of each step of the first inference, when profiled ([`run_profiled`]).
    pub step_instructions: Vec<u64>,
}

fn device_error(message: impl Into<String>) -> RunError {
    RunError::Device(format!("qemu: {}", message.into()))
}

/// The firmware's error with the verifier's rule text put back: the QEMU firmwares leave the
/// texts out of flash (`ferrite-core` without `error-context`, 12 KB of the every-kernel M4
/// firmware) and say only an invalid model's error kind and record ("invalid model: op is
/// inconsistent with its tensors at #5"). The host runs the same verifier on the same bytes:
/// when its error is the firmware's once the text is dropped, it says the host's, which names
/// the rule ("... (Conv bias shape) at #5"); otherwise the firmware's line stands.
fn with_rule_text(error: RunError, model_bytes: &[u8]) -> RunError {
    let RunError::Device(line) = &error else {
        return error;
    };
    let Some(said) = line.strip_prefix("qemu: ") else {
        return error;
    };
    let copy = crate::aligned::AlignedBytes::from(model_bytes);
    match Model::load(copy.as_bytes()) {
        Err(host)
            if said
                == (ferrite_core::FormatError {
                    context: "",
                    ..host
                })
                .to_string() =>
        {
            device_error(host.to_string())
        }
        _ => error,
    }
}

/// The firmware's flash/RAM footprint and the address of its `ferrite_marker`.
fn inspect_firmware(elf: &[u8]) -> Result<(FirmwareSize, u64), RunError> {
    let file = object::File::parse(elf).map_err(|e| device_error(format!("firmware ELF: {e}")))?;
    let mut size = FirmwareSize::default();
    for section in file.sections() {
        match section.name().unwrap_or("") {
            ".vector_table" | ".text" | ".rodata" => size.flash_bytes += section.size(),
            ".data" => {
                size.flash_bytes += section.size();
                size.static_ram_bytes += section.size();
            }
            ".bss" | ".uninit" => size.static_ram_bytes += section.size(),
            _ => {}
        }
    }
    let marker = file
        .symbols()
        .find(|s| s.name() == Ok("ferrite_marker"))
        .map(|s| s.address())
        .ok_or_else(|| device_error("the firmware has no ferrite_marker symbol"))?;
    Ok((size, marker))
}

/// Whether `board`'s firmware links a global allocator (it must not: Ferrite needs no heap).
pub fn links_allocator(board: Board) -> Result<bool, RunError> {
    let path = board.firmware_path();
    let elf = std::fs::read(&path).map_err(|e| device_error(format!("{}: {e}", path.display())))?;
    let file = object::File::parse(&elf[..]).map_err(|e| device_error(format!("ELF: {e}")))?;
    Ok(file.symbols().any(|s| {
        s.name()
            .is_ok_and(|n| n.contains("__rust_alloc") || n.contains("__rg_alloc"))
    }))
}

/// Runs `model_bytes` (a verified `.frt`) `runs` times on `board`, stopping QEMU after
/// [`timeout`].
pub fn run(
    board: Board,
    model_bytes: &[u8],
    model: &Model<'_>,
    inputs: &[NpyArray],
    runs: usize,
) -> Result<QemuRun, RunError> {
    run_with_timeout(board, model_bytes, model, inputs, runs, timeout())
}

/// [`run`] with an explicit limit on QEMU's run time.
pub fn run_with_timeout(
    board: Board,
    model_bytes: &[u8],
    model: &Model<'_>,
    inputs: &[NpyArray],
    runs: usize,
    limit: Duration,
) -> Result<QemuRun, RunError> {
    let firmware = board.firmware_path();
    let request = Request {
        board,
        firmware: &firmware,
        runs,
        limit,
        profile: false,
    };
    launch(&request, model_bytes, model, inputs)
}

/// Runs the model `runs` times on `board` with another firmware that speaks the same protocol:
/// the per-model firmware ([`crate::host::firmware::model_firmware`], which embeds the model and
/// checks that `model_bytes` are the same).
pub fn run_firmware(
    board: Board,
    firmware: &Path,
    model_bytes: &[u8],
    model: &Model<'_>,
    inputs: &[NpyArray],
    runs: usize,
) -> Result<QemuRun, RunError> {
    let request = Request {
        board,
        firmware,
        runs,
        limit: timeout(),
        profile: false,
    };
    launch(&request, model_bytes, model, inputs)
}

/// Runs the model once with a marker around every step: [`QemuRun::step_instructions`] holds
/// the instructions of each step (the marker calls add a handful per step).
pub fn run_profiled(
    board: Board,
    model_bytes: &[u8],
    model: &Model<'_>,
    inputs: &[NpyArray],
) -> Result<QemuRun, RunError> {
    let firmware = board.firmware_path();
    let request = Request {
        board,
        firmware: &firmware,
        runs: 1,
        limit: timeout(),
        profile: true,
    };
    launch(&request, model_bytes, model, inputs)
}

/// What to run: which board and firmware, how many inferences, for how long at most, and
/// whether with a marker around every step.
struct Request<'a> {
    board: Board,
    firmware: &'a Path,
    runs: usize,
    limit: Duration,
    profile: bool,
}

fn launch(
    request: &Request<'_>,
    model_bytes: &[u8],
    model: &Model<'_>,
    inputs: &[NpyArray],
) -> Result<QemuRun, RunError> {
    let Request {
        board,
        firmware,
        runs,
        limit,
        profile,
    } = *request;
    check_inputs(model, inputs)?;
    let elf = std::fs::read(firmware).map_err(|e| {
        device_error(format!(
            "firmware {}: {e} (build it with scripts/build-firmware.sh)",
            firmware.display()
        ))
    })?;
    let (size, marker) = inspect_firmware(&elf)?;
    let plugin = plugin_path();
    if !plugin.is_file() {
        return Err(device_error(format!(
            "instruction-count plugin {} is missing (build it with scripts/build-firmware.sh)",
            plugin.display()
        )));
    }

    let dir = tempdir()?;
    let write = |name: &str, bytes: &[u8]| {
        std::fs::write(dir.join(name), bytes).map_err(|e| device_error(format!("{name}: {e}")))
    };
    write("model.frt", model_bytes)?;
    for (i, input) in inputs.iter().enumerate() {
        write(&format!("input_{i}.bin"), &input.bytes)?;
    }
    let log = dir.join("plugin.log");
    let runs = runs.max(1);
    let [machine, cpu] = board.machine();
    let mut child = Command::new("qemu-system-arm")
        .args(["-M", machine, "-cpu", cpu, "-nographic"])
        .args(["-monitor", "none", "-serial", "none"])
        .arg("-semihosting-config")
        .arg(format!(
            "enable=on,target=native,arg=ferrite,arg={},arg={runs}{}",
            dir.display(),
            if profile { ",arg=profile" } else { "" }
        ))
        .arg("-plugin")
        .arg(plugin_args(&plugin, marker, firmware))
        .args(["-d", "plugin", "-D"])
        .arg(&log)
        .arg("-kernel")
        .arg(firmware)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            device_error(format!(
                "cannot start qemu-system-arm: {e} (install it: apt-get install qemu-system-arm)"
            ))
        })?;
    let status = match child.wait_timeout(limit) {
        Ok(Some(status)) => status,
        Ok(None) => {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_dir_all(&dir);
            return Err(device_error(format!(
                "the firmware did not finish within {} s and was stopped",
                limit.as_secs()
            )));
        }
        Err(e) => return Err(device_error(format!("waiting for QEMU: {e}"))),
    };
    let read_pipe = |pipe: Option<&mut dyn std::io::Read>| {
        let mut text = String::new();
        if let Some(p) = pipe {
            let _ = p.read_to_string(&mut text);
        }
        text
    };
    let stdout = read_pipe(child.stdout.as_mut().map(|p| p as &mut dyn std::io::Read));
    let stderr = read_pipe(child.stderr.as_mut().map(|p| p as &mut dyn std::io::Read));
    let steps = if profile { model.len() } else { 0 };
    let finished = Finished {
        stdout: &stdout,
        stderr: &stderr,
        success: status.success(),
        log: &log,
    };
    let result =
        collect(&dir, model, &finished, runs, steps).map_err(|e| with_rule_text(e, model_bytes));
    let _ = std::fs::remove_dir_all(&dir);
    let (outputs, instructions, step_instructions, [stack_bytes, inference_stack_bytes]) = result?;
    Ok(QemuRun {
        outputs,
        instructions,
        stack_bytes,
        inference_stack_bytes,
        firmware: size,
        step_instructions,
    })
}

type Collected = (Vec<NpyArray>, Vec<u64>, Vec<u64>, [u64; 2]);

/// How a QEMU run ended: its console output, exit status and the plugin's log file.
struct Finished<'a> {
    stdout: &'a str,
    stderr: &'a str,
    success: bool,
    log: &'a Path,
}

/// Reads what the firmware and the plugin left behind (`steps` > 0: step markers expected).
fn collect(
    dir: &Path,
    model: &Model<'_>,
    finished: &Finished<'_>,
    runs: usize,
    steps: usize,
) -> Result<Collected, RunError> {
    let Finished {
        stdout,
        stderr,
        success,
        log,
    } = *finished;
    if !success {
        let line = stderr
            .lines()
            .find_map(|l| l.strip_prefix("error: "))
            .unwrap_or("the firmware failed without a message");
        return Err(device_error(line.to_string()));
    }
    let report = stdout
        .lines()
        .find_map(|l| l.strip_prefix("ferrite: ok "))
        .ok_or_else(|| device_error("the firmware did not report"))?;
    let field = |key: &str| -> u64 {
        report
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let stacks = [field("stack_bytes"), field("inference_stack_bytes")];
    let log = std::fs::read_to_string(log).unwrap_or_default();
    let markers: Vec<u64> = log
        .lines()
        .filter_map(|l| l.strip_prefix("ferrite-insns: marker "))
        .filter_map(|rest| rest.split_whitespace().nth(1)?.parse().ok())
        .collect();
    // Per run: one marker before, two per profiled step, one after.
    let per_run = 2 + 2 * steps;
    if markers.len() != per_run * runs {
        return Err(device_error(format!(
            "expected {} instruction-count markers, the plugin reported {}",
            per_run * runs,
            markers.len()
        )));
    }
    let instructions = markers
        .chunks_exact(per_run)
        .map(|m| m[per_run - 1] - m[0])
        .collect();
    let step_instructions = markers[1..per_run - 1]
        .chunks_exact(2)
        .map(|p| p[1] - p[0])
        .collect();
    let mut outputs = Vec::new();
    for i in 0..model.output_count() {
        let info = model
            .output(i)
            .ok_or_else(|| device_error("missing output"))?;
        let bytes = std::fs::read(dir.join(format!("output_{i}.bin")))
            .map_err(|e| device_error(format!("output_{i}.bin: {e}")))?;
        if bytes.len() != info.desc.bytes {
            return Err(device_error(format!(
                "output_{i}.bin has {} bytes, expected {}",
                bytes.len(),
                info.desc.bytes
            )));
        }
        outputs.push(NpyArray {
            dtype: info.desc.dtype,
            shape: info.desc.shape.dims().to_vec(),
            bytes,
        });
    }
    Ok((outputs, instructions, step_instructions, stacks))
}

/// A fresh directory for one run's files.
fn tempdir() -> Result<PathBuf, RunError> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "ferrite-qemu-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| device_error(format!("{}: {e}", dir.display())))?;
    Ok(dir)
}
