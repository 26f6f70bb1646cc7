//! What the flags make: durations, the limits on what a member may send, and the endpoint and
//! exec policies.

use std::{os::unix::fs::MetadataExt as _, time::Duration};

use anyhow::Context as _;
use member_client::{
    exec::{ExecPluginsFile, ExecPolicy},
    validation::EndpointPolicy,
};

use super::{Args, EndpointMode};

impl Args {
    /// The probe period as a duration.
    pub fn probe_period(&self) -> Duration {
        Duration::from_secs(self.probe_period)
    }

    /// This replica's identity for leader election and Events.
    pub fn identity(&self) -> String {
        self.leader_election_identity.clone().unwrap_or_else(|| {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
            format!("{}-{}", host.trim(), std::process::id())
        })
    }

    /// The probe timeout as a duration.
    pub fn probe_timeout(&self) -> Duration {
        Duration::from_secs(self.probe_timeout)
    }

    /// The request timeout as a duration.
    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs(self.request_timeout)
    }

    /// What every member client may do: `--request-timeout`, and what a member may send back,
    /// from `--member-response-limit-mib`, `--member-watch-line-limit-mib` and
    /// `--member-max-objects`.
    pub fn member_client_limits(&self) -> member_client::ClientLimits {
        const MIB: u64 = 1024 * 1024;
        let pages = self
            .member_max_objects
            .div_ceil(u64::from(crate::mirror::LIST_PAGE_SIZE))
            .saturating_mul(2)
            .saturating_add(10);
        member_client::ClientLimits {
            request_timeout: self.request_timeout(),
            response: member_client::response_limit::ResponseLimits {
                response_bytes: self.member_response_limit_mib.saturating_mul(MIB),
                watch_line_bytes: self.member_watch_line_limit_mib.saturating_mul(MIB),
                list_pages: u32::try_from(pages).unwrap_or(u32::MAX),
            },
            ..member_client::ClientLimits::default()
        }
    }

    /// `--member-max-objects` as a count.
    pub fn member_max_objects(&self) -> usize {
        usize::try_from(self.member_max_objects).unwrap_or(usize::MAX)
    }

    /// Where member tokens may go, from `--allow-endpoint`, `--endpoint-policy`,
    /// `--allow-plain-http` and `--allow-insecure-members`.
    pub fn endpoint_policy(&self) -> EndpointPolicy {
        self.allow_endpoint
            .iter()
            .fold(EndpointPolicy::default(), |policy, range| {
                policy.allow(*range)
            })
            .strict(self.endpoint_mode == EndpointMode::Strict)
            .allow_plain_http(self.allow_plain_http)
            .allow_insecure_tls(self.allow_insecure_members)
    }

    /// The exec plugins members may run, how, as whom and for how long: `--exec-plugins`'
    /// declarations, then `--allow-exec`'s paths. Warns about paths that do not exist and
    /// about plugins that would run as the collector's own user.
    ///
    /// # Errors
    /// An `--exec-plugins` file that cannot be read or used, or `--exec-run-as` naming the
    /// collector's own user.
    pub fn exec_policy(&self) -> anyhow::Result<ExecPolicy> {
        let declared = match &self.exec_plugins {
            Some(path) => ExecPluginsFile::read(path)
                .with_context(|| format!("--exec-plugins {}", path.display()))?,
            None => ExecPluginsFile::default(),
        };
        let policy = ExecPolicy::declaring(declared.declarations().cloned())
            .also_allowing(self.allow_exec.iter().cloned())
            .with_timeout(Duration::from_secs(self.exec_timeout))
            .with_max_concurrent(usize::try_from(self.exec_max_concurrent).unwrap_or(16))
            .with_run_as(self.exec_run_as);
        // The owner of /proc/self is the process's effective user.
        let own = std::fs::metadata("/proc/self").map(|meta| meta.uid()).ok();
        if let Some(run_as) = self.exec_run_as {
            anyhow::ensure!(
                Some(run_as.uid) != own,
                "--exec-run-as {run_as}: that is the collector's own user; plugins must run as \
                 another one to be kept from its files"
            );
        }
        for path in policy.unresolved() {
            tracing::warn!(
                path = %path.display(),
                "an exec plugin path does not exist and will never run"
            );
        }
        if policy.allows_any() && self.exec_run_as.is_none() {
            tracing::warn!(
                uid = ?own,
                "exec plugins run as the collector's own user and can read whatever it can, \
                 its ServiceAccount token included; run them as another user with \
                 --exec-run-as"
            );
        }
        Ok(policy)
    }

    /// The self-credential grace period as a duration.
    pub fn self_rejected_grace(&self) -> Duration {
        Duration::from_secs(self.self_rejected_grace)
    }
}
