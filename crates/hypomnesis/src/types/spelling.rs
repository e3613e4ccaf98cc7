//! One definition of each contract value's spelling. `spelled!` declares an enum whose
//! variants each name their text once; from that one list come `ALL`, `as_str`, `Display`,
//! `FromStr` and, with the `serde` feature, `Serialize` and `Deserialize` (the same text in
//! JSON, in tables and on the command line). `text_serde!` gives a type that is already
//! `Display` and `FromStr` (a `PciBusId`, a `ProcessKind`) the serde half.

/// `Serialize` as the value's `Display` text and `Deserialize` through its `FromStr` (feature
/// `serde`): one spelling for text and JSON.
macro_rules! text_serde {
    ($($t:ty),+ $(,)?) => {$(
        #[cfg(feature = "serde")]
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        #[cfg(feature = "serde")]
        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $crate::types::spelling::from_text(d)
            }
        }
    )+};
}
pub(crate) use text_serde;

/// Declares a contract enum from one list of `Variant = "spelling",` lines (doc comments and
/// attributes allowed on each), and derives from it:
/// - `ALL`, every spelled variant in the order written;
/// - `as_str`, the spelling, and `Display` writing it;
/// - `FromStr`, its inverse (exact text; an unknown one is an [`UnknownSpelling`] naming the
///   type);
/// - with the `serde` feature, `Serialize` and `Deserialize` as that text.
///
/// An open set ends with `} else { Other(String), }`: any other text is kept as read, so
/// `FromStr` never fails (its error is [`std::convert::Infallible`]) and `parse` gives the value
/// directly.
macro_rules! spelled {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )+
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// Every variant, in the order declared.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The spelling: in JSON, in text output and for `FromStr`.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::types::spelling::UnknownSpelling;

            /// The variant spelled `s` (exactly as [`Self::as_str`] writes it).
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok($name::$variant),)+
                    _ => Err($crate::types::spelling::UnknownSpelling::new(
                        stringify!($name),
                        s,
                        &[$($text),+].join(", "),
                    )),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        $crate::types::spelling::text_serde!($name);
    };
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )+
        } else {
            $(#[$ometa:meta])* $other:ident(String),
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )+
            $(#[$ometa])* $other(String),
        }

        impl $name {
            /// Every spelled variant, in the order declared (not the open one).
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The spelling: in JSON, in text output and for `FromStr` (an open value's text
            /// as read).
            pub fn as_str(&self) -> &str {
                match self {
                    $($name::$variant => $text,)+
                    $name::$other(s) => s,
                }
            }

            /// The value `text` spells; any other text is kept as read (pure).
            pub fn parse(text: &str) -> $name {
                match text {
                    $($text => $name::$variant,)+
                    other => $name::$other(other.to_string()),
                }
            }
        }

        impl std::str::FromStr for $name {
            type Err = std::convert::Infallible;

            /// As [`Self::parse`]: never fails.
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Ok($name::parse(s))
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        $crate::types::spelling::text_serde!($name);
    };
}
pub(crate) use spelled;

/// A text that spells no value of a contract enum (its `FromStr` error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {text:?} (expected {expected})")]
#[non_exhaustive]
pub struct UnknownSpelling {
    /// The type (`Source`, `ProcessKind`, …).
    pub what: &'static str,
    /// The text (its first 64 characters).
    pub text: String,
    /// What is accepted.
    pub expected: String,
}

impl UnknownSpelling {
    /// `text` is not a `what`; `expected` says what is.
    pub fn new(what: &'static str, text: &str, expected: &str) -> UnknownSpelling {
        UnknownSpelling {
            what,
            text: text.chars().take(64).collect(),
            expected: expected.to_string(),
        }
    }
}

/// `Deserialize` through `FromStr`: a string, parsed (no copy when the input lends it).
#[cfg(feature = "serde")]
pub(crate) fn from_text<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    struct Text<T>(std::marker::PhantomData<T>);
    impl<T> serde::de::Visitor<'_> for Text<T>
    where
        T: std::str::FromStr,
        T::Err: std::fmt::Display,
    {
        type Value = T;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a string")
        }

        fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<T, E> {
            s.parse().map_err(E::custom)
        }
    }
    d.deserialize_str(Text(std::marker::PhantomData))
}
