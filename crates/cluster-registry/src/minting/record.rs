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

/// The handover state of one member's token chain.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MintRecord {
    /// When Tether last wrote a token it minted.
    pub minted_at: Option<SystemTime>,
    /// That token's `exp`.
    pub expires_at: Option<SystemTime>,
    /// The last manual request (`tether.io/mint-now`) handled.
    pub handled_request: Option<String>,
    /// The replica that minted it.
    pub minted_by: Option<String>,
}

#[derive(Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    minted_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    handled_request: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    minted_by: Option<String>,
}

impl MintRecord {
    /// Reads a record; what does not parse reads as nothing (the token's own claims then
    /// decide), since a hand-edited or truncated record must not stop the chain.
    pub fn parse(text: &str) -> Self {
        if text.len() > MAX_RECORD_LEN {
            return Self::default();
        }
        let Ok(wire) = serde_json::from_str::<Wire>(text) else {
            return Self::default();
        };
        let time = |value: Option<String>| value.as_deref().and_then(parse_time);
        Self {
            minted_at: time(wire.minted_at),
            expires_at: time(wire.expires_at),
            handled_request: wire.handled_request,
            minted_by: wire.minted_by,
        }
    }

    /// The record as the JSON [`parse`](Self::parse) reads.
    pub fn to_json(&self) -> String {
        let wire = Wire {
            minted_at: self.minted_at.map(format_time),
            expires_at: self.expires_at.map(format_time),
            handled_request: self.handled_request.clone(),
            minted_by: self.minted_by.clone(),
        };
        // A struct of strings always serializes.
        serde_json::to_string(&wire).unwrap_or_default()
    }
}

fn parse_time(text: &str) -> Option<SystemTime> {
    text.parse::<Timestamp>().ok().map(SystemTime::from)
}

fn format_time(at: SystemTime) -> String {
    Timestamp::try_from(at)
        .map(|at| {
            at.round(k8s_openapi::jiff::Unit::Second)
                .unwrap_or(at)
                .to_string()
        })
        .unwrap_or_default()
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
    }
}
