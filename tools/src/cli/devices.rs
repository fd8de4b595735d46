//! `ferrite devices`: the devices this build can run on, and how each is reached.

use super::common::*;
use std::process::ExitCode;

pub(crate) fn cmd_devices() -> CliResult {
    println!(
        "cpu        host CPU, Rust kernels (float and int8), SIMD build: {}",
        ferrite_cpu::CpuDevice::simd()
    );
    #[cfg(feature = "vulkan")]
    match ferrite_vulkan::VulkanDevice::list() {
        Ok(list) if list.is_empty() => {
            println!("vulkan     none: the Vulkan loader reports no device")
        }
        Ok(list) => {
            for d in list {
                println!(
                    "vulkan:{:<3} {} ({}), driver {}, Vulkan {}, {} MiB device memory, storage buffers up to {} MiB{}",
                    d.index,
                    d.name,
                    d.kind,
                    d.driver,
                    d.api_version,
                    d.memory_bytes >> 20,
                    d.max_storage_buffer_bytes >> 20,
                    if d.has_compute { "" } else { ", no compute queue" }
                );
            }
        }
        Err(e) => println!("vulkan     unavailable: {e}"),
    }
    #[cfg(not(feature = "vulkan"))]
    println!("vulkan     not built in (feature `vulkan`)");
    match ferrite_cuda::devices() {
        Ok(list) => {
            for d in list {
                println!(
                    "cuda:{:<5} {}, compute capability {}.{}, {} MiB",
                    d.index,
                    d.name,
                    d.compute_capability.0,
                    d.compute_capability.1,
                    d.memory_bytes >> 20
                );
            }
        }
        Err(e) => println!("cuda       unavailable: {e}"),
    }
    for board in ferrite_tools::host::qemu::Board::ALL {
        match board.unavailable() {
            None => println!(
                "{:<10} Ferrite firmware on {}{}",
                board.device_name(),
                board.describe(),
                if board.embeds_model() {
                    " (runs the digits demo model, embedded in flash)"
                } else {
                    ""
                }
            ),
            Some(why) => println!("{:<10} unavailable: {why}", board.device_name()),
        }
    }
    Ok(ExitCode::SUCCESS)
}
