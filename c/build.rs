//! The op selection the library links (`FERRITE_OPS`, a `ferrite_hal::Selection`: the
//! `ID_OPS` that `ferrite pack --emit c` writes, or the `OPS` of `--emit rust`). Unset, the
//! library links every op; set to a model's selection, only that model's decoding,
//! verification and kernels (a smaller firmware), and models using other ops are refused with
//! `FERRITE_UNSUPPORTED`.

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=FERRITE_OPS");
    let ops = match env::var("FERRITE_OPS") {
        Err(_) => u128::MAX,
        Ok(text) => {
            let text = text.trim().replace('_', "");
            let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
                Some(hex) => u128::from_str_radix(hex, 16),
                None => text.parse::<u128>(),
            };
            match parsed {
                Ok(ops) => ops,
                Err(_) => {
                    eprintln!(
                        "error: FERRITE_OPS={text:?} is not a selection (a number, 0x... in hex, as `ferrite pack --emit c` writes it)"
                    );
                    std::process::exit(1);
                }
            }
        }
    };
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    std::fs::write(
        out.join("ops.rs"),
        format!("/// The op selection this library links (`FERRITE_OPS`).\npub const OPS: ferrite_hal::Selection = {ops:#x};\n"),
    )
    .expect("OUT_DIR is writable");
}
