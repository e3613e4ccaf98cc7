//! The run parameters of an estimate ([`FitParams`]): context, batch, KV type, runtime and each
//! runtime's own settings, their defaults ([`FitParams::defaults`]) and the refusal of settings
//! the runtime does not have or refuses itself ([`FitParams::validate`]).

use super::arch::Architecture;
use super::runtime::{FlashAttn, KvDtype, LlamaApi, ParamError, Runtime, Utilization};
use super::split::TensorSplit;
use super::vllm;

/// How it will run. Options of one runtime are refused for another ([`FitParams::validate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct FitParams {
    /// Tokens per sequence; with [`FitParams::slots`], llama.cpp's `-c` (all slots together).
    pub context: u64,
    /// Sequences at once.
    pub batch: u64,
    /// KV cache element type.
    pub kv_dtype: KvDtype,
    /// The runtime.
    pub runtime: Runtime,
    /// Flash attention (llama.cpp `-fa`; eager vs SDPA attention for generic).
    pub flash_attn: FlashAttn,
    /// llama.cpp `-ub` (default 512).
    pub ubatch: Option<u64>,
    /// llama.cpp `-np`: the slots; `context` is then `-c`, shared or split between them.
    pub slots: Option<u64>,
    /// llama.cpp `--kv-unified` (default: split streams when `-np` is given, as llama.cpp).
    pub kv_unified: Option<bool>,
    /// llama.cpp `--swa-full`.
    pub swa_full: bool,
    /// llama.cpp `-ngl` (default: every layer and the output layer).
    pub gpu_layers: Option<u64>,
    /// vLLM `--gpu-memory-utilization` (default 0.9).
    pub gpu_memory_utilization: Option<Utilization>,
    /// vLLM `--tensor-parallel-size` (default 1).
    pub tensor_parallel: u64,
    /// vLLM `--max-num-batched-tokens` (default 8192).
    pub max_num_batched_tokens: Option<u64>,
    /// No GPU: every layer on the CPU, judged against the host's available RAM (llama.cpp).
    pub cpu_only: bool,
    /// llama.cpp: which caller sets the context parameters (default [`LlamaApi::Server`]).
    pub llama_api: Option<LlamaApi>,
    /// llama.cpp `-b` / `n_batch` (default: the API's, [`LlamaApi::default_n_batch`]).
    pub n_batch: Option<u64>,
    /// llama.cpp `--tensor-split`: each GPU's proportion of the offloaded layers (default: by
    /// free memory).
    pub tensor_split: Option<TensorSplit>,
}

/// Tokens per sequence when the caller gives none and the runtime does not decide it.
pub const DEFAULT_CONTEXT: u64 = 4096;

impl FitParams {
    /// Parameters for `context` tokens × `batch` sequences; every runtime setting at its
    /// runtime's default.
    pub fn new(context: u64, batch: u64, kv_dtype: KvDtype, runtime: Runtime) -> FitParams {
        FitParams {
            context,
            batch,
            kv_dtype,
            runtime,
            flash_attn: FlashAttn::Auto,
            ubatch: None,
            slots: None,
            kv_unified: None,
            swa_full: false,
            gpu_layers: None,
            gpu_memory_utilization: None,
            tensor_parallel: 1,
            max_num_batched_tokens: None,
            cpu_only: false,
            llama_api: None,
            n_batch: None,
            tensor_split: None,
        }
    }

    /// The defaults for `runtime` and a model of architecture `arch`:
    ///
    /// - context: [`DEFAULT_CONTEXT`] (4096); for vLLM the model's trained context
    ///   ([`Architecture::max_context`]) when known, since vLLM refuses to start unless one
    ///   sequence of `max_model_len` (the derived length by default) fits. The trained context
    ///   is not the default elsewhere: the other runtimes allocate what they are asked for;
    /// - batch: 1;
    /// - KV cache: f16 for llama.cpp (its default cache type), bf16 otherwise.
    ///
    /// Override each with [`FitParams::context`], [`FitParams::batch`],
    /// [`FitParams::kv_dtype`], and the runtime settings with their builders.
    pub fn defaults(runtime: Runtime, arch: Option<&Architecture>) -> FitParams {
        let context = match (runtime, arch.and_then(|a| a.max_context)) {
            (Runtime::Vllm, Some(trained)) => trained,
            _ => DEFAULT_CONTEXT,
        };
        let kv_dtype = match runtime {
            Runtime::LlamaCpp => KvDtype::F16,
            _ => KvDtype::BF16,
        };
        FitParams::new(context, 1, kv_dtype, runtime)
    }

    /// vLLM's `max_num_batched_tokens` in effect.
    pub fn batched_tokens(&self) -> u64 {
        self.max_num_batched_tokens
            .unwrap_or(vllm::DEFAULT_MAX_NUM_BATCHED_TOKENS)
    }

    /// The llama.cpp caller in effect.
    pub fn api(&self) -> LlamaApi {
        self.llama_api.unwrap_or_default()
    }

    /// llama.cpp's `n_batch` as asked (before the context caps it).
    pub fn n_batch_requested(&self) -> u64 {
        self.n_batch.unwrap_or(self.api().default_n_batch())
    }

    /// vLLM's `gpu_memory_utilization` in effect.
    pub fn utilization(&self) -> Utilization {
        self.gpu_memory_utilization.unwrap_or_default()
    }

    /// Refuses settings the runtime does not have or refuses itself: an option of another
    /// runtime, a KV type it does not accept ([`KvDtype::check`]), a quantized llama.cpp V
    /// cache without flash attention, vLLM tensor parallelism that does not divide the heads,
    /// a CPU-only run with a runtime other than llama.cpp.
    ///
    /// # Errors
    /// The first [`ParamError`] found.
    pub fn validate(&self, arch: Option<&Architecture>) -> Result<(), ParamError> {
        let not_for = |option: &'static str, owner: &'static str| ParamError::NotForRuntime {
            option,
            owner,
            runtime: self.runtime,
        };
        if self.cpu_only {
            match self.runtime {
                Runtime::LlamaCpp => {}
                Runtime::Vllm => return Err(ParamError::VllmOnCpu),
                Runtime::Generic => return Err(not_for("--device cpu", "llama.cpp")),
            }
            if self.gpu_layers.is_some() {
                return Err(ParamError::Conflict(
                    "--gpu-layers needs a GPU; --device cpu runs every layer on the CPU",
                ));
            }
        }
        if self.runtime != Runtime::LlamaCpp {
            let llama = [
                ("--parallel", self.slots.is_some()),
                ("--ubatch", self.ubatch.is_some()),
                ("--kv-unified", self.kv_unified.is_some()),
                ("--swa-full", self.swa_full),
                ("--gpu-layers", self.gpu_layers.is_some()),
                ("--llama-api", self.llama_api.is_some()),
                ("--n-batch", self.n_batch.is_some()),
                ("--tensor-split", self.tensor_split.is_some()),
            ];
            if let Some((o, _)) = llama.iter().find(|(_, set)| *set) {
                return Err(not_for(o, "llama.cpp"));
            }
        }
        if self.runtime != Runtime::Vllm {
            let vllm = [
                ("--tensor-parallel-size", self.tensor_parallel != 1),
                (
                    "--gpu-memory-utilization",
                    self.gpu_memory_utilization.is_some(),
                ),
                (
                    "--max-num-batched-tokens",
                    self.max_num_batched_tokens.is_some(),
                ),
            ];
            if let Some((o, _)) = vllm.iter().find(|(_, set)| *set) {
                return Err(not_for(o, "vLLM"));
            }
        } else if self.flash_attn != FlashAttn::Auto {
            return Err(not_for("--flash-attn", "llama.cpp and generic"));
        }
        self.kv_dtype.check(self.runtime)?;
        if self.runtime == Runtime::LlamaCpp
            && self.kv_dtype.is_quantized()
            && self.flash_attn == FlashAttn::Off
        {
            return Err(if self.api() == LlamaApi::Library {
                ParamError::LibraryQuantizedV {
                    dtype: self.kv_dtype,
                }
            } else {
                ParamError::QuantizedVWithoutFlashAttn {
                    dtype: self.kv_dtype,
                }
            });
        }
        if self.cpu_only && self.tensor_split.is_some() {
            return Err(ParamError::Conflict(
                "--tensor-split spreads layers over GPUs; --device cpu runs every layer on the CPU",
            ));
        }
        if self.slots.is_some() && self.batch > 1 {
            return Err(ParamError::Conflict(
                "--parallel (llama.cpp's -np, with --context as -c) and --batch both set the \
                 sequences held at once: give one",
            ));
        }
        let heads = arch.and_then(|a| a.attention_heads);
        if let (Runtime::Vllm, Some(heads)) = (self.runtime, heads) {
            if self.tensor_parallel == 0 || heads % self.tensor_parallel != 0 {
                return Err(ParamError::HeadsNotDivisible {
                    heads,
                    tp: self.tensor_parallel,
                });
            }
        }
        Ok(())
    }
}

/// Builders, one per setting.
impl FitParams {
    /// The same parameters with `context` tokens per sequence.
    #[must_use]
    pub fn context(mut self, context: u64) -> FitParams {
        self.context = context;
        self
    }

    /// The same parameters with `batch` sequences.
    #[must_use]
    pub fn batch(mut self, batch: u64) -> FitParams {
        self.batch = batch;
        self
    }

    /// The same parameters with a `kv_dtype` cache.
    #[must_use]
    pub fn kv_dtype(mut self, kv_dtype: KvDtype) -> FitParams {
        self.kv_dtype = kv_dtype;
        self
    }

    /// Flash attention.
    #[must_use]
    pub fn flash_attn(mut self, fa: FlashAttn) -> FitParams {
        self.flash_attn = fa;
        self
    }

    /// llama.cpp `-ub`.
    #[must_use]
    pub fn ubatch(mut self, ubatch: u64) -> FitParams {
        self.ubatch = Some(ubatch);
        self
    }

    /// llama.cpp `-np` (and `context` becomes `-c`).
    #[must_use]
    pub fn slots(mut self, slots: u64) -> FitParams {
        self.slots = Some(slots);
        self
    }

    /// llama.cpp `--kv-unified` (`true`) or `--no-kv-unified` (`false`).
    #[must_use]
    pub fn kv_unified(mut self, unified: bool) -> FitParams {
        self.kv_unified = Some(unified);
        self
    }

    /// llama.cpp `--swa-full`.
    #[must_use]
    pub fn swa_full(mut self, full: bool) -> FitParams {
        self.swa_full = full;
        self
    }

    /// llama.cpp `-ngl`.
    #[must_use]
    pub fn gpu_layers(mut self, n: u64) -> FitParams {
        self.gpu_layers = Some(n);
        self
    }

    /// vLLM `--gpu-memory-utilization`.
    #[must_use]
    pub fn gpu_memory_utilization(mut self, u: Utilization) -> FitParams {
        self.gpu_memory_utilization = Some(u);
        self
    }

    /// vLLM `--tensor-parallel-size`.
    #[must_use]
    pub fn tensor_parallel(mut self, n: u64) -> FitParams {
        self.tensor_parallel = n;
        self
    }

    /// vLLM `--max-num-batched-tokens`.
    #[must_use]
    pub fn max_num_batched_tokens(mut self, n: u64) -> FitParams {
        self.max_num_batched_tokens = Some(n);
        self
    }

    /// CPU only (llama.cpp without a GPU).
    #[must_use]
    pub fn cpu_only(mut self, cpu: bool) -> FitParams {
        self.cpu_only = cpu;
        self
    }

    /// llama.cpp's caller. [`LlamaApi::Library`] also turns flash attention **off** when it is
    /// still `auto` (llama-cpp-python's `flash_attn=False`); a later
    /// [`FitParams::flash_attn`] overrides that (`auto` is then the C API's own default).
    #[must_use]
    pub fn llama_api(mut self, api: LlamaApi) -> FitParams {
        self.llama_api = Some(api);
        if api == LlamaApi::Library && self.flash_attn == FlashAttn::Auto {
            self.flash_attn = FlashAttn::Off;
        }
        self
    }

    /// llama.cpp `-b` (`n_batch`).
    #[must_use]
    pub fn n_batch(mut self, n: u64) -> FitParams {
        self.n_batch = Some(n);
        self
    }

    /// llama.cpp `--tensor-split`.
    #[must_use]
    pub fn tensor_split(mut self, split: TensorSplit) -> FitParams {
        self.tensor_split = Some(split);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::arch::{Layer, LayerKind};

    fn llama_8b() -> Option<Architecture> {
        let mut a = Architecture::new(vec![Layer::new(LayerKind::Full, 8, 128, 128); 32]);
        a.hidden_size = Some(4096);
        a.attention_heads = Some(32);
        a.vocab_size = Some(128_256);
        a.max_context = Some(131_072);
        Some(a)
    }

    #[test]
    fn per_runtime_defaults() {
        let arch = llama_8b();
        let generic = FitParams::defaults(Runtime::Generic, arch.as_ref());
        assert_eq!(
            generic,
            FitParams::new(4096, 1, KvDtype::BF16, Runtime::Generic)
        );
        let llama = FitParams::defaults(Runtime::LlamaCpp, arch.as_ref());
        assert_eq!(
            llama,
            FitParams::new(4096, 1, KvDtype::F16, Runtime::LlamaCpp)
        );
        // vLLM: the trained context, when known.
        let vllm = FitParams::defaults(Runtime::Vllm, arch.as_ref());
        assert_eq!(
            vllm,
            FitParams::new(131_072, 1, KvDtype::BF16, Runtime::Vllm)
        );
        let mut no_max = arch.clone().unwrap();
        no_max.max_context = None;
        assert_eq!(
            FitParams::defaults(Runtime::Vllm, Some(&no_max)).context,
            DEFAULT_CONTEXT
        );
        assert_eq!(
            FitParams::defaults(Runtime::Vllm, None).context,
            DEFAULT_CONTEXT
        );
        // Each default can be overridden.
        let p = FitParams::defaults(Runtime::Vllm, arch.as_ref())
            .context(8192)
            .batch(4)
            .kv_dtype(KvDtype::F8);
        assert_eq!(p, FitParams::new(8192, 4, KvDtype::F8, Runtime::Vllm));
    }

    #[test]
    fn settings_of_another_runtime_are_refused() {
        let a = llama_8b();
        let a = a.as_ref();
        let vllm = FitParams::new(8192, 1, KvDtype::BF16, Runtime::Vllm);
        let llama = FitParams::new(8192, 1, KvDtype::F16, Runtime::LlamaCpp);
        let generic = FitParams::new(8192, 1, KvDtype::BF16, Runtime::Generic);
        assert!(vllm.validate(a).is_ok() && llama.validate(a).is_ok());
        let refused = [
            vllm.gpu_layers(10).validate(a),
            vllm.flash_attn(FlashAttn::Off).validate(a),
            vllm.kv_dtype(KvDtype::Q8_0).validate(a),
            vllm.tensor_parallel(3).validate(a),
            vllm.cpu_only(true).validate(a),
            llama.tensor_parallel(2).validate(a),
            llama.kv_dtype(KvDtype::F8).validate(a),
            llama
                .kv_dtype(KvDtype::Q4_0)
                .flash_attn(FlashAttn::Off)
                .validate(a),
            llama.slots(4).batch(2).validate(a),
            llama.cpu_only(true).gpu_layers(3).validate(a),
            generic.ubatch(256).validate(a),
            generic.cpu_only(true).validate(a),
        ];
        let messages: Vec<String> = refused
            .iter()
            .map(|r| r.clone().unwrap_err().to_string())
            .collect();
        assert_eq!(
            messages[0],
            "--gpu-layers is a llama.cpp setting; it has no meaning for --runtime vllm"
        );
        assert_eq!(
            messages[3],
            "vLLM refuses --tensor-parallel-size 3: the model's 32 attention heads are not divisible by it"
        );
        assert!(messages[7].contains("quantized V cache"), "{}", messages[7]);
        // A quantized V cache with flash attention on or auto is accepted.
        assert!(llama.kv_dtype(KvDtype::Q4_0).validate(a).is_ok());
        assert!(vllm.tensor_parallel(4).validate(a).is_ok());
    }
}
