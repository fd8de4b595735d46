//! Optional threads for the big kernels (feature `threads`, `std` only).
//!
//! A [`CpuDevice`](crate::CpuDevice) built `with_threads(n)` runs each plan on the calling thread
//! with `n - 1` helper threads standing by, and hands the team to every step in its context
//! (`base::context::StepContext`; `base::parts` splits the work). A kernel whose work is big enough (a matrix product,
//! a convolution's GEMM) splits its *output* into disjoint parts; the calling thread and the
//! helpers claim parts from a shared counter until none is left. Every output element is
//! computed by the same instructions in the same order as on one thread — the parts only decide
//! which thread computes it — so results are bit-identical whatever the thread count.
//!
//! The helpers spin while a run is in progress and sleep between runs, as onnxruntime's
//! intra-op pool does: a split then costs a few cache-line transfers instead of waking a thread
//! (tens of microseconds on a virtual machine). A helper that is late claims nothing and delays
//! nothing, since the calling thread takes every part no one else has. Without the feature, or
//! with one thread, nothing here runs and no thread is started.
#![allow(unsafe_code)]

use crate::base::parts::Fork;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::vec::Vec;

/// The most threads a session may ask for (more are clamped: beyond this, parts get too small
/// for any model Ferrite runs to gain).
pub const MAX_THREADS: usize = 64;

/// One parallel region: `count` parts, claimed through `next`, counted through `done`.
struct Job {
    /// Runs part `i`. The pointee outlives the job: the region waits for every user.
    work: *const (dyn Fn(usize) + Sync),
    count: usize,
    next: AtomicUsize,
    done: AtomicUsize,
    /// A part panicked (a bug: kernels do not panic on data); the region panics after it.
    panicked: AtomicBool,
}

impl Job {
    /// Claims and runs parts until none is left.
    fn claim_parts(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.count {
                return;
            }
            // SAFETY: `work` points to the region's closure, which lives until the region has
            // seen every part done and every helper leave (`Team::region`).
            let work = unsafe { &*self.work };
            if panic::catch_unwind(AssertUnwindSafe(|| work(i))).is_err() {
                self.panicked.store(true, Ordering::Relaxed);
            }
            self.done.fetch_add(1, Ordering::Release);
        }
    }
}

/// A calling thread's helpers: `threads - 1` spinning threads and the slot they watch.
struct Team {
    threads: usize,
    /// The region in progress, or null.
    job: AtomicPtr<Job>,
    /// Bumped for every region, so a spinning helper notices a new one.
    epoch: AtomicU64,
    /// Helpers between reading `job` and being done with it.
    busy: AtomicUsize,
    /// A run is in progress: helpers spin (rather than sleep).
    running: AtomicBool,
    /// `running`, for the helpers' sleep between runs.
    awake: Mutex<bool>,
    wake: Condvar,
    /// Held by the run in progress: a second session that wants the same team at the same time
    /// runs on its own thread instead.
    owner: Mutex<()>,
}

impl Team {
    /// A team with `threads - 1` helpers, or `None` if a thread cannot start.
    fn start(threads: usize) -> Option<Arc<Team>> {
        let team = Arc::new(Team {
            threads,
            job: AtomicPtr::new(core::ptr::null_mut()),
            epoch: AtomicU64::new(0),
            busy: AtomicUsize::new(0),
            running: AtomicBool::new(false),
            awake: Mutex::new(false),
            wake: Condvar::new(),
            owner: Mutex::new(()),
        });
        for i in 1..threads {
            let helper = team.clone();
            std::thread::Builder::new()
                .name(format!("ferrite-cpu-{i}"))
                .spawn(move || helper.help())
                .ok()?;
        }
        Some(team)
    }

    /// A helper's life: sleep until a run starts, spin on the slot while it lasts.
    fn help(&self) {
        let mut seen = self.epoch.load(Ordering::Acquire);
        loop {
            {
                let mut awake = self.awake.lock().unwrap_or_else(|p| p.into_inner());
                while !*awake {
                    awake = self.wake.wait(awake).unwrap_or_else(|p| p.into_inner());
                }
            }
            while self.running.load(Ordering::Acquire) {
                let epoch = self.epoch.load(Ordering::Acquire);
                if epoch == seen {
                    core::hint::spin_loop();
                    continue;
                }
                seen = epoch;
                self.busy.fetch_add(1, Ordering::SeqCst);
                let job = self.job.load(Ordering::SeqCst);
                if !job.is_null() {
                    // SAFETY: the region that published `job` clears the slot, then waits for
                    // `busy` to fall to zero before the job leaves its stack; we counted
                    // ourselves in `busy` before reading the slot.
                    unsafe { &*job }.claim_parts();
                }
                self.busy.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }

    /// Wakes the helpers for a run, or puts them back to sleep after it.
    fn set_running(&self, running: bool) {
        let mut awake = self.awake.lock().unwrap_or_else(|p| p.into_inner());
        *awake = running;
        self.running.store(running, Ordering::Release);
        if running {
            self.wake.notify_all();
        }
    }

    /// Runs `work(0..count)` on this thread and whichever helpers are spinning.
    fn region(&self, count: usize, work: &(dyn Fn(usize) + Sync)) {
        // SAFETY (of the lifetime erased here): the pointer is only read through `job`, which
        // this function removes from the slot and waits out before returning.
        let work: *const (dyn Fn(usize) + Sync + 'static) = unsafe { core::mem::transmute(work) };
        let job = Job {
            work,
            count,
            next: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
        };
        self.job
            .store(&job as *const Job as *mut Job, Ordering::SeqCst);
        self.epoch.fetch_add(1, Ordering::Release);
        job.claim_parts();
        while job.done.load(Ordering::Acquire) < count {
            core::hint::spin_loop();
        }
        self.job.store(core::ptr::null_mut(), Ordering::SeqCst);
        while self.busy.load(Ordering::SeqCst) != 0 {
            core::hint::spin_loop();
        }
        if job.panicked.load(Ordering::Relaxed) {
            panic!("a kernel part panicked on a helper thread");
        }
    }
}

/// One team per thread count a session asked for, started on first use and kept for the
/// process (its helpers sleep between runs).
fn team(threads: usize) -> Option<Arc<Team>> {
    static TEAMS: OnceLock<Mutex<Vec<Arc<Team>>>> = OnceLock::new();
    let teams = TEAMS.get_or_init(|| Mutex::new(Vec::new()));
    let mut teams = teams.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(team) = teams.iter().find(|t| t.threads == threads) {
        return Some(team.clone());
    }
    let team = Team::start(threads)?;
    teams.push(team.clone());
    Some(team)
}

/// Runs `body` (a plan, or one step) on this thread with `threads` (clamped to
/// `1..=MAX_THREADS`) for the kernels it calls: `body` gets the team to put in its steps'
/// contexts (`base::context::StepContext`). The helpers spin for the length of `body`. Without
/// a team (one thread, a thread could not start, or another session is using this one), `body`
/// gets none and runs on this thread alone, with the same results.
pub(crate) fn run<R>(threads: usize, body: impl FnOnce(Option<&dyn Fork>) -> R) -> R {
    let threads = threads.clamp(1, MAX_THREADS);
    let team = if threads > 1 { team(threads) } else { None };
    let Some(team) = team else {
        return body(None);
    };
    let _owner = match team.owner.try_lock() {
        Ok(owner) => owner,
        // A run that panicked left the lock poisoned; the team itself is sound.
        Err(std::sync::TryLockError::Poisoned(owner)) => owner.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return body(None),
    };
    team.set_running(true);
    // Put the helpers back to sleep however `body` ends.
    struct Sleep<'a>(&'a Team);
    impl Drop for Sleep<'_> {
        fn drop(&mut self) {
            self.0.set_running(false);
        }
    }
    let _sleep = Sleep(&team);
    body(Some(&*team))
}

impl Fork for Team {
    fn threads(&self) -> usize {
        self.threads
    }

    fn region(&self, count: usize, work: &(dyn Fn(usize) + Sync)) {
        Team::region(self, count, work)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::parts::for_each;

    // Each test uses thread counts of its own (a team serves one run at a time; another test
    // wanting the same team at the same moment would run on one thread), except where sharing
    // is the point.

    #[test]
    fn a_run_gets_a_team_of_its_thread_count_and_one_thread_none() {
        run(1, |team| assert!(team.is_none()));
        run(7, |team| {
            assert_eq!(team.map(|t| t.threads()), Some(7));
            // A run inside a run whose team is busy gets its own or none, never the busy one.
            run(8, |inner| assert!(inner.is_none_or(|t| t.threads() == 8)));
        });
    }

    #[test]
    fn every_part_runs_once_across_many_regions() {
        for threads in [5, 6] {
            let seen = Mutex::new(Vec::new());
            run(threads, |team| {
                let team = team.expect("a team");
                for region in 0..200 {
                    for_each(
                        team,
                        (0..7).map(|i| region * 7 + i).collect(),
                        |i: usize| {
                            seen.lock().unwrap().push(i);
                        },
                    )
                }
            });
            let mut seen = seen.into_inner().unwrap();
            seen.sort_unstable();
            assert_eq!(seen, (0..1400).collect::<Vec<_>>());
        }
    }

    #[test]
    fn sessions_on_several_threads_at_once_share_a_team_safely() {
        let total = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    run(2, |team| {
                        for _ in 0..100 {
                            let add = |v: usize| {
                                total.fetch_add(v, Ordering::Relaxed);
                            };
                            match team {
                                Some(team) => for_each(team, std::vec![1usize; 5], add),
                                None => std::vec![1usize; 5].into_iter().for_each(add),
                            }
                        }
                    })
                });
            }
        });
        assert_eq!(total.into_inner(), 3 * 100 * 5);
    }

    #[test]
    fn a_panicking_part_panics_the_region_instead_of_hanging() {
        let result = panic::catch_unwind(|| {
            run(4, |team| {
                for_each(team.expect("a team"), (0..8).collect(), |i: usize| {
                    if i == 5 {
                        panic!("part {i}");
                    }
                })
            })
        });
        assert!(result.is_err());
        // The team still works afterwards.
        let count = AtomicUsize::new(0);
        run(4, |team| {
            for_each(team.expect("a team"), (0..8).collect(), |_: usize| {
                count.fetch_add(1, Ordering::Relaxed);
            })
        });
        assert_eq!(count.into_inner(), 8);
    }
}
