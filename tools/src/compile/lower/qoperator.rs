//! QOperator-form ops (QLinearConv, QLinearMatMul and onnxruntime's `com.microsoft` QGemm,
//! QLinearAdd, QLinearAveragePool, ...) lowered as the QDQ nodes they stand for.
//!
//! Each op is `Quantize(op(Dequantize(inputs)))`: its inputs are dequantized with their own
//! scale and zero point, the float op runs, and the result is quantized with the output's. The
//! nodes are made here and lowered by the ordinary lowerings (so every parameter check of
//! `quant.rs` applies), weights and int32 biases dequantize at pack time keeping their integers,
//! and the integer pass (`crate::compile::quantize`) turns Conv/Gemm back into `QConv`/`QGemm` — the same
//! path as QDQ models. Ops the integer pass does not cover run in float between the two, as
//! onnxruntime's own reference kernels of these ops do.

use super::attrs::Attrs;
use super::lowerer::{Lowerer, Reason};
use crate::compile::onnx::proto::AttributeProto;
use crate::compile::onnx::Node;
use crate::compile::tensor::HostTensor;

/// The ops of onnxruntime's `com.microsoft` domain that lower here.
pub const MICROSOFT_OPS: &[&str] = &[
    "QGemm",
    "QLinearAdd",
    "QLinearMul",
    "QLinearAveragePool",
    "QLinearGlobalAveragePool",
    "QLinearSoftmax",
    "QLinearSigmoid",
    "QLinearLeakyRelu",
    "QLinearConcat",
];

/// Builds the nodes standing for one QOperator node; names derive from the node's label.
struct Expansion<'n> {
    node: &'n Node,
    nodes: Vec<Node>,
}

impl<'n> Expansion<'n> {
    fn new(node: &'n Node) -> Self {
        Expansion {
            node,
            nodes: Vec::new(),
        }
    }

    /// Input `i` of the original node ("" when absent).
    fn input(&self, i: usize) -> String {
        self.node.inputs.get(i).cloned().unwrap_or_default()
    }

    fn push(
        &mut self,
        op: &str,
        what: &str,
        inputs: Vec<String>,
        output: String,
        attrs: Vec<AttributeProto>,
    ) {
        self.nodes.push(Node {
            name: format!("{}:{what}", self.node.label()),
            op_type: op.into(),
            domain: String::new(),
            inputs,
            outputs: vec![output],
            attrs,
        });
    }

    /// Dequantizes input triple `(x, scale, zero)` starting at `first`; returns the float name.
    fn dequantize(&mut self, first: usize, what: &str, axis: Option<i64>) -> String {
        let out = format!("{}:{what}", self.node.label());
        let inputs = vec![
            self.input(first),
            self.input(first + 1),
            self.input(first + 2),
        ];
        let attrs = axis.map(|a| vec![int_attr("axis", a)]).unwrap_or_default();
        self.push(
            "DequantizeLinear",
            &format!("dequantize_{what}"),
            inputs,
            out.clone(),
            attrs,
        );
        out
    }

    /// The float op; returns the name of its float output.
    fn compute(&mut self, op: &str, inputs: Vec<String>, attrs: Vec<AttributeProto>) -> String {
        let out = format!("{}:float", self.node.label());
        self.push(op, "float", inputs, out.clone(), attrs);
        out
    }

    /// Quantizes `y` with `(scale, zero)` at inputs `scale_at`, `scale_at + 1` into the node's
    /// output.
    fn quantize(&mut self, y: String, scale_at: usize) {
        let output = self.node.outputs.first().cloned().unwrap_or_default();
        let inputs = vec![y, self.input(scale_at), self.input(scale_at + 1)];
        self.push("QuantizeLinear", "quantize", inputs, output, vec![]);
    }

    /// The node's attributes except `drop`.
    fn attrs_except(&self, drop: &[&str]) -> Vec<AttributeProto> {
        self.node
            .attrs
            .iter()
            .filter(|a| !drop.contains(&a.name.as_str()))
            .cloned()
            .collect()
    }
}

fn int_attr(name: &str, value: i64) -> AttributeProto {
    crate::compile::onnx::build::attr_int(name, value)
}

/// The constant float values of input `i`, which must be present and constant.
fn constant_floats(lw: &Lowerer, node: &Node, i: usize) -> Result<Vec<f32>, Reason> {
    let t = lw.input(node, i)?;
    lw.value(t)
        .map(HostTensor::to_f32s)
        .ok_or_else(|| format!("scale '{}' must be a constant", lw.name(t)))
}

/// Adds the float scale of an int32 bias: `sx · sw[c] · alpha` (per channel when `sw` is), named
/// after the node; returns its name.
fn bias_scale(
    lw: &mut Lowerer,
    node: &Node,
    x_scale: usize,
    w_scale: usize,
    alpha: f32,
) -> Result<String, Reason> {
    let sx = constant_floats(lw, node, x_scale)?;
    let sw = constant_floats(lw, node, w_scale)?;
    let [sx] = sx[..] else {
        return Err("the input scale must be a scalar".into());
    };
    let values: Vec<f32> = sw.iter().map(|s| sx * s * alpha).collect();
    let shape = if values.len() == 1 && lw.shape(lw.input(node, w_scale)?).is_empty() {
        vec![]
    } else {
        vec![values.len()]
    };
    let name = format!("{}:bias_scale", node.label());
    lw.add_initializer(&name, HostTensor::float(shape, values));
    Ok(name)
}

/// Dequantizes an int32 bias at input `bias` with scale `scale_name`; returns the float name.
fn dequantize_bias(ex: &mut Expansion<'_>, bias: usize, scale_name: String) -> String {
    let out = format!("{}:bias", ex.node.label());
    let inputs = vec![ex.input(bias), scale_name];
    ex.push(
        "DequantizeLinear",
        "dequantize_bias",
        inputs,
        out.clone(),
        vec![int_attr("axis", 0)],
    );
    out
}

/// Lowers QOperator node `node`.
pub(super) fn lower(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let mut ex = Expansion::new(node);
    let count = node.inputs.len();
    let need = |n: usize| -> Result<(), Reason> {
        if count < n {
            return Err(format!(
                "{} needs {n} inputs, the node has {count}",
                node.op_type
            ));
        }
        Ok(())
    };
    match node.op_type.as_str() {
        "QLinearConv" => {
            need(8)?;
            let x = ex.dequantize(0, "x", None);
            let w = ex.dequantize(3, "w", Some(0));
            let mut inputs = vec![x, w];
            if node.inputs.get(8).is_some_and(|b| !b.is_empty()) {
                let scale = bias_scale(lw, node, 1, 4, 1.0)?;
                inputs.push(dequantize_bias(&mut ex, 8, scale));
            }
            let y = ex.compute("Conv", inputs, ex.attrs_except(&[]));
            ex.quantize(y, 6);
        }
        "QLinearMatMul" => {
            need(8)?;
            let a = ex.dequantize(0, "a", None);
            let b = ex.dequantize(3, "b", Some(-1));
            let y = ex.compute("MatMul", vec![a, b], vec![]);
            ex.quantize(y, 6);
        }
        "QGemm" => {
            need(6)?;
            let trans_b = node.int("transB", 0)?;
            let alpha = node.float("alpha", 1.0)?;
            let a = ex.dequantize(0, "a", None);
            let b = ex.dequantize(3, "b", Some(if trans_b != 0 { 0 } else { 1 }));
            let mut inputs = vec![a, b];
            if node.inputs.get(6).is_some_and(|c| !c.is_empty()) {
                let scale = bias_scale(lw, node, 1, 4, alpha)?;
                inputs.push(dequantize_bias(&mut ex, 6, scale));
            }
            let y = ex.compute("Gemm", inputs, ex.attrs_except(&[]));
            match node.inputs.get(7).filter(|s| !s.is_empty()) {
                Some(_) => ex.quantize(y, 7),
                // No output scale: the output is float.
                None => {
                    if let Some(last) = ex.nodes.last_mut() {
                        last.outputs = node.outputs.clone();
                    }
                }
            }
        }
        "QLinearAdd" | "QLinearMul" => {
            need(7)?;
            let a = ex.dequantize(0, "a", None);
            let b = ex.dequantize(3, "b", None);
            let op = &node.op_type["QLinear".len()..];
            let y = ex.compute(op, vec![a, b], vec![]);
            ex.quantize(y, 6);
        }
        "QLinearAveragePool"
        | "QLinearGlobalAveragePool"
        | "QLinearSoftmax"
        | "QLinearSigmoid"
        | "QLinearLeakyRelu" => {
            need(4)?;
            if node.int("channels_last", 0)? != 0 {
                return Err("channels_last layouts are not supported".into());
            }
            let x = ex.dequantize(0, "x", None);
            let op = &node.op_type["QLinear".len()..];
            let attrs = ex.attrs_except(&["channels_last", "opset"]);
            if op == "Softmax" {
                // The `opset` attribute picks Softmax's semantics; both agree on the last axis.
                let rank = lw.shape(lw.input(node, 0)?).len() as i64;
                let axis = node.int("axis", -1)?;
                if axis != -1 && axis != rank - 1 {
                    return Err(format!(
                        "QLinearSoftmax on axis {axis} (only the last axis)"
                    ));
                }
            }
            let y = ex.compute(op, vec![x], attrs);
            ex.quantize(y, 3);
        }
        "QLinearConcat" => {
            need(5)?;
            if !(count - 2).is_multiple_of(3) {
                return Err("QLinearConcat takes (Y_scale, Y_zero_point) then triples".into());
            }
            let parts: Vec<String> = (0..(count - 2) / 3)
                .map(|k| ex.dequantize(2 + 3 * k, &format!("x{k}"), None))
                .collect();
            let y = ex.compute("Concat", parts, ex.attrs_except(&[]));
            ex.quantize(y, 0);
        }
        other => return Err(format!("op '{other}' is not supported")),
    }
    for part in &ex.nodes {
        lw.lower_op(part)
            .map_err(|e| format!("{} (as {}): {e}", part.op_type, part.name))?;
    }
    Ok(())
}
