//! `hmn fits hf:ORG/REPO[@REVISION][:FILE]` and `https://…` (issue 27) against a Hub-shaped
//! server in the test process (`hmn_testbed::hub`): headers read with range requests only —
//! the bytes the server sent are counted — the same estimate as the local files, the Hub's
//! errors told apart by their `X-Error-Code` (a gated repository, an unknown repository,
//! revision or file), offline, and hostile answers (a huge length, a
//! range ignored or wrong, a truncated body, a silent server): one line naming the input,
//! exit 2. No test needs the internet.

use std::path::Path;
use std::process::Output;

use hmn_testbed::hub::{HubFile, HubRepo, HubServer, Misbehave, UntrustedTls};
use hmn_testbed::{GgufWriter, ggml};
use serde_json::Value;

use crate::util::{Bed, json, stderr};

fn fixture(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../hypomnesis/tests/fixtures/models")
            .join(name),
    )
    .unwrap()
}

/// A safetensors file of `tensors` (name, BF16 elements): its header and its size.
fn safetensors(tensors: &[(&str, u64)]) -> (Vec<u8>, u64) {
    let mut offset = 0u64;
    let entries: Vec<String> = tensors
        .iter()
        .map(|(n, elements)| {
            let e = format!(
                r#""{n}":{{"dtype":"BF16","shape":[{elements}],"data_offsets":[{offset},{}]}}"#,
                offset + elements * 2
            );
            offset += elements * 2;
            e
        })
        .collect();
    let mut header = format!("{{{}}}", entries.join(","));
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut b = (header.len() as u64).to_le_bytes().to_vec();
    b.extend(header.as_bytes());
    let size = b.len() as u64 + offset;
    (b, size)
}

/// A 4-block Llama-shaped GGUF (`blocks` of 100 MiB each), header and size.
fn gguf(blocks: u32) -> (Vec<u8>, u64) {
    let mut w = GgufWriter::new()
        .str("general.architecture", "llama")
        .u32("llama.block_count", blocks)
        .u32("llama.attention.head_count", 32)
        .u32("llama.attention.head_count_kv", 8)
        .u32("llama.embedding_length", 4096)
        .u32("llama.feed_forward_length", 14336)
        .u32("llama.context_length", 131_072)
        .u32("llama.vocab_size", 128_256)
        .tensor("token_embd.weight", &[4096, 64_000], ggml::F16)
        .tensor("output.weight", &[4096, 64_000], ggml::F16);
    for i in 0..blocks {
        w = w.tensor(
            &format!("blk.{i}.ffn_up.weight"),
            &[4096, 12_800],
            ggml::F16,
        );
    }
    w.header_and_size()
}

/// Llama-3.1-8B as two 8 GB shards, its index and its real `config.json`; a GGUF repository
/// with two quantizations; a gated one.
fn hub() -> HubServer {
    let half = 4_015_130_624u64; // BF16 elements per shard: 2 × 8 030 261 248 B = 16 060 522 496
    let (s1, n1) = safetensors(&[("model.layers.0.mlp.up_proj.weight", half)]);
    let (s2, n2) = safetensors(&[("model.layers.31.mlp.up_proj.weight", half)]);
    let index = r#"{"metadata":{"total_size":16060522496},"weight_map":{"model.layers.0.mlp.up_proj.weight":"model-00001-of-00002.safetensors","model.layers.31.mlp.up_proj.weight":"model-00002-of-00002.safetensors"}}"#;
    let (g, gn) = gguf(4);
    let (g8, g8n) = gguf(8);
    HubServer::start(vec![
        HubRepo {
            id: "meta-llama/Llama-3.1-8B".into(),
            revision: "main".into(),
            token: None,
            files: vec![
                HubFile::text("config.json", &fixture("llama-3.1-8b.json")),
                HubFile::text("model.safetensors.index.json", index),
                HubFile::lfs("model-00001-of-00002.safetensors", s1.clone(), n1),
                HubFile::lfs("model-00002-of-00002.safetensors", s2, n2),
                HubFile::text("README.md", "# Llama"),
            ],
        },
        HubRepo {
            id: "org/llama-gguf".into(),
            revision: "v2".into(),
            token: None,
            files: vec![
                HubFile::lfs("llama-Q4.gguf", g.clone(), gn),
                HubFile::lfs("llama-Q8.gguf", g8, g8n),
                HubFile::lfs("big/split-00001-of-00002.gguf", g.clone(), gn),
                HubFile::lfs("big/split-00002-of-00002.gguf", g.clone(), gn),
            ],
        },
        HubRepo {
            id: "org/gated".into(),
            revision: "main".into(),
            token: Some("hf_secret".into()),
            files: vec![HubFile::lfs("model.gguf", g.clone(), gn)],
        },
        HubRepo {
            id: "org/gated-st".into(),
            revision: "main".into(),
            token: Some("hf_secret".into()),
            files: vec![
                HubFile::text("config.json", &fixture("llama-3.1-8b.json")),
                HubFile::lfs("model.safetensors", safetensors(&[("w", 8)]).0, 8 * 2 + 64),
            ],
        },
        HubRepo {
            id: "org/missing-shard".into(),
            revision: "main".into(),
            token: None,
            files: vec![
                HubFile::text("model.safetensors.index.json", index),
                HubFile::lfs("model-00001-of-00002.safetensors", s1, n1),
            ],
        },
        HubRepo {
            id: "org/mixed".into(),
            revision: "main".into(),
            token: None,
            files: vec![
                HubFile::lfs("model.safetensors", safetensors(&[("w", 8)]).0, 8 * 2 + 64),
                HubFile::lfs("model.gguf", g.clone(), gn),
            ],
        },
        HubRepo {
            id: "org/hostile".into(),
            revision: "main".into(),
            token: None,
            files: vec![
                HubFile::text("huge/config.json", "{}").misbehaving(Misbehave::HugeLength),
                HubFile::lfs(
                    "huge/model.safetensors",
                    safetensors(&[("w", 8)]).0,
                    8 * 2 + 64,
                )
                .misbehaving(Misbehave::None),
                HubFile::lfs("ignore.gguf", g.clone(), gn).misbehaving(Misbehave::IgnoreRange),
                HubFile::lfs("wrong.gguf", g.clone(), gn).misbehaving(Misbehave::WrongRange),
                HubFile::lfs("short.gguf", g.clone(), gn).misbehaving(Misbehave::Truncated),
                HubFile::lfs("silent.gguf", g, gn).misbehaving(Misbehave::Silent),
            ],
        },
    ])
}

fn run(bed: &Bed, server: &HubServer, token: Option<&str>, args: &[&str]) -> Output {
    let mut all = vec!["fits"];
    all.extend_from_slice(args);
    run_hmn(bed, server, token, &all)
}

/// `hmn ARGS` against `server`, with no token or proxy from the environment.
fn run_hmn(bed: &Bed, server: &HubServer, token: Option<&str>, all: &[&str]) -> Output {
    run_at(bed, &server.endpoint, token, all)
}

/// `hmn ARGS` with `HF_ENDPOINT` at `endpoint`, with no token or proxy from the environment.
fn run_at(bed: &Bed, endpoint: &str, token: Option<&str>, all: &[&str]) -> Output {
    let mut c = bed.cmd(all);
    c.env("HF_ENDPOINT", endpoint)
        .env("HMN_HUB_TIMEOUT", "2")
        .env_remove("HF_TOKEN")
        .env_remove("SSL_CERT_FILE")
        .env_remove("HTTPS_PROXY")
        .env_remove("HTTP_PROXY")
        .env_remove("ALL_PROXY")
        .env_remove("https_proxy")
        .env_remove("http_proxy")
        .env_remove("all_proxy");
    if let Some(t) = token {
        c.env("HF_TOKEN", t);
    }
    c.output().unwrap()
}

fn component(v: &Value, name: &str) -> u64 {
    v["estimate"]["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .and_then(|c| c["low_bytes"].as_u64())
        .unwrap_or_else(|| panic!("no {name}: {v}"))
}

fn refused(o: &Output, needles: &[&str]) {
    assert_eq!(o.status.code(), Some(2), "{}", stderr(o));
    let e = stderr(o);
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    for n in needles {
        assert!(e.contains(n), "{n:?} in {e}");
    }
}

/// A sharded safetensors checkpoint: the index, both shards' headers, `config.json` — a few
/// kilobytes for 16 GB of weights, through the CDN redirect and range requests.
#[test]
fn safetensors_from_the_hub_reads_headers_only() {
    let server = hub();
    let bed = Bed::new();
    let o = run(
        &bed,
        &server,
        None,
        &["hf:meta-llama/Llama-3.1-8B", "--free", "80GiB", "--json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["input"]["format"], "safetensors");
    assert_eq!(v["input"]["weights_bytes"], 16_060_522_496u64);
    assert_eq!(v["input"]["architecture"]["layers"], 32);
    assert!(
        v["input"]["architecture"]["source"]
            .as_str()
            .unwrap()
            .ends_with("/resolve/main/config.json")
    );
    assert_eq!(v["input"]["files"].as_array().unwrap().len(), 2);
    assert_eq!(
        component(&v, "kv_cache"),
        512 << 20,
        "4096 tokens × 128 KiB"
    );
    let sent = server.bytes_sent();
    assert!(sent < 16 << 10, "{sent} bytes sent for 16 GB of weights");
    let seen = server.requests();
    // The shards were read through the CDN, by range, never whole.
    let cdn: Vec<_> = seen
        .iter()
        .filter(|r| r.path.starts_with("/cdn/"))
        .collect();
    assert!(cdn.len() >= 4, "{seen:?}");
    assert!(
        cdn.iter()
            .all(|r| r.range.as_deref().is_some_and(|x| x.starts_with("bytes=")))
    );
    assert!(
        seen.iter()
            .any(|r| r.path == "/api/models/meta-llama/Llama-3.1-8B/revision/main")
    );
    // The same model from its local files gives the same estimate.
    assert!(!seen.iter().any(|r| r.path.contains("README")));
}

/// A GGUF repository: several files need a name; a split set comes whole; the revision is
/// honoured; the estimate equals the local file's.
#[test]
fn gguf_from_the_hub_and_a_url() {
    let server = hub();
    let bed = Bed::new();
    let o = run(
        &bed,
        &server,
        None,
        &["hf:org/llama-gguf@v2", "--free", "80GiB"],
    );
    refused(
        &o,
        &[
            "hf:org/llama-gguf@v2",
            "2 .gguf files",
            "llama-Q4.gguf",
            "llama-Q8.gguf",
        ],
    );
    let o = run(
        &bed,
        &server,
        None,
        &[
            "hf:org/llama-gguf@v2:llama-Q4.gguf",
            "--free",
            "80GiB",
            "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let remote = json(&o);
    assert_eq!(remote["input"]["architecture"]["layers"], 4);
    // The same bytes as a local file.
    let (header, size) = gguf(4);
    let local = bed.dir.path().join("llama-Q4.gguf");
    let f = std::fs::File::create(&local).unwrap();
    std::io::Write::write_all(&mut &f, &header).unwrap();
    f.set_len(size).unwrap();
    let o = bed.run(&["fits", local.to_str().unwrap(), "--free", "80GiB", "--json"]);
    let local_v = json(&o);
    assert_eq!(
        remote["estimate"]["components"],
        local_v["estimate"]["components"]
    );
    assert_eq!(
        remote["input"]["weights_bytes"],
        local_v["input"]["weights_bytes"]
    );
    // A split set: both shards.
    let o = run(
        &bed,
        &server,
        None,
        &[
            "hf:org/llama-gguf@v2:big/split-00002-of-00002.gguf",
            "--free",
            "80GiB",
            "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["input"]["files"].as_array().unwrap().len(), 2);
    assert_eq!(
        v["input"]["weights_bytes"],
        2 * local_v["input"]["weights_bytes"].as_u64().unwrap()
    );
    // A URL to one file.
    let url = format!(
        "{}/org/llama-gguf/resolve/v2/llama-Q4.gguf",
        server.endpoint
    );
    let o = run(&bed, &server, None, &[&url, "--free", "80GiB", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        json(&o)["estimate"]["components"],
        local_v["estimate"]["components"]
    );
    // Headers only: a few hundred KiB at most for 4 GGUF reads of ~4 GB files.
    assert!(server.bytes_sent() < 1 << 20, "{}", server.bytes_sent());
    // The default revision `main` does not exist there: the Hub's RevisionNotFound.
    let o = run(&bed, &server, None, &["hf:org/llama-gguf:llama-Q4.gguf"]);
    refused(
        &o,
        &[
            "hf:org/llama-gguf:llama-Q4.gguf",
            "HTTP 404 Not Found (RevisionNotFound)",
            "org/llama-gguf has no revision main",
        ],
    );
    let o = run(&bed, &server, None, &["hf:org/llama-gguf@v2:nope.gguf"]);
    refused(&o, &["nope.gguf is not in org/llama-gguf at v2"]);
}

/// A gated repository: 401 `GatedRepo` without `HF_TOKEN` (accept the licence, set the
/// token), 403 with a token that has no access (refused: never "set HF_TOKEN" when one was
/// sent), the model with the right one.
#[test]
fn gated_repositories_need_the_token() {
    let server = hub();
    let bed = Bed::new();
    let o = run(&bed, &server, None, &["hf:org/gated", "--free", "80GiB"]);
    refused(
        &o,
        &[
            "hf:org/gated: model.gguf: HTTP 401 Unauthorized (GatedRepo)",
            "a gated repository: accept its licence on the Hub, then set HF_TOKEN",
        ],
    );
    let o = run(
        &bed,
        &server,
        Some("hf_wrong"),
        &["hf:org/gated", "--free", "80GiB"],
    );
    refused(
        &o,
        &[
            "HTTP 403 Forbidden (GatedRepo)",
            "HF_TOKEN was refused",
            "accept its licence on the Hub with the token's account",
        ],
    );
    assert!(!stderr(&o).contains("set HF_TOKEN"), "{}", stderr(&o));
    let o = run(
        &bed,
        &server,
        Some("hf_secret"),
        &["hf:org/gated", "--free", "80GiB", "--json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r.path.starts_with("/org/gated/resolve/") && r.auth)
    );
    // A presigned URL to a gated safetensors file (what the Hub's redirect hands out): no
    // token needed; the `config.json` beside it answers 403 (the signature covers one file),
    // so the estimate is the weights-only one, and the signature is shown nowhere.
    let url = format!(
        "{}/cdn/org/gated-st/main/model.safetensors?{}",
        server.endpoint,
        hmn_testbed::hub::SIGNED
    );
    let o = run(&bed, &server, None, &[&url, "--free", "80GiB", "--json"]);
    // Weights only: no architecture, so the verdict is "may not fit" (exit 1), not an error.
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("no architecture"), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!out.contains(hmn_testbed::hub::SIGNED), "{out}");
    let v = json(&o);
    assert_eq!(v["input"]["weights_bytes"], 16);
    assert!(v["input"]["architecture"].is_null(), "{v}");
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r.path == "/cdn/org/gated-st/main/config.json")
    );
    // Without the signature the file itself is refused, one line naming the URL.
    let bare = format!(
        "{}/cdn/org/gated-st/main/model.safetensors",
        server.endpoint
    );
    let o = run(&bed, &server, None, &[&bare]);
    refused(&o, &[bare.as_str(), "HTTP 403"]);
}

/// The Hub's `X-Error-Code` tells apart what the status does not: a repository that does not
/// exist is a 401 without a token (as a private one is) and a 404 with one — never "gated";
/// an unknown file of a known revision is `EntryNotFound`, named.
#[test]
fn unknown_repositories_revisions_and_files() {
    let server = hub();
    let bed = Bed::new();
    let o = run(&bed, &server, None, &["hf:nobody/nothing"]);
    refused(
        &o,
        &[
            "hf:nobody/nothing: the repository's file list: HTTP 401 Unauthorized (RepoNotFound)",
            "no repository nobody/nothing (check the name; if it is private, set HF_TOKEN)",
        ],
    );
    assert!(!stderr(&o).contains("gated"), "{}", stderr(&o));
    let o = run(&bed, &server, Some("hf_secret"), &["hf:nobody/nothing"]);
    refused(
        &o,
        &[
            "HTTP 404 Not Found (RepoNotFound)",
            "no repository nobody/nothing, or HF_TOKEN may not see it (check the name)",
        ],
    );
    assert!(!stderr(&o).contains("set HF_TOKEN"), "{}", stderr(&o));
    let o = run(&bed, &server, None, &["hf:org/gated@v9"]);
    refused(
        &o,
        &[
            "HTTP 404 Not Found (RevisionNotFound)",
            "org/gated has no revision v9",
        ],
    );
    // The index names a shard the repository lacks.
    let o = run(
        &bed,
        &server,
        None,
        &["hf:org/missing-shard", "--free", "80GiB"],
    );
    refused(
        &o,
        &[
            "hf:org/missing-shard: model-00002-of-00002.safetensors: HTTP 404 Not Found (EntryNotFound)",
            "org/missing-shard has no file model-00002-of-00002.safetensors at main",
        ],
    );
}

/// A URL on the Hub's origin (`HF_ENDPOINT`'s scheme, host and port) gets `HF_TOKEN` as a `hf:`
/// spec does: a gated repository's `resolve` URL, or the `blob` page a browser shows, reads
/// with the token; without it the message says to set it, with a wrong one that it was
/// refused; a URL on another origin never gets the token, and its refusal says so.
#[test]
fn urls_on_the_hub_get_the_token() {
    let server = hub();
    let bed = Bed::new();
    let resolve = format!("{}/org/gated/resolve/main/model.gguf", server.endpoint);
    let blob = format!("{}/org/gated/blob/main/model.gguf", server.endpoint);
    for url in [&resolve, &blob] {
        let o = run(
            &bed,
            &server,
            Some("hf_secret"),
            &[url, "--free", "80GiB", "--json"],
        );
        assert_eq!(o.status.code(), Some(0), "{url}: {}", stderr(&o));
        assert_eq!(json(&o)["input"]["format"], "gguf");
    }
    let seen = server.requests();
    let reads: Vec<_> = seen
        .iter()
        .filter(|r| r.path == "/org/gated/resolve/main/model.gguf")
        .collect();
    assert!(reads.len() >= 2 && reads.iter().all(|r| r.auth), "{seen:?}");
    let o = run(&bed, &server, None, &[&resolve]);
    refused(
        &o,
        &[
            resolve.as_str(),
            "HTTP 401 Unauthorized (GatedRepo)",
            "accept its licence on the Hub, then set HF_TOKEN",
        ],
    );
    let o = run(&bed, &server, Some("hf_wrong"), &[&resolve]);
    refused(
        &o,
        &[
            resolve.as_str(),
            "HTTP 403 Forbidden (GatedRepo)",
            "HF_TOKEN was refused",
        ],
    );
    assert!(!stderr(&o).contains("set HF_TOKEN"), "{}", stderr(&o));
    // The Hub elsewhere (another port): the token stays home.
    let before = server.requests().len();
    let o = run_at(
        &bed,
        "http://127.0.0.1:1",
        Some("hf_secret"),
        &["fits", &resolve],
    );
    refused(
        &o,
        &[
            "HTTP 401 Unauthorized (GatedRepo)",
            "HF_TOKEN is sent to HF_ENDPOINT's server only",
        ],
    );
    assert!(!stderr(&o).contains("set HF_TOKEN"), "{}", stderr(&o));
    let after = server.requests();
    assert!(after.len() > before && after[before..].iter().all(|r| !r.auth));
}

/// A repository with both formats needs a file named.
#[test]
fn both_formats_need_a_name() {
    let server = hub();
    let bed = Bed::new();
    let o = run(&bed, &server, None, &["hf:org/mixed", "--free", "80GiB"]);
    refused(
        &o,
        &[
            "hf:org/mixed",
            "2 .safetensors and .gguf files",
            "model.safetensors",
            "model.gguf",
            "hf:org/mixed:FILE",
        ],
    );
    let o = run(
        &bed,
        &server,
        None,
        &["hf:org/mixed:model.gguf", "--free", "80GiB", "--json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(json(&o)["input"]["format"], "gguf");
}

/// Offline, unknown repositories, bad specs.
#[test]
fn unreachable_and_unknown() {
    let server = hub();
    let bed = Bed::new();
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let mut c = bed.cmd(&["fits", "hf:meta-llama/Llama-3.1-8B"]);
    c.env("HF_ENDPOINT", format!("http://127.0.0.1:{port}"))
        .env("HMN_HUB_TIMEOUT", "2");
    let o = c.output().unwrap();
    refused(
        &o,
        &[
            "hf:meta-llama/Llama-3.1-8B",
            "cannot reach the server",
            "offline?",
        ],
    );
    for bad in [
        "hf:a/b/c",
        "hf:org/repo:../../etc/passwd",
        "hf:org",
        "https://host",
    ] {
        let o = run(&bed, &server, None, &[bad]);
        refused(&o, &["invalid model spec"]);
    }
}

/// A certificate no one trusts (a TLS-inspecting proxy's, a mirror's own) is said to be one,
/// naming the host — not "cannot reach the server (offline?)" — for a URL and for a Hub at
/// `HF_ENDPOINT`.
#[test]
fn untrusted_certificates_are_named() {
    let tls = UntrustedTls::start();
    let bed = Bed::new();
    let host = tls.endpoint.trim_start_matches("https://");
    let url = format!("{}/org/repo/resolve/main/model.gguf", tls.endpoint);
    let o = run_at(&bed, "https://huggingface.co", None, &["fits", &url]);
    let hub = run_at(&bed, &tls.endpoint, None, &["fits", "hf:org/repo"]);
    for (o, first) in [(&o, url.as_str()), (&hub, "hf:org/repo")] {
        refused(
            o,
            &[
                first,
                &format!("TLS certificate not trusted, fetching from {host}"),
                "UnknownIssuer",
                "hmn trusts the Mozilla roots built into it",
            ],
        );
        let e = stderr(o);
        assert!(!e.contains("cannot reach") && !e.contains("offline"), "{e}");
        assert!(e.contains("unless SSL_CERT_FILE names a bundle"), "{e}");
    }
    // SSL_CERT_FILE names a bundle with the server's certificate: trusted (the server then
    // answers 404 for everything).
    let with_bundle = |bundle: &std::path::Path| {
        let mut c = bed.cmd(&["fits", &url]);
        c.env("SSL_CERT_FILE", bundle)
            .env("HMN_HUB_TIMEOUT", "2")
            .env_remove("HF_TOKEN");
        c.output().unwrap()
    };
    let pem = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testbed/src/tls/cert.pem");
    let o = with_bundle(&pem);
    refused(&o, &[&url, "HTTP 404"]);
    assert!(!stderr(&o).contains("TLS certificate"), "{}", stderr(&o));
    // A bundle that cannot be read, or holds no certificate: one line naming it.
    let missing = bed.path("no-such-bundle.pem");
    refused(
        &with_bundle(&missing),
        &[&missing.display().to_string(), "SSL_CERT_FILE: "],
    );
    let empty = bed.path("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    refused(
        &with_bundle(&empty),
        &[
            &empty.display().to_string(),
            "SSL_CERT_FILE: no certificate in it",
        ],
    );
}

/// Hostile answers cost bounded bytes and end in one line each.
#[test]
fn hostile_servers_are_bounded() {
    let server = hub();
    let bed = Bed::new();
    // config.json claims a terabyte and streams without end: read up to the 16 MiB cap.
    let o = run(
        &bed,
        &server,
        None,
        &["hf:org/hostile:huge/model.safetensors"],
    );
    refused(
        &o,
        &["huge/config.json", "larger than the 16777216-byte limit"],
    );
    let o = run(&bed, &server, None, &["hf:org/hostile:ignore.gguf"]);
    refused(&o, &["ignore.gguf", "ignored the range request"]);
    let o = run(&bed, &server, None, &["hf:org/hostile:wrong.gguf"]);
    refused(&o, &["wrong.gguf", "the server sent 1-"]);
    let o = run(&bed, &server, None, &["hf:org/hostile:short.gguf"]);
    refused(&o, &["short.gguf", "the response ended after"]);
    let o = run(&bed, &server, None, &["hf:org/hostile:silent.gguf"]);
    refused(&o, &["silent.gguf", "cannot reach the server"]);
    // The huge config costs its cap (and what was in flight), the rest almost nothing.
    assert!(server.bytes_sent() < 64 << 20, "{}", server.bytes_sent());
}

/// `hmn pick --need hf:…` judges a Hub model as `fits` does: the 16 GB checkpoint fits the H100
/// with room, not the one with 10 GiB free; an unknown repository is one line and exit 2.
#[test]
fn pick_takes_a_hub_model_as_its_need() {
    let server = hub();
    let fake = hmn_testbed::FakeNvml::new()
        .device(hmn_testbed::FakeDevice::h100(0).memory_used(&[70 * (1 << 30)]))
        .device(hmn_testbed::FakeDevice::h100(1).memory_used(&[1 << 30]));
    let bed = Bed::with_nvml(&fake);
    let o = run_hmn(
        &bed,
        &server,
        None,
        &["pick", "--json", "--need", "hf:meta-llama/Llama-3.1-8B"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["picked"][0]["device_index"], 1, "{v}");
    let high = v["need_bytes"].as_u64().unwrap();
    assert!(high > 16_060_522_496, "weights and more: {high}");
    let o = run_hmn(
        &bed,
        &server,
        None,
        &["pick", "--need", "hf:nobody/nothing"],
    );
    refused(
        &o,
        &[
            "--need: ",
            "hf:nobody/nothing",
            "HTTP 401",
            "no repository nobody/nothing",
        ],
    );
    assert!(!stderr(&o).contains("--need: hf:nobody/nothing: hf:nobody/nothing"));
}
