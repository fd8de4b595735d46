//! `ferrite.h` is what cbindgen makes of `src/lib.rs` today: CI fails when the checked-in header
//! is stale. `FERRITE_UPDATE_HEADER=1` rewrites it instead.

use std::path::Path;

#[test]
fn the_checked_in_header_is_current() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen reads the crate")
        .write(&mut generated);
    let generated = String::from_utf8(generated).expect("UTF-8");
    let path = dir.join("ferrite.h");
    if std::env::var_os("FERRITE_UPDATE_HEADER").is_some() {
        std::fs::write(&path, &generated).expect("write ferrite.h");
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "c/ferrite.h is stale: run `FERRITE_UPDATE_HEADER=1 cargo test -p ferrite-c --test header`"
    );
}
