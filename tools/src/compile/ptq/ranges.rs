//! Activation ranges from calibration: min/max, percentile or entropy (KL divergence), and the
//! int8 scale and zero point a range gives.
//!
//! Every observed tensor keeps its min and max (first pass) and, for percentile and entropy, a
//! histogram of absolute values over `[0, max |x|]` (second pass), as onnxruntime's calibrators
//! and TensorRT's entropy calibrator do.

/// How an activation's range is chosen from the calibration data.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Method {
    /// The smallest and largest value seen.
    MinMax,
    /// Clip the magnitude at this percentile of `|x|` (e.g. 99.99), dropping rare outliers.
    Percentile(f64),
    /// Clip the magnitude where the int8 histogram is closest to the float one (KL divergence).
    Entropy,
}

impl Method {
    /// Parses `minmax`, `percentile`, `percentile=99.9` or `entropy`.
    pub fn parse(text: &str) -> Option<Method> {
        match text {
            "minmax" => Some(Method::MinMax),
            "entropy" => Some(Method::Entropy),
            "percentile" => Some(Method::Percentile(99.99)),
            _ => {
                let p: f64 = text.strip_prefix("percentile=")?.parse().ok()?;
                (p > 50.0 && p <= 100.0).then_some(Method::Percentile(p))
            }
        }
    }

    /// Whether the method needs the histogram pass.
    pub fn needs_histogram(self) -> bool {
        self != Method::MinMax
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Method::MinMax => write!(f, "minmax"),
            Method::Percentile(p) => write!(f, "percentile={p}"),
            Method::Entropy => write!(f, "entropy"),
        }
    }
}

/// Bins of the `|x|` histogram.
pub const HISTOGRAM_BINS: usize = 2048;

/// What calibration saw of one tensor.
#[derive(Clone, Debug)]
pub struct Observed {
    /// Smallest finite value.
    pub min: f32,
    /// Largest finite value.
    pub max: f32,
    histogram: Vec<u64>,
}

impl Default for Observed {
    fn default() -> Self {
        Observed {
            min: f32::INFINITY,
            max: f32::NEG_INFINITY,
            histogram: Vec::new(),
        }
    }
}

impl Observed {
    /// Widens the range to `values` (first pass). Non-finite values are ignored.
    pub fn observe_range(&mut self, values: impl IntoIterator<Item = f32>) {
        for v in values.into_iter().filter(|v| v.is_finite()) {
            self.min = self.min.min(v);
            self.max = self.max.max(v);
        }
    }

    fn abs_max(&self) -> f32 {
        if self.min > self.max {
            return 0.0;
        }
        self.min.abs().max(self.max.abs())
    }

    /// Counts `values` into the `|x|` histogram (second pass, after every `observe_range`).
    /// Exact zeros are left out: the zero point represents them exactly whatever the range, and
    /// a Relu output's spike of zeros would otherwise pull the entropy threshold to its minimum.
    pub fn observe_histogram(&mut self, values: impl IntoIterator<Item = f32>) {
        if self.histogram.is_empty() {
            self.histogram = vec![0; HISTOGRAM_BINS];
        }
        let top = self.abs_max();
        if top == 0.0 {
            return;
        }
        let per_unit = HISTOGRAM_BINS as f32 / top;
        for v in values.into_iter().filter(|v| v.is_finite() && *v != 0.0) {
            let bin = ((v.abs() * per_unit) as usize).min(HISTOGRAM_BINS - 1);
            self.histogram[bin] += 1;
        }
    }

    /// The calibrated range `[lo, hi]`.
    pub fn range(&self, method: Method) -> (f32, f32) {
        if self.min > self.max {
            return (0.0, 0.0);
        }
        let width = self.abs_max() / HISTOGRAM_BINS as f32;
        let threshold_bin = match method {
            _ if self.histogram.iter().all(|&c| c == 0) => None,
            Method::MinMax => None,
            Method::Percentile(p) => Some(percentile_bin(&self.histogram, p)),
            Method::Entropy => {
                let levels = if self.min >= 0.0 { 256 } else { 128 };
                Some(entropy_bin(&self.histogram, levels))
            }
        };
        match threshold_bin {
            None => (self.min, self.max),
            Some(bin) => {
                let t = (bin + 1) as f32 * width;
                (self.min.max(-t), self.max.min(t))
            }
        }
    }
}

/// The first bin where the cumulative count reaches `p` percent.
fn percentile_bin(histogram: &[u64], p: f64) -> usize {
    let total: u64 = histogram.iter().sum();
    let target = (total as f64 * p / 100.0).ceil() as u64;
    let mut seen = 0;
    for (i, &c) in histogram.iter().enumerate() {
        seen += c;
        if seen >= target {
            return i;
        }
    }
    histogram.len() - 1
}

/// The clipping bin (exclusive end − 1) minimising KL(P ‖ Q), where P is the histogram clipped
/// there (outliers folded into the last bin) and Q is P quantized to `levels` levels and
/// expanded back: TensorRT's entropy calibration.
fn entropy_bin(histogram: &[u64], levels: usize) -> usize {
    let n = histogram.len();
    let mut best = (f64::INFINITY, n - 1);
    let mut outliers: u64 = histogram[levels..].iter().sum();
    for end in levels..=n {
        if end > levels {
            outliers -= histogram[end - 1];
        }
        let mut p: Vec<f64> = histogram[..end].iter().map(|&c| c as f64).collect();
        p[end - 1] += outliers as f64;
        let total: f64 = p.iter().sum();
        if total == 0.0 {
            continue;
        }
        let mut q = vec![0.0f64; end];
        for level in 0..levels {
            let start = level * end / levels;
            let stop = ((level + 1) * end / levels).max(start + 1).min(end);
            let mass: f64 = histogram[start..stop].iter().map(|&c| c as f64).sum();
            let nonzero = (start..stop).filter(|&i| p[i] > 0.0).count();
            if nonzero > 0 {
                for i in (start..stop).filter(|&i| p[i] > 0.0) {
                    q[i] = mass / nonzero as f64;
                }
            }
        }
        let q_total: f64 = q.iter().sum();
        let divergence: f64 = p
            .iter()
            .zip(&q)
            .filter(|(&pi, _)| pi > 0.0)
            .map(|(&pi, &qi)| {
                let (pi, qi) = (pi / total, (qi / q_total.max(f64::MIN_POSITIVE)).max(1e-12));
                pi * (pi / qi).ln()
            })
            .sum();
        if divergence < best.0 {
            best = (divergence, end - 1);
        }
    }
    best.1
}

/// Per-tensor asymmetric int8 parameters covering `[lo, hi]` (widened to include 0, so zero is
/// exact): `(scale, zero point)`.
pub fn int8_parameters(lo: f32, hi: f32) -> (f32, i64) {
    let (lo, hi) = (lo.min(0.0), hi.max(0.0));
    let scale = (hi - lo) / 255.0;
    if !(scale.is_normal() && scale > 0.0) {
        return (1.0, 0);
    }
    let zero = (-128.0 - lo / scale).round().clamp(-128.0, 127.0) as i64;
    (scale, zero)
}

/// Per-channel symmetric int8 weights: for each channel along `axis` of `shape`, the scale
/// `max |w| / 127` (1 for an all-zero channel) and the integers `round(w / scale)`.
pub fn symmetric_weights(values: &[f32], shape: &[usize], axis: usize) -> (Vec<f32>, Vec<i64>) {
    let channels = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product::<usize>().max(1);
    let channel = |i: usize| (i / inner) % channels;
    let mut top = vec![0.0f32; channels];
    for (i, v) in values.iter().enumerate() {
        let c = channel(i);
        top[c] = top[c].max(v.abs());
    }
    let scales: Vec<f32> = top
        .iter()
        .map(|&m| {
            if m > 0.0 && m.is_finite() {
                m / 127.0
            } else {
                1.0
            }
        })
        .collect();
    let ints = values
        .iter()
        .enumerate()
        .map(|(i, v)| (v / scales[channel(i)]).round().clamp(-127.0, 127.0) as i64)
        .collect();
    (scales, ints)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_cover_the_range_and_keep_zero_exact() {
        let (s, z) = int8_parameters(-1.0, 3.0);
        assert!((s - 4.0 / 255.0).abs() < 1e-7);
        assert_eq!(z, -128 + 64);
        let (s, z) = int8_parameters(0.0, 6.0);
        assert_eq!(z, -128);
        assert!(((127 - z) as f32 * s - 6.0).abs() < 1e-5);
        assert_eq!(int8_parameters(0.0, 0.0), (1.0, 0));
        assert_eq!(int8_parameters(2.0, 5.0).1, -128, "0 is always in range");
    }

    #[test]
    fn symmetric_weights_per_channel() {
        let (scales, ints) = symmetric_weights(&[1.0, -0.5, 0.0, 0.0, 2.0, 4.0], &[3, 2], 0);
        assert_eq!(scales, vec![1.0 / 127.0, 1.0, 4.0 / 127.0]);
        assert_eq!(ints, vec![127, -64, 0, 0, 64, 127]);
        let (scales, _) = symmetric_weights(&[1.0, 2.0, -3.0, 4.0], &[2, 2], 1);
        assert_eq!(scales, vec![3.0 / 127.0, 4.0 / 127.0]);
    }

    fn observed(values: &[f32]) -> Observed {
        let mut o = Observed::default();
        o.observe_range(values.iter().copied());
        o.observe_histogram(values.iter().copied());
        o
    }

    #[test]
    fn percentile_and_entropy_clip_outliers_minmax_does_not() {
        // 10,000 values in [-1, 1] and one outlier at 100.
        let mut values: Vec<f32> = (0..10_000).map(|i| (i as f32 / 5000.0) - 1.0).collect();
        values.push(100.0);
        let o = observed(&values);
        assert_eq!(o.range(Method::MinMax), (-1.0, 100.0));
        let (lo, hi) = o.range(Method::Percentile(99.9));
        assert!(
            (-1.0..-0.9).contains(&lo) && (0.9..1.2).contains(&hi),
            "{lo} {hi}"
        );
        let (lo, hi) = o.range(Method::Entropy);
        // Entropy clips at 128 bins at the least: 1/16 of the largest value.
        assert!(hi < 10.0 && lo >= -1.0, "{lo} {hi}");
    }

    #[test]
    fn degenerate_tensors() {
        assert_eq!(observed(&[]).range(Method::Entropy), (0.0, 0.0));
        assert_eq!(
            observed(&[0.0; 4]).range(Method::Percentile(99.0)),
            (0.0, 0.0)
        );
        assert_eq!(observed(&[f32::NAN, 2.0]).range(Method::MinMax), (2.0, 2.0));
        assert_eq!(
            Method::parse("percentile=99.9"),
            Some(Method::Percentile(99.9))
        );
        assert_eq!(Method::parse("percentile=120"), None);
        assert_eq!(Method::parse("kl"), None);
    }
}
