//! `hmn fits --runtime llama.cpp` against the real llama.cpp, on every run: each of the 612
//! configurations of `tests/fixtures/llama_cpp/grid.csv` (ggml-org/llama.cpp `0c1e57098`, CPU
//! build; `bench/llama_cpp_grid.sh` made the table, its README says every column) estimated
//! through the library's `estimate` — CPU only, the row's settings and tool family — and
//! compared with what llama.cpp allocated: the compute buffer within ±5 %, the KV cache and
//! the output buffer exact. CI never builds llama.cpp; the table is the measurement.

use std::collections::BTreeMap;
use std::path::PathBuf;

use hypomnesis::estimate::{
    Architecture, Component, Estimate, FitParams, FlashAttn, KvDtype, Layer, LayerKind, LlamaApi,
    ModelSpec, Runtime, estimate,
};

/// One row, by column name.
pub(super) struct Row(BTreeMap<String, String>);

impl Row {
    pub(super) fn s(&self, k: &str) -> &str {
        self.0
            .get(k)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("no column {k}"))
    }
    pub(super) fn n(&self, k: &str) -> u64 {
        self.s(k)
            .parse()
            .unwrap_or_else(|e| panic!("{k} = {:?}: {e}", self.s(k)))
    }
}

fn rows() -> Vec<Row> {
    read_rows("grid.csv")
}

/// The rows of `tests/fixtures/llama_cpp/<file>`.
pub(super) fn read_rows(file: &str) -> Vec<Row> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/llama_cpp")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            assert_eq!(cells.len(), header.len(), "{l}");
            Row(header
                .iter()
                .zip(cells)
                .map(|(h, c)| ((*h).to_string(), c.to_string()))
                .collect())
        })
        .collect()
}

/// The model of a row (its weights: `weights_bytes`), as the GGUF reader would build it from
/// the same metadata.
pub(super) fn model(r: &Row, weights_bytes: u64) -> ModelSpec {
    let (n_swa, period) = (r.n("n_swa"), r.n("swa_period"));
    let layers = (0..r.n("n_layer"))
        .map(|il| {
            // llama.cpp's set_swa_pattern(period): layer il slides iff il % period < period − 1.
            let kind = if n_swa > 0 && period > 0 && il % period < period - 1 {
                LayerKind::Sliding { window: n_swa }
            } else {
                LayerKind::Full
            };
            Layer::new(kind, r.n("n_head_kv"), r.n("head_dim"), r.n("head_dim"))
        })
        .collect();
    let mut a = Architecture::new(layers);
    a.name = Some(r.s("arch").to_string());
    a.hidden_size = Some(r.n("n_embd"));
    a.attention_heads = Some(r.n("n_head"));
    a.intermediate_size = Some(r.n("n_ff"));
    a.vocab_size = Some(r.n("n_vocab"));
    ModelSpec::new(weights_bytes, Some(a))
}

/// The row's settings as `hmn fits` takes them: `--device cpu --parallel N [--kv-unified]
/// --ubatch U --flash-attn on|off --kv-dtype T --llama-api F [--swa-full] --n-batch B`.
fn params(r: &Row) -> FitParams {
    params_of(r).cpu_only(true)
}

/// The row's settings whatever the device: `--parallel N [--kv-unified] --ubatch U
/// --flash-attn on|off --kv-dtype T --llama-api F --n-batch B`.
pub(super) fn params_of(r: &Row) -> FitParams {
    let api = match r.s("family") {
        "server" => LlamaApi::Server,
        "library" => LlamaApi::Library,
        "bench" => LlamaApi::Common,
        f => panic!("family {f}"),
    };
    assert_eq!(r.s("type_k"), r.s("type_v"));
    let p = FitParams::new(
        r.n("n_ctx_req"),
        1,
        KvDtype::parse(r.s("type_k")).unwrap(),
        Runtime::LlamaCpp,
    )
    .slots(r.n("n_seq"))
    .kv_unified(r.n("kv_unified") == 1)
    .ubatch(r.n("n_ubatch"))
    .llama_api(api)
    .n_batch(r.n("n_batch"))
    .flash_attn(if r.n("flash_attn") == 1 {
        FlashAttn::On
    } else {
        FlashAttn::Off
    });
    // The API's own swa_full default, or llama-server's `--swa-full` (`hmn fits --swa-full`).
    let swa_full = r.n("swa_full") == 1;
    let p = if swa_full == api.swa_full() {
        p
    } else {
        assert!(swa_full && api == LlamaApi::Server, "{}", r.s("id"));
        p.swa_full(true)
    };
    // n_outputs_max: the slots for llama-server, 0 (= n_batch) for the others.
    let expected = if api == LlamaApi::Server {
        r.n("n_seq")
    } else {
        0
    };
    assert_eq!(r.n("n_outputs_max"), expected, "{}", r.s("id"));
    p.validate(None).unwrap();
    p
}

fn part<'a>(e: &'a Estimate, name: &str) -> &'a Component {
    e.components
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no {name}"))
}

#[test]
fn every_measured_configuration() {
    let rows = rows();
    assert_eq!(rows.len(), 612, "the table's rows");
    let mut worst: BTreeMap<String, (f64, String, u64, u64)> = BTreeMap::new();
    let mut misses = Vec::new();
    for r in &rows {
        assert_eq!(r.s("status"), "ok");
        let e = estimate(&model(r, r.n("weights_mapped_bytes")), params(r));
        let id = r.s("id").to_string();
        let kv = part(&e, "kv_cache");
        assert_eq!(kv.low_bytes, Some(r.n("kv_bytes")), "{id}: KV");
        assert_eq!(kv.high_bytes, kv.low_bytes, "{id}: KV");
        let out = part(&e, "output_buffer");
        let printed = r.n("n_vocab") * r.n("n_seq") * 4;
        assert_eq!(out.low_bytes, Some(printed), "{id}: output buffer");
        let mib: f64 = r.s("output_mib_printed").parse().unwrap();
        assert!(
            (printed as f64 / f64::from(1 << 20) - mib).abs() < 0.006,
            "{id}"
        );
        let act = part(&e, "activations");
        let (est, high) = (act.low_bytes.unwrap(), act.high_bytes.unwrap());
        let got = r.n("compute_bytes");
        let err = est as f64 / got as f64 - 1.0;
        if err.abs() > 0.05 {
            misses.push(format!("{id}: {est} vs {got} ({:+.2} %)", err * 100.0));
        }
        assert!(high >= got, "{id}: the high end {high} < llama.cpp's {got}");
        let model = r.s("model").to_string();
        let w = worst.entry(model).or_insert((0.0, String::new(), 0, 0));
        if err.abs() >= w.0.abs() {
            *w = (err, id, est, got);
        }
    }
    // The worst row of each model, printed on every run (`cargo test … -- --nocapture`).
    let mut overall = (0.0f64, String::new());
    for (m, (err, id, est, got)) in &worst {
        println!(
            "{m:20} worst {:+6.2} % ({id}: hmn {est} B, llama.cpp {got} B)",
            err * 100.0
        );
        if err.abs() >= overall.0.abs() {
            overall = (*err, id.clone());
        }
    }
    println!(
        "{} rows; compute within ±5 % on {}; overall worst {:+.2} % ({})",
        rows.len(),
        rows.len() - misses.len(),
        overall.0 * 100.0,
        overall.1
    );
    assert!(misses.is_empty(), "outside ±5 %:\n{}", misses.join("\n"));
}

/// The two ends of the old band were two tool families: the same configuration reserves one
/// output per slot in llama-server and `n_batch` outputs through the C API (and `swa_full` on),
/// and each family's estimate matches its own row.
#[test]
fn each_family_gets_its_own_estimate() {
    let rows = rows();
    // Gemma-3-12B at 32k, f16, one slot: server (swa_full off) and library (on).
    let pairs: Vec<(&Row, &Row)> = rows
        .iter()
        .filter(|r| {
            r.s("family") == "server" && r.s("model") == "gemma3-12b" && r.s("swa_full") == "0"
        })
        .filter_map(|s| {
            rows.iter()
                .find(|l| {
                    l.s("family") == "library"
                        && [
                            "model",
                            "n_ctx_req",
                            "n_ubatch",
                            "n_seq",
                            "kv_unified",
                            "flash_attn",
                            "type_k",
                        ]
                        .iter()
                        .all(|k| l.s(k) == s.s(k))
                })
                .map(|l| (s, l))
        })
        .collect();
    assert!(!pairs.is_empty());
    let mut larger = 0;
    for (s, l) in &pairs {
        let es = estimate(&model(s, s.n("weights_mapped_bytes")), params(s));
        let el = estimate(&model(l, l.n("weights_mapped_bytes")), params(l));
        let (ks, kl) = (
            part(&es, "kv_cache").low_bytes,
            part(&el, "kv_cache").low_bytes,
        );
        // swa_full makes the library's sliding cache full-size (equal where the window
        // already covers the context).
        assert!(kl >= ks, "{}", l.s("id"));
        larger += usize::from(kl > ks);
        assert_eq!(kl, Some(l.n("kv_bytes")));
        assert_eq!(ks, Some(s.n("kv_bytes")));
        assert!(part(&el, "activations").low_bytes >= part(&es, "activations").low_bytes);
    }
    assert!(larger * 2 >= pairs.len(), "{larger} of {}", pairs.len());
}
