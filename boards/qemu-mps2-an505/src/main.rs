//! Ferrite firmware for QEMU's mps2-an505 (Cortex-M33 with the DSP extension), the `qemu-m33`
//! device: the model is read from the host into the 16 MiB PSRAM at 0x80000000 (standing in for
//! flash), the arena lives there too. The protocol is `ferrite-qemu-firmware`'s.
#![no_std]
#![no_main]

ferrite_qemu_firmware::host_model_firmware!(
    section: ".bigram",
    model: 8 << 20,
    arena: (8 << 20) - 4096
);
