//! [`permit`]: whether the operator's flags let a member's definition have its tokens minted
//! as it asks. A definition may opt out, never in: the flags decide who is minted for, and
//! cap what each may ask.

use cluster_registry::minting::MintRequest;
use member_client::text::Text;

use super::{
    MintArgs,
    state::{Refusal, RefusalKind},
};

/// What the flags make of a member's mint request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Permit {
    /// Nothing is minted, and nothing is wrong: the operator mints for no such member, and
    /// the definition does not ask, or it opts out.
    Off,
    /// Nothing is minted, and the member says why.
    Refused(Refusal),
    /// Mint as the request asks.
    Mint,
}

/// The verdict of `args` on `member`'s request `request`.
pub(crate) fn permit(args: &MintArgs, member: &str, request: &MintRequest) -> Permit {
    if request.opts_out() {
        return Permit::Off;
    }
    if !args.allows(member) {
        return match request.enabled {
            Some(true) => Permit::Refused(Refusal {
                kind: RefusalKind::NotAllowed,
                message: "the definition asks for token minting (tether.io/mint-tokens: \
                          \"true\"), but minting is the operator's decision and this collector \
                          mints for no such member (--mint-tokens, --mint-tokens-for); nothing \
                          is minted, and the current token is used until it expires"
                    .to_owned(),
            }),
            _ => Permit::Off,
        };
    }
    let cap = args.mint_max_expiration.as_secs();
    if u64::try_from(request.expiration_seconds).map_or(true, |asked| asked > cap) {
        return Permit::Refused(Refusal {
            kind: RefusalKind::OverCap,
            message: format!(
                "the definition asks for tokens that live {} s, more than the {cap} s \
                 --mint-max-expiration allows; nothing is minted",
                request.expiration_seconds
            ),
        });
    }
    let allowed = |asked: &&String| args.mint_audiences.contains(asked);
    if let Some(audience) = request.audiences.iter().find(|asked| !allowed(asked)) {
        let allowed = if args.mint_audiences.is_empty() {
            "only the member apiserver's own audience is allowed (no --mint-audience)".to_owned()
        } else {
            format!(
                "--mint-audience allows only {}",
                args.mint_audiences.join(", ")
            )
        };
        return Permit::Refused(Refusal {
            kind: RefusalKind::OverCap,
            message: format!(
                "the definition asks for tokens for the audience {}, but {allowed}; nothing is \
                 minted",
                Text::new(audience)
            ),
        });
    }
    Permit::Mint
}

#[cfg(test)]
mod tests {
    use cluster_registry::minting::{ServiceAccountRef, TokenHome};
    use member_client::CredentialKey;

    use super::*;
    use crate::minting::args::tests::parse as args;

    fn request(enabled: Option<bool>) -> MintRequest {
        MintRequest {
            service_account: ServiceAccountRef {
                namespace: "tether".into(),
                name: "collector".into(),
            },
            enabled,
            expiration_seconds: 3600,
            audiences: Vec::new(),
            requested: None,
            home: TokenHome::KarmadaSecret(CredentialKey::new("karmada-cluster", "m1")),
        }
    }

    fn reason(permit: &Permit) -> Option<&'static str> {
        match permit {
            Permit::Refused(refusal) => Some(refusal.kind.reason()),
            _ => None,
        }
    }

    /// The refusal in `permit`, which must be one.
    fn refusal(permit: Permit) -> Refusal {
        let Permit::Refused(refusal) = permit else {
            panic!("not refused: {permit:?}")
        };
        refusal
    }

    #[test]
    fn with_minting_off_no_definition_turns_it_on() {
        let off = args(&[]);
        assert_eq!(permit(&off, "m1", &request(None)), Permit::Off);
        assert_eq!(permit(&off, "m1", &request(Some(false))), Permit::Off);
        let asked = permit(&off, "m1", &request(Some(true)));
        assert_eq!(reason(&asked), Some("RotationNotAllowed"), "{asked:?}");
    }

    #[test]
    fn the_operator_allows_members_and_a_definition_may_only_opt_out() {
        let all = args(&["--mint-tokens"]);
        assert_eq!(permit(&all, "m1", &request(None)), Permit::Mint);
        assert_eq!(permit(&all, "m1", &request(Some(true))), Permit::Mint);
        assert_eq!(permit(&all, "m1", &request(Some(false))), Permit::Off);

        let one = args(&["--mint-tokens-for", "m1"]);
        assert_eq!(permit(&one, "m1", &request(None)), Permit::Mint);
        assert_eq!(permit(&one, "m1", &request(Some(false))), Permit::Off);
        assert_eq!(permit(&one, "m2", &request(None)), Permit::Off);
        let asked = permit(&one, "m2", &request(Some(true)));
        assert_eq!(reason(&asked), Some("RotationNotAllowed"));
    }

    #[test]
    fn a_lifetime_over_the_cap_is_refused_not_clamped() {
        let all = args(&["--mint-tokens", "--mint-max-expiration", "1h"]);
        let mut asked = request(None);
        asked.expiration_seconds = 3600;
        assert_eq!(permit(&all, "m1", &asked), Permit::Mint);
        asked.expiration_seconds = 3601;
        let refused = refusal(permit(&all, "m1", &asked));
        assert_eq!(refused.kind.reason(), "RotationOverCap");
        assert!(refused.message.contains("3601 s"), "{}", refused.message);
        // The default cap is a day.
        asked.expiration_seconds = 86_401;
        let default = args(&["--mint-tokens"]);
        let over_a_day = permit(&default, "m1", &asked);
        assert_eq!(reason(&over_a_day), Some("RotationOverCap"));
        asked.expiration_seconds = 86_400;
        assert_eq!(permit(&default, "m1", &asked), Permit::Mint);
    }

    #[test]
    fn only_listed_audiences_may_be_asked_for() {
        let mut asked = request(None);
        asked.audiences = vec!["vault".into()];
        let none = args(&["--mint-tokens"]);
        let unlisted = permit(&none, "m1", &asked);
        assert_eq!(reason(&unlisted), Some("RotationOverCap"));
        let listed = args(&[
            "--mint-tokens",
            "--mint-audience=vault",
            "--mint-audience=sts",
        ]);
        assert_eq!(permit(&listed, "m1", &asked), Permit::Mint);
        asked.audiences = vec!["sts".into(), "https://attacker".into()];
        let message = refusal(permit(&listed, "m1", &asked)).message;
        assert!(message.contains("https://attacker"), "{message}");
        assert!(message.contains("vault, sts"), "{message}");
    }
}
