//! Saturating byte arithmetic for the estimators (a leaf: imports nothing).

/// The product of `xs`, saturating: a figure beyond `u64` is `u64::MAX` bytes, which fits no
/// budget (the estimators' products of several dimensions and settings can exceed `u64` even
/// within the parsers' and the CLI's bounds).
pub(crate) fn mul_all<const N: usize>(xs: [u64; N]) -> u64 {
    xs.into_iter().fold(1, u64::saturating_mul)
}

/// The sum of `xs`, saturating (see [`mul_all`]).
pub(crate) fn add_all<const N: usize>(xs: [u64; N]) -> u64 {
    xs.into_iter().fold(0, u64::saturating_add)
}
