//! Ferrite's C API: load a packed model from a pointer and a length (verified once), size and
//! align its arena, bind it to a session in a caller-provided arena, describe and write its
//! inputs, run it, read its outputs. No heap and no panics reachable from C; every failure is a
//! [`ferrite_status`] with a static message ([`ferrite_status_message`]).
//!
//! The layer is thin: it only converts between C and `ferrite-core`. Handles live in storage
//! the caller owns ([`ferrite_model`], [`ferrite_session`]); the model's bytes, the model handle
//! and the arena must outlive every handle made from them, and must not move or be loaded again
//! while in use (a session points at its model). The header `ferrite.h` is generated from this file by
//! cbindgen (`cargo test -p ferrite-c` checks it is current; `FERRITE_UPDATE_HEADER=1` rewrites
//! it).
//!
//! The device is chosen at build time: the portable CPU kernels (feature `cpu`, the host build)
//! or the Cortex-M device with its DSP kernels (feature `cortex-m`). So are the ops: built with
//! `FERRITE_OPS` set to a model's selection (the `ID_OPS` of `ferrite pack --emit c`), the
//! library links only that model's decoding, verification and kernels, and refuses other models
//! with `FERRITE_UNSUPPORTED`.
#![cfg_attr(not(feature = "std"), no_std)]
#![allow(non_camel_case_types)]
// Every function here takes raw pointers from C and checks them before use.
#![allow(clippy::missing_safety_doc)]

use core::mem::{align_of, size_of};
use ferrite_core::{Error, FormatError, FormatErrorKind, Model, Quantization, Session};
use ferrite_hal::DType;

mod selection {
    include!(concat!(env!("OUT_DIR"), "/ops.rs"));
}
use selection::OPS;

#[cfg(feature = "cortex-m")]
type Device = ferrite_cortex_m::CortexMDevice<ferrite_cortex_m::NoProfiler, OPS>;
#[cfg(not(feature = "cortex-m"))]
type Device = ferrite_cpu::CpuDevice<OPS>;

type RustModel = Model<'static, OPS>;
type RustSession = Session<'static, 'static, Device, OPS>;

/// Words of storage a [`ferrite_model`] takes.
pub const FERRITE_MODEL_WORDS: usize = 24;
/// Words of storage a [`ferrite_session`] takes.
pub const FERRITE_SESSION_WORDS: usize = 16;
/// Most dimensions a tensor has.
pub const FERRITE_MAX_RANK: usize = 8;
/// The alignment, in bytes, the arena and the model's bytes must have.
pub const FERRITE_ALIGNMENT: usize = 16;

const _: () = assert!(size_of::<RustModel>() <= 8 * FERRITE_MODEL_WORDS);
const _: () = assert!(align_of::<RustModel>() <= 8);
const _: () = assert!(size_of::<RustSession>() <= 8 * FERRITE_SESSION_WORDS);
const _: () = assert!(align_of::<RustSession>() <= 8);
const _: () = assert!(FERRITE_MAX_RANK == ferrite_hal::MAX_RANK);

/// A verified model: storage the caller owns (e.g. a static), filled by [`ferrite_model_load`].
#[repr(C)]
pub struct ferrite_model {
    storage: [u64; FERRITE_MODEL_WORDS],
    /// Non-zero once loaded.
    loaded: u32,
}

/// A model bound to a device and an arena: storage the caller owns, filled by
/// [`ferrite_session_new`].
#[repr(C)]
pub struct ferrite_session {
    storage: [u64; FERRITE_SESSION_WORDS],
    /// The arena's first byte and length, to refuse buffers that overlap it.
    arena: *mut u8,
    arena_len: usize,
    /// Non-zero once created.
    created: u32,
}

/// What a call did. `FERRITE_OK` is 0; every other code has a one-line message
/// ([`ferrite_status_message`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ferrite_status {
    /// Success.
    FERRITE_OK = 0,
    /// A pointer argument was null (or a handle not initialised by its constructor).
    FERRITE_NULL_POINTER = 1,
    /// A handle's storage or the model's bytes are not aligned as required.
    FERRITE_MISALIGNED = 2,
    /// The model bytes are not a valid `.frt` file (corrupt, truncated, another version).
    FERRITE_INVALID_MODEL = 3,
    /// The arena is smaller than the model needs (`ferrite_model_arena_bytes`).
    FERRITE_ARENA_TOO_SMALL = 4,
    /// The arena does not start at a multiple of `FERRITE_ALIGNMENT`.
    FERRITE_ARENA_MISALIGNED = 5,
    /// The model needs more arena than the device can hold.
    FERRITE_ARENA_TOO_LARGE = 6,
    /// The device lacks an op the model needs, or the library was built without it (its
    /// `FERRITE_OPS` selection leaves the op out).
    FERRITE_UNSUPPORTED = 7,
    /// No input or output with this index.
    FERRITE_NO_SUCH_TENSOR = 8,
    /// The bytes given or the buffer to fill have the wrong size for the tensor.
    FERRITE_WRONG_SIZE = 9,
    /// `ferrite_session_run` before every input was written since the last run.
    FERRITE_INPUT_NOT_SET = 10,
    /// An output was read before a successful run.
    FERRITE_NOT_RUN = 11,
    /// A kernel refused the data (e.g. an index out of range) or the plan.
    FERRITE_DEVICE_ERROR = 12,
    /// An input's bytes or an output's destination overlap the session's arena.
    FERRITE_OVERLAPS_ARENA = 13,
}

use ferrite_status::*;

/// A tensor's element type.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ferrite_dtype {
    FERRITE_FLOAT32 = 1,
    FERRITE_INT64 = 2,
    FERRITE_INT32 = 3,
    FERRITE_INT8 = 4,
    FERRITE_UINT8 = 5,
    FERRITE_BOOL = 6,
    FERRITE_FLOAT64 = 7,
    FERRITE_FLOAT16 = 8,
    FERRITE_BFLOAT16 = 9,
    FERRITE_INT16 = 10,
    FERRITE_UINT16 = 11,
    FERRITE_UINT32 = 12,
    FERRITE_UINT64 = 13,
}

/// An input or output: name, type, shape, size, and for a quantized one its scale and zero
/// point (`real = (q - zero_point) * scale`).
#[repr(C)]
pub struct ferrite_tensor_info {
    /// The name's UTF-8 bytes (not NUL-terminated; empty for a model packed with
    /// `--strip-names`), inside the model's bytes.
    pub name: *const u8,
    /// The name's length in bytes.
    pub name_len: usize,
    /// Element type.
    pub dtype: ferrite_dtype,
    /// Number of dimensions.
    pub rank: usize,
    /// The dimensions (entries past `rank` are 0).
    pub dims: [usize; FERRITE_MAX_RANK],
    /// Size in bytes.
    pub bytes: usize,
    /// Non-zero when `scale` and `zero_point` are set.
    pub quantized: u32,
    /// The step between neighbouring integers (quantized tensors).
    pub scale: f32,
    /// The integer that stands for 0 (quantized tensors).
    pub zero_point: i32,
}

/// The one-line message of a `ferrite_status` value, a static NUL-terminated string (an
/// unknown value has one too).
#[no_mangle]
pub extern "C" fn ferrite_status_message(status: i32) -> *const core::ffi::c_char {
    let known = [
        FERRITE_OK,
        FERRITE_NULL_POINTER,
        FERRITE_MISALIGNED,
        FERRITE_INVALID_MODEL,
        FERRITE_ARENA_TOO_SMALL,
        FERRITE_ARENA_MISALIGNED,
        FERRITE_ARENA_TOO_LARGE,
        FERRITE_UNSUPPORTED,
        FERRITE_NO_SUCH_TENSOR,
        FERRITE_WRONG_SIZE,
        FERRITE_INPUT_NOT_SET,
        FERRITE_NOT_RUN,
        FERRITE_DEVICE_ERROR,
        FERRITE_OVERLAPS_ARENA,
    ];
    let Some(&status) = known.iter().find(|&&s| s as i32 == status) else {
        return c"not a ferrite_status".as_ptr();
    };
    let text: &'static core::ffi::CStr = match status {
        FERRITE_OK => c"ok",
        FERRITE_NULL_POINTER => c"a pointer argument is null (or a handle was not initialised)",
        FERRITE_MISALIGNED => c"a handle's storage or the model's bytes are misaligned",
        FERRITE_INVALID_MODEL => c"the model bytes are not a valid .frt file",
        FERRITE_ARENA_TOO_SMALL => c"the arena is smaller than ferrite_model_arena_bytes",
        FERRITE_ARENA_MISALIGNED => c"the arena does not start at a multiple of FERRITE_ALIGNMENT",
        FERRITE_ARENA_TOO_LARGE => c"the model needs more arena than the device can hold",
        FERRITE_UNSUPPORTED => c"the model uses an op this device or build does not have",
        FERRITE_NO_SUCH_TENSOR => c"no input or output with this index",
        FERRITE_WRONG_SIZE => c"the buffer's size is not the tensor's",
        FERRITE_INPUT_NOT_SET => c"an input was not written since the last run",
        FERRITE_NOT_RUN => c"an output was read before a successful run",
        FERRITE_DEVICE_ERROR => c"a kernel refused the data or the plan",
        FERRITE_OVERLAPS_ARENA => c"the buffer overlaps the session's arena",
    };
    text.as_ptr()
}

fn status_of<E>(e: &Error<E>) -> ferrite_status {
    match e {
        Error::Format(_) => FERRITE_INVALID_MODEL,
        Error::ArenaTooSmall { .. } => FERRITE_ARENA_TOO_SMALL,
        Error::ArenaMisaligned { .. } => FERRITE_ARENA_MISALIGNED,
        Error::ArenaTooLarge { .. } => FERRITE_ARENA_TOO_LARGE,
        Error::Unsupported(_) => FERRITE_UNSUPPORTED,
        Error::NoSuchTensor { .. } => FERRITE_NO_SUCH_TENSOR,
        Error::InputSize { .. } | Error::DTypeMismatch { .. } => FERRITE_WRONG_SIZE,
        Error::InputNotSet { .. } => FERRITE_INPUT_NOT_SET,
        Error::NotRun => FERRITE_NOT_RUN,
        Error::Device(_) => FERRITE_DEVICE_ERROR,
    }
}

/// The status of a model that did not load: a valid model for another build (an op outside
/// `FERRITE_OPS`) is `FERRITE_UNSUPPORTED`, anything else `FERRITE_INVALID_MODEL`.
fn load_status(e: &FormatError) -> ferrite_status {
    match e.kind {
        FormatErrorKind::NotLinked => FERRITE_UNSUPPORTED,
        _ => FERRITE_INVALID_MODEL,
    }
}

/// `ptr` when it is non-null and aligned for `T`.
fn checked<T>(ptr: *const T) -> Result<*const T, ferrite_status> {
    if ptr.is_null() {
        Err(FERRITE_NULL_POINTER)
    } else if !(ptr as usize).is_multiple_of(align_of::<T>()) {
        Err(FERRITE_MISALIGNED)
    } else {
        Ok(ptr)
    }
}

/// The model in a loaded handle.
///
/// # Safety
/// `model` is null or points to a `ferrite_model` (checked for null and alignment).
unsafe fn model_ref<'a>(model: *const ferrite_model) -> Result<&'a RustModel, ferrite_status> {
    let handle = unsafe { &*checked(model)? };
    if handle.loaded == 0 {
        return Err(FERRITE_NULL_POINTER);
    }
    // SAFETY: `loaded` is set only after `ferrite_model_load` wrote a `Model` at the start of
    // the storage, which is large and aligned enough (checked at compile time).
    Ok(unsafe { &*(handle.storage.as_ptr() as *const RustModel) })
}

/// The session in a created handle, checking that each of `buffers` (start, bytes) stays clear
/// of its arena.
///
/// # Safety
/// As [`model_ref`], for a `ferrite_session`.
unsafe fn session_mut<'a>(
    session: *mut ferrite_session,
    buffers: &[(*const u8, usize)],
) -> Result<&'a mut RustSession, ferrite_status> {
    let handle = unsafe { &mut *(checked(session)? as *mut ferrite_session) };
    if handle.created == 0 {
        return Err(FERRITE_NULL_POINTER);
    }
    let arena = handle.arena as usize;
    let overlaps = |&(start, len): &(*const u8, usize)| {
        let start = start as usize;
        len > 0
            && start < arena.saturating_add(handle.arena_len)
            && arena < start.saturating_add(len)
    };
    if buffers.iter().any(overlaps) {
        return Err(FERRITE_OVERLAPS_ARENA);
    }
    // SAFETY: as in `model_ref`: written by `ferrite_session_new` before `created` was set.
    Ok(unsafe { &mut *(handle.storage.as_mut_ptr() as *mut RustSession) })
}

/// Whether `len` bytes from `ptr` are a span a Rust slice may have: at most `isize::MAX` bytes,
/// not wrapping around the address space (else `FERRITE_WRONG_SIZE`).
fn spans(ptr: *const u8, len: usize) -> Result<(), ferrite_status> {
    let fits = len <= isize::MAX as usize && (ptr as usize).checked_add(len).is_some();
    if fits {
        Ok(())
    } else {
        Err(FERRITE_WRONG_SIZE)
    }
}

fn status(result: Result<(), ferrite_status>) -> ferrite_status {
    match result {
        Ok(()) => FERRITE_OK,
        Err(s) => s,
    }
}

/// Verifies the `len` bytes at `bytes` as a packed model (once; nothing is copied) and fills
/// `model`. The bytes must start at a multiple of `FERRITE_ALIGNMENT` and outlive the model.
///
/// # Safety
/// `model` points to writable `ferrite_model` storage and `bytes` to `len` readable bytes,
/// which stay valid and unchanged while the model is used.
#[no_mangle]
pub unsafe extern "C" fn ferrite_model_load(
    model: *mut ferrite_model,
    bytes: *const u8,
    len: usize,
) -> ferrite_status {
    status((|| {
        let handle = unsafe { &mut *(checked(model)? as *mut ferrite_model) };
        handle.loaded = 0;
        if bytes.is_null() {
            return Err(FERRITE_NULL_POINTER);
        }
        if !(bytes as usize).is_multiple_of(FERRITE_ALIGNMENT) {
            return Err(FERRITE_MISALIGNED);
        }
        spans(bytes, len)?;
        // SAFETY: the caller gives `len` readable bytes that outlive the model (a span a slice
        // can have: checked).
        let file: &'static [u8] = unsafe { core::slice::from_raw_parts(bytes, len) };
        let loaded = RustModel::load_selected(file).map_err(|e| load_status(&e))?;
        // SAFETY: the storage is large and aligned enough for a `Model` (compile-time checks).
        unsafe { (handle.storage.as_mut_ptr() as *mut RustModel).write(loaded) };
        handle.loaded = 1;
        Ok(())
    })())
}

/// Bytes of arena the model needs (0 for a handle that is not loaded).
///
/// # Safety
/// `model` is null or points to a `ferrite_model`.
#[no_mangle]
pub unsafe extern "C" fn ferrite_model_arena_bytes(model: *const ferrite_model) -> usize {
    unsafe { model_ref(model) }.map_or(0, |m| m.arena_bytes())
}

/// The alignment the arena (and the model's bytes) must have: `FERRITE_ALIGNMENT`.
#[no_mangle]
pub extern "C" fn ferrite_arena_alignment() -> usize {
    FERRITE_ALIGNMENT
}

/// Number of inputs (0 for a handle that is not loaded).
///
/// # Safety
/// `model` is null or points to a `ferrite_model`.
#[no_mangle]
pub unsafe extern "C" fn ferrite_model_input_count(model: *const ferrite_model) -> usize {
    unsafe { model_ref(model) }.map_or(0, |m| m.input_count())
}

/// Number of outputs (0 for a handle that is not loaded).
///
/// # Safety
/// `model` is null or points to a `ferrite_model`.
#[no_mangle]
pub unsafe extern "C" fn ferrite_model_output_count(model: *const ferrite_model) -> usize {
    unsafe { model_ref(model) }.map_or(0, |m| m.output_count())
}

fn dtype_of(d: DType) -> ferrite_dtype {
    use ferrite_dtype::*;
    match d {
        DType::F32 => FERRITE_FLOAT32,
        DType::I64 => FERRITE_INT64,
        DType::I32 => FERRITE_INT32,
        DType::I8 => FERRITE_INT8,
        DType::U8 => FERRITE_UINT8,
        DType::Bool => FERRITE_BOOL,
        DType::F64 => FERRITE_FLOAT64,
        DType::F16 => FERRITE_FLOAT16,
        DType::BF16 => FERRITE_BFLOAT16,
        DType::I16 => FERRITE_INT16,
        DType::U16 => FERRITE_UINT16,
        DType::U32 => FERRITE_UINT32,
        DType::U64 => FERRITE_UINT64,
    }
}

fn describe(
    info: Option<ferrite_core::TensorInfo<'static>>,
    quantization: Option<Quantization>,
    out: *mut ferrite_tensor_info,
) -> Result<(), ferrite_status> {
    let out = unsafe { &mut *(checked(out)? as *mut ferrite_tensor_info) };
    let info = info.ok_or(FERRITE_NO_SUCH_TENSOR)?;
    let mut dims = [0usize; FERRITE_MAX_RANK];
    for (d, &v) in dims.iter_mut().zip(info.desc.shape.dims_checked()) {
        *d = v;
    }
    *out = ferrite_tensor_info {
        name: info.name.as_ptr(),
        name_len: info.name.len(),
        dtype: dtype_of(info.desc.dtype),
        rank: info.desc.shape.rank(),
        dims,
        bytes: info.desc.bytes,
        quantized: quantization.is_some() as u32,
        scale: quantization.map_or(0.0, |q| q.scale),
        zero_point: quantization.map_or(0, |q| q.zero_point),
    };
    Ok(())
}

/// Describes input `index` into `info`.
///
/// # Safety
/// `model` points to a `ferrite_model` and `info` to writable `ferrite_tensor_info` storage.
#[no_mangle]
pub unsafe extern "C" fn ferrite_model_input_info(
    model: *const ferrite_model,
    index: usize,
    info: *mut ferrite_tensor_info,
) -> ferrite_status {
    status((|| {
        let m = unsafe { model_ref(model) }?;
        describe(m.input(index), m.input_quantization(index), info)
    })())
}

/// Describes output `index` into `info`.
///
/// # Safety
/// As [`ferrite_model_input_info`].
#[no_mangle]
pub unsafe extern "C" fn ferrite_model_output_info(
    model: *const ferrite_model,
    index: usize,
    info: *mut ferrite_tensor_info,
) -> ferrite_status {
    status((|| {
        let m = unsafe { model_ref(model) }?;
        describe(m.output(index), m.output_quantization(index), info)
    })())
}

/// Binds `model` to this build's device with the `arena_len` bytes at `arena` (at least
/// `ferrite_model_arena_bytes`, aligned to `FERRITE_ALIGNMENT`) and fills `session`. The model
/// handle and the arena must outlive the session and stay where they are.
///
/// # Safety
/// `session` points to writable `ferrite_session` storage, `model` to a loaded `ferrite_model`
/// and `arena` to `arena_len` writable bytes used by nothing else while the session lives.
#[no_mangle]
pub unsafe extern "C" fn ferrite_session_new(
    session: *mut ferrite_session,
    model: *const ferrite_model,
    arena: *mut u8,
    arena_len: usize,
) -> ferrite_status {
    status((|| {
        let handle = unsafe { &mut *(checked(session)? as *mut ferrite_session) };
        handle.created = 0;
        let model: &'static RustModel = unsafe { model_ref(model) }?;
        if arena.is_null() {
            return Err(FERRITE_NULL_POINTER);
        }
        spans(arena, arena_len)?;
        handle.arena = arena;
        handle.arena_len = arena_len;
        // SAFETY: the caller gives `arena_len` writable bytes for the session's lifetime.
        let arena: &'static mut [u8] = unsafe { core::slice::from_raw_parts_mut(arena, arena_len) };
        let made = Session::new(model, Device::selected(), arena).map_err(|e| status_of(&e))?;
        // SAFETY: the storage is large and aligned enough for a session (compile-time checks).
        unsafe { (handle.storage.as_mut_ptr() as *mut RustSession).write(made) };
        handle.created = 1;
        Ok(())
    })())
}

/// Copies the `len` bytes at `data` into input `index` (exactly the input's size; outside the
/// arena). Every input is written before every run.
///
/// # Safety
/// `session` points to a created `ferrite_session` and `data` to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn ferrite_session_set_input(
    session: *mut ferrite_session,
    index: usize,
    data: *const u8,
    len: usize,
) -> ferrite_status {
    status((|| {
        if data.is_null() {
            return Err(FERRITE_NULL_POINTER);
        }
        spans(data, len)?;
        let s = unsafe { session_mut(session, &[(data, len)]) }?;
        // SAFETY: the caller gives `len` readable bytes, outside the arena (checked).
        let bytes = unsafe { core::slice::from_raw_parts(data, len) };
        s.set_input(index, bytes).map_err(|e| status_of(&e))
    })())
}

/// Runs the model once on the inputs written since the last run.
///
/// # Safety
/// `session` points to a created `ferrite_session`.
#[no_mangle]
pub unsafe extern "C" fn ferrite_session_run(session: *mut ferrite_session) -> ferrite_status {
    status((|| {
        let s = unsafe { session_mut(session, &[]) }?;
        s.run().map_err(|e| status_of(&e))
    })())
}

/// Points `*data` at output `index`'s bytes in the arena (valid until the next run) and sets
/// `*len` to their number: no copy.
///
/// # Safety
/// `session` points to a created `ferrite_session`; `data` and `len` to writable storage.
#[no_mangle]
pub unsafe extern "C" fn ferrite_session_output(
    session: *mut ferrite_session,
    index: usize,
    data: *mut *const u8,
    len: *mut usize,
) -> ferrite_status {
    status((|| {
        let (data, len) = (
            checked(data)? as *mut *const u8,
            checked(len)? as *mut usize,
        );
        // Neither out-pointer may sit in the arena the output is read from.
        let out_pointers = [
            (data as *const u8, size_of::<*const u8>()),
            (len as *const u8, size_of::<usize>()),
        ];
        let s = unsafe { session_mut(session, &out_pointers) }?;
        let bytes = s.output(index).map_err(|e| status_of(&e))?;
        unsafe {
            *data = bytes.as_ptr();
            *len = bytes.len();
        }
        Ok(())
    })())
}

/// Copies output `index` into the `len` bytes at `dst` (exactly the output's size; outside the
/// arena).
///
/// # Safety
/// `session` points to a created `ferrite_session` and `dst` to `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn ferrite_session_read_output(
    session: *mut ferrite_session,
    index: usize,
    dst: *mut u8,
    len: usize,
) -> ferrite_status {
    status((|| {
        if dst.is_null() {
            return Err(FERRITE_NULL_POINTER);
        }
        let s = unsafe { session_mut(session, &[(dst, len)]) }?;
        let bytes = s.output(index).map_err(|e| status_of(&e))?;
        if bytes.len() != len {
            return Err(FERRITE_WRONG_SIZE);
        }
        // SAFETY: the caller gives `len` writable bytes, outside the arena (checked).
        unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, len) };
        Ok(())
    })())
}

/// Stops a Cortex-M build on a panic; a `no_std` static library must name a handler. Built for
/// a model's ops (`FERRITE_OPS`), none is reachable: `scripts/panic-free.sh` links every
/// function of the API with arbitrary arguments and finds no panic code left. With every op
/// linked, the kernels keep bounds checks that the verifier makes unreachable but the optimiser
/// cannot remove.
#[cfg(all(not(feature = "std"), not(test)))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_hal::{selection, OpKind};

    /// A library built for other ops refuses a model as unsupported, not as corrupt.
    #[test]
    fn a_model_outside_the_selection_is_unsupported() {
        let onnx = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../demo/digits.onnx"))
            .expect("demo/digits.onnx");
        let packed =
            ferrite_tools::pack(&onnx, &ferrite_tools::PackOptions::default()).expect("pack");
        let frt = ferrite_tools::aligned::AlignedBytes::from(&packed.bytes[..]);
        const RELU_ONLY: ferrite_hal::Selection = selection(&[OpKind::Unary], &[DType::F32]);
        let e = Model::<RELU_ONLY>::load_selected(frt.as_bytes()).unwrap_err();
        assert_eq!(load_status(&e), FERRITE_UNSUPPORTED);
        let mut corrupt = packed.bytes.clone();
        corrupt[40] ^= 1;
        let corrupt = ferrite_tools::aligned::AlignedBytes::from(&corrupt[..]);
        let e = Model::<RELU_ONLY>::load_selected(corrupt.as_bytes()).unwrap_err();
        assert_eq!(load_status(&e), FERRITE_INVALID_MODEL);
    }
}
