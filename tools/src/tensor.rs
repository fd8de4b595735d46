//! Host-side tensors: initializers, constants and folded values, with their conversions.

use crate::error::PackError;
use crate::onnx::proto::{data_type, TensorProto};
use ferrite_hal::DType;

/// Largest constant Ferrite will materialise (elements), so a hostile shape cannot exhaust memory.
pub const MAX_CONSTANT_ELEMENTS: usize = 1 << 28;

/// Element storage: floats as `f32`, every integer and boolean type as `i64`.
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

    /// Converts the values to `dtype` (ONNX `Cast` semantics for the supported types).
    pub fn cast(&self, dtype: DType) -> HostTensor {
        let data = match dtype {
            DType::F32 => Data::Float(self.to_f32s()),
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
        let mut out = Vec::with_capacity(self.len() * self.dtype.size());
        match (&self.data, self.dtype) {
            (Data::Float(v), _) => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
            (Data::Int(v), DType::I64) => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
            (Data::Int(v), DType::I32) => {
                v.iter().for_each(|&x| out.extend((x as i32).to_le_bytes()))
            }
            (Data::Int(v), DType::F32) => {
                v.iter().for_each(|&x| out.extend((x as f32).to_le_bytes()))
            }
            (Data::Int(v), _) => v.iter().for_each(|&x| out.push(x as u8)),
        }
        out
    }

    /// A tensor from little-endian bytes of `dtype`.
    pub fn from_le_bytes(dtype: DType, shape: Vec<usize>, bytes: &[u8]) -> Option<HostTensor> {
        let n = checked_elements(&shape)?;
        if bytes.len() != n.checked_mul(dtype.size())? {
            return None;
        }
        let data = match dtype {
            DType::F32 => Data::Float(
                bytes
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ),
            DType::I64 => Data::Int(
                bytes
                    .chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                    .collect(),
            ),
            DType::I32 => Data::Int(
                bytes
                    .chunks_exact(4)
                    .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64)
                    .collect(),
            ),
            DType::I8 => Data::Int(bytes.iter().map(|&b| b as i8 as i64).collect()),
            DType::U8 => Data::Int(bytes.iter().map(|&b| b as i64).collect()),
            DType::Bool => Data::Int(bytes.iter().map(|&b| (b != 0) as i64).collect()),
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
            DType::I64 => Data::Int(t.int64_data.clone()),
            DType::I32 | DType::I8 | DType::U8 | DType::Bool => Data::Int(
                t.int32_data
                    .iter()
                    .map(|&v| wrap_int(dtype, v as i64))
                    .collect(),
            ),
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
        DType::I8 => x as i8 as i64,
        DType::U8 => x as u8 as i64,
        DType::Bool => (x != 0) as i64,
        _ => x,
    }
}
