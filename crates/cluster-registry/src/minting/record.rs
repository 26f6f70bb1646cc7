//! [`MintRecord`]: what the last mint left beside the token, read by the next one, on
//! whichever replica leads by then.

use std::time::SystemTime;

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// The Secret annotation (or, for a member file, the file beside the token file) holding the
/// record as JSON.
pub const RECORD_ANNOTATION: &str = "tether.io/token-rotation";

/// A record longer than this is not read: it is never that long when Tether wrote it.
const MAX_RECORD_LEN: usize = 4096;

/// The handover state of one member's token chain. What does not parse reads as nothing (the
/// token's own claims then decide), since a hand-edited or truncated record must not stop the
/// chain; a time that does not parse reads as absent.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MintRecord {
    /// When Tether last wrote a token it minted.
    #[serde(with = "rfc3339")]
    pub minted_at: Option<SystemTime>,
    /// That token's `exp`.
    #[serde(with = "rfc3339")]
    pub expires_at: Option<SystemTime>,
    /// The last manual request (`tether.io/mint-now`) handled.
    pub handled_request: Option<String>,
    /// The replica that minted it.
    pub minted_by: Option<String>,
}

impl MintRecord {
    /// Reads a record; see [`MintRecord`] for what does not parse.
    pub fn parse(text: &str) -> Self {
        if text.len() > MAX_RECORD_LEN {
            return Self::default();
        }
        serde_json::from_str(text).unwrap_or_default()
    }

    /// The record as the JSON [`parse`](Self::parse) reads.
    pub fn to_json(&self) -> String {
        // Times and strings always serialize.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Times as RFC 3339 text, to the second.
mod rfc3339 {
    use super::{SystemTime, Timestamp};
    use serde::{Deserialize as _, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        at: &Option<SystemTime>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let text = at.and_then(|at| Timestamp::try_from(at).ok()).map(|at| {
            at.round(k8s_openapi::jiff::Unit::Second)
                .unwrap_or(at)
                .to_string()
        });
        s.serialize_some(&text.unwrap_or_default())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<SystemTime>, D::Error> {
        let text = Option::<String>::deserialize(d)?;
        Ok(text
            .and_then(|t| t.parse::<Timestamp>().ok())
            .map(SystemTime::from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn a_record_reads_back_what_it_wrote() {
        let record = MintRecord {
            minted_at: Some(at(1_800_000_000)),
            expires_at: Some(at(1_800_003_600)),
            handled_request: Some("2026-12-02T10:00:00Z".into()),
            minted_by: Some("tether-0".into()),
        };
        let json = record.to_json();
        assert!(
            json.contains(r#""mintedAt":"2027-01-15T08:00:00Z""#),
            "{json}"
        );
        assert_eq!(MintRecord::parse(&json), record);
    }

    #[test]
    fn what_does_not_parse_reads_as_nothing() {
        for text in ["", "{", "[]", r#"{"mintedAt": 3}"#, &"x".repeat(5000)] {
            assert_eq!(MintRecord::parse(text), MintRecord::default(), "{text:.20}");
        }
        let bad_time = MintRecord::parse(r#"{"mintedAt": "yesterday", "mintedBy": "tether-1"}"#);
        assert_eq!(
            (bad_time.minted_at, bad_time.minted_by.as_deref()),
            (None, Some("tether-1"))
        );
    }
}
