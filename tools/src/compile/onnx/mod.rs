//! ONNX import: protobuf bytes → [`Graph`], with initializers decoded and nodes in a valid
//! topological order. Nothing here interprets op semantics; that is [`crate::compile::lower`]'s job.

pub mod build;
pub mod proto;
pub mod since;

use crate::compile::error::PackError;
use crate::compile::tensor::HostTensor;
use prost::Message;
use proto::{AttributeProto, DimensionValue, ModelProto};
use std::collections::{HashMap, HashSet};

/// Lowest default-domain opset Ferrite reads (opset 6's binary ops take the legacy `broadcast`
/// and `axis` attributes, which lowering turns into numpy broadcasting).
pub const MIN_OPSET: i64 = 6;
/// Highest default-domain opset Ferrite reads (opsets 22 to 27 changed only the types of the
/// ops Ferrite runs, or added modes it refuses, such as Pad's `wrap`).
pub const MAX_OPSET: i64 = 27;

/// One dimension of a graph input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dim {
    /// A fixed size.
    Known(usize),
    /// A named or unknown size (fixed by `--input-shape`).
    Symbolic(String),
}

/// A graph input that is not an initializer.
#[derive(Clone, Debug)]
pub struct GraphInput {
    /// Name.
    pub name: String,
    /// ONNX element type code.
    pub elem_type: i32,
    /// Dimensions (`None` when the model declares no shape at all).
    pub dims: Option<Vec<Dim>>,
}

/// One ONNX node.
#[derive(Clone, Debug)]
pub struct Node {
    /// Node name (may be empty in the file; see [`Node::label`]).
    pub name: String,
    /// Op type.
    pub op_type: String,
    /// Domain (`""` for the default ONNX domain).
    pub domain: String,
    /// Input value names; `""` marks an absent optional input.
    pub inputs: Vec<String>,
    /// Output value names; `""` marks an unused optional output.
    pub outputs: Vec<String>,
    /// Attributes.
    pub attrs: Vec<AttributeProto>,
}

impl Node {
    /// A name to show users: the node name, or its first output.
    pub fn label(&self) -> String {
        if !self.name.is_empty() {
            self.name.clone()
        } else {
            self.outputs.first().cloned().unwrap_or_default()
        }
    }

    /// The attribute `name`, if present.
    pub fn attr(&self, name: &str) -> Option<&AttributeProto> {
        self.attrs.iter().find(|a| a.name == name)
    }
}

/// An imported ONNX graph.
#[derive(Clone, Debug)]
pub struct Graph {
    /// Default-domain opset version.
    pub opset: i64,
    /// Nodes in topological order.
    pub nodes: Vec<Node>,
    /// Runtime inputs (initializers excluded).
    pub inputs: Vec<GraphInput>,
    /// Output value names.
    pub outputs: Vec<String>,
    /// The declared ONNX element type of each output (0 when not declared).
    pub output_types: Vec<i32>,
    /// Initializers by name.
    pub initializers: HashMap<String, HostTensor>,
}

/// Whether `domain` is the default ONNX domain.
pub fn is_default_domain(domain: &str) -> bool {
    domain.is_empty() || domain == "ai.onnx"
}

/// Parses and checks an ONNX model.
pub fn import(bytes: &[u8]) -> Result<Graph, PackError> {
    let model = ModelProto::decode(bytes).map_err(|e| PackError::Decode(e.to_string()))?;
    let graph = model
        .graph
        .ok_or_else(|| PackError::Invalid("the model has no graph".into()))?;
    // A graph of only other domains' ops (an ai.onnx.ml model) need not import the default
    // domain; it is then read at the newest opset.
    let only_other_domains =
        !graph.node.is_empty() && graph.node.iter().all(|n| !is_default_domain(&n.domain));
    let opset = match model
        .opset_import
        .iter()
        .find(|o| is_default_domain(&o.domain))
    {
        Some(o) => o.version,
        None if only_other_domains => MAX_OPSET,
        None => {
            return Err(PackError::Invalid(
                "the model imports no default-domain opset".into(),
            ))
        }
    };
    if !(MIN_OPSET..=MAX_OPSET).contains(&opset) {
        return Err(PackError::Opset {
            opset,
            min: MIN_OPSET,
            max: MAX_OPSET,
        });
    }
    if !graph.sparse_initializer.is_empty() {
        return Err(PackError::Invalid(
            "sparse initializers are not supported".into(),
        ));
    }
    let mut initializers = HashMap::new();
    for t in &graph.initializer {
        initializers.insert(t.name.clone(), HostTensor::from_proto(t)?);
    }
    let mut inputs = Vec::new();
    for vi in &graph.input {
        if initializers.contains_key(&vi.name) {
            continue;
        }
        let tensor_type = vi
            .r#type
            .as_ref()
            .and_then(|t| t.tensor_type.as_ref())
            .ok_or_else(|| {
                PackError::Invalid(format!(
                    "input '{}' is not a tensor (sequence, map and optional inputs are not supported)",
                    vi.name
                ))
            })?;
        let dims = tensor_type.shape.as_ref().map(|s| {
            s.dim
                .iter()
                .map(|d| match &d.value {
                    Some(DimensionValue::DimValue(v)) if *v >= 0 => Dim::Known(*v as usize),
                    Some(DimensionValue::DimParam(p)) if !p.is_empty() => Dim::Symbolic(p.clone()),
                    _ => Dim::Symbolic("?".into()),
                })
                .collect()
        });
        inputs.push(GraphInput {
            name: vi.name.clone(),
            elem_type: tensor_type.elem_type,
            dims,
        });
    }
    let nodes: Vec<Node> = graph
        .node
        .into_iter()
        .map(|n| Node {
            name: n.name,
            op_type: n.op_type,
            domain: n.domain,
            inputs: n.input,
            outputs: n.output,
            attrs: n.attribute,
        })
        .collect();
    let outputs: Vec<String> = graph.output.iter().map(|o| o.name.clone()).collect();
    let output_types = graph
        .output
        .iter()
        .map(|o| {
            o.r#type
                .as_ref()
                .and_then(|t| t.tensor_type.as_ref())
                .map_or(0, |t| t.elem_type)
        })
        .collect();
    if outputs.is_empty() {
        return Err(PackError::Invalid("the graph has no outputs".into()));
    }
    let mut seen = HashSet::new();
    for o in &outputs {
        if !seen.insert(o.as_str()) {
            return Err(PackError::Invalid(format!(
                "the graph lists output '{o}' twice"
            )));
        }
    }
    let nodes = topological_order(nodes, &inputs, &initializers)?;
    let produced: HashSet<&str> = nodes
        .iter()
        .flat_map(|n| n.outputs.iter().map(String::as_str))
        .chain(inputs.iter().map(|i| i.name.as_str()))
        .chain(initializers.keys().map(String::as_str))
        .collect();
    for o in &outputs {
        if !produced.contains(o.as_str()) {
            return Err(PackError::Invalid(format!(
                "graph output '{o}' is produced by no node"
            )));
        }
    }
    Ok(Graph {
        opset,
        nodes,
        inputs,
        outputs,
        output_types,
        initializers,
    })
}

/// Orders nodes so every input is produced before it is read (Kahn's algorithm); reports a
/// value nothing produces, or a cycle.
fn topological_order(
    nodes: Vec<Node>,
    inputs: &[GraphInput],
    initializers: &HashMap<String, HostTensor>,
) -> Result<Vec<Node>, PackError> {
    let mut available: HashSet<String> = inputs
        .iter()
        .map(|i| i.name.clone())
        .chain(initializers.keys().cloned())
        .collect();
    available.insert(String::new());
    let producers: HashSet<&str> = nodes
        .iter()
        .flat_map(|n| n.outputs.iter().map(String::as_str))
        .collect();
    for n in &nodes {
        for i in &n.inputs {
            if !available.contains(i) && !producers.contains(i.as_str()) {
                return Err(PackError::Invalid(format!(
                    "node '{}' reads '{i}', which no node, input or initializer provides",
                    n.label()
                )));
            }
        }
    }
    let mut pending = nodes;
    let mut ordered = Vec::with_capacity(pending.len());
    while !pending.is_empty() {
        let before = pending.len();
        let mut rest = Vec::new();
        for n in pending {
            if n.inputs.iter().all(|i| available.contains(i)) {
                available.extend(n.outputs.iter().cloned());
                ordered.push(n);
            } else {
                rest.push(n);
            }
        }
        if rest.len() == before {
            return Err(PackError::Invalid(format!(
                "the graph has a cycle through node '{}'",
                rest[0].label()
            )));
        }
        pending = rest;
    }
    Ok(ordered)
}
