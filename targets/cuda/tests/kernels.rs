//! Checks that need no GPU: discovery without a driver is a typed error, and every kernel
//! compiles with NVRTC and assembles with ptxas for Jetson Orin (sm_87) and Hopper (sm_90).
//!
//! NVRTC and ptxas come from the PyPI wheels `nvidia-cuda-nvrtc-cu12` and
//! `nvidia-cuda-nvcc-cu12` (scripts/setup.sh installs them and sets `FERRITE_PTXAS` and the
//! library path); without them the compile test prints `SKIPPED:`, unless
//! `FERRITE_REQUIRE_NVRTC=1` (CI) makes that a failure.

use ferrite_cuda::{compiler_present, devices, driver_present, kernels, CudaError};
use ferrite_hal::{Error as _, ErrorKind};
use std::process::Command;

#[test]
fn discovery_without_a_driver_is_a_typed_error() {
    match devices() {
        Err(CudaError::NoDriver) => {
            assert!(!driver_present());
            assert_eq!(CudaError::NoDriver.kind(), ErrorKind::Unsupported);
        }
        Err(CudaError::NoDevice) => assert!(driver_present()),
        Err(e) => panic!("unexpected error: {e}"),
        Ok(list) => assert!(!list.is_empty()),
    }
}

#[test]
fn every_kernel_compiles_and_assembles_for_orin_and_hopper() {
    let required = std::env::var("FERRITE_REQUIRE_NVRTC").is_ok_and(|v| v == "1");
    let ptxas = std::env::var("FERRITE_PTXAS").ok();
    if !compiler_present() || ptxas.is_none() {
        assert!(!required, "NVRTC or ptxas missing (FERRITE_PTXAS)");
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "\nSKIPPED: CUDA kernel compilation (no libnvrtc or FERRITE_PTXAS)"
        );
        return;
    }
    let ptxas = ptxas.unwrap_or_default();
    let dir = std::env::temp_dir().join(format!("ferrite-cuda-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for module in &kernels::MODULES {
        for sm in ["87", "90"] {
            let ptx = kernels::compile(module, &format!("compute_{sm}"))
                .unwrap_or_else(|e| panic!("{e}"));
            for entry in module.entries {
                assert!(
                    ptx.contains(&format!(".entry {entry}")),
                    "{}: no entry {entry}",
                    module.name
                );
            }
            let path = dir.join(format!("{}_{sm}.ptx", module.name));
            std::fs::write(&path, ptx).unwrap();
            let out = Command::new(&ptxas)
                .arg(format!("-arch=sm_{sm}"))
                .arg(&path)
                .arg("-o")
                .arg(dir.join(format!("{}_{sm}.cubin", module.name)))
                .output()
                .expect("run ptxas");
            assert!(
                out.status.success(),
                "ptxas sm_{sm} {}: {}",
                module.name,
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
