// Softmax along one axis of an [outer, len, inner] view, one softmax per invocation.
//
// softmax: [outer, len, inner, x, y]
@compute @workgroup_size(64)
fn softmax(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let outer = p(0u);
    let len = p(1u);
    let inner = p(2u);
    let x = p(3u);
    let y = p(4u);
    let count = outer * inner;
    for (var i = gid.x; i < count; i += stride_of(groups)) {
        let base = (i / inner) * len * inner + i % inner;
        var m = bitcast<f32>(0xff800000u); // -inf
        for (var j = 0u; j < len; j++) {
            m = max(m, load(x, base + j * inner));
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
