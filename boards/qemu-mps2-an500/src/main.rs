//! Ferrite firmware for QEMU's mps2-an500 (Cortex-M7), the `qemu-m7` device: the model is read
//! from the host into the 16 MiB RAM at 0x60000000 (standing in for flash), the arena lives
//! there too. The protocol is `ferrite-qemu-firmware`'s.
#![no_std]
#![no_main]

ferrite_qemu_firmware::host_model_firmware!(
    section: ".bigram",
    model: 8 << 20,
    arena: (8 << 20) - 4096
);
