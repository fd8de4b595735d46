//! The C firmware (`boards/c-firmware`: `main.c`, its startup, linker script and Makefile),
//! built with Debian's arm-none-eabi GCC against the Cortex-M4F static library and the digits
//! model from `ferrite pack --emit c`, classifies the 360 held-out images on QEMU's mps2-an386:
//! the same accuracy as the same model through `ferrite-core` in Rust. Needs arm-none-eabi-gcc
//! and qemu-system-arm (`scripts/setup.sh` installs them); without them it prints `SKIPPED:`,
//! and fails instead when `FERRITE_REQUIRE_QEMU_M4=1` (CI).

mod common;

use common::{root, Digits};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn available(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn the_c_firmware_classifies_the_digits_on_qemu_like_rust() {
    for tool in ["arm-none-eabi-gcc", "qemu-system-arm", "make"] {
        if !available(tool) {
            if std::env::var_os("FERRITE_REQUIRE_QEMU_M4").is_some_and(|v| v == "1") {
                panic!("{tool} is not installed (scripts/setup.sh installs it)");
            }
            println!("SKIPPED: C firmware: {tool} is not installed");
            return;
        }
    }
    let root = root();
    let digits = Digits::load();
    let model = digits.model();
    let (images, labels) = (&digits.images, &digits.labels);
    let per_image = digits.image_bytes() / 4;

    // The firmware's generated sources: the model, the images.
    let build = std::env::temp_dir().join(format!("ferrite-c-firmware-{}", std::process::id()));
    std::fs::create_dir_all(&build).unwrap();
    let (header, source) = ferrite_tools::compile::emit::c_module(&model, "digits", "digits.onnx");
    std::fs::write(build.join("digits.h"), header).unwrap();
    std::fs::write(build.join("digits.c"), source).unwrap();
    let n = labels.len();
    std::fs::write(
        build.join("images.h"),
        format!(
            "#include <stdint.h>\n#define IMAGE_COUNT {n}u\n\
             extern const float images[IMAGE_COUNT][{per_image}];\n\
             extern const uint8_t labels[IMAGE_COUNT];\n"
        ),
    )
    .unwrap();
    let mut c =
        format!("#include \"images.h\"\nconst float images[IMAGE_COUNT][{per_image}] = {{\n");
    for image in images.chunks_exact(4 * per_image) {
        c += "    {";
        for v in image.chunks_exact(4) {
            let v = f32::from_le_bytes(v.try_into().unwrap());
            write!(c, "{v:?}f, ").unwrap();
        }
        c += "},\n";
    }
    c += "};\nconst uint8_t labels[IMAGE_COUNT] = {";
    for l in labels {
        write!(c, "{l}, ").unwrap();
    }
    c += "};\n";
    std::fs::write(build.join("images.c"), c).unwrap();

    let ops = format!(
        "{:#x}",
        ferrite_tools::compile::emit::model_selection(&model)
    );
    let want = digits.expected();
    // The library with every op, and built for this model alone (`FERRITE_OPS`, the header's
    // `DIGITS_OPS`): the same classifications, in less flash.
    let mut flash = Vec::new();
    for (label, selection, target_dir) in [
        ("every op", None, root.join("target")),
        (
            "digits' ops only",
            Some(ops.as_str()),
            root.join("target/c-digits-ops"),
        ),
    ] {
        let lib = static_library(&root, selection, &target_dir);
        let out_dir = build.join(if selection.is_some() {
            "selected"
        } else {
            "all"
        });
        std::fs::create_dir_all(&out_dir).unwrap();
        let (text, bytes) = run_firmware(&root, &build, &out_dir, &lib);
        // Besides the model and the 360 images: the library, main.c and the startup code.
        let data = (model.file_bytes() + images.len() + labels.len()) as u64;
        println!(
            "C firmware ({label}) on qemu-m4: {bytes} B of flash, {} B besides the model and the images: {}",
            bytes.saturating_sub(data),
            text.trim()
        );
        assert!(
            text.contains(&want),
            "C firmware ({label}): {text} Rust: {want}"
        );
        flash.push(bytes);
    }
    assert!(
        flash[1] < flash[0],
        "the selected library is not smaller: {flash:?}"
    );
}

/// Builds the Cortex-M4F static library (up to date in seconds when scripts/test.sh built it),
/// with `FERRITE_OPS` when given, into `target_dir`; returns its path.
fn static_library(root: &Path, ops: Option<&str>, target_dir: &Path) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(root)
        .args(["build", "-q", "--release", "-p", "ferrite-c"])
        .args(["--no-default-features", "--features", "cortex-m"])
        .args(["--target", "thumbv7em-none-eabihf", "--target-dir"])
        .arg(target_dir)
        .env_remove("FERRITE_OPS");
    if let Some(ops) = ops {
        command.env("FERRITE_OPS", ops);
    }
    let built = command.status().expect("cargo");
    assert!(
        built.success(),
        "the Cortex-M4F static library did not build"
    );
    target_dir.join("thumbv7em-none-eabihf/release/libferrite_c.a")
}

/// Links the firmware (sources in `build`, output in `out_dir`) against `lib`, runs it on QEMU
/// and returns what it printed and its flash bytes (text + data).
fn run_firmware(root: &Path, build: &Path, out_dir: &Path, lib: &Path) -> (String, u64) {
    let make = Command::new("make")
        .current_dir(root.join("boards/c-firmware"))
        .arg(format!("ROOT={}", root.display()))
        .arg(format!("BUILD={}", build.display()))
        .arg(format!("OUT={}", out_dir.display()))
        .arg(format!("LIB={}", lib.display()))
        .output()
        .expect("make");
    assert!(
        make.status.success(),
        "make failed:\n{}{}",
        String::from_utf8_lossy(&make.stdout),
        String::from_utf8_lossy(&make.stderr)
    );
    let mut qemu = Command::new("qemu-system-arm")
        .args([
            "-M",
            "mps2-an386",
            "-cpu",
            "cortex-m4",
            "-nographic",
            "-monitor",
            "none",
        ])
        .args([
            "-serial",
            "none",
            "-semihosting-config",
            "enable=on,target=native",
            "-kernel",
        ])
        .arg(out_dir.join("firmware.elf"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("qemu-system-arm");
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while qemu.try_wait().expect("qemu").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = qemu.kill();
            panic!("the C firmware did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = qemu.wait_with_output().expect("qemu output");
    // QEMU writes the semihosting console to stdout or stderr, depending on what they are.
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    let elf = std::fs::read(out_dir.join("firmware.elf")).expect("firmware.elf");
    (text, flash_bytes(&elf))
}

/// The flash an ELF takes: its loadable, non-writable-only sections that are stored (text,
/// rodata, and data's initial values).
fn flash_bytes(elf: &[u8]) -> u64 {
    use object::{Object, ObjectSection, SectionFlags};
    let file = object::File::parse(elf).expect("an ELF");
    file.sections()
        .filter(|s| match s.flags() {
            SectionFlags::Elf { sh_flags } => {
                sh_flags & u64::from(object::elf::SHF_ALLOC) != 0
                    && s.kind() != object::SectionKind::UninitializedData
            }
            _ => false,
        })
        .map(|s| s.size())
        .sum()
}
