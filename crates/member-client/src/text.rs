//! [`Text`]: what a member (or whoever writes its definition) says, made safe to repeat.

use std::fmt;

/// Member-controlled text (an apiserver's error body, a PEM line, a parse error quoting its
/// input) cut to [`Text::MAX_BYTES`] and with every control and bidi-override character
/// replaced by a space, so that it can go into a condition, an Event, the read API or a log
/// line without forging lines or growing them without bound.
///
/// ```
/// use member_client::text::Text;
/// assert_eq!(Text::new("line1\nline2\x1b[31m").as_str(), "line1 line2 [31m");
/// assert!(Text::new(&"x".repeat(10_000)).as_str().len() <= Text::MAX_BYTES);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Text(String);

impl Text {
    /// The longest text kept, in bytes; longer text ends in `…`.
    pub const MAX_BYTES: usize = 1024;

    /// `raw`, sanitized.
    pub fn new(raw: &str) -> Self {
        let mut out = String::with_capacity(raw.len().min(Self::MAX_BYTES));
        for c in raw.chars() {
            let c = if is_unsafe(c) { ' ' } else { c };
            if out.len() + c.len_utf8() > Self::MAX_BYTES - '…'.len_utf8() {
                out.push('…');
                break;
            }
            out.push(c);
        }
        Self(out)
    }

    /// `raw` read as UTF-8 (invalid sequences become `�`), sanitized. Only the first
    /// [`MAX_BYTES`](Self::MAX_BYTES) × 4 bytes are looked at.
    pub fn from_bytes(raw: &[u8]) -> Self {
        let head = raw.get(..Self::MAX_BYTES * 4).unwrap_or(raw);
        Self::new(&String::from_utf8_lossy(head))
    }

    /// The sanitized text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Control characters forge lines and terminal escapes; bidi overrides make a log line read
/// differently from what it holds.
fn is_unsafe(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Text> for String {
    fn from(text: Text) -> Self {
        text.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::newline("a\nb", "a b")]
    #[case::crlf("a\r\nb", "a  b")]
    #[case::escape("\x1b[2Jx", " [2Jx")]
    #[case::nul("a\0b", "a b")]
    #[case::bidi("a\u{202e}b", "a b")]
    #[case::next_line("a\u{85}b", "a b")]
    #[case::plain("plain text: ok", "plain text: ok")]
    fn control_characters_become_spaces(#[case] raw: &str, #[case] want: &str) {
        assert_eq!(Text::new(raw).as_str(), want);
    }

    #[rstest]
    #[case::ascii("x".repeat(5000))]
    #[case::multibyte("é".repeat(5000))]
    #[case::four_byte("🦀".repeat(5000))]
    fn long_text_is_cut_on_a_char_boundary(#[case] raw: String) {
        let text = Text::new(&raw);
        assert!(text.as_str().len() <= Text::MAX_BYTES, "{text}");
        assert!(text.as_str().ends_with('…'));
    }

    #[test]
    fn bytes_are_read_lossily_and_bounded() {
        let text = Text::from_bytes(&[b'a', 0xff, b'\n', b'b']);
        assert_eq!(text.as_str(), "a\u{fffd} b");
        assert!(Text::from_bytes(&vec![b'x'; 1 << 20]).as_str().len() <= Text::MAX_BYTES);
    }
}
