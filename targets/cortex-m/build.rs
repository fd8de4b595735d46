//! Tells the crate which Cortex-M core family it is compiled for (stable Rust does not expose
//! ARM target features to `cfg`): `ferrite_dsp` on cores with the DSP extension (ARMv7E-M:
//! M4, M7; ARMv8-M Mainline built with `+dsp`: M33), `ferrite_fpu` on targets with a hardware
//! FPU ABI.

fn main() {
    println!("cargo:rustc-check-cfg=cfg(ferrite_dsp)");
    println!("cargo:rustc-check-cfg=cfg(ferrite_fpu)");
    let target = std::env::var("TARGET").unwrap_or_default();
    // ARMv7E-M always has the DSP extension; on ARMv8-M Mainline it is optional (`+dsp`).
    let features = std::env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
    let dsp = features.split(',').any(|f| f == "dsp");
    if target.starts_with("thumbv7em") || (target.starts_with("thumbv8m.main") && dsp) {
        println!("cargo:rustc-cfg=ferrite_dsp");
    }
    if target.starts_with("thumb") && target.ends_with("eabihf") {
        println!("cargo:rustc-cfg=ferrite_fpu");
    }
}
