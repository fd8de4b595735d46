// Pooling over [N, C, H, W] (1-D as height 1), one output element per invocation.
//
// max_pool / avg_pool: [planes, h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr,
//                       count_include_pad, x, y]

fn pool(gid: vec3<u32>, groups: vec3<u32>, is_max: bool) {
    let h = i32(p(1u)); let w = i32(p(2u));
    let oh = p(3u); let ow = p(4u);
    let kh = p(5u); let kw = p(6u);
    let sh = i32(p(7u)); let sw = i32(p(8u)); let dh = i32(p(9u)); let dw = i32(p(10u));
    let pt = i32(p(11u)); let pl = i32(p(12u)); let pb = i32(p(13u)); let pr = i32(p(14u));
    let include_pad = p(15u) != 0u;
    let x = p(16u); let y = p(17u);
    let count = p(0u) * oh * ow;
    for (var i = gid.x; i < count; i += stride_of(groups)) {
        let ox = i32(i % ow);
        let oy = i32((i / ow) % oh);
        let plane = i / (oh * ow);
        let base = plane * u32(h * w);
        let y0 = oy * sh - pt;
        let x0 = ox * sw - pl;
        var best = bitcast<f32>(0xff7fffffu); // the lowest float (onnxruntime's start)
        var sum = 0.0;
        var n = 0u;
        for (var ky = 0u; ky < kh; ky++) {
            let iy = y0 + i32(ky) * dh;
            if (iy < 0 || iy >= h) {
                continue;
            }
            for (var kx = 0u; kx < kw; kx++) {
                let ix = x0 + i32(kx) * dw;
                if (ix < 0 || ix >= w) {
                    continue;
                }
                let v = load(x, base + u32(iy * w + ix));
                if (v > best || v != v) {
                    best = v;
                }
                sum += v;
                n += 1u;
            }
        }
        if (is_max) {
            store(y, i, best);
        } else {
            var divisor = n;
            if (include_pad) {
                // The window clipped to the padded input (not beyond it, as in ceil mode).
                let y_end = min(y0 + (i32(kh) - 1) * dh + 1, h + pb);
                let x_end = min(x0 + (i32(kw) - 1) * dw + 1, w + pr);
                let rows = u32(max(y_end - y0, 0));
                let cols = u32(max(x_end - x0, 0));
                divisor = ((rows + u32(dh) - 1u) / u32(dh)) * ((cols + u32(dw) - 1u) / u32(dw));
            }
            var v = 0.0;
            if (divisor != 0u) {
                v = sum / f32(divisor);
            }
            store(y, i, v);
        }
    }
}

@compute @workgroup_size(64)
fn max_pool(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    pool(gid, groups, true);
}

@compute @workgroup_size(64)
fn avg_pool(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    pool(gid, groups, false);
}

// global_avg_pool: [planes, plane, x, y] — the mean of each plane.
@compute @workgroup_size(64)
fn global_avg_pool(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let planes = p(0u);
    let plane = p(1u);
    let x = p(2u);
    let y = p(3u);
    for (var i = gid.x; i < planes; i += stride_of(groups)) {
        var sum = 0.0;
        for (var j = 0u; j < plane; j++) {
            sum += load(x, i * plane + j);
        }
        store(y, i, sum / f32(max(plane, 1u)));
    }
}
