//! The `.frt` format: round trip, and every kind of corrupt or hostile file gets a typed error
//! (never a panic, never an out-of-bounds read).

use ferrite_core::format::{self, section};
use ferrite_core::{Error, FormatErrorKind as K, Model, Session};
use ferrite_cpu::CpuDevice;
use ferrite_hal::{Capabilities, DType, Device, ErrorKind, Location, OpKind, OpSet, Plan};
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::compile::onnx::build::{border_quantized_model, tiny_mlp};
use ferrite_tools::compile::pack::{pack, PackOptions, Packed};

fn packed() -> Packed {
    pack(&tiny_mlp(), &PackOptions::default()).expect("tiny model packs")
}

fn load(bytes: &[u8]) -> Result<(), ferrite_core::FormatError> {
    let aligned = AlignedBytes::from(bytes);
    Model::load(aligned.as_bytes()).map(|_| ())
}

fn kind_of(bytes: &[u8]) -> K {
    load(bytes).expect_err("the file must be refused").kind
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// Re-seals a modified file with a valid CRC, so the verifier's deeper checks are reached.
fn reseal(b: &mut [u8]) {
    let crc = crc32fast::hash(&b[format::CRC_START..]);
    put_u32(b, 12, crc);
}

/// Byte offset of section `kind`.
fn section_offset(b: &[u8], kind: u32) -> usize {
    let count = u32_at(b, 16) as usize;
    (0..count)
        .map(|i| format::HEADER_BYTES + i * format::SECTION_ENTRY_BYTES)
        .find(|&e| u32_at(b, e) == kind)
        .map(|e| u32_at(b, e + 4) as usize)
        .expect("section present")
}

#[test]
fn round_trip_preserves_the_plan() {
    let p = packed();
    let aligned = AlignedBytes::from(&p.bytes[..]);
    let model = Model::load(aligned.as_bytes()).unwrap();
    assert_eq!(model.arena_bytes(), p.memory.arena_bytes);
    assert_eq!(model.arena_lower_bound(), p.memory.lower_bound);
    assert_eq!(model.len(), p.graph.ops.len());
    for (i, op) in p.graph.ops.iter().enumerate() {
        let step = model.step(i).unwrap();
        assert_eq!(step.op, op.op);
        assert_eq!(model.op_name(i), Some(op.name.as_str()));
        for (k, t) in op.outputs.iter().enumerate() {
            let desc = step.outputs.get(k).unwrap();
            let tensor = &p.graph.tensors[*t];
            assert_eq!(desc.shape.dims(), &tensor.shape[..]);
            assert_eq!(desc.dtype, tensor.dtype);
            assert_eq!(desc.location, Location::Arena(p.memory.offset(*t).unwrap()));
        }
    }
    let input = model.input(0).unwrap();
    assert_eq!(
        (input.name, input.desc.dtype, input.desc.shape.dims()),
        ("x", DType::F32, &[1usize, 4][..])
    );
    assert_eq!(model.output(0).unwrap().name, "y");
}

#[test]
fn wrong_magic_is_refused() {
    let mut b = packed().bytes;
    b[0] = b'X';
    assert_eq!(kind_of(&b), K::BadMagic);
}

#[test]
fn newer_major_version_is_refused_older_minor_rules_hold() {
    let mut b = packed().bytes;
    b[4..6].copy_from_slice(&2u16.to_le_bytes());
    reseal(&mut b);
    assert_eq!(kind_of(&b), K::UnsupportedVersion { major: 2, minor: 0 });
    let msg = load(&b).unwrap_err().to_string();
    assert!(msg.contains("2.0") && !msg.contains('\n'), "{msg}");
    // A newer minor version with an unknown extra section still loads.
    let mut b = packed().bytes;
    b[6..8].copy_from_slice(&7u16.to_le_bytes());
    reseal(&mut b);
    assert!(load(&b).is_ok());
}

#[test]
fn bad_crc_is_refused() {
    let mut b = packed().bytes;
    let last = b.len() - 1;
    b[last] ^= 0x5a;
    assert!(matches!(kind_of(&b), K::ChecksumMismatch { .. }));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
    /// The core's 64-byte-table CRC is the standard CRC-32 on every input.
    #[test]
    fn the_cores_crc_is_the_standard_crc32(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..4096)) {
        proptest::prop_assert_eq!(ferrite_core::crc::crc32(&bytes), crc32fast::hash(&bytes));
    }
}

/// The tiny MLP's op kinds (MatMul + Add + Relu fuse into one Gemm), and the same without Softmax.
const TINY_MLP_OPS: ferrite_hal::Selection = ferrite_hal::op_mask(&[OpKind::Gemm, OpKind::Softmax]);
const WITHOUT_SOFTMAX: ferrite_hal::Selection = ferrite_hal::op_mask(&[OpKind::Gemm]);
/// The tiny MLP's kinds with its fused Relu, and with Tanh instead.
const WITH_RELU: ferrite_hal::Selection =
    ferrite_hal::with_activations(TINY_MLP_OPS, &[ferrite_hal::Activation::Relu]);
const WITH_TANH_ONLY: ferrite_hal::Selection =
    ferrite_hal::with_activations(TINY_MLP_OPS, &[ferrite_hal::Activation::Tanh]);

#[test]
fn a_build_selecting_other_ops_refuses_the_model_and_runs_its_own() {
    let b = packed().bytes;
    let aligned = AlignedBytes::from(&b[..]);
    let model = Model::load(aligned.as_bytes()).expect("load");
    let kinds: Vec<OpKind> = (0..model.len())
        .map(|i| model.step(i).expect("step").op.kind())
        .collect();
    assert_eq!(ferrite_hal::op_mask(&kinds), TINY_MLP_OPS, "{kinds:?}");
    // A build with the model's own kinds loads it, and every step decodes as in the full build.
    let selected = Model::<TINY_MLP_OPS>::load_selected(aligned.as_bytes())
        .expect("a build with the model's kinds loads it");
    for i in 0..model.len() {
        assert_eq!(selected.step(i).map(|s| s.op), model.step(i).map(|s| s.op));
    }
    // Without Softmax: refused at load, naming the step.
    let err = Model::<WITHOUT_SOFTMAX>::load_selected(aligned.as_bytes())
        .expect_err("a build without Softmax refuses the model");
    assert_eq!(err.kind, K::NotLinked);
    assert!(
        err.to_string().contains("not linked into this build"),
        "{err}"
    );
    // Activations narrow the same way: the fused Relu must be selected.
    assert!(Model::<WITH_RELU>::load_selected(aligned.as_bytes()).is_ok());
    let err = Model::<WITH_TANH_ONLY>::load_selected(aligned.as_bytes())
        .expect_err("a build without Relu refuses the model");
    assert_eq!(err.kind, K::NotLinked);
    assert!(
        err.to_string().contains("activation is not linked"),
        "{err}"
    );
}

#[test]
fn every_truncation_is_refused() {
    let b = packed().bytes;
    for len in 0..b.len() {
        assert!(
            load(&b[..len]).is_err(),
            "truncated to {len} bytes was accepted"
        );
    }
}

#[test]
fn out_of_range_offsets_and_indices_are_refused() {
    let original = packed().bytes;
    let tensors = section_offset(&original, section::TENSORS);
    // A tensor's offset far outside the arena / weights.
    let mut b = original.clone();
    put_u32(&mut b, tensors + 12, 0x7fff_fff0);
    reseal(&mut b);
    assert!(matches!(kind_of(&b), K::OutOfRange | K::Overflow));
    // An op operand index past the tensor table.
    let mut b = original.clone();
    let operands = section_offset(&b, section::OPERANDS);
    put_u32(&mut b, operands, 9999);
    reseal(&mut b);
    assert_eq!(kind_of(&b), K::OutOfRange);
    // A section running past the end of the file.
    let mut b = original.clone();
    put_u32(&mut b, format::HEADER_BYTES + 8, 0x00ff_ffff);
    reseal(&mut b);
    assert_eq!(kind_of(&b), K::Truncated);
    // The graph's input index past the table.
    let mut b = original;
    let graph = section_offset(&b, section::GRAPH);
    put_u32(&mut b, graph + format::GRAPH_HEADER_BYTES, 4242);
    reseal(&mut b);
    assert_eq!(kind_of(&b), K::OutOfRange);
}

#[test]
fn overflowing_shapes_are_refused() {
    let mut b = packed().bytes;
    let tensors = section_offset(&b, section::TENSORS);
    b[tensors + 1] = 8; // rank 8
    for axis in 0..8 {
        put_u32(&mut b, tensors + 24 + 4 * axis, u32::MAX);
    }
    reseal(&mut b);
    assert_eq!(kind_of(&b), K::Overflow);
}

#[test]
fn inconsistent_ops_are_refused() {
    // Output shape of the Gemm no longer matches its inputs.
    let p = packed();
    let mut b = p.bytes.clone();
    let tensors = section_offset(&b, section::TENSORS);
    let aligned = AlignedBytes::from(&b[..]);
    let model = Model::load(aligned.as_bytes()).unwrap();
    let out = model.step(0).unwrap().outputs.index(0).unwrap() as usize;
    let rec = tensors + out * format::TENSOR_RECORD_BYTES;
    put_u32(&mut b, rec + 24 + 4, 2); // [1, 3] -> [1, 2]
    put_u32(&mut b, rec + 16, 8); // keep bytes consistent with the shape
    reseal(&mut b);
    assert_eq!(kind_of(&b), K::InvalidOp);
    // Unknown op kind.
    let mut b = p.bytes;
    let ops = section_offset(&b, section::OPS);
    b[ops..ops + 2].copy_from_slice(&999u16.to_le_bytes());
    reseal(&mut b);
    assert_eq!(kind_of(&b), K::InvalidValue);
}

#[test]
fn every_single_byte_corruption_is_handled() {
    // Flip each byte, re-seal, and load (and run, when it still verifies): nothing may panic.
    let b = packed().bytes;
    let mut accepted = 0;
    for at in format::CRC_START..b.len() {
        let mut c = b.clone();
        c[at] ^= 0xff;
        reseal(&mut c);
        let aligned = AlignedBytes::from(&c[..]);
        if let Ok(model) = Model::load(aligned.as_bytes()) {
            accepted += 1;
            let mut arena = AlignedBytes::zeroed(model.arena_bytes());
            if let Ok(mut s) = Session::new(&model, CpuDevice::new(), arena.as_mut_bytes()) {
                for i in 0..model.input_count() {
                    let n = model.input(i).unwrap().desc.bytes;
                    let _ = s.set_input(i, &vec![0u8; n]);
                }
                let _ = s.run();
            }
        }
    }
    // Names and weights are free-form, so some flips are harmless; most must be caught.
    assert!(
        accepted < b.len() / 2,
        "{accepted} corrupted files verified"
    );
}

#[test]
fn session_errors_are_typed() {
    let p = packed();
    let aligned = AlignedBytes::from(&p.bytes[..]);
    let model = Model::load(aligned.as_bytes()).unwrap();
    let needed = model.arena_bytes();
    // Arena too small: the error says how many bytes are needed.
    let mut small = AlignedBytes::zeroed(needed - 16);
    let e = Session::new(&model, CpuDevice::new(), small.as_mut_bytes())
        .err()
        .unwrap();
    assert!(matches!(e, Error::ArenaTooSmall { needed: n, .. } if n == needed));
    assert!(e.to_string().contains(&needed.to_string()));
    assert_eq!(ferrite_hal::Error::kind(&e), ErrorKind::OutOfMemory);
    // Misaligned arena.
    let mut big = AlignedBytes::zeroed(needed + 16);
    let e = Session::new(&model, CpuDevice::new(), &mut big.as_mut_bytes()[1..])
        .err()
        .unwrap();
    assert!(matches!(e, Error::ArenaMisaligned { .. }));
    // Inputs: wrong size, not written, outputs before a run.
    let mut arena = AlignedBytes::zeroed(needed);
    let mut s = Session::new(&model, CpuDevice::new(), arena.as_mut_bytes()).unwrap();
    assert!(matches!(s.output(0), Err(Error::NotRun)));
    assert!(matches!(s.run(), Err(Error::InputNotSet { index: 0 })));
    assert!(matches!(
        s.set_input(0, &[0u8; 3]),
        Err(Error::InputSize {
            expected: 16,
            got: 3,
            ..
        })
    ));
    assert!(matches!(
        s.set_input(5, &[0u8; 16]),
        Err(Error::NoSuchTensor { index: 5, count: 1 })
    ));
    s.set_input_f32(0, &[1.0, 2.0, 3.0, 4.0]).unwrap();
    s.run().unwrap();
    let y = s.output_f32(0).unwrap();
    assert!((y.iter().sum::<f32>() - 1.0).abs() < 1e-6);
    // Inputs must be written again before the next run.
    assert!(matches!(s.run(), Err(Error::InputNotSet { index: 0 })));
}

/// A CPU device that claims to lack Gemm and Softmax, to test capability checks.
struct Limited(CpuDevice);

impl Device for Limited {
    type Error = ferrite_cpu::CpuError;
    type Program = <CpuDevice as Device>::Program;
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            ops: OpSet::empty().with(OpKind::Unary, &[DType::F32]),
            max_arena_bytes: 1 << 20,
            host_arena: true,
        }
    }
    fn prepare(&mut self, plan: &dyn Plan) -> Result<Self::Program, Self::Error> {
        self.0.prepare(plan)
    }
    fn execute(
        &mut self,
        p: &mut Self::Program,
        plan: &dyn Plan,
        arena: &mut [u8],
    ) -> Result<(), Self::Error> {
        self.0.execute(p, plan, arena)
    }
}

#[test]
fn missing_ops_are_all_named_at_session_creation() {
    let p = packed();
    let aligned = AlignedBytes::from(&p.bytes[..]);
    let model = Model::load(aligned.as_bytes()).unwrap();
    let mut arena = AlignedBytes::zeroed(model.arena_bytes());
    let e = Session::new(&model, Limited(CpuDevice::new()), arena.as_mut_bytes())
        .err()
        .unwrap();
    let msg = e.to_string();
    assert!(
        msg.contains("Gemm(float32)") && msg.contains("Softmax(float32)"),
        "{msg}"
    );
    assert_eq!(ferrite_hal::Error::kind(&e), ErrorKind::Unsupported);
}

#[test]
fn null_device_sees_every_step() {
    let p = packed();
    let aligned = AlignedBytes::from(&p.bytes[..]);
    let model = Model::load(aligned.as_bytes()).unwrap();
    let mut arena = AlignedBytes::zeroed(model.arena_bytes());
    let mut device = ferrite_hal::null::NullDevice::default();
    {
        let mut s = Session::new(&model, &mut device, arena.as_mut_bytes()).unwrap();
        s.set_input(0, &[0u8; 16]).unwrap();
        s.run().unwrap();
    }
    assert_eq!(
        (device.prepared, device.executed, device.steps_seen),
        (1, 1, model.len())
    );
}

#[test]
fn include_model_is_aligned() {
    let bytes: &'static [u8] = ferrite_core::include_model!("../../README.md");
    assert_eq!(bytes.as_ptr() as usize % 16, 0);
    assert!(bytes.starts_with(b"# Ferrite"));
}

/// A small model touching many kernels: Conv (im2col and depthwise), MaxPool, Pad, Slice,
/// Transpose, Concat, Gather, ReduceMean, Gemm.
fn many_ops_model() -> Vec<u8> {
    use ferrite_tools::compile::onnx::build::{attr_int, attr_ints, attr_string, ModelBuilder, D};
    use ferrite_tools::compile::onnx::proto::data_type::FLOAT;
    let w: Vec<f32> = (0..4 * 2 * 9).map(|i| (i % 7) as f32 * 0.1 - 0.3).collect();
    let dw: Vec<f32> = (0..4 * 9).map(|i| (i % 5) as f32 * 0.2 - 0.4).collect();
    ModelBuilder::new(18)
        .input("x", FLOAT, &[D::N(1), D::N(2), D::N(6), D::N(6)])
        .init_f32("w", &[4, 2, 3, 3], &w)
        .init_f32("dw", &[4, 1, 3, 3], &dw)
        .init_i64("pads", &[8], &[0, 0, 1, 2, 0, 0, 2, 1])
        .init_i64("starts", &[2], &[1, 5])
        .init_i64("ends", &[2], &[5, -10])
        .init_i64("axes", &[2], &[2, 3])
        .init_i64("steps", &[2], &[2, -1])
        .init_i64("idx", &[2], &[1, -1])
        .init_i64("raxes", &[1], &[3])
        .node(
            "Conv",
            "conv",
            &["x", "w"],
            &["c"],
            vec![attr_ints("pads", &[1, 1, 1, 1])],
        )
        .node(
            "Conv",
            "dwconv",
            &["c", "dw"],
            &["d"],
            vec![attr_int("group", 4), attr_string("auto_pad", "SAME_UPPER")],
        )
        .node(
            "MaxPool",
            "pool",
            &["d"],
            &["p"],
            vec![
                attr_ints("kernel_shape", &[2, 2]),
                attr_ints("strides", &[2, 2]),
                attr_int("ceil_mode", 1),
            ],
        )
        .node(
            "Pad",
            "pad",
            &["p", "pads"],
            &["q"],
            vec![attr_string("mode", "reflect")],
        )
        .node(
            "Slice",
            "slice",
            &["q", "starts", "ends", "axes", "steps"],
            &["s"],
            vec![],
        )
        .node(
            "Transpose",
            "transpose",
            &["s"],
            &["t"],
            vec![attr_ints("perm", &[0, 1, 3, 2])],
        )
        .node(
            "Concat",
            "concat",
            &["t", "t"],
            &["u"],
            vec![attr_int("axis", 1)],
        )
        .node(
            "Gather",
            "gather",
            &["u", "idx"],
            &["v"],
            vec![attr_int("axis", 1)],
        )
        .node(
            "ReduceMean",
            "reduce",
            &["v", "raxes"],
            &["y"],
            vec![attr_int("keepdims", 0)],
        )
        .output("y")
        .encode()
}

/// A model of the issue-6 ops with run-time data in their indices: LSTM, Resize, Cast,
/// integer Mod, GatherElements and ScatterND on a run-time index input, TopK, CumSum, Einsum.
fn breadth_ops_model() -> Vec<u8> {
    use ferrite_tools::compile::onnx::build::{attr_int, attr_string, ModelBuilder, D};
    use ferrite_tools::compile::onnx::proto::data_type::{FLOAT, INT64};
    let w: Vec<f32> = (0..8 * 3).map(|i| (i % 5) as f32 * 0.1 - 0.2).collect();
    let r: Vec<f32> = (0..8 * 2).map(|i| (i % 3) as f32 * 0.1 - 0.1).collect();
    ModelBuilder::new(17)
        .input("x", FLOAT, &[D::N(4), D::N(1), D::N(3)])
        .input("i", INT64, &[D::N(1), D::N(1), D::N(2)])
        .init_f32("w", &[1, 8, 3], &w)
        .init_f32("r", &[1, 8, 2], &r)
        .init_f32("roi", &[0], &[])
        .init_f32("scales", &[3], &[1.0, 1.0, 2.0])
        .init_i64("k", &[1], &[2])
        .init_i64("axis", &[], &[0])
        .init_i64("three", &[], &[3])
        .node(
            "LSTM",
            "lstm",
            &["x", "w", "r"],
            &["y", "h"],
            vec![attr_int("hidden_size", 2)],
        )
        .node(
            "Resize",
            "resize",
            &["h", "roi", "scales"],
            &["z"],
            vec![attr_string("mode", "linear")],
        )
        .node(
            "Cast",
            "cast",
            &["z"],
            &["zi"],
            vec![attr_int("to", INT64 as i64)],
        )
        .node("Mod", "mod", &["zi", "three"], &["m"], vec![])
        .node(
            "Cast",
            "back",
            &["m"],
            &["mf"],
            vec![attr_int("to", FLOAT as i64)],
        )
        .node(
            "TopK",
            "topk",
            &["z", "k"],
            &["tv", "ti"],
            vec![attr_int("axis", -1)],
        )
        .node("CumSum", "cumsum", &["tv", "axis"], &["cs"], vec![])
        .node(
            "GatherElements",
            "ge",
            &["cs", "i"],
            &["g"],
            vec![attr_int("axis", 2)],
        )
        .node(
            "Einsum",
            "einsum",
            &["g", "g"],
            &["e"],
            vec![attr_string("equation", "abc,abc->ab")],
        )
        .output("e")
        .output("ti")
        .output("mf")
        .encode()
}

/// Loads and runs every single-byte corruption of `bytes`: each gets a typed error or runs.
fn survives_every_byte_corruption(b: &[u8]) {
    for at in format::CRC_START..b.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut c = b.to_vec();
            c[at] ^= flip;
            reseal(&mut c);
            let aligned = AlignedBytes::from(&c[..]);
            let Ok(model) = Model::load(aligned.as_bytes()) else {
                continue;
            };
            let mut arena = AlignedBytes::zeroed(model.arena_bytes());
            let Ok(mut s) = Session::new(&model, CpuDevice::new(), arena.as_mut_bytes()) else {
                continue;
            };
            for i in 0..model.input_count() {
                let n = model.input(i).unwrap().desc.bytes;
                let _ = s.set_input(i, &vec![0x3fu8; n]);
            }
            let _ = s.run();
        }
    }
}

#[test]
fn breadth_ops_model_runs_and_survives_every_byte_corruption() {
    let p = pack(&breadth_ops_model(), &PackOptions::default()).expect("packs");
    for op in [
        "Recurrent",
        "Resample",
        "Cast",
        "TopK",
        "CumSum",
        "GatherElements",
        "MatMul",
    ] {
        assert!(
            p.report.ops.contains_key(op),
            "{op} missing: {:?}",
            p.report.ops
        );
    }
    let aligned = AlignedBytes::from(&p.bytes[..]);
    let model = Model::load(aligned.as_bytes()).unwrap();
    let mut arena = AlignedBytes::zeroed(model.arena_bytes());
    let mut s = Session::new(&model, CpuDevice::new(), arena.as_mut_bytes()).unwrap();
    let x: Vec<f32> = (0..12).map(|i| i as f32 * 0.3 - 1.0).collect();
    s.set_input_f32(0, &x).unwrap();
    let indices: Vec<u8> = [1i64, -2].iter().flat_map(|v| v.to_le_bytes()).collect();
    s.set_input(1, &indices).unwrap();
    s.run().unwrap();
    assert!(s.output_f32(0).unwrap().iter().all(|v| v.is_finite()));
    // An index out of range at run time is an error, not a crash.
    let bad: Vec<u8> = [1i64, 7].iter().flat_map(|v| v.to_le_bytes()).collect();
    s.set_input(1, &bad).unwrap();
    let e = s.run().expect_err("index 7 of 2");
    assert_eq!(ferrite_hal::Error::kind(&e), ErrorKind::InvalidInput, "{e}");
    survives_every_byte_corruption(&p.bytes);
}

#[test]
fn many_ops_model_runs_and_survives_every_byte_corruption() {
    let p = pack(&many_ops_model(), &PackOptions::default()).expect("packs");
    let aligned = AlignedBytes::from(&p.bytes[..]);
    let model = Model::load(aligned.as_bytes()).unwrap();
    let x: Vec<f32> = (0..72).map(|i| i as f32 * 0.05 - 1.0).collect();
    let mut arena = AlignedBytes::zeroed(model.arena_bytes());
    let mut s = Session::new(&model, CpuDevice::new(), arena.as_mut_bytes()).unwrap();
    s.set_input_f32(0, &x).unwrap();
    s.run().unwrap();
    assert!(s.output_f32(0).unwrap().iter().all(|v| v.is_finite()));
    survives_every_byte_corruption(&p.bytes);
}

/// A 3×3 convolution quantized to int8 by post-training quantization: one QConv step.
fn quantized_conv() -> Packed {
    use ferrite_tools::compile::onnx::build::{attr_ints, ModelBuilder, D};
    use ferrite_tools::compile::onnx::proto::data_type;
    use ferrite_tools::host::npy::NpyArray;
    let w: Vec<f32> = (0..4 * 2 * 9).map(|i| (i % 7) as f32 * 0.1 - 0.3).collect();
    let onnx = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(1), D::N(2), D::N(6), D::N(6)])
        .init_f32("w", &[4, 2, 3, 3], &w)
        .node(
            "Conv",
            "conv",
            &["x", "w"],
            &["y"],
            vec![attr_ints("pads", &[1, 1, 1, 1])],
        )
        .output("y")
        .encode();
    let (plan, passes) =
        ferrite_tools::compile::pack::to_plan(&onnx, &PackOptions::default()).unwrap();
    let sample = NpyArray {
        dtype: DType::F32,
        shape: vec![1, 2, 6, 6],
        bytes: (0..72)
            .flat_map(|i| (i as f32 * 0.05 - 1.0).to_le_bytes())
            .collect(),
    };
    let method = ferrite_tools::compile::ptq::Method::MinMax;
    let (int8, _) = ferrite_tools::compile::ptq::quantize_plan(
        plan,
        passes,
        &[vec![sample]],
        method,
        &mut |_, _, _| {},
    )
    .unwrap();
    assert!(
        int8.report.ops.contains_key("QConv"),
        "{:?}",
        int8.report.ops
    );
    int8
}

/// An integer convolution whose planned scratch is removed is refused at load: the kernels rely
/// on it.
#[test]
fn an_integer_convolution_without_its_scratch_is_refused() {
    let int8 = quantized_conv();
    load(&int8.bytes).expect("the int8 model loads");
    let ops = section_offset(&int8.bytes, section::OPS);
    let count = int8.graph.ops.len();
    let qconv = (0..count)
        .map(|i| ops + i * format::OP_RECORD_BYTES)
        .find(|&r| u32_at(&int8.bytes, r) & 0xffff == OpKind::QConv.code() as u32)
        .expect("a QConv record");
    let mut b = int8.bytes.clone();
    put_u32(&mut b, qconv + 16, u32::MAX);
    reseal(&mut b);
    let e = load(&b).expect_err("refused");
    assert!(e.to_string().contains("QConv scratch is missing"), "{e}");
}

/// An int8 QConv whose zero point or clamp is patched to a value that only an int16 operand
/// could hold is refused at load: the record decoder accepts any 8- or 16-bit value (the 16 × 8
/// scheme shares it), so the verifier's check against the operands' type is what stands
/// between such a file and an int8 kernel reading past its lookup tables.
#[test]
fn an_int8_step_with_sixteen_bit_zero_points_is_refused() {
    let int8 = quantized_conv();
    load(&int8.bytes).expect("the int8 model loads");
    let ops = section_offset(&int8.bytes, section::OPS);
    let params = section_offset(&int8.bytes, section::PARAMS);
    let record = (0..int8.graph.ops.len())
        .map(|i| ops + i * format::OP_RECORD_BYTES)
        .find(|&r| u32_at(&int8.bytes, r) & 0xffff == OpKind::QConv.code() as u32)
        .expect("a QConv record");
    // QConv's words: window (10), group, then input zero, output zero, min, max.
    let word = |i: usize| params + 4 * (u32_at(&int8.bytes, record + 8) as usize + i);
    let (min, max) = (
        u32_at(&int8.bytes, word(13)) as i32,
        u32_at(&int8.bytes, word(14)) as i32,
    );
    assert!((-128..=127).contains(&min) && min <= max && max <= 127);
    let cases = [
        ("input zero point 1000", 11, 1000, "input zero point"),
        ("input zero point -129", 11, -129, "input zero point"),
        ("output zero point 300", 12, 300, "output clamp"),
        ("clamp minimum -20000", 13, -20000, "output clamp"),
        ("clamp maximum 128", 14, 128, "output clamp"),
    ];
    for (what, index, value, message) in cases {
        let mut b = int8.bytes.clone();
        put_u32(&mut b, word(index), value as u32);
        reseal(&mut b);
        let e = load(&b).expect_err(what);
        assert!(e.to_string().contains(message), "{what}: {e}");
    }
}

/// A MatMulInteger whose zero points are swapped (A's now has one value per column of B, and
/// B's type) is refused at load: the kernel indexes zero points by row and column.
#[test]
fn an_integer_matmul_with_swapped_zero_points_is_refused() {
    use ferrite_tools::compile::onnx::build::{ModelBuilder, D};
    use ferrite_tools::compile::onnx::proto::{data_type, TensorProto};
    let onnx = ModelBuilder::new(13)
        .input("a", data_type::UINT8, &[D::N(2), D::N(3)])
        .input("za", data_type::UINT8, &[])
        .init(TensorProto {
            name: "b".into(),
            dims: vec![3, 4],
            data_type: data_type::INT8,
            int32_data: (0..12).map(|i| i * 9 - 50).collect(),
            ..Default::default()
        })
        .init(TensorProto {
            name: "zb".into(),
            dims: vec![4],
            data_type: data_type::INT8,
            int32_data: vec![1, -2, 3, -4],
            ..Default::default()
        })
        .node(
            "MatMulInteger",
            "mm",
            &["a", "b", "za", "zb"],
            &["y"],
            vec![],
        )
        .output("y")
        .encode();
    let packed = pack(&onnx, &PackOptions::default()).unwrap();
    load(&packed.bytes).expect("the model loads");
    let ops = section_offset(&packed.bytes, section::OPS);
    let operands = section_offset(&packed.bytes, section::OPERANDS);
    let record = (0..packed.graph.ops.len())
        .map(|i| ops + i * format::OP_RECORD_BYTES)
        .find(|&r| u32_at(&packed.bytes, r) & 0xffff == OpKind::MatMulInteger.code() as u32)
        .expect("a MatMulInteger record");
    let first = operands + 4 * u32_at(&packed.bytes, record + 4) as usize;
    let mut b = packed.bytes.clone();
    let (za, zb) = (u32_at(&b, first + 8), u32_at(&b, first + 12));
    put_u32(&mut b, first + 8, zb);
    put_u32(&mut b, first + 12, za);
    reseal(&mut b);
    let e = load(&b).expect_err("refused");
    assert!(e.to_string().contains("must share one element type"), "{e}");
}

/// A convolution whose fused activation is patched to one that may not be fused (Exp) is
/// refused at load: kernels inline only the fusable activations.
#[test]
fn an_unfusable_fused_activation_is_refused() {
    use ferrite_tools::compile::onnx::build::{ModelBuilder, D};
    use ferrite_tools::compile::onnx::proto::data_type;
    let onnx = ModelBuilder::new(13)
        .input("x", data_type::FLOAT, &[D::N(1), D::N(1), D::N(4), D::N(4)])
        .init_f32("w", &[2, 1, 3, 3], &[0.25; 18])
        .node("Conv", "conv", &["x", "w"], &["c"], vec![])
        .node("Relu", "relu", &["c"], &["y"], vec![])
        .output("y")
        .encode();
    let packed = pack(&onnx, &PackOptions::default()).unwrap();
    load(&packed.bytes).expect("the model loads");
    let ops = section_offset(&packed.bytes, section::OPS);
    let params = section_offset(&packed.bytes, section::PARAMS);
    let record = (0..packed.graph.ops.len())
        .map(|i| ops + i * format::OP_RECORD_BYTES)
        .find(|&r| u32_at(&packed.bytes, r) & 0xffff == OpKind::Conv.code() as u32)
        .expect("a Conv record");
    // Conv's words: window (10), group, then the activation's code and two parameters.
    let code_at = params + 4 * (u32_at(&packed.bytes, record + 8) as usize + 11);
    assert_eq!(u32_at(&packed.bytes, code_at), 1, "the fused Relu");
    let mut b = packed.bytes.clone();
    put_u32(&mut b, code_at, 8); // Exp
    reseal(&mut b);
    let e = load(&b).expect_err("refused");
    assert!(e.to_string().contains("fused activation"), "{e}");
}

/// A build selecting a `Binary` op's arithmetic runs it as the full build does, and refuses at
/// load a model whose `Binary` step computes another (its kernel is not linked).
#[test]
fn a_build_selecting_other_binary_ops_refuses_the_model() {
    use ferrite_hal::op::BinaryOp;
    use ferrite_hal::{op_mask, selection, with_binary_ops, Selection};
    use ferrite_tools::compile::onnx::build::{ModelBuilder, D};
    use ferrite_tools::compile::onnx::proto::data_type::FLOAT;
    let onnx = ModelBuilder::new(13)
        .input("a", FLOAT, &[D::N(2), D::N(3)])
        .input("b", FLOAT, &[D::N(1), D::N(3)])
        .node("Sub", "sub", &["a", "b"], &["y"], vec![])
        .output("y")
        .encode();
    let packed = pack(&onnx, &PackOptions::default()).expect("pack");
    let bytes = AlignedBytes::from(&packed.bytes[..]);
    const SUB: Selection = with_binary_ops(
        selection(&[OpKind::Binary], &[DType::F32]),
        &[BinaryOp::Sub],
    );
    const MUL_ONLY: Selection = with_binary_ops(op_mask(&[OpKind::Binary]), &[BinaryOp::Mul]);
    let err = Model::<MUL_ONLY>::load_selected(bytes.as_bytes())
        .expect_err("a build without Sub refuses the model");
    assert_eq!(err.kind, K::NotLinked);
    assert!(err.to_string().contains("binary op is not linked"), "{err}");

    let a = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let b = [0.5f32, 1.0, 1.5];
    fn run<const OPS: Selection>(bytes: &[u8], a: &[f32], b: &[f32]) -> Vec<f32> {
        let model = Model::<OPS>::load_selected(bytes).expect("load");
        let mut arena = vec![0u8; model.arena_bytes() + 16];
        let start = arena.as_ptr().align_offset(16);
        let device = CpuDevice::<OPS>::selected();
        let mut session = Session::new(&model, device, &mut arena[start..]).expect("session");
        session.set_input_f32(0, a).unwrap();
        session.set_input_f32(1, b).unwrap();
        session.run().unwrap();
        session.output_f32(0).unwrap().to_vec()
    }
    let selected = run::<SUB>(bytes.as_bytes(), &a, &b);
    assert_eq!(
        selected,
        run::<{ ferrite_hal::ALL_OPS }>(bytes.as_bytes(), &a, &b)
    );
    assert_eq!(selected, [0.5, 1.0, 1.5, 3.5, 4.0, 4.5]);
}

#[test]
fn every_bad_quantization_record_is_refused() {
    let good = pack(&border_quantized_model(), &PackOptions::default())
        .expect("packs")
        .bytes;
    load(&good).expect("the model verifies");
    let at = section_offset(&good, section::QUANTIZATION);
    // (what, word of the input's record, value)
    let cases = [
        ("flags 2", 0, 2),
        ("not quantized, yet a scale", 0, 0),
        ("a NaN scale", 1, f32::NAN.to_bits()),
        ("an infinite scale", 1, f32::INFINITY.to_bits()),
        ("a negative scale", 1, (-0.5f32).to_bits()),
        ("a zero scale", 1, 0),
        ("a zero point past int8", 2, 128),
        ("a zero point below int8", 2, (-129i32) as u32),
        ("reserved bytes", 3, 1),
    ];
    for (what, word, value) in cases {
        let mut bad = good.clone();
        put_u32(&mut bad, at + 4 * word, value);
        reseal(&mut bad);
        assert_eq!(kind_of(&bad), K::InvalidValue, "{what}");
    }
    // A section of the wrong length (one record short).
    let mut short = good.clone();
    let count = u32_at(&short, 16) as usize;
    let entry = (0..count)
        .map(|i| format::HEADER_BYTES + i * format::SECTION_ENTRY_BYTES)
        .find(|&e| u32_at(&short, e) == section::QUANTIZATION)
        .expect("entry");
    put_u32(
        &mut short,
        entry + 8,
        format::QUANTIZATION_RECORD_BYTES as u32,
    );
    reseal(&mut short);
    assert_eq!(kind_of(&short), K::InvalidValue);
    survives_every_byte_corruption(&good);
}

#[test]
fn every_reserved_tensor_byte_is_refused() {
    let good = packed().bytes;
    load(&good).expect("the model verifies");
    let at = section_offset(&good, section::TENSORS);
    let count = u32_at(&good, 16) as usize;
    let length = (0..count)
        .map(|i| format::HEADER_BYTES + i * format::SECTION_ENTRY_BYTES)
        .find(|&e| u32_at(&good, e) == section::TENSORS)
        .map(|e| u32_at(&good, e + 8) as usize)
        .expect("entry");
    let records = length / format::TENSOR_RECORD_BYTES;
    assert!(records > 0);
    let mut checked = 0;
    for t in 0..records {
        let rec = at + t * format::TENSOR_RECORD_BYTES;
        let rank = good[rec + 1] as usize;
        // Byte 3, word 20 and everything past the rank's dims.
        let reserved = [3]
            .into_iter()
            .chain(20..24)
            .chain(24 + 4 * rank..format::TENSOR_RECORD_BYTES);
        for byte in reserved {
            let mut bad = good.clone();
            bad[rec + byte] = 0x80;
            reseal(&mut bad);
            assert_eq!(kind_of(&bad), K::InvalidValue, "tensor {t}, byte {byte}");
            checked += 1;
        }
    }
    assert!(checked >= records * (1 + 4 + 8));
}
