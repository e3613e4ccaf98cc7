//! What `hmn fits` takes as a remote model and where it fetches from (feature `hub`): the
//! spec `hf:ORG/REPO[@REVISION][:FILE]` or an `https://` URL ([`Remote`], a pure parser),
//! and the Hub's endpoint, token, time limit and trusted certificates ([`HubOptions`], from
//! `HF_ENDPOINT`, `HF_TOKEN`, `HMN_HUB_TIMEOUT`, `SSL_CERT_FILE`). The fetching is [`super::hub`]'s.

use std::path::PathBuf;
use std::time::Duration;

use crate::types::error::ParseError;

/// The Hub a `hf:` spec names when `HF_ENDPOINT` is not set.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";
/// Each request's time limit unless `HMN_HUB_TIMEOUT` (seconds) says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Where and how to fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HubOptions {
    /// The Hub's base URL (`HF_ENDPOINT`).
    pub endpoint: String,
    /// A token for gated and private repositories (`HF_TOKEN`).
    pub token: Option<String>,
    /// Each request's time limit, redirects and body included.
    pub timeout: Duration,
    /// A PEM bundle of the certificates to trust instead of the Mozilla roots built in
    /// (`SSL_CERT_FILE`, as OpenSSL and curl read it): a company's authority, a mirror's.
    pub ca_bundle: Option<PathBuf>,
}

impl Default for HubOptions {
    fn default() -> Self {
        HubOptions {
            endpoint: DEFAULT_ENDPOINT.to_string(),
            token: None,
            timeout: DEFAULT_TIMEOUT,
            ca_bundle: None,
        }
    }
}

impl HubOptions {
    /// From the environment: `HF_ENDPOINT`, `HF_TOKEN` (empty values are unset),
    /// `HMN_HUB_TIMEOUT` (whole seconds, 1 to 3600) and `SSL_CERT_FILE`.
    pub fn from_env() -> HubOptions {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        HubOptions {
            endpoint: var("HF_ENDPOINT")
                .map(|e| e.trim().trim_end_matches('/').to_string())
                .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string()),
            token: var("HF_TOKEN").map(|t| t.trim().to_string()),
            timeout: var("HMN_HUB_TIMEOUT")
                .and_then(|t| t.trim().parse::<u64>().ok())
                .filter(|t| (1..=3600).contains(t))
                .map_or(DEFAULT_TIMEOUT, Duration::from_secs),
            ca_bundle: var("SSL_CERT_FILE").map(PathBuf::from),
        }
    }
}

/// A model that is not on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Remote {
    /// `hf:ORG/REPO[@REVISION][:FILE]`.
    Hub {
        /// `ORG/REPO`.
        repo: String,
        /// A branch, tag or commit (default `main`).
        revision: String,
        /// A file in the repository.
        file: Option<String>,
    },
    /// `https://…` (or `http://…`) to one file.
    Url(String),
}

fn repo_part_ok(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= 96
        && p.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && !p.starts_with('.')
        && !p.contains("..")
}

pub(crate) fn path_ok(p: &str, max: usize) -> bool {
    !p.is_empty()
        && p.len() <= max
        && !p.starts_with('/')
        && p.split('/').all(|s| !s.is_empty() && s != "." && s != "..")
        && p.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.+/ ".contains(&b))
}

impl Remote {
    /// Parses `hf:ORG/REPO[@REVISION][:FILE]`, `https://…` and `http://…`; `Ok(None)` for
    /// anything else (a local path or a size).
    ///
    /// # Errors
    /// A [`ParseError`] naming the spec when it starts as one but is malformed.
    pub fn parse(s: &str) -> Result<Option<Remote>, ParseError> {
        let shown: String = s.chars().take(120).collect();
        let bad = |why: &str| ParseError::new(format!("invalid model spec {shown:?}: {why}"));
        if let Some(rest) = s.strip_prefix("hf:") {
            let (repo_rev, file) = match rest.split_once(':') {
                Some((a, f)) => (a, Some(f)),
                None => (rest, None),
            };
            let (repo, revision) = match repo_rev.split_once('@') {
                Some((r, v)) => (r, v),
                None => (repo_rev, "main"),
            };
            let mut parts = repo.split('/');
            let (Some(org), Some(name), None) = (parts.next(), parts.next(), parts.next()) else {
                return Err(bad("expected hf:ORG/REPO[@REVISION][:FILE]"));
            };
            if !repo_part_ok(org) || !repo_part_ok(name) {
                return Err(bad("ORG and REPO are letters, digits, '-', '_' and '.'"));
            }
            if !path_ok(revision, 256) || revision.contains(' ') {
                return Err(bad("the revision is a branch, tag or commit name"));
            }
            if let Some(f) = file {
                if !path_ok(f, 1000) {
                    return Err(bad("FILE is a path inside the repository"));
                }
            }
            return Ok(Some(Remote::Hub {
                repo: repo.to_string(),
                revision: revision.to_string(),
                file: file.map(str::to_string),
            }));
        }
        if s.starts_with("https://") || s.starts_with("http://") {
            let after = s.split_once("://").map_or("", |(_, a)| a);
            let path = after.split(['?', '#']).next().unwrap_or("");
            if s.len() > 2000 || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(bad("not a URL"));
            }
            match path.split_once('/') {
                Some((host, p)) if !host.is_empty() && !p.is_empty() && !p.ends_with('/') => {}
                _ => return Err(bad("a URL to one model file (…/model.gguf)")),
            }
            return Ok(Some(Remote::Url(s.to_string())));
        }
        Ok(None)
    }

    /// How errors name it: the spec as given.
    pub fn label(&self) -> String {
        match self {
            Remote::Hub {
                repo,
                revision,
                file,
            } => {
                let rev = if revision == "main" {
                    String::new()
                } else {
                    format!("@{revision}")
                };
                let f = file.as_ref().map(|f| format!(":{f}")).unwrap_or_default();
                format!("hf:{repo}{rev}{f}")
            }
            Remote::Url(u) => u.split(['?', '#']).next().unwrap_or(u).to_string(),
        }
    }
}

/// A URL's origin: its scheme, host (lowercase, after any `user@`) and port (the scheme's
/// default when absent); `None` for anything but `http`/`https` or a malformed authority.
pub(crate) fn origin(url: &str) -> Option<(String, String, u16)> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default = match scheme.as_str() {
        "https" => 443,
        "http" => 80,
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = match host_port.strip_prefix('[') {
        Some(v6) => {
            let (h, after) = v6.split_once(']')?;
            if !after.is_empty() && !after.starts_with(':') {
                return None;
            }
            (format!("[{h}]"), after.strip_prefix(':'))
        }
        None => match host_port.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (host_port.to_string(), None),
        },
    };
    let port = match port {
        None | Some("") => default,
        Some(p) => p.parse().ok()?,
    };
    if host.is_empty() || host == "[]" {
        return None;
    }
    Some((scheme, host.to_ascii_lowercase(), port))
}

/// Whether `url` is on the Hub: its origin is `endpoint`'s (then `HF_TOKEN` may go to it).
pub(crate) fn on_hub(url: &str, endpoint: &str) -> bool {
    matches!((origin(url), origin(endpoint)), (Some(a), Some(b)) if a == b)
}

/// A Hub's page for a file (`…/ORG/REPO/blob/REV/FILE`, what a browser shows) as the file
/// itself (`…/resolve/…`); any other URL as it is.
pub(crate) fn blob_to_resolve(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let Some((authority, path)) = rest.split_once('/') else {
        return url.to_string();
    };
    let mut parts = path.splitn(4, '/');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(org), Some(repo), Some("blob"), Some(rest))
            if !org.is_empty() && !repo.is_empty() =>
        {
            format!("{scheme}://{authority}/{org}/{repo}/resolve/{rest}")
        }
        _ => url.to_string(),
    }
}

/// Percent-encodes a path segment's reserved characters (`/` in a revision, spaces).
pub(crate) fn encode(s: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) || (keep_slash && b == b'/') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs() {
        let hub = |r: &str, v: &str, f: Option<&str>| {
            Some(Remote::Hub {
                repo: r.into(),
                revision: v.into(),
                file: f.map(Into::into),
            })
        };
        assert_eq!(
            Remote::parse("hf:meta-llama/Llama-3.1-8B").unwrap(),
            hub("meta-llama/Llama-3.1-8B", "main", None)
        );
        assert_eq!(
            Remote::parse("hf:org/repo@v1.0:sub/model-Q4_K_M.gguf").unwrap(),
            hub("org/repo", "v1.0", Some("sub/model-Q4_K_M.gguf"))
        );
        assert_eq!(
            Remote::parse("hf:o/r@refs/pr/1").unwrap(),
            hub("o/r", "refs/pr/1", None)
        );
        assert_eq!(Remote::parse("./model.gguf").unwrap(), None);
        assert_eq!(Remote::parse("14GiB").unwrap(), None);
        assert!(matches!(
            Remote::parse("https://example.org/x/model.gguf").unwrap(),
            Some(Remote::Url(_))
        ));
        for bad in [
            "hf:",
            "hf:repo",
            "hf:a/b/c",
            "hf:../x",
            "hf:o/r@",
            "hf:o/r:",
            "hf:o/r:../etc/passwd",
            "hf:o/r:/abs",
            "hf:o/r@a b",
            "hf:o r/x",
            "https://",
            "https://host/",
            "https://host",
            "https://host/a b",
        ] {
            let e = Remote::parse(bad).unwrap_err().to_string();
            assert!(e.starts_with("invalid model spec"), "{bad}: {e}");
        }
        let r = Remote::parse("hf:o/r@dev:m.gguf").unwrap().unwrap();
        assert_eq!(r.label(), "hf:o/r@dev:m.gguf");
        assert_eq!(encode("refs/pr/1", false), "refs%2Fpr%2F1");
        assert_eq!(encode("sub/a b.gguf", true), "sub/a%20b.gguf");
    }

    #[test]
    fn origins() {
        let hub = "https://huggingface.co";
        for same in [
            "https://huggingface.co/org/repo/resolve/main/model.gguf",
            "https://HuggingFace.co:443/org/repo/blob/main/m.gguf?download=true",
            "HTTPS://huggingface.co",
            "https://user@huggingface.co/x",
        ] {
            assert!(on_hub(same, hub), "{same}");
        }
        for other in [
            "http://huggingface.co/org/repo/resolve/main/model.gguf",
            "https://huggingface.co:8443/x",
            "https://cdn-lfs.huggingface.co/x",
            "https://huggingface.co.evil.org/x",
            "https://huggingface.co@evil.org/x",
            "https://evil.org/huggingface.co/x",
            "https://evil.org?huggingface.co",
            "ftp://huggingface.co/x",
            "https://huggingface.co:x/",
            "https:///x",
        ] {
            assert!(!on_hub(other, hub), "{other}");
        }
        assert!(on_hub(
            "http://127.0.0.1:8080/o/r/resolve/main/m.gguf",
            "http://127.0.0.1:8080"
        ));
        assert!(!on_hub("http://127.0.0.1:8081/x", "http://127.0.0.1:8080"));
        assert!(on_hub("http://[::1]:80/x", "http://[::1]"));
        assert!(!on_hub("http://[::1]x/", "http://[::1]"));
        assert_eq!(
            blob_to_resolve("https://huggingface.co/org/repo/blob/main/sub/m.gguf"),
            "https://huggingface.co/org/repo/resolve/main/sub/m.gguf"
        );
        for kept in [
            "https://huggingface.co/org/repo/resolve/main/blob/m.gguf",
            "https://huggingface.co/org/blob/main/m.gguf",
            "https://huggingface.co/blob",
        ] {
            assert_eq!(blob_to_resolve(kept), kept);
        }
    }
}
