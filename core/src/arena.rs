//! A statically sized, correctly aligned arena for firmware: `Arena<{ ARENA_BYTES }>`.

use crate::format::ARENA_ALIGN;

/// `N` bytes aligned to [`ARENA_ALIGN`], suitable as a `static` or a stack buffer.
#[repr(C, align(16))]
pub struct Arena<const N: usize> {
    bytes: [u8; N],
}

const _: () = assert!(core::mem::align_of::<Arena<1>>() == ARENA_ALIGN);

impl<const N: usize> Arena<N> {
    /// A zeroed arena.
    pub const fn new() -> Self {
        Arena { bytes: [0; N] }
    }

    /// The arena's bytes, to hand to [`crate::Session::new`].
    pub fn as_mut_bytes(&mut self) -> &mut [u8] {
        &mut self.bytes
    }
}

impl<const N: usize> Default for Arena<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// Includes a packed model in the binary (in flash on a microcontroller), aligned to 16 bytes
/// as [`crate::Model::load`] requires: `let model = Model::load(include_model!("model.frt"))?;`.
#[macro_export]
macro_rules! include_model {
    ($path:expr) => {{
        #[repr(C, align(16))]
        struct Aligned<T: ?Sized>(T);
        static ALIGNED: &Aligned<[u8]> = &Aligned(*include_bytes!($path));
        &ALIGNED.0
    }};
}
