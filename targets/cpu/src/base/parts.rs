//! Work split into parts for threads: the even ranges a kernel splits its output into, and
//! [`for_each`], which hands parts to a program's threads ([`Fork`], a team the program owns
//! and passes down in the step's context). Every output element is computed by the same
//! instructions whatever the split, so results are bit-identical to one thread.

use std::sync::Mutex;
use std::vec::Vec;

/// Threads a program runs a step's kernels on (`crate::program::parallel`'s team): what
/// [`for_each`] hands parts to.
pub(crate) trait Fork: Sync {
    /// Threads, the calling one included.
    fn threads(&self) -> usize;
    /// Runs `work(0..count)` on the calling thread and whichever helpers are free.
    fn region(&self, count: usize, work: &(dyn Fn(usize) + Sync));
}

/// Calls `f` on every part, the parts shared by `team`'s threads.
pub(crate) fn for_each<T: Send>(team: &dyn Fork, parts: Vec<T>, f: impl Fn(T) + Sync) {
    let count = parts.len();
    // Each part is taken out of its own (uncontended) slot by whichever thread claims it.
    let slots: Vec<Mutex<Option<T>>> = parts.into_iter().map(|p| Mutex::new(Some(p))).collect();
    let work = |i: usize| {
        let part = slots
            .get(i)
            .and_then(|slot| slot.lock().unwrap_or_else(|p| p.into_inner()).take());
        if let Some(part) = part {
            f(part);
        }
    };
    team.region(count, &work);
}

/// `total` split into at most `parts` ranges as even as possible, each a multiple of `quantum`
/// long except the last.
pub(crate) fn ranges(total: usize, parts: usize, quantum: usize) -> Vec<core::ops::Range<usize>> {
    let quantum = quantum.max(1);
    let units = total.div_ceil(quantum);
    let parts = parts.clamp(1, units.max(1));
    let mut out = Vec::with_capacity(parts);
    let mut start = 0;
    for p in 0..parts {
        // The first `units % parts` parts take one unit more.
        let take = units / parts + usize::from(p < units % parts);
        let end = (start + take * quantum).min(total);
        if end > start {
            out.push(start..end);
        }
        start = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_the_total_in_quantum_multiples() {
        for total in 0..300 {
            for parts in 1..6 {
                for quantum in [1, 6, 64] {
                    let rs = ranges(total, parts, quantum);
                    assert!(rs.len() <= parts);
                    let mut next = 0;
                    for (i, r) in rs.iter().enumerate() {
                        assert_eq!(r.start, next);
                        assert!(r.end > r.start);
                        if i + 1 < rs.len() {
                            assert_eq!(r.len() % quantum, 0, "{total} {parts} {quantum}");
                        }
                        next = r.end;
                    }
                    assert_eq!(next, total);
                }
            }
        }
    }
}
