//! Support vector machines: SVMRegressor and SVMClassifier.

use super::common::*;
use ferrite_hal::op::{CompareOp, Gemm, ReduceOp};

/// The support vectors `[S, features]` of an SVM node and its kernel matrix `K(x, sv)`,
/// `[N, S]`: LINEAR `x·sv`, POLY `(γ x·sv + c₀)^d`, SIGMOID `tanh(γ x·sv + c₀)` (one Gemm, its
/// activation fused), RBF `exp(−γ‖x − sv‖²)` as `exp(2γ x·sv − γ‖sv‖² − γ‖x‖²)` (a Gemm with
/// the support vectors' norms as its bias, the rows' norms subtracted).
fn svm_kernel(
    lw: &mut Lowerer,
    node: &Node,
    x: TensorId,
    n: usize,
    f: usize,
    supports: usize,
) -> Result<TensorId, Reason> {
    let sv = node
        .floats("support_vectors")?
        .ok_or("support_vectors are required")?;
    if sv.len() != supports * f {
        return Err(format!(
            "{} support vector values for {supports} vectors of {f} features",
            sv.len()
        ));
    }
    let params = node.floats("kernel_params")?.unwrap_or_default();
    let (gamma, coef0, degree) = (
        params.first().copied().unwrap_or(0.0),
        params.get(1).copied().unwrap_or(0.0),
        params.get(2).copied().unwrap_or(3.0),
    );
    let w = transposed_constant(lw, node, "support_vectors", &sv, supports, f);
    let gemm = |alpha, activation| {
        Op::Gemm(Gemm {
            alpha,
            beta: 1.0,
            activation,
        })
    };
    let kernel = node.string("kernel_type", "LINEAR")?;
    let scalar = |lw: &mut Lowerer, what: &str, v: f32| {
        lw.constant(node, what, HostTensor::float(vec![], vec![v]))
    };
    let k = lw.temp(node, "kernel", DType::F32, vec![n, supports]);
    match kernel.as_str() {
        "LINEAR" => lw.emit(
            node,
            gemm(1.0, Activation::None),
            vec![Some(x), Some(w)],
            vec![k],
        )?,
        "SIGMOID" | "POLY" => {
            let c = scalar(lw, "coef0", coef0);
            let act = if kernel == "SIGMOID" {
                Activation::Tanh
            } else {
                Activation::None
            };
            if kernel == "SIGMOID" {
                lw.emit(
                    node,
                    gemm(gamma, act),
                    vec![Some(x), Some(w), Some(c)],
                    vec![k],
                )?;
            } else {
                let base = lw.temp(node, "poly_base", DType::F32, vec![n, supports]);
                lw.emit(
                    node,
                    gemm(gamma, act),
                    vec![Some(x), Some(w), Some(c)],
                    vec![base],
                )?;
                let d = scalar(lw, "degree", degree);
                lw.emit(
                    node,
                    plain(BinaryOp::Pow),
                    vec![Some(base), Some(d)],
                    vec![k],
                )?;
            }
        }
        "RBF" => {
            let norms = (0..supports)
                .map(|j| -gamma * sv[j * f..(j + 1) * f].iter().map(|v| v * v).sum::<f32>())
                .collect();
            let c = lw.constant(
                node,
                "support_norms",
                HostTensor::float(vec![supports], norms),
            );
            let t = lw.temp(node, "rbf_cross", DType::F32, vec![n, supports]);
            lw.emit(
                node,
                gemm(2.0 * gamma, Activation::None),
                vec![Some(x), Some(w), Some(c)],
                vec![t],
            )?;
            let xx = lw.temp(node, "row_norms", DType::F32, vec![n, 1]);
            lw.emit(
                node,
                Op::Reduce {
                    op: ReduceOp::SumSquare,
                    axes: 1 << 1,
                },
                vec![Some(x)],
                vec![xx],
            )?;
            let g = scalar(lw, "gamma", gamma);
            let scaled = lw.temp(node, "scaled_row_norms", DType::F32, vec![n, 1]);
            lw.emit(
                node,
                plain(BinaryOp::Mul),
                vec![Some(xx), Some(g)],
                vec![scaled],
            )?;
            let arg = lw.temp(node, "rbf_exponent", DType::F32, vec![n, supports]);
            lw.emit(
                node,
                plain(BinaryOp::Sub),
                vec![Some(t), Some(scaled)],
                vec![arg],
            )?;
            lw.emit(node, Op::Unary(Activation::Exp), vec![Some(arg)], vec![k])?;
        }
        other => return Err(format!("kernel_type '{other}' is not known")),
    }
    Ok(k)
}

/// SVMRegressor: `Σ coefficient · K(x, sv) + ρ` (a linear model when it has no support
/// vectors), `±1` by its sign when `one_class`.
pub(super) fn svm_regressor(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let (x, n, f) = features(lw, node)?;
    if node.string("post_transform", "NONE")? != "NONE" {
        return Err("a regressor's post_transform must be NONE".into());
    }
    let coefficients = node
        .floats("coefficients")?
        .ok_or("coefficients are required")?;
    let rho = node.floats("rho")?.unwrap_or_else(|| vec![0.0]);
    let supports = node.int("n_supports", 0)? as usize;
    let (k, width) = if supports == 0 {
        (x, f)
    } else {
        (svm_kernel(lw, node, x, n, f, supports)?, supports)
    };
    if coefficients.len() != width || rho.len() != 1 {
        return Err(format!(
            "{} coefficients and {} rho for {width} inputs",
            coefficients.len(),
            rho.len()
        ));
    }
    let w = lw.constant(
        node,
        "coefficients",
        HostTensor::float(vec![width, 1], coefficients),
    );
    let b = lw.constant(node, "rho", HostTensor::float(vec![1], rho));
    let gemm = Op::Gemm(Gemm {
        alpha: 1.0,
        beta: 1.0,
        activation: Activation::None,
    });
    if node.int("one_class", 0)? == 0 {
        let y = lw.output(node, 0, DType::F32, vec![n, 1])?;
        return lw.emit(node, gemm, vec![Some(k), Some(w), Some(b)], vec![y]);
    }
    let score = lw.temp(node, "score", DType::F32, vec![n, 1]);
    lw.emit(node, gemm, vec![Some(k), Some(w), Some(b)], vec![score])?;
    let zero = lw.constant(node, "zero", HostTensor::float(vec![], vec![0.0]));
    let inside = lw.temp(node, "inside", DType::Bool, vec![n, 1]);
    lw.emit(
        node,
        Op::Compare(CompareOp::Greater),
        vec![Some(score), Some(zero)],
        vec![inside],
    )?;
    let (one, minus) = (
        lw.constant(node, "one", HostTensor::float(vec![], vec![1.0])),
        lw.constant(node, "minus_one", HostTensor::float(vec![], vec![-1.0])),
    );
    let y = lw.output(node, 0, DType::F32, vec![n, 1])?;
    lw.emit(
        node,
        Op::Where,
        vec![Some(inside), Some(one), Some(minus)],
        vec![y],
    )
}

/// SVMClassifier (libsvm's one-against-one, no probabilities), as onnxruntime scores it: a
/// decision `f` per pair of classes (one Gemm of the kernel matrix with the pairs' coefficients,
/// laid out at pack time), a vote per pair (to the first class when `f > 0`), the label of the
/// most votes (the first on a tie); scores `[−f, f]` with two classes, else the pairs' `f`.
pub(super) fn svm_classifier(lw: &mut Lowerer, node: &Node) -> Result<(), Reason> {
    let (x, n, f) = features(lw, node)?;
    if node.strings("classlabels_strings")?.is_some() {
        return Err(
            "string class labels are not supported (string tensors); train with integer labels"
                .into(),
        );
    }
    if node.floats("prob_a")?.is_some_and(|p| !p.is_empty()) {
        return Err("probability estimates (prob_a, prob_b) are not supported; train with probability=False".into());
    }
    if node.string("post_transform", "NONE")? != "NONE" {
        return Err("an SVM classifier's post_transform must be NONE".into());
    }
    let labels = ints_of(node, "classlabels_ints")?;
    let per_class = ints_of(node, "vectors_per_class")?;
    let k = labels.len();
    if k < 2 || per_class.len() != k || per_class.iter().any(|&c| c < 0) {
        return Err("vectors_per_class must give one count per class".into());
    }
    let supports: usize = per_class.iter().map(|&c| c as usize).sum();
    let coefficients = node
        .floats("coefficients")?
        .ok_or("coefficients are required")?;
    let rho = node.floats("rho")?.ok_or("rho is required")?;
    let pairs = k * (k - 1) / 2;
    if supports == 0 || coefficients.len() != (k - 1) * supports || rho.len() != pairs {
        return Err(format!(
            "{} coefficients and {} rho for {k} classes of {supports} support vectors",
            coefficients.len(),
            rho.len()
        ));
    }
    let kernel = svm_kernel(lw, node, x, n, f, supports)?;
    // W [supports, pairs]: pair (i, j) weighs class i's vectors by row j − 1 of the
    // coefficients and class j's by row i. D [pairs, k]: +1 for i, −1 for j (the vote moves
    // from j to i when f > 0); the j's one vote each is the base.
    let start: Vec<usize> = per_class
        .iter()
        .scan(0usize, |acc, &c| {
            let s = *acc;
            *acc += c as usize;
            Some(s)
        })
        .collect();
    let (mut w, mut d, mut base) = (
        vec![0.0f32; supports * pairs],
        vec![0.0f32; pairs * k],
        vec![0.0f32; k],
    );
    let mut p = 0;
    for i in 0..k - 1 {
        for j in i + 1..k {
            for (class, row) in [(i, j - 1), (j, i)] {
                for m in start[class]..start[class] + per_class[class] as usize {
                    w[m * pairs + p] = coefficients[row * supports + m];
                }
            }
            d[p * k + i] = 1.0;
            d[p * k + j] = -1.0;
            base[j] += 1.0;
            p += 1;
        }
    }
    let gemm = Op::Gemm(Gemm {
        alpha: 1.0,
        beta: 1.0,
        activation: Activation::None,
    });
    let w = lw.constant(
        node,
        "pair_coefficients",
        HostTensor::float(vec![supports, pairs], w),
    );
    let r = lw.constant(node, "rho", HostTensor::float(vec![pairs], rho));
    let decisions = lw.temp(node, "decisions", DType::F32, vec![n, pairs]);
    lw.emit(
        node,
        gemm,
        vec![Some(kernel), Some(w), Some(r)],
        vec![decisions],
    )?;
    let zero = lw.constant(node, "zero", HostTensor::float(vec![], vec![0.0]));
    let first_wins = lw.temp(node, "first_wins", DType::Bool, vec![n, pairs]);
    lw.emit(
        node,
        Op::Compare(CompareOp::Greater),
        vec![Some(decisions), Some(zero)],
        vec![first_wins],
    )?;
    let wins = lw.temp(node, "wins", DType::F32, vec![n, pairs]);
    lw.emit(node, Op::Convert, vec![Some(first_wins)], vec![wins])?;
    let d = lw.constant(node, "pair_votes", HostTensor::float(vec![pairs, k], d));
    let base = lw.constant(node, "base_votes", HostTensor::float(vec![k], base));
    let votes = lw.temp(node, "votes", DType::F32, vec![n, k]);
    lw.emit(
        node,
        gemm,
        vec![Some(wins), Some(d), Some(base)],
        vec![votes],
    )?;
    label_of_highest(lw, node, votes, n, labels)?;
    if k > 2 {
        return lw.alias_output(node, 1, decisions, vec![n, pairs]);
    }
    let negated = lw.temp(node, "negated", DType::F32, vec![n, 1]);
    lw.emit(
        node,
        Op::Unary(Activation::Neg),
        vec![Some(decisions)],
        vec![negated],
    )?;
    let z = lw.output(node, 1, DType::F32, vec![n, 2])?;
    lw.emit(
        node,
        Op::Concat { axis: 1 },
        vec![Some(negated), Some(decisions)],
        vec![z],
    )
}
