//! [`MintRequest`]: a member's request that Tether mint its tokens with the TokenRequest API
//! and write each one back where the member's credential lives ([`TokenHome`]).
//!
//! A Karmada `Cluster` or an Argo CD cluster Secret asks with annotations:
//!
//! | annotation | value |
//! | --- | --- |
//! | [`SERVICE_ACCOUNT_ANNOTATION`] | `namespace/name` of the ServiceAccount on the member whose tokens are minted |
//! | [`MINT_ANNOTATION`] | `"false"` to never mint, even when the operator allows it; `"true"` asks for minting, which only the operator can grant |
//! | [`EXPIRATION_ANNOTATION`] | the lifetime asked for, in seconds (default 3600, at least 600); the apiserver may grant less |
//! | [`AUDIENCES_ANNOTATION`] | comma-separated audiences (default: the apiserver's own) |
//! | [`MINT_NOW_ANNOTATION`] | any new value asks for one mint at once |
//!
//! Each was spelled `tether.io/rotation-…` or `tether.io/rotate-…` before
//! ([`FORMER_ANNOTATIONS`]); the former spelling is read where the annotation is absent.
//!
//! A member file asks with a `rotation:` block holding the same fields
//! (`serviceAccount`, `enabled`, `expirationSeconds`, `audiences`, `mintNow`).
//!
//! This is only what a definition asks. Whether anything is minted, and within which bounds
//! (the longest lifetime, the audiences, how often a manual request is heeded), is the
//! operator's decision, made by the collector's flags: a definition can opt out of rotation,
//! never in.
//!
//! A request that names no ServiceAccount is no request; one that says `"true"` without a
//! ServiceAccount, or whose fields do not parse, makes the definition
//! [`DefinitionInvalid`](crate::InvalidReason::DefinitionInvalid), so a typo never silently
//! leaves a member unrotated.

use std::{collections::BTreeMap, path::PathBuf};

use serde::Deserialize;

use crate::{
    InvalidReason,
    names::{is_dns1123_label, is_dns1123_subdomain},
};

mod home;
mod record;

pub use home::{HomeError, HomeSnapshot, TokenHome};
pub use record::{MintRecord, RECORD_ANNOTATION};

/// Names the member ServiceAccount whose tokens are minted (`namespace/name`).
pub const SERVICE_ACCOUNT_ANNOTATION: &str = "tether.io/mint-service-account";
/// `"false"`: no token is ever minted for this member, whatever the operator allows. `"true"`
/// asks for minting, which only the operator's flags grant.
pub const MINT_ANNOTATION: &str = "tether.io/mint-tokens";
/// The token lifetime to ask for, in seconds.
pub const EXPIRATION_ANNOTATION: &str = "tether.io/mint-expiration-seconds";
/// The audiences to ask for, comma-separated.
pub const AUDIENCES_ANNOTATION: &str = "tether.io/mint-audiences";
/// A value not yet handled asks for one mint at once.
pub const MINT_NOW_ANNOTATION: &str = "tether.io/mint-now";

/// Each annotation and its former spelling, read when the annotation itself is absent. The
/// former spellings are kept for one release.
pub const FORMER_ANNOTATIONS: [(&str, &str); 5] = [
    (
        SERVICE_ACCOUNT_ANNOTATION,
        "tether.io/rotation-service-account",
    ),
    (MINT_ANNOTATION, "tether.io/rotate-tokens"),
    (
        EXPIRATION_ANNOTATION,
        "tether.io/rotation-expiration-seconds",
    ),
    (AUDIENCES_ANNOTATION, "tether.io/rotation-audiences"),
    (MINT_NOW_ANNOTATION, "tether.io/rotate-now"),
];

/// The lifetime asked for when the definition does not say.
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// The shortest lifetime the TokenRequest API grants.
pub const MIN_EXPIRATION_SECONDS: i64 = 600;

/// Caps on what a definition may ask for: they bound what is kept and sent per member.
const MAX_AUDIENCES: usize = 16;
const MAX_AUDIENCE_LEN: usize = 256;
const MAX_REQUEST_LEN: usize = 256;
/// Kubernetes' own cap on `expirationSeconds` (2^32 seconds).
const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;

/// A ServiceAccount on the member.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ServiceAccountRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl ServiceAccountRef {
    /// The user name its tokens authenticate as.
    pub fn username(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }

    fn parse(value: &str) -> Result<Self, String> {
        let (namespace, name) = value
            .trim()
            .split_once('/')
            .ok_or_else(|| format!("{value:?} is not namespace/name"))?;
        if !is_dns1123_label(namespace) {
            return Err(format!("{namespace:?} is not a namespace name"));
        }
        if !is_dns1123_subdomain(name) {
            return Err(format!("{name:?} is not a ServiceAccount name"));
        }
        Ok(Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        })
    }
}

impl std::fmt::Display for ServiceAccountRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What a member definition asks of token rotation, and where its token lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MintRequest {
    /// The ServiceAccount whose tokens are minted.
    pub service_account: ServiceAccountRef,
    /// `Some(false)`: never rotate; `Some(true)`: the definition asks to (only the operator can
    /// grant it); `None`: the definition leaves it to the operator.
    pub enabled: Option<bool>,
    /// The lifetime asked for.
    pub expiration_seconds: i64,
    /// The audiences asked for (empty: the apiserver's own).
    pub audiences: Vec<String>,
    /// The latest manual request; a value the [`MintRecord`] has not handled asks for one
    /// rotation at once.
    pub requested: Option<String>,
    /// Where the token is read from and written back to.
    pub home: TokenHome,
}

impl MintRequest {
    /// Whether the definition opts out of rotation, which it may always do.
    pub fn opts_out(&self) -> bool {
        self.enabled == Some(false)
    }

    /// The request read from `annotations` for a token that lives in `home`; `Ok(None)` when
    /// they name no ServiceAccount and do not ask to rotate.
    ///
    /// # Errors
    /// [`InvalidReason::DefinitionInvalid`] naming the annotation that does not parse.
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use cluster_registry::minting::{TokenHome, MintRequest};
    /// use member_client::CredentialKey;
    ///
    /// let annotations = BTreeMap::from([
    ///     ("tether.io/mint-service-account".to_owned(), "tether/collector".to_owned()),
    ///     ("tether.io/mint-tokens".to_owned(), "true".to_owned()),
    /// ]);
    /// let home = TokenHome::KarmadaSecret(CredentialKey::new("karmada-cluster", "m1"));
    /// let rotation = MintRequest::from_annotations(&annotations, home)?.unwrap();
    /// assert_eq!(rotation.service_account.username(), "system:serviceaccount:tether:collector");
    /// assert_eq!(rotation.expiration_seconds, 3600);
    /// # Ok::<_, cluster_registry::InvalidReason>(())
    /// ```
    pub fn from_annotations(
        annotations: &BTreeMap<String, String>,
        home: TokenHome,
    ) -> Result<Option<Self>, InvalidReason> {
        let get = |key: &str| {
            let former = FORMER_ANNOTATIONS.iter().find(|(name, _)| *name == key);
            (annotations.get(key))
                .or_else(|| former.and_then(|(_, former)| annotations.get(*former)))
                .map(String::as_str)
        };
        let invalid =
            |key: &str, why: String| InvalidReason::DefinitionInvalid(format!("{key}: {why}"));
        let enabled = get(MINT_ANNOTATION)
            .map(|value| match value.trim() {
                "true" => Ok(true),
                "false" => Ok(false),
                other => Err(invalid(
                    MINT_ANNOTATION,
                    format!("{other:?} is neither \"true\" nor \"false\""),
                )),
            })
            .transpose()?;
        let Some(service_account) = get(SERVICE_ACCOUNT_ANNOTATION) else {
            return match enabled {
                Some(true) => Err(invalid(
                    MINT_ANNOTATION,
                    format!("rotating needs {SERVICE_ACCOUNT_ANNOTATION} (namespace/name)"),
                )),
                _ => Ok(None),
            };
        };
        let service_account = ServiceAccountRef::parse(service_account)
            .map_err(|why| invalid(SERVICE_ACCOUNT_ANNOTATION, why))?;
        let expiration_seconds = get(EXPIRATION_ANNOTATION)
            .map(|value| {
                value
                    .trim()
                    .parse::<i64>()
                    .map_err(|_| format!("{value:?} is not a number of seconds"))
                    .and_then(expiration)
                    .map_err(|why| invalid(EXPIRATION_ANNOTATION, why))
            })
            .transpose()?
            .unwrap_or(DEFAULT_EXPIRATION_SECONDS);
        let audiences = get(AUDIENCES_ANNOTATION)
            .map(|value| {
                audiences(value.split(',').map(str::trim).filter(|a| !a.is_empty()))
                    .map_err(|why| invalid(AUDIENCES_ANNOTATION, why))
            })
            .transpose()?
            .unwrap_or_default();
        let requested = get(MINT_NOW_ANNOTATION)
            .map(|value| request(value).map_err(|why| invalid(MINT_NOW_ANNOTATION, why)))
            .transpose()?
            .flatten();
        Ok(Some(Self {
            service_account,
            enabled,
            expiration_seconds,
            audiences,
            requested,
            home,
        }))
    }
}

/// A member file's `mint:` block (formerly `rotation:`), the annotations' fields under their camelCase names.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct MintBlock {
    /// `namespace/name`.
    pub service_account: String,
    /// As [`MINT_ANNOTATION`].
    pub enabled: Option<bool>,
    /// As [`EXPIRATION_ANNOTATION`].
    pub expiration_seconds: Option<i64>,
    /// As [`AUDIENCES_ANNOTATION`], as a list.
    #[serde(default)]
    pub audiences: Vec<String>,
    /// As [`MINT_NOW_ANNOTATION`]; `rotateNow` is its former spelling, still read.
    #[serde(alias = "rotateNow")]
    pub mint_now: Option<String>,
}

impl MintBlock {
    /// The request this block makes for the token file `token_file`.
    ///
    /// # Errors
    /// [`InvalidReason::DefinitionInvalid`] naming the field that does not parse.
    pub fn request(&self, token_file: PathBuf) -> Result<MintRequest, InvalidReason> {
        let invalid = |field: &str, why: String| {
            InvalidReason::DefinitionInvalid(format!("mint.{field}: {why}"))
        };
        Ok(MintRequest {
            service_account: ServiceAccountRef::parse(&self.service_account)
                .map_err(|why| invalid("serviceAccount", why))?,
            enabled: self.enabled,
            expiration_seconds: self
                .expiration_seconds
                .map(expiration)
                .transpose()
                .map_err(|why| invalid("expirationSeconds", why))?
                .unwrap_or(DEFAULT_EXPIRATION_SECONDS),
            audiences: audiences(self.audiences.iter().map(String::as_str))
                .map_err(|why| invalid("audiences", why))?,
            requested: self
                .mint_now
                .as_deref()
                .map(request)
                .transpose()
                .map_err(|why| invalid("mintNow", why))?
                .flatten(),
            home: TokenHome::File(token_file),
        })
    }
}

fn expiration(seconds: i64) -> Result<i64, String> {
    if !(MIN_EXPIRATION_SECONDS..MAX_EXPIRATION_SECONDS).contains(&seconds) {
        return Err(format!(
            "{seconds} is outside {MIN_EXPIRATION_SECONDS}..{MAX_EXPIRATION_SECONDS} (the TokenRequest API's range)"
        ));
    }
    Ok(seconds)
}

fn audiences<'a>(values: impl Iterator<Item = &'a str>) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for audience in values {
        if out.len() == MAX_AUDIENCES {
            return Err(format!("more than {MAX_AUDIENCES} audiences"));
        }
        if audience.is_empty()
            || audience.len() > MAX_AUDIENCE_LEN
            || audience
                .chars()
                .any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(format!(
                "an audience must be 1 to {MAX_AUDIENCE_LEN} characters without spaces"
            ));
        }
        out.push(audience.to_owned());
    }
    Ok(out)
}

/// A manual request's value; an empty one asks for nothing.
fn request(value: &str) -> Result<Option<String>, String> {
    let value = value.trim();
    if value.len() > MAX_REQUEST_LEN || value.chars().any(char::is_control) {
        return Err(format!(
            "at most {MAX_REQUEST_LEN} printable characters (a timestamp, say)"
        ));
    }
    Ok((!value.is_empty()).then(|| value.to_owned()))
}

#[cfg(test)]
mod tests;
