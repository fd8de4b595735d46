//! The host C examples, built with the system's C compiler against the host static library,
//! classify the digits demo's 360 held-out images with the same accuracy as the same model
//! through `ferrite-core` in Rust: `examples/host.c` reading the `.frt` from a file,
//! `examples/embedded.c` with the model compiled in by `ferrite pack --emit c`.

use ferrite_core::{Model, Session};
use ferrite_cpu::CpuDevice;
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::pack::{pack, PackOptions};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `libferrite_c.a` of this build: beside the test binary's `deps` folder.
fn static_library() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    profile.join("libferrite_c.a")
}

#[test]
fn the_host_c_example_classifies_the_digits_like_rust() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let onnx = std::fs::read(root.join("demo/digits.onnx")).expect("demo/digits.onnx");
    let frt = pack(&onnx, &PackOptions::default()).expect("pack").bytes;
    let images = ferrite_tools::npy::read(&root.join("demo/digits_test_x.npy")).expect("images");
    let labels = ferrite_tools::npy::read(&root.join("demo/digits_test_y.npy")).expect("labels");
    let labels: Vec<u8> = labels
        .bytes
        .chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()) as u8)
        .collect();

    // The Rust side: the same .frt on the CPU device.
    let aligned = AlignedBytes::from(&frt[..]);
    let model = Model::load(aligned.as_bytes()).expect("load");
    let mut arena = AlignedBytes::zeroed(model.arena_bytes());
    let mut session =
        Session::new(&model, CpuDevice::new(), arena.as_mut_bytes()).expect("session");
    let image_bytes = images.bytes.len() / labels.len();
    let mut correct = 0;
    for (image, &label) in images.bytes.chunks_exact(image_bytes).zip(&labels) {
        session.set_input(0, image).expect("input");
        session.run().expect("run");
        let scores = session.output_f32(0).expect("output");
        let best = (0..scores.len())
            .max_by(|&a, &b| scores[a].total_cmp(&scores[b]).then(b.cmp(&a)))
            .unwrap();
        correct += (best == label as usize) as usize;
    }

    // The C side.
    let dir = std::env::temp_dir().join(format!("ferrite-c-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("digits.frt"), &frt).unwrap();
    std::fs::write(dir.join("images.f32"), &images.bytes).unwrap();
    std::fs::write(dir.join("labels.u8"), &labels).unwrap();
    let library = static_library();
    assert!(library.is_file(), "{} not built", library.display());
    let exe = dir.join("host");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let build = Command::new(&cc)
        .args(["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(root.join("c"))
        .arg(root.join("c/examples/host.c"))
        .arg(&library)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&exe)
        .output()
        .expect("a C compiler");
    assert!(
        build.status.success(),
        "{cc} failed:\n{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let run = Command::new(&exe)
        .arg(dir.join("digits.frt"))
        .arg(dir.join("images.f32"))
        .arg(dir.join("labels.u8"))
        .output()
        .expect("run the example");
    let stdout = String::from_utf8_lossy(&run.stdout);
    println!("{stdout}");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let want = format!("({correct} of {})", labels.len());
    assert!(stdout.contains(&want), "C: {stdout} Rust: {want}");
    assert!(correct * 100 > 95 * labels.len(), "accuracy {correct}");

    // The model compiled in: `--emit c`'s digits.h and digits.c with examples/embedded.c.
    let (header, source) = ferrite_tools::emit::c_module(&model, "digits", "digits.onnx");
    std::fs::write(dir.join("digits.h"), header).unwrap();
    std::fs::write(dir.join("digits.c"), source).unwrap();
    let embedded = dir.join("embedded");
    let build = Command::new(&cc)
        .args(["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(root.join("c"))
        .arg("-I")
        .arg(&dir)
        .arg(root.join("c/examples/embedded.c"))
        .arg(dir.join("digits.c"))
        .arg(&library)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&embedded)
        .output()
        .expect("a C compiler");
    assert!(
        build.status.success(),
        "{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let run = Command::new(&embedded)
        .arg(dir.join("images.f32"))
        .arg(dir.join("labels.u8"))
        .output()
        .expect("run the embedded example");
    let stdout = String::from_utf8_lossy(&run.stdout);
    println!("{stdout}");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(stdout.contains(&want), "C: {stdout} Rust: {want}");
}
