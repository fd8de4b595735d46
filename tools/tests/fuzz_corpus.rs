//! Replays the committed fuzz corpus (`fuzz/corpus/<target>/`, minimised by `cargo fuzz cmin`)
//! and every input a fuzzer once crashed on (`fuzz/regressions/<target>/`) through the same
//! bodies the fuzz targets run (`ferrite_tools::fuzzing`), on stable, as an ordinary test.

use std::path::PathBuf;

fn inputs(target: &str) -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let mut files = Vec::new();
    for folder in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(folder).join(target)) else {
            continue;
        };
        files.extend(entries.filter_map(|e| e.ok()).map(|e| e.path()));
    }
    files.sort();
    files
}

fn replay(target: &str, body: fn(&[u8]), at_least: usize) {
    let files = inputs(target);
    for file in &files {
        let data = std::fs::read(file).unwrap();
        let outcome = std::panic::catch_unwind(|| body(&data));
        assert!(outcome.is_ok(), "{target}: {} panics", file.display());
    }
    assert!(
        files.len() >= at_least,
        "{target}: {} corpus files, expected at least {at_least}",
        files.len()
    );
    println!("{target}: {} inputs replayed", files.len());
}

#[test]
fn the_frt_corpus_replays() {
    replay("frt", ferrite_tools::fuzzing::frt, 50);
}

#[test]
fn the_onnx_corpus_replays() {
    replay("onnx", ferrite_tools::fuzzing::onnx, 50);
}

#[test]
fn the_npy_corpus_replays() {
    replay("npy", ferrite_tools::fuzzing::npy, 20);
}
