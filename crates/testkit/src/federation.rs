//! Members that trust the control plane's ServiceAccount issuer ([`Federation`]): a member
//! accepts a token the control plane minted, for that member's audience, through structured
//! authentication configuration (a `jwt` authenticator), as a federated member credential
//! is accepted in a real fleet.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, ensure};
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::apiserver::{ApiserverSpec, issuer_url};
use crate::cluster::{Cluster, status_code};
use crate::config::Config;
use crate::environment::{CONTROL_PLANE, Environment};
use crate::eventually::{Step, eventually};
use crate::service_account::{FIELD_MANAGER, MIN_TOKEN_EXPIRY};

/// The namespace of the harness's own ServiceAccount on the control plane,
/// [`ISSUER_PROBE_ACCOUNT`].
pub const ISSUER_PROBE_NAMESPACE: &str = "tether-testkit";
/// The control-plane ServiceAccount whose tokens [`Environment::federated_probe`] sends to a
/// member.
pub const ISSUER_PROBE_ACCOUNT: &str = "issuer-probe";

/// How long [`Environment::set_member_trust`] waits for a member to act on its new
/// configuration. The reload itself takes ~10 s (see there); the rest is slack for a loaded
/// machine.
pub const TRUST_RELOAD_TIMEOUT: Duration = Duration::from_secs(90);

/// The ClusterRoleBinding that lets anyone (members fetch anonymously) read the control
/// plane's OIDC discovery document and key set.
const DISCOVERY_BINDING: &str = "tether-testkit:issuer-discovery";

/// Each member's configuration file, next to its other files.
const AUTHENTICATION_CONFIG: &str = "authentication-config.yaml";

/// What a member's authentication configuration says, as last written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MemberTrust {
    /// Whether it accepts control-plane tokens for its audience.
    pub(crate) trusted: bool,
    /// Counts rewrites that change nothing but make the apiserver build a new authenticator,
    /// which fetches the control plane's keys again ([`Environment::refresh_member_keys`]).
    pub(crate) generation: u32,
}

impl Default for MemberTrust {
    fn default() -> Self {
        Self {
            trusted: true,
            generation: 0,
        }
    }
}

/// How members trust the control plane's ServiceAccount issuer; set with
/// [`Config::members_trust_control_plane`](crate::Config::members_trust_control_plane).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Federation {
    /// A member accepts tokens whose `aud` holds `<audience_prefix><member name>`.
    pub audience_prefix: String,
    /// Prepended to the token's `sub` to make the member's username, so a control-plane
    /// ServiceAccount is never mistaken for one of the member's own.
    pub username_prefix: String,
}

impl Federation {
    /// How members trust the control plane; see the fields.
    pub fn new(audience_prefix: impl Into<String>, username_prefix: impl Into<String>) -> Self {
        Self {
            audience_prefix: audience_prefix.into(),
            username_prefix: username_prefix.into(),
        }
    }

    /// The audience cluster `member` accepts control-plane tokens for.
    pub fn audience(&self, member: &str) -> String {
        format!("{}{member}", self.audience_prefix)
    }

    /// The username a member gives a control-plane token whose subject is `sub`
    /// (`system:serviceaccount:<ns>:<name>` for a ServiceAccount).
    pub fn username(&self, sub: &str) -> String {
        format!("{}{sub}", self.username_prefix)
    }

    /// The `AuthenticationConfiguration` of `member`: one `jwt` authenticator for the
    /// control plane's issuer, its discovery document fetched from `control_plane`.
    ///
    /// Distrust keeps the authenticator and changes only its audience to one no token is
    /// minted for: dropping the authenticator would work as well, but this way a distrusted
    /// member still resolves the issuer, as a real member whose trust is narrowed does.
    fn authentication_config(
        &self,
        control_plane: &Cluster,
        member: &str,
        trust: MemberTrust,
    ) -> Result<String> {
        let audience = match trust.trusted {
            true => self.audience(member),
            false => format!("{}-untrusted", self.audience(member)),
        };
        let config = json!({
            "apiVersion": "apiserver.config.k8s.io/v1",
            "kind": "AuthenticationConfiguration",
            "jwt": [{
                "issuer": {
                    "url": issuer_url(control_plane.name()),
                    "discoveryURL":
                        format!("{}/.well-known/openid-configuration", control_plane.endpoint()),
                    "certificateAuthority": control_plane.ca_pem(),
                    "audiences": [audience],
                },
                // No groups: a control-plane ServiceAccount's own groups mean nothing here,
                // so it gets only `system:authenticated` and whatever is bound to its name.
                "claimMappings": {
                    "username": { "claim": "sub", "prefix": self.username_prefix },
                },
            }],
        });
        let yaml =
            serde_yaml::to_string(&config).context("encoding the authentication configuration")?;
        // The apiserver reloads the file whenever its bytes change, comments included.
        Ok(format!("# testkit generation {}\n{yaml}", trust.generation))
    }
}

/// Refuses flags that would leave members unable to fetch the control plane's keys: they
/// fetch anonymously, so the control plane must accept anonymous requests.
pub(crate) fn check_flags(config: &Config) -> Result<()> {
    let control_plane = config
        .cluster_apiserver_flags
        .iter()
        .filter(|(cluster, _)| cluster == "control-plane")
        .map(|(_, flag)| flag);
    let anonymous_off = config
        .apiserver_flags
        .iter()
        .chain(control_plane)
        .any(|flag| flag.starts_with("--anonymous-auth=false"));
    ensure!(
        config.federation.is_none() || !anonymous_off,
        "members trust the control plane, which then needs --anonymous-auth (they fetch its \
         keys anonymously)"
    );
    Ok(())
}

/// Sets up the control plane of a federated environment, before it starts: its discovery
/// document points members at its key set on loopback.
pub(crate) fn configure_control_plane(spec: &mut ApiserverSpec) {
    let jwks = format!("https://127.0.0.1:{}/openid/v1/jwks", spec.port());
    spec.extra_flags
        .push(format!("--service-account-jwks-uri={jwks}"));
}

/// Sets up member `spec` of a federated environment, before it starts: it trusts
/// `control_plane`'s issuer.
pub(crate) fn configure_member(
    spec: &mut ApiserverSpec,
    federation: &Federation,
    control_plane: &Cluster,
) -> Result<()> {
    write_member_config(spec, federation, control_plane, MemberTrust::default())?;
    let path = spec.path(AUTHENTICATION_CONFIG);
    spec.extra_flags
        .push(format!("--authentication-config={}", path.display()));
    Ok(())
}

/// Writes member `spec`'s configuration file; a running apiserver picks it up by itself.
pub(crate) fn write_member_config(
    spec: &ApiserverSpec,
    federation: &Federation,
    control_plane: &Cluster,
    trust: MemberTrust,
) -> Result<()> {
    let config = federation.authentication_config(control_plane, spec.name(), trust)?;
    write_atomically(&spec.path(AUTHENTICATION_CONFIG), &config)
}

/// Replaces `path` with `contents` in one step: the apiserver reloads the file as soon as it
/// changes, and must never read half of it (it would log a failed reload and keep the old
/// configuration until the file changes again).
fn write_atomically(path: &Path, contents: &str) -> Result<()> {
    let dir = path
        .parent()
        .with_context(|| format!("{} has no directory", path.display()))?;
    let temp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    std::fs::write(temp.path(), contents)
        .with_context(|| format!("writing {}", temp.path().display()))?;
    temp.persist(path)
        .with_context(|| format!("renaming a temporary file to {}", path.display()))?;
    Ok(())
}

/// Makes a ready control plane serve its issuer to members: anonymous read of discovery and
/// key set, and the ServiceAccount [`Environment::federated_probe`] mints tokens for.
pub(crate) async fn prepare_control_plane(control_plane: &Cluster) -> Result<()> {
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": { "name": DISCOVERY_BINDING },
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "system:service-account-issuer-discovery",
        },
        "subjects": [{
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Group",
            "name": "system:unauthenticated",
        }],
    }))?;
    Api::<ClusterRoleBinding>::all(control_plane.admin_client()?)
        .patch(
            DISCOVERY_BINDING,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&binding),
        )
        .await
        .context("binding issuer discovery to system:unauthenticated on the control plane")?;
    control_plane
        .create_namespace_named(ISSUER_PROBE_NAMESPACE)
        .await?;
    control_plane
        .create_unbound_service_account(ISSUER_PROBE_NAMESPACE, ISSUER_PROBE_ACCOUNT)
        .await?;
    Ok(())
}

impl Cluster {
    /// Who `token` authenticates as here (a `SelfSubjectReview`): `Some(username)`, or `None`
    /// if the apiserver rejects it (401).
    ///
    /// # Errors
    /// Any other failure: no connection, another status, an answer without a username.
    pub async fn authenticated_username(&self, token: &str) -> Result<Option<String>> {
        let api = Api::<SelfSubjectReview>::all(self.client_with_token(token)?);
        match api
            .create(&PostParams::default(), &SelfSubjectReview::default())
            .await
        {
            Ok(review) => {
                let user = review.status.and_then(|s| s.user_info);
                let name = user.and_then(|u| u.username);
                name.map(Some)
                    .with_context(|| format!("{}'s SelfSubjectReview names no user", self.name()))
            }
            Err(err) if status_code(&err) == Some(401) => Ok(None),
            Err(err) => Err(anyhow!(err).context(format!("SelfSubjectReview on {}", self.name()))),
        }
    }
}

impl Environment {
    /// How members trust the control plane, if they do
    /// ([`Config::members_trust_control_plane`](crate::Config::members_trust_control_plane)).
    pub fn federation(&self) -> Option<&Federation> {
        self.federation.as_ref()
    }

    /// Mints a token on the control plane for [`ISSUER_PROBE_ACCOUNT`] with member `index`'s
    /// audience and sends it to that member: `Some(username)` if the member accepts it (then
    /// `<username_prefix>system:serviceaccount:tether-testkit:issuer-probe`), `None` if it
    /// answers 401. Every call mints a new token, so the apiserver's token cache never
    /// answers for an older configuration.
    ///
    /// # Errors
    /// If the environment is not federated, `index` is not a member, the control plane mints
    /// no token, or the member answers otherwise than 201 or 401.
    pub async fn federated_probe(&self, index: usize) -> Result<Option<String>> {
        let federation = self.federation_or_err()?;
        let member = self.member_at(index)?;
        let audience = federation.audience(member.name());
        let token = self
            .control_plane()
            .mint_token_for(
                ISSUER_PROBE_NAMESPACE,
                ISSUER_PROBE_ACCOUNT,
                MIN_TOKEN_EXPIRY,
                &[audience],
            )
            .await?;
        member.authenticated_username(&token).await
    }

    /// Makes member `index` trust the control plane's issuer again (`true`) or not (`false`)
    /// by rewriting its authentication configuration, and waits (up to
    /// [`TRUST_RELOAD_TIMEOUT`]) until [`federated_probe`](Self::federated_probe) says so.
    ///
    /// The apiserver watches the file (inotify, with a 1-minute poll behind it) and reads it
    /// at once, but swaps in the new authenticator only once a health check finds it has
    /// fetched the issuer's discovery document. That check runs right away, before the fetch
    /// can have completed, and then every 10 s: measured 10.0–10.1 s per change, every time
    /// (kube-apiserver v1.36.5).
    ///
    /// # Errors
    /// If the environment is not federated, `index` is not a member, the file cannot be
    /// written, or the member does not act on it in time.
    pub async fn set_member_trust(&mut self, index: usize, trusted: bool) -> Result<()> {
        let federation = self.federation_or_err()?.clone();
        let name = self.member_at(index)?.name().to_owned();
        let control_plane = self.control_plane().clone();
        let trust = MemberTrust {
            trusted,
            ..self.trust_state(index)?
        };
        write_member_config(self.spec(index)?, &federation, &control_plane, trust)?;
        self.set_trust_state(index, trust)?;
        self.wait_member_trust(index, trusted, TRUST_RELOAD_TIMEOUT)
            .await
            .with_context(|| format!("{name} did not act on its new authentication configuration"))
    }

    /// Waits (up to `limit`) until member `index` accepts a probe token (`trusted`) or
    /// rejects it.
    pub(crate) async fn wait_member_trust(
        &self,
        index: usize,
        trusted: bool,
        limit: Duration,
    ) -> Result<()> {
        let name = self.member_at(index)?.name();
        let what = match trusted {
            true => format!("{name} accepts a control-plane token for its audience"),
            false => format!("{name} rejects a control-plane token for its audience"),
        };
        eventually(&what, limit, || async {
            match (self.federated_probe(index).await, trusted) {
                (Ok(Some(_)), true) | (Ok(None), false) => Step::Done(()),
                (Ok(Some(user)), false) => Step::Pending(format!("accepted as {user}")),
                (Ok(None), true) => Step::Pending("401".to_owned()),
                // A member that has not fetched the keys yet may fail otherwise for a while.
                (Err(err), _) => Step::Pending(format!("{err:#}")),
            }
        })
        .await
    }

    /// Gives cluster `index` a new ServiceAccount signing key and restarts its apiserver (same
    /// port and CA), returning once it is ready. It keeps every older public key: tokens
    /// minted before stay valid, new ones are signed with the new key, and
    /// `/openid/v1/jwks` lists them all.
    ///
    /// NB: members trusting the control plane go on rejecting tokens signed with its new key
    /// (401, "failed to verify id token signature") for up to an hour: the apiserver serves
    /// its key set with `Cache-Control: public, max-age=3600`, and a member's `jwt`
    /// authenticator (go-oidc v2) honours it, fetching again on an unknown key only once the
    /// cached set has expired. A real fleet publishes a new key an hour before signing with
    /// it; a test calls [`refresh_member_keys`](Self::refresh_member_keys) instead.
    ///
    /// # Errors
    /// As [`Environment::restart`].
    pub async fn rotate_signing_key(&mut self, index: usize) -> Result<()> {
        self.stop(index).await?;
        self.spec(index)?.rotate_signing_key()?;
        self.start(index).await
    }

    /// The first half of a signing-key rotation done as a fleet must: restarts cluster
    /// `index` publishing a new key beside the old one, still signing with the old. Members
    /// fetch the new key when their cached key set expires (an hour; a test calls
    /// [`refresh_member_keys`](Self::refresh_member_keys)); then
    /// [`switch_signing_key`](Self::switch_signing_key).
    ///
    /// # Errors
    /// As [`Environment::restart`].
    pub async fn publish_signing_key(&mut self, index: usize) -> Result<()> {
        self.stop(index).await?;
        self.spec(index)?.publish_signing_key()?;
        self.start(index).await
    }

    /// The second half: restarts cluster `index` signing with the key
    /// [`publish_signing_key`](Self::publish_signing_key) published, keeping every older
    /// public key, so tokens signed before stay valid until they expire.
    ///
    /// # Errors
    /// As [`Environment::restart`], or no key was published.
    pub async fn switch_signing_key(&mut self, index: usize) -> Result<()> {
        self.stop(index).await?;
        self.spec(index)?.switch_signing_key()?;
        self.start(index).await
    }

    /// Makes member `index` forget the control plane's key set it has cached (see
    /// [`rotate_signing_key`](Self::rotate_signing_key)): rewrites its authentication
    /// configuration with the same trust, so the apiserver builds a new authenticator, which
    /// fetches the keys again. Waits (up to [`TRUST_RELOAD_TIMEOUT`]) until the member
    /// accepts a token the control plane signs now: ~10 s after a rotation, at once if the
    /// member knew the key already (its reload then completes in the background).
    ///
    /// # Errors
    /// If the environment is not federated, `index` is not a member or does not trust the
    /// control plane, the file cannot be written, or the member does not accept the token in
    /// time.
    pub async fn refresh_member_keys(&mut self, index: usize) -> Result<()> {
        let federation = self.federation_or_err()?.clone();
        let name = self.member_at(index)?.name().to_owned();
        let mut trust = self.trust_state(index)?;
        ensure!(
            trust.trusted,
            "{name} does not trust the control plane: it has no keys to refresh"
        );
        trust.generation += 1;
        let member = self.member_at(index)?.clone();
        let reloads_before = reloads(&member).await?;
        let control_plane = self.control_plane().clone();
        write_member_config(self.spec(index)?, &federation, &control_plane, trust)?;
        self.set_trust_state(index, trust)?;
        // A member that accepts the current key already would pass the probe with its old
        // authenticator: only its reload count says the new one, with fresh keys, is in.
        let what = format!("{name} reloads its authentication configuration");
        eventually(&what, TRUST_RELOAD_TIMEOUT, || async {
            match reloads(&member).await {
                Ok(now) if now > reloads_before => Step::Done(()),
                Ok(now) => Step::Pending(format!("{now} reloads")),
                Err(err) => Step::Pending(format!("{err:#}")),
            }
        })
        .await?;
        self.wait_member_trust(index, true, TRUST_RELOAD_TIMEOUT)
            .await
            .with_context(|| format!("{name} did not fetch the control plane's keys again"))
    }

    /// Rewrites every member's configuration for the control plane as it is now (after a new
    /// CA), keeping each member's trust. Members reload it by themselves (~10 s).
    pub(crate) fn rewrite_member_configs(&self) -> Result<()> {
        let Some(federation) = self.federation() else {
            return Ok(());
        };
        let control_plane = self.control_plane();
        for index in 1..self.clusters().len() {
            let trust = self.trust_state(index)?;
            write_member_config(self.spec(index)?, federation, control_plane, trust)?;
        }
        Ok(())
    }

    fn federation_or_err(&self) -> Result<&Federation> {
        self.federation()
            .context("members do not trust the control plane (Config::members_trust_control_plane)")
    }

    fn member_at(&self, index: usize) -> Result<&Cluster> {
        ensure!(
            index != CONTROL_PLANE,
            "cluster {index} is the control plane, not a member"
        );
        let n = self.clusters().len();
        self.clusters()
            .get(index)
            .with_context(|| format!("no cluster {index} (there are {n})"))
    }
}

/// How many times `member` has swapped in a new authentication configuration.
async fn reloads(member: &Cluster) -> Result<f64> {
    let metrics = member.metrics().await?;
    Ok(metrics
        .sum(
            "apiserver_authentication_config_controller_automatic_reloads_total",
            r#"status="success""#,
        )
        .abs())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

    use super::*;
    use crate::pki::TestCa;

    fn control_plane() -> Cluster {
        let ca = TestCa::generate("control-plane test CA").unwrap();
        Cluster::with_admin_token("control-plane", "https://127.0.0.1:4443", &ca.pem(), "t")
            .unwrap()
    }

    #[test]
    fn a_member_trusts_the_control_plane_issuer_for_its_own_audience() {
        let federation = Federation::new("tether.io/member/", "control-plane:");
        let cp = control_plane();
        let yaml = federation
            .authentication_config(&cp, "member1", MemberTrust::default())
            .unwrap();
        let config: serde_json::Value = serde_yaml::from_str(&yaml).unwrap();
        assert_eq!(config["apiVersion"], "apiserver.config.k8s.io/v1");
        assert_eq!(config["kind"], "AuthenticationConfiguration");
        let jwt = &config["jwt"][0];
        assert_eq!(jwt["issuer"]["url"], "https://control-plane.test");
        assert_eq!(
            jwt["issuer"]["discoveryURL"],
            "https://127.0.0.1:4443/.well-known/openid-configuration"
        );
        assert_eq!(jwt["issuer"]["certificateAuthority"], cp.ca_pem());
        assert_eq!(
            jwt["issuer"]["audiences"],
            json!(["tether.io/member/member1"])
        );
        assert_eq!(
            jwt["claimMappings"],
            json!({ "username": { "claim": "sub", "prefix": "control-plane:" } })
        );
    }

    #[test]
    fn distrust_changes_only_the_audience() {
        let federation = Federation::new("tether.io/member/", "control-plane:");
        let cp = control_plane();
        let parse = |trusted| -> serde_json::Value {
            let trust = MemberTrust {
                trusted,
                generation: 0,
            };
            let yaml = federation
                .authentication_config(&cp, "member2", trust)
                .unwrap();
            serde_yaml::from_str(&yaml).unwrap()
        };
        let (trusted, mut untrusted) = (parse(true), parse(false));
        let audiences = &mut untrusted["jwt"][0]["issuer"]["audiences"];
        assert_eq!(*audiences, json!(["tether.io/member/member2-untrusted"]));
        *audiences = json!(["tether.io/member/member2"]);
        assert_eq!(untrusted, trusted);
    }

    #[test]
    fn a_new_generation_changes_the_bytes_but_not_the_configuration() {
        let federation = Federation::new("tether.io/member/", "control-plane:");
        let cp = control_plane();
        let write = |generation| {
            let trust = MemberTrust {
                trusted: true,
                generation,
            };
            federation
                .authentication_config(&cp, "member1", trust)
                .unwrap()
        };
        let (first, second) = (write(0), write(1));
        assert_ne!(first, second, "the apiserver reloads only changed bytes");
        let parse = |yaml: &str| serde_yaml::from_str::<serde_json::Value>(yaml).unwrap();
        assert_eq!(parse(&first), parse(&second));
    }

    #[test]
    fn an_atomic_write_replaces_the_file_and_leaves_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(AUTHENTICATION_CONFIG);
        write_atomically(&path, "one").unwrap();
        write_atomically(&path, "two").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
