//! Files and the command line on the host, through ARM semihosting (QEMU `-semihosting`).

use cortex_m_semihosting::{nr, syscall1};

/// A semihosting call that failed, with what it was doing.
#[derive(Debug)]
pub struct HostError(pub &'static str);

/// An open host file, closed on drop.
pub struct File(usize);

/// Passes a block of argument words to semihosting call `nr`.
fn call(nr: usize, block: &mut [usize]) -> usize {
    // SAFETY: the semihosting ABI takes a pointer to this call's argument block, which is live
    // and (for GET_CMDLINE) writable for the duration of the call.
    unsafe { syscall1(nr, block.as_mut_ptr() as usize) }
}

impl File {
    /// Opens `path` for reading (`write` false) or writing, in binary mode.
    pub fn open(path: &[u8], write: bool) -> Result<File, HostError> {
        let mut name = [0u8; 256];
        let bytes = path;
        if bytes.len() >= name.len() {
            return Err(HostError("file path too long"));
        }
        name[..bytes.len()].copy_from_slice(bytes);
        let mode = if write {
            nr::open::W_TRUNC_BINARY
        } else {
            nr::open::R_BINARY
        };
        let fd = call(nr::OPEN, &mut [name.as_ptr() as usize, mode, bytes.len()]);
        if fd == usize::MAX {
            return Err(HostError(if write {
                "cannot create an output file"
            } else {
                "cannot open an input file"
            }));
        }
        Ok(File(fd))
    }

    /// The file's length in bytes.
    pub fn len(&self) -> Result<usize, HostError> {
        let n = call(nr::FLEN, &mut [self.0]);
        if n == usize::MAX {
            return Err(HostError("cannot read a file's length"));
        }
        Ok(n)
    }

    /// Fills `buf` completely.
    pub fn read_exact(&self, buf: &mut [u8]) -> Result<(), HostError> {
        let missing = call(
            nr::READ,
            &mut [self.0, buf.as_mut_ptr() as usize, buf.len()],
        );
        if missing != 0 {
            return Err(HostError("short read"));
        }
        Ok(())
    }

    /// Writes all of `bytes`.
    pub fn write_all(&self, bytes: &[u8]) -> Result<(), HostError> {
        let missing = call(
            nr::WRITE,
            &mut [self.0, bytes.as_ptr() as usize, bytes.len()],
        );
        if missing != 0 {
            return Err(HostError("short write"));
        }
        Ok(())
    }
}

impl Drop for File {
    fn drop(&mut self) {
        call(nr::CLOSE, &mut [self.0]);
    }
}

/// The command line QEMU passes (`-semihosting-config arg=...`), written into `buf`.
pub fn command_line(buf: &mut [u8]) -> Result<&[u8], HostError> {
    let mut block = [buf.as_mut_ptr() as usize, buf.len()];
    if call(nr::GET_CMDLINE, &mut block) != 0 {
        return Err(HostError("no command line"));
    }
    let len = block[1].min(buf.len());
    Ok(buf.get(..len).unwrap_or_default())
}
