//! A small builder for ONNX models in Rust: tests (and users' tools) can make models without
//! Python. It writes the same protobuf messages the importer reads.

use super::proto::{
    attribute_type, AttributeProto, Dimension, DimensionValue, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, TensorProto, TensorShapeProto, TypeProto, TypeProtoTensor, ValueInfoProto,
};
use prost::Message;

/// Builds one graph.
#[derive(Clone, Debug, Default)]
pub struct ModelBuilder {
    graph: GraphProto,
    opset: i64,
    domains: Vec<(String, i64)>,
}

/// A dimension of a declared input: fixed or symbolic.
#[derive(Clone, Debug)]
pub enum D {
    /// A fixed size.
    N(i64),
    /// A named (symbolic) size.
    S(&'static str),
}

fn value_info(name: &str, elem_type: i32, dims: &[D]) -> ValueInfoProto {
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeProtoTensor {
                elem_type,
                shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|d| Dimension {
                            value: Some(match d {
                                D::N(n) => DimensionValue::DimValue(*n),
                                D::S(s) => DimensionValue::DimParam(s.to_string()),
                            }),
                        })
                        .collect(),
                }),
            }),
        }),
    }
}

impl ModelBuilder {
    /// A model importing default-domain `opset`.
    pub fn new(opset: i64) -> Self {
        ModelBuilder {
            opset,
            ..Default::default()
        }
    }

    /// Also imports `domain` at `version`.
    pub fn import(mut self, domain: &str, version: i64) -> Self {
        self.domains.push((domain.into(), version));
        self
    }

    /// Declares an input.
    pub fn input(mut self, name: &str, elem_type: i32, dims: &[D]) -> Self {
        self.graph.input.push(value_info(name, elem_type, dims));
        self
    }

    /// Declares an output.
    pub fn output(mut self, name: &str) -> Self {
        self.graph.output.push(ValueInfoProto {
            name: name.into(),
            r#type: None,
        });
        self
    }

    /// Adds a float initializer.
    pub fn init_f32(mut self, name: &str, dims: &[i64], values: &[f32]) -> Self {
        self.graph.initializer.push(TensorProto {
            name: name.into(),
            dims: dims.to_vec(),
            data_type: super::proto::data_type::FLOAT,
            float_data: values.to_vec(),
            ..Default::default()
        });
        self
    }

    /// Adds an int64 initializer.
    pub fn init_i64(mut self, name: &str, dims: &[i64], values: &[i64]) -> Self {
        self.graph.initializer.push(TensorProto {
            name: name.into(),
            dims: dims.to_vec(),
            data_type: super::proto::data_type::INT64,
            int64_data: values.to_vec(),
            ..Default::default()
        });
        self
    }

    /// Adds a raw tensor initializer (any message, e.g. one with external data).
    pub fn init(mut self, tensor: TensorProto) -> Self {
        self.graph.initializer.push(tensor);
        self
    }

    /// Adds a node in the default domain.
    pub fn node(
        self,
        op: &str,
        name: &str,
        inputs: &[&str],
        outputs: &[&str],
        attrs: Vec<AttributeProto>,
    ) -> Self {
        self.node_in("", op, name, inputs, outputs, attrs)
    }

    /// Adds a node in `domain`.
    pub fn node_in(
        mut self,
        domain: &str,
        op: &str,
        name: &str,
        inputs: &[&str],
        outputs: &[&str],
        attrs: Vec<AttributeProto>,
    ) -> Self {
        self.graph.node.push(NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            name: name.into(),
            op_type: op.into(),
            domain: domain.into(),
            attribute: attrs,
        });
        self
    }

    /// The graph alone: a subgraph for [`attr_graph`] (an If's branch), its outputs named by
    /// [`ModelBuilder::output`].
    pub fn graph(self) -> GraphProto {
        self.graph
    }

    /// The encoded model.
    pub fn encode(self) -> Vec<u8> {
        let mut opset_import = vec![OperatorSetIdProto {
            domain: String::new(),
            version: self.opset,
        }];
        opset_import.extend(
            self.domains
                .into_iter()
                .map(|(domain, version)| OperatorSetIdProto { domain, version }),
        );
        ModelProto {
            ir_version: 8,
            opset_import,
            producer_name: "ferrite".into(),
            producer_version: String::new(),
            graph: Some(self.graph),
            functions: Vec::new(),
        }
        .encode_to_vec()
    }
}

/// An integer attribute.
pub fn attr_int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::INT,
        i: v,
        ..Default::default()
    }
}

/// An integer-list attribute.
pub fn attr_ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::INTS,
        ints: v.to_vec(),
        ..Default::default()
    }
}

/// A float attribute.
pub fn attr_float(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::FLOAT,
        f: v,
        ..Default::default()
    }
}

/// A graph attribute (an If's `then_branch` / `else_branch`).
pub fn attr_graph(name: &str, g: GraphProto) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::GRAPH,
        g: Some(Box::new(g)),
        ..Default::default()
    }
}

/// A string attribute.
pub fn attr_string(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::STRING,
        s: v.as_bytes().to_vec(),
        ..Default::default()
    }
}

/// `y = Gather(table, indices)`: a 4 × 3 table of 0..12 and int64 `indices` `[2]` as the graph
/// input — for tests of run-time index checks (`[3, -4]` gives `[9, 10, 11, 0, 1, 2]`).
pub fn gather_model() -> Vec<u8> {
    let table: Vec<f32> = (0..12).map(|i| i as f32).collect();
    ModelBuilder::new(13)
        .input("indices", super::proto::data_type::INT64, &[D::N(2)])
        .init_f32("table", &[4, 3], &table)
        .node(
            "Gather",
            "g",
            &["table", "indices"],
            &["y"],
            vec![attr_int("axis", 0)],
        )
        .output("y")
        .encode()
}

/// A tiny dense model used by tests and examples: `y = relu(x · W + b)` with `x: [1, 4]`,
/// `W: [4, 3]`, followed by a softmax — small, but it exercises Gemm, fusion and the plan.
pub fn tiny_mlp() -> Vec<u8> {
    let w: Vec<f32> = (0..12).map(|i| (i as f32 - 6.0) * 0.25).collect();
    ModelBuilder::new(13)
        .input("x", super::proto::data_type::FLOAT, &[D::N(1), D::N(4)])
        .init_f32("W", &[4, 3], &w)
        .init_f32("b", &[3], &[0.1, -0.2, 0.3])
        .node("MatMul", "matmul", &["x", "W"], &["h"], vec![])
        .node("Add", "bias", &["h", "b"], &["hb"], vec![])
        .node("Relu", "relu", &["hb"], &["r"], vec![])
        .node(
            "Softmax",
            "softmax",
            &["r"],
            &["y"],
            vec![attr_int("axis", -1)],
        )
        .output("y")
        .encode()
}

/// A tiny model quantized at its border, as the MLPerf Tiny ones are: `xq` (int8 `[1, 8]`) →
/// Reshape to `[2, 4]` → DequantizeLinear (scale 0.25, zero point 3) → Relu → QuantizeLinear
/// (0.125, −7) → `yq` (int8), so its `.frt` records both scales and zero points.
pub fn border_quantized_model() -> Vec<u8> {
    use super::proto::{data_type, TensorProto};
    let int = |name: &str, data_type: i32, dims: Vec<i64>, values: Vec<i64>| TensorProto {
        name: name.into(),
        dims,
        data_type,
        int32_data: if data_type == super::proto::data_type::INT64 {
            Vec::new()
        } else {
            values.iter().map(|&v| v as i32).collect()
        },
        int64_data: if data_type == super::proto::data_type::INT64 {
            values
        } else {
            Vec::new()
        },
        ..Default::default()
    };
    ModelBuilder::new(13)
        .input("xq", data_type::INT8, &[D::N(1), D::N(8)])
        .init(int("shape", data_type::INT64, vec![2], vec![2, 4]))
        .init_f32("x_scale", &[], &[0.25])
        .init(int("x_zero", data_type::INT8, vec![], vec![3]))
        .init_f32("y_scale", &[], &[0.125])
        .init(int("y_zero", data_type::INT8, vec![], vec![-7]))
        .node("Reshape", "reshape", &["xq", "shape"], &["xr"], vec![])
        .node(
            "DequantizeLinear",
            "dq",
            &["xr", "x_scale", "x_zero"],
            &["x"],
            vec![],
        )
        .node("Relu", "relu", &["x"], &["r"], vec![])
        .node(
            "QuantizeLinear",
            "q",
            &["r", "y_scale", "y_zero"],
            &["yq"],
            vec![],
        )
        .output("yq")
        .encode()
}
