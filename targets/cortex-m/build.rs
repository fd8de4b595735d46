//! Tells the crate which Cortex-M core family it is compiled for (stable Rust does not expose
//! ARM target features to `cfg`): `ferrite_dsp` on cores with the DSP extension (ARMv7E-M:
//! M4, M7; ARMv8-M Mainline built with `+dsp`: M33), `ferrite_fpu` on targets with a hardware
//! FPU ABI. `FERRITE_PORTABLE_KERNELS=1` in the build environment leaves the DSP kernels out
//! (to measure what they gain: `scripts/footprint.sh` builds such a firmware).

fn main() {
    println!("cargo:rustc-check-cfg=cfg(ferrite_dsp)");
    println!("cargo:rustc-check-cfg=cfg(ferrite_fpu)");
    println!("cargo:rerun-if-env-changed=FERRITE_PORTABLE_KERNELS");
    let portable_only = std::env::var("FERRITE_PORTABLE_KERNELS").is_ok_and(|v| v == "1");
    let target = std::env::var("TARGET").unwrap_or_default();
    // ARMv7E-M always has the DSP extension; on ARMv8-M Mainline it is optional: `+dsp` among
    // the target features, or a core that has it (`-C target-cpu=cortex-m33` and later). Stable
    // Rust leaves ARM features out of `CARGO_CFG_TARGET_FEATURE`, so the flags are read too.
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    let features = std::env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let dsp = features.split(',').any(|f| f == "dsp") || rustflags_select_dsp(&flags);
    let has_dsp = target.starts_with("thumbv7em") || (target.starts_with("thumbv8m.main") && dsp);
    // The DSP kernels are integer kernels: only with the `quantized` feature.
    let quantized = std::env::var_os("CARGO_FEATURE_QUANTIZED").is_some();
    if has_dsp && !portable_only && quantized {
        println!("cargo:rustc-cfg=ferrite_dsp");
    }
    if target.starts_with("thumb") && target.ends_with("eabihf") {
        println!("cargo:rustc-cfg=ferrite_fpu");
    }
}

/// Whether the rustflags (`CARGO_ENCODED_RUSTFLAGS`: separated by 0x1f) enable the DSP extension:
/// `target-feature=+dsp` (not followed by a later `-dsp`), or a `target-cpu` of an ARMv8-M
/// Mainline core that always has it.
fn rustflags_select_dsp(flags: &str) -> bool {
    const DSP_CORES: [&str; 4] = ["cortex-m33", "cortex-m35p", "cortex-m55", "cortex-m85"];
    let mut dsp = false;
    let mut args = flags.split('\u{1f}');
    while let Some(arg) = args.next() {
        // `-C name=value` or `-Cname=value`.
        let setting = match arg.strip_prefix("-C") {
            Some("") => args.next().unwrap_or_default(),
            Some(rest) => rest,
            None => continue,
        };
        if let Some(cpu) = setting.strip_prefix("target-cpu=") {
            dsp = DSP_CORES.contains(&cpu);
        } else if let Some(list) = setting.strip_prefix("target-feature=") {
            for feature in list.split(',') {
                match feature {
                    "+dsp" => dsp = true,
                    "-dsp" => dsp = false,
                    _ => {}
                }
            }
        }
    }
    dsp
}
