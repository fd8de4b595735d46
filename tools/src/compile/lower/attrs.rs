//! Typed access to a node's attributes, with ONNX defaults.

use super::lowerer::Reason;
use crate::compile::onnx::proto::attribute_type as at;
use crate::compile::onnx::Node;
use crate::compile::tensor::HostTensor;

/// Attribute accessors on [`Node`].
pub(crate) trait Attrs {
    /// Integer attribute or `default`.
    fn int(&self, name: &str, default: i64) -> Result<i64, Reason>;
    /// Integer-list attribute, if present.
    fn ints(&self, name: &str) -> Result<Option<Vec<i64>>, Reason>;
    /// Float attribute or `default`.
    fn float(&self, name: &str, default: f32) -> Result<f32, Reason>;
    /// Float-list attribute, if present.
    fn floats(&self, name: &str) -> Result<Option<Vec<f32>>, Reason>;
    /// String attribute or `default`.
    fn string(&self, name: &str, default: &str) -> Result<String, Reason>;
    /// String-list attribute, if present.
    fn strings(&self, name: &str) -> Result<Option<Vec<String>>, Reason>;
    /// Tensor attribute, if present.
    fn tensor(&self, name: &str) -> Result<Option<HostTensor>, Reason>;
}

fn wrong(name: &str, want: &str) -> Reason {
    format!("attribute '{name}' is not {want}")
}

impl Attrs for Node {
    fn int(&self, name: &str, default: i64) -> Result<i64, Reason> {
        match self.attr(name) {
            None => Ok(default),
            Some(a) if a.r#type == at::INT || a.r#type == 0 => Ok(a.i),
            Some(_) => Err(wrong(name, "an int")),
        }
    }

    fn ints(&self, name: &str) -> Result<Option<Vec<i64>>, Reason> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) if a.r#type == at::INTS || a.r#type == 0 => Ok(Some(a.ints.clone())),
            Some(_) => Err(wrong(name, "a list of ints")),
        }
    }

    fn float(&self, name: &str, default: f32) -> Result<f32, Reason> {
        match self.attr(name) {
            None => Ok(default),
            Some(a) if a.r#type == at::FLOAT || a.r#type == 0 => Ok(a.f),
            Some(_) => Err(wrong(name, "a float")),
        }
    }

    fn floats(&self, name: &str) -> Result<Option<Vec<f32>>, Reason> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) if a.r#type == at::FLOATS || a.r#type == 0 => Ok(Some(a.floats.clone())),
            Some(_) => Err(wrong(name, "a list of floats")),
        }
    }

    fn string(&self, name: &str, default: &str) -> Result<String, Reason> {
        match self.attr(name) {
            None => Ok(default.to_string()),
            Some(a) if a.r#type == at::STRING || a.r#type == 0 => {
                String::from_utf8(a.s.clone()).map_err(|_| wrong(name, "UTF-8"))
            }
            Some(_) => Err(wrong(name, "a string")),
        }
    }

    fn strings(&self, name: &str) -> Result<Option<Vec<String>>, Reason> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) if a.r#type == at::STRINGS || a.r#type == 0 => a
                .strings
                .iter()
                .map(|s| String::from_utf8(s.clone()).map_err(|_| wrong(name, "UTF-8")))
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(_) => Err(wrong(name, "a list of strings")),
        }
    }

    fn tensor(&self, name: &str) -> Result<Option<HostTensor>, Reason> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) if a.r#type == at::TENSOR || a.r#type == 0 => match &a.t {
                Some(t) => HostTensor::from_proto(t)
                    .map(Some)
                    .map_err(|e| e.to_string()),
                None => Err(wrong(name, "a tensor")),
            },
            Some(_) => Err(wrong(name, "a tensor")),
        }
    }
}
