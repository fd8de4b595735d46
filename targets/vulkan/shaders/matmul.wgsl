// Batched matrix product (MatMul) and Gemm, tiled through workgroup memory: each 16 x 16
// workgroup computes a 16 x 16 block of the output, staging 16-wide slices of A and B so every
// element loaded from the arena is used 16 times.
//
// matmul: [m, n, k, batches, batch_rank, a, b, y, c, c_stride_m, c_stride_n, alpha, beta,
//          act(3), batch_dims(8), a_batch_strides(8), b_batch_strides(8)]
// A is [M, K] and B is [K, N] per batch (row-major); C (ABSENT for none) is read at
// row * c_stride_m + col * c_stride_n (strides 0 where it broadcasts);
// Y = act(alpha * A x B + beta * C), batches stored one after another.

const TILE: u32 = 16u;

var<workgroup> tile_a: array<f32, 256>;
var<workgroup> tile_b: array<f32, 256>;

@compute @workgroup_size(16, 16)
fn matmul(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let m = p(0u);
    let n = p(1u);
    let k = p(2u);
    let batches = p(3u);
    let batch_rank = p(4u);
    let a = p(5u);
    let b = p(6u);
    let y = p(7u);
    let c = p(8u);
    let alpha = pf(11u);
    let beta = pf(12u);
    let tiles_m = (m + TILE - 1u) / TILE;
    let tiles_n = (n + TILE - 1u) / TILE;
    for (var batch = wid.z; batch < batches; batch += groups.z) {
        var rest = batch;
        var a_base = 0u;
        var b_base = 0u;
        for (var d = batch_rank; d > 0u; d--) {
            let dim = p(16u + d - 1u);
            let i = rest % dim;
            rest = rest / dim;
            a_base += i * p(24u + d - 1u);
            b_base += i * p(32u + d - 1u);
        }
        let y_base = batch * m * n;
        for (var tm = wid.y; tm < tiles_m; tm += groups.y) {
            for (var tn = wid.x; tn < tiles_n; tn += groups.x) {
                let row = tm * TILE + lid.y;
                let col = tn * TILE + lid.x;
                var acc = 0.0;
                for (var k0 = 0u; k0 < k; k0 += TILE) {
                    let ka = k0 + lid.x;
                    var va = 0.0;
                    if (row < m && ka < k) {
                        va = load(a, a_base + row * k + ka);
                    }
                    tile_a[lid.y * TILE + lid.x] = va;
                    let kb = k0 + lid.y;
                    var vb = 0.0;
                    if (kb < k && col < n) {
                        vb = load(b, b_base + kb * n + col);
                    }
                    tile_b[lid.y * TILE + lid.x] = vb;
                    workgroupBarrier();
                    for (var kk = 0u; kk < TILE; kk++) {
                        acc += tile_a[lid.y * TILE + kk] * tile_b[kk * TILE + lid.x];
                    }
                    workgroupBarrier();
                }
                if (row < m && col < n) {
                    var v = alpha * acc;
                    if (c != ABSENT) {
                        v += beta * load(c, row * p(9u) + col * p(10u));
                    }
                    store(y, y_base + row * n + col, activate(v, 13u));
                }
            }
        }
    }
}

// matmul_rows: the same parameters, one output element per invocation and no workgroup memory.
// For products with few rows (a fully connected layer at batch 1 has M = 1) a 16 x 16 tile would
// leave 15 of its 16 rows idle; here each invocation walks one row of A against one column of B.
@compute @workgroup_size(64)
fn matmul_rows(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let m = p(0u);
    let n = p(1u);
    let k = p(2u);
    let batches = p(3u);
    let batch_rank = p(4u);
    let a = p(5u);
    let b = p(6u);
    let y = p(7u);
    let c = p(8u);
    let alpha = pf(11u);
    let beta = pf(12u);
    let count = batches * m * n;
    for (var i = gid.x; i < count; i += stride_of(groups)) {
        let col = i % n;
        let row = (i / n) % m;
        var rest = i / (m * n);
        var a_base = 0u;
        var b_base = 0u;
        for (var d = batch_rank; d > 0u; d--) {
            let dim = p(16u + d - 1u);
            let j = rest % dim;
            rest = rest / dim;
            a_base += j * p(24u + d - 1u);
            b_base += j * p(32u + d - 1u);
        }
        var acc = 0.0;
        let a_row = a_base + row * k;
        for (var kk = 0u; kk < k; kk++) {
            acc += load(a, a_row + kk) * load(b, b_base + kk * n + col);
        }
        var v = alpha * acc;
        if (c != ABSENT) {
            v += beta * load(c, row * p(9u) + col * p(10u));
        }
        store(y, i, activate(v, 13u));
    }
}
