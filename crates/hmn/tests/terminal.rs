//! Nothing from outside reaches the terminal raw (issue 22, point 3): control sequences (a
//! title change `ESC ]2;…BEL`, a clipboard write `OSC 52`, CSI in 7 and 8 bits, DEL) fed
//! through every surface — paths in errors of every command that takes one, a recording's
//! file name, a model's dtype, shard name and GGUF keys, a process name in text and JSON, a
//! library path in `doctor` — come out escaped on stdout and stderr.

use std::ffi::OsStr;
use std::io::Write as _;
use std::process::Output;

use hmn_testbed::{FakeNvml, FakeProc, FakeProcess, GgufWriter};

use crate::util::Bed;

/// Sets the terminal's title, writes the clipboard, clears the screen in 7 and 8 bits.
const HOSTILE: &str = "\x1b]2;pwned\x07\x1b]52;c;cHduZWQ=\x07\x1b[2J\u{9b}31m\x7f";

/// The first control character (other than a line's end) in `bytes`, if any.
fn raw_control(bytes: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    text.chars()
        .find(|c| c.is_control() && *c != '\n')
        .map(|c| format!("{c:?}"))
}

/// Asserts that neither stream of `o` carries a control character and that stderr is one
/// line holding `words` (the escaped hostile text, so the surface was reached).
fn clean(what: &str, o: &Output, words: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    if let Some(c) = raw_control(&o.stdout) {
        panic!(
            "{what}: {c} on stdout: {:?}",
            String::from_utf8_lossy(&o.stdout)
        );
    }
    if let Some(c) = raw_control(&o.stderr) {
        panic!("{what}: {c} on stderr: {err:?}");
    }
    let all = format!("{}{err}", String::from_utf8_lossy(&o.stdout));
    assert!(all.contains(words), "{what}: {words:?} not in {all:?}");
}

#[test]
fn a_hostile_path_is_escaped_in_every_command_that_takes_one() {
    let bed = Bed::new();
    let dir = bed.path(HOSTILE);
    let bad = dir.join("x"); // in a directory that does not exist
    let bad: &OsStr = bad.as_os_str();
    let escaped = "\\x1b]2;pwned\\x07\\x1b]52;c;cHduZWQ=\\x07\\x1b[2J\\x9b31m\\x7f";
    let run = |args: &[&OsStr]| bed.cmd(&[]).args(args).output().unwrap();
    let os = |s: &'static str| OsStr::new(s);
    for args in [
        vec![os("fits"), bad],
        vec![os("fits"), os("--json"), bad],
        vec![os("record"), bad],
        vec![os("run"), os("--timeline"), bad, os("--"), os("true")],
        vec![os("run"), os("--plot"), bad, os("--"), os("true")],
        vec![os("top"), os("--replay"), bad],
    ] {
        let o = run(&args);
        let what = format!("{args:?}");
        assert_eq!(o.status.code(), Some(2), "{what}: {o:?}");
        clean(&what, &o, escaped);
    }
    #[cfg(feature = "serve")]
    {
        let o = run(&[
            os("serve"),
            os("--listen"),
            os("127.0.0.1:0"),
            os("--textfile"),
            bad,
        ]);
        clean("serve --textfile", &o, escaped);
        let o = run(&[os("serve"), os("--listen"), OsStr::new(HOSTILE)]);
        clean("serve --listen", &o, escaped);
    }
    // A library path hmn is told to load, in doctor's text and the devices line.
    for args in [vec![os("doctor")], vec![]] {
        let o = bed
            .cmd(&[])
            .args(&args)
            .env("HMN_NVML_LIB", bad)
            .output()
            .unwrap();
        clean(&format!("{args:?} with HMN_NVML_LIB"), &o, "\\x1b]2;pwned");
    }
}

#[test]
fn a_recordings_file_name_is_escaped() {
    let bed = Bed::new();
    let file = bed.path(&format!("{HOSTILE}.jsonl"));
    std::fs::write(&file, "not a snapshot\n").unwrap();
    let o = bed.cmd(&["top", "--replay"]).arg(&file).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    clean("top --replay", &o, "\\x1b]2;pwned\\x07");
}

#[test]
fn model_files_text_is_escaped_in_text_and_json() {
    let bed = Bed::new();
    let quoted = serde_json::to_string(HOSTILE).unwrap();
    // A safetensors dtype.
    let path = bed.path("dtype.safetensors");
    let header = format!(r#"{{"w":{{"dtype":{quoted},"shape":[1],"data_offsets":[0,4]}}}}"#);
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(&(header.len() as u64).to_le_bytes()).unwrap();
    f.write_all(header.as_bytes()).unwrap();
    f.write_all(&[0; 4]).unwrap();
    // A shard name in an index.
    let index = bed.path("index");
    std::fs::create_dir(&index).unwrap();
    let map = serde_json::json!({"weight_map": {"w": format!("{HOSTILE}.safetensors")}});
    std::fs::write(index.join("model.safetensors.index.json"), map.to_string()).unwrap();
    // GGUF keys (named after a hostile architecture; the block count of the wrong type is
    // reported with its key).
    let gguf = bed.path("arch.gguf");
    GgufWriter::new()
        .str("general.architecture", HOSTILE)
        .str(&format!("{HOSTILE}.block_count"), "2")
        .write(&gguf)
        .unwrap();
    for model in [&path, &index, &gguf] {
        for json in [false, true] {
            let mut c = bed.cmd(&["fits", "--free", "1TiB"]);
            if json {
                c.arg("--json");
            }
            let o = c.arg(model).output().unwrap();
            clean(&format!("fits {model:?} json={json}"), &o, "\\x1b]2;pwned");
        }
    }
}

#[test]
fn a_hostile_process_name_is_escaped_in_text_and_json() {
    let fake = FakeNvml::h100s(1).process(FakeProcess::compute(0, 4242, 1 << 30));
    let bed = Bed::with_nvml(&fake);
    bed.fixture()
        .process(&FakeProc::new(4242, "a\x1b]2;x\x07\u{9b}1m\x7f"))
        .unwrap();
    for args in [&["ps"][..], &["ps", "--json"], &["ps", "--csv"]] {
        let o = bed.run(args);
        assert!(o.status.success(), "{o:?}");
        clean(&format!("{args:?}"), &o, "a\\");
        if args.contains(&"--json") {
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            let name = v["processes"][0]["name"].as_str().unwrap().to_string();
            assert!(
                name.contains('\u{9b}'),
                "JSON keeps the text, escaped: {name:?}"
            );
        }
    }
}
