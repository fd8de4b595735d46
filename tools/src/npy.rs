//! `.npy` input and output for the CLI, via the `npyz` crate.
//!
//! Inputs are untrusted: the header is parsed by `npyz`, then exactly the number of bytes the
//! header promises is read (never more), after the shape has been checked against the model.

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

fn dtype_from_descr(descr: &str) -> Option<DType> {
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

fn descr_of(dtype: DType) -> &'static str {
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
    let file = std::fs::File::open(path).map_err(|source| NpyError::Io {
        path: p.clone(),
        source,
    })?;
    from_reader(std::io::BufReader::new(file), &p)
}

/// Parses `.npy` bytes from `reader`; `path` names it in errors.
pub fn from_reader(reader: impl Read, path: &str) -> Result<NpyArray, NpyError> {
    let fmt = |reason: String| NpyError::Format {
        path: path.to_string(),
        reason,
    };
    let file =
        npyz::NpyFile::new(reader).map_err(|e| fmt(format!("not a valid .npy file ({e})")))?;
    if file.order() != npyz::Order::C {
        return Err(fmt(
            "Fortran-order arrays are not supported; save with np.ascontiguousarray".into(),
        ));
    }
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
    let mut bytes = Vec::new();
    file.into_inner()
        .take(bytes_len as u64)
        .read_to_end(&mut bytes)
        .map_err(|source| NpyError::Io {
            path: path.to_string(),
            source,
        })?;
    if bytes.len() != bytes_len {
        return Err(fmt(format!(
            "the file is truncated ({} of {bytes_len} data bytes)",
            bytes.len()
        )));
    }
    Ok(NpyArray {
        dtype,
        shape,
        bytes,
    })
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

/// Writes an `.npy` file.
pub fn write(path: &Path, array: &NpyArray) -> Result<(), NpyError> {
    std::fs::write(path, to_bytes(array)).map_err(|source| NpyError::Io {
        path: path.display().to_string(),
        source,
    })
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
