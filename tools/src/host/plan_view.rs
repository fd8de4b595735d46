//! A packed model's plan as people read it: each step's multiply-accumulates, each arena
//! tensor's lifetime (the steps it is live in, aliases merged), names shortened for tables, and
//! the memory plan drawn as an SVG (`ferrite inspect --plot`).

use ferrite_core::Model;
use ferrite_hal::op::Family;
use ferrite_hal::{Location, OpKind, Plan};
use std::fmt::Write as _;

/// Multiply-accumulates of step `index` (convolutions and matrix products), else `None`.
pub fn macs(model: &Model<'_>, index: usize) -> Option<u64> {
    let step = model.step(index)?;
    let kind = step.op.kind();
    let elements = |d: ferrite_hal::TensorDesc| d.shape.dims().iter().product::<usize>() as u64;
    let x = step.inputs.get(0)?;
    let w = step.inputs.get(1)?;
    let y = step.outputs.get(0)?;
    let per = |d: &ferrite_hal::TensorDesc| -> u64 {
        d.shape.dims().iter().skip(1).product::<usize>() as u64
    };
    match kind.family() {
        // Each output (each input, transposed) meets one filter: (in channels / group) × window.
        Family::Conv if kind == OpKind::ConvTranspose => Some(elements(x) * per(&w)),
        Family::Conv => Some(elements(y) * per(&w)),
        // Each output element is a dot product along the shared dimension.
        Family::MatMul => {
            let k = match kind {
                OpKind::MatMul | OpKind::MatMulInteger => *x.shape.dims().last()? as u64,
                _ => {
                    let rows = *y.shape.dims().first()? as u64;
                    elements(x) / rows.max(1)
                }
            };
            Some(elements(y) * k)
        }
        _ => None,
    }
}

/// One region of the arena over the steps it is live in.
#[derive(Clone, Debug, PartialEq)]
pub struct Lifetime {
    /// The tensor's name (the first one, when several tensors share the region).
    pub name: String,
    /// How many more tensors share the region over these steps (aliases: a reshape in place).
    pub aliases: usize,
    /// Byte offset in the arena.
    pub offset: usize,
    /// Bytes.
    pub bytes: usize,
    /// First step it is live in (0 for a graph input).
    pub first: usize,
    /// Last step it is live in (the last step for a graph output).
    pub last: usize,
    /// A step's scratch buffer (live in that step only).
    pub scratch: bool,
}

impl Lifetime {
    /// ` (+N aliases)` when other tensors share the region, else empty.
    pub fn aliases_note(&self) -> String {
        match self.aliases {
            0 => String::new(),
            1 => " (+1 alias)".to_string(),
            n => format!(" (+{n} aliases)"),
        }
    }
}

/// Every arena tensor's lifetime, in offset order, tensors sharing a region in overlapping
/// steps merged into one row. `name` gives a tensor's shown name (from its index and stored
/// name).
pub fn lifetimes(model: &Model<'_>, name: impl Fn(usize, &str) -> String) -> Vec<Lifetime> {
    let steps = model.len();
    let last_step = steps.saturating_sub(1);
    let mut live: Vec<Option<(usize, usize)>> = vec![None; model.tensor_count()];
    let mut touch = |t: usize, s: usize| {
        if let Some(slot) = live.get_mut(t) {
            *slot = Some(match *slot {
                None => (s, s),
                Some((a, b)) => (a.min(s), b.max(s)),
            });
        }
    };
    let mut scratch = Vec::new();
    // Tensors some step writes: a region's new contents, not a view of what is there.
    let mut written = vec![false; model.tensor_count()];
    for s in 0..steps {
        let Some(step) = model.step(s) else { continue };
        for list in [step.inputs, step.outputs] {
            for k in 0..list.len() {
                if let Some(t) = list.index(k) {
                    touch(t as usize, s);
                }
            }
        }
        for k in 0..step.outputs.len() {
            if let Some(w) = step
                .outputs
                .index(k)
                .and_then(|t| written.get_mut(t as usize))
            {
                *w = true;
            }
        }
        if let Some(d) = step.scratch {
            if let Location::Arena(offset) = d.location {
                let op = model.op_name(s).unwrap_or("");
                scratch.push(Lifetime {
                    name: if op.is_empty() {
                        format!("scratch of step {s}")
                    } else {
                        format!("scratch of step {s} ({op})")
                    },
                    aliases: 0,
                    offset,
                    bytes: d.bytes,
                    first: s,
                    last: s,
                    scratch: true,
                });
            }
        }
    }
    for i in 0..model.input_count() {
        if let Some(t) = model.input_tensor(i) {
            touch(t, 0);
        }
    }
    for i in 0..model.output_count() {
        if let Some(t) = model.output_tensor(i) {
            touch(t, last_step);
        }
    }
    let mut rows: Vec<Lifetime> = Vec::new();
    for t in 0..model.tensor_count() {
        let Some(info) = model.tensor_info(t) else {
            continue;
        };
        let Location::Arena(offset) = info.desc.location else {
            continue;
        };
        let Some((first, last)) = live[t] else {
            continue;
        };
        let row = Lifetime {
            name: name(t, info.name),
            aliases: 0,
            offset,
            bytes: info.desc.bytes,
            first,
            last,
            scratch: false,
        };
        // A tensor no step writes, on a region live right before or with it: a view (a
        // reshape in place), one buffer under two names.
        let same = rows.iter_mut().find(|r| {
            !written[t]
                && r.offset == row.offset
                && r.bytes == row.bytes
                && r.first <= row.last + 1
                && row.first <= r.last + 1
        });
        match same {
            Some(r) => {
                r.aliases += 1;
                r.first = r.first.min(row.first);
                r.last = r.last.max(row.last);
            }
            None => rows.push(row),
        }
    }
    rows.extend(scratch);
    rows.sort_by_key(|r| (r.offset, r.first));
    rows
}

/// `name` at most `max` characters: its start and end around an ellipsis (tf2onnx names run to
/// hundreds of characters; `--json` keeps them whole).
pub fn shorten(name: &str, max: usize) -> String {
    let chars: Vec<char> = name.chars().collect();
    if chars.len() <= max || max < 5 {
        return name.to_string();
    }
    let keep = max - 1;
    let head = keep / 2;
    let tail = keep - head;
    let start: String = chars[..head].iter().collect();
    let end: String = chars[chars.len() - tail..].iter().collect();
    format!("{start}…{end}")
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The memory plan as an SVG: x is the step, y the arena offset; one rectangle per lifetime
/// (scratch hatched grey), the step where the most bytes are live marked, and each rectangle's
/// name, bytes and steps in its `<title>` (shown on hover).
pub fn svg(model: &Model<'_>, rows: &[Lifetime], title: &str) -> String {
    let steps = model.len().max(1);
    let arena = model.arena_bytes().max(1);
    let (left, top, width, height) = (70.0, 40.0, 820.0, 420.0);
    let sx = width / steps as f64;
    let sy = height / arena as f64;
    // Bytes live per step, for the peak.
    let mut per_step = vec![0usize; steps];
    for r in rows {
        let live = per_step
            .iter_mut()
            .skip(r.first)
            .take(r.last.saturating_sub(r.first) + 1);
        for bytes in live {
            *bytes += r.bytes;
        }
    }
    let (peak_step, peak) = per_step
        .iter()
        .copied()
        .enumerate()
        .max_by_key(|&(s, b)| (b, std::cmp::Reverse(s)))
        .unwrap_or((0, 0));
    let mut out = String::new();
    let _ = writeln!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"##,
        w = left + width + 20.0,
        h = top + height + 50.0
    );
    let _ = writeln!(
        out,
        r##"<title>{}</title>
<defs><pattern id="scratch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#e0e0e0"/><line x1="0" y1="0" x2="0" y2="6" stroke="#909090" stroke-width="2"/></pattern></defs>
<text x="{left}" y="20">{}: arena {} bytes, {} steps; peak {} bytes live at step {}</text>"##,
        escape(title),
        escape(title),
        model.arena_bytes(),
        model.len(),
        peak,
        peak_step
    );
    let _ = writeln!(
        out,
        r##"<rect x="{left}" y="{top}" width="{width}" height="{height}" fill="none" stroke="#444"/>"##
    );
    let palette = [
        "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1", "#edc948",
    ];
    for (i, r) in rows.iter().enumerate() {
        let fill = if r.scratch {
            "url(#scratch)".to_string()
        } else {
            palette[i % palette.len()].to_string()
        };
        let also = r.aliases_note();
        let _ = writeln!(
            out,
            r##"<rect class="{}" x="{:.2}" y="{:.2}" width="{:.2}" height="{:.2}" fill="{fill}" stroke="#222" stroke-width="0.5"><title>{}{also}: {} bytes at [{}, {}), steps {}-{}</title></rect>"##,
            if r.scratch { "scratch" } else { "tensor" },
            left + r.first as f64 * sx,
            top + r.offset as f64 * sy,
            ((r.last - r.first + 1) as f64 * sx).max(1.0),
            (r.bytes as f64 * sy).max(1.0),
            escape(&r.name),
            r.bytes,
            r.offset,
            r.offset + r.bytes,
            r.first,
            r.last
        );
    }
    // The peak, over the rectangles.
    let _ = writeln!(
        out,
        r##"<rect class="peak" x="{:.2}" y="{top}" width="{:.2}" height="{height}" fill="#ffd54f" fill-opacity="0.3" stroke="#c49000" stroke-dasharray="4 3"><title>peak: {peak} bytes live at step {peak_step}</title></rect>"##,
        left + peak_step as f64 * sx,
        sx
    );
    // Axes: steps along the bottom, offsets on the left.
    let ticks = steps.min(10);
    for k in 0..=ticks {
        let s = k * steps / ticks.max(1);
        let _ = writeln!(
            out,
            r##"<text x="{:.2}" y="{:.2}" text-anchor="middle">{s}</text>"##,
            left + s as f64 * sx,
            top + height + 16.0
        );
    }
    for k in 0..=4 {
        let b = k * arena / 4;
        let _ = writeln!(
            out,
            r##"<text x="{:.2}" y="{:.2}" text-anchor="end">{b}</text>"##,
            left - 6.0,
            top + b as f64 * sy + 4.0
        );
    }
    let _ = writeln!(
        out,
        r##"<text x="{:.2}" y="{:.2}" text-anchor="middle">step</text>
<text x="14" y="{:.2}" transform="rotate(-90 14 {:.2})" text-anchor="middle">arena offset (bytes)</text>
</svg>"##,
        left + width / 2.0,
        top + height + 36.0,
        top + height / 2.0,
        top + height / 2.0
    );
    out
}
