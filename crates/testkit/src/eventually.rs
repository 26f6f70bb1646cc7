//! The one polling loop of the tests and the harness: [`eventually`] asks a probe again and
//! again, up to a deadline, until it reports what was waited for.
//!
//! A test waits for observed state (a condition, a metric, a process answering), never for a
//! fixed time, and never without a bound. When the bound passes, the error names what was
//! waited for and what the probe saw last, so a failure reads as a diagnosis.

use std::{fmt::Display, future::Future, time::Duration};

use anyhow::{Result, bail};
use tokio::time::Instant;

/// How long [`eventually`] sleeps between two probes.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// One probe's answer, in the terms [`eventually`] acts on.
#[derive(Debug)]
pub enum Step<T> {
    /// What was waited for: the wait ends with this value.
    Done(T),
    /// Not yet; what the probe saw instead, for the error if the deadline passes.
    Pending(String),
    /// It will never come (a process exited, say): the wait ends with this error at once.
    Fail(anyhow::Error),
}

/// What a probe may return: `bool` (`true` ends the wait), `Option<T>` (`Some` ends it),
/// `Result<T, E>` (`Ok` ends it; the error is what was seen) or a [`Step`].
pub trait IntoStep {
    /// What the wait returns when it ends.
    type Value;

    /// This answer as a [`Step`].
    fn into_step(self) -> Step<Self::Value>;
}

impl IntoStep for bool {
    type Value = ();

    fn into_step(self) -> Step<()> {
        if self {
            Step::Done(())
        } else {
            Step::Pending("false".to_owned())
        }
    }
}

impl<T> IntoStep for Option<T> {
    type Value = T;

    fn into_step(self) -> Step<T> {
        self.map_or_else(|| Step::Pending("nothing".to_owned()), Step::Done)
    }
}

impl<T, E: Display> IntoStep for Result<T, E> {
    type Value = T;

    fn into_step(self) -> Step<T> {
        self.map_or_else(|seen| Step::Pending(format!("{seen:#}")), Step::Done)
    }
}

impl<T> IntoStep for Step<T> {
    type Value = T;

    fn into_step(self) -> Self {
        self
    }
}

/// `Ok(now)` if `wanted` holds of it, else `Err` with `now` as the probe saw it: the usual
/// shape of a probe that reads a value and checks it.
///
/// # Errors
/// `wanted(&now)` false: the error is `now`'s `Debug` text.
pub fn matching<S: std::fmt::Debug>(now: S, wanted: impl FnOnce(&S) -> bool) -> Result<S, String> {
    if wanted(&now) {
        Ok(now)
    } else {
        Err(format!("{now:?}"))
    }
}

/// Runs `probe` every [`POLL_INTERVAL`] until it reports what was waited for, and returns
/// that; a probe still running at the deadline is cut off.
///
/// # Errors
/// The probe not done within `limit` (the error says `what` and what the probe saw last), or
/// the probe failing with [`Step::Fail`].
pub async fn eventually<F, Fut>(
    what: &str,
    limit: Duration,
    mut probe: F,
) -> Result<<Fut::Output as IntoStep>::Value>
where
    F: FnMut() -> Fut,
    Fut: Future,
    Fut::Output: IntoStep,
{
    let deadline = Instant::now() + limit;
    let mut seen = "nothing yet".to_owned();
    loop {
        match tokio::time::timeout_at(deadline, probe()).await {
            Ok(answer) => match answer.into_step() {
                Step::Done(value) => return Ok(value),
                Step::Fail(err) => return Err(err.context(format!("waiting until {what}"))),
                Step::Pending(now) => seen = now,
            },
            Err(_) => seen = format!("a probe still running at the deadline (before: {seen})"),
        }
        if Instant::now() >= deadline {
            bail!("{what}: not within {limit:?}; last seen: {seen}");
        }
        tokio::time::sleep(POLL_INTERVAL.min(deadline - Instant::now())).await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[tokio::test]
    async fn returns_what_the_probe_found_once_it_holds() {
        let calls = AtomicU32::new(0);
        let found = eventually("the third call", Duration::from_secs(5), || async {
            let n = calls.fetch_add(1, Ordering::Relaxed) + 1;
            (n >= 3).then_some(n)
        })
        .await
        .unwrap();
        assert_eq!(found, 3);
    }

    #[tokio::test]
    async fn a_condition_that_never_holds_fails_at_the_deadline_naming_what_it_saw() {
        let started = Instant::now();
        let err = eventually("the answer is 42", Duration::from_millis(300), || async {
            matching(41, |n| *n == 42)
        })
        .await
        .unwrap_err();
        let elapsed = started.elapsed();
        assert!(
            elapsed >= Duration::from_millis(300) && elapsed < Duration::from_secs(2),
            "{elapsed:?}"
        );
        assert_eq!(
            err.to_string(),
            "the answer is 42: not within 300ms; last seen: 41"
        );
    }

    #[tokio::test]
    async fn a_probe_that_hangs_is_cut_off_at_the_deadline() {
        let started = Instant::now();
        let err = eventually("an answer", Duration::from_millis(200), || {
            std::future::pending::<bool>()
        })
        .await
        .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(
            err.to_string()
                .contains("a probe still running at the deadline"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_failing_probe_ends_the_wait_at_once() {
        let started = Instant::now();
        let err = eventually("a process serves", Duration::from_secs(30), || async {
            Step::<()>::Fail(anyhow::anyhow!("it exited"))
        })
        .await
        .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!(
            format!("{err:#}"),
            "waiting until a process serves: it exited"
        );
    }

    #[tokio::test]
    async fn an_error_is_what_the_probe_saw() {
        let err = eventually("ok", Duration::from_millis(150), || async {
            Err::<(), _>(anyhow::anyhow!("connection refused"))
        })
        .await
        .unwrap_err();
        assert!(
            err.to_string().ends_with("last seen: connection refused"),
            "{err}"
        );
    }
}
