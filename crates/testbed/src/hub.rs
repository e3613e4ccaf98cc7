//! A Hub-shaped HTTP server in the test process (`127.0.0.1:0`, one thread per connection):
//! `/api/models/{repo}/revision/{rev}` lists a repository's files, `/{repo}/resolve/{rev}/{path}`
//! serves them — large ("LFS") files through a redirect to `/cdn/…`, as the Hub redirects to
//! its CDN — honouring `Range`. Errors are the Hub's, with its `X-Error-Code` and
//! `X-Error-Message` headers: an unknown repository is 401 `RepoNotFound` without a token (as
//! for a private one) and 404 with one, an unknown revision 404 `RevisionNotFound`, an unknown
//! file 404 `EntryNotFound`, a gated repository's file 401 `GatedRepo` without the token and
//! 403 with another. Files are virtual: a prefix (a header) followed by zeros up to
//! their size, so a 16 GB model costs nothing. The server counts the body bytes it sends and
//! records each request, so a test can assert that only headers were read; [`Misbehave`]
//! makes a file's answers hostile.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The query that signs a gated repository's CDN URL (any file of it).
pub const SIGNED: &str = "sig=ok";

/// How a file's responses break the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Misbehave {
    /// Answers as a server should.
    None,
    /// Ignores `Range`: `200` with the whole (huge) file.
    IgnoreRange,
    /// `206` with a `Content-Range` that starts elsewhere.
    WrongRange,
    /// `Content-Length` of a terabyte, then bytes without end (for whole-file `GET`s).
    HugeLength,
    /// Promises the range, sends half of it, closes.
    Truncated,
    /// Accepts the connection and never answers.
    Silent,
}

/// One file of a repository.
#[derive(Debug, Clone)]
pub struct HubFile {
    /// Its path in the repository.
    pub path: String,
    /// Its first bytes (the rest are zeros).
    pub prefix: Vec<u8>,
    /// Its size.
    pub size: u64,
    /// Served through the CDN redirect.
    pub lfs: bool,
    /// Its behaviour.
    pub misbehave: Misbehave,
}

impl HubFile {
    /// A small file served whole (a `config.json`, an index).
    pub fn text(path: &str, text: &str) -> HubFile {
        HubFile {
            path: path.to_string(),
            prefix: text.as_bytes().to_vec(),
            size: text.len() as u64,
            lfs: false,
            misbehave: Misbehave::None,
        }
    }

    /// A large file (`prefix` and zeros up to `size`), through the CDN.
    pub fn lfs(path: &str, prefix: Vec<u8>, size: u64) -> HubFile {
        HubFile {
            path: path.to_string(),
            prefix,
            size,
            lfs: true,
            misbehave: Misbehave::None,
        }
    }

    /// The same file, misbehaving.
    #[must_use]
    pub fn misbehaving(mut self, m: Misbehave) -> HubFile {
        self.misbehave = m;
        self
    }

    fn byte(&self, i: u64) -> u8 {
        usize::try_from(i)
            .ok()
            .and_then(|i| self.prefix.get(i).copied())
            .unwrap_or(0)
    }
}

/// One repository at one revision.
#[derive(Debug, Clone)]
pub struct HubRepo {
    /// `org/name`.
    pub id: String,
    /// The revision it is served at.
    pub revision: String,
    /// Needs `Authorization: Bearer {token}` for its files.
    pub token: Option<String>,
    /// Its files.
    pub files: Vec<HubFile>,
}

/// One request, as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The path.
    pub path: String,
    /// The `Range` header.
    pub range: Option<String>,
    /// Whether an `Authorization` header came with it.
    pub auth: bool,
}

struct State {
    repos: Vec<HubRepo>,
    sent: AtomicU64,
    seen: Mutex<Vec<Seen>>,
}

/// The running server (stops accepting when dropped; its threads end with their connections).
pub struct HubServer {
    /// `http://127.0.0.1:PORT`, for `HF_ENDPOINT`.
    pub endpoint: String,
    state: Arc<State>,
}

impl HubServer {
    /// Serves `repos`.
    ///
    /// # Panics
    /// When no local port can be bound (a test bed failure).
    pub fn start(repos: Vec<HubRepo>) -> HubServer {
        #[allow(clippy::expect_used)]
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        #[allow(clippy::expect_used)]
        let port = listener.local_addr().expect("local address").port();
        let state = Arc::new(State {
            repos,
            sent: AtomicU64::new(0),
            seen: Mutex::new(Vec::new()),
        });
        let s = Arc::clone(&state);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let s = Arc::clone(&s);
                std::thread::spawn(move || {
                    let _ = serve(&s, stream);
                });
            }
        });
        HubServer {
            endpoint: format!("http://127.0.0.1:{port}"),
            state,
        }
    }

    /// Body bytes sent so far.
    pub fn bytes_sent(&self) -> u64 {
        self.state.sent.load(Ordering::Relaxed)
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Seen> {
        self.state
            .seen
            .lock()
            .map(|v| v.clone())
            .unwrap_or_default()
    }
}

/// A TLS server whose certificate no one trusts (self-signed, for `127.0.0.1` and
/// `localhost`, valid 2000-2100): what a TLS-inspecting proxy or a mirror with its own
/// authority looks like to a client with the webpki roots. It completes handshakes a client
/// accepts and answers 404 to anything; a client that refuses the certificate gets no answer.
pub struct UntrustedTls {
    /// `https://127.0.0.1:PORT`.
    pub endpoint: String,
}

impl UntrustedTls {
    /// Listens on `127.0.0.1:0`.
    ///
    /// # Panics
    /// When no local port can be bound or the certificate is refused (a test bed failure).
    #[allow(clippy::expect_used)]
    pub fn start() -> UntrustedTls {
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
        let cert = CertificateDer::from(include_bytes!("tls/cert.der").to_vec());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
            include_bytes!("tls/key.der").to_vec(),
        ));
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .expect("the test bed's certificate");
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().expect("local address").port();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let config = Arc::clone(&config);
                std::thread::spawn(move || {
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                    let Ok(conn) = rustls::ServerConnection::new(config) else {
                        return;
                    };
                    let mut tls = rustls::StreamOwned::new(conn, stream);
                    let mut buf = [0u8; 4096];
                    if tls.read(&mut buf).is_ok() {
                        let _ = tls.write_all(
                            b"HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
                        );
                        let _ = tls.flush();
                    }
                });
            }
        });
        UntrustedTls {
            endpoint: format!("https://127.0.0.1:{port}"),
        }
    }
}

fn respond(
    out: &mut TcpStream,
    status: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {status}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if !headers.iter().any(|(k, _)| *k == "Content-Length") {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    out.write_all(head.as_bytes())?;
    out.write_all(body)?;
    out.flush()
}

/// `bytes=A-B` (or `bytes=A-`) against a file of `size`.
fn parse_range(v: &str, size: u64) -> Option<(u64, u64)> {
    let r = v.trim().strip_prefix("bytes=")?;
    let (a, b) = r.split_once('-')?;
    let a: u64 = a.trim().parse().ok()?;
    let b: u64 = if b.trim().is_empty() {
        size.checked_sub(1)?
    } else {
        b.trim().parse().ok()?
    };
    (a < size && a <= b).then_some((a, b.min(size - 1)))
}

fn send_file(
    s: &State,
    out: &mut TcpStream,
    f: &HubFile,
    range: Option<&str>,
) -> std::io::Result<()> {
    let write_body = |out: &mut TcpStream, from: u64, to_incl: u64| -> std::io::Result<()> {
        let mut i = from;
        let mut buf = Vec::with_capacity(64 << 10);
        while i <= to_incl {
            buf.clear();
            let end = to_incl.min(i + (64 << 10) - 1);
            buf.extend((i..=end).map(|k| f.byte(k)));
            out.write_all(&buf)?;
            s.sent.fetch_add(buf.len() as u64, Ordering::Relaxed);
            i = end + 1;
        }
        Ok(())
    };
    match f.misbehave {
        Misbehave::Silent => {
            std::thread::sleep(Duration::from_secs(30));
            return Ok(());
        }
        Misbehave::HugeLength => {
            let head =
                "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1000000000000\r\n\r\n";
            out.write_all(head.as_bytes())?;
            let chunk = vec![b' '; 64 << 10];
            loop {
                out.write_all(&chunk)?;
                s.sent.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            }
        }
        _ => {}
    }
    if range.is_none() || f.misbehave == Misbehave::IgnoreRange {
        let head = format!(
            "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
            f.size
        );
        out.write_all(head.as_bytes())?;
        if f.size > 0 {
            write_body(out, 0, f.size - 1)?;
        }
        return Ok(());
    }
    match range.and_then(|r| parse_range(r, f.size)) {
        None => respond(
            out,
            "416 Range Not Satisfiable",
            &[("Content-Range", format!("bytes */{}", f.size))],
            b"",
        ),
        Some((a, b)) => {
            let m = f.misbehave;
            let shown_from = if m == Misbehave::WrongRange { a + 1 } else { a };
            let head = format!(
                "HTTP/1.1 206 Partial Content\r\nConnection: close\r\nContent-Range: bytes {shown_from}-{b}/{}\r\nContent-Length: {}\r\n\r\n",
                f.size,
                b - a + 1
            );
            out.write_all(head.as_bytes())?;
            let to = if m == Misbehave::Truncated {
                a + (b - a) / 2
            } else {
                b
            };
            write_body(out, a, to)
        }
    }
}

fn serve(s: &State, stream: TcpStream) -> std::io::Result<()> {
    let mut out = stream.try_clone()?;
    let mut r = BufReader::new(stream.take(64 << 10));
    let mut line = String::new();
    r.read_line(&mut line)?;
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let (mut range, mut auth) = (None, None);
    loop {
        let mut h = String::new();
        if r.read_line(&mut h)? == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            match k.trim().to_ascii_lowercase().as_str() {
                "range" => range = Some(v.trim().to_string()),
                "authorization" => auth = Some(v.trim().to_string()),
                _ => {}
            }
        }
    }
    if let Ok(mut seen) = s.seen.lock() {
        seen.push(Seen {
            path: path.clone(),
            range: range.clone(),
            auth: auth.is_some(),
        });
    }
    let decoded = path.replace("%2F", "/").replace("%20", " ");
    let not_found =
        |out: &mut TcpStream| respond(out, "404 Not Found", &[], b"{\"error\":\"not found\"}");
    // What the Hub answers for a repository it does not have (or will not show): 401 without
    // a token, 404 with one, `RepoNotFound` either way.
    let no_repo = |out: &mut TcpStream| {
        let status = if auth.is_some() {
            "404 Not Found"
        } else {
            "401 Unauthorized"
        };
        hub_error(out, status, "RepoNotFound", "Repository not found")
    };
    if let Some(rest) = decoded.strip_prefix("/api/models/") {
        let Some((id, rev)) = rest.split_once("/revision/") else {
            return not_found(&mut out);
        };
        if !s.repos.iter().any(|x| x.id == id) {
            return no_repo(&mut out);
        }
        let Some(repo) = s.repos.iter().find(|x| x.id == id && x.revision == rev) else {
            return no_revision(&mut out, rev);
        };
        let siblings: Vec<String> = repo
            .files
            .iter()
            .map(|f| format!("{{\"rfilename\":\"{}\"}}", f.path))
            .collect();
        let body = format!(
            "{{\"id\":\"{}\",\"sha\":\"0123456789abcdef\",\"gated\":{},\"siblings\":[{}]}}",
            repo.id,
            repo.token.is_some(),
            siblings.join(",")
        );
        return respond(
            &mut out,
            "200 OK",
            &[("Content-Type", "application/json".to_string())],
            body.as_bytes(),
        );
    }
    if let Some(rest) = decoded.strip_prefix("/cdn/") {
        // A gated repository's CDN URLs are signed (as the Hub's are): a query `sig=ok` signs
        // any one file; without it, 403.
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        for repo in &s.repos {
            if let Some(file) = rest.strip_prefix(&format!("{}/{}/", repo.id, repo.revision)) {
                if repo.token.is_some() && query != SIGNED {
                    return respond(
                        &mut out,
                        "403 Forbidden",
                        &[],
                        b"<Error>AccessDenied</Error>",
                    );
                }
                if let Some(f) = repo.files.iter().find(|f| f.path == file) {
                    return send_file(s, &mut out, f, range.as_deref());
                }
            }
        }
        return not_found(&mut out);
    }
    // `/{org}/{name}/resolve/{rev}/{path}`.
    let Some(id) = s
        .repos
        .iter()
        .map(|r| r.id.as_str())
        .find(|id| decoded.starts_with(&format!("/{id}/resolve/")))
    else {
        return if decoded.contains("/resolve/") {
            no_repo(&mut out)
        } else {
            not_found(&mut out)
        };
    };
    let Some((repo, file)) = s.repos.iter().filter(|r| r.id == id).find_map(|r| {
        decoded
            .strip_prefix(&format!("/{id}/resolve/{}/", r.revision))
            .map(|f| (r, f))
    }) else {
        let rev = decoded
            .strip_prefix(&format!("/{id}/resolve/"))
            .and_then(|r| r.split('/').next())
            .unwrap_or("");
        return no_revision(&mut out, rev);
    };
    // A gated repository: 401 without a token, 403 with one that has no access.
    if let Some(t) = &repo.token {
        let gated = |out: &mut TcpStream, status: &str| {
            hub_error(
                out,
                status,
                "GatedRepo",
                &format!("Access to model {id} is restricted."),
            )
        };
        match auth.as_deref() {
            None => return gated(&mut out, "401 Unauthorized"),
            Some(a) if a != format!("Bearer {t}") => return gated(&mut out, "403 Forbidden"),
            Some(_) => {}
        }
    }
    let Some(f) = repo.files.iter().find(|f| f.path == file) else {
        return hub_error(
            &mut out,
            "404 Not Found",
            "EntryNotFound",
            &format!("{file} does not exist on \"{}\"", repo.revision),
        );
    };
    if f.lfs {
        let mut to = format!("/cdn/{}/{}/{}", repo.id, repo.revision, f.path);
        if repo.token.is_some() {
            to = format!("{to}?{SIGNED}");
        }
        return respond(&mut out, "302 Found", &[("Location", to)], b"");
    }
    send_file(s, &mut out, f, range.as_deref())
}

/// An error as the Hub sends it: the status, `X-Error-Code`, `X-Error-Message`, a JSON body.
fn hub_error(out: &mut TcpStream, status: &str, code: &str, message: &str) -> std::io::Result<()> {
    respond(
        out,
        status,
        &[
            ("X-Error-Code", code.to_string()),
            ("X-Error-Message", message.to_string()),
            ("Content-Type", "application/json".to_string()),
        ],
        format!("{{\"error\":{message:?}}}").as_bytes(),
    )
}

fn no_revision(out: &mut TcpStream, rev: &str) -> std::io::Result<()> {
    hub_error(
        out,
        "404 Not Found",
        "RevisionNotFound",
        &format!("Invalid rev id: {rev}"),
    )
}
