//! Per-model firmware: `boards/template` built around one packed model, so that `ferrite bench
//! --device qemu-m4` reports the flash, RAM and stack of the firmware a user would flash for that
//! model (only its op kinds decoded, verified and linked), next to the every-kernel firmware.
//!
//! The build writes `model.frt` and the module `ferrite pack --emit rust` writes into a folder
//! named after the model's CRC under `boards/target/model-firmware/`, builds the template there
//! (`FERRITE_MODEL_RS` points at the module; every model shares one cargo target directory, so
//! only the template itself is compiled again, a few seconds) and copies the ELF next to the
//! model. Cargo decides what is stale, so a changed runtime is never measured from an old build.

use ferrite_core::Model;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The boards workspace: `$FERRITE_BOARDS`, or `boards/` of the source tree this tool was built
/// from.
pub fn boards_dir() -> PathBuf {
    std::env::var_os("FERRITE_BOARDS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../boards"))
}

/// How the per-model firmware is optimised (the boards workspace's cargo profiles).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirmwareProfile {
    /// `release` (what the every-kernel firmware uses too): the firmware's own crates at
    /// opt-level "s", the kernels' crates at 3, fat LTO.
    Speed,
    /// `size`: the firmware's own crates at opt-level "z" (the kernels' still at 3), fat LTO;
    /// a little less flash, more instructions.
    Size,
}

impl FirmwareProfile {
    /// The cargo profile's name (also its output folder).
    pub fn cargo_profile(self) -> &'static str {
        match self {
            FirmwareProfile::Speed => "release",
            FirmwareProfile::Size => "size",
        }
    }
}

impl FirmwareProfile {
    /// `$FERRITE_MODEL_FIRMWARE_PROFILE` (`release` or `size`), else [`FirmwareProfile::Speed`].
    pub fn from_env() -> FirmwareProfile {
        match std::env::var("FERRITE_MODEL_FIRMWARE_PROFILE").as_deref() {
            Ok("size") => FirmwareProfile::Size,
            _ => FirmwareProfile::Speed,
        }
    }
}

/// The per-model firmware's ELF for `model` (its verified bytes `model_bytes`), optimised as
/// [`FirmwareProfile::from_env`] says. The error says why it could not be built (no source
/// tree, no cargo, a failed build).
pub fn model_firmware(model_bytes: &[u8], model: &Model<'_>) -> Result<PathBuf, String> {
    model_firmware_with(model_bytes, model, FirmwareProfile::from_env())
}

/// [`model_firmware`] with the given optimisation profile.
pub fn model_firmware_with(
    model_bytes: &[u8],
    model: &Model<'_>,
    profile: FirmwareProfile,
) -> Result<PathBuf, String> {
    let boards = boards_dir();
    let template = boards.join("template");
    if !template.join("Cargo.toml").is_file() {
        return Err(format!(
            "the per-model firmware is built from Ferrite's source tree, and {} is missing (set FERRITE_BOARDS to its boards/ folder)",
            template.display()
        ));
    }
    let root = boards.join("target/model-firmware");
    let folder = root.join(format!(
        "{:08x}-{}",
        ferrite_core::crc::crc32(model_bytes),
        model_bytes.len()
    ));
    let elf = folder.join(format!("firmware-{}.elf", profile.cargo_profile()));
    std::fs::create_dir_all(&folder).map_err(|e| format!("{}: {e}", folder.display()))?;
    std::fs::write(folder.join("model.frt"), model_bytes)
        .map_err(|e| format!("{}: {e}", folder.display()))?;
    let module = crate::compile::emit::rust_module(model, "model.frt", "the model benchmarked");
    let module_path = folder.join("model.rs");
    std::fs::write(&module_path, module).map_err(|e| format!("{}: {e}", module_path.display()))?;

    // One build at a time: every model shares the template's output path.
    let lock_path = root.join("build.lock");
    let lock = std::fs::File::create(&lock_path)
        .and_then(|f| f.lock().map(|()| f))
        .map_err(|e| format!("{}: {e}", lock_path.display()))?;
    let target_dir = root.join("build");
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo
        .args([
            "build",
            "--profile",
            profile.cargo_profile(),
            "--quiet",
            "--target-dir",
        ])
        .arg(&target_dir)
        .current_dir(&template)
        .env("FERRITE_MODEL_RS", &module_path);
    // What a surrounding cargo (a test run, a script) set for its own build must not leak in.
    for var in [
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_PROFILE_RELEASE_OPT_LEVEL",
        "CARGO_PROFILE_RELEASE_LTO",
        "CARGO_PROFILE_RELEASE_DEBUG",
    ] {
        cargo.env_remove(var);
    }
    let output = cargo
        .output()
        .map_err(|e| format!("cannot run cargo to build the per-model firmware: {e}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let first = stderr
            .lines()
            .find(|l| l.starts_with("error"))
            .unwrap_or("cargo failed");
        return Err(format!("building the per-model firmware failed: {first}"));
    }
    let built = target_dir
        .join("thumbv7em-none-eabihf")
        .join(profile.cargo_profile())
        .join("ferrite-template");
    std::fs::copy(&built, &elf).map_err(|e| format!("{}: {e}", built.display()))?;
    drop(lock);
    Ok(elf)
}
