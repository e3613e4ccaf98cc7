//! Writes the hostile model files of [`hmn_testbed::hostile_models`] (sparse) into a directory,
//! for measuring `hmn fits` on them (`bench/hostile_models.sh`):
//!
//! ```sh
//! cargo run -p hmn-testbed --example hostile_models -- DIR BYTES
//! ```
//!
//! BYTES is the junk per file (`67108864` for 64 MiB; suffixes `M` and `G` are MiB and GiB).
//! Also writes `symlinks/`: a safetensors file with a header of about BYTES (capped at the
//! format's 100,000,000) and 32 shard names linking to it, and `hf-cache/`: a Hugging Face cache
//! (`snapshots/<rev>/*.safetensors` → `../../blobs/<sha>`) of 4 distinct shards.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::path::Path;

fn bytes(arg: &str) -> u64 {
    let (n, unit) = match arg.strip_suffix(['G', 'M']) {
        Some(n) if arg.ends_with('G') => (n, 1 << 30),
        Some(n) => (n, 1 << 20),
        None => (arg, 1),
    };
    n.parse::<u64>()
        .expect("BYTES: a number, optionally with M or G")
        * unit
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, size] = args.as_slice() else {
        eprintln!("usage: hostile_models DIR BYTES");
        std::process::exit(2);
    };
    let dir = Path::new(dir);
    std::fs::create_dir_all(dir).unwrap();
    let size = bytes(size);
    for (name, w) in hmn_testbed::hostile_models::gguf_attacks(size) {
        w.write_sparse(&dir.join(&name)).unwrap();
        println!("{}", dir.join(name).display());
    }
    let links = dir.join("symlinks");
    hmn_testbed::hostile_models::symlinked_shards(&links, size.min(100_000_000), 32).unwrap();
    println!(
        "{}",
        links.join("model-00001-of-00032.safetensors").display()
    );
    let cache = dir.join("hf-cache");
    let snapshot = hmn_testbed::hostile_models::hf_cache(&cache, 4, false, true).unwrap();
    println!("{}", snapshot.display());
}
