//! Loop and Scan, unrolled at pack time: the body is inlined once per iteration, each copy
//! reading the previous one's loop-carried values, so the device runs a straight plan and the
//! planner sees every iteration's tensors (their memory is reused like any other).
//!
//! The one idea: the trip count must be known when packing. A Scan's is its scan inputs' static
//! length; a Loop's is its constant `M`, or the first iteration whose condition folds to false.
//! A condition computed at run time, with `M` as a bound and no scan outputs, is honoured by
//! running all `M` iterations and keeping each loop-carried value only while the condition has
//! held (a `Where` per value). Scan outputs are stacked with one `Concat` per output.

use super::attrs::Attrs;
use super::control::inline_body;
use super::lowerer::{normalize_axis, Lowerer, Reason};
use crate::compile::ir::TensorId;
use crate::compile::onnx::proto::GraphProto;
use crate::compile::onnx::Node;
use crate::compile::tensor::HostTensor;
use ferrite_hal::{DType, Op, MAX_RANK};

/// The most iterations one Loop or Scan is unrolled to.
pub const MAX_ITERATIONS: usize = 4096;

/// The most plan steps a model may grow to by unrolling (a hostile trip count or nesting cannot
/// exhaust the host's memory).
pub const MAX_UNROLLED_STEPS: usize = 65_536;

/// The most body nodes one model may lower by unrolling, nested loops included: bodies that
/// fold to constants add no steps, so this bounds the packing time instead.
pub const MAX_UNROLLED_NODES: usize = 262_144;

/// Why a Loop whose condition is computed at run time cannot have scan outputs.
const DATA_DEPENDENT_SCANS: &str = "its condition is computed at run time and it has scan outputs, whose length then depends on the data (data-dependent shape)";

/// The most inputs of one `Concat` step (the format stores the count in a byte).
const CONCAT_INPUTS: usize = 255;

/// The body graph of `node`.
fn body(node: &Node) -> Result<&GraphProto, Reason> {
    node.attr("body")
        .and_then(|a| a.g.as_deref())
        .ok_or_else(|| "body is required".to_string())
}

/// A trip count within [`MAX_ITERATIONS`], or why not.
fn bounded_trips(trips: i64, what: &str) -> Result<usize, Reason> {
    usize::try_from(trips.max(0))
        .ok()
        .filter(|&t| t <= MAX_ITERATIONS)
        .ok_or_else(|| {
            format!("{what} {trips} is more than the {MAX_ITERATIONS} iterations Ferrite unrolls")
        })
}

/// Inlines one iteration of `g`, then names that iteration's new tensors after it, and refuses
/// a plan grown past [`MAX_UNROLLED_STEPS`].
fn iteration(
    lw: &mut Lowerer,
    node: &Node,
    g: &GraphProto,
    i: usize,
    inputs: &[TensorId],
) -> Result<Vec<TensorId>, Reason> {
    lw.unrolled_nodes = lw.unrolled_nodes.saturating_add(g.node.len());
    if lw.unrolled_nodes > MAX_UNROLLED_NODES {
        return Err(format!(
            "unrolling it lowers more than {MAX_UNROLLED_NODES} body nodes"
        ));
    }
    let first_new = lw.graph.tensors.len();
    let tag = format!("[{i}]");
    let outputs = inline_body(lw, node, g, &tag, inputs)?;
    for t in &mut lw.graph.tensors[first_new..] {
        t.name.push_str(&tag);
    }
    if lw.graph.ops.len() > MAX_UNROLLED_STEPS {
        return Err(format!(
            "unrolling it makes more than {MAX_UNROLLED_STEPS} steps"
        ));
    }
    Ok(outputs)
}

/// Refuses a value carried from one iteration to the next that changes its shape or type.
fn keeps_shape(lw: &Lowerer, what: &str, old: TensorId, new: TensorId) -> Result<(), Reason> {
    if lw.shape(new) == lw.shape(old) && lw.dtype(new) == lw.dtype(old) {
        return Ok(());
    }
    Err(format!(
        "{what} changes from {:?} {} to {:?} {}: it must keep its shape and type",
        lw.shape(old),
        lw.dtype(old),
        lw.shape(new),
        lw.dtype(new)
    ))
}

/// Element `index` of `x` along `axis`, that axis removed (a one-element Slice and a view).
fn take(
    lw: &mut Lowerer,
    node: &Node,
    x: TensorId,
    axis: usize,
    index: usize,
) -> Result<TensorId, Reason> {
    let mut shape = lw.shape(x);
    let mut starts = [0usize; MAX_RANK];
    starts[axis] = index;
    shape[axis] = 1;
    let what = format!("{}[{axis}={index}]", lw.name(x));
    let one = lw.temp(node, &what, lw.dtype(x), shape.clone());
    lw.emit(
        node,
        Op::Slice {
            starts,
            steps: [1; MAX_RANK],
        },
        vec![Some(x)],
        vec![one],
    )?;
    shape.remove(axis);
    Ok(lw.temp_alias(node, &format!("{what}:view"), one, shape))
}

/// The values `parts` (equal shapes and types) stacked along a new axis `axis`: each viewed with
/// a dimension of one there, then concatenated (in steps of at most [`CONCAT_INPUTS`]).
fn stack(
    lw: &mut Lowerer,
    node: &Node,
    what: &str,
    parts: &[TensorId],
    axis: usize,
) -> Result<TensorId, Reason> {
    let first = *parts.first().ok_or("nothing to stack")?;
    let (dtype, shape) = (lw.dtype(first), lw.shape(first));
    let mut pieces = Vec::with_capacity(parts.len());
    for (i, &p) in parts.iter().enumerate() {
        if lw.shape(p) != shape || lw.dtype(p) != dtype {
            return Err(format!(
                "{what} is {:?} {} in iteration {i} and {shape:?} {dtype} in the first: iterations must agree (data-dependent shape)",
                lw.shape(p),
                lw.dtype(p)
            ));
        }
        let mut one = shape.clone();
        one.insert(axis, 1);
        pieces.push(lw.temp_alias(node, &format!("{what}[{i}]"), p, one));
    }
    concatenate(lw, node, what, pieces, axis)
}

/// `pieces` (equal but for `axis`) joined along `axis`, in `Concat` steps of at most
/// [`CONCAT_INPUTS`] inputs.
fn concatenate(
    lw: &mut Lowerer,
    node: &Node,
    what: &str,
    mut pieces: Vec<TensorId>,
    axis: usize,
) -> Result<TensorId, Reason> {
    let dtype = lw.dtype(*pieces.first().ok_or("nothing to join")?);
    let mut round = 0;
    while pieces.len() > 1 {
        let mut joined = Vec::new();
        for (j, group) in pieces.chunks(CONCAT_INPUTS).enumerate() {
            if let [single] = group {
                joined.push(*single);
                continue;
            }
            let mut out = lw.shape(group[0]);
            out[axis] = group.iter().map(|&g| lw.shape(g)[axis]).sum();
            super::lowerer::bounded(&out)?;
            let y = lw.temp(node, &format!("{what}:stacked{round}.{j}"), dtype, out);
            let inputs = group.iter().map(|&g| Some(g)).collect();
            lw.emit(node, Op::Concat { axis }, inputs, vec![y])?;
            joined.push(y);
        }
        pieces = joined;
        round += 1;
    }
    pieces.pop().ok_or_else(|| "nothing to stack".into())
}

/// Node output `i` as a view of `value` (an absent output is skipped).
fn bind(lw: &mut Lowerer, node: &Node, i: usize, value: TensorId) -> Result<(), Reason> {
    let shape = lw.shape(value);
    lw.alias_output(node, i, value, shape)
}

/// Loop: `M` iterations (a constant), while the condition holds.
pub(super) fn loop_node(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let g = body(node)?;
    let max_trips = match lw.optional_input(node, 0) {
        Some(m) => match lw.value(m).map(HostTensor::to_i64s).as_deref() {
            Some(&[m]) => Some(bounded_trips(m, "the trip count M is")?),
            Some(_) => return Err("the trip count M must be one value".into()),
            None => {
                return Err(format!(
                    "the trip count M must be a constant (computed at pack time): Ferrite unrolls the loop{}",
                    lw.freeze_hint("M", &[m])
                ))
            }
        },
        None => None,
    };
    // `None`: the condition is known to hold; `Some(c)`: it holds while run-time bool `c` does.
    let mut running: Option<TensorId> = None;
    if let Some(cond) = lw.optional_input(node, 1) {
        if lw.dtype(cond) != DType::Bool || lw.shape(cond).iter().product::<usize>() != 1 {
            return Err("the condition must be one bool".into());
        }
        match lw.value(cond).map(HostTensor::to_i64s) {
            Some(v) if v.first() == Some(&0) => {
                return finish_loop(lw, node, g, &carried_inputs(lw, node)?, &[], 0)
            }
            Some(_) => {}
            None => running = Some(cond),
        }
    }
    let mut carried = carried_inputs(lw, node)?;
    let n = carried.len();
    if g.output.len() < 1 + n {
        return Err(format!(
            "the body has {} outputs, fewer than the condition and {n} loop-carried values",
            g.output.len()
        ));
    }
    let scan_count = g.output.len() - 1 - n;
    if running.is_some() && scan_count > 0 {
        return Err(DATA_DEPENDENT_SCANS.into());
    }
    let mut scans: Vec<Vec<TensorId>> = vec![Vec::new(); scan_count];
    let mut trips = 0;
    loop {
        if max_trips.is_some_and(|m| trips >= m) {
            break;
        }
        if trips >= MAX_ITERATIONS {
            return Err(format!(
                "its condition still holds after {MAX_ITERATIONS} iterations, the most Ferrite unrolls"
            ));
        }
        let iteration_num = lw.constant(
            node,
            &format!("iteration[{trips}]"),
            HostTensor::int(DType::I64, vec![], vec![trips as i64]),
        );
        let cond_in = match running {
            Some(c) => c,
            None => lw.constant(
                node,
                &format!("cond[{trips}]"),
                HostTensor::int(DType::Bool, vec![], vec![1]),
            ),
        };
        let mut inputs = vec![iteration_num, cond_in];
        inputs.extend(&carried);
        let outputs = iteration(lw, node, g, trips, &inputs)?;
        let (cond_out, rest) = outputs.split_first().ok_or("the body has no outputs")?;
        let cond_out = *cond_out;
        if lw.dtype(cond_out) != DType::Bool || lw.shape(cond_out).iter().product::<usize>() != 1 {
            return Err("the body's condition output must be one bool".into());
        }
        let (new_carried, scan_values) = rest.split_at(n);
        // Loop-carried values are replaced only where the iteration ran.
        for (k, (old, &new)) in carried.iter_mut().zip(new_carried).enumerate() {
            keeps_shape(lw, &format!("loop-carried value {k}"), *old, new)?;
            *old = match running {
                None => new,
                Some(c) => {
                    let y = lw.temp(
                        node,
                        &format!("carried{k}[{trips}]"),
                        lw.dtype(new),
                        lw.shape(new),
                    );
                    lw.emit(
                        node,
                        Op::Where,
                        vec![Some(c), Some(new), Some(*old)],
                        vec![y],
                    )?;
                    y
                }
            };
        }
        for (list, &v) in scans.iter_mut().zip(scan_values) {
            list.push(v);
        }
        trips += 1;
        match lw.value(cond_out).map(HostTensor::to_i64s) {
            // No later iteration runs: the values are those kept so far.
            Some(v) if v.first() == Some(&0) => break,
            Some(_) => {}
            None => {
                if max_trips.is_none() {
                    return Err(
                        "its condition is computed at run time and it has no trip count M: the number of iterations depends on the data (data-dependent shape)"
                            .into(),
                    );
                }
                if scan_count > 0 {
                    return Err(DATA_DEPENDENT_SCANS.into());
                }
                running = Some(match running {
                    None => cond_out,
                    Some(c) => {
                        // Both run-time bools: c AND cond_out as Where(c, cond_out, false).
                        let no = lw.constant(
                            node,
                            &format!("false[{trips}]"),
                            HostTensor::int(DType::Bool, lw.shape(c), vec![0]),
                        );
                        let y =
                            lw.temp(node, &format!("running[{trips}]"), DType::Bool, lw.shape(c));
                        lw.emit(
                            node,
                            Op::Where,
                            vec![Some(c), Some(cond_out), Some(no)],
                            vec![y],
                        )?;
                        y
                    }
                });
            }
        }
    }
    finish_loop(lw, node, g, &carried, &scans, trips)
}

/// The Loop node's loop-carried initial values (its inputs after `M` and the condition).
fn carried_inputs(lw: &Lowerer, node: &Node) -> Result<Vec<TensorId>, Reason> {
    (2..node.inputs.len()).map(|i| lw.input(node, i)).collect()
}

/// Binds a Loop's outputs: the final loop-carried values, then each scan output stacked along a
/// new first axis.
fn finish_loop(
    lw: &mut Lowerer,
    node: &Node,
    g: &GraphProto,
    carried: &[TensorId],
    scans: &[Vec<TensorId>],
    trips: usize,
) -> Result<(), Reason> {
    for (i, &v) in carried.iter().enumerate() {
        bind(lw, node, i, v)?;
    }
    let scan_count = g.output.len().saturating_sub(1 + carried.len());
    for k in 0..scan_count {
        let i = carried.len() + k;
        let values = scans.get(k).filter(|_| trips > 0).ok_or(
            "it runs no iteration, so its scan outputs would be empty tensors, which Ferrite does not plan",
        )?;
        let stacked = stack(lw, node, &format!("scan output {k}"), values, 0)?;
        bind(lw, node, i, stacked)?;
    }
    Ok(())
}

/// Scan: the body once per element of the scan inputs (opset 9 on; opset 8's batched form is
/// run once per batch element).
pub(super) fn scan_node(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let g = body(node)?;
    let m = usize::try_from(node.int("num_scan_inputs", -1)?)
        .map_err(|_| "num_scan_inputs is required".to_string())?;
    if lw.opset() >= 9 {
        let inputs = (0..node.inputs.len())
            .map(|i| lw.input(node, i))
            .collect::<Result<Vec<_>, _>>()?;
        let outputs = scan(
            lw,
            node,
            g,
            &inputs,
            m,
            "",
            ScanAttrs::of(node, "scan_input_directions")?,
        )?;
        for (i, v) in outputs.into_iter().enumerate() {
            bind(lw, node, i, v)?;
        }
        return Ok(());
    }
    // Opset 8: input 0 is the optional sequence_lens, every other input and output has a batch
    // axis first, and scan inputs scan along axis 1.
    if let Some(lens) = lw.optional_input(node, 0) {
        let full = node
            .inputs
            .get(1 + node.inputs.len().saturating_sub(1 + m))
            .and_then(|name| lw.lookup(name))
            .map(|x| lw.shape(x).get(1).copied().unwrap_or(0));
        let all_full = lw
            .value(lens)
            .is_some_and(|v| v.to_i64s().iter().all(|&l| Some(l as usize) == full));
        if !all_full {
            return Err(
                "sequence_lens shorter than the scan inputs make outputs of data-dependent length; export without sequence_lens"
                    .into(),
            );
        }
    }
    let inputs = (1..node.inputs.len())
        .map(|i| lw.input(node, i))
        .collect::<Result<Vec<_>, _>>()?;
    let batch = inputs
        .first()
        .and_then(|&x| lw.shape(x).first().copied())
        .ok_or("Scan needs inputs with a batch axis")?;
    let attrs = ScanAttrs::of(node, "directions")?;
    let mut per_batch: Vec<Vec<TensorId>> = Vec::new();
    for b in 0..batch {
        let mut sliced = Vec::with_capacity(inputs.len());
        for &x in &inputs {
            if lw.shape(x).first() != Some(&batch) {
                return Err("every input must have the same batch size first".into());
            }
            sliced.push(take(lw, node, x, 0, b)?);
        }
        per_batch.push(scan(
            lw,
            node,
            g,
            &sliced,
            m,
            &format!("[batch {b}]"),
            attrs.clone(),
        )?);
    }
    let outputs = per_batch.first().map_or(0, Vec::len);
    for i in 0..outputs {
        let values: Vec<TensorId> = per_batch.iter().map(|o| o[i]).collect();
        let stacked = stack(lw, node, &format!("output {i}"), &values, 0)?;
        bind(lw, node, i, stacked)?;
    }
    Ok(())
}

/// A Scan's per-input and per-output axes and directions (opset 8 names the input directions
/// `directions` and has no axes).
#[derive(Clone)]
struct ScanAttrs {
    input_axes: Option<Vec<i64>>,
    input_directions: Option<Vec<i64>>,
    output_axes: Option<Vec<i64>>,
    output_directions: Option<Vec<i64>>,
}

impl ScanAttrs {
    fn of(node: &Node, input_directions: &str) -> Result<ScanAttrs, Reason> {
        Ok(ScanAttrs {
            input_axes: node.ints("scan_input_axes")?,
            input_directions: node.ints(input_directions)?,
            output_axes: node.ints("scan_output_axes")?,
            output_directions: node.ints("scan_output_directions")?,
        })
    }
}

/// Entry `k` of an optional per-input or per-output list (0 when the list is absent).
fn entry(list: &Option<Vec<i64>>, k: usize, what: &str) -> Result<i64, Reason> {
    match list {
        None => Ok(0),
        Some(v) => v
            .get(k)
            .copied()
            .ok_or_else(|| format!("{what} has fewer entries than there are values")),
    }
}

/// Whether a direction value says "reverse".
fn reverse(direction: i64, what: &str) -> Result<bool, Reason> {
    match direction {
        0 => Ok(false),
        1 => Ok(true),
        d => Err(format!("{what} {d} is neither 0 (forward) nor 1 (reverse)")),
    }
}

/// Scan (opset 9 form) over `inputs`: the states, then `m` scan inputs. Returns the final
/// states, then the scan outputs.
fn scan(
    lw: &mut Lowerer,
    node: &Node,
    g: &GraphProto,
    inputs: &[TensorId],
    m: usize,
    tag: &str,
    attrs: ScanAttrs,
) -> Result<Vec<TensorId>, Reason> {
    let n = inputs
        .len()
        .checked_sub(m)
        .filter(|_| m > 0)
        .ok_or("num_scan_inputs must be between 1 and the number of inputs")?;
    let (states, scanned) = inputs.split_at(n);
    let mut states = states.to_vec();
    let mut trips = None;
    let mut axes = Vec::with_capacity(m);
    for (j, &x) in scanned.iter().enumerate() {
        let rank = lw.shape(x).len();
        let axis = normalize_axis(entry(&attrs.input_axes, j, "scan_input_axes")?, rank)?;
        let len = lw.shape(x)[axis];
        if trips.is_some_and(|t| t != len) {
            return Err("the scan inputs differ in length along their scan axes".into());
        }
        trips = Some(len);
        axes.push((
            axis,
            reverse(
                entry(&attrs.input_directions, j, "scan_input_directions")?,
                "a direction",
            )?,
        ));
    }
    let trips = bounded_trips(trips.unwrap_or(0) as i64, "the scan length is")?;
    if let Some(distances) = squared_distances(lw, node, g, inputs, m, &attrs)? {
        return Ok(distances);
    }
    if g.output.len() < n {
        return Err(format!(
            "the body has {} outputs, fewer than the {n} states",
            g.output.len()
        ));
    }
    let k_count = g.output.len() - n;
    let mut scans: Vec<Vec<TensorId>> = vec![Vec::new(); k_count];
    for t in 0..trips {
        let mut args = states.clone();
        for (&x, &(axis, rev)) in scanned.iter().zip(&axes) {
            let index = if rev { trips - 1 - t } else { t };
            args.push(take(lw, node, x, axis, index)?);
        }
        let outputs = iteration(lw, node, g, t, &args).map_err(|e| {
            if tag.is_empty() {
                e
            } else {
                format!("{tag} {e}")
            }
        })?;
        let (new_states, values) = outputs.split_at(n);
        for (k, (old, &new)) in states.iter_mut().zip(new_states).enumerate() {
            keeps_shape(lw, &format!("state {k}"), *old, new)?;
            *old = new;
        }
        for (list, &v) in scans.iter_mut().zip(values) {
            list.push(v);
        }
    }
    let mut outputs = states;
    for (k, mut values) in scans.into_iter().enumerate() {
        if values.is_empty() {
            return Err("a Scan over no elements is not supported".into());
        }
        let rank = lw.shape(values[0]).len() + 1;
        let axis = normalize_axis(entry(&attrs.output_axes, k, "scan_output_axes")?, rank)?;
        if reverse(
            entry(&attrs.output_directions, k, "scan_output_directions")?,
            "a direction",
        )? {
            values.reverse();
        }
        outputs.push(stack(lw, node, &format!("scan output {k}"), &values, axis)?);
    }
    Ok(outputs)
}

/// The most bytes of the broadcast difference one chunk of [`squared_distances`] computes.
const DISTANCE_CHUNK_BYTES: usize = 8192;

/// skl2onnx's pairwise squared distances (`onnx_cdist`, in k-nearest neighbours): a Scan over
/// the rows `c` of one matrix whose body passes the other matrix `x` through as its state and
/// returns `ReduceSumSquare(x − c, axis 1)`. Its iterations are independent, so rather than one
/// copy of the body per row, rows go [`DISTANCE_CHUNK_BYTES`] of difference at a time through
/// one broadcast Sub (`[rows, 1, F] − [1, N, F]`, in the body's operand order) and one
/// ReduceSumSquare over the features: the same arithmetic in the same order, in a plan of two
/// steps per chunk. `None` when the Scan is not of this form.
fn squared_distances(
    lw: &mut Lowerer,
    node: &Node,
    g: &GraphProto,
    inputs: &[TensorId],
    m: usize,
    attrs: &ScanAttrs,
) -> Result<Option<Vec<TensorId>>, Reason> {
    let defaults = |l: &Option<Vec<i64>>| l.as_ref().is_none_or(|v| v.iter().all(|&a| a == 0));
    let plain = m == 1
        && inputs.len() == 2
        && g.input.len() == 2
        && g.output.len() == 2
        && g.initializer.is_empty()
        && defaults(&attrs.input_axes)
        && defaults(&attrs.input_directions)
        && defaults(&attrs.output_axes)
        && defaults(&attrs.output_directions);
    let (&[x, c], true) = (inputs, plain) else {
        return Ok(None);
    };
    let (xs, cs) = (lw.shape(x), lw.shape(c));
    let (&[n, f], &[t, f2]) = (&xs[..], &cs[..]) else {
        return Ok(None);
    };
    if f != f2 || lw.dtype(x) != DType::F32 || lw.dtype(c) != DType::F32 || t == 0 {
        return Ok(None);
    }
    // The body, through its Identity nodes: state out = state in; scan out = ReduceSumSquare
    // over axis 1, without kept dims, of Sub(state, row) or Sub(row, state).
    let source = |name: &str| identity_source(g, name);
    let producer = |name: &str, op: &str| {
        g.node
            .iter()
            .find(|n| n.op_type == op && n.output.first().map(String::as_str) == Some(name))
    };
    let (state, row) = (&g.input[0].name, &g.input[1].name);
    if source(&g.output[0].name) != *state
        || g.node.len() > 2 + g.node.iter().filter(|n| n.op_type == "Identity").count()
    {
        return Ok(None);
    }
    let Some(reduce) = producer(&source(&g.output[1].name), "ReduceSumSquare") else {
        return Ok(None);
    };
    let axis_attr = reduce
        .attribute
        .iter()
        .find(|a| a.name == "axes")
        .map(|a| a.ints.clone());
    let keepdims = reduce
        .attribute
        .iter()
        .find(|a| a.name == "keepdims")
        .map_or(1, |a| a.i);
    if reduce.input.len() != 1 || keepdims != 0 || !matches!(axis_attr.as_deref(), Some([1] | [-1]))
    {
        return Ok(None);
    }
    let Some(sub) = producer(&source(&reduce.input[0]), "Sub") else {
        return Ok(None);
    };
    let operands: Vec<String> = sub.input.iter().map(|i| source(i)).collect();
    let state_first = match &operands[..] {
        [a, b] if a == state && b == row => true,
        [a, b] if a == row && b == state => false,
        _ => return Ok(None),
    };
    // Lowered through the ops' own lowerings, on views named for the purpose.
    let label = node.label();
    let x_name = format!("{label}:cdist_x");
    let x_view = lw.temp_alias(node, "cdist_x", x, vec![1, n, f]);
    lw.names.insert(x_name.clone(), x_view);
    let per_row = n.saturating_mul(f).saturating_mul(4).max(1);
    let rows = (DISTANCE_CHUNK_BYTES / per_row).clamp(1, t);
    let mut chunks = Vec::new();
    for (k, t0) in (0..t).step_by(rows).enumerate() {
        let len = rows.min(t - t0);
        let part = format!("{label}:cdist_rows{k}");
        let mut starts = [0usize; MAX_RANK];
        starts[0] = t0;
        let sliced = lw.temp(node, &format!("cdist_rows{k}"), DType::F32, vec![len, f]);
        lw.emit(
            node,
            Op::Slice {
                starts,
                steps: [1; MAX_RANK],
            },
            vec![Some(c)],
            vec![sliced],
        )?;
        let view = lw.temp_alias(
            node,
            &format!("cdist_rows{k}:view"),
            sliced,
            vec![len, 1, f],
        );
        lw.names.insert(part.clone(), view);
        let (diff, dist) = (
            format!("{label}:cdist_diff{k}"),
            format!("{label}:cdist{k}"),
        );
        let (a, b) = if state_first {
            (&x_name, &part)
        } else {
            (&part, &x_name)
        };
        let synthetic = |op: &str, inputs: Vec<String>, output: &str, attrs| Node {
            name: format!("{label}/{op}{k}"),
            op_type: op.into(),
            domain: String::new(),
            inputs,
            outputs: vec![output.to_string()],
            attrs,
        };
        lw.lower_op(&synthetic(
            "Sub",
            vec![a.clone(), b.clone()],
            &diff,
            Vec::new(),
        ))?;
        let mut reduce_inputs = vec![diff];
        let mut reduce_attrs = vec![crate::compile::onnx::build::attr_int("keepdims", 0)];
        if lw.opset() >= 18 {
            let axes = lw.constant(
                node,
                &format!("cdist_axes{k}"),
                HostTensor::int(DType::I64, vec![1], vec![2]),
            );
            let axes_name = format!("{label}:cdist_axes{k}");
            lw.names.insert(axes_name.clone(), axes);
            reduce_inputs.push(axes_name);
        } else {
            reduce_attrs.push(crate::compile::onnx::build::attr_ints("axes", &[2]));
        }
        lw.lower_op(&synthetic(
            "ReduceSumSquare",
            reduce_inputs,
            &dist,
            reduce_attrs,
        ))?;
        chunks.push(lw.lookup(&dist).ok_or("the distances were not computed")?);
    }
    let distances = concatenate(lw, node, "distances", chunks, 0)?;
    Ok(Some(vec![x, distances]))
}

/// The value `name` of body `g` is, through its Identity nodes.
fn identity_source(g: &GraphProto, name: &str) -> String {
    let mut name = name.to_string();
    for _ in 0..=g.node.len() {
        let Some(identity) = g
            .node
            .iter()
            .find(|n| n.op_type == "Identity" && n.output.first() == Some(&name))
        else {
            break;
        };
        name = identity.input.first().cloned().unwrap_or_default();
    }
    name
}
