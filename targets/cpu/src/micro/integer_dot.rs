//! The dot product of int8 weights with wider (16-bit) activations, in 64 bits: the inner
//! loop of the 16 × 8 integer convolution and matrix product.

/// `Σ w·value(x)` of int8 weights and values of at most 17 bits, in 64 bits: four products at a
/// time summed in int32 (each below 2^24, so four cannot overflow), then added to the total.
#[inline(always)]
pub(crate) fn wide_dot<V: Copy>(w: &[i8], x: &[V], value: impl Fn(V) -> i32) -> i64 {
    let (w4, w_rest) = w.as_chunks::<4>();
    let (x4, x_rest) = x.as_chunks::<4>();
    let mut total = 0i64;
    for (w, x) in w4.iter().zip(x4) {
        let four = value(x[0]) * i32::from(w[0])
            + value(x[1]) * i32::from(w[1])
            + value(x[2]) * i32::from(w[2])
            + value(x[3]) * i32::from(w[3]);
        total = total.wrapping_add(four.into());
    }
    for (&w, &x) in w_rest.iter().zip(x_rest) {
        total = total.wrapping_add(i64::from(value(x) * i32::from(w)));
    }
    total
}
