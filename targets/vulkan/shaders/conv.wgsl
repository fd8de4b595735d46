// Convolution and transposed convolution, one output element per invocation (grouped,
// depthwise, dilated, padded; 1-D as height 1).
//
// Both take: [n, c, h, w, oc, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl, icg, ocg, x, wt, b, y, act(3)]
// (icg/ocg: input/output channels per group; b = ABSENT without bias).

const P_X: u32 = 17u;
const P_ACT: u32 = 21u;

// Conv weights are [OC, IC/group, KH, KW]. Each invocation computes output channels `o` and, when
// the group has them, the next three, reusing every input load four times.
@compute @workgroup_size(64)
fn conv(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let c = p(1u); let h = p(2u); let w = p(3u);
    let oc = p(4u); let oh = p(5u); let ow = p(6u);
    let kh = p(7u); let kw = p(8u);
    let sh = p(9u); let sw = p(10u); let dh = p(11u); let dw = p(12u);
    let pt = i32(p(13u)); let pl = i32(p(14u));
    let icg = p(15u); let ocg = p(16u);
    let x = p(P_X); let wt = p(P_X + 1u); let bias = p(P_X + 2u); let y = p(P_X + 3u);
    // Work items: (batch, group, block of four output channels in the group, oy, ox).
    let blocks = (ocg + 3u) / 4u;
    let groups_n = oc / ocg;
    let count = p(0u) * groups_n * blocks * oh * ow;
    let plane = h * w;
    let taps = kh * kw;
    for (var i = gid.x; i < count; i += stride_of(groups)) {
        let ox = i % ow;
        var t = i / ow;
        let oy = t % oh;
        t = t / oh;
        let block = t % blocks;
        t = t / blocks;
        let g = t % groups_n;
        let batch = t / groups_n;
        let o0 = g * ocg + block * 4u;
        let lanes = min(4u, g * ocg + ocg - o0);
        var acc = vec4<f32>(0.0);
        let y0 = i32(oy * sh) - pt;
        let x0 = i32(ox * sw) - pl;
        for (var ic = 0u; ic < icg; ic++) {
            let xplane = (batch * c + g * icg + ic) * plane;
            let wrow = (o0 * icg + ic) * taps;
            let wstep = icg * taps;
            for (var ky = 0u; ky < kh; ky++) {
                let iy = y0 + i32(ky * dh);
                if (iy < 0 || iy >= i32(h)) {
                    continue;
                }
                for (var kx = 0u; kx < kw; kx++) {
                    let ix = x0 + i32(kx * dw);
                    if (ix < 0 || ix >= i32(w)) {
                        continue;
                    }
                    let v = load(x, xplane + u32(iy) * w + u32(ix));
                    let tap = wrow + ky * kw + kx;
                    acc.x += v * load(wt, tap);
                    if (lanes > 1u) { acc.y += v * load(wt, tap + wstep); }
                    if (lanes > 2u) { acc.z += v * load(wt, tap + 2u * wstep); }
                    if (lanes > 3u) { acc.w += v * load(wt, tap + 3u * wstep); }
                }
            }
        }
        let out_plane = oh * ow;
        let pos = oy * ow + ox;
        for (var l = 0u; l < lanes; l++) {
            let o = o0 + l;
            var v = acc[l];
            if (bias != ABSENT) {
                v += load(bias, o);
            }
            store(y, (batch * oc + o) * out_plane + pos, activate(v, P_ACT));
        }
    }
}

// ConvTranspose weights are [IC, OC/group, KH, KW]; pads crop the full output.
@compute @workgroup_size(64)
fn conv_transpose(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let c = p(1u); let h = p(2u); let w = p(3u);
    let oc = p(4u); let oh = p(5u); let ow = p(6u);
    let kh = p(7u); let kw = p(8u);
    let sh = i32(p(9u)); let sw = i32(p(10u)); let dh = i32(p(11u)); let dw = i32(p(12u));
    let pt = i32(p(13u)); let pl = i32(p(14u));
    let icg = p(15u); let ocg = p(16u);
    let x = p(P_X); let wt = p(P_X + 1u); let bias = p(P_X + 2u); let y = p(P_X + 3u);
    let count = p(0u) * oc * oh * ow;
    for (var i = gid.x; i < count; i += stride_of(groups)) {
        let ox = i % ow;
        var t = i / ow;
        let oy = t % oh;
        t = t / oh;
        let o = t % oc;
        let batch = t / oc;
        let g = o / ocg;
        let ol = o % ocg;
        var acc = 0.0;
        if (bias != ABSENT) {
            acc = load(bias, o);
        }
        for (var ic = 0u; ic < icg; ic++) {
            let ci = g * icg + ic;
            let xplane = (batch * c + ci) * h * w;
            let wbase = (ci * ocg + ol) * kh * kw;
            for (var ky = 0u; ky < kh; ky++) {
                let ny = i32(oy) + pt - i32(ky) * dh;
                if (ny < 0 || ny % sh != 0) {
                    continue;
                }
                let iy = ny / sh;
                if (iy >= i32(h)) {
                    continue;
                }
                for (var kx = 0u; kx < kw; kx++) {
                    let nx = i32(ox) + pl - i32(kx) * dw;
                    if (nx < 0 || nx % sw != 0) {
                        continue;
                    }
                    let ix = nx / sw;
                    if (ix >= i32(w)) {
                        continue;
                    }
                    acc += load(x, xplane + u32(iy) * w + u32(ix)) * load(wt, wbase + ky * kw + kx);
                }
            }
        }
        store(y, i, activate(acc, P_ACT));
    }
}
