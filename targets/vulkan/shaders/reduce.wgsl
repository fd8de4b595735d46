// Reductions over any set of axes, one output element per invocation.
//
// reduce: [count, op, kept_rank, reduced_rank, reduced_count, x, y,
//          kept_dims(8), kept_strides(8), reduced_dims(8), reduced_strides(8)]
// op: 0 mean, 1 sum, 2 max, 3 min, 4 product, 5 L1, 6 L2, 7 log-sum, 8 sum of squares. Output element i walks the kept axes (last fastest); its inputs
// are every combination of the reduced axes. Strides are the input's, in elements.
@compute @workgroup_size(64)
fn reduce(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let count = p(0u);
    let op = p(1u);
    let kept_rank = p(2u);
    let reduced_rank = p(3u);
    let reduced_count = p(4u);
    let x = p(5u);
    let y = p(6u);
    for (var i = gid.x; i < count; i += stride_of(groups)) {
        var rest = i;
        var base = 0u;
        for (var d = kept_rank; d > 0u; d--) {
            let dim = p(7u + d - 1u);
            base += (rest % dim) * p(15u + d - 1u);
            rest = rest / dim;
        }
        var acc = 0.0;
        if (op == 2u) {
            acc = bitcast<f32>(0xff800000u); // -inf
        } else if (op == 3u) {
            acc = bitcast<f32>(0x7f800000u); // +inf
        } else if (op == 4u) {
            acc = 1.0;
        }
        for (var r = 0u; r < reduced_count; r++) {
            var rr = r;
            var offset = base;
            for (var d = reduced_rank; d > 0u; d--) {
                let dim = p(23u + d - 1u);
                offset += (rr % dim) * p(31u + d - 1u);
                rr = rr / dim;
            }
            let v = load(x, offset);
            switch op {
                case 2u: {
                    if (v > acc || v != v) {
                        acc = v;
                    }
                }
                case 3u: {
                    if (v < acc || v != v) {
                        acc = v;
                    }
                }
                case 4u: { acc *= v; }
                case 5u: { acc += abs(v); }
                case 6u, 8u: { acc += v * v; }
                default: { acc += v; }
            }
        }
        if (op == 0u) {
            acc = acc / f32(reduced_count);
        } else if (op == 6u) {
            acc = sqrt(acc);
        } else if (op == 7u) {
            acc = log(acc);
        }
        store(y, i, acc);
    }
}

// ArgMax / ArgMin along the middle axis of an [outer, len, inner] view, one result per
// invocation, written as int64 (two words: the index, then 0).
//
// arg_extreme: [outer, len, inner, max, last, x, y]; max 1 for ArgMax, last 1 to report the last
// of equal extremes. NaN counts as the extreme (as numpy).
@compute @workgroup_size(64)
fn arg_extreme(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let outer = p(0u);
    let len = p(1u);
    let inner = p(2u);
    let is_max = p(3u) != 0u;
    let last = p(4u) != 0u;
    let x = p(5u);
    let y = p(6u);
    let count = outer * inner;
    for (var i = gid.x; i < count; i += stride_of(groups)) {
        let base = (i / inner) * len * inner + i % inner;
        var best = 0u;
        var b = load(x, base);
        for (var j = 1u; j < len; j++) {
            let v = load(x, base + j * inner);
            var better = false;
            if (b != b) {
                better = false;
            } else if (v != v) {
                better = true;
            } else if (is_max) {
                better = v > b || (last && v == b);
            } else {
                better = v < b || (last && v == b);
            }
            if (better) {
                best = j;
                b = v;
            }
        }
        store_word(y, 2u * i, best);
        store_word(y, 2u * i + 1u, 0u);
    }
}
