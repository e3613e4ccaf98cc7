//! vLLM's refusals as `hmn fits` words them (QA of `hmn fits`): a context beyond the derived
//! `max_model_len` is "does not fit" on the device line as in the verdict, and the largest
//! context is at most what vLLM accepts; tensor parallel N needs N GPUs, present or given
//! with `--free`.

use crate::fits::llama_8b;
use crate::util::{Bed, json, stderr, stdout};

/// QA (defect 3): `--runtime vllm --context 140000` (trained 131072) printed "fits, 41.9 GiB
/// headroom; largest context 140000" on the device line, then vLLM's refusal and "does not
/// fit"; JSON had `max_context` 140000. The device line says it does not fit, and the largest
/// context is the derived `max_model_len`, in text and JSON.
#[test]
fn a_refused_context_does_not_fit_on_the_device_line_either() {
    let bed = Bed::new();
    let model = llama_8b(bed.dir.path());
    let m = model.to_str().unwrap();
    let args = [
        "fits",
        m,
        "--runtime",
        "vllm",
        "--context",
        "140000",
        "--free",
        "80GiB",
    ];
    let o = bed.run(&args);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let line = stdout(&o)
        .lines()
        .find(|l| l.starts_with("--free:"))
        .map(str::to_string)
        .unwrap();
    assert!(
        line.starts_with(
            "--free: 80 GiB free — does not fit: the runtime refuses to start (memory alone: fits, "
        ),
        "{line}"
    );
    assert!(
        line.contains("largest context 131072 (batch 1), largest batch 0 (context 140000)"),
        "{line}"
    );
    let o = bed.run(&[&args[..], &["--json"]].concat());
    let v = json(&o);
    let verdict = &v["devices"][0]["verdict"];
    assert_eq!(v["fit"], "does_not_fit");
    assert_eq!(verdict["fit"], "does_not_fit");
    assert_eq!(verdict["max_context"], 131_072);
    assert_eq!(verdict["max_batch"], 0);
    assert!(
        verdict["refusal"]
            .as_str()
            .unwrap()
            .contains("greater than the derived max_model_len 131072")
    );
}

/// QA (defect 3): `max_position_embeddings: 0` with `--runtime vllm` ran at "context 0" and
/// answered "largest context 1"; a trained context of 0 is invalid (as `--context 0` is).
#[test]
fn a_trained_context_of_zero_is_invalid_for_vllm() {
    let bed = Bed::new();
    let dir = crate::fits_bounds::model_with_config(&bed, "ctx0", "max_position_embeddings", "0");
    let o = bed
        .cmd(&["fits", "--runtime", "vllm", "--free", "80GiB"])
        .arg(&dir)
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(
            "config.json: invalid max_position_embeddings (0: out of range, at least 1 token)"
        ),
        "{err}"
    );
}

/// QA (defect 4): `--tensor-parallel-size 4 --free 40GiB` said "fits" with `devices_used: []`,
/// while `--device 1` and `--free 40GiB,40GiB` were refused. One `--free` figure is one GPU
/// (docs/cli.md: "several, comma-separated, plan for that many GPUs"): refused the same way,
/// one line, exit 2; four figures plan the four ranks.
#[test]
fn tensor_parallel_needs_one_free_figure_per_gpu() {
    let bed = Bed::new();
    let model = llama_8b(bed.dir.path());
    let m = model.to_str().unwrap();
    let tp4 = |free: &str, json: bool| {
        let mut args = vec![
            "fits",
            m,
            "--runtime",
            "vllm",
            "--tensor-parallel-size",
            "4",
            "--free",
            free,
        ];
        if json {
            args.push("--json");
        }
        bed.run(&args)
    };
    for (free, given) in [("40GiB", 1), ("40GiB,40GiB", 2)] {
        let o = tp4(free, false);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{free}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with(&format!(
                "hmn: --tensor-parallel-size 4 needs 4 GPUs; --free gives {given} (one figure per GPU"
            )),
            "{err}"
        );
    }
    let o = tp4("40GiB,40GiB,40GiB,40GiB", true);
    let v = json(&o);
    assert_eq!(o.status.code(), Some(0), "{v}");
    assert_eq!(v["plan"], "tensor_parallel");
    assert_eq!(v["devices_used"], serde_json::json!([0, 1, 2, 3]));
}
