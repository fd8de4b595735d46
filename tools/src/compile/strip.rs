//! `ferrite pack --strip-names`: the same model without its tensor and op names, which sit in a
//! microcontroller's flash for nothing (29 % of a tf2onnx export's `.frt`). The names go to a
//! small side file (`NAME.names.json`) that `ferrite inspect` reads when it lies next to the
//! model and matches it.

use crate::compile::error::PackError;
use ferrite_core::format::{self, section};
use ferrite_core::Model;
use ferrite_hal::Plan;

/// The names a stripped model lost, by tensor and op index.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Names {
    /// Tensor names, by tensor index.
    pub tensors: Vec<String>,
    /// Op (ONNX node) names, by op index.
    pub ops: Vec<String>,
}

impl Names {
    /// The side file's JSON, tied to the stripped model by its CRC.
    pub fn to_json(&self, stripped: &[u8]) -> serde_json::Value {
        serde_json::json!({
            "ferrite_names": 1,
            "model_crc32": format!("{:08x}", ferrite_core::crc::crc32(stripped)),
            "tensors": self.tensors,
            "ops": self.ops,
        })
    }

    /// The names in side file `json` when it belongs to `model` (same CRC), else `None`.
    pub fn from_json(json: &serde_json::Value, model: &[u8]) -> Option<Names> {
        let crc = format!("{:08x}", ferrite_core::crc::crc32(model));
        if json.get("model_crc32")?.as_str()? != crc {
            return None;
        }
        let list = |key: &str| -> Option<Vec<String>> {
            json.get(key)?
                .as_array()?
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect()
        };
        Some(Names {
            tensors: list("tensors")?,
            ops: list("ops")?,
        })
    }
}

/// The side file's path for model file `frt`: `model.frt` → `model.names.json`.
pub fn side_file(frt: &std::path::Path) -> std::path::PathBuf {
    frt.with_extension("names.json")
}

/// Rewrites a verified `.frt` with every tensor and op name empty and an empty strings
/// section; returns it (verified again) and the names it dropped.
pub fn strip_names(frt: &[u8]) -> Result<(Vec<u8>, Names), PackError> {
    let aligned = crate::aligned::AlignedBytes::from(frt);
    let model = Model::load(aligned.as_bytes())
        .map_err(|e| PackError::Write(format!("the model to strip does not verify: {e}")))?;
    let names = Names {
        tensors: (0..model.tensor_count())
            .map(|i| {
                model
                    .tensor_info(i)
                    .map(|t| t.name.to_string())
                    .unwrap_or_default()
            })
            .collect(),
        ops: (0..model.len())
            .map(|i| model.op_name(i).unwrap_or("").to_string())
            .collect(),
    };
    let mut sections = read_sections(frt)?;
    for (kind, data) in &mut sections {
        let (record, name_at) = match *kind {
            section::STRINGS => {
                data.clear();
                continue;
            }
            section::TENSORS => (format::TENSOR_RECORD_BYTES, 4),
            section::OPS => (format::OP_RECORD_BYTES, 20),
            _ => continue,
        };
        for rec in data.chunks_exact_mut(record) {
            rec[name_at..name_at + 8].fill(0);
        }
    }
    let borrowed: Vec<(u32, &[u8])> = sections.iter().map(|(k, d)| (*k, &d[..])).collect();
    let stripped = crate::compile::writer::assemble(&borrowed)?;
    let check = crate::aligned::AlignedBytes::from(&stripped[..]);
    Model::load(check.as_bytes())
        .map_err(|e| PackError::Write(format!("the stripped model does not verify: {e}")))?;
    Ok((stripped, names))
}

/// The sections of a verified file, in file order.
fn read_sections(frt: &[u8]) -> Result<Vec<(u32, Vec<u8>)>, PackError> {
    let word = |at: usize| -> Result<usize, PackError> {
        frt.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
            .ok_or_else(|| PackError::Write("truncated section table".into()))
    };
    let count = word(16)?;
    let mut sections = Vec::with_capacity(count);
    for i in 0..count {
        let entry = format::HEADER_BYTES + i * format::SECTION_ENTRY_BYTES;
        let (kind, offset, len) = (word(entry)?, word(entry + 4)?, word(entry + 8)?);
        let data = frt
            .get(offset..offset + len)
            .ok_or_else(|| PackError::Write("section past the end of the file".into()))?;
        sections.push((kind as u32, offset, data.to_vec()));
    }
    sections.sort_by_key(|s| s.1);
    Ok(sections.into_iter().map(|(k, _, d)| (k, d)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::onnx::build::tiny_mlp;
    use crate::compile::pack::{pack, PackOptions};

    #[test]
    fn a_stripped_model_runs_as_before_and_keeps_its_names_aside() {
        let packed = pack(&tiny_mlp(), &PackOptions::default()).expect("pack");
        let (stripped, names) = strip_names(&packed.bytes).expect("strip");
        assert!(stripped.len() < packed.bytes.len());
        let a = crate::aligned::AlignedBytes::from(&packed.bytes[..]);
        let b = crate::aligned::AlignedBytes::from(&stripped[..]);
        let (full, bare) = (
            Model::load(a.as_bytes()).unwrap(),
            Model::load(b.as_bytes()).unwrap(),
        );
        assert_eq!(full.tensor_count(), bare.tensor_count());
        for i in 0..full.tensor_count() {
            let (f, s) = (full.tensor_info(i).unwrap(), bare.tensor_info(i).unwrap());
            assert_eq!(f.desc, s.desc);
            assert_eq!(s.name, "");
            assert_eq!(names.tensors[i], f.name);
        }
        for i in 0..full.len() {
            assert_eq!(full.step(i).map(|s| s.op), bare.step(i).map(|s| s.op));
            assert_eq!(bare.op_name(i), Some(""));
        }
        assert_eq!(full.weights_bytes(), bare.weights_bytes());
        let json = names.to_json(&stripped);
        assert_eq!(Names::from_json(&json, &stripped), Some(names.clone()));
        assert_eq!(
            Names::from_json(&json, &packed.bytes),
            None,
            "another model's names"
        );
        // Stripping twice changes nothing more.
        let (again, _) = strip_names(&stripped).expect("strip again");
        assert_eq!(again, stripped);
    }
}
