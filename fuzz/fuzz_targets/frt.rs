//! Fuzz target: `ferrite_tools::fuzzing::frt` (see its doc and docs/security.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ferrite_tools::fuzzing::frt(data));
