//! Ferrite firmware for QEMU's mps2-an386 (Cortex-M4F), the `qemu-m4` device: the model is read
//! from the host into PSRAM (standing in for flash), the arena lives in PSRAM too.
//! The protocol is `ferrite-qemu-firmware`'s.
#![no_std]
#![no_main]

ferrite_qemu_firmware::host_model_firmware!(
    section: ".psram",
    model: 8 << 20,
    arena: (8 << 20) - 4096
);
