//! Resampling along one axis by a tap table (ONNX Resize and Upsample, every mode): the host
//! computed, per output position, which input positions it reads and with which weights.

use crate::CpuError;

/// The sizes of a resampling step: `outer × in_len × inner` in, `outer × out_len × inner` out.
#[derive(Clone, Copy, Debug)]
pub struct Lanes {
    /// Product of the dims before the axis.
    pub outer: usize,
    /// Input length along the axis.
    pub in_len: usize,
    /// Product of the dims after the axis.
    pub inner: usize,
}

/// `y[o, j, i] = Σ_k weights[j, k] · x[o, indices[j, k], i]` (taps per row: `weights.len() /
/// out_len`), or `extrapolation` where `indices[j, 0] < 0`. An index past the input is an
/// error (the tables are model data).
pub fn resample(
    x: &[f32],
    lanes: Lanes,
    indices: &[i32],
    weights: &[f32],
    extrapolation: f32,
    y: &mut [f32],
) -> Result<(), CpuError> {
    let Lanes {
        outer,
        in_len,
        inner,
    } = lanes;
    let out_len = y.len() / (outer * inner).max(1);
    let taps = weights.len() / out_len.max(1);
    for (j, row) in indices.chunks_exact(taps.max(1)).enumerate().take(out_len) {
        if row.first().is_some_and(|&i| i < 0) {
            for o in 0..outer {
                let start = (o * out_len + j) * inner;
                if let Some(dst) = y.get_mut(start..start + inner) {
                    dst.fill(extrapolation);
                }
            }
            continue;
        }
        if let Some(&bad) = row.iter().find(|&&i| i < 0 || i as usize >= in_len) {
            return Err(CpuError::IndexOutOfRange {
                index: i64::from(bad),
                len: in_len,
            });
        }
        let w = weights
            .get(j * taps..(j + 1) * taps)
            .ok_or(CpuError::CorruptPlan)?;
        for o in 0..outer {
            let start = (o * out_len + j) * inner;
            let Some(dst) = y.get_mut(start..start + inner) else {
                return Err(CpuError::CorruptPlan);
            };
            dst.fill(0.0);
            for (&index, &weight) in row.iter().zip(w) {
                let src_start = (o * in_len + index as usize) * inner;
                let Some(src) = x.get(src_start..src_start + inner) else {
                    return Err(CpuError::CorruptPlan);
                };
                for (d, &s) in dst.iter_mut().zip(src) {
                    *d += weight * s;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weighted_taps_along_the_middle_axis() {
        // x: [2, 3, 2]; resample axis 1 to 2 positions.
        let x = [
            1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0,
        ];
        let indices = [0, 1, -1, 0];
        let weights = [0.5, 0.5, 0.0, 0.0];
        let mut y = [0.0; 8];
        let lanes = Lanes {
            outer: 2,
            in_len: 3,
            inner: 2,
        };
        resample(&x, lanes, &indices, &weights, 7.0, &mut y).unwrap();
        assert_eq!(y, [2.0, 3.0, 7.0, 7.0, 20.0, 30.0, 7.0, 7.0]);
        let bad = [0, 3, 0, 0];
        assert_eq!(
            resample(&x, lanes, &bad, &weights, 0.0, &mut y),
            Err(CpuError::IndexOutOfRange { index: 3, len: 3 })
        );
    }
}
