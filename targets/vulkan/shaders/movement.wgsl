// Data movement for 4- and 8-byte elements (f32, i32, i64), as whole 32-bit words.

// copy_strided: [count, rank, words, src, src_base, dst, dst_base,
//                dims(8), src_strides(8), dst_strides(8)]
// Walks `dims` (last fastest) and copies element src_base + Σ i·src_stride to
// dst_base + Σ i·dst_stride (element units; source strides are signed, for negative slice steps).
// Transpose, Slice, Concat (one dispatch per input) and Split (one per output) are all this.
@compute @workgroup_size(64)
fn copy_strided(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let count = p(0u);
    let rank = p(1u);
    let words = p(2u);
    let src = p(3u);
    let dst = p(5u);
    for (var i = gid.x; i < count; i += stride_of(groups)) {
        var rest = i;
        var s = pi(4u);
        var t = p(6u);
        for (var d = rank; d > 0u; d--) {
            let dim = p(7u + d - 1u);
            let c = rest % dim;
            rest = rest / dim;
            s += i32(c) * pi(15u + d - 1u);
            t += c * p(23u + d - 1u);
        }
        for (var j = 0u; j < words; j++) {
            store_word(dst, t * words + j, word(src, u32(s) * words + j));
        }
    }
}

// pad: [count, rank, words, mode, x, y, value_lo, value_hi, out_dims(8), in_dims(8), begins(8)]
// mode: 0 constant, 1 reflect, 2 edge.
@compute @workgroup_size(64)
fn pad(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let count = p(0u);
    let rank = p(1u);
    let words = p(2u);
    let mode = p(3u);
    let x = p(4u);
    let y = p(5u);
    for (var i = gid.x; i < count; i += stride_of(groups)) {
        var rest = i;
        var src = 0u;
        var stride = 1u;
        var inside = true;
        for (var d = rank; d > 0u; d--) {
            let out_dim = p(8u + d - 1u);
            let n = i32(p(16u + d - 1u));
            var s = i32(rest % out_dim) - i32(p(24u + d - 1u));
            rest = rest / out_dim;
            if (s < 0 || s >= n) {
                if (mode == 0u || n == 0) {
                    inside = false;
                } else if (mode == 1u) {
                    if (n == 1) {
                        s = 0;
                    } else {
                        let period = 2 * (n - 1);
                        s = abs(s) % period;
                        if (s >= n) {
                            s = period - s;
                        }
                    }
                } else {
                    s = clamp(s, 0, n - 1);
                }
            }
            src += u32(max(s, 0)) * stride;
            stride *= u32(n);
        }
        for (var j = 0u; j < words; j++) {
            var v = p(6u + min(j, 1u));
            if (inside) {
                v = word(x, src * words + j);
            }
            store_word(y, i * words + j, v);
        }
    }
}

// gather: [count, outer, len, index_count, inner, words, x, indices, index_words, y]
// Output (o, q, r) = x[o, indices[q], r]; negative indices count from the end. An index out of
// range sets the status word (the host reports it) and writes zeros.
@compute @workgroup_size(64)
fn gather(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let count = p(0u);
    let len = i32(p(2u));
    let index_count = p(3u);
    let inner = p(4u);
    let words = p(5u);
    let x = p(6u);
    let indices = p(7u);
    let index_words = p(8u);
    let y = p(9u);
    for (var i = gid.x; i < count; i += stride_of(groups)) {
        let r = i % inner;
        let q = (i / inner) % index_count;
        let o = i / (inner * index_count);
        let low = word(indices, q * index_words);
        var index = bitcast<i32>(low);
        var valid = true;
        if (index_words == 2u) {
            let high = word(indices, q * 2u + 1u);
            valid = (high == 0u && index >= 0) || (high == 0xffffffffu && index < 0);
        }
        if (index < 0) {
            index += len;
        }
        valid = valid && index >= 0 && index < len;
        if (!valid) {
            atomicOr(&status[0], STATUS_INDEX_OUT_OF_RANGE);
        }
        let src = (o * u32(len) + u32(max(index, 0))) * inner + r;
        for (var j = 0u; j < words; j++) {
            var v = 0u;
            if (valid) {
                v = word(x, src * words + j);
            }
            store_word(y, i * words + j, v);
        }
    }
}

// resample: [count, out_len, inner, in_len, taps, x, indices, weights, y, extrapolation]
// Output (o, j, r) = Σ_k weights[j, k] · x[o, indices[j, k], r] (Resize, one axis), or the
// extrapolation value where indices[j, 0] < 0. A table index past the axis sets the status
// word (the host reports it) and counts as 0.
@compute @workgroup_size(64)
fn resample(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let count = p(0u);
    let out_len = p(1u);
    let inner = p(2u);
    let in_len = p(3u);
    let taps = p(4u);
    let x = p(5u);
    let indices = p(6u);
    let weights = p(7u);
    let y = p(8u);
    let extrapolation = bitcast<f32>(p(9u));
    for (var i = gid.x; i < count; i += stride_of(groups)) {
        let r = i % inner;
        let j = (i / inner) % out_len;
        let o = i / (inner * out_len);
        var v = extrapolation;
        if (bitcast<i32>(word(indices, j * taps)) >= 0) {
            v = 0.0;
            for (var k = 0u; k < taps; k++) {
                let index = bitcast<i32>(word(indices, j * taps + k));
                if (index < 0 || u32(index) >= in_len) {
                    atomicOr(&status[0], STATUS_INDEX_OUT_OF_RANGE);
                    continue;
                }
                v += load(weights, j * taps + k) * load(x, (o * in_len + u32(index)) * inner + r);
            }
        }
        store(y, i, v);
    }
}
