//! Channel-blocked tensors: `[channel / lanes][pixel][channel % lanes]`, `lanes` those of the
//! CPU's vectors, which the channel-lane kernels read and write a vector at a time. A program
//! decides which tensors are blocked (`crate::program::layout`); a step learns its own from its
//! context (`base::context::StepContext`).

/// A step's layouts: whether its first input and its first output are channel-blocked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Blocking {
    /// The first input is channel-blocked.
    pub input: bool,
    /// The first output is channel-blocked.
    pub output: bool,
}

/// `planar` (`[channel][pixel]`, `channels` of `pixels`) as `[channel / lanes][pixel][channel %
/// lanes]` into `blocked` (a whole number of blocks of channels).
pub(crate) fn block(
    planar: &[f32],
    blocked: &mut [f32],
    (channels, pixels): (usize, usize),
    lanes: usize,
) {
    for c in 0..channels {
        let (base, lane) = (c / lanes * pixels * lanes, c % lanes);
        let Some(plane) = planar.get(c * pixels..(c + 1) * pixels) else {
            return;
        };
        for (p, &v) in plane.iter().enumerate() {
            if let Some(slot) = blocked.get_mut(base + p * lanes + lane) {
                *slot = v;
            }
        }
    }
}

/// [`block`]'s inverse: `blocked` back to `[channel][pixel]` in `planar`.
pub(crate) fn unblock(
    blocked: &[f32],
    planar: &mut [f32],
    (channels, pixels): (usize, usize),
    lanes: usize,
) {
    for c in 0..channels {
        let (base, lane) = (c / lanes * pixels * lanes, c % lanes);
        let Some(plane) = planar.get_mut(c * pixels..(c + 1) * pixels) else {
            return;
        };
        for (p, v) in plane.iter_mut().enumerate() {
            if let Some(&value) = blocked.get(base + p * lanes + lane) {
                *v = value;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    /// Blocking and unblocking are inverses, lanes as given.
    #[test]
    fn blocking_round_trips() {
        for lanes in [8, 16] {
            let (channels, pixels) = (2 * lanes, 7);
            let planar: Vec<f32> = (0..channels * pixels).map(|i| i as f32).collect();
            let mut blocked = std::vec![0.0; planar.len()];
            block(&planar, &mut blocked, (channels, pixels), lanes);
            // Channel c of pixel p.
            assert_eq!(
                blocked[lanes * (pixels + 3) + 2],
                planar[(lanes + 2) * pixels + 3]
            );
            let mut back = std::vec![0.0; planar.len()];
            unblock(&blocked, &mut back, (channels, pixels), lanes);
            assert_eq!(back, planar);
        }
    }
}
