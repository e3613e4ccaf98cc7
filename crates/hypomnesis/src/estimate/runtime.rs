//! The runtimes `hmn fits` models and the vocabulary of their settings: [`Runtime`] (with the
//! version family each rule was read from), the KV cache element type [`KvDtype`] and which
//! runtime accepts which ([`KvDtype::check`]), flash attention ([`FlashAttn`]), vLLM's
//! `gpu_memory_utilization` ([`Utilization`]) and the typed refusal of a setting a runtime does
//! not have ([`ParamError`]).

use crate::types::error::ParseError;
use crate::types::spelling::spelled;

spelled! {
    /// The KV cache's element type. Spelled as llama.cpp does (`f32`, `f16`, `bf16`, `fp8`,
    /// `q8_0`, …); [`KvDtype::parse`] also takes the other runtimes' names.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    #[non_exhaustive]
    pub enum KvDtype {
        /// 4 bytes.
        F32 = "f32",
        /// 2 bytes.
        F16 = "f16",
        /// 2 bytes.
        BF16 = "bf16",
        /// 1 byte (vLLM `fp8`, `fp8_e4m3`, `fp8_e5m2`).
        F8 = "fp8",
        /// llama.cpp `q8_0`: 34 bytes per 32 elements.
        Q8_0 = "q8_0",
        /// llama.cpp `q4_0`: 18 bytes per 32 elements.
        Q4_0 = "q4_0",
        /// llama.cpp `q4_1`: 20 bytes per 32 elements.
        Q4_1 = "q4_1",
        /// llama.cpp `q5_0`: 22 bytes per 32 elements.
        Q5_0 = "q5_0",
        /// llama.cpp `q5_1`: 24 bytes per 32 elements.
        Q5_1 = "q5_1",
        /// llama.cpp `iq4_nl`: 18 bytes per 32 elements.
        Iq4Nl = "iq4_nl",
    }
}

impl KvDtype {
    /// Parses `f32`, `f16`, `bf16`, `fp8`/`f8`/`fp8_e4m3`/`fp8_e5m2`, `q8_0`, `q4_0`, `q4_1`,
    /// `q5_0`, `q5_1`, `iq4_nl` (case-insensitive; vLLM's `auto`, `float16`, `bfloat16` too).
    pub fn parse(s: &str) -> Result<KvDtype, ParseError> {
        let lower = s.to_ascii_lowercase();
        Ok(match lower.as_str() {
            "fp32" | "float32" => KvDtype::F32,
            "fp16" | "float16" | "half" => KvDtype::F16,
            "bfloat16" | "auto" => KvDtype::BF16,
            "f8" | "fp8_e4m3" | "fp8_e5m2" => KvDtype::F8,
            other => other.parse().map_err(|_| {
                ParseError::new(format!(
                    "unknown KV cache type {other:?} (expected f32, f16, bf16, fp8, q8_0, q4_0, \
                     q4_1, q5_0, q5_1 or iq4_nl)"
                ))
            })?,
        })
    }

    /// `(bytes, elements)` of one block (ggml's type traits; 1 element for plain types).
    const fn block(self) -> (u64, u64) {
        match self {
            KvDtype::F32 => (4, 1),
            KvDtype::F16 | KvDtype::BF16 => (2, 1),
            KvDtype::F8 => (1, 1),
            KvDtype::Q8_0 => (34, 32),
            KvDtype::Q4_0 | KvDtype::Iq4Nl => (18, 32),
            KvDtype::Q4_1 => (20, 32),
            KvDtype::Q5_0 => (22, 32),
            KvDtype::Q5_1 => (24, 32),
        }
    }

    /// Bytes for `elements` elements (block types round up to whole blocks).
    pub fn bytes(self, elements: u64) -> u64 {
        let (bytes, per) = self.block();
        elements.div_ceil(per).saturating_mul(bytes)
    }

    /// Whether this is one of llama.cpp's block-quantized types.
    pub const fn is_quantized(self) -> bool {
        self.block().1 > 1
    }

    /// Whether `runtime` accepts this type: vLLM's `--kv-cache-dtype` (`auto`/`bfloat16`/
    /// `float16`, `fp8*`: `vllm/config/cache.py` `CacheDType`), llama.cpp's `--cache-type-k/-v`
    /// (`f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1`: `common/arg.cpp`
    /// `kv_cache_types`), and for PyTorch the plain float types.
    ///
    /// # Errors
    /// [`ParamError::KvDtype`] naming the type, the runtime and what it accepts.
    pub fn check(self, runtime: Runtime) -> Result<(), ParamError> {
        let ok = |d: KvDtype| match runtime {
            Runtime::Vllm => matches!(d, KvDtype::F16 | KvDtype::BF16 | KvDtype::F8),
            Runtime::LlamaCpp => d != KvDtype::F8,
            Runtime::Generic => matches!(d, KvDtype::F32 | KvDtype::F16 | KvDtype::BF16),
        };
        if ok(self) {
            return Ok(());
        }
        let accepted: Vec<&str> = KvDtype::ALL
            .iter()
            .filter(|d| ok(**d))
            .map(|d| d.as_str())
            .collect();
        Err(ParamError::KvDtype {
            dtype: self,
            runtime,
            accepted: accepted.join(", "),
        })
    }
}

spelled! {
    /// The runtime that will hold the model; it decides sliding-window caching, padding and
    /// overheads. Spelled `generic`, `llama.cpp`, `vllm`; [`Runtime::parse`] also takes other
    /// names.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    #[non_exhaustive]
    pub enum Runtime {
        /// PyTorch / transformers.
        #[default]
        Generic = "generic",
        /// llama.cpp (and servers built on it).
        LlamaCpp = "llama.cpp",
        /// vLLM.
        Vllm = "vllm",
    }
}

impl Runtime {
    /// Parses `generic`, `llama.cpp` (or `llamacpp`), `vllm`.
    pub fn parse(s: &str) -> Result<Runtime, ParseError> {
        match s.to_ascii_lowercase().as_str() {
            "pytorch" | "transformers" => Ok(Runtime::Generic),
            "llamacpp" | "llama-cpp" => Ok(Runtime::LlamaCpp),
            other => other.parse().map_err(|_| {
                ParseError::new(format!(
                    "unknown runtime {other:?} (expected generic, llama.cpp or vllm)"
                ))
            }),
        }
    }

    /// The runtime of a run: the one asked for, else llama.cpp for a CPU-only run (the CPU
    /// rules are llama.cpp's) and generic otherwise. A CPU-only run with another runtime is
    /// refused by [`crate::estimate::FitParams::validate`].
    pub fn for_target(requested: Option<Runtime>, cpu_only: bool) -> Runtime {
        match (requested, cpu_only) {
            (Some(r), _) => r,
            (None, true) => Runtime::LlamaCpp,
            (None, false) => Runtime::Generic,
        }
    }

    /// The version family whose behaviour the rules were read from (`docs/estimation.md`).
    pub const fn family(self) -> &'static str {
        match self {
            Runtime::Generic => "PyTorch/transformers (SDPA attention unless --flash-attn off)",
            Runtime::LlamaCpp => {
                "llama.cpp 2026 builds: -c padded to 256 (PR #17046), SWA cells = window × slots \
                 (unified) + ubatch (PR #13833), output layer offloaded first (PR #18148)"
            }
            Runtime::Vllm => {
                "vLLM v1 engine (v0.11 and later): hybrid KV cache manager, 16-token blocks, \
                 gpu_memory_utilization reserved at start"
            }
        }
    }
}

spelled! {
    /// Which of llama.cpp's callers sets the context parameters: they differ in the outputs the
    /// worst-case graph reserves, `swa_full`, flash attention and `n_batch` (ggml-org/llama.cpp
    /// `0c1e57098`; `docs/estimation.md`, "The tool families").
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    #[non_exhaustive]
    pub enum LlamaApi {
        /// llama-server and llama-cli (which starts the embedded server): outputs reserved for
        /// the slots (`n_outputs_max = n_parallel`, `tools/server/server-context.cpp`), `swa_full`
        /// off, flash attention `auto`, `n_batch` 2048.
        #[default]
        Server = "server",
        /// The C API's `llama_context_default_params()` as llama-cpp-python passes it: outputs
        /// reserved for `n_batch` (`n_outputs_max = 0`, `llama-context.cpp:250`), **`swa_full`
        /// on** (`llama-context.cpp:3788`), flash attention **off** unless asked
        /// (llama-cpp-python's `flash_attn=False` → `DISABLED`; the C API's own default is
        /// `auto`), `n_batch` 512 (llama-cpp-python; the C API's is 2048).
        Library = "library",
        /// The tools built on `common` (llama-completion, llama-perplexity, llama-embedding,
        /// llama-bench): outputs reserved for `n_batch` (`common/common.h:459`), `swa_full` off
        /// (`common/common.h:574`), flash attention `auto`, `n_batch` 2048.
        Common = "common",
    }
}

impl LlamaApi {
    /// Parses `server`, `library`, `common` (also the tools' names: `llama-server`, `cli`,
    /// `llama-cli`; `c`, `python`, `llama-cpp-python`; `bench`, `llama-bench`).
    pub fn parse(s: &str) -> Result<LlamaApi, ParseError> {
        match s.to_ascii_lowercase().as_str() {
            "llama-server" | "cli" | "llama-cli" => Ok(LlamaApi::Server),
            "c" | "python" | "llama-cpp-python" => Ok(LlamaApi::Library),
            "bench" | "llama-bench" => Ok(LlamaApi::Common),
            other => other.parse().map_err(|_| {
                ParseError::new(format!(
                    "unknown llama.cpp API {other:?} (expected server, library or common)"
                ))
            }),
        }
    }

    /// The tools that get these parameters, in words.
    pub const fn tools(self) -> &'static str {
        match self {
            LlamaApi::Server => "llama-server and llama-cli",
            LlamaApi::Library => {
                "the C API's defaults as llama-cpp-python passes them (and direct C API users)"
            }
            LlamaApi::Common => {
                "llama-completion, llama-perplexity, llama-bench and the other common-based tools"
            }
        }
    }

    /// Whether the sliding-window cache is full-size unless asked otherwise.
    pub const fn swa_full(self) -> bool {
        matches!(self, LlamaApi::Library)
    }

    /// Whether the worst-case graph reserves an output per token of the batch (`n_batch`)
    /// rather than one per slot.
    pub const fn outputs_per_token(self) -> bool {
        !matches!(self, LlamaApi::Server)
    }

    /// The default `n_batch`.
    pub const fn default_n_batch(self) -> u64 {
        match self {
            LlamaApi::Library => 512,
            LlamaApi::Server | LlamaApi::Common => 2048,
        }
    }
}

spelled! {
    /// Flash attention (`-fa on|off|auto` in llama.cpp; eager vs SDPA attention in PyTorch).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    #[non_exhaustive]
    pub enum FlashAttn {
        /// The runtime decides (llama.cpp's default since 2025).
        #[default]
        Auto = "auto",
        /// Forced on.
        On = "on",
        /// Forced off: the attention score matrix is materialised.
        Off = "off",
    }
}

impl FlashAttn {
    /// Parses `on`, `off`, `auto` (also `1`/`0`, `true`/`false`, `enabled`/`disabled`).
    pub fn parse(s: &str) -> Result<FlashAttn, ParseError> {
        match s.to_ascii_lowercase().as_str() {
            "1" | "true" | "enabled" => Ok(FlashAttn::On),
            "0" | "false" | "disabled" => Ok(FlashAttn::Off),
            other => other.parse().map_err(|_| {
                ParseError::new(format!(
                    "unknown flash attention setting {other:?} (expected on, off or auto)"
                ))
            }),
        }
    }
}

/// A fraction of a device's memory (vLLM's `gpu_memory_utilization`), kept in ten-thousandths
/// so that it compares exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Utilization(u32);

impl Utilization {
    /// vLLM's default, 0.9 (the value of `CacheConfig.gpu_memory_utilization` up to v0.20;
    /// v0.21 raised it to 0.92, vllm PR #38284).
    pub const VLLM_DEFAULT: Utilization = Utilization(9000);

    /// Parses a fraction in (0, 1] with at most four decimals (`0.9`, `0.92`, `1`).
    pub fn parse(s: &str) -> Result<Utilization, ParseError> {
        let bad = || {
            ParseError::new(format!(
                "invalid GPU memory utilization {s:?}: expected a fraction in (0, 1] such as 0.9"
            ))
        };
        let t = s.trim();
        let (int, frac) = t.split_once('.').unwrap_or((t, ""));
        if int.is_empty() && frac.is_empty()
            || frac.len() > 4
            || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
        {
            return Err(bad());
        }
        let int: u32 = if int.is_empty() {
            0
        } else {
            int.parse().map_err(|_| bad())?
        };
        let mut f = frac.to_string();
        while f.len() < 4 {
            f.push('0');
        }
        let frac: u32 = f.parse().map_err(|_| bad())?;
        let v = int.checked_mul(10_000).and_then(|i| i.checked_add(frac));
        match v {
            Some(v) if (1..=10_000).contains(&v) => Ok(Utilization(v)),
            _ => Err(bad()),
        }
    }

    /// The fraction.
    pub fn as_f64(self) -> f64 {
        f64::from(self.0) / 10_000.0
    }

    /// `self × total`, rounded down.
    pub fn of(self, total: u64) -> u64 {
        u64::try_from(u128::from(total) * u128::from(self.0) / 10_000).unwrap_or(u64::MAX)
    }
}

impl Default for Utilization {
    fn default() -> Self {
        Utilization::VLLM_DEFAULT
    }
}

impl std::fmt::Display for Utilization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = format!("{}.{:04}", self.0 / 10_000, self.0 % 10_000);
        let s = s.trim_end_matches('0').trim_end_matches('.');
        f.write_str(s)
    }
}

/// A setting the chosen runtime does not have, or a combination it refuses: the estimate is
/// not made (`hmn fits` exits 2 with this message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParamError {
    /// An option of another runtime (`--gpu-layers` with vLLM, `--tensor-parallel-size` with
    /// llama.cpp, …).
    #[error("{option} is a {owner} setting; it has no meaning for --runtime {}", .runtime.as_str())]
    NotForRuntime {
        /// The option, as the CLI spells it.
        option: &'static str,
        /// The runtime(s) that have it.
        owner: &'static str,
        /// The runtime chosen.
        runtime: Runtime,
    },
    /// A KV cache type the runtime does not accept.
    #[error("--kv-dtype {} is not accepted by {} (it accepts {accepted})", .dtype.as_str(), .runtime.as_str())]
    KvDtype {
        /// The type.
        dtype: KvDtype,
        /// The runtime.
        runtime: Runtime,
        /// What it accepts.
        accepted: String,
    },
    /// llama.cpp refuses a quantized V cache without flash attention
    /// (`llama_init_from_model`: "V cache quantization requires flash_attn").
    #[error(
        "llama.cpp refuses a quantized V cache ({}) with flash attention off: use --flash-attn on or auto, or an f16 cache",
        .dtype.as_str()
    )]
    QuantizedVWithoutFlashAttn {
        /// The type.
        dtype: KvDtype,
    },
    /// llama-cpp-python passes flash attention off unless `flash_attn=True`, and llama.cpp
    /// refuses a quantized V cache without it.
    #[error(
        "llama.cpp refuses a quantized V cache ({}) with flash attention off, and llama-cpp-python turns it off unless flash_attn=True: use --flash-attn on, or an f16 cache",
        .dtype.as_str()
    )]
    LibraryQuantizedV {
        /// The type.
        dtype: KvDtype,
    },
    /// vLLM requires the query heads to divide by the tensor-parallel size
    /// (`ModelConfig.verify_with_parallel_config`).
    #[error(
        "vLLM refuses --tensor-parallel-size {tp}: the model's {heads} attention heads are not divisible by it"
    )]
    HeadsNotDivisible {
        /// Query heads.
        heads: u64,
        /// Tensor-parallel size.
        tp: u64,
    },
    /// vLLM has no CPU path modelled here.
    #[error(
        "vLLM needs a GPU (its CPU backend is not modelled): use --runtime llama.cpp or generic for a CPU-only estimate"
    )]
    VllmOnCpu,
    /// Two options that mean the same thing in different words.
    #[error("{0}")]
    Conflict(&'static str),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kv_type_parses_back_and_has_its_block_size() {
        for d in KvDtype::ALL.iter().copied() {
            assert_eq!(KvDtype::parse(d.as_str()).unwrap(), d);
        }
        // ggml type traits: bytes per 32 elements.
        let per32: Vec<u64> = KvDtype::ALL.iter().map(|d| d.bytes(32)).collect();
        assert_eq!(per32, [128, 64, 64, 32, 34, 18, 20, 22, 24, 18]);
        assert_eq!(KvDtype::Q8_0.bytes(33), 68, "whole blocks");
        assert!(KvDtype::Q4_1.is_quantized() && !KvDtype::BF16.is_quantized());
        assert!(KvDtype::parse("int3").is_err());
    }

    #[test]
    fn each_runtime_accepts_its_own_kv_types() {
        // vLLM CacheDType: auto/bfloat16/float16/fp8*; never a GGML block type.
        assert!(KvDtype::BF16.check(Runtime::Vllm).is_ok());
        assert!(KvDtype::F8.check(Runtime::Vllm).is_ok());
        let e = KvDtype::Q8_0.check(Runtime::Vllm).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--kv-dtype q8_0 is not accepted by vllm (it accepts f16, bf16, fp8)"
        );
        // llama.cpp kv_cache_types: no fp8.
        assert!(KvDtype::F8.check(Runtime::LlamaCpp).is_err());
        for d in [KvDtype::Q4_1, KvDtype::Iq4Nl, KvDtype::F32, KvDtype::BF16] {
            assert!(d.check(Runtime::LlamaCpp).is_ok(), "{d:?}");
        }
        assert!(KvDtype::Q4_0.check(Runtime::Generic).is_err());
    }

    #[test]
    fn utilization_is_exact() {
        assert_eq!(
            Utilization::parse("0.9").unwrap(),
            Utilization::VLLM_DEFAULT
        );
        assert_eq!(Utilization::parse("0.92").unwrap().to_string(), "0.92");
        assert_eq!(Utilization::parse("1").unwrap().of(80), 80);
        assert_eq!(Utilization::parse(".5").unwrap().of(10), 5);
        assert_eq!(Utilization::VLLM_DEFAULT.of(85_520_809_984), 76_968_728_985);
        for bad in ["0", "1.01", "-0.5", "0.12345", "x", "", ".", "0.9.1", "nan"] {
            assert!(Utilization::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn flash_attention_settings() {
        for f in [FlashAttn::Auto, FlashAttn::On, FlashAttn::Off] {
            assert_eq!(FlashAttn::parse(f.as_str()).unwrap(), f);
        }
        assert!(FlashAttn::parse("maybe").is_err());
    }
}
