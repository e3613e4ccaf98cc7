//! llama.cpp's `--split-mode layer` over several GPUs: which device each offloaded unit goes
//! to, by `--tensor-split` proportions ([`TensorSplit`]) or, without them, by each device's
//! free memory ([`assign_units`]); the proportions for a list of devices whose free memory may
//! be unknown ([`split_weights`]: unknown only when the split follows free memory).
//!
//! | Rule | Source (ggml-org/llama.cpp `0c1e57098`) |
//! |---|---|
//! | `-ts N0,N1,…`: split on `,` or `/`, each value `std::stof`, fewer than `llama_max_devices()` (16) values, the rest 0 | `common/arg.cpp:2830-2856`, `src/llama.cpp:86-88` |
//! | all zero (or none given): each device's free memory | `src/llama-model.cpp:1557-1575` |
//! | prefix sums normalised in `float`; unit `il` of the `act` offloaded units goes to `upper_bound(splits, (il − start) / act)` | `src/llama-model.cpp:1578-1600` |

use crate::types::error::ParseError;

/// `llama_max_devices()`: `-ts` takes fewer values than this.
pub const MAX_DEVICES: usize = 16;

/// llama.cpp `--tensor-split`: each GPU's proportion, in device order (non-negative, finite;
/// normalised by llama.cpp, so `3,1` and `0.75,0.25` are the same).
#[derive(Debug, Clone, Copy)]
pub struct TensorSplit {
    values: [f32; MAX_DEVICES],
    len: usize,
}

impl PartialEq for TensorSplit {
    fn eq(&self, other: &TensorSplit) -> bool {
        self.proportions()
            .iter()
            .map(|v| v.to_bits())
            .eq(other.proportions().iter().map(|v| v.to_bits()))
    }
}

// Finite, non-negative values only (the parser refuses the rest): bitwise equality is equality.
impl Eq for TensorSplit {}

impl TensorSplit {
    /// Parses llama.cpp's syntax: proportions separated by `,` or `/` (`3,1`, `0.6/0.4`), at
    /// most 15 of them, each a finite non-negative decimal number. Stricter than llama.cpp's
    /// `std::stof`, which also takes `-1`, `inf` or `3abc`.
    ///
    /// # Errors
    /// A [`ParseError`] naming the input and the offending value.
    pub fn parse(s: &str) -> Result<TensorSplit, ParseError> {
        let bad = |why: String| {
            ParseError::new(format!(
                "invalid tensor split {:?}: {why} (expected proportions such as 3,1)",
                s.chars().take(80).collect::<String>()
            ))
        };
        let parts: Vec<&str> = s
            .split([',', '/'])
            .filter(|p| !p.is_empty())
            .map(str::trim)
            .collect();
        if parts.is_empty() {
            return Err(bad("no value".to_string()));
        }
        if parts.len() >= MAX_DEVICES {
            return Err(bad(format!(
                "{} values; llama.cpp takes at most {}",
                parts.len(),
                MAX_DEVICES - 1
            )));
        }
        let mut values = [0f32; MAX_DEVICES];
        for (slot, part) in values.iter_mut().zip(&parts) {
            let ok = !part.is_empty()
                && part.bytes().all(|b| b.is_ascii_digit() || b == b'.')
                && part.bytes().filter(|b| *b == b'.').count() <= 1
                && part.bytes().any(|b| b.is_ascii_digit());
            let v = if ok { part.parse::<f32>().ok() } else { None };
            match v {
                Some(v) if v.is_finite() && v >= 0.0 => *slot = v,
                _ => return Err(bad(format!("{part:?} is not a non-negative number"))),
            }
        }
        Ok(TensorSplit {
            values,
            len: parts.len(),
        })
    }

    /// The proportions as given.
    pub fn proportions(&self) -> &[f32] {
        self.values.get(..self.len).unwrap_or(&[])
    }

    /// The proportions for `devices` GPUs (llama.cpp copies `n_devices` values: extra ones are
    /// ignored, missing ones are 0); `None` when they are all zero (then free memory decides).
    pub fn for_devices(&self, devices: usize) -> Option<Vec<f32>> {
        let v: Vec<f32> = (0..devices)
            .map(|i| self.values.get(i).copied().unwrap_or(0.0))
            .collect();
        v.iter().any(|x| *x != 0.0).then_some(v)
    }
}

impl std::fmt::Display for TensorSplit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.proportions().iter().map(|v| v.to_string()).collect();
        f.write_str(&parts.join(","))
    }
}

/// One device's free memory is unknown while llama.cpp's layer split follows free memory: no
/// device's share is known (an unknown figure is never taken as 0 bytes free).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the layer split follows free memory, and the device at position {position} does not report its free memory"
)]
#[non_exhaustive]
pub struct FreeUnknown {
    /// The device's position in the list (not its index).
    pub position: usize,
}

/// The proportions llama.cpp splits its layers by over devices whose free memory is `free`, in
/// device order: `tensor_split`'s for these devices when given and not all zero (then no free
/// figure is read), else each device's free memory (as `float`, as llama.cpp takes it).
///
/// # Errors
/// [`FreeUnknown`] when the split follows free memory and a device's is unknown.
pub fn split_weights(
    tensor_split: Option<&TensorSplit>,
    free: &[Option<u64>],
) -> Result<Vec<f32>, FreeUnknown> {
    if let Some(w) = tensor_split.and_then(|t| t.for_devices(free.len())) {
        return Ok(w);
    }
    free.iter()
        .enumerate()
        .map(|(position, f)| {
            #[allow(clippy::cast_precision_loss)]
            f.map(|f| f as f32).ok_or(FreeUnknown { position })
        })
        .collect()
}

/// The device (an index into `weights`) of each of `units` offloaded units, in unit order
/// (blocks, then the output layer), as llama.cpp assigns them: the prefix sums of `weights`
/// normalised in `float`, unit `k` to the first device whose share exceeds `k / units`
/// (`std::upper_bound`). All-zero or empty weights put every unit on device 0.
pub fn assign_units(units: u64, weights: &[f32]) -> Vec<usize> {
    let n = usize::try_from(units).unwrap_or(0);
    let mut splits = Vec::with_capacity(weights.len());
    let mut sum = 0f32;
    for w in weights {
        sum += *w;
        splits.push(sum);
    }
    if weights.is_empty() || sum.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return vec![0; n];
    }
    for s in &mut splits {
        *s /= sum;
    }
    let last = weights.len() - 1;
    (0..units)
        .map(|k| {
            // as llama.cpp: float(il - i_gpu_start) / act_gpu_layers
            #[allow(clippy::cast_precision_loss)]
            let x = k as f32 / units as f32;
            splits.iter().position(|s| *s > x).unwrap_or(last)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_cpp_syntax() {
        let t = TensorSplit::parse("3,1").unwrap();
        assert_eq!(t.proportions(), &[3.0, 1.0]);
        assert_eq!(
            TensorSplit::parse("0.6/0.4").unwrap().proportions(),
            &[0.6, 0.4]
        );
        assert_eq!(
            TensorSplit::parse("1,,2").unwrap().proportions(),
            &[1.0, 2.0]
        );
        assert_eq!(t.to_string(), "3,1");
        assert_eq!(t.for_devices(3), Some(vec![3.0, 1.0, 0.0]));
        assert_eq!(t.for_devices(1), Some(vec![3.0]));
        assert_eq!(TensorSplit::parse("0,0").unwrap().for_devices(2), None);
        for bad in [
            "",
            ",",
            "-1,1",
            "inf",
            "nan",
            "3abc",
            "1e3",
            "1..2",
            ".",
            "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16",
        ] {
            let e = TensorSplit::parse(bad).unwrap_err().to_string();
            assert!(e.starts_with("invalid tensor split"), "{bad}: {e}");
        }
        assert!(TensorSplit::parse(&"1,".repeat(15)).is_ok(), "15 values");
    }

    #[test]
    fn explicit_proportions_need_no_free_figure_and_free_memory_needs_every_one() {
        let t = TensorSplit::parse("3,1").unwrap();
        // --tensor-split decides: the unknown free figure is not read.
        assert_eq!(
            split_weights(Some(&t), &[None, Some(10)]),
            Ok(vec![3.0, 1.0])
        );
        // By free memory: the unknown one leaves the proportions unknown, never 0.
        assert_eq!(
            split_weights(None, &[Some(10), None]),
            Err(FreeUnknown { position: 1 })
        );
        // All zero for these devices: free memory decides again (llama.cpp's all_zero).
        let zeros = TensorSplit::parse("0,0").unwrap();
        assert_eq!(
            split_weights(Some(&zeros), &[None, Some(10)]),
            Err(FreeUnknown { position: 0 })
        );
        assert_eq!(
            split_weights(Some(&zeros), &[Some(10), Some(30)]),
            Ok(vec![10.0, 30.0])
        );
    }

    #[test]
    fn units_follow_the_proportions_as_llama_cpp_rounds_them() {
        // 4 units (3 blocks + output), 1 : 3.
        assert_eq!(assign_units(4, &[1.0, 3.0]), vec![0, 1, 1, 1]);
        assert_eq!(assign_units(4, &[1.0, 1.0]), vec![0, 0, 1, 1]);
        assert_eq!(assign_units(4, &[0.0, 1.0]), vec![1, 1, 1, 1]);
        assert_eq!(assign_units(4, &[0.0, 0.0]), vec![0, 0, 0, 0]);
        // 33 units over 3 equal GPUs: splits 1/3, 2/3, 1 in float; unit 11 is 11/33 = 1/3 in
        // float, not above the first split: GPU 1 (std::upper_bound).
        let a = assign_units(33, &[1.0, 1.0, 1.0]);
        assert_eq!(a.iter().filter(|d| **d == 0).count(), 11);
        assert_eq!(a[11], 1);
        assert_eq!(a.last(), Some(&2), "the output layer on the last GPU");
        // 81 units at 3,1: the first 61 (61 / 81 > 0.75) on GPU 0.
        let b = assign_units(81, &[3.0, 1.0]);
        assert_eq!(b.iter().filter(|d| **d == 0).count(), 61);
    }
}
