//! [`ProcessName`]: a process name as the kernel keeps it — bytes, not text.
//!
//! A process may name itself anything (`prctl(PR_SET_NAME)`, the file name it was executed
//! as): `comm` and `argv[0]` are bytes with no encoding, so a name is kept as bytes and never
//! decoded on the way in. A process is never dropped, nor its memory lost, for its name.
//!
//! Out, a name has three forms:
//! - for a terminal, [`ProcessName::escaped`] (also its `Display`): valid UTF-8 as it is, each
//!   byte that is not valid UTF-8 and each control character as `\xNN` (`\u{NNNN}` above
//!   U+00FF), so a hostile name can neither break a line nor send an escape sequence;
//! - in JSON, the `name` field is the lossy UTF-8 text ([`ProcessName::to_string_lossy`]:
//!   each invalid sequence becomes U+FFFD) — for a valid UTF-8 name, exactly the name — and,
//!   only when the name is not valid UTF-8, a sibling `name_bytes_hex` holds the exact bytes in
//!   lowercase hex ([`ProcessName::bytes_hex`]);
//! - the bytes themselves, [`ProcessName::as_bytes`].

use std::borrow::Cow;
use std::fmt::{self, Write as _};

/// A process name: the raw bytes of `comm` (or of `argv[0]`'s base name), never decoded on
/// the way in. Shown three ways: [`ProcessName::escaped`] for a terminal (also `Display`),
/// [`ProcessName::to_string_lossy`] and [`ProcessName::bytes_hex`] in JSON (`name` and, only
/// when not valid UTF-8, `name_bytes_hex`), and the bytes ([`ProcessName::as_bytes`]).
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcessName(Vec<u8>);

impl ProcessName {
    /// A name from its raw bytes.
    pub fn from_bytes(bytes: impl Into<Vec<u8>>) -> ProcessName {
        ProcessName(bytes.into())
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The name as text, when it is valid UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }

    /// Whether the name is valid UTF-8.
    pub fn is_utf8(&self) -> bool {
        self.as_str().is_some()
    }

    /// The name as text, each invalid UTF-8 sequence replaced by U+FFFD (the JSON `name`).
    pub fn to_string_lossy(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.0)
    }

    /// The exact bytes in lowercase hex, only when the name is not valid UTF-8 (the JSON
    /// `name_bytes_hex`).
    pub fn bytes_hex(&self) -> Option<String> {
        if self.is_utf8() {
            return None;
        }
        let mut out = String::with_capacity(self.0.len() * 2);
        for b in &self.0 {
            let _ = write!(out, "{b:02x}");
        }
        Some(out)
    }

    /// The name for a terminal: valid UTF-8 as it is; each byte that is not valid UTF-8 and
    /// each control character as `\xNN` (`\u{NNNN}` above U+00FF), so a hostile name can
    /// neither break a line nor send an escape sequence.
    pub fn escaped(&self) -> String {
        let mut out = String::with_capacity(self.0.len());
        for chunk in self.0.utf8_chunks() {
            for c in chunk.valid().chars() {
                push_char(&mut out, c);
            }
            for b in chunk.invalid() {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
        out
    }

    /// Whether the name has no bytes.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }
}

impl ProcessName {
    /// Any text escaped for a terminal as a name is (a command line, a user name, a message
    /// that quotes one): each control character as `\xNN` (`\u{NNNN}` above U+00FF).
    pub fn escape_str(text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        for c in text.chars() {
            push_char(&mut out, c);
        }
        out
    }
}

/// One character for a terminal: itself, or `\xNN` / `\u{N}` for a control character.
fn push_char(out: &mut String, c: char) {
    if c.is_control() {
        let code = u32::from(c);
        if code < 0x100 {
            let _ = write!(out, "\\x{code:02x}");
        } else {
            let _ = write!(out, "\\u{{{code:x}}}");
        }
    } else {
        out.push(c);
    }
}

impl fmt::Display for ProcessName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.escaped())
    }
}

impl fmt::Debug for ProcessName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{}\"", self.escaped())
    }
}

impl From<&str> for ProcessName {
    fn from(s: &str) -> ProcessName {
        ProcessName(s.as_bytes().to_vec())
    }
}

impl From<String> for ProcessName {
    fn from(s: String) -> ProcessName {
        ProcessName(s.into_bytes())
    }
}

impl From<&[u8]> for ProcessName {
    fn from(b: &[u8]) -> ProcessName {
        ProcessName(b.to_vec())
    }
}

impl From<Vec<u8>> for ProcessName {
    fn from(b: Vec<u8>) -> ProcessName {
        ProcessName(b)
    }
}

impl PartialEq<str> for ProcessName {
    fn eq(&self, other: &str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl PartialEq<&str> for ProcessName {
    fn eq(&self, other: &&str) -> bool {
        self.0 == other.as_bytes()
    }
}

/// Serialised as the lossy text (the JSON `name`); the containing types add `name_bytes_hex`
/// beside it through `serde_fields`.
#[cfg(feature = "serde")]
impl serde::Serialize for ProcessName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string_lossy())
    }
}

/// `#[serde(flatten, serialize_with = …, deserialize_with = …)]` helpers: a name field written
/// as `"name": …` and, for a name that is not valid UTF-8, `"name_bytes_hex": …` beside it; read
/// back from the exact bytes where `name_bytes_hex` is present, else from the text.
#[cfg(feature = "serde")]
pub(crate) mod serde_fields {
    use serde::de::{Deserialize, Deserializer, Error as _};
    use serde::ser::{SerializeStruct, Serializer};

    use super::ProcessName;

    fn fields<S: Serializer>(name: Option<&ProcessName>, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("ProcessName", 2)?;
        st.serialize_field("name", &name)?;
        match name.and_then(ProcessName::bytes_hex) {
            Some(hex) => st.serialize_field("name_bytes_hex", &hex)?,
            None => st.skip_field("name_bytes_hex")?,
        }
        st.end()
    }

    /// For `name: ProcessName`.
    pub(crate) fn required<S: Serializer>(name: &ProcessName, s: S) -> Result<S::Ok, S::Error> {
        fields(Some(name), s)
    }

    /// For `name: Option<ProcessName>` (`null` when absent).
    #[allow(clippy::ref_option)] // serde's `serialize_with` passes `&Option<T>`
    pub(crate) fn optional<S: Serializer>(
        name: &Option<ProcessName>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        fields(name.as_ref(), s)
    }

    /// For `name: Option<ProcessName>`: the bytes of `name_bytes_hex` when present (two
    /// lowercase or uppercase hex digits per byte), else the text of `name`.
    pub(crate) fn optional_from<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<ProcessName>, D::Error> {
        #[derive(serde::Deserialize)]
        struct Fields {
            name: Option<String>,
            #[serde(default)]
            name_bytes_hex: Option<String>,
        }
        let f = Fields::deserialize(d)?;
        match f.name_bytes_hex {
            Some(hex) => from_hex(&hex)
                .map(|b| Some(ProcessName::from_bytes(b)))
                .ok_or_else(|| {
                    D::Error::custom("name_bytes_hex is not an even number of hex digits")
                }),
            None => Ok(f.name.map(ProcessName::from)),
        }
    }

    fn from_hex(hex: &str) -> Option<Vec<u8>> {
        let digits = hex.as_bytes();
        if !digits.len().is_multiple_of(2) {
            return None;
        }
        digits
            .chunks(2)
            .map(|pair| {
                let digit = |b: u8| char::from(b).to_digit(16);
                u8::try_from(digit(pair[0])? * 16 + digit(pair[1])?).ok()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_utf8_name_is_itself_everywhere() {
        let n = ProcessName::from("python3 — 訓練");
        assert_eq!(n.as_str(), Some("python3 — 訓練"));
        assert_eq!(n.escaped(), "python3 — 訓練");
        assert_eq!(n.to_string_lossy(), "python3 — 訓練");
        assert_eq!(n.bytes_hex(), None);
        assert_eq!(n, "python3 — 訓練");
    }

    #[test]
    fn invalid_bytes_are_kept_and_escaped() {
        let n = ProcessName::from_bytes(b"gpu\xff\xfejob".to_vec());
        assert_eq!(n.as_bytes(), b"gpu\xff\xfejob");
        assert!(!n.is_utf8());
        assert_eq!(n.escaped(), "gpu\\xff\\xfejob");
        assert_eq!(n.to_string(), "gpu\\xff\\xfejob");
        assert_eq!(n.to_string_lossy(), "gpu\u{fffd}\u{fffd}job");
        assert_eq!(n.bytes_hex().as_deref(), Some("677075fffe6a6f62"));
        // A cut multi-byte character (the kernel cuts comm at 15 bytes, mid-character).
        let cut = ProcessName::from_bytes(b"caf\xc3".to_vec());
        assert_eq!(cut.escaped(), "caf\\xc3");
        assert_eq!(format!("{cut:?}"), "\"caf\\xc3\"");
    }

    #[test]
    fn control_characters_are_escaped_for_a_terminal() {
        let n = ProcessName::from("a\x1b[31mred\nline\u{85}");
        assert_eq!(n.escaped(), "a\\x1b[31mred\\x0aline\\x85");
        assert!(n.is_utf8(), "valid UTF-8: no hex in JSON");
    }

    #[cfg(feature = "serde")]
    #[test]
    fn json_has_the_lossy_name_and_the_exact_bytes() {
        let json = |name: Option<ProcessName>| {
            #[derive(serde::Serialize)]
            struct One {
                pid: u32,
                #[serde(flatten, serialize_with = "serde_fields::optional")]
                name: Option<ProcessName>,
                user: Option<String>,
            }
            serde_json::to_string(&One {
                pid: 7,
                name,
                user: None,
            })
            .unwrap()
        };
        assert_eq!(json(None), r#"{"pid":7,"name":null,"user":null}"#);
        assert_eq!(
            json(Some("py".into())),
            r#"{"pid":7,"name":"py","user":null}"#
        );
        assert_eq!(
            json(Some(ProcessName::from_bytes(b"a\xffb".to_vec()))),
            "{\"pid\":7,\"name\":\"a\u{fffd}b\",\"name_bytes_hex\":\"61ff62\",\"user\":null}"
        );
    }
}
