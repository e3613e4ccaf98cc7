//! Opening a model on a Hugging Face Hub (`hf:ORG/REPO[@REVISION][:FILE]`) or at an
//! `https://` URL (feature `hub`): the same headers the local readers read ([`super::model`]),
//! fetched with HTTP range requests — a few kilobytes to megabytes, never the weights.
//!
//! | Step | Request | Bound |
//! |---|---|---|
//! | the repository's files | `GET {endpoint}/api/models/{repo}/revision/{rev}` (`siblings[].rfilename`) | 16 MiB |
//! | `config.json` beside the weights | `GET {endpoint}/{repo}/resolve/{rev}/{dir}config.json` (404: a weights-only estimate) | 16 MiB, as a local one |
//! | a shard index | the same, `….safetensors.index.json` | 100 MB and 4096 shards, as a local one |
//! | a safetensors header | `Range: bytes=0-7`, then the header's length; the file's size from `Content-Range` | 100 MB for the whole set, as local shards |
//! | a GGUF header | ranges read on demand (64 KiB chunks doubling to 4 MiB; skipped arrays not fetched) | the GGUF reader's budget (256 MiB read, 16 MiB kept) over the split set, as local files |
//!
//! `resolve` URLs redirect large files to a CDN; redirects are followed (at most 10) and
//! `Authorization: Bearer $HF_TOKEN` is sent to the Hub's origin only (a `hf:` spec, or a URL
//! whose scheme, host and port are `HF_ENDPOINT`'s), and not across a redirect to another host;
//! a refusal after a token was sent says it was refused, never to set it. `HF_ENDPOINT` replaces
//! `https://huggingface.co` (mirrors, a local test server). An error status is one line
//! naming the input, and what it means from the Hub's `X-Error-Code` header when it sends one
//! (as `huggingface_hub` reads it): `RepoNotFound` (without a token the Hub answers 401 for a
//! repository that does not exist, as for a private one), `GatedRepo` (accept the licence, set
//! `HF_TOKEN`), `RevisionNotFound`, `EntryNotFound`; without a code, 401/403 (a gated or private
//! repository: set `HF_TOKEN`, or the token was refused when one was sent) and 404; an
//! unreachable server (offline), a timeout, a TLS certificate not trusted (named as such).

use std::path::{Path, PathBuf};

use super::config;
use super::gguf;
pub use super::hub_spec::{DEFAULT_ENDPOINT, DEFAULT_TIMEOUT, HubOptions, Remote};
use super::hub_spec::{blob_to_resolve, encode, on_hub, path_ok};
use super::model::{
    MAX_CONFIG, OpenedModel, assemble_gguf, assemble_safetensors, shard_name, split_gguf,
};
use super::safetensors;
use crate::system::http::{Client, HttpError, HubCode, RemoteFile};
use crate::types::error::Error;

/// The longest an API listing may be.
const MAX_LISTING: u64 = 16 << 20;
/// What was read, and what it cost.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteModel {
    /// The model, as a local one reads (its `files` are URLs).
    pub model: OpenedModel,
    /// Body bytes received over every request.
    pub bytes_fetched: u64,
}

/// One fetch context: the client, the label errors carry, the URL of each file.
struct Fetch<'a> {
    client: Client,
    label: String,
    url_of: Box<dyn Fn(&str) -> String + 'a>,
    /// A URL given directly: a `config.json` beside it that cannot be read (401, 403 — a
    /// presigned URL signs one file — or 404) is absent, not an error.
    lenient: bool,
    /// The repository and revision of a `hf:` spec, which a Hub's refusal names.
    repo: Option<(String, String)>,
    /// Whether `HF_TOKEN` was sent (then a refusal never says to set it).
    token: bool,
    /// Whether the server is the Hub (`HF_ENDPOINT`'s origin), the only one `HF_TOKEN` goes to.
    hub: bool,
}

impl Fetch<'_> {
    fn err(&self, what: &str, e: &HttpError) -> Error {
        let hint = match e {
            HttpError::Status { code, hub, message } => {
                self.refusal(what, *code, hub.as_ref(), message.as_deref())
            }
            HttpError::Unreachable(_) => " (offline? HF_ENDPOINT names another server)".into(),
            HttpError::Certificate { .. } => " (hmn trusts the Mozilla roots built into it, not \
                 the system's: a TLS-inspecting proxy or a mirror with its own authority is \
                 refused unless SSL_CERT_FILE names a bundle with that authority)"
                .into(),
            _ => String::new(),
        };
        Error::parse(Path::new(&self.label), None, format!("{what}: {e}{hint}"))
    }

    /// What an error status means, from the Hub's `X-Error-Code` when it sent one (without a
    /// token, the Hub answers 401 for a repository that does not exist as for a private one).
    fn refusal(
        &self,
        what: &str,
        code: u16,
        hub: Option<&HubCode>,
        message: Option<&str>,
    ) -> String {
        let (repo, rev) = match &self.repo {
            Some((r, v)) => (Some(r.as_str()), v.as_str()),
            None => (None, ""),
        };
        let said = |m: Option<&str>| m.map(|m| format!(" ({m})")).unwrap_or_default();
        // What to do about a token that was not sent.
        let set = if self.hub {
            "set HF_TOKEN"
        } else {
            "HF_TOKEN is sent to HF_ENDPOINT's server only"
        };
        match (hub, repo) {
            (Some(HubCode::RepoNotFound), Some(r)) if self.token => {
                format!(": no repository {r}, or HF_TOKEN may not see it (check the name)")
            }
            (Some(HubCode::RepoNotFound), Some(r)) => {
                format!(": no repository {r} (check the name; if it is private, {set})")
            }
            (Some(HubCode::RepoNotFound), None) if self.token => {
                ": no such repository, or HF_TOKEN may not see it (check the URL)".into()
            }
            (Some(HubCode::RepoNotFound), None) => {
                format!(": no such repository (check the URL; if it is private, {set})")
            }
            (Some(HubCode::GatedRepo), _) if self.token => {
                ": a gated repository, and HF_TOKEN was refused: accept its licence on the Hub \
                 with the token's account"
                    .into()
            }
            (Some(HubCode::GatedRepo), _) if self.hub => {
                ": a gated repository: accept its licence on the Hub, then set HF_TOKEN".into()
            }
            (Some(HubCode::GatedRepo), _) => {
                format!(": a gated repository: accept its licence on the Hub ({set})")
            }
            (Some(HubCode::RevisionNotFound), Some(r)) => format!(": {r} has no revision {rev}"),
            (Some(HubCode::RevisionNotFound), None) => ": no such revision".into(),
            (Some(HubCode::EntryNotFound), Some(r)) => {
                format!(": {r} has no file {what} at {rev}")
            }
            (Some(HubCode::EntryNotFound), None) => ": no such file".into(),
            _ => match code {
                401 | 403 if self.token => format!(": HF_TOKEN was refused{}", said(message)),
                401 | 403 if self.hub => format!(
                    ": a gated or private repository — set HF_TOKEN{}",
                    said(message)
                ),
                401 | 403 => format!(": access denied ({set}){}", said(message)),
                404 => format!(": no such repository, revision or file{}", said(message)),
                _ => said(message),
            },
        }
    }

    fn get(&self, file: &str, cap: u64) -> Result<Option<Vec<u8>>, Error> {
        match self.client.get(&(self.url_of)(file), cap) {
            Ok(b) => Ok(Some(b)),
            Err(HttpError::Status {
                code: 404,
                hub: None | Some(HubCode::EntryNotFound),
                ..
            }) => Ok(None),
            Err(HttpError::Status {
                code: 401 | 403, ..
            }) if self.lenient => Ok(None),
            Err(e) => Err(self.err(file, &e)),
        }
    }

    fn open(&self, file: &str, cap: u64, first: u64) -> Result<RemoteFile, Error> {
        RemoteFile::open(&self.client, &(self.url_of)(file), cap, first)
            .map_err(|e| self.err(file, &e))
    }

    /// How a file is shown: its URL without a query (a presigned URL's signature).
    fn at(&self, file: &str) -> PathBuf {
        let url = (self.url_of)(file);
        PathBuf::from(url.split(['?', '#']).next().unwrap_or(&url))
    }

    /// `config.json` in `dir` (`""` or `"sub/"`), when there is one.
    fn config(&self, dir: &str) -> Result<Option<(super::arch::Architecture, String)>, Error> {
        let name = format!("{dir}config.json");
        let Some(text) = self.get(&name, MAX_CONFIG)? else {
            return Ok(None);
        };
        let a = config::from_config_json(&text).map_err(|e| e.at(self.at(&name)))?;
        Ok(Some((a, self.at(&name).display().to_string())))
    }

    fn safetensors(&self, files: &[String], dir: &str) -> Result<OpenedModel, Error> {
        let mut set = safetensors::ShardReader::new();
        for f in files {
            // The 8-byte length first, then exactly the header.
            let mut r = self.open(f, safetensors::MAX_HEADER.saturating_add(8), 8)?;
            let len = r.size();
            let res = set.read_stream(&self.at(f), &mut r, len);
            if let Some(e) = r.error.take() {
                return Err(self.err(f, &e));
            }
            res?;
        }
        let arch = self.config(dir)?;
        Ok(assemble_safetensors(
            set.finish(),
            arch,
            &format!(
                "{} ({})",
                self.label,
                if dir.is_empty() { "/" } else { dir }
            ),
        ))
    }

    fn index(&self, index: &str, dir: &str) -> Result<OpenedModel, Error> {
        let text = self
            .get(index, safetensors::MAX_HEADER)?
            .ok_or_else(|| self.err(index, &HttpError::status(404)))?;
        let shards = safetensors::index_shards(&text).map_err(|e| e.at(self.at(index)))?;
        let files: Vec<String> = shards.iter().map(|s| format!("{dir}{s}")).collect();
        self.safetensors(&files, dir)
    }

    fn gguf(&self, files: &[String]) -> Result<OpenedModel, Error> {
        let mut budget = gguf::ReadBudget::default();
        let mut headers = Vec::new();
        for f in files {
            let mut r = self.open(f, gguf::MAX_HEADER_BYTES, 64 << 10)?;
            let len = r.size();
            let h = gguf::read_header_within(&mut r, len, &mut budget);
            if let Some(e) = r.error.take() {
                return Err(self.err(f, &e));
            }
            headers.push((self.at(f), h.map_err(|e| e.at(self.at(f)))?));
        }
        assemble_gguf(headers, Vec::new())
    }
}

fn dir_of(file: &str) -> &str {
    file.rfind('/').map_or("", |i| &file[..=i])
}

/// The files to read for `file` (a name in the repository or beside a URL): a split GGUF
/// brings its set, a safetensors shard its index (when `listed` has it) or its set.
fn plan_file(
    fetch: &Fetch<'_>,
    file: &str,
    listed: Option<&[String]>,
) -> Result<OpenedModel, Error> {
    let dir = dir_of(file);
    let name = &file[dir.len()..];
    let has = |f: &str| listed.is_none_or(|l| l.iter().any(|x| x == f));
    if name.ends_with(".gguf") {
        return match split_gguf(name) {
            Some((prefix, total)) if total > 1 => {
                if total > 4096 {
                    return Err(fetch.err(
                        file,
                        &HttpError::Protocol("more than 4096 split files".into()),
                    ));
                }
                let all: Vec<String> = (1..=total)
                    .map(|k| format!("{dir}{prefix}-{k:05}-of-{total:05}.gguf"))
                    .collect();
                fetch.gguf(&all)
            }
            _ => fetch.gguf(&[file.to_string()]),
        };
    }
    if name.ends_with(".index.json") {
        return fetch.index(file, dir);
    }
    if name.ends_with(".safetensors") {
        if let Some((prefix, total)) = shard_name(name).filter(|(_, t)| *t > 1) {
            let index = format!("{dir}{prefix}.safetensors.index.json");
            if listed.is_some_and(|l| l.contains(&index)) {
                return fetch.index(&index, dir);
            }
            if total as usize > safetensors::MAX_SHARDS {
                return Err(fetch.err(file, &HttpError::Protocol("more than 4096 shards".into())));
            }
            let all: Vec<String> = (1..=total)
                .map(|k| format!("{dir}{prefix}-{k:05}-of-{total:05}.safetensors"))
                .collect();
            if let Some(missing) = all.iter().find(|f| !has(f)) {
                return Err(Error::parse(
                    Path::new(&fetch.label),
                    None,
                    format!(
                        "shard {missing} is not in the repository: the estimate needs every shard"
                    ),
                ));
            }
            return fetch.safetensors(&all, dir);
        }
        return fetch.safetensors(&[file.to_string()], dir);
    }
    Err(Error::parse(
        Path::new(&fetch.label),
        None,
        format!("{file}: not a .gguf, .safetensors or .safetensors.index.json file"),
    ))
}

/// The model file(s) of a repository's listing, as a local directory is read: an index, the
/// safetensors files (one, or one shard set), one GGUF or one split GGUF set.
fn pick(fetch: &Fetch<'_>, files: &[String]) -> Result<OpenedModel, Error> {
    let root: Vec<&String> = files.iter().filter(|f| !f.contains('/')).collect();
    if root.iter().any(|f| *f == "model.safetensors.index.json") {
        return fetch.index("model.safetensors.index.json", "");
    }
    let st: Vec<&String> = root
        .iter()
        .copied()
        .filter(|f| f.ends_with(".safetensors"))
        .collect();
    let gg: Vec<&String> = root
        .iter()
        .copied()
        .filter(|f| f.ends_with(".gguf"))
        .collect();
    let several = |kind: &str, list: &[&String]| {
        let shown: Vec<&str> = list.iter().take(6).map(|s| s.as_str()).collect();
        Error::parse(
            Path::new(&fetch.label),
            None,
            format!(
                "{} {kind} files ({}{}): name one, as {}:FILE",
                list.len(),
                shown.join(", "),
                if list.len() > 6 { ", …" } else { "" },
                fetch.label
            ),
        )
    };
    if !st.is_empty() && !gg.is_empty() {
        let both: Vec<&String> = st.iter().chain(&gg).copied().collect();
        return Err(several(".safetensors and .gguf", &both));
    }
    match st.as_slice() {
        [one] => return plan_file(fetch, one, Some(files)),
        [first, ..] => {
            return match shard_name(first) {
                Some((_, total)) if total as usize == st.len() => {
                    plan_file(fetch, first, Some(files))
                }
                _ => Err(several(".safetensors", &st)),
            };
        }
        [] => {}
    }
    match gg.as_slice() {
        [] => Err(Error::parse(
            Path::new(&fetch.label),
            None,
            "no .safetensors or .gguf file at the repository's top level",
        )),
        [one] => plan_file(fetch, one, Some(files)),
        [first, ..] if split_gguf(first).map(|(_, t)| t as usize) == Some(gg.len()) => {
            plan_file(fetch, first, Some(files))
        }
        many => Err(several(".gguf", many)),
    }
}

/// The files of `repo` at `revision`, from the Hub's API.
fn listing(
    fetch: &Fetch<'_>,
    o: &HubOptions,
    repo: &str,
    revision: &str,
) -> Result<Vec<String>, Error> {
    let label = fetch.label.as_str();
    let url = format!(
        "{}/api/models/{repo}/revision/{}",
        o.endpoint,
        encode(revision, false)
    );
    let bytes = fetch
        .client
        .get(&url, MAX_LISTING)
        .map_err(|e| fetch.err("the repository's file list", &e))?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
        Error::parse(
            Path::new(label),
            None,
            format!("the Hub's file list is not JSON: {e}"),
        )
    })?;
    let files: Vec<String> = v
        .get("siblings")
        .and_then(serde_json::Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.get("rfilename")?.as_str().map(str::to_string))
                .filter(|f| path_ok(f, 1000))
                .collect()
        })
        .ok_or_else(|| {
            Error::parse(
                Path::new(label),
                None,
                "the Hub's file list has no siblings",
            )
        })?;
    Ok(files)
}

/// The client for `o`: the Mozilla roots built in, or `SSL_CERT_FILE`'s certificates instead.
///
/// # Errors
/// The bundle cannot be read, or holds no certificate: one line naming it.
fn client(o: &HubOptions, token: Option<String>) -> Result<Client, Error> {
    let Some(path) = &o.ca_bundle else {
        return Ok(Client::new(o.timeout, token));
    };
    let fail = |why: String| Error::parse(path, None, format!("SSL_CERT_FILE: {why}"));
    // Debian's whole bundle is about 220 KiB.
    let pem = crate::system::fsread::read_bytes(path, crate::system::fsread::Cap::bytes(16 << 20))
        .map_err(|e| fail(e.to_string()))?;
    Client::with_roots(o.timeout, token, &pem).map_err(|e| fail(e.to_string()))
}

/// Opens a remote model: its headers through range requests.
///
/// # Errors
/// One [`Error::Parse`] naming the spec (and the file): an HTTP error status with what it
/// means, an unreachable server, a response that breaks its promises, a malformed or
/// oversized header (the local readers' limits).
pub fn open(remote: &Remote, o: &HubOptions) -> Result<RemoteModel, Error> {
    let label = remote.label();
    let model = match remote {
        Remote::Hub {
            repo,
            revision,
            file,
        } => {
            let client = client(o, o.token.clone())?;
            let base = format!("{}/{repo}/resolve/{}/", o.endpoint, encode(revision, false));
            let fetch = Fetch {
                client: client.clone(),
                label: label.clone(),
                url_of: Box::new(move |f: &str| format!("{base}{}", encode(f, true))),
                lenient: false,
                repo: Some((repo.clone(), revision.clone())),
                token: o.token.is_some(),
                hub: true,
            };
            let files = listing(&fetch, o, repo, revision)?;
            let m = match file {
                Some(f) => {
                    if !files.iter().any(|x| x == f) {
                        return Err(Error::parse(
                            Path::new(&label),
                            None,
                            format!("{f} is not in {repo} at {revision}"),
                        ));
                    }
                    plan_file(&fetch, f, Some(&files))?
                }
                None => pick(&fetch, &files)?,
            };
            (m, client)
        }
        Remote::Url(given) => {
            // The token goes to the Hub's origin only, never to another server; a Hub's page
            // for a file (`/blob/`) is read as the file (`/resolve/`).
            let hub = on_hub(given, &o.endpoint);
            let token = o.token.clone().filter(|_| hub);
            let sent = token.is_some();
            let url = &if hub {
                blob_to_resolve(given)
            } else {
                given.clone()
            };
            let client = client(o, token)?;
            let clean = url.split(['?', '#']).next().unwrap_or(url);
            let (base, name) = clean.rsplit_once('/').unwrap_or(("", clean));
            let base = base.to_string();
            let whole = url.clone();
            let name_owned = name.to_string();
            let fetch = Fetch {
                client: client.clone(),
                label: label.clone(),
                url_of: Box::new(move |f: &str| {
                    if f == name_owned {
                        whole.clone()
                    } else {
                        format!("{base}/{}", encode(f, true))
                    }
                }),
                lenient: true,
                repo: None,
                token: sent,
                hub,
            };
            (plan_file(&fetch, name, None)?, client)
        }
    };
    let (model, client) = model;
    Ok(RemoteModel {
        model,
        bytes_fetched: client.received(),
    })
}
