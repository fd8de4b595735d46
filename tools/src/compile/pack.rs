//! The packing pipeline: ONNX bytes → import → lower (shapes, folding) → passes → memory plan →
//! `.frt` bytes, plus the report `ferrite pack` prints.

use crate::compile::error::{PackError, Unsupported, UnsupportedReport};
use crate::compile::ir::PlanGraph;
use crate::compile::lower::Lowerer;
use crate::compile::onnx::{self, is_default_domain, Dim, Graph};
use crate::compile::passes::{self, PassStats};
use crate::compile::planner::{self, MemoryPlan};
use crate::compile::tensor::dtype_from_onnx;
use crate::compile::writer;
use std::collections::BTreeMap;

/// Options of `ferrite pack`.
#[derive(Clone, Debug, Default)]
pub struct PackOptions {
    /// `--input-shape NAME=1x3x96x96`: fixes every dimension of the named input;
    /// `--input-shape SYMBOL=N`: the size of a named symbolic dimension, in every input.
    pub input_shapes: Vec<(String, Vec<usize>)>,
    /// `--strict-shapes`: refuse a symbolic leading (batch) dimension instead of taking it as 1.
    pub strict_shapes: bool,
    /// Inputs frozen to a value at pack time (they become constants and leave the input list).
    pub constants: Vec<(String, Constant)>,
}

/// The value `--constant NAME=...` freezes an input to.
#[derive(Clone, Debug)]
pub enum Constant {
    /// An array (`NAME=FILE.npy`, or a numpy array from Python): of the input's element type.
    Array(crate::compile::tensor::HostTensor),
    /// A plain number (`--constant sr=16000`): converted to the input's element type, with the
    /// input's declared shape, which must hold one element (a scalar, `[1]`, ...).
    Number(f64),
}

impl Constant {
    /// Parses the text after `NAME=`: a number, else the path of a `.npy` file (read by
    /// `read_npy`).
    pub fn parse(
        text: &str,
        read_npy: impl FnOnce(&str) -> Result<crate::compile::tensor::HostTensor, String>,
    ) -> Result<Constant, String> {
        match text.trim().parse::<f64>() {
            Ok(v) if !text.trim().is_empty() => Ok(Constant::Number(v)),
            _ => read_npy(text).map(Constant::Array),
        }
    }

    /// The tensor it gives `input`, or why it does not fit.
    fn resolve(
        &self,
        input: &onnx::GraphInput,
    ) -> Result<crate::compile::tensor::HostTensor, String> {
        let name = &input.name;
        let want = dtype_from_onnx(input.elem_type);
        match self {
            Constant::Array(value) => match want {
                Some(want) if value.dtype != want => Err(format!(
                    "--constant {name}: input '{name}' is {want}, the array is {}",
                    value.dtype
                )),
                _ => Ok(value.clone()),
            },
            Constant::Number(v) => {
                let Some(dtype) = want else {
                    return Err(format!(
                        "--constant {name}: input '{name}' has a type Ferrite cannot hold"
                    ));
                };
                let dims: Option<Vec<usize>> = match &input.dims {
                    None => Some(Vec::new()),
                    Some(dims) => dims
                        .iter()
                        .map(|d| match d {
                            Dim::Known(n) => Some(*n),
                            Dim::Symbolic(_) => None,
                        })
                        .collect(),
                };
                let shape = dims.filter(|d| d.iter().product::<usize>() == 1).ok_or_else(|| {
                    format!(
                        "--constant {name}={v}: input '{name}' holds more than one value; give an array as FILE.npy"
                    )
                })?;
                number_tensor(*v, dtype, shape).map_err(|why| {
                    format!("--constant {name}={v}: input '{name}' is {dtype}, {why}")
                })
            }
        }
    }
}

/// 2^63, the first integer past i64.
const TWO_TO_63: f64 = 9_223_372_036_854_775_808.0;

/// One number as a tensor of `dtype` and `shape` (one element), refusing a value the type
/// cannot hold exactly (a fraction for an integer, an integer out of range, a bool not 0 or 1).
fn number_tensor(
    v: f64,
    dtype: ferrite_hal::DType,
    shape: Vec<usize>,
) -> Result<crate::compile::tensor::HostTensor, String> {
    use crate::compile::tensor::HostTensor;
    use ferrite_hal::DType;
    if dtype.is_integer() || dtype == DType::Bool {
        // 64-bit types up to 2^63 exclusive (`i64::MAX` as f64 is 2^63): values are held as i64.
        let (lo, hi) = dtype.integer_range().unwrap_or((0, 1)); // bool: 0 or 1
        let (lo, hi) = (lo as f64, hi as f64);
        if v.fract() != 0.0 || !(lo..=hi).contains(&v) || v == TWO_TO_63 {
            return Err(format!("which cannot hold {v}"));
        }
        return Ok(HostTensor::int(DType::I64, shape, vec![v as i64]).cast(dtype));
    }
    Ok(HostTensor::float(shape, vec![v as f32]).cast(dtype))
}

/// Parses `NAME=1x3x96x96`.
pub fn parse_input_shape(arg: &str) -> Result<(String, Vec<usize>), PackError> {
    let (name, dims) = arg
        .rsplit_once('=')
        .ok_or_else(|| PackError::InputShape(format!("'{arg}' is not NAME=DIMxDIM...")))?;
    let dims = dims
        .split(['x', ','])
        .map(|d| d.trim().parse::<usize>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| {
            PackError::InputShape(format!("'{arg}': dimensions must be non-negative integers"))
        })?;
    Ok((name.to_string(), dims))
}

/// What `pack` produced, besides the bytes.
#[derive(Clone, Debug)]
pub struct PackReport {
    /// Op kinds in the plan and their counts.
    pub ops: BTreeMap<String, usize>,
    /// Bytes of the weights section.
    pub weights_bytes: usize,
    /// Arena bytes the model needs.
    pub arena_bytes: usize,
    /// Lower bound on the arena.
    pub arena_lower_bound: usize,
    /// Size of the file.
    pub file_bytes: usize,
    /// What the graph passes did.
    pub passes: PassStats,
    /// How each convolution will run on the CPU (strategy → count).
    pub conv_strategies: BTreeMap<&'static str, usize>,
    /// The largest scratch buffer of any step, in bytes (included in `arena_bytes`).
    pub scratch_bytes: usize,
    /// What packing assumed (a symbolic batch dimension taken as 1), one line each.
    pub notes: Vec<String>,
}

impl PackReport {
    /// The report as data (what `ferrite pack` prints, for programs: the Python package returns
    /// it as a dict).
    pub fn to_json(&self) -> serde_json::Value {
        let p = &self.passes;
        serde_json::json!({
            "ops": self.ops,
            "op_count": self.ops.values().sum::<usize>(),
            "weights_bytes": self.weights_bytes,
            "arena_bytes": self.arena_bytes,
            "arena_lower_bound": self.arena_lower_bound,
            "file_bytes": self.file_bytes,
            "scratch_bytes": self.scratch_bytes,
            "convolutions": self.conv_strategies,
            "notes": self.notes,
            "passes": {
                "batch_norms_folded": p.batch_norms_folded,
                "matmul_add_fused": p.matmul_add_fused,
                "gelus_fused": p.gelus_fused,
                "activations_fused": p.activations_fused,
                "integer_ops": p.integer_ops,
                "dead_ops_removed": p.dead_ops_removed,
            },
        })
    }
}

/// The CPU strategy of a convolution (as `ferrite_hal::geometry` decides it), for the report.
fn conv_strategy(graph: &PlanGraph, op: &crate::compile::ir::PlanOp) -> Option<&'static str> {
    use ferrite_hal::geometry::{depthwise_strategy, Depthwise};
    let ferrite_hal::Op::Conv(c) = op.op else {
        return None;
    };
    let w = &graph.tensors[op.inputs.get(1).copied().flatten()?].shape;
    let y = &graph.tensors[*op.outputs.first()?].shape;
    let (oh, ow) = if y.len() == 4 {
        (y[2], y[3])
    } else {
        (1, *y.get(2)?)
    };
    let win = &c.window;
    Some(
        if win.kernel == [1, 1] && win.stride == [1, 1] && win.pads == [0; 4] {
            "pointwise GEMM"
        } else if w.get(1) == Some(&1) && c.group > 1 {
            match depthwise_strategy(&c, oh, ow) {
                Depthwise::Masked => "depthwise masked",
                Depthwise::Padded => "depthwise padded",
                Depthwise::Direct => "depthwise direct",
            }
        } else {
            "im2col + GEMM"
        },
    )
}

/// A packed model.
#[derive(Clone, Debug)]
pub struct Packed {
    /// The `.frt` bytes.
    pub bytes: Vec<u8>,
    /// The planned graph (for tests and tools).
    pub graph: PlanGraph,
    /// Its memory plan.
    pub memory: MemoryPlan,
    /// Summary.
    pub report: PackReport,
}

/// What `lower` does with an input shape it cannot fix.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ShapeProblems {
    /// Refuse the model (`pack`).
    Refuse,
    /// Report each as an unsupported input and go on with 1 for the unknown sizes (`check`).
    Report,
}

/// Lowers `graph` to the plan IR, collecting every unsupported node.
fn lower(
    graph: &Graph,
    options: &PackOptions,
    problems: ShapeProblems,
) -> Result<Lowerer, PackError> {
    let mut lw = Lowerer::new(graph.opset);
    let mut symbolic = Vec::new();
    let mut bad_inputs = Vec::new();
    let fixes = ShapeFixes::of(graph, options)?;
    let names: Vec<&str> = graph.inputs.iter().map(|i| i.name.as_str()).collect();
    for (name, _) in &options.constants {
        if !names.contains(&name.as_str()) {
            return Err(PackError::InputShape(format!(
                "--constant {name}: the model has no input '{name}' (inputs: {})",
                names.join(", ")
            )));
        }
        if options.constants.iter().filter(|(n, _)| n == name).count() > 1 {
            return Err(PackError::InputShape(format!(
                "--constant {name} is given twice"
            )));
        }
    }
    for input in &graph.inputs {
        if let Some((_, value)) = options.constants.iter().find(|(n, _)| n == &input.name) {
            let value = value.resolve(input).map_err(PackError::InputShape)?;
            lw.add_initializer(&input.name, value);
            continue;
        }
        let Some(dtype) = dtype_from_onnx(input.elem_type) else {
            bad_inputs.push(Unsupported {
                op_type: "input".into(),
                node: input.name.clone(),
                reason: format!(
                    "type {} is not supported",
                    onnx::proto::data_type::name(input.elem_type)
                ),
            });
            lw.add_unknown(&input.name);
            continue;
        };
        let shape = match fixes.shape_of(input, options.strict_shapes)? {
            Resolved::Shape(shape) => shape,
            Resolved::Assumed { shape, note } => {
                lw.graph.notes.push(note);
                shape
            }
            Resolved::Unknown { problem, guess } => match problems {
                ShapeProblems::Refuse => {
                    symbolic.push(problem);
                    continue;
                }
                ShapeProblems::Report => {
                    bad_inputs.push(Unsupported {
                        op_type: "input".into(),
                        node: input.name.clone(),
                        reason: format!("shape not fully known: {problem}"),
                    });
                    guess
                }
            },
        };
        lw.add_input(&input.name, dtype, shape);
    }
    if !symbolic.is_empty() {
        return Err(PackError::Symbolic(symbolic.join("; ")));
    }
    for (name, value) in &graph.initializers {
        lw.add_initializer(name, value.clone());
    }
    for node in &graph.nodes {
        lw.lower_node(node);
    }
    lw.errors.splice(0..0, bad_inputs);
    Ok(lw)
}

/// How one input's shape came out.
enum Resolved {
    /// Every dimension known or fixed.
    Shape(Vec<usize>),
    /// A leading symbolic dimension taken as 1, with the note that says so.
    Assumed { shape: Vec<usize>, note: String },
    /// Still unknown: what to tell the user, and the shape with 1 for each unknown (to go on
    /// checking).
    Unknown { problem: String, guess: Vec<usize> },
}

/// The `--input-shape` options, split into whole input shapes (`NAME=1x3x96x96`) and sizes of
/// named symbolic dimensions (`SYMBOL=N`, fixing that symbol in every input, as tract's `--set`
/// and onnxruntime's free-dimension overrides do).
struct ShapeFixes<'a> {
    inputs: Vec<(&'a str, &'a [usize])>,
    symbols: BTreeMap<&'a str, usize>,
}

impl<'a> ShapeFixes<'a> {
    fn of(graph: &Graph, options: &'a PackOptions) -> Result<ShapeFixes<'a>, PackError> {
        let names: Vec<&str> = graph.inputs.iter().map(|i| i.name.as_str()).collect();
        let mut symbol_names: Vec<&str> = graph
            .inputs
            .iter()
            .flat_map(|i| i.dims.iter().flatten())
            .filter_map(|d| match d {
                Dim::Symbolic(s) if s != "?" => Some(s.as_str()),
                _ => None,
            })
            .collect();
        symbol_names.sort_unstable();
        symbol_names.dedup();
        let mut fixes = ShapeFixes {
            inputs: Vec::new(),
            symbols: BTreeMap::new(),
        };
        for (name, dims) in &options.input_shapes {
            let twice = options
                .input_shapes
                .iter()
                .filter(|(n, _)| n == name)
                .count()
                > 1;
            if twice {
                return Err(PackError::InputShape(format!(
                    "--input-shape {name} is given twice"
                )));
            }
            if names.contains(&name.as_str()) {
                fixes.inputs.push((name, dims));
            } else if symbol_names.contains(&name.as_str()) {
                match dims[..] {
                    [n] => {
                        fixes.symbols.insert(name.as_str(), n);
                    }
                    _ => {
                        return Err(PackError::InputShape(format!(
                            "'{name}' is a symbolic dimension: give it one size (--input-shape {name}=N)"
                        )))
                    }
                }
            } else {
                let symbols = if symbol_names.is_empty() {
                    String::new()
                } else {
                    format!("; symbolic dimensions: {}", symbol_names.join(", "))
                };
                return Err(PackError::InputShape(format!(
                    "the model has no input or symbolic dimension '{name}' (inputs: {}{symbols})",
                    names.join(", ")
                )));
            }
        }
        Ok(fixes)
    }

    /// The shape `input` takes: `--input-shape NAME=...`, else its declared dims with each
    /// symbol fixed by `--input-shape SYMBOL=N`, a leading one left over taken as 1 (unless
    /// `strict`), else unknown.
    fn shape_of(&self, input: &onnx::GraphInput, strict: bool) -> Result<Resolved, PackError> {
        let name = &input.name;
        let fixed = self.inputs.iter().find(|(n, _)| n == name).map(|(_, d)| *d);
        let Some(declared) = &input.dims else {
            return Ok(match fixed {
                Some(dims) => Resolved::Shape(dims.to_vec()),
                None => Resolved::Unknown {
                    problem: format!(
                        "'{name}' has no declared shape: pass --input-shape {name}=DIMxDIM..."
                    ),
                    guess: Vec::new(),
                },
            });
        };
        if let Some(dims) = fixed {
            let conflict = declared.len() != dims.len()
                || declared
                    .iter()
                    .zip(dims)
                    .any(|(d, v)| matches!(d, Dim::Known(k) if k != v));
            if conflict {
                return Err(PackError::InputShape(format!(
                    "'{name}' is declared as {}, not {dims:?}",
                    describe(declared)
                )));
            }
            return Ok(Resolved::Shape(dims.to_vec()));
        }
        let mut shape = Vec::with_capacity(declared.len());
        let mut assumed = None;
        let mut unknown = false;
        for (axis, d) in declared.iter().enumerate() {
            shape.push(match d {
                Dim::Known(k) => *k,
                Dim::Symbolic(s) => match self.symbols.get(s.as_str()) {
                    Some(&n) => n,
                    None if axis == 0 && !strict => {
                        assumed = Some(s.clone());
                        1
                    }
                    None => {
                        unknown = true;
                        1
                    }
                },
            });
        }
        let flag = |shape: &[usize]| {
            let dims: Vec<String> = declared
                .iter()
                .zip(shape)
                .enumerate()
                .map(|(axis, (d, &n))| match d {
                    Dim::Symbolic(s) if !self.symbols.contains_key(s.as_str()) && axis > 0 => {
                        if s == "?" {
                            "N".to_string()
                        } else {
                            s.clone()
                        }
                    }
                    _ => n.to_string(),
                })
                .collect();
            format!("--input-shape {name}={}", dims.join("x"))
        };
        if unknown {
            // The symbols the user must size (a leading one becomes 1 in the flag).
            let mut open: Vec<&str> = declared
                .iter()
                .skip(1)
                .filter_map(|d| match d {
                    Dim::Symbolic(s) if !self.symbols.contains_key(s.as_str()) => Some(s.as_str()),
                    _ => None,
                })
                .collect();
            open.dedup();
            let sizes = if open.is_empty() {
                String::new()
            } else {
                format!(
                    " with sizes for {} (or --input-shape SYMBOL=N to fix a symbol in every input)",
                    open.join(", ")
                )
            };
            return Ok(Resolved::Unknown {
                problem: format!(
                    "'{name}' is {}: pass {}{sizes}",
                    describe(declared),
                    flag(&shape)
                ),
                guess: shape,
            });
        }
        Ok(match assumed {
            Some(symbol) => Resolved::Assumed {
                note: format!(
                    "input '{name}' is {}: its leading dimension '{symbol}' is taken as 1 ({} to choose another size, --strict-shapes to refuse instead)",
                    describe(declared),
                    flag(&shape)
                ),
                shape,
            },
            None => Resolved::Shape(shape),
        })
    }
}

fn describe(dims: &[Dim]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|d| match d {
            Dim::Known(k) => k.to_string(),
            Dim::Symbolic(s) => s.clone(),
        })
        .collect();
    format!("[{}]", parts.join("x"))
}

/// Nodes whose op type or domain Ferrite does not know, plus lowering failures (one entry per
/// node, in graph order). Unknown ops are found without shapes, so they are all reported even
/// when they feed each other.
fn unsupported(graph: &Graph, lowering: Vec<Unsupported>) -> UnsupportedReport {
    let mut report = UnsupportedReport::default();
    for node in &graph.nodes {
        let default = is_default_domain(&node.domain);
        if crate::compile::lower::is_microsoft_op(node) || crate::compile::lower::is_ml_op(node) {
            continue;
        }
        if !default || !crate::compile::lower::is_supported(&node.op_type) {
            report.items.push(Unsupported {
                op_type: if default {
                    node.op_type.clone()
                } else {
                    format!("{}:{}", node.domain, node.op_type)
                },
                node: node.label(),
                reason: if default
                    && crate::compile::lower::DATA_DEPENDENT_OPS.contains(&node.op_type.as_str())
                {
                    format!(
                        "{}: {}",
                        node.op_type,
                        crate::compile::lower::DATA_DEPENDENT
                    )
                } else if default {
                    format!("op '{}' is not supported", node.op_type)
                } else if node.domain == "com.microsoft" {
                    format!(
                        "op '{}' of domain 'com.microsoft' is not supported (from it: {})",
                        node.op_type,
                        crate::compile::lower::MICROSOFT_OPS.join(", ")
                    )
                } else if node.domain == "ai.onnx.ml" {
                    format!(
                        "op '{}' of domain 'ai.onnx.ml' is not supported (from it: {})",
                        node.op_type,
                        crate::compile::lower::ML_OPS.join(", ")
                    )
                } else {
                    format!("domain '{}' is not supported", node.domain)
                },
            });
        }
    }
    for item in lowering {
        if !report.items.iter().any(|i| i.node == item.node) {
            report.items.push(item);
        }
    }
    report
}

/// Every node of the model Ferrite cannot run, in one pass. Symbolic input dimensions are
/// taken as 1 for this check (`pack` requires them fixed).
pub fn check(onnx_bytes: &[u8], options: &PackOptions) -> Result<UnsupportedReport, PackError> {
    let graph = onnx::import(onnx_bytes)?;
    let lw = lower(&graph, options, ShapeProblems::Report)?;
    Ok(unsupported(&graph, lw.errors))
}

/// Lowers and optimises a model to the plan IR.
pub fn to_plan(
    onnx_bytes: &[u8],
    options: &PackOptions,
) -> Result<(PlanGraph, PassStats), PackError> {
    let graph = onnx::import(onnx_bytes)?;
    let mut lw = lower(&graph, options, ShapeProblems::Refuse)?;
    if !lw.errors.is_empty() {
        let errors = std::mem::take(&mut lw.errors);
        return Err(PackError::Unsupported(unsupported(&graph, errors)));
    }
    let mut outputs = Vec::new();
    for (name, &declared) in graph.outputs.iter().zip(&graph.output_types) {
        let id = lw
            .graph_output(name, declared)
            .ok_or_else(|| PackError::Invalid(format!("graph output '{name}' was not computed")))?;
        // A declared type must be what the graph computes (onnxruntime refuses a mismatch).
        if let Some(want) = crate::compile::tensor::dtype_from_onnx(declared) {
            let got = lw.graph.tensors[id].dtype;
            if got != want {
                return Err(PackError::Invalid(format!(
                    "graph output '{name}' is declared {want} but the graph computes {got}"
                )));
            }
        }
        outputs.push(id);
    }
    let mut plan = lw.graph;
    plan.outputs = outputs;
    plan.record_io_quantization();
    let stats = passes::optimize(&mut plan);
    Ok((plan, stats))
}

/// Packs an ONNX model into `.frt` bytes.
pub fn pack(onnx_bytes: &[u8], options: &PackOptions) -> Result<Packed, PackError> {
    let (graph, passes) = to_plan(onnx_bytes, options)?;
    pack_plan(graph, passes)
}

/// Plans memory for an optimised plan and writes it; the result is verified by the core.
pub fn pack_plan(mut graph: PlanGraph, passes: PassStats) -> Result<Packed, PackError> {
    let scratch = planner::prepare(&mut graph);
    let memory = planner::plan(&graph, scratch);
    let bytes = writer::write(&graph, &memory)?;
    let aligned = crate::aligned::AlignedBytes::from(&bytes[..]);
    let model = ferrite_core::Model::load(aligned.as_bytes())
        .map_err(|e| PackError::Write(format!("the written model does not verify: {e}")))?;
    let mut ops = BTreeMap::new();
    for op in &graph.ops {
        *ops.entry(op_label(&op.op)).or_insert(0) += 1;
    }
    let mut conv_strategies = BTreeMap::new();
    for op in &graph.ops {
        if let Some(name) = conv_strategy(&graph, op) {
            *conv_strategies.entry(name).or_insert(0) += 1;
        }
    }
    let scratch_bytes = memory
        .scratch
        .iter()
        .flatten()
        .map(|&t| graph.tensors[t].bytes())
        .max()
        .unwrap_or(0);
    let report = PackReport {
        ops,
        weights_bytes: model.weights_bytes(),
        arena_bytes: memory.arena_bytes,
        arena_lower_bound: memory.lower_bound,
        file_bytes: bytes.len(),
        passes,
        conv_strategies,
        scratch_bytes,
        notes: graph.notes.clone(),
    };
    Ok(Packed {
        bytes,
        graph,
        memory,
        report,
    })
}

/// A readable name of an op with its variant (e.g. `Binary(Add)`, `Conv+Relu`).
pub fn op_label(op: &ferrite_hal::Op) -> String {
    use ferrite_hal::{Activation, Op};
    let base = match op {
        Op::Binary { op, .. } => format!("{op:?}"),
        Op::Unary(a) => a.name().to_string(),
        Op::Reduce { op, .. } => format!("Reduce{op:?}"),
        other => other.kind().name().to_string(),
    };
    match op.activation() {
        Some(a) if a != Activation::None => format!("{base}+{}", a.name()),
        _ => base,
    }
}
