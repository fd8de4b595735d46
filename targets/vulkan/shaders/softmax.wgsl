// Softmax along one axis of an [outer, len, inner] view, one softmax per invocation.
//
// softmax: [outer, len, inner, mode, x, y]; mode 0 softmax, 1 log-softmax, 2 hardmax (1 at the
// first maximum).
@compute @workgroup_size(64)
fn softmax(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let outer = p(0u);
    let len = p(1u);
    let inner = p(2u);
    let mode = p(3u);
    let x = p(4u);
    let y = p(5u);
    let count = outer * inner;
    for (var i = gid.x; i < count; i += stride_of(groups)) {
        let base = (i / inner) * len * inner + i % inner;
        var m = bitcast<f32>(0xff800000u); // -inf
        var first = 0u;
        for (var j = 0u; j < len; j++) {
            let v = load(x, base + j * inner);
            if (v > m) {
                first = j;
            }
            m = max(m, v);
        }
        if (mode == 2u) {
            for (var j = 0u; j < len; j++) {
                store(y, base + j * inner, select(0.0, 1.0, j == first));
            }
            continue;
        }
        if (mode == 1u) {
            var total = 0.0;
            for (var j = 0u; j < len; j++) {
                total += exp(load(x, base + j * inner) - m);
            }
            let shift = m + log(total);
            for (var j = 0u; j < len; j++) {
                store(y, base + j * inner, load(x, base + j * inner) - shift);
            }
            continue;
        }
        var sum = 0.0;
        for (var j = 0u; j < len; j++) {
            let e = exp(load(x, base + j * inner) - m);
            store(y, base + j * inner, e);
            sum += e;
        }
        let inv = 1.0 / sum;
        for (var j = 0u; j < len; j++) {
            store(y, base + j * inner, load(y, base + j * inner) * inv);
        }
    }
}
