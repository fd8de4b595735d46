//! Reading and writing the user's files safely: reads are bounded (regular files only, at most a
//! stated size, so `/dev/zero` or a FIFO cannot make the CLI read forever or allocate without
//! bound), and writes go to a temporary file beside the target that is renamed over it at the
//! end, so a failed `pack` never leaves a half-written file and an output path that names one
//! of the command's inputs is refused before anything is written.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The largest model (`.onnx` or `.frt`) the CLI reads: protobuf's own 2 GiB limit.
pub const MODEL_LIMIT: u64 = 2 << 30;

/// The largest `.npy` file read: a 4 GiB array plus its header.
pub const ARRAY_LIMIT: u64 = (4 << 30) + (1 << 20);

/// Why a file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// An I/O failure.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A device, FIFO, socket or directory where a file was expected.
    #[error("{0}: not a regular file")]
    NotRegular(String),
    /// Larger than the limit for its kind.
    #[error("{path}: {size} bytes, more than the {limit}-byte limit for {what}")]
    TooLarge {
        /// The file.
        path: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
        /// What kind of file (`a model`, `an array`).
        what: &'static str,
    },
    /// The output would overwrite one of the command's inputs.
    #[error("{output}: this is the input file {input}; choose another output path")]
    OverwritesInput {
        /// The output path.
        output: String,
        /// The input it names.
        input: String,
    },
}

impl FileError {
    /// The message without the leading path (for errors that name the file themselves).
    pub fn reason(&self) -> String {
        match self {
            FileError::Io { source, .. } => source.to_string(),
            FileError::NotRegular(_) => "not a regular file".into(),
            FileError::TooLarge {
                size, limit, what, ..
            } => format!("{size} bytes, more than the {limit}-byte limit for {what}"),
            FileError::OverwritesInput { input, .. } => {
                format!("this is the input file {input}; choose another output path")
            }
        }
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> FileError + '_ {
    move |source| FileError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Reads `path` whole if it is a regular file of at most `limit` bytes (`what` names the kind
/// of file in the error).
pub fn read_bounded(path: &Path, limit: u64, what: &'static str) -> Result<Vec<u8>, FileError> {
    let file = std::fs::File::open(path).map_err(io(path))?;
    let meta = file.metadata().map_err(io(path))?;
    if !meta.is_file() {
        return Err(FileError::NotRegular(path.display().to_string()));
    }
    let too_large = |size| FileError::TooLarge {
        path: path.display().to_string(),
        size,
        limit,
        what,
    };
    if meta.len() > limit {
        return Err(too_large(meta.len()));
    }
    // The size may change under us: never read past the limit.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(io(path))?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// Whether `a` and `b` name the same existing file (the same path, a link, or a hard link).
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) if x == y => return true,
        _ => {}
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
            return x.dev() == y.dev() && x.ino() == y.ino();
        }
    }
    false
}

/// Refuses `output` when it is one of `inputs`.
pub fn check_not_input(output: &Path, inputs: &[&Path]) -> Result<(), FileError> {
    for input in inputs {
        if same_file(output, input) {
            return Err(FileError::OverwritesInput {
                output: output.display().to_string(),
                input: input.display().to_string(),
            });
        }
    }
    Ok(())
}

/// Writes `bytes` to `path` atomically: to a temporary file in the same folder, flushed, then
/// renamed over `path` (on failure the temporary file is removed and `path` is untouched).
/// Refuses a `path` that is one of `inputs`.
pub fn write_atomic(path: &Path, bytes: &[u8], inputs: &[&Path]) -> Result<(), FileError> {
    check_not_input(path, inputs)?;
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !folder.is_dir() {
        return Err(FileError::Io {
            path: path.display().to_string(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("the folder {} does not exist", folder.display()),
            ),
        });
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".into());
    let temporary = folder.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    })();
    result.map_err(|source| {
        let _ = std::fs::remove_file(&temporary);
        FileError::Io {
            path: path.display().to_string(),
            source,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ferrite-files-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn devices_and_folders_are_refused() {
        #[cfg(unix)]
        assert!(matches!(
            read_bounded(Path::new("/dev/zero"), MODEL_LIMIT, "a model"),
            Err(FileError::NotRegular(_))
        ));
        assert!(matches!(
            read_bounded(&std::env::temp_dir(), MODEL_LIMIT, "a model"),
            Err(FileError::NotRegular(_))
        ));
    }

    #[test]
    fn reads_stop_at_the_limit() {
        let dir = scratch("limit");
        let path = dir.join("big.bin");
        std::fs::write(&path, vec![7u8; 100]).unwrap();
        assert_eq!(read_bounded(&path, 100, "a model").unwrap().len(), 100);
        let err = read_bounded(&path, 99, "a model").unwrap_err();
        assert!(
            err.to_string().contains("more than the 99-byte limit"),
            "{err}"
        );
    }

    #[test]
    fn writes_are_atomic_and_never_over_an_input() {
        let dir = scratch("write");
        let input = dir.join("m.onnx");
        std::fs::write(&input, b"model").unwrap();
        let err = write_atomic(&input, b"frt", &[&input]).unwrap_err();
        assert!(matches!(err, FileError::OverwritesInput { .. }), "{err}");
        // The same file through another spelling of its path.
        let other = dir.join(".").join("m.onnx");
        assert!(write_atomic(&other, b"frt", &[&input]).is_err());
        assert_eq!(std::fs::read(&input).unwrap(), b"model");
        let out = dir.join("m.frt");
        write_atomic(&out, b"frt", &[&input]).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"frt");
        let leftovers = std::fs::read_dir(&dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".tmp")
            })
            .count();
        assert_eq!(leftovers, 0);
        assert!(write_atomic(&dir.join("missing/m.frt"), b"x", &[]).is_err());
    }
}
