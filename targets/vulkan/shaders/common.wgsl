// Shared by every Ferrite compute shader (build.rs prepends it to each module).
//
// One descriptor set serves every dispatch of a plan:
//   0: the arena (read-write), 1: the weights (read-only), 2: every step's parameter words,
//   3: the status word a shader sets when it meets bad run-time data.
// The push constant `base` is where this dispatch's parameters start in `params`, so shapes are
// data, never shader source. Tensors are addressed in 32-bit words; an address with IN_WEIGHTS
// set points into the weights buffer. Every kernel loops over its work with a grid stride, so
// any dispatch size covers any tensor.

@group(0) @binding(0) var<storage, read_write> arena: array<u32>;
@group(0) @binding(1) var<storage, read> weights: array<u32>;
@group(0) @binding(2) var<storage, read> params: array<u32>;
@group(0) @binding(3) var<storage, read_write> status: array<atomic<u32>>;

struct Push {
    base: u32,
}

var<immediate> push: Push;

const IN_WEIGHTS: u32 = 0x80000000u;
const ABSENT: u32 = 0xffffffffu;
const STATUS_INDEX_OUT_OF_RANGE: u32 = 1u;
// Invocations per workgroup of the one-dimensional kernels.
const GROUP: u32 = 64u;

fn p(i: u32) -> u32 {
    return params[push.base + i];
}

fn pf(i: u32) -> f32 {
    return bitcast<f32>(p(i));
}

fn pi(i: u32) -> i32 {
    return bitcast<i32>(p(i));
}

fn word(t: u32, i: u32) -> u32 {
    if ((t & IN_WEIGHTS) != 0u) {
        return weights[(t & ~IN_WEIGHTS) + i];
    }
    return arena[t + i];
}

fn load(t: u32, i: u32) -> f32 {
    return bitcast<f32>(word(t, i));
}

fn store_word(t: u32, i: u32, v: u32) {
    arena[t + i] = v;
}

fn store(t: u32, i: u32, v: f32) {
    arena[t + i] = bitcast<u32>(v);
}

// The activation whose three words (code, a, b) start at parameter `at` (hal's encoding).
fn activate(x: f32, at: u32) -> f32 {
    let a = pf(at + 1u);
    let b = pf(at + 2u);
    switch p(at) {
        case 1u: { return max(x, 0.0); }
        case 2u: { return select(a * x, x, x >= 0.0); }
        case 3u: { return min(max(x, a), b); }
        case 4u: { return 1.0 / (1.0 + exp(-x)); }
        // tanh saturates to ±1 in f32 beyond |x| = 10; clamping avoids inf/inf in drivers
        // that expand it through exp.
        case 5u: { return tanh(clamp(x, -10.0, 10.0)); }
        case 6u: { return clamp(a * x + b, 0.0, 1.0); }
        case 7u: { return x * clamp(x / 6.0 + 0.5, 0.0, 1.0); }
        default: { return x; }
    }
}

// Invocations in a one-dimensional dispatch (the grid stride).
fn stride_of(groups: vec3<u32>) -> u32 {
    return groups.x * GROUP;
}
