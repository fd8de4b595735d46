//! The host C examples, built with the system's C compiler against the host static library,
//! classify the digits demo's 360 held-out images with the same accuracy as the same model
//! through `ferrite-core` in Rust: `examples/host.c` reading the `.frt` from a file,
//! `examples/embedded.c` with the model compiled in by `ferrite pack --emit c`.

mod common;

use common::{root, Digits};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The host `libferrite_c.a` of this build's profile, built here: `cargo test` builds the
/// library only as an rlib for the tests to link.
fn static_library() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = Command::new(cargo);
    build
        .current_dir(root())
        .args(["build", "-q", "-p", "ferrite-c"]);
    if profile.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    let built = build.status().expect("cargo");
    assert!(built.success(), "the host static library did not build");
    profile.join("libferrite_c.a")
}

/// Compiles `sources` (with `c/` and `include` on the include path) and the host static library
/// into `exe`, then runs it with `args`; its standard output.
fn build_and_run(sources: &[PathBuf], include: &Path, exe: &Path, args: &[PathBuf]) -> String {
    let library = static_library();
    assert!(library.is_file(), "{} not built", library.display());
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let build = Command::new(&cc)
        .args(["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(root().join("c"))
        .arg("-I")
        .arg(include)
        .args(sources)
        .arg(&library)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(exe)
        .output()
        .expect("a C compiler");
    assert!(
        build.status.success(),
        "{cc} failed:\n{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let run = Command::new(exe)
        .args(args)
        .output()
        .expect("run the example");
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    println!("{stdout}");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    stdout
}

#[test]
fn the_host_c_examples_classify_the_digits_like_rust() {
    let digits = Digits::load();
    assert!(
        digits.correct * 100 > 95 * digits.labels.len(),
        "accuracy {}",
        digits.correct
    );
    let dir = std::env::temp_dir().join(format!("ferrite-c-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (frt, images, labels) = (
        dir.join("digits.frt"),
        dir.join("images.f32"),
        dir.join("labels.u8"),
    );
    std::fs::write(&frt, digits.frt.as_bytes()).unwrap();
    std::fs::write(&images, &digits.images).unwrap();
    std::fs::write(&labels, &digits.labels).unwrap();

    // The model read from its file.
    let host = [root().join("c/examples/host.c")];
    let args = [frt, images.clone(), labels.clone()];
    let out = build_and_run(&host, &dir, &dir.join("host"), &args);
    assert!(
        out.contains(&digits.expected()),
        "C: {out} Rust: {}",
        digits.expected()
    );

    // The model compiled in: `--emit c`'s digits.h and digits.c.
    let (header, source) =
        ferrite_tools::compile::emit::c_module(&digits.model(), "digits", "digits.onnx");
    std::fs::write(dir.join("digits.h"), header).unwrap();
    std::fs::write(dir.join("digits.c"), source).unwrap();
    let embedded = [root().join("c/examples/embedded.c"), dir.join("digits.c")];
    let out = build_and_run(&embedded, &dir, &dir.join("embedded"), &[images, labels]);
    assert!(
        out.contains(&digits.expected()),
        "C: {out} Rust: {}",
        digits.expected()
    );
}
