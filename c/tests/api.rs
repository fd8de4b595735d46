//! The C API's answers to bad input, called as C would call it: null pointers, misaligned
//! bytes, a corrupt model, a short arena, wrong sizes, calls out of order, an unknown status.
//! Each gets its typed status, never a crash.

use ferrite_c::ferrite_status::*;
use ferrite_c::*;
use ferrite_tools::aligned::AlignedBytes;
use ferrite_tools::compile::onnx::build::tiny_mlp;
use ferrite_tools::compile::pack::{pack, PackOptions};
use std::ffi::CStr;
use std::mem::MaybeUninit;
use std::ptr::{null, null_mut};

fn message(status: ferrite_status) -> String {
    unsafe { CStr::from_ptr(ferrite_status_message(status as i32)) }
        .to_string_lossy()
        .into_owned()
}

#[test]
fn bad_input_gets_its_status() {
    let frt = pack(&tiny_mlp(), &PackOptions::default())
        .expect("pack")
        .bytes;
    let bytes = AlignedBytes::from(&frt[..]);
    let file = bytes.as_bytes();
    let mut model = MaybeUninit::<ferrite_model>::zeroed();
    let m = model.as_mut_ptr();
    unsafe {
        // Loading.
        assert_eq!(
            ferrite_model_load(null_mut(), file.as_ptr(), file.len()),
            FERRITE_NULL_POINTER
        );
        assert_eq!(ferrite_model_load(m, null(), 10), FERRITE_NULL_POINTER);
        let shifted = AlignedBytes::from(&[&[0u8][..], file].concat()[..]);
        let misaligned = shifted.as_bytes()[1..].as_ptr();
        assert_eq!(
            ferrite_model_load(m, misaligned, file.len()),
            FERRITE_MISALIGNED
        );
        assert_eq!(
            ferrite_model_load(m, file.as_ptr(), file.len() - 1),
            FERRITE_INVALID_MODEL
        );
        // A length no slice can have.
        assert_eq!(
            ferrite_model_load(m, file.as_ptr(), usize::MAX),
            FERRITE_WRONG_SIZE
        );
        let mut corrupt = file.to_vec();
        corrupt[40] ^= 0xff;
        let corrupt = AlignedBytes::from(&corrupt[..]);
        assert_eq!(
            ferrite_model_load(m, corrupt.as_bytes().as_ptr(), file.len()),
            FERRITE_INVALID_MODEL
        );
        // A failed load leaves the handle unusable, not half-made.
        assert_eq!(ferrite_model_arena_bytes(m), 0);
        assert_eq!(ferrite_model_input_count(null()), 0);
        assert_eq!(ferrite_model_load(m, file.as_ptr(), file.len()), FERRITE_OK);
        assert!(ferrite_model_arena_bytes(m) > 0);
        assert_eq!(ferrite_model_input_count(m), 1);
        assert_eq!(ferrite_model_output_count(m), 1);

        // Describing.
        let mut info = MaybeUninit::<ferrite_tensor_info>::zeroed();
        assert_eq!(
            ferrite_model_input_info(m, 0, null_mut()),
            FERRITE_NULL_POINTER
        );
        assert_eq!(
            ferrite_model_input_info(m, 1, info.as_mut_ptr()),
            FERRITE_NO_SUCH_TENSOR
        );
        assert_eq!(
            ferrite_model_output_info(m, 0, info.as_mut_ptr()),
            FERRITE_OK
        );
        assert_eq!(
            ferrite_model_input_info(m, 0, info.as_mut_ptr()),
            FERRITE_OK
        );
        let input = info.assume_init_ref();
        assert_eq!(input.dtype, ferrite_dtype::FERRITE_FLOAT32);
        assert_eq!(input.quantized, 0);
        let input_bytes = input.bytes;

        // A session.
        let arena_len = ferrite_model_arena_bytes(m);
        let mut arena = AlignedBytes::zeroed(arena_len + 16);
        let arena = arena.as_mut_bytes();
        let mut session = MaybeUninit::<ferrite_session>::zeroed();
        let s = session.as_mut_ptr();
        assert_eq!(
            ferrite_session_new(s, m, null_mut(), arena_len),
            FERRITE_NULL_POINTER
        );
        assert_eq!(
            ferrite_session_new(s, null(), arena.as_mut_ptr(), arena_len),
            FERRITE_NULL_POINTER
        );
        assert_eq!(
            ferrite_session_new(s, m, arena.as_mut_ptr(), arena_len - 1),
            FERRITE_ARENA_TOO_SMALL
        );
        assert_eq!(
            ferrite_session_new(s, m, arena.as_mut_ptr().add(1), arena_len),
            FERRITE_ARENA_MISALIGNED
        );
        // A failed creation leaves the handle unusable.
        assert_eq!(ferrite_session_run(s), FERRITE_NULL_POINTER);
        assert_eq!(
            ferrite_session_new(s, m, arena.as_mut_ptr(), arena_len),
            FERRITE_OK
        );

        // Inputs, runs and outputs out of order or the wrong size.
        let mut data: *const u8 = null();
        let mut len = 0usize;
        assert_eq!(
            ferrite_session_output(s, 0, &mut data, &mut len),
            FERRITE_NOT_RUN
        );
        assert_eq!(ferrite_session_run(s), FERRITE_INPUT_NOT_SET);
        let values = vec![0.5f32; input_bytes / 4];
        let raw = values.as_ptr() as *const u8;
        assert_eq!(
            ferrite_session_set_input(s, 0, raw, input_bytes - 4),
            FERRITE_WRONG_SIZE
        );
        assert_eq!(
            ferrite_session_set_input(s, 1, raw, input_bytes),
            FERRITE_NO_SUCH_TENSOR
        );
        assert_eq!(
            ferrite_session_set_input(s, 0, null(), input_bytes),
            FERRITE_NULL_POINTER
        );
        assert_eq!(
            ferrite_session_set_input(s, 0, raw, usize::MAX),
            FERRITE_WRONG_SIZE
        );
        assert_eq!(
            ferrite_session_set_input(s, 0, raw, input_bytes),
            FERRITE_OK
        );
        assert_eq!(ferrite_session_run(s), FERRITE_OK);
        assert_eq!(
            ferrite_session_output(s, 0, null_mut(), &mut len),
            FERRITE_NULL_POINTER
        );
        assert_eq!(
            ferrite_session_output(s, 3, &mut data, &mut len),
            FERRITE_NO_SUCH_TENSOR
        );
        assert_eq!(
            ferrite_session_output(s, 0, &mut data, &mut len),
            FERRITE_OK
        );
        assert!(!data.is_null() && len > 0);
        let mut copy = vec![0u8; len];
        assert_eq!(
            ferrite_session_read_output(s, 0, copy.as_mut_ptr(), len - 1),
            FERRITE_WRONG_SIZE
        );
        assert_eq!(
            ferrite_session_read_output(s, 0, null_mut(), len),
            FERRITE_NULL_POINTER
        );
        assert_eq!(
            ferrite_session_read_output(s, 0, copy.as_mut_ptr(), len),
            FERRITE_OK
        );
        assert_eq!(copy, std::slice::from_raw_parts(data, len));
        // Buffers inside the arena are refused: an input read from it, an output copied into it,
        // the output's pointer or length stored in it.
        let inside = arena
            .as_mut_ptr()
            .add(arena_len - input_bytes.min(arena_len));
        assert_eq!(
            ferrite_session_set_input(s, 0, inside, input_bytes),
            FERRITE_OVERLAPS_ARENA
        );
        assert_eq!(
            ferrite_session_read_output(s, 0, arena.as_mut_ptr(), len),
            FERRITE_OVERLAPS_ARENA
        );
        let slot = arena.as_mut_ptr() as *mut *const u8;
        assert_eq!(
            ferrite_session_output(s, 0, slot, &mut len),
            FERRITE_OVERLAPS_ARENA
        );
        let count = arena.as_mut_ptr().add(arena_len - 8) as *mut usize;
        assert_eq!(
            ferrite_session_output(s, 0, &mut data, count),
            FERRITE_OVERLAPS_ARENA
        );
        // Just past the arena is fine (the buffer has 16 bytes more).
        assert!(len <= 16);
        let after = arena.as_mut_ptr().add(arena_len);
        assert_eq!(ferrite_session_read_output(s, 0, after, len), FERRITE_OK);
        // Every input again before the next run.
        assert_eq!(ferrite_session_run(s), FERRITE_INPUT_NOT_SET);
    }
    // Every status has a message, an unknown value too.
    assert_eq!(message(FERRITE_OK), "ok");
    assert!(message(FERRITE_ARENA_TOO_SMALL).contains("arena"));
    assert!(message(FERRITE_OVERLAPS_ARENA).contains("overlaps"));
    let unknown = unsafe { CStr::from_ptr(ferrite_status_message(99)) };
    assert_eq!(unknown.to_str().unwrap(), "not a ferrite_status");
}
