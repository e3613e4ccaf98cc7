//! Element types and exact tensor sizes: every safetensors dtype (sub-byte F4/F6 included) and
//! every GGML type (block-quantized: a row of `ne0` elements is `ne0 / block × bytes_per_block`).

use crate::types::error::ParseError;

/// A safetensors element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
#[allow(non_camel_case_types, missing_docs)]
pub enum SafetensorsDtype {
    BOOL,
    F4,
    F6_E2M3,
    F6_E3M2,
    U8,
    I8,
    F8_E5M2,
    F8_E4M3,
    F8_E8M0,
    F8_E4M3FNUZ,
    F8_E5M2FNUZ,
    I16,
    U16,
    F16,
    BF16,
    I32,
    U32,
    F32,
    C64,
    F64,
    I64,
    U64,
}

impl SafetensorsDtype {
    /// Bits per element (the format's own table: BOOL is stored in a byte).
    pub const fn bits(self) -> u64 {
        use SafetensorsDtype::*;
        match self {
            F4 => 4,
            F6_E2M3 | F6_E3M2 => 6,
            BOOL | U8 | I8 | F8_E5M2 | F8_E4M3 | F8_E8M0 | F8_E4M3FNUZ | F8_E5M2FNUZ => 8,
            I16 | U16 | F16 | BF16 => 16,
            I32 | U32 | F32 => 32,
            C64 | F64 | I64 | U64 => 64,
        }
    }

    /// Parses the header spelling (`"BF16"`, `"F8_E4M3"`, …).
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        use SafetensorsDtype::*;
        Ok(match s {
            "BOOL" => BOOL,
            "F4" => F4,
            "F6_E2M3" => F6_E2M3,
            "F6_E3M2" => F6_E3M2,
            "U8" => U8,
            "I8" => I8,
            "F8_E5M2" => F8_E5M2,
            "F8_E4M3" => F8_E4M3,
            "F8_E8M0" => F8_E8M0,
            "F8_E4M3FNUZ" => F8_E4M3FNUZ,
            "F8_E5M2FNUZ" => F8_E5M2FNUZ,
            "I16" => I16,
            "U16" => U16,
            "F16" => F16,
            "BF16" => BF16,
            "I32" => I32,
            "U32" => U32,
            "F32" => F32,
            "C64" => C64,
            "F64" => F64,
            "I64" => I64,
            "U64" => U64,
            other => {
                return Err(ParseError::new(format!(
                    "unknown safetensors dtype {other:?}"
                )));
            }
        })
    }
}

/// A GGML tensor type (the `ggml_type` numbers GGUF stores).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
#[allow(non_camel_case_types, missing_docs)]
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q8_1,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    Q8_K,
    IQ2_XXS,
    IQ2_XS,
    IQ3_XXS,
    IQ1_S,
    IQ4_NL,
    IQ3_S,
    IQ2_S,
    IQ4_XS,
    I8,
    I16,
    I32,
    I64,
    F64,
    IQ1_M,
    BF16,
    TQ1_0,
    TQ2_0,
    MXFP4,
}

impl GgmlType {
    /// From the id GGUF stores; ids of removed types (4, 5, 31–33, 36–38) are errors.
    pub fn from_id(id: u32) -> Result<Self, ParseError> {
        use GgmlType::*;
        Ok(match id {
            0 => F32,
            1 => F16,
            2 => Q4_0,
            3 => Q4_1,
            6 => Q5_0,
            7 => Q5_1,
            8 => Q8_0,
            9 => Q8_1,
            10 => Q2_K,
            11 => Q3_K,
            12 => Q4_K,
            13 => Q5_K,
            14 => Q6_K,
            15 => Q8_K,
            16 => IQ2_XXS,
            17 => IQ2_XS,
            18 => IQ3_XXS,
            19 => IQ1_S,
            20 => IQ4_NL,
            21 => IQ3_S,
            22 => IQ2_S,
            23 => IQ4_XS,
            24 => I8,
            25 => I16,
            26 => I32,
            27 => I64,
            28 => F64,
            29 => IQ1_M,
            30 => BF16,
            34 => TQ1_0,
            35 => TQ2_0,
            39 => MXFP4,
            other => {
                return Err(ParseError::new(format!(
                    "unknown or removed ggml type {other}"
                )));
            }
        })
    }

    /// The id GGUF stores.
    pub const fn id(self) -> u32 {
        use GgmlType::*;
        match self {
            F32 => 0,
            F16 => 1,
            Q4_0 => 2,
            Q4_1 => 3,
            Q5_0 => 6,
            Q5_1 => 7,
            Q8_0 => 8,
            Q8_1 => 9,
            Q2_K => 10,
            Q3_K => 11,
            Q4_K => 12,
            Q5_K => 13,
            Q6_K => 14,
            Q8_K => 15,
            IQ2_XXS => 16,
            IQ2_XS => 17,
            IQ3_XXS => 18,
            IQ1_S => 19,
            IQ4_NL => 20,
            IQ3_S => 21,
            IQ2_S => 22,
            IQ4_XS => 23,
            I8 => 24,
            I16 => 25,
            I32 => 26,
            I64 => 27,
            F64 => 28,
            IQ1_M => 29,
            BF16 => 30,
            TQ1_0 => 34,
            TQ2_0 => 35,
            MXFP4 => 39,
        }
    }

    /// (elements per block, bytes per block), as ggml's type traits.
    pub const fn block(self) -> (u64, u64) {
        use GgmlType::*;
        match self {
            F32 | I32 => (1, 4),
            F16 | BF16 | I16 => (1, 2),
            I8 => (1, 1),
            I64 | F64 => (1, 8),
            Q4_0 | IQ4_NL => (32, 18),
            Q4_1 => (32, 20),
            Q5_0 => (32, 22),
            Q5_1 => (32, 24),
            Q8_0 => (32, 34),
            Q8_1 => (32, 36),
            MXFP4 => (32, 17),
            Q2_K => (256, 84),
            Q3_K => (256, 110),
            Q4_K => (256, 144),
            Q5_K => (256, 176),
            Q6_K => (256, 210),
            Q8_K => (256, 292),
            IQ2_XXS => (256, 66),
            IQ2_XS => (256, 74),
            IQ2_S => (256, 82),
            IQ3_XXS => (256, 98),
            IQ3_S => (256, 110),
            IQ1_S => (256, 50),
            IQ1_M => (256, 56),
            IQ4_XS => (256, 136),
            TQ1_0 => (256, 54),
            TQ2_0 => (256, 66),
        }
    }

    /// Parses a name as llama.cpp spells it (`q8_0`, `Q4_K`, `f16`, `bf16`, …),
    /// case-insensitively.
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        (0..40)
            .filter_map(|id| GgmlType::from_id(id).ok())
            .find(|t| format!("{t:?}").eq_ignore_ascii_case(s))
            .ok_or_else(|| ParseError::new(format!("unknown ggml type {s:?}")))
    }
}

/// An element type of either format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Dtype {
    /// A safetensors dtype.
    Safetensors(SafetensorsDtype),
    /// A GGML type.
    Ggml(GgmlType),
}

impl std::fmt::Display for Dtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dtype::Safetensors(d) => write!(f, "{d:?}"),
            Dtype::Ggml(t) => write!(f, "{t:?}"),
        }
    }
}

/// Exact bytes of a tensor of `shape` (ne0, the innermost dimension, **last** for safetensors'
/// row-major shapes; pass GGML dims as GGUF stores them, ne0 first). Errors on overflow, on a
/// sub-byte tensor that does not fill whole bytes, and on a GGML row that is not a whole number
/// of blocks.
pub fn tensor_bytes(shape: &[u64], dtype: Dtype) -> Result<u64, ParseError> {
    let overflow = || ParseError::new(format!("tensor size overflows: shape {shape:?}"));
    match dtype {
        Dtype::Safetensors(d) => {
            let numel = shape
                .iter()
                .try_fold(1u64, |a, &b| a.checked_mul(b))
                .ok_or_else(overflow)?;
            let bits = numel.checked_mul(d.bits()).ok_or_else(overflow)?;
            if bits % 8 != 0 {
                return Err(ParseError::new(format!(
                    "{numel} {d:?} elements do not fill whole bytes"
                )));
            }
            Ok(bits / 8)
        }
        Dtype::Ggml(t) => {
            let (block, bytes) = t.block();
            let ne0 = shape.first().copied().unwrap_or(1);
            if ne0 % block != 0 {
                return Err(ParseError::new(format!(
                    "row of {ne0} is not a whole number of {t:?} blocks of {block}"
                )));
            }
            let row = (ne0 / block).checked_mul(bytes).ok_or_else(overflow)?;
            shape
                .iter()
                .skip(1)
                .try_fold(row, |a, &b| a.checked_mul(b))
                .ok_or_else(overflow)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safetensors_sizes() {
        let b = |s: &[u64], d| tensor_bytes(s, Dtype::Safetensors(d)).unwrap();
        assert_eq!(b(&[4096, 4096], SafetensorsDtype::BF16), 33_554_432);
        assert_eq!(b(&[3, 5], SafetensorsDtype::BOOL), 15, "BOOL is one byte");
        assert_eq!(b(&[4, 4], SafetensorsDtype::F4), 8);
        assert_eq!(b(&[4, 2], SafetensorsDtype::F6_E2M3), 6);
        assert_eq!(b(&[], SafetensorsDtype::F32), 4, "0-rank tensor");
        assert_eq!(b(&[0, 7], SafetensorsDtype::C64), 0);
        assert!(
            tensor_bytes(&[3], Dtype::Safetensors(SafetensorsDtype::F4)).is_err(),
            "half a byte"
        );
        assert!(tensor_bytes(&[u64::MAX, 2], Dtype::Safetensors(SafetensorsDtype::U8)).is_err());
        for name in ["F8_E4M3FNUZ", "F6_E3M2", "C64", "U64"] {
            assert!(SafetensorsDtype::parse(name).is_ok(), "{name}");
        }
        assert!(SafetensorsDtype::parse("F12").is_err());
    }

    #[test]
    fn ggml_block_sizes() {
        let b = |s: &[u64], t| tensor_bytes(s, Dtype::Ggml(t)).unwrap();
        assert_eq!(b(&[4096, 4096], GgmlType::Q4_0), 4096 / 32 * 18 * 4096);
        assert_eq!(b(&[4096, 14336], GgmlType::Q4_K), 16 * 144 * 14336);
        assert_eq!(
            b(&[256], GgmlType::Q8_K),
            292,
            "Q8_K is 9.125 bits, not 8.03"
        );
        assert_eq!(b(&[256], GgmlType::IQ1_M), 56);
        assert_eq!(b(&[64, 2], GgmlType::MXFP4), 2 * 17 * 2);
        assert!(
            tensor_bytes(&[100], Dtype::Ggml(GgmlType::Q4_K)).is_err(),
            "partial block"
        );
        assert_eq!(GgmlType::parse("q8_0").unwrap(), GgmlType::Q8_0);
        assert!(
            GgmlType::from_id(4).is_err() && GgmlType::from_id(36).is_err(),
            "removed types"
        );
        for id in 0..40 {
            if let Ok(t) = GgmlType::from_id(id) {
                assert_eq!(t.id(), id);
            }
        }
    }
}
