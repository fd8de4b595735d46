//! Helpers the CLI test files share: run the binary, make scratch folders, check one-line errors;
//! and, in [`models`], those of the lowering tests.
#![allow(dead_code)] // each test file uses some of them

pub mod models;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `ferrite ARGS`.
pub fn ferrite(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .args(args)
        .output()
        .expect("the binary runs")
}

/// A fresh scratch folder.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ferrite-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A path as `&str`.
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Asserts a failed command: non-zero exit, one `error:` line on stderr containing `needle`.
pub fn assert_error(out: &Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "expected failure, got success; stderr: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "panicked: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "expected one line, got: {stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    assert!(lines[0].contains(needle), "'{needle}' not in: {stderr}");
}
