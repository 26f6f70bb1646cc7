//! The table itself: one entry per reason. The macro makes the enum, [`Reason::ALL`] and the
//! lookups from the same list, so a reason without its documentation does not compile.

use super::{ConditionValue, ReasonDoc};

macro_rules! reasons {
    ($(
        $(#[doc = $doc:literal])*
        $name:ident {
            ready: $ready:ident,
            credentials_valid: $credentials_valid:ident,
            when: $when:literal,
            remedy: $remedy:literal $(,)?
        }
    )*) => {
        /// Every reason Tether gives for a member: the reason of its `Ready` and
        /// `CredentialsValid` conditions and Events, and the verdict of `collector check`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Reason {
            $( $(#[doc = $doc])* $name, )*
        }

        impl Reason {
            /// Every reason, in the order the documentation lists them.
            pub const ALL: &'static [Reason] = &[$(Reason::$name),*];

            /// Its name, as conditions, Events, metrics and `collector check` spell it.
            pub fn name(self) -> &'static str {
                match self {
                    $(Reason::$name => stringify!($name),)*
                }
            }

            /// What it means and what to do about it.
            pub fn doc(self) -> ReasonDoc {
                match self {
                    $(Reason::$name => ReasonDoc {
                        ready: ConditionValue::$ready,
                        credentials_valid: ConditionValue::$credentials_valid,
                        when: $when,
                        remedy: $remedy,
                    },)*
                }
            }
        }
    };
}

reasons! {
    /// The member answers and its informers have listed.
    MemberReady {
        ready: True, credentials_valid: True,
        when: "`/readyz` answers with the member's current credential and every informer has listed",
        remedy: "none needed",
    }
    /// The `CredentialsValid` reason of a member whose credential the member accepts.
    CredentialsAccepted {
        ready: AsProbe, credentials_valid: True,
        when: "the `CredentialsValid` reason whenever the member accepts the credential (any answer but 401): `MemberReady`, `Syncing`, `Settling`, `Forbidden` and `MirrorFailing` write it there",
        remedy: "none needed",
    }
    /// Not probed yet.
    Probing {
        ready: Unknown, credentials_valid: Unknown,
        when: "the member is defined and its first probe has not finished",
        remedy: "wait for the first probe; if it stays, the probe hangs: see --probe-timeout",
    }
    /// The credential is rejected (401), also after a refresh.
    Unauthorized {
        ready: False, credentials_valid: False,
        when: "the member answers 401 to the credential, also after Tether re-read it",
        remedy: "the member rejects the credential even after Tether re-read it; the ServiceAccount behind it was probably deleted or recreated (tokens are bound to its UID): mint a new token and write it to the Secret, no restart needed",
    }
    /// `/readyz` answers; the informers have not finished their first list.
    Syncing {
        ready: Unknown, credentials_valid: True,
        when: "`/readyz` answers; the member's informers have not finished their first list",
        remedy: "wait for the first list; if it stays, the member is slow to list what --mirror names",
    }
    /// Accepted, but refused an action (403).
    Forbidden {
        ready: False, credentials_valid: True,
        when: "the credential is accepted (403 is not 401) but may not read `/readyz`, or list or watch a mirrored kind: the message names the kind and the verb",
        remedy: "the credential is accepted (403 is not 401) but lacks a permission: grant its identity get, list and watch on the kinds denied, and get on /readyz, on the member",
    }
    /// A mirrored kind cannot be listed or watched for another reason.
    MirrorFailing {
        ready: False, credentials_valid: True,
        when: "a mirrored kind cannot be listed or watched for another reason (the resource is not served, say)",
        remedy: "a mirrored kind cannot be listed or watched (not served, say): check --mirror against the member's API",
    }
    /// A refusal seen once, waiting for a second probe.
    Settling {
        ready: Unknown, credentials_valid: True,
        when: "a refusal (403, or a failing informer) seen for less than 10 s; an apiserver that just restarted answers 403 until its RBAC caches load, which is no reason to alarm",
        remedy: "wait: the next probe confirms or clears the refusal",
    }
    /// Connect, TLS or timeout errors.
    Unreachable {
        ready: False, credentials_valid: Unknown,
        when: "connect, TLS (a CA that no longer matches, say) or timeout errors, or an error answer other than 401 and 403: nothing is known of the credential",
        remedy: "the network or TLS failed, so nothing is known about the credential; after a CA rotation on the member, update the Secret's caBundle (the client is rebuilt by itself)",
    }
    /// The referenced Secret or token file does not exist.
    SecretNotFound {
        ready: False, credentials_valid: False,
        when: "the referenced Secret (or token file) does not exist",
        remedy: "the referenced Secret (or token file) does not exist: create it, or fix the secretRef",
    }
    /// The member may not use the Secret it names.
    SecretForbidden {
        ready: False, credentials_valid: Unknown,
        when: "the `secretRef` names a Secret bound to another member, or to none of this name (a Secret serves one member: the one its `tether.io/member` label names, else its Karmada `Cluster` owner, else the one its name is); or a namespace outside `--secret-namespace` (nothing is read from it); or the collector may not list Secrets there (403: the message quotes the apiserver, and it clears at the watch's next retry once RBAC allows it)",
        remedy: "the message says which: the Secret is bound to another member (a Secret serves one member only: its tether.io/member label, else its Karmada Cluster owner, else its name), so if it really is this member's credential, label it tether.io/member=<member>; or the secretRef points to a namespace the collector has no Role in: add it to --secret-namespace (the chart's secretNamespaces) and grant get, list and watch on Secrets there",
    }
    /// The Secret's credential is unusable.
    SecretInvalid {
        ready: False, credentials_valid: False,
        when: "a key is missing (`token`, `config`, `config.bearerToken`, a kubeconfig's `value`), the token is empty, longer than 16 KiB, not UTF-8 or holds control characters, the CA bundle is not PEM, `config` or the kubeconfig does not parse, a kubeconfig names a file or an unsupported auth method, half a client certificate; a token or CA file outside the members directory, not a regular file, or over its size cap",
        remedy: "the message says which key is wrong; tokens are trimmed, and a token with an inner newline or control character is refused",
    }
    /// The exec plugin may not run.
    ExecNotAllowed {
        ready: False, credentials_valid: False,
        when: "the exec plugin's command does not resolve to a declared plugin (`--exec-plugins`, `--allow-exec`), or the definition passes an argument or variable its declaration does not accept; it never runs",
        remedy: "the message names the refused command, argument position or variable: declare the plugin and what a definition may pass (each by pattern) with --exec-plugins, or allow a plugin that takes nothing from the definition with --allow-exec",
    }
    /// The exec plugin ran and gave no credential.
    ExecFailed {
        ready: False, credentials_valid: False,
        when: "the exec plugin hung past `--exec-timeout`, exited non-zero (its stderr, truncated, is quoted), or printed no usable `ExecCredential` (not JSON, another `apiVersion`, no `status`, no token and no certificate, a bad `expirationTimestamp`, over 1 MiB)",
        remedy: "the message quotes the plugin's stderr; --exec-timeout sets how long it may run",
    }
    /// The client certificate or key is unusable.
    CertificateInvalid {
        ready: False, credentials_valid: False,
        when: "the client certificate or key is not PEM, the key type is not supported, or the key does not match the certificate",
        remedy: "write a client certificate and matching key (PEM) to the Secret",
    }
    /// The client certificate expired.
    CertificateExpired {
        ready: False, credentials_valid: False,
        when: "the client certificate's `notAfter` has passed",
        remedy: "write a renewed client certificate to the Secret",
    }
    /// The control plane gave no federated token.
    FederationFailed {
        ready: False, credentials_valid: False,
        when: "a federated member's token could not be minted: the control plane refused the TokenRequest for `--federated-service-account` (401, 403: its RBAC lacks `create` on that ServiceAccount's `serviceaccounts/token`; 404: no such ServiceAccount; 422) or did not answer within 10 s",
        remedy: "the message quotes the control plane: grant the collector create on serviceaccounts/token for the ServiceAccount --federated-service-account names (resourceNames: that one), or create that ServiceAccount",
    }
    /// No usable API endpoint.
    EndpointInvalid {
        ready: False, credentials_valid: Unknown,
        when: "no API endpoint, or not an `https://host[:port]` URL",
        remedy: "give the member an https://host[:port] API endpoint",
    }
    /// The endpoint or proxy points where a credential may not go.
    EndpointForbidden {
        ready: False, credentials_valid: Unknown,
        when: "the endpoint or proxy is a loopback, link-local, unspecified or cloud-metadata address (as written, or as its host name resolves) outside `--allow-endpoint`; `http://` without `--allow-plain-http`; user info in the URL (never echoed); `insecureSkipTLSVerification` without `--allow-insecure-members`",
        remedy: "the endpoint or proxy points where a token may not go: fix the definition, or widen what is allowed with --allow-endpoint, --allow-plain-http or --allow-insecure-members",
    }
    /// The proxy is not an HTTP(S) URL.
    ProxyInvalid {
        ready: False, credentials_valid: Unknown,
        when: "the proxy is not an `http://` or `https://` URL",
        remedy: "give the member an http:// or https:// proxy URL, or none",
    }
    /// A Karmada `Cluster` in Pull mode.
    PullMode {
        ready: False, credentials_valid: Unknown,
        when: "a Karmada `Cluster` in Pull mode (ignored on purpose: its agent calls the control plane)",
        remedy: "none: Karmada's agent manages pull-mode clusters, and Tether leaves them alone on purpose",
    }
    /// No access provider of a ClusterProfile is served.
    ProviderNotFound {
        ready: False, credentials_valid: Unknown,
        when: "none of a ClusterProfile's access providers is in `--clusterprofile-provider-file` (the message lists what the profile offers and what the file serves)",
        remedy: "add one of the ClusterProfile's access providers to --clusterprofile-provider-file",
    }
    /// The definition itself is unusable.
    DefinitionInvalid {
        ready: False, credentials_valid: Unknown,
        when: "a member file that does not parse (unknown keys included) or is over 64 KiB, a `Cluster` without `secretRef`, a name that is not DNS-1123 (reported as `invalid-name-<hash>`), two definitions of one name (both, until one is left); a ClusterProfile access provider without `server`, naming a `certificate-authority` file, with `certificate-authority-data` that is not base64 PEM, or with `additional-args` / `additional-envs` of the wrong shape",
        remedy: "fix the member's definition: the message says what does not parse, or which definitions claim the same member name (remove or rename all but one)",
    }
    /// A response over its size limit.
    ResponseTooLarge {
        ready: False, credentials_valid: Unknown,
        when: "a member's answer was larger than its limit (64 KiB for health checks, `--member-response-limit-mib` otherwise); the message names the request",
        remedy: "the member sent more than it may: find out why it answers so much, or raise --member-response-limit-mib",
    }
    /// A watch line over its limit.
    WatchLineTooLong {
        ready: False, credentials_valid: Unknown,
        when: "one watch event was longer than `--member-watch-line-limit-mib`",
        remedy: "an object on the member is larger than the watch line limit: raise --member-watch-line-limit-mib if it is legitimate",
    }
    /// Too many objects of a kind.
    TooManyObjects {
        ready: False, credentials_valid: Unknown,
        when: "a mirrored kind holds more objects than `--member-max-objects`",
        remedy: "the member holds more objects of a mirrored kind than --member-max-objects: raise it, or mirror less",
    }
    /// A list that kept continuing.
    TooManyListPages {
        ready: False, credentials_valid: Unknown,
        when: "a list went on for more pages than `--member-max-objects` allows",
        remedy: "the member's list kept continuing: raise --member-max-objects if it really holds that many objects",
    }
    /// An answer that arrived too slowly.
    ResponseTooSlow {
        ready: False, credentials_valid: Unknown,
        when: "an answer's body did not arrive within `--request-timeout` (`--probe-timeout` for probes)",
        remedy: "the member answers too slowly: check its load and the network, or raise --request-timeout or --probe-timeout",
    }
    /// A mint could not be done or written.
    RotationFailed {
        ready: AsProbe, credentials_valid: False,
        when: "[token minting](../features/minting.md) could not mint or write the next token (the message quotes the member's or the control plane's refusal); the current token stays in use until its `exp`",
        remedy: "the message says why: (403) the member's identity may not create serviceaccounts/token for the ServiceAccount it names (apply deploy/member-rbac/token-rotation.yaml on the member); control plane refused: the collector may not update Secrets there; attempts repeat every --mint-retry-seconds",
    }
    /// The definition asks to mint, the operator does not.
    RotationNotAllowed {
        ready: AsProbe, credentials_valid: False,
        when: "the definition asks for minting, but the operator mints for no such member (`--mint-tokens`, `--mint-tokens-for`); nothing is minted",
        remedy: "run the collector with --mint-tokens or --mint-tokens-for naming this member, or remove the definition's request",
    }
    /// Over the operator's lifetime or audience bounds.
    RotationOverCap {
        ready: AsProbe, credentials_valid: False,
        when: "the definition asks for a lifetime over `--mint-max-expiration` or an audience `--mint-audience` does not list; nothing is minted",
        remedy: "ask for a shorter lifetime or a listed audience, or widen --mint-max-expiration or --mint-audience",
    }
    /// The current token cannot seed a chain.
    TokenNotRotatable {
        ready: AsProbe, credentials_valid: False,
        when: "the current token is not a ServiceAccount JWT with `sub` and `iss`",
        remedy: "seed the chain with a ServiceAccount token: kubectl create token <serviceaccount> -n <namespace> --duration=1h, written where the member's credential lives",
    }
    /// The current token is another ServiceAccount's.
    RotationServiceAccountMismatch {
        ready: AsProbe, credentials_valid: False,
        when: "the current token's `sub` is another ServiceAccount than the definition names; nothing is minted",
        remedy: "name the ServiceAccount the current token belongs to in tether.io/mint-service-account",
    }
    /// The member minted a token of another identity.
    MintedTokenMismatch {
        ready: AsProbe, credentials_valid: False,
        when: "the member answered the TokenRequest with a token of another `sub` or `iss`; it was not written",
        remedy: "the member's TokenRequest answer is not to be trusted: check the member's apiserver and the endpoint the definition names",
    }
    /// The chain's token expired before it could be replaced.
    TokenExpired {
        ready: AsProbe, credentials_valid: False,
        when: "the token where the member's credential lives expired before Tether could replace it (the collector was down, or not leading, for longer than the token's remaining life), so no new one can be minted with it",
        remedy: "re-seed the chain: kubectl --context <member> -n <namespace> create token <serviceaccount> --duration=1h, written where the member's credential lives; no restart is needed",
    }
    /// `collector check` only: the member's Secrets are not listed yet.
    Pending {
        ready: NotWritten, credentials_valid: NotWritten,
        when: "`collector check` only: the Secrets of the member's namespace were not listed within `--check-timeout`",
        remedy: "the Secrets of the member's namespace are not listed yet: check the collector's get, list and watch on Secrets there, or raise --check-timeout",
    }
    /// `collector check` only: no source defines the member.
    NotDefined {
        ready: NotWritten, credentials_valid: NotWritten,
        when: "`collector check --member` only: no source defines a member of this name",
        remedy: "no source defines a member of this name: check --member and --members-from",
    }
}
