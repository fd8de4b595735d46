// Elementwise kernels: activations, broadcasting arithmetic, batch normalisation.

// unary: [count, x, y, act(3)]
@compute @workgroup_size(64)
fn unary(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let count = p(0u);
    let x = p(1u);
    let y = p(2u);
    for (var i = gid.x; i < count; i += stride_of(groups)) {
        store(y, i, activate(load(x, i), 3u));
    }
}

// binary: [count, rank, op, a, b, y, act(3), dims(8), a_strides(8), b_strides(8)]
// op: 0 add, 1 sub, 2 mul, 3 div. Strides are in elements, 0 on broadcast axes.
@compute @workgroup_size(64)
fn binary(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let count = p(0u);
    let rank = p(1u);
    let op = p(2u);
    let a = p(3u);
    let b = p(4u);
    let y = p(5u);
    for (var i = gid.x; i < count; i += stride_of(groups)) {
        var rest = i;
        var ai = 0u;
        var bi = 0u;
        for (var d = rank; d > 0u; d--) {
            let dim = p(9u + d - 1u);
            let c = rest % dim;
            rest = rest / dim;
            ai += c * p(17u + d - 1u);
            bi += c * p(25u + d - 1u);
        }
        let va = load(a, ai);
        let vb = load(b, bi);
        var r: f32;
        switch op {
            case 0u: { r = va + vb; }
            case 1u: { r = va - vb; }
            case 2u: { r = va * vb; }
            case 3u: { r = va / vb; }
            case 4u: { r = power(va, vb); }
            // Max and min propagate NaN (as numpy).
            case 5u: { r = select(vb, va, va != va || va > vb); }
            case 6u: { r = select(vb, va, va != va || va < vb); }
            case 7u: { r = select(va, va * vb, va < 0.0); }
            case 8u: { r = va - vb * trunc(va / vb); }
            default: {
                // Mod: the remainder takes the divisor's sign.
                let m = va - vb * trunc(va / vb);
                r = select(m, m + vb, m != 0.0 && (m < 0.0) != (vb < 0.0));
            }
        }
        store(y, i, activate(r, 6u));
    }
}

// `a^b` as C's powf: WGSL's pow is undefined for a negative base, so an integer exponent takes
// the sign from its parity; a non-integer one gives NaN.
fn power(a: f32, b: f32) -> f32 {
    if (a >= 0.0 || a != a) {
        return pow(a, b);
    }
    if (b != trunc(b)) {
        return bitcast<f32>(0x7fc00000u);
    }
    let m = pow(-a, b);
    return select(m, -m, b - 2.0 * trunc(b / 2.0) != 0.0);
}

// batch_norm: [count, channels, inner, x, scale, bias, mean, var, y, epsilon, act(3)]
@compute @workgroup_size(64)
fn batch_norm(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let count = p(0u);
    let channels = p(1u);
    let inner = p(2u);
    let epsilon = pf(9u);
    for (var i = gid.x; i < count; i += stride_of(groups)) {
        let c = (i / inner) % channels;
        let k = load(p(4u), c) / sqrt(load(p(7u), c) + epsilon);
        let v = load(p(3u), i) * k + (load(p(5u), c) - load(p(6u), c) * k);
        store(p(8u), i, activate(v, 10u));
    }
}
