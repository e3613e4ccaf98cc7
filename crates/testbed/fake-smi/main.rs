//! The fake `nvidia-smi` as a program, for platforms without `/bin/sh` (Windows under Wine):
//! the same behaviours as the shell script `src/smi.rs` writes, driven by files beside the
//! executable — `gpus.csv`, `apps.csv`, `behaviour` (`normal`, `hang`, `fail CODE` with
//! `fail.txt`, `no-reserved`), optional `devices` (the `--id` bound). Each call appends its
//! arguments to `nvidia-smi.calls`. Built by the test bed's `build.rs` with plain `rustc`.

use std::io::Write as _;
use std::path::PathBuf;

fn main() {
    std::process::exit(run());
}

fn read(dir: &PathBuf, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_default()
}

fn run() -> i32 {
    let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(PathBuf::from))
    else {
        return 3;
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("nvidia-smi.calls"))
    {
        let _ = writeln!(f, "{}", args.join(" "));
    }
    let out = |text: &str| {
        let _ = std::io::stdout().write_all(text.as_bytes());
    };
    if let Ok(n) = read(&dir, "devices").trim().parse::<u32>() {
        for a in &args {
            if let Some(id) = a.strip_prefix("--id=").and_then(|v| v.parse::<u32>().ok()) {
                if id >= n {
                    out("No devices were found\n");
                    return 6;
                }
            }
        }
    }
    let behaviour = read(&dir, "behaviour");
    let behaviour = behaviour.trim();
    if behaviour == "hang" {
        std::thread::sleep(std::time::Duration::from_secs(30));
        return 0;
    }
    if let Some(code) = behaviour.strip_prefix("fail ") {
        out(&read(&dir, "fail.txt"));
        return code.trim().parse().unwrap_or(1);
    }
    for a in &args {
        if a.starts_with("--query-gpu=") {
            if behaviour == "no-reserved" && a.contains("memory.reserved") {
                out("Field \"memory.reserved\" is not a valid field to query.\n");
                return 2;
            }
            out(&read(&dir, "gpus.csv"));
            return 0;
        }
        if a.starts_with("--query-compute-apps=") {
            out(&read(&dir, "apps.csv"));
            return 0;
        }
    }
    let _ = writeln!(std::io::stderr(), "fake nvidia-smi: unsupported arguments");
    2
}
