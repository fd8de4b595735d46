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
        case 8u: { return exp(x); }
        case 9u: { return log(x); }
        case 10u: { return sqrt(x); }
        case 11u: { return 1.0 / x; }
        case 12u: { return -x; }
        case 13u: { return abs(x); }
        case 14u: { return sign(x); }
        case 15u: { return floor(x); }
        case 16u: { return ceil(x); }
        // WGSL's round breaks ties to even, as ONNX.
        case 17u: { return round(x); }
        case 18u: { return sin(x); }
        case 19u: { return cos(x); }
        case 20u: { return erf(x); }
        case 21u: {
            if (a != 0.0) {
                return 0.5 * x * (1.0 + tanh(clamp(0.7978846 * (x + 0.044715 * x * x * x), -10.0, 10.0)));
            }
            return 0.5 * x * (1.0 + erf(x * 0.70710678));
        }
        case 22u: { return select(a * (exp(x) - 1.0), x, x >= 0.0); }
        case 23u: { return b * select(a * (exp(x) - 1.0), x, x > 0.0); }
        case 24u: { return max(x, 0.0) + min(0.0, a * (exp(x / a) - 1.0)); }
        case 25u: { return softplus(x); }
        case 26u: { return x / (1.0 + abs(x)); }
        case 27u: { return x * tanh(clamp(softplus(x), -10.0, 10.0)); }
        case 28u: { return select(0.0, x, x > a); }
        default: { return x; }
    }
}

// The error function (Abramowitz & Stegun 7.1.26, absolute error below 1.5e-7).
fn erf(x: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.3275911 * abs(x));
    let poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t;
    return sign(x) * (1.0 - poly * exp(-x * x));
}

// ln(1 + e^x) without overflow.
fn softplus(x: f32) -> f32 {
    if (x > 0.0) {
        return x + log(1.0 + exp(-x));
    }
    return log(1.0 + exp(x));
}

// Invocations in a one-dimensional dispatch (the grid stride).
fn stride_of(groups: vec3<u32>) -> u32 {
    return groups.x * GROUP;
}
