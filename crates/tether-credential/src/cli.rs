//! The command line: flags, and the `--help` that documents the whole contract.

use std::{path::PathBuf, time::Duration};

use clap::Parser;

use crate::duration;

const LONG_HELP: &str = r#"THE EXTENSION IT READS
  KUBERNETES_EXEC_INFO holds an ExecCredential (client.authentication.k8s.io/v1 or /v1beta1;
  any other apiVersion is refused). Its spec.cluster.config is the cluster's
  client.authentication.k8s.io/exec extension, as the `tether` access provider of the
  ClusterProfiles Tether publishes carries it:
      {"member": "<member>", "secretRef": {"namespace": "<ns>", "name": "<secret>"}}
  client-go sends spec.cluster only when the provider sets provideClusterInfo: true. A member
  without secretRef (a member file, a plugin the collector runs) cannot be served.

WHAT IT DOES
  One request: GET the Secret <ns>/<secret> from the control plane with the caller's own
  identity: --kubeconfig if given, else $KUBECONFIG or ~/.kube/config, else the in-cluster
  ServiceAccount. The Secret is read as the collector reads it: an Argo CD cluster Secret
  (label argocd.argoproj.io/secret-type=cluster), a kubeconfig Secret (key value or
  value.yaml, no token key), else Karmada's keys (token, caBundle). A Secret whose credential
  is an exec plugin is refused; tether-credential runs no plugin.

WHICH SECRETS IT SERVES
  RBAC is not the only gate: before reading the credential, the Secret itself must say whose
  it is and where it may go. It is refused (exit 1, no token printed) unless
    - its type is not kubernetes.io/service-account-token (such a Secret is never served),
    - its label tether.io/member equals the extension's member, and
    - its annotation tether.io/server equals KUBERNETES_EXEC_INFO's spec.cluster.server,
      character for character: where client-go will send the credential.
  The collector writes both on the Secret of each member it publishes
  (--publish-clusterprofiles), from the member's definition; an operator may write them by hand.
  So a ClusterProfile someone else wrote, naming another member's Secret or another server,
  gets no credential.

RBAC THE CALLER NEEDS
  `get` on `secrets` named <secret> in namespace <ns>, and nothing else:
      apiVersion: rbac.authorization.k8s.io/v1
      kind: Role
      metadata: {name: tether-credential-<member>, namespace: <ns>}
      rules:
      - {apiGroups: [""], resources: [secrets], resourceNames: [<secret>], verbs: [get]}
  bound to the caller (its ServiceAccount, user or group) by a RoleBinding in <ns>.

EXPIRY
  status.expirationTimestamp = min(expiry - --skew, now + --ttl), RFC 3339 UTC in whole
  seconds, where expiry is the token's JWT exp or the client certificate's notAfter
  (whichever comes first); an opaque token gets now + --ttl. So client-go runs the plugin
  again before the credential expires, and picks up a rotated Secret within --ttl instead of
  waiting for a 401. A credential that has expired, or expires within --skew, is not handed
  out (exit 1).

OUTPUT
  An ExecCredential with the apiVersion it was given, kind ExecCredential, and a status with
  token and/or clientCertificateData + clientKeyData (PEM), and expirationTimestamp.

EXIT STATUS
  0  the ExecCredential is on stdout
  1  no credential: one line on stderr says why, nothing is on stdout
  2  the command line is wrong

PROVIDER FILE ENTRY (the consumer's --clusterprofile-provider-file)
  {"providers": [{"name": "tether",
                  "execConfig": {"apiVersion": "client.authentication.k8s.io/v1",
                                 "command": "/usr/local/bin/tether-credential",
                                 "args": ["--ttl=5m"],
                                 "provideClusterInfo": true}}]}

Durations are written 300s, 5m, 1h, or as sums such as 1m30s."#;

/// Hands a ClusterProfile consumer the credential of a Tether member, read from its
/// control-plane Secret with the caller's own identity (a KEP-541 exec credential plugin).
#[derive(Clone, Debug, Parser)]
#[command(
    name = "tether-credential",
    version,
    after_help = "See --help for the extension read, the RBAC needed, the expiry rule, exit \
                  codes and a provider-file entry.",
    after_long_help = LONG_HELP
)]
pub(crate) struct Args {
    /// The caller's kubeconfig for the control plane. Default: $KUBECONFIG or ~/.kube/config,
    /// else the in-cluster ServiceAccount.
    #[arg(long, value_name = "PATH")]
    pub(crate) kubeconfig: Option<PathBuf>,

    /// The longest time a credential is handed out for: a rotated Secret is picked up within
    /// it.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = duration::parse_positive)]
    pub(crate) ttl: Duration,

    /// How long before its own expiry (JWT exp, certificate notAfter) a credential is given up:
    /// client-go comes back that much earlier, and a credential closer to expiry is refused.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = duration::parse)]
    pub(crate) skew: Duration,

    /// The bound on the whole run, the control-plane request included.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration::parse_positive)]
    pub(crate) timeout: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory as _;

    #[test]
    fn defaults_are_five_minutes_thirty_seconds_and_ten_seconds() {
        let args = Args::try_parse_from(["tether-credential"]).unwrap();
        assert_eq!(args.ttl, Duration::from_secs(300));
        assert_eq!(args.skew, Duration::from_secs(30));
        assert_eq!(args.timeout, Duration::from_secs(10));
        assert_eq!(args.kubeconfig, None);
    }

    #[test]
    fn durations_take_units() {
        let args = Args::try_parse_from([
            "tether-credential",
            "--ttl=1h",
            "--skew",
            "0s",
            "--timeout=300s",
        ])
        .unwrap();
        assert_eq!(args.ttl, Duration::from_secs(3600));
        assert_eq!(args.skew, Duration::ZERO);
        assert_eq!(args.timeout, Duration::from_secs(300));
        assert!(Args::try_parse_from(["tether-credential", "--ttl=300"]).is_err());
        assert!(Args::try_parse_from(["tether-credential", "--ttl=0s"]).is_err());
    }

    #[test]
    fn long_help_documents_the_contract() {
        let help = Args::command().render_long_help().to_string();
        for needle in [
            "--kubeconfig",
            "--ttl",
            "--skew",
            "--timeout",
            "secretRef",
            "resourceNames: [<secret>], verbs: [get]",
            "min(expiry - --skew, now + --ttl)",
            "EXIT STATUS",
            "\"provideClusterInfo\": true",
            "/usr/local/bin/tether-credential",
            "kubernetes.io/service-account-token",
            "tether.io/member",
            "tether.io/server",
        ] {
            assert!(help.contains(needle), "--help lacks {needle:?}:\n{help}");
        }
        Args::command().debug_assert();
    }
}
