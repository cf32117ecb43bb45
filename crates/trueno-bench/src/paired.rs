//! Two ops timed in the same rounds, in turn, so that a shared VM's slow minutes fall on
//! both: criterion times each benchmark in a window of its own, and on the 2-vCPU
//! development VMs whole windows moved by 10-25% between one benchmark and the next, so
//! the ratio of two criterion means at parity took the sign of the windows' luck
//! (BENCHMARKS.md, sessions 76-78).

use std::time::Instant;

/// What `paired` measured: each op's median time a call and the median of the rounds'
/// ratios (second op's time over the first's: above 1, the first is faster).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Paired {
    /// Median seconds a call of the first op.
    pub first_s: f64,
    /// Median seconds a call of the second op.
    pub second_s: f64,
    /// Median over the rounds of (second op's time / first op's time).
    pub ratio: f64,
    /// Rounds timed.
    pub rounds: usize,
    /// Calls of each op in one timing (enough to fill `min_secs`).
    pub calls: usize,
}

/// Times `first` and `second` over `rounds` rounds (at least one), each round one timing
/// of each, the order swapped every round so neither always runs after the other, each
/// timing `calls` calls where one call takes under `min_secs`. One untimed call of each
/// first, then untimed calls of `first` for a quarter of `min_secs` (at least one), which
/// set `calls`.
///
/// ```
/// use trueno_bench::paired::paired;
/// use std::hint::black_box;
/// let v: Vec<f32> = (0..1 << 16).map(|i| i as f32).collect();
/// let p = paired(
///     5,
///     1e-4,
///     || {
///         black_box(v.iter().sum::<f32>());
///     },
///     || {
///         black_box(v.iter().map(|x| x.sqrt()).sum::<f32>());
///     },
/// );
/// assert_eq!(p.rounds, 5);
/// assert!(p.first_s > 0.0 && p.second_s > 0.0 && p.ratio > 0.0);
/// ```
pub fn paired(
    rounds: usize,
    min_secs: f64,
    mut first: impl FnMut(),
    mut second: impl FnMut(),
) -> Paired {
    let rounds = rounds.max(1);
    second();
    first();
    // A call's time from as many calls as fill a quarter of `min_secs` (at least one),
    // after the untimed ones: a first call's one-time costs would batch too few.
    let (t0, mut probe) = (Instant::now(), 0usize);
    while probe == 0 || t0.elapsed().as_secs_f64() < min_secs / 4.0 {
        first();
        probe += 1;
    }
    let one = (t0.elapsed().as_secs_f64() / probe as f64).max(1e-9);
    let calls = ((min_secs / one).ceil() as usize).max(1);
    let time = |f: &mut dyn FnMut()| {
        let t0 = Instant::now();
        for _ in 0..calls {
            f();
        }
        t0.elapsed().as_secs_f64() / calls as f64
    };
    let (mut a, mut b, mut r) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let (ta, tb) = match round % 2 {
            0 => {
                let ta = time(&mut first);
                (ta, time(&mut second))
            }
            _ => {
                let tb = time(&mut second);
                (time(&mut first), tb)
            }
        };
        a.push(ta);
        b.push(tb);
        r.push(tb / ta.max(1e-12));
    }
    Paired {
        first_s: median(a),
        second_s: median(b),
        ratio: median(r),
        rounds,
        calls,
    }
}

/// The middle value (the upper of the two middle ones for an even count); NaN if empty.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slower_op_reads_slower_and_the_order_turns_every_round() {
        // A log of which op ran when, and ops whose cost differs fourfold.
        let log = std::cell::RefCell::new(Vec::new());
        let spin = |n: u64| {
            let mut x = 1u64;
            for i in 0..n {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
            }
            x
        };
        let p = paired(
            4,
            0.0,
            || {
                log.borrow_mut().push('a');
                spin(200_000);
            },
            || {
                log.borrow_mut().push('b');
                spin(800_000);
            },
        );
        assert_eq!(p.rounds, 4);
        assert_eq!(p.calls, 1);
        // Untimed: b, a, and one more a (the calibration); then rounds ab, ba, ab, ba.
        let order: String = log.borrow().iter().collect();
        assert_eq!(order, "baaabbaabba");
        assert!(p.ratio > 2.0, "four times the work read {}", p.ratio);
        assert!(p.second_s > p.first_s);
    }

    #[test]
    fn short_ops_are_timed_in_batches_that_fill_the_minimum() {
        let mut n = 0usize;
        let p = paired(3, 0.01, || n += 1, || {});
        assert!(p.calls > 1000, "a no-op call batched {} times", p.calls);
        // One untimed call and the calibration's (a quarter of the minimum, so about a
        // quarter of a timing's calls), then `calls` a timing, three rounds.
        let calibration = n - 1 - 3 * p.calls;
        assert!(
            calibration >= 1 && calibration < p.calls,
            "{calibration} of {}",
            p.calls
        );
    }

    #[test]
    fn median_takes_the_middle_and_nan_for_none() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 3.0);
        assert!(median(vec![]).is_nan());
    }
}
