//! Who the current token says it is, and whether a minted token says the same: minting
//! renews one ServiceAccount's token on one issuer, and never switches a member to another
//! identity. The claims are read unverified; the member's apiserver judges the signatures,
//! and a SelfSubjectReview with each token backs this up ([`super::mint`]).

use cluster_registry::minting::ServiceAccountRef;
use member_client::{jwt_claims::JwtClaims, text::Text};

use super::state::{Refusal, RefusalKind};

/// The `sub` and `iss` of a member's current token, which every token minted with it must
/// carry too.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TokenIdentity {
    /// `system:serviceaccount:<namespace>:<name>`.
    pub(crate) sub: String,
    /// The issuer.
    pub(crate) iss: String,
}

/// The identity of `token`, the member's current one, if it is a token of `account`.
///
/// # Errors
/// A [`RefusalKind::NotMintable`] refusal for a token that is not a JWT naming a
/// ServiceAccount and an issuer; [`RefusalKind::ServiceAccountMismatch`] for another
/// ServiceAccount's token.
pub(crate) fn current(token: &str, account: &ServiceAccountRef) -> Result<TokenIdentity, Refusal> {
    let not_mintable = |why: &str| Refusal {
        kind: RefusalKind::NotMintable,
        message: format!(
            "the current token {why}, so Tether cannot tell that it is {account}'s and \
                 mints nothing with it; write a token of that ServiceAccount (`kubectl create \
                 token`) to seed the chain"
        ),
    };
    let claims = JwtClaims::of(token).ok_or_else(|| not_mintable("is not a JWT"))?;
    let sub = claims
        .sub
        .filter(|sub| sub.starts_with("system:serviceaccount:"))
        .ok_or_else(|| not_mintable("has no system:serviceaccount: subject (sub)"))?;
    let iss = claims
        .iss
        .filter(|iss| !iss.is_empty())
        .ok_or_else(|| not_mintable("names no issuer (iss)"))?;
    let wanted = account.username();
    if sub != wanted {
        return Err(Refusal {
            kind: RefusalKind::ServiceAccountMismatch,
            message: format!(
                "the current token authenticates as {:?} (its sub), not as the ServiceAccount \
                 the definition names ({wanted:?}); nothing was minted",
                Text::new(&sub).as_str()
            ),
        });
    }
    Ok(TokenIdentity { sub, iss })
}

/// Checks that `minted` names the same ServiceAccount and issuer as the current token.
///
/// # Errors
/// A [`RefusalKind::MintedTokenMismatch`] refusal otherwise.
pub(crate) fn check_minted(current: &TokenIdentity, minted: &str) -> Result<(), Refusal> {
    let claims = JwtClaims::of(minted).unwrap_or_default();
    let same_sub = claims.sub.as_deref() == Some(current.sub.as_str());
    let same_iss = claims.iss.as_deref() == Some(current.iss.as_str());
    if same_sub && same_iss {
        return Ok(());
    }
    let said = |claim: Option<&str>| {
        claim.map_or("nothing".to_owned(), |c| {
            format!("{:?}", Text::new(c).as_str())
        })
    };
    Err(Refusal {
        kind: RefusalKind::MintedTokenMismatch,
        message: format!(
            "the member answered the TokenRequest with a token whose sub is {} and iss {}, \
             where the current token's are {:?} and {:?}; it was not written (if the member's \
             issuer changed, write a token of the new issuer to re-seed the chain)",
            said(claims.sub.as_deref()),
            said(claims.iss.as_deref()),
            Text::new(&current.sub).as_str(),
            Text::new(&current.iss).as_str(),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use member_client::test_util::jwt;

    fn account() -> ServiceAccountRef {
        ServiceAccountRef {
            namespace: "tether".into(),
            name: "collector".into(),
        }
    }

    const SUB: &str = "system:serviceaccount:tether:collector";

    /// What a token of [`account`] issued by `https://k` says it is.
    fn identity() -> TokenIdentity {
        TokenIdentity {
            sub: SUB.into(),
            iss: "https://k".into(),
        }
    }

    #[test]
    fn only_the_named_service_accounts_jwt_can_be_minted_for() {
        let token = jwt(&format!(r#"{{"sub":"{SUB}","iss":"https://k"}}"#));
        assert_eq!(current(&token, &account()), Ok(identity()));
        let other = jwt(r#"{"sub":"system:serviceaccount:tether:admin","iss":"https://k"}"#);
        let refusal = current(&other, &account()).unwrap_err();
        assert_eq!(refusal.kind, RefusalKind::ServiceAccountMismatch);
        let admin = "\"system:serviceaccount:tether:admin\"";
        assert!(refusal.message.contains(admin), "{}", refusal.message);
    }

    #[test]
    fn a_token_that_does_not_say_who_it_is_cannot_be_minted_for() {
        let secret = "opaque-secret-value";
        for token in [
            secret.to_owned(),
            jwt(r#"{"iss":"https://k"}"#),
            jwt(r#"{"sub":"alice","iss":"https://k"}"#),
            jwt(&format!(r#"{{"sub":"{SUB}"}}"#)),
            jwt(&format!(r#"{{"sub":"{SUB}","iss":""}}"#)),
        ] {
            let refusal = current(&token, &account()).unwrap_err();
            assert_eq!(refusal.kind, RefusalKind::NotMintable, "{token}");
            assert!(!refusal.message.contains(&token), "{}", refusal.message);
        }
    }

    #[test]
    fn a_minted_token_must_keep_the_current_sub_and_iss() {
        let identity = identity();
        let same = jwt(&format!(r#"{{"sub":"{SUB}","iss":"https://k","exp":1}}"#));
        assert_eq!(check_minted(&identity, &same), Ok(()));
        for minted in [
            jwt(&format!(r#"{{"sub":"{SUB}","iss":"https://attacker"}}"#)),
            jwt(r#"{"sub":"system:serviceaccount:tether:admin","iss":"https://k"}"#),
            jwt(r#"{"iss":"https://k"}"#),
            "opaque".to_owned(),
        ] {
            let refusal = check_minted(&identity, &minted).unwrap_err();
            assert_eq!(refusal.kind, RefusalKind::MintedTokenMismatch, "{minted}");
            assert!(!refusal.message.contains(&minted), "{}", refusal.message);
        }
    }
}
