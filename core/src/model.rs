//! A verified `.frt` model: [`Model::load`] checks everything once and the accessors then read
//! the file in place, without copying weights.

use crate::bytes::{range, u16_at, u32_at, u8_at};
use crate::error::{FormatError, FormatErrorKind as K};
use crate::format::{self, section};
use crate::rules;
use ferrite_hal::words::WordReader;
use ferrite_hal::{
    selects, selects_activation, selects_binary, selects_dtype, DType, Location, Op, OpKind, Plan,
    Selection, Shape, Step, TensorDesc, TensorList, Tensors, ALL_OPS,
};

/// A tensor's description together with its name.
#[derive(Clone, Copy, Debug)]
pub struct TensorInfo<'a> {
    /// Name from the ONNX graph.
    pub name: &'a str,
    /// Type, shape and location.
    pub desc: TensorDesc,
}

/// A packed model, verified and ready to run. Borrows the file's bytes (e.g. in flash).
///
/// `OPS` is the selection of op kinds this build decodes and verifies ([`ALL_OPS`] unless a
/// firmware loads with [`Model::load_selected`]); the others' code is not linked.
#[derive(Clone, Copy, Debug)]
pub struct Model<'a, const OPS: Selection = ALL_OPS> {
    strings: &'a [u8],
    tensors: &'a [u8],
    ops: &'a [u8],
    operands: &'a [u8],
    params: &'a [u8],
    weights: &'a [u8],
    inputs: &'a [u8],
    outputs: &'a [u8],
    /// The QUANTIZATION section (empty when the file has none).
    quantization: &'a [u8],
    arena_bytes: usize,
    arena_lower_bound: usize,
    file_bytes: usize,
    file: &'a [u8],
}

/// The scale and zero point of a quantized graph input or output: `real = (q − zero_point) ×
/// scale` (what a firmware needs to quantize its features and dequantize its scores).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quantization {
    /// The step between neighbouring integers, finite and positive.
    pub scale: f32,
    /// The integer that stands for 0, in the tensor's integer range.
    pub zero_point: i32,
}

/// QUANTIZATION record `i`, if it says the tensor is quantized (verified at load).
fn quantization_record(section: &[u8], i: usize) -> Option<Quantization> {
    let at = i.checked_mul(format::QUANTIZATION_RECORD_BYTES)?;
    if u32_at(section, at)? != 1 {
        return None;
    }
    Some(Quantization {
        scale: f32::from_bits(u32_at(section, at + 4)?),
        zero_point: u32_at(section, at + 8)? as i32,
    })
}

/// Checks QUANTIZATION record `i` of a tensor of `dtype`: flags 0 (not quantized: the rest zero)
/// or 1 (a finite, positive scale and a zero point in the integer type's range), reserved zero.
fn verify_quantization(section: &[u8], i: usize, dtype: DType) -> Result<(), FormatError> {
    let at = i * format::QUANTIZATION_RECORD_BYTES;
    let word = |k: usize| u32_at(section, at + 4 * k).unwrap_or(u32::MAX);
    let (flags, scale, zero, reserved) = (word(0), word(1), word(2) as i32, word(3));
    let (lo, hi) = match dtype {
        DType::I8 => (-128, 127),
        DType::U8 => (0, 255),
        DType::I16 => (-32768, 32767),
        DType::U16 => (0, 65535),
        _ => (1, 0),
    };
    // A finite positive f32 has its bits in (0, +infinity's).
    let valid = reserved == 0
        && match flags {
            0 => scale == 0 && zero == 0,
            1 => scale > 0 && scale < 0x7f80_0000 && lo <= zero && zero <= hi,
            _ => false,
        };
    if valid {
        Ok(())
    } else {
        Err(err(K::InvalidValue, "quantization record"))
    }
}

#[inline(always)]
fn err(kind: K, context: &'static str) -> FormatError {
    FormatError::new(kind, context)
}

impl<'a> Model<'a> {
    /// Verifies `bytes` as a `.frt` model. The weights must be 16-byte aligned in memory, which
    /// holds when the file itself starts at a 16-byte boundary.
    pub fn load(bytes: &'a [u8]) -> Result<Model<'a>, FormatError> {
        Model::load_selected(bytes)
    }
}

impl<'a, const OPS: Selection> Model<'a, OPS> {
    /// As [`Model::load`], in a build that links the decoding and verification of only the op
    /// kinds selection `OPS` names (a firmware's selection: the `OPS` of the module
    /// `ferrite pack --emit rust` writes). A model with any other kind is refused.
    pub fn load_selected(bytes: &'a [u8]) -> Result<Model<'a, OPS>, FormatError> {
        let model = Self::parse_structure(bytes)?;
        model.verify_tensors()?;
        model.verify_io()?;
        model.verify_ops()?;
        Ok(model)
    }

    // Out of line: run once per load or inference, so inlining only copies it (flash).
    #[inline(never)]
    fn parse_structure(bytes: &'a [u8]) -> Result<Model<'a, OPS>, FormatError> {
        let header = bytes
            .get(..format::HEADER_BYTES)
            .ok_or(err(K::Truncated, "header"))?;
        if header[..4] != format::MAGIC {
            return Err(err(K::BadMagic, ""));
        }
        let major = u16_at(header, 4).ok_or(err(K::Truncated, "header"))?;
        let minor = u16_at(header, 6).ok_or(err(K::Truncated, "header"))?;
        if major != format::VERSION_MAJOR {
            return Err(err(K::UnsupportedVersion { major, minor }, ""));
        }
        let file_bytes = u32_at(header, 8).ok_or(err(K::Truncated, "header"))? as usize;
        let file = bytes
            .get(..file_bytes)
            .ok_or(err(K::Truncated, "file shorter than its header says"))?;
        if file_bytes < format::HEADER_BYTES {
            return Err(err(K::InvalidValue, "file size"));
        }
        let stored = u32_at(header, 12).ok_or(err(K::Truncated, "header"))?;
        let computed = crate::crc::crc32(&file[format::CRC_START..]);
        if stored != computed {
            return Err(err(K::ChecksumMismatch { stored, computed }, ""));
        }
        let count = u32_at(header, 16).ok_or(err(K::Truncated, "header"))? as usize;
        if header[20..format::HEADER_BYTES].iter().any(|&b| b != 0) {
            return Err(err(K::InvalidValue, "reserved header bytes must be zero"));
        }
        if count > format::MAX_SECTIONS {
            return Err(err(K::OutOfRange, "section count"));
        }
        let table_end = format::HEADER_BYTES + count * format::SECTION_ENTRY_BYTES;
        if table_end > file_bytes {
            return Err(err(K::Truncated, "section table"));
        }
        let mut found: [Option<&'a [u8]>; 9] = [None; 9];
        for i in 0..count {
            let entry = format::HEADER_BYTES + i * format::SECTION_ENTRY_BYTES;
            let kind = u32_at(file, entry).ok_or(err(K::Truncated, "section table"))?;
            let offset =
                u32_at(file, entry + 4).ok_or(err(K::Truncated, "section table"))? as usize;
            let len = u32_at(file, entry + 8).ok_or(err(K::Truncated, "section table"))? as usize;
            if u32_at(file, entry + 12) != Some(0) {
                return Err(
                    err(K::InvalidValue, "reserved section-table bytes must be zero").at(i),
                );
            }
            if offset < table_end {
                return Err(err(K::OutOfRange, "section overlaps the header").at(i));
            }
            let data = range(file, offset, len)
                .ok_or(err(K::Truncated, "section past end of file").at(i))?;
            let align = if kind == section::WEIGHTS {
                format::WEIGHT_ALIGN
            } else {
                4
            };
            if !offset.is_multiple_of(align) {
                return Err(err(K::Misaligned, "section offset").at(i));
            }
            if let Some(slot) = found.get_mut(kind as usize) {
                if kind != 0 {
                    if slot.is_some() {
                        return Err(err(K::DuplicateSection, "").at(kind as usize));
                    }
                    *slot = Some(data);
                }
            }
            // Unknown kinds are skipped: newer minor versions may add sections.
        }
        let get = |kind: u32, name: &'static str| {
            found[kind as usize].ok_or(err(K::MissingSection, name))
        };
        let weights = get(section::WEIGHTS, "weights")?;
        if !(weights.as_ptr() as usize).is_multiple_of(format::WEIGHT_ALIGN) {
            return Err(err(
                K::Misaligned,
                "model bytes must start at a 16-byte boundary in memory",
            ));
        }
        let graph = get(section::GRAPH, "graph")?;
        let g = |at: usize| u32_at(graph, at).ok_or(err(K::Truncated, "graph section"));
        let arena_bytes = g(0)? as usize;
        let arena_lower_bound = g(4)? as usize;
        if g(8)? != format::LAYOUT_NCHW {
            return Err(err(K::InvalidValue, "layout"));
        }
        if (20..format::GRAPH_HEADER_BYTES)
            .step_by(4)
            .any(|at| u32_at(graph, at) != Some(0))
        {
            return Err(err(K::InvalidValue, "reserved graph bytes must be zero"));
        }
        let n_in = g(12)? as usize;
        let n_out = g(16)? as usize;
        if n_in > format::MAX_IO || n_out > format::MAX_IO || n_out == 0 {
            return Err(err(K::OutOfRange, "input/output count"));
        }
        let inputs = range(graph, format::GRAPH_HEADER_BYTES, 4 * n_in)
            .ok_or(err(K::Truncated, "graph inputs"))?;
        let outputs = range(graph, format::GRAPH_HEADER_BYTES + 4 * n_in, 4 * n_out)
            .ok_or(err(K::Truncated, "graph outputs"))?;
        let sized =
            |kind: u32, name: &'static str, record: usize| -> Result<&'a [u8], FormatError> {
                let data = get(kind, name)?;
                if data.len() % record != 0 {
                    return Err(err(K::InvalidValue, name));
                }
                Ok(data)
            };
        Ok(Model {
            strings: get(section::STRINGS, "strings")?,
            tensors: sized(section::TENSORS, "tensors", format::TENSOR_RECORD_BYTES)?,
            ops: sized(section::OPS, "ops", format::OP_RECORD_BYTES)?,
            operands: sized(section::OPERANDS, "operands", 4)?,
            params: sized(section::PARAMS, "params", 4)?,
            weights,
            inputs,
            outputs,
            quantization: found[section::QUANTIZATION as usize].unwrap_or(&[]),
            arena_bytes,
            arena_lower_bound,
            file_bytes,
            file,
        })
    }

    /// Decodes tensor record `index`, checking everything about it, name included.
    fn decode_tensor(&self, index: usize) -> Result<(TensorDesc, &'a str), FormatError> {
        let desc = self.decode_desc(index)?;
        let rec = range(self.tensors, index * format::TENSOR_RECORD_BYTES, 12)
            .ok_or(err(K::OutOfRange, "tensor index").at(index))?;
        let word = |at| u32_at(rec, at).ok_or(err(K::Truncated, "tensor").at(index));
        let name = self.string(word(4)? as usize, word(8)? as usize)?;
        Ok((desc, name))
    }

    /// Decodes tensor record `index` without its name: what running a step needs, on every
    /// run (the name's UTF-8 check would cost more than the rest). Inlined into the two callers
    /// (a step's operand lookup, the verifier's tensor walk): out of line, its result took a
    /// second slot in the lookup's frame, on the deepest path of an inference.
    #[inline(always)]
    fn decode_desc(&self, index: usize) -> Result<TensorDesc, FormatError> {
        let e = |kind, what| err(kind, what).at(index);
        let rec = range(
            self.tensors,
            index
                .checked_mul(format::TENSOR_RECORD_BYTES)
                .ok_or(e(K::Overflow, "tensor index"))?,
            format::TENSOR_RECORD_BYTES,
        )
        .ok_or(e(K::OutOfRange, "tensor index"))?;
        let word = |at| u32_at(rec, at).ok_or(e(K::Truncated, "tensor"));
        let dtype = DType::from_code(u8_at(rec, 0).unwrap_or(0))
            .ok_or(e(K::InvalidValue, "tensor dtype"))?;
        let rank = u8_at(rec, 1).unwrap_or(u8::MAX) as usize;
        if rank > ferrite_hal::MAX_RANK {
            return Err(e(K::OutOfRange, "tensor rank"));
        }
        let storage = u8_at(rec, 2).unwrap_or(u8::MAX);
        // Reserved: byte 3, word 20 and every word past the dims (checked a word at a time:
        // this runs for every operand of every step).
        let zero_word = |at| u32_at(rec, at) == Some(0);
        let mut reserved_zero = u8_at(rec, 3) == Some(0) && zero_word(20);
        let mut at = 24 + 4 * rank;
        while reserved_zero && at < format::TENSOR_RECORD_BYTES {
            reserved_zero = zero_word(at);
            at += 4;
        }
        if !reserved_zero {
            return Err(e(K::InvalidValue, "reserved tensor bytes must be zero"));
        }
        let offset = word(12)? as usize;
        let bytes = word(16)? as usize;
        let mut dims = [0usize; ferrite_hal::MAX_RANK];
        for (axis, d) in dims.iter_mut().enumerate().take(rank) {
            *d = word(24 + 4 * axis)? as usize;
        }
        let shape = Shape::new(&dims[..rank]).ok_or(e(K::OutOfRange, "tensor rank"))?;
        let computed = shape
            .bytes(dtype)
            .filter(|b| *b <= u32::MAX as usize)
            .ok_or(e(K::Overflow, "tensor size"))?;
        if computed != bytes {
            return Err(e(K::InvalidValue, "tensor size does not match its shape"));
        }
        let end = offset
            .checked_add(bytes)
            .ok_or(e(K::Overflow, "tensor offset"))?;
        let location = match storage {
            format::STORAGE_ARENA => {
                if end > self.arena_bytes {
                    return Err(e(K::OutOfRange, "tensor outside the arena"));
                }
                if !offset.is_multiple_of(format::ARENA_ALIGN) {
                    return Err(e(K::Misaligned, "arena offset"));
                }
                Location::Arena(offset)
            }
            format::STORAGE_WEIGHTS => {
                if end > self.weights.len() {
                    return Err(e(K::OutOfRange, "tensor outside the weights"));
                }
                if !offset.is_multiple_of(format::WEIGHT_ALIGN) {
                    return Err(e(K::Misaligned, "weight offset"));
                }
                Location::Weights(offset)
            }
            _ => return Err(e(K::InvalidValue, "tensor storage")),
        };
        Ok(TensorDesc {
            dtype,
            shape,
            location,
            bytes,
        })
    }

    fn string(&self, offset: usize, len: usize) -> Result<&'a str, FormatError> {
        let raw = range(self.strings, offset, len).ok_or(err(K::OutOfRange, "string"))?;
        core::str::from_utf8(raw).map_err(|_| err(K::InvalidValue, "string is not UTF-8"))
    }

    // Out of line: run once per load or inference, so inlining only copies it (flash).
    #[inline(never)]
    fn verify_tensors(&self) -> Result<(), FormatError> {
        for i in 0..self.tensor_count() {
            self.decode_tensor(i)?;
        }
        Ok(())
    }

    // Out of line: run once per load or inference, so inlining only copies it (flash).
    #[inline(never)]
    fn verify_io(&self) -> Result<(), FormatError> {
        for (list, what) in [(self.inputs, "graph input"), (self.outputs, "graph output")] {
            for i in 0..list.len() / 4 {
                let index = u32_at(list, 4 * i).ok_or(err(K::Truncated, what))? as usize;
                let (desc, _) = self.decode_tensor(index)?;
                if !matches!(desc.location, Location::Arena(_)) {
                    return Err(err(
                        K::InvalidValue,
                        "graph inputs and outputs live in the arena",
                    )
                    .at(i));
                }
            }
        }
        if self.quantization.is_empty() || !Self::INTEGER_TENSORS {
            return Ok(());
        }
        self.verify_quantization_section()
    }

    /// Whether the build's selection has the integer types a quantized input or output can have:
    /// a build for float models neither verifies nor reads the QUANTIZATION section (its
    /// accessors answer `None`), so links none of it.
    const INTEGER_TENSORS: bool = selects_dtype(OPS, DType::I8)
        || selects_dtype(OPS, DType::U8)
        || selects_dtype(OPS, DType::I16)
        || selects_dtype(OPS, DType::U16);

    /// The QUANTIZATION section: one record per graph input and output, each valid for its
    /// tensor's type. Out of line, so that a build whose models have none pays little for it.
    #[inline(never)]
    fn verify_quantization_section(&self) -> Result<(), FormatError> {
        let io = self.input_count() + self.output_count();
        if self.quantization.len() != io * format::QUANTIZATION_RECORD_BYTES {
            return Err(err(K::InvalidValue, "quantization section size"));
        }
        let tensors = self
            .inputs
            .chunks_exact(4)
            .chain(self.outputs.chunks_exact(4));
        for (record, tensor) in tensors.enumerate() {
            // The dtype byte of the tensor's record (verified by `verify_tensors`).
            let index = u32_at(tensor, 0).unwrap_or(u32::MAX) as usize;
            let code = index
                .checked_mul(format::TENSOR_RECORD_BYTES)
                .and_then(|at| u8_at(self.tensors, at))
                .unwrap_or(0);
            let dtype = DType::from_code(code).ok_or(err(K::InvalidValue, "tensor dtype"))?;
            verify_quantization(self.quantization, record, dtype).map_err(|e| e.at(record))?;
        }
        Ok(())
    }

    // Out of line: run once per load or inference, so inlining only copies it (flash).
    #[inline(never)]
    fn verify_ops(&self) -> Result<(), FormatError> {
        for i in 0..self.len() {
            let mut step = None;
            self.decode_step(i, true, &mut step)?;
            let step = step.ok_or(err(K::InvalidOp, "op record").at(i))?;
            rules::check_step::<OPS>(&step).map_err(|rule| err(K::InvalidOp, rule).at(i))?;
        }
        Ok(())
    }

    /// Decodes op record `index` into the step `out`, checking ranges and parameters (not
    /// shapes); with `verify`, also every operand tensor (at load; a run skips what load already
    /// checked). Written in place rather than returned in a `Result`: a run's loop then holds
    /// the step's bytes once, where [`Plan::step_into`] puts them. Out of line: inlined into
    /// the load's loop (`verify` constant there), a firmware carried the decoding twice.
    #[inline(never)]
    fn decode_step<'s>(
        &'s self,
        index: usize,
        verify: bool,
        out: &mut Option<Step<'s>>,
    ) -> Result<(), FormatError> {
        let e = |kind, what| err(kind, what).at(index);
        let rec = range(
            self.ops,
            index
                .checked_mul(format::OP_RECORD_BYTES)
                .ok_or(e(K::Overflow, "op index"))?,
            format::OP_RECORD_BYTES,
        )
        .ok_or(e(K::OutOfRange, "op index"))?;
        let word = |at| u32_at(rec, at).ok_or(e(K::Truncated, "op"));
        let kind =
            OpKind::from_code(u16_at(rec, 0).unwrap_or(0)).ok_or(e(K::InvalidValue, "op kind"))?;
        let n_in = u8_at(rec, 2).unwrap_or(0) as usize;
        let n_out = u8_at(rec, 3).unwrap_or(0) as usize;
        let first = word(4)? as usize;
        let param_start = word(8)? as usize;
        let param_count = word(12)? as usize;
        let scratch = word(16)?;
        if word(28)? != 0 {
            return Err(e(K::InvalidValue, "reserved op bytes must be zero"));
        }
        let operand_bytes = |start: usize, count: usize| {
            range(self.operands, start.checked_mul(4)?, count.checked_mul(4)?)
        };
        let inputs = operand_bytes(first, n_in).ok_or(e(K::OutOfRange, "op operands"))?;
        let outputs = operand_bytes(first.saturating_add(n_in), n_out)
            .ok_or(e(K::OutOfRange, "op operands"))?;
        let params = range(
            self.params,
            param_start
                .checked_mul(4)
                .ok_or(e(K::Overflow, "op params"))?,
            param_count
                .checked_mul(4)
                .ok_or(e(K::Overflow, "op params"))?,
        )
        .ok_or(e(K::OutOfRange, "op params"))?;
        if !selects(OPS, kind) {
            return Err(e(
                K::NotLinked,
                "this op kind is not linked into this build",
            ));
        }
        let op = Op::decode_selected::<OPS>(kind, &mut WordReader::new(params))
            .ok_or(e(K::InvalidValue, "op parameters"))?;
        if !op.activations().iter().all(|a| selects_activation(OPS, a)) {
            return Err(e(
                K::NotLinked,
                "this activation is not linked into this build",
            ));
        }
        if let Op::Binary { op: binary, .. } = op {
            if !selects_binary(OPS, binary) {
                return Err(e(
                    K::NotLinked,
                    "this binary op is not linked into this build",
                ));
            }
        }
        let inputs = TensorList::new(inputs, self);
        let outputs = TensorList::new(outputs, self);
        if verify {
            for slot in 0..inputs.len() {
                if let Some(t) = inputs.index(slot) {
                    self.decode_tensor(t as usize)?;
                }
            }
            for slot in 0..outputs.len() {
                let t = outputs
                    .index(slot)
                    .ok_or(e(K::InvalidValue, "op output missing"))?;
                let (desc, _) = self.decode_tensor(t as usize)?;
                if !matches!(desc.location, Location::Arena(_)) {
                    return Err(e(K::InvalidValue, "op output must be in the arena"));
                }
            }
        }
        let scratch = match scratch {
            format::NO_TENSOR => None,
            t => {
                let (desc, _) = self.decode_tensor(t as usize)?;
                if !matches!(desc.location, Location::Arena(_)) {
                    return Err(e(K::InvalidValue, "scratch must be in the arena"));
                }
                Some(desc)
            }
        };
        *out = Some(Step {
            index,
            op,
            inputs,
            outputs,
            scratch,
        });
        Ok(())
    }

    /// Total size of the file in bytes.
    pub fn file_bytes(&self) -> usize {
        self.file_bytes
    }

    /// The whole verified file (e.g. to hand it to a device that loads it itself).
    pub fn as_bytes(&self) -> &'a [u8] {
        self.file
    }

    /// Arena bytes the plan needs (scratch included).
    pub fn arena_bytes(&self) -> usize {
        self.arena_bytes
    }

    /// The planner's lower bound: the largest total of bytes live at any one step.
    pub fn arena_lower_bound(&self) -> usize {
        self.arena_lower_bound
    }

    /// Size of the weights section.
    pub fn weights_bytes(&self) -> usize {
        self.weights.len()
    }

    /// Number of tensors.
    pub fn tensor_count(&self) -> usize {
        self.tensors.len() / format::TENSOR_RECORD_BYTES
    }

    /// Tensor `index` with its name.
    pub fn tensor_info(&self, index: usize) -> Option<TensorInfo<'a>> {
        let (desc, name) = self.decode_tensor(index).ok()?;
        Some(TensorInfo { name, desc })
    }

    /// Number of graph inputs.
    pub fn input_count(&self) -> usize {
        self.inputs.len() / 4
    }

    /// Number of graph outputs.
    pub fn output_count(&self) -> usize {
        self.outputs.len() / 4
    }

    /// The scale and zero point of graph input `i`, when the file records them (an 8- or 16-bit
    /// integer input of a quantized model: `real = (q − zero_point) × scale`).
    pub fn input_quantization(&self, i: usize) -> Option<Quantization> {
        if i >= self.input_count() || !Self::INTEGER_TENSORS {
            return None;
        }
        quantization_record(self.quantization, i)
    }

    /// The scale and zero point of graph output `i`, as [`Model::input_quantization`].
    pub fn output_quantization(&self, i: usize) -> Option<Quantization> {
        if i >= self.output_count() || !Self::INTEGER_TENSORS {
            return None;
        }
        quantization_record(self.quantization, self.input_count().checked_add(i)?)
    }

    /// Tensor index of graph input `i`.
    pub fn input_tensor(&self, i: usize) -> Option<usize> {
        u32_at(self.inputs, i.checked_mul(4)?).map(|v| v as usize)
    }

    /// Tensor index of graph output `i`.
    pub fn output_tensor(&self, i: usize) -> Option<usize> {
        u32_at(self.outputs, i.checked_mul(4)?).map(|v| v as usize)
    }

    /// Graph input `i`.
    pub fn input(&self, i: usize) -> Option<TensorInfo<'a>> {
        self.tensor_info(self.input_tensor(i)?)
    }

    /// Graph output `i`.
    pub fn output(&self, i: usize) -> Option<TensorInfo<'a>> {
        self.tensor_info(self.output_tensor(i)?)
    }

    /// The name of op `index` (the ONNX node it came from).
    pub fn op_name(&self, index: usize) -> Option<&'a str> {
        let rec = range(
            self.ops,
            index.checked_mul(format::OP_RECORD_BYTES)?,
            format::OP_RECORD_BYTES,
        )?;
        self.string(u32_at(rec, 20)? as usize, u32_at(rec, 24)? as usize)
            .ok()
    }
}

impl<const OPS: Selection> Tensors for Model<'_, OPS> {
    fn tensor(&self, index: u32) -> Option<TensorDesc> {
        self.decode_desc(index as usize).ok()
    }
}

impl<const OPS: Selection> Plan for Model<'_, OPS> {
    fn len(&self) -> usize {
        self.ops.len() / format::OP_RECORD_BYTES
    }

    fn step(&self, index: usize) -> Option<Step<'_>> {
        let mut step = None;
        self.decode_step(index, false, &mut step).ok()?;
        step
    }

    // Out of line: the decoding's frame is gone before the caller runs a kernel on the step in
    // `slot`.
    #[inline(never)]
    fn step_into<'s>(&'s self, index: usize, slot: &mut Option<Step<'s>>) {
        if self.decode_step(index, false, slot).is_err() {
            *slot = None;
        }
    }

    fn weights(&self) -> &[u8] {
        self.weights
    }

    fn arena_bytes(&self) -> usize {
        self.arena_bytes
    }

    fn inputs(&self) -> TensorList<'_> {
        TensorList::new(self.inputs, self)
    }

    fn outputs(&self) -> TensorList<'_> {
        TensorList::new(self.outputs, self)
    }
}
