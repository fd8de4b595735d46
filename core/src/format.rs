//! Constants of the `.frt` file format (specified byte by byte in `docs/format.md`).
//!
//! The writer in `ferrite-tools` and the verifier in this crate share these, so the two can only
//! disagree about what is documented.

/// The four bytes every `.frt` file starts with.
pub const MAGIC: [u8; 4] = *b"FRT\0";
/// Major version: a reader refuses any other major version.
pub const VERSION_MAJOR: u16 = 1;
/// Minor version: newer minors only add sections that older readers skip. The newest this reader
/// knows; the writer writes the oldest its file needs (1.0 without a QUANTIZATION section).
pub const VERSION_MINOR: u16 = 1;
/// Size of the fixed header.
pub const HEADER_BYTES: usize = 32;
/// Byte offset of the first byte covered by the CRC-32 (everything after the CRC field).
pub const CRC_START: usize = 16;
/// Size of one section-table entry.
pub const SECTION_ENTRY_BYTES: usize = 16;
/// Most sections a file may declare.
pub const MAX_SECTIONS: usize = 64;
/// Size of one tensor record.
pub const TENSOR_RECORD_BYTES: usize = 64;
/// Size of one op record.
pub const OP_RECORD_BYTES: usize = 32;
/// Size of the fixed part of the graph section.
pub const GRAPH_HEADER_BYTES: usize = 32;
/// Alignment of the weights section and of every weight tensor in it.
pub const WEIGHT_ALIGN: usize = 16;
/// Alignment of every arena offset, and of the arena itself.
pub const ARENA_ALIGN: usize = 16;
/// Most graph inputs a model may have.
pub const MAX_IO: usize = 64;
/// Marker for "no tensor" (absent optional operand, no scratch).
pub const NO_TENSOR: u32 = u32::MAX;
/// `storage` byte of a tensor in the arena.
pub const STORAGE_ARENA: u8 = 0;
/// `storage` byte of a tensor in the weights section.
pub const STORAGE_WEIGHTS: u8 = 1;
/// Size of one QUANTIZATION record (per graph input, then per graph output).
pub const QUANTIZATION_RECORD_BYTES: usize = 16;
/// Layout code: ONNX's layout (NCHW) throughout.
pub const LAYOUT_NCHW: u32 = 0;

/// Section kinds.
pub mod section {
    /// UTF-8 names, referenced by (offset, length).
    pub const STRINGS: u32 = 1;
    /// Tensor records.
    pub const TENSORS: u32 = 2;
    /// Op records, in execution order.
    pub const OPS: u32 = 3;
    /// `u32` tensor indices referenced by ops.
    pub const OPERANDS: u32 = 4;
    /// `u32` parameter words referenced by ops.
    pub const PARAMS: u32 = 5;
    /// Arena size, inputs, outputs.
    pub const GRAPH: u32 = 6;
    /// Weight bytes, 16-byte aligned.
    pub const WEIGHTS: u32 = 7;
    /// Optional (minor version 1): the scale and zero point of each graph input and output.
    pub const QUANTIZATION: u32 = 8;
    /// Every section a reader of major version 1 requires.
    pub const REQUIRED: [u32; 7] = [STRINGS, TENSORS, OPS, OPERANDS, PARAMS, GRAPH, WEIGHTS];
}
