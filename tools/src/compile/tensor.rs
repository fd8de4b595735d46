//! Host-side tensors: initializers, constants and folded values, with their conversions.

use crate::compile::error::PackError;
use crate::compile::onnx::proto::{data_type, TensorProto};
use ferrite_hal::DType;

/// Largest constant Ferrite will materialise (elements), so a hostile shape cannot exhaust memory.
pub const MAX_CONSTANT_ELEMENTS: usize = 1 << 28;

/// Element storage: floats as `f32` (float64/float16/bfloat16 too: Ferrite computes them in
/// f32), every integer and boolean type as `i64` (uint64 as its two's-complement bits).
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    /// `float32` values.
    Float(Vec<f32>),
    /// Integer or boolean values.
    Int(Vec<i64>),
}

/// A tensor with its values, on the host.
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    /// Element type.
    pub dtype: DType,
    /// Dimensions.
    pub shape: Vec<usize>,
    /// Values in row-major order.
    pub data: Data,
}

/// Maps an ONNX data-type code to a Ferrite dtype.
pub fn dtype_from_onnx(code: i32) -> Option<DType> {
    match code {
        data_type::FLOAT => Some(DType::F32),
        data_type::UINT8 => Some(DType::U8),
        data_type::INT8 => Some(DType::I8),
        data_type::INT32 => Some(DType::I32),
        data_type::INT64 => Some(DType::I64),
        data_type::BOOL => Some(DType::Bool),
        data_type::DOUBLE => Some(DType::F64),
        data_type::FLOAT16 => Some(DType::F16),
        data_type::BFLOAT16 => Some(DType::BF16),
        data_type::INT16 => Some(DType::I16),
        data_type::UINT16 => Some(DType::U16),
        data_type::UINT32 => Some(DType::U32),
        data_type::UINT64 => Some(DType::U64),
        _ => None,
    }
}

/// Product of dims, refusing overflow and absurd sizes.
pub fn checked_elements(shape: &[usize]) -> Option<usize> {
    shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .filter(|&n| n <= MAX_CONSTANT_ELEMENTS)
}

impl HostTensor {
    /// A float tensor.
    pub fn float(shape: Vec<usize>, values: Vec<f32>) -> HostTensor {
        HostTensor {
            dtype: DType::F32,
            shape,
            data: Data::Float(values),
        }
    }

    /// An integer tensor of type `dtype`.
    pub fn int(dtype: DType, shape: Vec<usize>, values: Vec<i64>) -> HostTensor {
        HostTensor {
            dtype,
            shape,
            data: Data::Int(values),
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match &self.data {
            Data::Float(v) => v.len(),
            Data::Int(v) => v.len(),
        }
    }

    /// True for a tensor with no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Values as integers (floats truncated toward zero).
    pub fn to_i64s(&self) -> Vec<i64> {
        match &self.data {
            Data::Float(v) => v.iter().map(|&x| x as i64).collect(),
            Data::Int(v) => v.clone(),
        }
    }

    /// Values as floats.
    pub fn to_f32s(&self) -> Vec<f32> {
        match &self.data {
            Data::Float(v) => v.clone(),
            Data::Int(v) => v.iter().map(|&x| x as f32).collect(),
        }
    }

    /// Converts the values to `dtype` (ONNX `Cast` semantics; float16/bfloat16 round to
    /// their precision).
    pub fn cast(&self, dtype: DType) -> HostTensor {
        let data = match dtype {
            DType::F32 | DType::F64 => Data::Float(self.to_f32s()),
            DType::F16 => Data::Float(
                self.to_f32s()
                    .into_iter()
                    .map(|x| half::f16::from_f32(x).to_f32())
                    .collect(),
            ),
            DType::BF16 => Data::Float(
                self.to_f32s()
                    .into_iter()
                    .map(|x| half::bf16::from_f32(x).to_f32())
                    .collect(),
            ),
            DType::Bool => Data::Int(match &self.data {
                Data::Float(v) => v.iter().map(|&x| (x != 0.0) as i64).collect(),
                Data::Int(v) => v.iter().map(|&x| (x != 0) as i64).collect(),
            }),
            _ => Data::Int(
                self.to_i64s()
                    .into_iter()
                    .map(|x| wrap_int(dtype, x))
                    .collect(),
            ),
        };
        HostTensor {
            dtype,
            shape: self.shape.clone(),
            data,
        }
    }

    /// Little-endian bytes in `dtype`'s encoding.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        let size = self.dtype.size();
        let mut out = Vec::with_capacity(self.len() * size);
        let float = |out: &mut Vec<u8>, x: f32| match self.dtype {
            DType::F64 => out.extend(f64::from(x).to_le_bytes()),
            DType::F16 => out.extend(half::f16::from_f32(x).to_le_bytes()),
            DType::BF16 => out.extend(half::bf16::from_f32(x).to_le_bytes()),
            _ => out.extend(x.to_le_bytes()),
        };
        match &self.data {
            Data::Float(v) => v.iter().for_each(|&x| float(&mut out, x)),
            Data::Int(v) if self.dtype == DType::F32 || self.dtype.is_interface_float() => {
                v.iter().for_each(|&x| float(&mut out, x as f32))
            }
            Data::Int(v) => v
                .iter()
                .for_each(|&x| out.extend_from_slice(&x.to_le_bytes()[..size])),
        }
        out
    }

    /// A tensor from little-endian bytes of `dtype`.
    pub fn from_le_bytes(dtype: DType, shape: Vec<usize>, bytes: &[u8]) -> Option<HostTensor> {
        let n = checked_elements(&shape)?;
        let size = dtype.size();
        if bytes.len() != n.checked_mul(size)? {
            return None;
        }
        let word = |c: &[u8]| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(w)
        };
        let words = bytes.chunks_exact(size).map(word);
        let data = match dtype {
            DType::F32 => Data::Float(words.map(|w| f32::from_bits(w as u32)).collect()),
            DType::F64 => Data::Float(words.map(|w| f64::from_bits(w) as f32).collect()),
            DType::F16 => Data::Float(
                words
                    .map(|w| half::f16::from_bits(w as u16).to_f32())
                    .collect(),
            ),
            DType::BF16 => Data::Float(
                words
                    .map(|w| half::bf16::from_bits(w as u16).to_f32())
                    .collect(),
            ),
            DType::I64 | DType::U64 => Data::Int(words.map(|w| w as i64).collect()),
            DType::I32 => Data::Int(words.map(|w| w as u32 as i32 as i64).collect()),
            DType::I16 => Data::Int(words.map(|w| w as u16 as i16 as i64).collect()),
            DType::I8 => Data::Int(words.map(|w| w as u8 as i8 as i64).collect()),
            DType::U32 | DType::U16 | DType::U8 => Data::Int(words.map(|w| w as i64).collect()),
            DType::Bool => Data::Int(words.map(|w| (w != 0) as i64).collect()),
        };
        Some(HostTensor { dtype, shape, data })
    }

    /// Decodes an ONNX `TensorProto` (raw or typed fields). External data is refused.
    pub fn from_proto(t: &TensorProto) -> Result<HostTensor, PackError> {
        let name = if t.name.is_empty() {
            "<unnamed>"
        } else {
            &t.name
        };
        if t.data_location == 1 || !t.external_data.is_empty() {
            return Err(PackError::ExternalData(name.to_string()));
        }
        let dtype = dtype_from_onnx(t.data_type).ok_or_else(|| {
            PackError::Invalid(format!(
                "tensor '{name}' has type {}, which Ferrite does not support",
                data_type::name(t.data_type)
            ))
        })?;
        let mut shape = Vec::with_capacity(t.dims.len());
        for &d in &t.dims {
            shape.push(usize::try_from(d).map_err(|_| {
                PackError::Invalid(format!("tensor '{name}' has a negative dimension"))
            })?);
        }
        let n = checked_elements(&shape)
            .ok_or_else(|| PackError::Invalid(format!("tensor '{name}' is too large")))?;
        let mismatch = || {
            PackError::Invalid(format!(
                "tensor '{name}' holds a different number of values than its shape {shape:?} needs"
            ))
        };
        if !t.raw_data.is_empty() || n == 0 {
            if t.raw_data.is_empty() && n == 0 {
                return HostTensor::from_le_bytes(dtype, shape.clone(), &[]).ok_or_else(mismatch);
            }
            return HostTensor::from_le_bytes(dtype, shape.clone(), &t.raw_data)
                .ok_or_else(mismatch);
        }
        let data = match dtype {
            DType::F32 => Data::Float(t.float_data.clone()),
            DType::F64 => Data::Float(t.double_data.iter().map(|&v| v as f32).collect()),
            // float16 and bfloat16 values are stored as their bits in int32_data.
            DType::F16 => Data::Float(
                t.int32_data
                    .iter()
                    .map(|&v| half::f16::from_bits(v as u16).to_f32())
                    .collect(),
            ),
            DType::BF16 => Data::Float(
                t.int32_data
                    .iter()
                    .map(|&v| half::bf16::from_bits(v as u16).to_f32())
                    .collect(),
            ),
            DType::I64 => Data::Int(t.int64_data.clone()),
            DType::U32 | DType::U64 => Data::Int(
                t.uint64_data
                    .iter()
                    .map(|&v| wrap_int(dtype, v as i64))
                    .collect(),
            ),
            DType::I32 | DType::I16 | DType::U16 | DType::I8 | DType::U8 | DType::Bool => {
                Data::Int(
                    t.int32_data
                        .iter()
                        .map(|&v| wrap_int(dtype, v as i64))
                        .collect(),
                )
            }
        };
        let count = match &data {
            Data::Float(v) => v.len(),
            Data::Int(v) => v.len(),
        };
        if count != n {
            return Err(mismatch());
        }
        let tensor = HostTensor { dtype, shape, data };
        Ok(tensor)
    }
}

/// Wraps an integer into the range of `dtype` (two's complement, as a C cast does).
fn wrap_int(dtype: DType, x: i64) -> i64 {
    match dtype {
        DType::I32 => x as i32 as i64,
        DType::U32 => x as u32 as i64,
        DType::I16 => x as i16 as i64,
        DType::U16 => x as u16 as i64,
        DType::I8 => x as i8 as i64,
        DType::U8 => x as u8 as i64,
        DType::Bool => (x != 0) as i64,
        _ => x,
    }
}
