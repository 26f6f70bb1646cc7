//! PEM text of an identity's chain and key, for handing the identity on (an `ExecCredential`'s
//! `clientCertificateData` and `clientKeyData`).

use base64::Engine as _;
#[cfg(feature = "client-cert")]
use rustls_pki_types::PrivateKeyDer;
use secrecy::{SecretString, zeroize::Zeroizing};

const BEGIN: &str = "-----BEGIN ";
const END: &str = "-----END ";
const DASHES: &str = "-----\n";
/// RFC 7468 writes base64 in lines of 64 characters.
const LINE: usize = 64;

/// The PEM label of a key's encoding; `None` for an encoding this crate does not know (none
/// today: `PrivateKeyDer` is non-exhaustive, so a later version may add one).
#[cfg(feature = "client-cert")]
pub(super) fn key_label(key: &PrivateKeyDer<'_>) -> Option<&'static str> {
    match key {
        PrivateKeyDer::Pkcs1(_) => Some("RSA PRIVATE KEY"),
        PrivateKeyDer::Sec1(_) => Some("EC PRIVATE KEY"),
        PrivateKeyDer::Pkcs8(_) => Some("PRIVATE KEY"),
        _ => None,
    }
}

/// The certificates, leaf first, as consecutive `CERTIFICATE` blocks.
pub(super) fn chain<'a>(certs: impl IntoIterator<Item = &'a [u8]>) -> String {
    let mut out = String::new();
    for der in certs {
        let b64 = base64::engine::general_purpose::STANDARD.encode(der);
        push_block(&mut out, "CERTIFICATE", &b64);
    }
    out
}

/// The key as one PEM block labelled `label`.
///
/// Every buffer that holds the key is zeroed when dropped, and the text is written into a
/// buffer of exactly its final size, so no reallocation leaves a copy behind.
pub(super) fn key(label: &str, der: &[u8]) -> SecretString {
    let b64 = Zeroizing::new(base64::engine::general_purpose::STANDARD.encode(der));
    let mut out = String::with_capacity(block_len(label, b64.len()));
    push_block(&mut out, label, &b64);
    SecretString::from(out)
}

fn block_len(label: &str, b64_len: usize) -> usize {
    let lines = b64_len.div_ceil(LINE);
    BEGIN.len() + END.len() + 2 * (label.len() + DASHES.len()) + b64_len + lines
}

fn push_block(out: &mut String, label: &str, b64: &str) {
    out.reserve(block_len(label, b64.len()));
    out.extend([BEGIN, label, DASHES]);
    let mut rest = b64;
    while !rest.is_empty() {
        // base64 is ASCII, so every byte offset is a char boundary.
        let (line, tail) = rest.split_at(rest.len().min(LINE));
        out.push_str(line);
        out.push('\n');
        rest = tail;
    }
    out.extend([END, label, DASHES]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret as _;

    #[test]
    fn lines_are_64_columns_and_the_key_buffer_is_exact() {
        let der = vec![7_u8; 100]; // 136 base64 characters: lines of 64, 64 and 8
        let pem = key("PRIVATE KEY", &der);
        let text = pem.expose_secret();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.first(), Some(&"-----BEGIN PRIVATE KEY-----"));
        assert_eq!(lines.last(), Some(&"-----END PRIVATE KEY-----"));
        let widths: Vec<usize> = lines[1..lines.len() - 1].iter().map(|l| l.len()).collect();
        assert_eq!(widths, [64, 64, 8]);
        assert_eq!(text.len(), block_len("PRIVATE KEY", 136));
    }

    #[test]
    fn a_chain_is_one_block_per_certificate() {
        let pem = chain([&b"leaf"[..], &b"intermediate"[..]]);
        assert_eq!(pem.matches("-----BEGIN CERTIFICATE-----\n").count(), 2);
        assert!(pem.ends_with("-----END CERTIFICATE-----\n"), "{pem}");
    }
}
