// Reductions (mean, sum, max) over any set of axes, one output element per invocation.
//
// reduce: [count, op, kept_rank, reduced_rank, reduced_count, x, y,
//          kept_dims(8), kept_strides(8), reduced_dims(8), reduced_strides(8)]
// op: 0 mean, 1 sum, 2 max. Output element i walks the kept axes (last fastest); its inputs
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
            if (op == 2u) {
                if (v > acc || v != v) {
                    acc = v;
                }
            } else {
                acc += v;
            }
        }
        if (op == 0u) {
            acc = acc / f32(reduced_count);
        }
        store(y, i, acc);
    }
}
