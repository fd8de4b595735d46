//! Errors of packing a model, each printed as one line.

use std::collections::BTreeMap;
use std::fmt;

/// One node Ferrite cannot run, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported {
    /// ONNX op type (with its domain when not the default one).
    pub op_type: String,
    /// Node name (or its first output's name when the node is unnamed).
    pub node: String,
    /// What exactly is missing.
    pub reason: String,
}

/// Every unsupported node of a model, found in one pass.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnsupportedReport {
    /// The findings, in graph order.
    pub items: Vec<Unsupported>,
}

impl UnsupportedReport {
    /// Findings grouped by op type: op → [(node, reason)].
    pub fn grouped(&self) -> BTreeMap<&str, Vec<(&str, &str)>> {
        let mut groups: BTreeMap<&str, Vec<(&str, &str)>> = BTreeMap::new();
        for item in &self.items {
            groups
                .entry(&item.op_type)
                .or_default()
                .push((&item.node, &item.reason));
        }
        groups
    }
}

impl fmt::Display for UnsupportedReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let groups = self.grouped();
        write!(f, "{} node(s) cannot run on Ferrite: ", self.items.len())?;
        for (i, (op, nodes)) in groups.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{op} (")?;
            for (j, (node, reason)) in nodes.iter().enumerate() {
                if j > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "'{node}': {reason}")?;
            }
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// Why a model could not be packed.
#[derive(Debug, thiserror::Error)]
pub enum PackError {
    /// The bytes are not a valid ONNX protobuf.
    #[error("cannot parse ONNX model: {0}")]
    Decode(String),
    /// The protobuf is valid but the model is not (dangling names, bad tensors, cycles...).
    #[error("invalid ONNX model: {0}")]
    Invalid(String),
    /// A tensor keeps its data in an external file.
    #[error("tensor '{0}' stores its data in an external file, which is not supported yet; re-export the model with the weights embedded")]
    ExternalData(String),
    /// The default-domain opset is outside the supported range.
    #[error("ONNX opset {opset} is not supported (Ferrite reads opsets {min} to {max}); convert the model first: onnx.version_converter.convert_version(model, 13)")]
    Opset {
        /// The model's default-domain opset.
        opset: i64,
        /// The oldest opset Ferrite reads.
        min: i64,
        /// The newest opset Ferrite reads.
        max: i64,
    },
    /// Nodes Ferrite cannot run.
    #[error("{0}")]
    Unsupported(UnsupportedReport),
    /// Graph inputs whose shapes are not fully known.
    #[error("input shapes are not fully known: {0}")]
    Symbolic(String),
    /// A `--input-shape` option is malformed or names no input.
    #[error("bad --input-shape: {0}")]
    InputShape(String),
    /// The planned model cannot be encoded (e.g. larger than 4 GiB).
    #[error("cannot write the model: {0}")]
    Write(String),
    /// Calibration data for `--quantize` is missing or does not fit the model.
    #[error("calibration: {0}")]
    Calibration(String),
}
