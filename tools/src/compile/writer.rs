//! Encodes a planned graph as a `.frt` file (layout in `docs/format.md`).

use crate::compile::error::PackError;
use crate::compile::ir::{PlanGraph, TensorId};
use crate::compile::planner::MemoryPlan;
use ferrite_core::format::{self, section};
use ferrite_hal::words::WordWriter;
use std::collections::HashMap;

fn u32_of(v: usize, what: &str) -> Result<u32, PackError> {
    u32::try_from(v).map_err(|_| PackError::Write(format!("{what} exceeds 4 GiB")))
}

fn pad_to(buf: &mut Vec<u8>, align: usize) {
    while !buf.len().is_multiple_of(align) {
        buf.push(0);
    }
}

/// Serialises `g` with its memory plan.
pub fn write(g: &PlanGraph, plan: &MemoryPlan) -> Result<Vec<u8>, PackError> {
    let mut index: HashMap<TensorId, u32> = HashMap::new();
    let mut order: Vec<TensorId> = Vec::new();
    let mut add = |t: TensorId, index: &mut HashMap<TensorId, u32>| -> u32 {
        *index.entry(t).or_insert_with(|| {
            order.push(t);
            (order.len() - 1) as u32
        })
    };
    for &t in g.inputs.iter().chain(&g.outputs) {
        add(t, &mut index);
    }
    for (i, op) in g.ops.iter().enumerate() {
        for &t in op.inputs.iter().flatten().chain(&op.outputs) {
            add(t, &mut index);
        }
        if let Some(s) = plan.scratch[i] {
            add(s, &mut index);
        }
    }

    let mut strings: Vec<u8> = Vec::new();
    let string_ref = |s: &str, strings: &mut Vec<u8>| -> (u32, u32) {
        let at = strings.len() as u32;
        strings.extend_from_slice(s.as_bytes());
        (at, s.len() as u32)
    };

    let mut weights: Vec<u8> = Vec::new();
    let mut weight_offsets: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut tensors: Vec<u8> = Vec::new();
    for &t in &order {
        let tensor = &g.tensors[t];
        let root = g.root(t);
        let value = tensor.value.as_ref().or(g.tensors[root].value.as_ref());
        let (storage, offset) = match value {
            Some(v) => {
                let bytes = v.to_le_bytes();
                let offset = match weight_offsets.get(&bytes) {
                    Some(&o) => o,
                    None => {
                        pad_to(&mut weights, format::WEIGHT_ALIGN);
                        let o = weights.len();
                        weights.extend_from_slice(&bytes);
                        weight_offsets.insert(bytes, o);
                        o
                    }
                };
                (format::STORAGE_WEIGHTS, offset)
            }
            None => {
                let o = plan.offset(t).ok_or_else(|| {
                    PackError::Write(format!("tensor '{}' has no arena offset", tensor.name))
                })?;
                (format::STORAGE_ARENA, o)
            }
        };
        let (name_at, name_len) = string_ref(&tensor.name, &mut strings);
        let mut rec = [0u8; format::TENSOR_RECORD_BYTES];
        rec[0] = tensor.dtype.code();
        rec[1] = u8::try_from(tensor.shape.len())
            .map_err(|_| PackError::Write("rank too large".into()))?;
        rec[2] = storage;
        rec[4..8].copy_from_slice(&name_at.to_le_bytes());
        rec[8..12].copy_from_slice(&name_len.to_le_bytes());
        rec[12..16].copy_from_slice(&u32_of(offset, "offset")?.to_le_bytes());
        rec[16..20].copy_from_slice(&u32_of(tensor.bytes(), "tensor size")?.to_le_bytes());
        if tensor.shape.len() > ferrite_hal::MAX_RANK {
            return Err(PackError::Write(format!(
                "tensor '{}' has rank above {}",
                tensor.name,
                ferrite_hal::MAX_RANK
            )));
        }
        for (axis, &d) in tensor.shape.iter().enumerate() {
            rec[24 + 4 * axis..28 + 4 * axis]
                .copy_from_slice(&u32_of(d, "dimension")?.to_le_bytes());
        }
        tensors.extend_from_slice(&rec);
    }

    let mut ops: Vec<u8> = Vec::new();
    let mut operands: Vec<u8> = Vec::new();
    let mut params: Vec<u8> = Vec::new();
    for (i, op) in g.ops.iter().enumerate() {
        let first = operands.len() / 4;
        for input in &op.inputs {
            let v = input.map(|t| index[&t]).unwrap_or(format::NO_TENSOR);
            operands.extend(v.to_le_bytes());
        }
        for o in &op.outputs {
            operands.extend(index[o].to_le_bytes());
        }
        let mut w = WordWriter::default();
        op.op.encode(&mut w);
        let words = w
            .words()
            .ok_or_else(|| PackError::Write("too many op parameters".into()))?;
        let param_start = params.len() / 4;
        for v in words {
            params.extend(v.to_le_bytes());
        }
        let scratch = plan.scratch[i]
            .map(|t| index[&t])
            .unwrap_or(format::NO_TENSOR);
        let (name_at, name_len) = string_ref(&op.name, &mut strings);
        let mut rec = [0u8; format::OP_RECORD_BYTES];
        rec[0..2].copy_from_slice(&op.op.kind().code().to_le_bytes());
        rec[2] = u8::try_from(op.inputs.len())
            .map_err(|_| PackError::Write("too many inputs".into()))?;
        rec[3] = u8::try_from(op.outputs.len())
            .map_err(|_| PackError::Write("too many outputs".into()))?;
        rec[4..8].copy_from_slice(&u32_of(first, "operands")?.to_le_bytes());
        rec[8..12].copy_from_slice(&u32_of(param_start, "params")?.to_le_bytes());
        rec[12..16].copy_from_slice(&(words.len() as u32).to_le_bytes());
        rec[16..20].copy_from_slice(&scratch.to_le_bytes());
        rec[20..24].copy_from_slice(&name_at.to_le_bytes());
        rec[24..28].copy_from_slice(&name_len.to_le_bytes());
        ops.extend_from_slice(&rec);
    }

    if g.inputs.len() > format::MAX_IO || g.outputs.len() > format::MAX_IO {
        return Err(PackError::Write(format!(
            "more than {} inputs or outputs",
            format::MAX_IO
        )));
    }
    let mut graph = Vec::new();
    for v in [
        u32_of(plan.arena_bytes, "arena")?,
        u32_of(plan.lower_bound, "arena")?,
        format::LAYOUT_NCHW,
        g.inputs.len() as u32,
        g.outputs.len() as u32,
        0,
        0,
        0,
    ] {
        graph.extend(v.to_le_bytes());
    }
    for t in g.inputs.iter().chain(&g.outputs) {
        graph.extend(index[t].to_le_bytes());
    }
    pad_to(&mut strings, 4);

    // Per graph input, then output: flags (1 = quantized), scale, zero point, reserved.
    let mut quantization = Vec::new();
    if !g.io_quantization.is_empty() {
        for t in g.inputs.iter().chain(&g.outputs) {
            let (flags, scale, zero) = match g.io_quantization.get(t) {
                Some(&(scale, zero)) => (1u32, scale.to_bits(), zero as i32 as u32),
                None => (0, 0, 0),
            };
            for v in [flags, scale, zero, 0] {
                quantization.extend(v.to_le_bytes());
            }
        }
    }

    let mut sections: Vec<(u32, &[u8])> = vec![
        (section::STRINGS, &strings),
        (section::TENSORS, &tensors),
        (section::OPS, &ops),
        (section::OPERANDS, &operands),
        (section::PARAMS, &params),
        (section::GRAPH, &graph),
        (section::WEIGHTS, &weights),
    ];
    if !quantization.is_empty() {
        sections.push((section::QUANTIZATION, &quantization));
    }
    assemble(&sections)
}

/// Lays out a file from its sections (in this order; weights 16-byte aligned, the others 4),
/// with the header, section table and CRC.
pub(crate) fn assemble(sections: &[(u32, &[u8])]) -> Result<Vec<u8>, PackError> {
    let mut file = vec![0u8; format::HEADER_BYTES + sections.len() * format::SECTION_ENTRY_BYTES];
    let mut table = Vec::new();
    for &(kind, data) in sections {
        pad_to(
            &mut file,
            if kind == section::WEIGHTS {
                format::WEIGHT_ALIGN
            } else {
                4
            },
        );
        table.push((kind, file.len(), data.len()));
        file.extend_from_slice(data);
    }
    pad_to(&mut file, 4);
    for (i, (kind, offset, len)) in table.into_iter().enumerate() {
        let at = format::HEADER_BYTES + i * format::SECTION_ENTRY_BYTES;
        file[at..at + 4].copy_from_slice(&kind.to_le_bytes());
        file[at + 4..at + 8].copy_from_slice(&u32_of(offset, "file")?.to_le_bytes());
        file[at + 8..at + 12].copy_from_slice(&u32_of(len, "section")?.to_le_bytes());
    }
    let total = u32_of(file.len(), "file")?;
    file[0..4].copy_from_slice(&format::MAGIC);
    file[4..6].copy_from_slice(&format::VERSION_MAJOR.to_le_bytes());
    // The oldest minor version the file needs: 1 with a QUANTIZATION section, else 0.
    let minor: u16 = if sections
        .iter()
        .any(|&(kind, _)| kind == section::QUANTIZATION)
    {
        1
    } else {
        0
    };
    file[6..8].copy_from_slice(&minor.to_le_bytes());
    file[8..12].copy_from_slice(&total.to_le_bytes());
    file[16..20].copy_from_slice(&(sections.len() as u32).to_le_bytes());
    let crc = crc32fast::hash(&file[format::CRC_START..]);
    file[12..16].copy_from_slice(&crc.to_le_bytes());
    Ok(file)
}
