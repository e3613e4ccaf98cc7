//! The layers of each crate and their ranks: the one place they are written down.
//!
//! A file's layer is the folder (or file) directly under `src/` that holds it. A file may import
//! from its own layer and from layers of lower rank; two layers of one rank are siblings and
//! may not import each other. The crate root (`lib.rs`, `main.rs`) is above every layer.

use crate::check::{Layer, Table};

const fn l(name: &'static str, rank: u8) -> Layer {
    Layer::new(name, rank)
}

/// `crates/hypomnesis/src`.
pub const LIBRARY: Table = Table {
    root: "lib.rs",
    layers: &[
        // The data model and its vocabulary: devices, processes, unknowns, errors, PCI ids.
        l("types", 0),
        // The I/O edge and the operating system's facts.
        l("system", 1),
        // NVML, nvidia-smi, DRM, WDDM, Metal.
        l("backends", 2),
        // The truthful entry point (Probe, ProbeOptions) and device selectors.
        l("probe", 3),
        // Rules over readings taken over time; and will-it-fit, its sibling.
        l("measure", 4),
        l("estimate", 4),
        // `hmn doctor`'s facts and checks.
        l("doctor", 5),
        // The upstream-compatible API (hypomnesis 0.2).
        l("compat", 6),
        // Builders for downstream tests (feature `test-helpers`).
        l("test_helpers", 7),
    ],
};

/// `crates/hmn/src`: `main.rs` dispatches; commands use shared helpers below them.
pub const HMN: Table = Table {
    root: "main.rs",
    layers: &[
        // Leaves: the command line, formatting, files in and out, the stop flag.
        l("args", 0),
        l("format", 0),
        l("infile", 0),
        l("outfile", 0),
        l("signals", 0),
        // Output helpers over the formatting; the words for health and the XID counter.
        l("output", 1),
        l("health", 1),
        l("pool", 1),
        l("remote", 1),
        l("who", 1),
        // `--device` resolved (reads the command line, writes notes).
        l("select", 2),
        // `hmn pick`, and the pick `hmn run --gpu` makes (a command other commands build on).
        l("pick", 2),
        // One command each.
        l("devices", 3),
        l("doctor", 3),
        l("fits", 3),
        l("generate", 3),
        l("ps", 3),
        l("run", 3),
        l("serve", 3),
        l("watch_device", 3),
        l("watch_gpu", 3),
        l("watch_growth", 3),
        // Commands built on other commands: `spill` runs as `run` does, `top` lists as `ps`.
        l("spill", 4),
        l("top", 4),
        // `watch`: `ps`'s rows, `spill`'s fields, `watch_gpu`'s NVIDIA parts, `watch_device`'s device
        // figures and `watch_growth`'s trends.
        l("watch", 5),
        // `watch`'s unit tests, in a file of their own for its size.
        l("watch_tests", 6),
    ],
};
