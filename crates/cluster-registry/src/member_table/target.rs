//! What a member's client should be now, judged from its definitions, its Secret and what
//! the table knows of its namespace.

use std::collections::BTreeSet;

use member_client::{CredentialKey, text::Text};

use super::{MemberTable, Origin, Told, list_forbidden};
use crate::{
    InvalidReason, MemberSpec,
    federation::{FEDERATED, Federation},
};

impl MemberTable {
    /// What `name`'s client should be now.
    pub(super) fn target(&self, name: &str) -> Option<Told> {
        let claimants = self.claims.get(name)?;
        let Some(origin) = self.owner(name) else {
            return Some(Told::Invalid(claimed_by_many(name, claimants)));
        };
        let spec = match &self.definitions.get(origin)?.spec {
            Err(reason) => return Some(Told::Invalid(reason.clone())),
            Ok(spec) => spec,
        };
        let key = &spec.secret_ref;
        if let Some(federation) = &spec.federation {
            return Some(self.federated_target(name, spec, federation));
        }
        if key.federated_member().is_some() {
            return Some(Told::Invalid(InvalidReason::SecretForbidden(format!(
                "the {} names the federated credential {} without asking to be federated",
                Text::new(&origin.to_string()).as_str(),
                Text::new(&key.to_string()).as_str(),
            ))));
        }
        if let Some(own) = origin.own_credential().filter(|own| own != key) {
            // Sources never build this; refusing it keeps one source's slip from reaching
            // another definition's credential.
            return Some(Told::Invalid(InvalidReason::SecretForbidden(format!(
                "the {} names the credential {}, not its own ({own})",
                Text::new(&origin.to_string()).as_str(),
                Text::new(&key.to_string()).as_str(),
            ))));
        }
        if matches!(origin, Origin::Karmada(_)) && self.unreferenced.contains(key) {
            // Seen and dropped before this Cluster named it; the driver lists it again.
            return Some(Told::Pending);
        }
        if matches!(origin, Origin::Karmada(_)) && !self.listed.contains(&key.namespace) {
            return Some(match self.forbidden.get(&key.namespace) {
                Some(detail) => Told::Invalid(list_forbidden(detail)),
                None => Told::Pending,
            });
        }
        if matches!(origin, Origin::Karmada(_))
            && let Some(secret) = self.store.get(key)
            && let Err(refused) = secret.binding().serves(key, name)
        {
            // Bound to another member, or to none: this definition never gets its token.
            return Some(Told::Invalid(refused));
        }
        Some(match self.store.usable(key) {
            Err(err) => Told::Invalid(InvalidReason::from(&err)),
            Ok(ca) => Told::Ready {
                spec: spec.clone(),
                ca,
            },
        })
    }
}

impl MemberTable {
    /// What a federated member's client should be: its own federated credential, and only
    /// where the registry mints them.
    fn federated_target(&self, name: &str, spec: &MemberSpec, federation: &Federation) -> Told {
        if spec.secret_ref != CredentialKey::federated(name) {
            // Sources never build this; the audience is derived from the key's member, so
            // another member's key would hand this endpoint that member's token.
            return Told::Invalid(InvalidReason::SecretForbidden(format!(
                "the definition of {} names the federated credential {}, not its own",
                Text::new(name).as_str(),
                Text::new(&spec.secret_ref.to_string()).as_str(),
            )));
        }
        if !self.federation {
            return Told::Invalid(InvalidReason::DefinitionInvalid(format!(
                "the definition asks for a {FEDERATED} credential, but the registry mints none \
                 (the collector's --federated-service-account is not set)"
            )));
        }
        Told::Ready {
            spec: spec.clone(),
            ca: federation.ca_bundle.clone(),
        }
    }
}

/// Why no definition of `name` is used: `claimants` (more than one) all define it.
fn claimed_by_many(name: &str, claimants: &BTreeSet<Origin>) -> InvalidReason {
    // Bounded: a listing of thousands of claimants would only repeat the point.
    const LISTED: usize = 8;
    let mut listed: Vec<String> = (claimants.iter().take(LISTED))
        .map(|origin| Text::new(&origin.to_string()).into())
        .collect();
    if claimants.len() > LISTED {
        listed.push(format!("and {} more", claimants.len() - LISTED));
    }
    InvalidReason::DefinitionInvalid(format!(
        "the member name {:?} is claimed by {} definitions: {}; none is used until only one \
         defines it",
        Text::new(name).as_str(),
        claimants.len(),
        listed.join(", ")
    ))
}
