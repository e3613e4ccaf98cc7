//! `deploy/`: the Kubernetes DaemonSet parses, runs `hmn serve` with flags that exist, mounts the
//! host's /proc and the kubelet's log layout (the workload names) read-only, adds only the
//! capabilities docs/containers.md names; the docker run example passes flags that exist too.

use serde_yaml::Value;

use crate::util::{Bed, stdout};

fn deploy(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy")
        .join(name)
}

fn serve_help() -> String {
    stdout(&Bed::new().run(&["serve", "--help"]))
}

/// Every `--flag` in `args` is one `hmn serve --help` lists.
fn flags_exist(args: &[String]) {
    let help = serve_help();
    for a in args.iter().filter(|a| a.starts_with("--")) {
        let flag = a.split('=').next().unwrap();
        assert!(
            help.contains(&format!("{flag} ")),
            "{flag} is not an hmn serve flag:\n{help}"
        );
    }
}

#[test]
fn the_daemonset() {
    let text = std::fs::read_to_string(deploy("kubernetes/hmn-serve-daemonset.yaml")).unwrap();
    let docs: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    let ds = docs
        .iter()
        .find(|d| d["kind"] == "DaemonSet")
        .expect("a DaemonSet");
    assert_eq!(ds["apiVersion"], "apps/v1");
    let spec = &ds["spec"]["template"]["spec"];
    assert_eq!(spec["hostPID"], Value::Bool(false));
    let c = &spec["containers"][0];
    let args: Vec<String> = c["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    assert_eq!(args[0], "serve");
    flags_exist(&args);
    let proc_root = args.iter().position(|a| a == "--proc-root").unwrap();
    let mount = &c["volumeMounts"][0];
    assert_eq!(
        mount["mountPath"].as_str(),
        Some(args[proc_root + 1].as_str())
    );
    assert_eq!(mount["readOnly"], Value::Bool(true));
    assert_eq!(spec["volumes"][0]["hostPath"]["path"], "/proc");
    // The kubelet's pods/ and containers/, read-only, under the log root hmn reads.
    let log_root = c["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "HMN_LOG_ROOT")
        .and_then(|e| e["value"].as_str())
        .expect("HMN_LOG_ROOT set");
    assert!(
        serve_help().contains("[env: HMN_LOG_ROOT"),
        "HMN_LOG_ROOT is the log root's variable"
    );
    for dir in ["pods", "containers"] {
        let mount = c["volumeMounts"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|m| m["mountPath"].as_str() == Some(&format!("{log_root}/{dir}")))
            .unwrap_or_else(|| panic!("{log_root}/{dir} is not mounted"));
        assert_eq!(mount["readOnly"], Value::Bool(true), "{dir}");
        let volume = spec["volumes"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|v| v["name"] == mount["name"])
            .unwrap();
        assert_eq!(
            volume["hostPath"]["path"].as_str(),
            Some(format!("/var/log/{dir}").as_str())
        );
    }
    let caps = &c["securityContext"]["capabilities"];
    assert_eq!(caps["drop"][0], "ALL");
    let added: Vec<&str> = caps["add"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(added, ["SYS_PTRACE", "DAC_READ_SEARCH"]);
    assert_eq!(
        c["securityContext"]["allowPrivilegeEscalation"],
        Value::Bool(false)
    );
    assert_eq!(c["ports"][0]["containerPort"].as_u64(), Some(9835));
}

#[test]
fn the_docker_run_example() {
    let text = std::fs::read_to_string(deploy("docker-run.sh")).unwrap();
    let joined = text.replace("\\\n", " ");
    let line = joined.lines().find(|l| l.contains("docker run")).unwrap();
    let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    let serve = words.iter().position(|w| w == "serve").unwrap();
    flags_exist(&words[serve..]);
    assert!(line.contains("-v /proc:/host/proc:ro"), "{line}");
    assert!(
        line.contains("--cap-drop ALL --cap-add SYS_PTRACE --cap-add DAC_READ_SEARCH"),
        "{line}"
    );
    assert!(
        !line.contains("--privileged") && !line.contains("--pid=host"),
        "{line}"
    );
}
