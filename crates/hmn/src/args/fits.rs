//! `hmn fits` options ([`FitsArgs`]) and their value parsers: device selectors, KV cache
//! types, runtimes, flash attention, vLLM's utilization. Each refusal is a typed [`ArgError`].

use clap::Args;
use hypomnesis::estimate::{FlashAttn, KvDtype, LlamaApi, Runtime, TensorSplit, Utilization};
use hypomnesis::select::DeviceSelector;

use super::values::{ArgError, parse_size_arg};

/// `hmn fits` options.
#[derive(Debug, Args)]
pub struct FitsArgs {
    /// A size (14GiB, 7.5G, 16000000000), a model file or directory, hf:ORG/REPO (a Hugging Face
    /// repository, optionally @REVISION and :FILE after it; HF_TOKEN, HF_ENDPOINT), or an
    /// https:// URL to a model file.
    #[arg(value_name = "SIZE|PATH")]
    pub model: std::ffi::OsString,

    /// Tokens per sequence (default 4096; with --runtime vllm, the derived max_model_len). With
    /// --parallel, llama.cpp's -c: all slots together.
    #[arg(long, value_name = "TOKENS", value_parser = clap::value_parser!(u64).range(1..=1 << 32))]
    pub context: Option<u64>,

    /// Sequences held at once (default 1).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub batch: Option<u64>,

    /// KV cache element type: f32, f16, bf16, fp8 (vLLM), q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl
    /// (llama.cpp).
    #[arg(long, value_name = "TYPE", value_parser = parse_kv_dtype)]
    pub kv_dtype: Option<KvDtype>,

    /// The device to compare with: an index, a GPU-… UUID or PCI bus id, or a MIG-… UUID (judged
    /// against that MIG instance's own free memory); `all` (the split the runtime would use:
    /// llama.cpp spreads layers over every GPU, vLLM uses the first --tensor-parallel-size
    /// GPUs, otherwise the device with the most headroom; a GPU in MIG mode counts as its MIG
    /// instances); or `cpu` (host RAM, as llama.cpp without a GPU). Default 0; CPU when no GPU
    /// is found and a model is given.
    #[arg(long, value_name = "DEVICE|all|cpu", value_parser = parse_device_sel)]
    pub device: Option<DeviceSel>,

    /// Compare with SIZE free instead of reading a device: planning for a GPU that is not here
    /// (e.g. --free 24GiB for a 24 GB card); several, comma-separated, plan for that many GPUs
    /// (--free 24GiB,24GiB: llama.cpp splits its layers over them; vLLM
    /// --tensor-parallel-size N needs N of them).
    #[arg(
        long,
        value_name = "SIZE[,SIZE…]",
        value_parser = parse_size_arg,
        value_delimiter = ',',
        num_args = 1,
        conflicts_with = "device"
    )]
    pub free: Vec<u64>,

    /// The runtime that will hold the model: generic (PyTorch), llama.cpp, vllm.
    #[arg(long, value_name = "RUNTIME", value_parser = parse_runtime)]
    pub runtime: Option<Runtime>,

    /// Flash attention (llama.cpp -fa; generic: off = eager attention): on, off, auto.
    #[arg(long, value_name = "on|off|auto", value_parser = parse_flash_attn)]
    pub flash_attn: Option<FlashAttn>,

    /// llama.cpp -np: parallel slots; --context is then -c, shared (--kv-unified) or split.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=4096), conflicts_with = "batch")]
    pub parallel: Option<u64>,

    /// llama.cpp --kv-unified: one KV stream for every slot (llama-server's default without -np).
    #[arg(long)]
    pub kv_unified: bool,

    /// llama.cpp --swa-full: sliding-window layers as large as full ones.
    #[arg(long)]
    pub swa_full: bool,

    /// llama.cpp -ub: tokens per compute graph (default 512).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub ubatch: Option<u64>,

    /// llama.cpp -ngl: layers on the GPU, the output layer first (default all); the rest and
    /// their KV stay in host RAM, judged against MemAvailable.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(0..=1 << 16))]
    pub gpu_layers: Option<u64>,

    /// llama.cpp: whose context parameters — server (llama-server, llama-cli: one output per
    /// slot reserved), library (the C API as llama-cpp-python passes it: n_batch outputs,
    /// swa_full on, flash attention off unless --flash-attn, n_batch 512), common
    /// (llama-completion, llama-perplexity, llama-bench: n_batch outputs, swa_full off).
    /// Default server.
    #[arg(long, value_name = "server|library|common", value_parser = parse_llama_api)]
    pub llama_api: Option<LlamaApi>,

    /// llama.cpp -b / n_batch: tokens per decode call (default 2048; 512 for --llama-api
    /// library, llama-cpp-python's default).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub n_batch: Option<u64>,

    /// llama.cpp --tensor-split with --device all: each GPU's proportion of the offloaded
    /// layers, comma-separated (3,1), normalised as llama.cpp does (default: by free memory).
    #[arg(long, value_name = "N0,N1,...", value_parser = parse_tensor_split)]
    pub tensor_split: Option<TensorSplit>,

    /// vLLM --max-model-len (the same as --context for vLLM).
    #[arg(long, value_name = "TOKENS", value_parser = clap::value_parser!(u64).range(1..=1 << 32), conflicts_with = "context")]
    pub max_model_len: Option<u64>,

    /// vLLM --gpu-memory-utilization: the fraction of each GPU's total it reserves (default 0.9).
    #[arg(long, value_name = "FRACTION", value_parser = parse_utilization)]
    pub gpu_memory_utilization: Option<Utilization>,

    /// vLLM --tensor-parallel-size: ranks over the first N GPUs.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub tensor_parallel_size: Option<u64>,

    /// vLLM --max-num-batched-tokens (default 8192): the profile run and the sliding-window term.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1 << 24))]
    pub max_num_batched_tokens: Option<u64>,
}

/// `hmn fits --device`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceSel {
    /// One device (or MIG device).
    One(DeviceSelector),
    /// Every device.
    All,
    /// No GPU: host RAM.
    Cpu,
}

pub(super) fn parse_device_sel(s: &str) -> Result<DeviceSel, ArgError> {
    if s.eq_ignore_ascii_case("all") {
        return Ok(DeviceSel::All);
    }
    if s.eq_ignore_ascii_case("cpu") {
        return Ok(DeviceSel::Cpu);
    }
    s.parse()
        .map(DeviceSel::One)
        .map_err(|_| ArgError::DeviceSelector(s.to_string()))
}

fn parse_kv_dtype(s: &str) -> Result<KvDtype, ArgError> {
    KvDtype::parse(s).map_err(ArgError::Estimate)
}

pub(super) fn parse_runtime(s: &str) -> Result<Runtime, ArgError> {
    Runtime::parse(s).map_err(ArgError::Estimate)
}

fn parse_flash_attn(s: &str) -> Result<FlashAttn, ArgError> {
    FlashAttn::parse(s).map_err(ArgError::Estimate)
}

fn parse_llama_api(s: &str) -> Result<LlamaApi, ArgError> {
    LlamaApi::parse(s).map_err(ArgError::Estimate)
}

fn parse_tensor_split(s: &str) -> Result<TensorSplit, ArgError> {
    TensorSplit::parse(s).map_err(ArgError::Estimate)
}

fn parse_utilization(s: &str) -> Result<Utilization, ArgError> {
    Utilization::parse(s).map_err(ArgError::Estimate)
}
