// Each test crate that includes this module uses only part of it.
#![allow(dead_code)]

//! What the C tests share: the digits demo packed, its held-out images and labels, and how
//! many of them the same model classifies right through `ferrite-core` in Rust.

use ferrite_core::{Model, Session};
use ferrite_cpu::CpuDevice;
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::compile::pack::{pack, PackOptions};
use std::path::{Path, PathBuf};

/// The digits demo: the packed model, the held-out images (float32 bytes, one after another),
/// their labels, and the number Rust classifies right.
pub struct Digits {
    pub frt: AlignedBytes,
    pub images: Vec<u8>,
    pub labels: Vec<u8>,
    pub correct: usize,
}

/// The repository's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

impl Digits {
    /// Packs `demo/digits.onnx`, reads the held-out set, and classifies it on the CPU device.
    pub fn load() -> Digits {
        let root = root();
        let onnx = std::fs::read(root.join("demo/digits.onnx")).expect("demo/digits.onnx");
        let frt =
            AlignedBytes::from(&pack(&onnx, &PackOptions::default()).expect("pack").bytes[..]);
        let images =
            ferrite_tools::host::npy::read(&root.join("demo/digits_test_x.npy")).expect("images");
        let labels =
            ferrite_tools::host::npy::read(&root.join("demo/digits_test_y.npy")).expect("labels");
        let labels: Vec<u8> = labels
            .bytes
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes(b.try_into().unwrap()) as u8)
            .collect();
        let model = Model::load(frt.as_bytes()).expect("load");
        let mut arena = AlignedBytes::zeroed(model.arena_bytes());
        let mut session =
            Session::new(&model, CpuDevice::new(), arena.as_mut_bytes()).expect("session");
        let image_bytes = images.bytes.len() / labels.len();
        let mut correct = 0;
        for (image, &label) in images.bytes.chunks_exact(image_bytes).zip(&labels) {
            session.set_input(0, image).expect("input");
            session.run().expect("run");
            let scores = session.output_f32(0).expect("output");
            // The first of equal scores, as the C examples pick.
            let best = (0..scores.len()).fold(0, |b, c| if scores[c] > scores[b] { c } else { b });
            correct += (best == label as usize) as usize;
        }
        Digits {
            frt,
            images: images.bytes,
            labels,
            correct,
        }
    }

    /// Bytes of one image.
    pub fn image_bytes(&self) -> usize {
        self.images.len() / self.labels.len()
    }

    /// The model.
    pub fn model(&self) -> Model<'_> {
        Model::load(self.frt.as_bytes()).expect("load")
    }

    /// What the C programs print for Rust's count: `(correct of n)`.
    pub fn expected(&self) -> String {
        format!("({} of {})", self.correct, self.labels.len())
    }
}
