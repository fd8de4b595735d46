//! Operator descriptors: what one step of a plan computes, with its parameters.
//!
//! These are *normalised* operators: the planner has already resolved ONNX's opset differences,
//! `auto_pad`, negative axes, transposed Gemm operands and so on, so a device implements one
//! well-defined form per operator. Tensor shapes are not stored here; they come with the step's
//! tensors. Parameters travel as 32-bit words ([`Op::encode`] / [`Op::decode`]); decoding checks
//! every value that can be checked without shapes (strides ≥ 1, known enum codes, ...).
//!
//! One module per op family ([`Family`]): `conv`, `matmul`, `elementwise`, `pool`, `movement`,
//! `indexing`, `reduce`, `quantize`, `logic` and `recurrent` each hold their kinds' descriptors,
//! and `codec/<family>.rs` their word encoding; the table of kinds (`kinds.rs`, `op_kinds!`)
//! names each kind's family, [`Op`] (`variants.rs`) holds the descriptors, and [`Op::encode`] /
//! [`Op::decode_selected`] here dispatch on the family. The modules import one way: kinds and
//! descriptors, then `Op`, then the codecs, then this dispatch.

use crate::words::{WordReader, WordWriter};
use crate::ALL_OPS;

mod codec;
mod fields;
mod kinds;
mod variants;

mod conv;
mod elementwise;
mod indexing;
mod logic;
mod matmul;
mod movement;
mod pool;
mod quantize;
mod recurrent;
mod reduce;

pub use conv::{Conv, ConvInteger, ConvTranspose, QConv, Window};
pub use elementwise::{BinaryOp, QAdd, QMul, QSoftmax, QADD_LEFT_SHIFT, QSOFTMAX_TABLE_BITS};
pub use indexing::Reduction;
pub use kinds::{Category, Family, OpKind};
pub use logic::{CompareOp, Detect, LogicalOp};
pub use matmul::{Dft, Gemm, QGemmWeights, MAX_DFT_LENGTH};
pub use movement::{AxisArray, PadMode};
pub use pool::{Pool, QAvgPool, QGlobalAvgPool};
pub use quantize::{Requantize, Rescale};
pub use recurrent::{Cell, Recurrent};
pub use reduce::{
    ArgIndex, ReduceOp, TreeAggregate, TreeEnsemble, TREE_BRANCH_MODES, TREE_LEAF,
    TREE_MISSING_TRUE,
};
pub use variants::Op;

impl Op {
    /// Encodes the parameters as words (each family's module writes its own).
    pub fn encode(&self, w: &mut WordWriter) {
        match self.kind().family() {
            Family::Conv => codec::conv::encode(self, w),
            Family::MatMul => codec::matmul::encode(self, w),
            Family::Elementwise => codec::elementwise::encode(self, w),
            Family::Pool => codec::pool::encode(self, w),
            Family::Movement => codec::movement::encode(self, w),
            Family::Indexing => codec::indexing::encode(self, w),
            Family::Reduce => codec::reduce::encode(self, w),
            Family::Quantize => codec::quantize::encode(self, w),
            Family::Logic => codec::logic::encode(self, w),
            Family::Recurrent => codec::recurrent::encode(self, w),
        }
    }

    /// Decodes the parameters of an op of kind `kind`; `None` if a value is out of its domain or
    /// the word count is wrong.
    pub fn decode(kind: OpKind, r: &mut WordReader<'_>) -> Option<Op> {
        Op::decode_selected::<ALL_OPS>(kind, r)
    }

    /// As [`Op::decode`], for a build that links only the kinds in kind mask `OPS` (a
    /// firmware's selection, `ferrite pack --emit rust`'s `OPS`): any other kind is `None`, and
    /// its decoding code is not linked.
    pub fn decode_selected<const OPS: crate::Selection>(
        kind: OpKind,
        r: &mut WordReader<'_>,
    ) -> Option<Op> {
        // Each family's module decodes its kinds, those `OPS` selects.
        let op = match kind.family() {
            Family::Conv => codec::conv::decode::<OPS>(kind, r),
            Family::MatMul => codec::matmul::decode::<OPS>(kind, r),
            Family::Elementwise => codec::elementwise::decode::<OPS>(kind, r),
            Family::Pool => codec::pool::decode::<OPS>(kind, r),
            Family::Movement => codec::movement::decode::<OPS>(kind, r),
            Family::Indexing => codec::indexing::decode::<OPS>(kind, r),
            Family::Reduce => codec::reduce::decode::<OPS>(kind, r),
            Family::Quantize => codec::quantize::decode::<OPS>(kind, r),
            Family::Logic => codec::logic::decode::<OPS>(kind, r),
            Family::Recurrent => codec::recurrent::decode::<OPS>(kind, r),
        }?;
        r.is_done().then_some(op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Activation;

    fn round_trip(op: Op) {
        let mut w = WordWriter::default();
        op.encode(&mut w);
        let words = w.words().unwrap();
        let mut bytes = [0u8; 4 * crate::words::MAX_PARAM_WORDS];
        for (i, v) in words.iter().enumerate() {
            bytes[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
        }
        let mut r = WordReader::new(&bytes[..4 * words.len()]);
        assert_eq!(Op::decode(op.kind(), &mut r), Some(op));
    }

    #[test]
    fn ops_round_trip() {
        let window = Window {
            kernel: [3, 3],
            stride: [2, 1],
            dilation: [1, 2],
            pads: [1, 0, 1, 2],
        };
        round_trip(Op::Conv(Conv {
            window,
            group: 4,
            activation: Activation::Clip { min: 0.0, max: 6.0 },
        }));
        round_trip(Op::Slice {
            starts: [1, 2, 0, 0, 0, 0, 0, 0],
            steps: [-1, 2, 1, 1, 1, 1, 1, 1],
        });
        round_trip(Op::Pad {
            mode: PadMode::Reflect,
            begins: [0, 1, 2, 3, 0, 0, 0, 0],
            ends: [3, 2, 1, 0, 0, 0, 0, 0],
            value: 0.5,
        });
        round_trip(Op::MaxPool(Pool {
            window,
            ceil_mode: true,
            count_include_pad: false,
        }));
        round_trip(Op::Reduce {
            op: ReduceOp::Max,
            axes: 0b101,
        });
        let requantize = Requantize {
            input_zero: -3,
            output_zero: 5,
            min: -128,
            max: 127,
        };
        let r = |m, s| Rescale {
            multiplier: m,
            shift: s,
        };
        round_trip(Op::QConv(QConv {
            window,
            group: 2,
            requantize,
        }));
        round_trip(Op::QGemm(requantize));
        round_trip(Op::QAdd(QAdd {
            a: r(1 << 30, -1),
            b: r(1_500_000_000, 0),
            output: r(1 << 30, 12),
            a_zero: -4,
            b_zero: 7,
            output_zero: 0,
            min: 0,
            max: 127,
        }));
        round_trip(Op::QGlobalAvgPool(QGlobalAvgPool {
            rescale: r(1_234_567_890, -5),
            requantize,
        }));
        round_trip(Op::QLookup);
        round_trip(Op::MatMulInteger);
        round_trip(Op::LogSoftmax { axis: 2 });
        round_trip(Op::Compare(CompareOp::GreaterOrEqual));
        round_trip(Op::Logical(LogicalOp::Xor));
        round_trip(Op::Not);
        round_trip(Op::Convert);
        round_trip(Op::Expand);
        round_trip(Op::Det);
        round_trip(Op::TreeEnsemble(TreeEnsemble {
            targets: 3,
            aggregate: TreeAggregate::Average,
        }));
        round_trip(Op::Dft(Dft {
            axis: 1,
            length: 400,
            frame_step: 160,
            inverse: false,
            onesided: true,
        }));
        round_trip(Op::Recurrent(Recurrent {
            cell: Cell::Gru {
                linear_before_reset: true,
            },
            reverse: true,
            clip: 3.5,
            activations: [Activation::Sigmoid, Activation::Tanh, Activation::Relu],
        }));
        round_trip(Op::GatherElements { axis: 2 });
        round_trip(Op::ScatterElements {
            axis: 1,
            reduction: Reduction::Max,
        });
        round_trip(Op::GatherNd { batch_dims: 1 });
        round_trip(Op::ScatterNd {
            reduction: Reduction::Mul,
        });
        round_trip(Op::TopK {
            axis: 0,
            largest: false,
        });
        round_trip(Op::CumSum {
            axis: 1,
            exclusive: true,
            reverse: false,
        });
        round_trip(Op::Resample {
            axis: 3,
            extrapolation: -1.5,
        });
        for op in [BinaryOp::Mod, BinaryOp::ShiftLeft, BinaryOp::ShiftRight] {
            round_trip(Op::Binary {
                op,
                activation: Activation::None,
            });
        }
        round_trip(Op::Trilu {
            upper: false,
            k: -2,
        });
        round_trip(Op::Where);
        round_trip(Op::Classify(Detect {
            nan: false,
            positive_infinity: true,
            negative_infinity: false,
        }));
        round_trip(Op::Hardmax { axis: 0 });
        round_trip(Op::ArgMax(ArgIndex {
            axis: 1,
            last: true,
        }));
        round_trip(Op::ArgMin(ArgIndex {
            axis: 0,
            last: false,
        }));
        round_trip(Op::DynamicQuantize);
        round_trip(Op::ConvInteger(ConvInteger { window, group: 3 }));
        round_trip(Op::QSoftmax(QSoftmax {
            axis: 1,
            rescale: r(1 << 30, 9),
            output_zero: -128,
            min: -128,
            max: 127,
        }));
        round_trip(Op::QAvgPool(QAvgPool {
            pool: Pool {
                window,
                ceil_mode: false,
                count_include_pad: true,
            },
            rescale: r(1_100_000_000, -1),
            requantize,
        }));
        round_trip(Op::QMul(QMul {
            rescale: r(1 << 30, -7),
            a_zero: 3,
            b_zero: -128,
            output_zero: 1,
            min: -128,
            max: 127,
        }));
    }

    #[test]
    fn integer_parameters_out_of_range_are_rejected() {
        let mut w = WordWriter::default();
        Op::QGlobalAvgPool(QGlobalAvgPool {
            rescale: Rescale {
                multiplier: -1,
                shift: 0,
            },
            requantize: Requantize {
                input_zero: 0,
                output_zero: 0,
                min: 0,
                max: 1,
            },
        })
        .encode(&mut w);
        let words = w.words().unwrap();
        let mut bytes = [0u8; 4 * crate::words::MAX_PARAM_WORDS];
        for (i, v) in words.iter().enumerate() {
            bytes[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
        }
        let mut r = WordReader::new(&bytes[..4 * words.len()]);
        assert_eq!(Op::decode(OpKind::QGlobalAvgPool, &mut r), None);
    }

    #[test]
    fn zero_stride_is_rejected() {
        let bytes = [0u8; 4 * 14];
        let mut r = WordReader::new(&bytes);
        assert_eq!(Op::decode(OpKind::Conv, &mut r), None);
    }
}
