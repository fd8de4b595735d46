//! RNN, GRU and LSTM: one [`Op::Recurrent`] step per direction (the CPU kernel runs the whole
//! sequence), with the ONNX layouts around it — per-direction slices of the weights and
//! states, `layout = 1` transposes, and the concatenation of a bidirectional layer's halves.

use super::attrs::Attrs;
use super::lowerer::{Lowerer, Reason};
use crate::compile::ir::TensorId;
use crate::compile::onnx::Node;
use ferrite_hal::op::{Cell, Recurrent};
use ferrite_hal::{Activation, DType, Op, MAX_RANK};

/// Maps ONNX activation names (with their alpha/beta, consumed in order) to activations.
fn activations(node: &Node, cell: Cell, directions: usize) -> Result<Vec<Activation>, Reason> {
    let per = match cell {
        Cell::Rnn => 1,
        Cell::Gru { .. } => 2,
        Cell::Lstm { .. } => 3,
    };
    let defaults: &[&str] = match cell {
        Cell::Rnn => &["Tanh"],
        Cell::Gru { .. } => &["Sigmoid", "Tanh"],
        Cell::Lstm { .. } => &["Sigmoid", "Tanh", "Tanh"],
    };
    let names = match node.strings("activations")? {
        Some(n) => n,
        None => (0..directions)
            .flat_map(|_| defaults.iter().map(|s| s.to_string()))
            .collect(),
    };
    if names.len() != per * directions {
        return Err(format!(
            "{} activations for {directions} direction(s) of {per}",
            names.len()
        ));
    }
    let alphas = node.floats("activation_alpha")?.unwrap_or_default();
    let betas = node.floats("activation_beta")?.unwrap_or_default();
    let (mut a, mut b) = (alphas.iter().copied(), betas.iter().copied());
    names
        .iter()
        .map(|name| {
            Ok(match name.to_ascii_lowercase().as_str() {
                "sigmoid" => Activation::Sigmoid,
                "tanh" => Activation::Tanh,
                "relu" => Activation::Relu,
                "softsign" => Activation::Softsign,
                "softplus" => Activation::Softplus,
                "leakyrelu" => Activation::LeakyRelu {
                    alpha: a.next().unwrap_or(0.01),
                },
                "thresholdedrelu" => Activation::ThresholdedRelu {
                    alpha: a.next().unwrap_or(1.0),
                },
                "elu" => Activation::Elu {
                    alpha: a.next().unwrap_or(1.0),
                },
                "hardsigmoid" => Activation::HardSigmoid {
                    alpha: a.next().unwrap_or(0.2),
                    beta: b.next().unwrap_or(0.5),
                },
                other => return Err(format!("activation '{other}' is not supported")),
            })
        })
        .collect()
}

/// Direction `d` of a per-direction tensor `[directions, ...]` (a free view for one
/// direction, a Slice for the second of two), viewed without its leading axis.
fn direction(
    lw: &mut Lowerer,
    node: &Node,
    what: &str,
    t: TensorId,
    d: usize,
) -> Result<TensorId, Reason> {
    let shape = lw.shape(t);
    let inner: Vec<usize> = shape[1..].to_vec();
    if shape[0] == 1 {
        return Ok(lw.temp_alias(node, what, t, inner));
    }
    let mut starts = [0usize; MAX_RANK];
    starts[0] = d;
    let mut out = shape.clone();
    out[0] = 1;
    let sliced = lw.temp(node, &format!("{what}_slice"), lw.dtype(t), out);
    let op = Op::Slice {
        starts,
        steps: [1; MAX_RANK],
    };
    lw.emit(node, op, vec![Some(t)], vec![sliced])?;
    Ok(lw.temp_alias(node, what, sliced, inner))
}

/// A Transpose of `t` by `perm` into a new temporary.
fn transposed(
    lw: &mut Lowerer,
    node: &Node,
    what: &str,
    t: TensorId,
    perm: &[usize],
) -> Result<TensorId, Reason> {
    let s = lw.shape(t);
    let out: Vec<usize> = perm.iter().map(|&p| s[p]).collect();
    let y = lw.temp(node, what, lw.dtype(t), out);
    let mut p = [0usize; MAX_RANK];
    p[..perm.len()].copy_from_slice(perm);
    lw.emit(node, Op::Transpose { perm: p }, vec![Some(t)], vec![y])?;
    Ok(y)
}

/// RNN, GRU and LSTM.
pub(super) fn recurrent(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let cell = match node.op_type.as_str() {
        "RNN" => Cell::Rnn,
        "GRU" => Cell::Gru {
            linear_before_reset: node.int("linear_before_reset", 0)? != 0,
        },
        _ => Cell::Lstm {
            input_forget: node.int("input_forget", 0)? != 0,
        },
    };
    let lstm = matches!(cell, Cell::Lstm { .. });
    let mut x = lw.input(node, 0)?;
    let (w, r) = (lw.input(node, 1)?, lw.input(node, 2)?);
    let b = lw.optional_input(node, 3);
    let initial_h = lw.optional_input(node, 5);
    let initial_c = if lstm {
        lw.optional_input(node, 6)
    } else {
        None
    };
    let p = if lstm {
        lw.optional_input(node, 7)
    } else {
        None
    };
    let mut all = vec![x, w, r];
    all.extend(b.iter().chain(&initial_h).chain(&initial_c).chain(&p));
    lw.require_f32(&all)?;
    let layout = node.int("layout", 0)?;
    if !(0..=1).contains(&layout) {
        return Err(format!("layout {layout} is not 0 or 1"));
    }
    let directions = match node.string("direction", "forward")?.as_str() {
        "forward" => vec![false],
        "reverse" => vec![true],
        "bidirectional" => vec![false, true],
        other => return Err(format!("direction '{other}' is unknown")),
    };
    let n_dir = directions.len();
    if lw.shape(x).len() != 3 {
        return Err("X must have rank 3".into());
    }
    if layout == 1 {
        x = transposed(lw, node, "x_seq_first", x, &[1, 0, 2])?;
    }
    let [seq, batch, features] = [0, 1, 2].map(|i| lw.shape(x)[i]);
    let hidden = lw.shape(r).get(2).copied().ok_or("R must have rank 3")?;
    let declared = node.int("hidden_size", hidden as i64)?;
    let rows = cell.gates() * hidden;
    if declared != hidden as i64 || hidden == 0 {
        return Err(format!(
            "hidden_size {declared} does not match R ({hidden})"
        ));
    }
    let expect = |lw: &Lowerer, t: TensorId, want: Vec<usize>, what: &str| -> Result<(), Reason> {
        let s = lw.shape(t);
        if s != want {
            return Err(format!("{what} is {s:?}, not {want:?}"));
        }
        Ok(())
    };
    expect(lw, w, vec![n_dir, rows, features], "W")?;
    expect(lw, r, vec![n_dir, rows, hidden], "R")?;
    if let Some(b) = b {
        expect(lw, b, vec![n_dir, 2 * rows], "B")?;
    }
    if let Some(p) = p {
        expect(lw, p, vec![n_dir, 3 * hidden], "P")?;
    }
    let state_shape = if layout == 1 {
        vec![batch, n_dir, hidden]
    } else {
        vec![n_dir, batch, hidden]
    };
    let mut states = [initial_h, initial_c];
    for s in states.iter_mut().flatten() {
        expect(lw, *s, state_shape.clone(), "the initial state")?;
        if layout == 1 {
            *s = transposed(lw, node, "state_direction_first", *s, &[1, 0, 2])?;
        }
    }
    if let Some(lens) = lw.optional_input(node, 4) {
        let full = lw
            .value(lens)
            .is_some_and(|v| v.to_i64s().iter().all(|&l| l == seq as i64));
        if !full {
            return Err(
                "sequence_lens must be a constant equal to the sequence length (variable lengths are not supported)"
                    .into(),
            );
        }
    }
    let clip = node.float("clip", 0.0)?;
    if !(clip >= 0.0 && clip.is_finite()) {
        return Err(format!("clip {clip} is not a non-negative number"));
    }
    let acts = activations(node, cell, n_dir)?;
    let per = acts.len() / n_dir;
    // One step per direction; outputs Y [seq, batch, hidden], Y_h, Y_c [batch, hidden].
    let mut ys = Vec::new();
    let mut hs = Vec::new();
    let mut cs = Vec::new();
    for (d, &reverse) in directions.iter().enumerate() {
        let tag = |s: &str| format!("{s}{d}");
        let wd = direction(lw, node, &tag("w"), w, d)?;
        let rd = direction(lw, node, &tag("r"), r, d)?;
        let bd = b
            .map(|b| direction(lw, node, &tag("b"), b, d))
            .transpose()?;
        let hd = states[0]
            .map(|h| direction(lw, node, &tag("h0_"), h, d))
            .transpose()?;
        let cd = states[1]
            .map(|c| direction(lw, node, &tag("c0_"), c, d))
            .transpose()?;
        let pd = p
            .map(|p| direction(lw, node, &tag("p"), p, d))
            .transpose()?;
        let mut activations = [Activation::None; 3];
        activations[..per].copy_from_slice(&acts[d * per..(d + 1) * per]);
        let op = Op::Recurrent(Recurrent {
            cell,
            reverse,
            clip,
            activations,
        });
        let y = lw.temp(node, &tag("y"), DType::F32, vec![seq, batch, hidden]);
        let h = lw.temp(node, &tag("y_h"), DType::F32, vec![batch, hidden]);
        let mut outputs = vec![y, h];
        if lstm {
            let c = lw.temp(node, &tag("y_c"), DType::F32, vec![batch, hidden]);
            outputs.push(c);
            cs.push(c);
        }
        let inputs = vec![Some(x), Some(wd), Some(rd), bd, hd, cd, pd];
        lw.emit(node, op, inputs, outputs)?;
        ys.push(y);
        hs.push(h);
    }
    // Y: [seq, n_dir, batch, hidden] (layout 0) or [batch, seq, n_dir, hidden] (layout 1).
    let y_parts: Vec<TensorId> = ys
        .iter()
        .enumerate()
        .map(|(d, &y)| lw.temp_alias(node, &format!("y{d}_4d"), y, vec![seq, 1, batch, hidden]))
        .collect();
    let y = join(
        lw,
        node,
        "y_all",
        &y_parts,
        1,
        vec![seq, n_dir, batch, hidden],
    )?;
    let y = if layout == 1 {
        transposed(lw, node, "y_batch_first", y, &[2, 0, 1, 3])?
    } else {
        y
    };
    finish(lw, node, 0, y)?;
    for (i, parts) in [(1, hs), (2, cs)] {
        if parts.is_empty() {
            continue;
        }
        let views: Vec<TensorId> = parts
            .iter()
            .enumerate()
            .map(|(d, &t)| lw.temp_alias(node, &format!("state{i}_{d}"), t, vec![1, batch, hidden]))
            .collect();
        let s = join(
            lw,
            node,
            &format!("state{i}"),
            &views,
            0,
            vec![n_dir, batch, hidden],
        )?;
        let s = if layout == 1 {
            transposed(lw, node, &format!("state{i}_batch_first"), s, &[1, 0, 2])?
        } else {
            s
        };
        finish(lw, node, i, s)?;
    }
    Ok(())
}

/// The parts concatenated along `axis` (a free view for one part).
fn join(
    lw: &mut Lowerer,
    node: &Node,
    what: &str,
    parts: &[TensorId],
    axis: usize,
    shape: Vec<usize>,
) -> Result<TensorId, Reason> {
    if let [one] = parts {
        return Ok(*one);
    }
    let y = lw.temp(node, what, DType::F32, shape);
    let inputs = parts.iter().map(|&p| Some(p)).collect();
    lw.emit(node, Op::Concat { axis }, inputs, vec![y])?;
    Ok(y)
}

/// Node output `i` (when the model uses it) as a view of `t`.
fn finish(lw: &mut Lowerer, node: &Node, i: usize, t: TensorId) -> Result<(), Reason> {
    if node.outputs.get(i).is_some_and(|o| !o.is_empty()) {
        let shape = lw.shape(t);
        lw.alias_output(node, i, t, shape)?;
    }
    Ok(())
}
