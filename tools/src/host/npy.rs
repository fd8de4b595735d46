//! `.npy` input and output for the CLI, via the `npyz` crate.
//!
//! Inputs are untrusted: a file is read only if it is a regular file within
//! [`crate::host::files::ARRAY_LIMIT`]; its header length is checked against the bytes there before
//! `npyz` parses the header, and the data must be exactly what the header's shape promises.
//! Fortran-order arrays (numpy writes them for transposed views) are reordered to C order.

use ferrite_hal::DType;
use std::io::Read;
use std::path::Path;

/// A dense little-endian array.
#[derive(Clone, Debug, PartialEq)]
pub struct NpyArray {
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: Vec<usize>,
    /// Little-endian element bytes, C order.
    pub bytes: Vec<u8>,
}

/// Why an `.npy` file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    /// I/O failure.
    #[error("{path}: {source}")]
    Io {
        /// File.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// Not a valid `.npy` file, or an unsupported layout.
    #[error("{path}: {reason}")]
    Format {
        /// File.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

/// The element type of a numpy type string (`'<f4'`, `'|i1'`, ...): little-endian types only.
pub fn dtype_from_descr(descr: &str) -> Option<DType> {
    match descr {
        "<f4" => Some(DType::F32),
        "<i8" => Some(DType::I64),
        "<i4" => Some(DType::I32),
        "|i1" | "<i1" => Some(DType::I8),
        "|u1" | "<u1" => Some(DType::U8),
        "|b1" | "<b1" => Some(DType::Bool),
        "<f8" => Some(DType::F64),
        "<f2" => Some(DType::F16),
        "<i2" => Some(DType::I16),
        "<u2" => Some(DType::U16),
        "<u4" => Some(DType::U32),
        "<u8" => Some(DType::U64),
        _ => None,
    }
}

/// The numpy type string of an element type (`<V2`, raw bytes, for bfloat16).
pub fn descr_of(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "<f4",
        DType::I64 => "<i8",
        DType::I32 => "<i4",
        DType::I8 => "|i1",
        DType::U8 => "|u1",
        DType::Bool => "|b1",
        DType::F64 => "<f8",
        DType::F16 => "<f2",
        // numpy has no bfloat16: the raw 2-byte values (ml_dtypes.bfloat16 reads them).
        DType::BF16 => "<V2",
        DType::I16 => "<i2",
        DType::U16 => "<u2",
        DType::U32 => "<u4",
        DType::U64 => "<u8",
    }
}

/// Reads an `.npy` file.
pub fn read(path: &Path) -> Result<NpyArray, NpyError> {
    let p = path.display().to_string();
    let bytes = crate::host::files::read_bounded(path, crate::host::files::ARRAY_LIMIT, "an array")
        .map_err(|e| file_error(&p, e))?;
    from_bytes(&bytes, &p)
}

/// Parses `.npy` bytes from `reader` (at most [`crate::host::files::ARRAY_LIMIT`] of them); `path`
/// names it in errors.
pub fn from_reader(reader: impl Read, path: &str) -> Result<NpyArray, NpyError> {
    let mut bytes = Vec::new();
    reader
        .take(crate::host::files::ARRAY_LIMIT + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| NpyError::Io {
            path: path.to_string(),
            source,
        })?;
    if bytes.len() as u64 > crate::host::files::ARRAY_LIMIT {
        return Err(NpyError::Format {
            path: path.to_string(),
            reason: "the array is too large".into(),
        });
    }
    from_bytes(&bytes, path)
}

/// The header's length field (format 1.x: two bytes; 2.x and 3.x: four) and where the header
/// starts, checked against the file's length before anything is allocated for it.
fn header_extent(bytes: &[u8]) -> Result<(), String> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err("not a valid .npy file (no \\x93NUMPY magic)".into());
    }
    let (start, len) = match bytes[6] {
        1 => (10, u16::from_le_bytes([bytes[8], bytes[9]]) as usize),
        2 | 3 => match bytes.get(8..12) {
            Some(b) => (12, u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize),
            None => return Err("not a valid .npy file (its header is truncated)".into()),
        },
        v => {
            return Err(format!(
                "not a valid .npy file (format version {v} is not supported)"
            ))
        }
    };
    if len > bytes.len() - start {
        return Err(format!(
            "not a valid .npy file: the header claims {len} bytes but the file has {} after the preamble",
            bytes.len() - start
        ));
    }
    // The header is a Python literal: a dict holding a shape tuple (two levels). Structured
    // dtypes nest deeper and are not supported; refusing deep nesting here keeps the literal
    // parser from taking exponential time on `[[[[...` (found by fuzzing).
    let mut depth = 0usize;
    for &b in &bytes[start..start + len] {
        match b {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth > 3 {
            return Err("the header nests too deeply (structured dtypes are not supported)".into());
        }
    }
    // The shape's element count must fit (npyz multiplies the dimensions unchecked).
    let header = &bytes[start..start + len];
    if let Some(at) = header.windows(5).position(|w| w == b"shape") {
        let tail = &header[at..];
        let open = tail.iter().position(|&b| b == b'(').unwrap_or(tail.len());
        let inside = tail.get(open..).unwrap_or(&[]);
        let close = inside
            .iter()
            .position(|&b| b == b')')
            .unwrap_or(inside.len());
        let mut count: u64 = 1;
        for digits in inside[..close].split(|b| !b.is_ascii_digit()) {
            if digits.is_empty() {
                continue;
            }
            let d = std::str::from_utf8(digits)
                .ok()
                .and_then(|t| t.parse::<u64>().ok());
            count = match d.and_then(|d| count.checked_mul(d)) {
                Some(c) if c <= 1 << 40 => c,
                _ => return Err("the array is too large".into()),
            };
        }
    }
    Ok(())
}

/// Parses an `.npy` file held in memory; `path` names it in errors.
pub fn from_bytes(bytes: &[u8], path: &str) -> Result<NpyArray, NpyError> {
    let fmt = |reason: String| NpyError::Format {
        path: path.to_string(),
        reason,
    };
    header_extent(bytes).map_err(fmt)?;
    let file =
        npyz::NpyFile::new(bytes).map_err(|e| fmt(format!("not a valid .npy file ({e})")))?;
    let fortran = file.order() == npyz::Order::Fortran;
    let descr = file.dtype().descr().trim_matches('\'').to_string();
    let dtype = dtype_from_descr(&descr).ok_or_else(|| {
        fmt(format!(
            "dtype '{descr}' is not supported (use a little-endian float, integer or bool type)"
        ))
    })?;
    let shape: Vec<usize> = file.shape().iter().map(|&d| d as usize).collect();
    let bytes_len = shape
        .iter()
        .try_fold(dtype.size(), |a, &d| a.checked_mul(d))
        .filter(|&n| n <= 1 << 32)
        .ok_or_else(|| fmt("the array is too large".into()))?;
    let mut data = Vec::new();
    file.into_inner()
        .take(bytes_len as u64)
        .read_to_end(&mut data)
        .map_err(|source| NpyError::Io {
            path: path.to_string(),
            source,
        })?;
    if data.len() != bytes_len {
        return Err(fmt(format!(
            "the file is truncated ({} of {bytes_len} data bytes)",
            data.len()
        )));
    }
    if fortran {
        data = fortran_to_c(&data, &shape, dtype.size());
    }
    Ok(NpyArray {
        dtype,
        shape,
        bytes: data,
    })
}

/// Reorders column-major (Fortran) element bytes to row-major (C) order.
fn fortran_to_c(data: &[u8], shape: &[usize], size: usize) -> Vec<u8> {
    // Element strides of the Fortran layout: the first axis varies fastest.
    let mut strides = Vec::with_capacity(shape.len());
    let mut stride = 1usize;
    for &d in shape {
        strides.push(stride);
        stride = stride.saturating_mul(d);
    }
    let count = data.len() / size.max(1);
    let mut out = Vec::with_capacity(data.len());
    let mut index = vec![0usize; shape.len()];
    for _ in 0..count {
        let at: usize = index.iter().zip(&strides).map(|(i, s)| i * s).sum();
        out.extend_from_slice(data.get(at * size..(at + 1) * size).unwrap_or(&[]));
        // Advance the C-order index (last axis fastest).
        for axis in (0..shape.len()).rev() {
            index[axis] += 1;
            if index[axis] < shape[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
    out
}

/// Encodes an array as `.npy` bytes (format version 1.0).
pub fn to_bytes(array: &NpyArray) -> Vec<u8> {
    let shape = match array.shape.len() {
        0 => "()".to_string(),
        1 => format!("({},)", array.shape[0]),
        _ => format!(
            "({})",
            array
                .shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        descr_of(array.dtype)
    );
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.div_ceil(64) * 64 - unpadded));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + array.bytes.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&array.bytes);
    out
}

/// Writes an `.npy` file (atomically: see [`crate::host::files::write_atomic`]).
pub fn write(path: &Path, array: &NpyArray) -> Result<(), NpyError> {
    write_excluding(path, array, &[])
}

/// [`write()`], refusing a path that is one of `inputs`.
pub fn write_excluding(path: &Path, array: &NpyArray, inputs: &[&Path]) -> Result<(), NpyError> {
    crate::host::files::write_atomic(path, &to_bytes(array), inputs)
        .map_err(|e| file_error(&path.display().to_string(), e))
}

/// A file error as an `NpyError` naming the file once.
fn file_error(path: &str, e: crate::host::files::FileError) -> NpyError {
    match e {
        crate::host::files::FileError::Io { source, .. } => NpyError::Io {
            path: path.to_string(),
            source,
        },
        other => NpyError::Format {
            path: path.to_string(),
            reason: other.reason(),
        },
    }
}

/// The elements of `array` as numbers (bools as 0 and 1).
pub fn values(array: &NpyArray) -> Vec<f64> {
    let b = &array.bytes;
    macro_rules! each {
        ($n:literal, $f:expr) => {
            b.chunks_exact($n)
                .map(|c| $f(c.try_into().unwrap_or([0; $n])))
                .collect()
        };
    }
    match array.dtype {
        DType::F32 => each!(4, |c| f64::from(f32::from_le_bytes(c))),
        DType::F64 => each!(8, f64::from_le_bytes),
        DType::F16 => each!(2, |c| f64::from(half::f16::from_le_bytes(c).to_f32())),
        DType::BF16 => each!(2, |c| f64::from(half::bf16::from_le_bytes(c).to_f32())),
        DType::I8 => each!(1, |c| f64::from(i8::from_le_bytes(c))),
        DType::U8 | DType::Bool => each!(1, |c| f64::from(u8::from_le_bytes(c))),
        DType::I16 => each!(2, |c| f64::from(i16::from_le_bytes(c))),
        DType::U16 => each!(2, |c| f64::from(u16::from_le_bytes(c))),
        DType::I32 => each!(4, |c| f64::from(i32::from_le_bytes(c))),
        DType::U32 => each!(4, |c| f64::from(u32::from_le_bytes(c))),
        DType::I64 => each!(8, |c| i64::from_le_bytes(c) as f64),
        DType::U64 => each!(8, |c| u64::from_le_bytes(c) as f64),
    }
}

/// What `ferrite run --print` shows of an output: the top 5 of a score vector (a float output
/// with one dimension above 1, e.g. `[1, 10]`), else the values (the first 16 of a longer one).
pub fn describe_values(array: &NpyArray) -> String {
    let values = values(array);
    let is_float = matches!(
        array.dtype,
        DType::F32 | DType::F64 | DType::F16 | DType::BF16
    );
    let score_vector =
        is_float && values.len() > 1 && array.shape.iter().filter(|&&d| d > 1).count() == 1;
    if score_vector {
        let mut order: Vec<usize> = (0..values.len()).collect();
        order.sort_by(|&a, &b| values[b].total_cmp(&values[a]).then(a.cmp(&b)));
        let top: Vec<String> = order
            .iter()
            .take(5)
            .map(|&i| format!("{i}: {:.6}", values[i]))
            .collect();
        return format!("top {} of {}: {}", top.len(), values.len(), top.join(", "));
    }
    let shown: Vec<String> = values
        .iter()
        .take(16)
        .map(|v| {
            if is_float {
                format!("{v:.6}")
            } else {
                format!("{v}")
            }
        })
        .collect();
    let more = values.len().saturating_sub(16);
    if more > 0 {
        format!("[{}, ... {more} more]", shown.join(", "))
    } else {
        format!("[{}]", shown.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let a = NpyArray {
            dtype: DType::F32,
            shape: vec![2, 3],
            bytes: (0..24).collect(),
        };
        let bytes = to_bytes(&a);
        assert_eq!(from_reader(&bytes[..], "x").unwrap(), a);
        let truncated = &bytes[..bytes.len() - 1];
        assert!(from_reader(truncated, "x")
            .unwrap_err()
            .to_string()
            .contains("truncated"));
        assert!(from_reader(&b"garbage"[..], "x").is_err());
    }
}
