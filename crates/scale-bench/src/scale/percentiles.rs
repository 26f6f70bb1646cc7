//! p50 / p99 / max of durations (nearest rank).

use std::time::Duration;

/// p50, p99 and max of some durations; `None` where there is no sample of that rank.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Percentiles {
    /// Median.
    pub p50: Option<Duration>,
    /// 99th percentile.
    pub p99: Option<Duration>,
    /// Largest.
    pub max: Option<Duration>,
}

impl Percentiles {
    /// The percentiles of `samples`.
    pub fn of(samples: impl IntoIterator<Item = Duration>) -> Self {
        let mut samples: Vec<Duration> = samples.into_iter().collect();
        samples.sort();
        let pick = |q: f64| {
            let rank = rank(q, samples.len())?;
            samples.get(rank - 1).copied()
        };
        Self {
            p50: pick(0.50),
            p99: pick(0.99),
            max: samples.last().copied(),
        }
    }

    /// The percentiles of `n` events whose running count is sampled as `(time, count)`:
    /// the rank-k time is the first sample whose count reached k. Resolution: the sampling
    /// period.
    pub fn from_curve(curve: &[(Duration, f64)], n: usize) -> Self {
        let reached = |k: usize| {
            curve
                .iter()
                .find(|(_, count)| *count >= k as f64)
                .map(|(at, _)| *at)
        };
        Self {
            p50: rank(0.50, n).and_then(reached),
            p99: rank(0.99, n).and_then(reached),
            max: (n > 0).then_some(n).and_then(reached),
        }
    }
}

/// The nearest rank (1-based) of quantile `q` among `n` samples.
fn rank(q: f64, n: usize) -> Option<usize> {
    (n > 0).then(|| ((n as f64 * q).ceil() as usize).clamp(1, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn nearest_rank() {
        let p = Percentiles::of((1..=100).map(|i| MS * i));
        assert_eq!(p.p50, Some(MS * 50));
        assert_eq!(p.p99, Some(MS * 99));
        assert_eq!(p.max, Some(MS * 100));
        assert_eq!(Percentiles::of([]).p50, None);
    }

    #[test]
    fn curve_ranks() {
        let curve = [
            (MS * 100, 0.0),
            (MS * 200, 5.0),
            (MS * 300, 9.0),
            (MS * 400, 10.0),
        ];
        let p = Percentiles::from_curve(&curve, 10);
        assert_eq!(p.p50, Some(MS * 200));
        assert_eq!(p.p99, Some(MS * 400));
        assert_eq!(p.max, Some(MS * 400));
        let short = Percentiles::from_curve(&curve[..3], 10);
        assert_eq!(short.max, None);
    }
}
