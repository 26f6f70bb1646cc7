//! [`ReviewBudget`]: how many access reviews callers may make the collector ask the control
//! plane for, so that random tokens cannot turn into an unbounded stream of TokenReviews.

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use tokio::{
    sync::{OwnedSemaphorePermit, Semaphore},
    time::Instant,
};

/// A token bucket (`rate` reviews a second, up to `burst` at once) and a cap on reviews in
/// flight. A review over either is refused at once, never queued: the caller gets 429 and
/// the control plane sees nothing.
///
/// # Concurrent calls
/// Cloning shares the budget. [`try_start`](Self::try_start) holds a lock only to update two
/// numbers.
#[derive(Clone, Debug)]
pub(crate) struct ReviewBudget {
    bucket: Arc<Mutex<Bucket>>,
    rate: f64,
    burst: f64,
    in_flight: Arc<Semaphore>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    filled_at: Instant,
}

/// A review under way; its in-flight slot is given back when dropped.
#[derive(Debug)]
pub(crate) struct ReviewSlot {
    _permit: OwnedSemaphorePermit,
}

/// Why a review was not started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OverBudget {
    /// More than `rate` a second, beyond `burst`.
    Rate,
    /// `max_in_flight` reviews are already waiting for the control plane.
    InFlight,
}

impl ReviewBudget {
    /// A full bucket of `burst` (at least 1) refilled at `rate` a second, and at most
    /// `max_in_flight` (at least 1) reviews at once.
    pub(crate) fn new(rate: f64, burst: u32, max_in_flight: usize) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            bucket: Arc::new(Mutex::new(Bucket {
                tokens: burst,
                filled_at: Instant::now(),
            })),
            rate: rate.max(0.0),
            burst,
            in_flight: Arc::new(Semaphore::new(max_in_flight.max(1))),
        }
    }

    /// A slot for one review now, or why not.
    pub(crate) fn try_start(&self) -> Result<ReviewSlot, OverBudget> {
        // The in-flight slot first: a refusal for lack of one must not spend a token.
        let permit = Arc::clone(&self.in_flight)
            .try_acquire_owned()
            .map_err(|_| OverBudget::InFlight)?;
        let mut bucket = self.bucket.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(bucket.filled_at);
        bucket.tokens = (bucket.tokens + elapsed.as_secs_f64() * self.rate).min(self.burst);
        bucket.filled_at = now;
        if bucket.tokens < 1.0 {
            return Err(OverBudget::Rate);
        }
        bucket.tokens -= 1.0;
        Ok(ReviewSlot { _permit: permit })
    }

    /// How long until the bucket holds a token again (for `Retry-After`), at least 1 s.
    pub(crate) fn retry_after(&self) -> Duration {
        if self.rate <= 0.0 {
            return Duration::from_secs(60);
        }
        Duration::from_secs_f64((1.0 / self.rate).clamp(1.0, 60.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_burst_then_the_rate_and_never_a_queue() {
        let budget = ReviewBudget::new(2.0, 3, 100);
        let started: Vec<_> = (0..3).map(|_| budget.try_start().unwrap()).collect();
        assert_eq!(budget.try_start().unwrap_err(), OverBudget::Rate);
        drop(started);
        tokio::time::advance(Duration::from_millis(500)).await;
        assert!(budget.try_start().is_ok(), "one token after half a second");
        assert_eq!(budget.try_start().unwrap_err(), OverBudget::Rate);
        tokio::time::advance(Duration::from_secs(60)).await;
        let refilled = (0..10).filter(|_| budget.try_start().is_ok()).count();
        assert_eq!(refilled, 3, "never more than the burst");
    }

    #[tokio::test(start_paused = true)]
    async fn reviews_in_flight_are_capped_and_given_back() {
        let budget = ReviewBudget::new(1000.0, 1000, 2);
        let a = budget.try_start().unwrap();
        let _b = budget.try_start().unwrap();
        assert_eq!(budget.try_start().unwrap_err(), OverBudget::InFlight);
        drop(a);
        assert!(budget.try_start().is_ok());
    }
}
