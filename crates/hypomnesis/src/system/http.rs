//! The HTTP edge (feature `hub`): ranged `GET`s over HTTPS (rustls) with timeouts, the only
//! place the library opens a network connection. Model headers are read from a server this
//! way — a few bytes or megabytes at known offsets, never a whole weights file.
//!
//! Every response is checked before its body is read: the status (an error status is
//! [`HttpError::Status`], with a Hub's `X-Error-Code` and `X-Error-Message`), for a ranged request a `206 Partial Content` whose
//! `Content-Range` starts where asked and names the file's size (a server that ignores the
//! range and answers `200` with the whole file is refused unless the whole file is no longer
//! than what was asked), and the body is read up to the requested length only — a hostile
//! `Content-Length` costs nothing. Redirects (a Hub's CDN) are followed, at most 10; the
//! `Authorization` header only to the same host. A slow or silent server hits the timeout. A
//! certificate rustls refuses (the webpki roots) is [`HttpError::Certificate`], naming the
//! host, not an unreachable server.

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What went wrong with a request, in words a one-line error can carry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// The server answered with an error status.
    #[error("HTTP {code}{}{}", reason(*.code), hub.as_ref().map(|h| format!(" ({h})")).unwrap_or_default())]
    Status {
        /// The status code.
        code: u16,
        /// What a Hugging Face Hub says it means (`X-Error-Code`), when it says.
        hub: Option<HubCode>,
        /// The Hub's words for it (`X-Error-Message`, one line of printable text, at most 200
        /// characters), when it says.
        message: Option<String>,
    },
    /// No connection, a DNS failure, a timeout, a TLS error other than a certificate's.
    #[error("cannot reach the server: {0}")]
    Unreachable(String),
    /// The server's TLS certificate is not trusted (an unknown authority — a proxy's or a
    /// mirror's own —, expired, for another name). `host` is the one asked; after a redirect
    /// the certificate may be the next server's.
    #[error("TLS certificate not trusted, fetching from {host}: {reason}")]
    Certificate {
        /// The URL's host (and port, when it names one).
        host: String,
        /// What rustls found wrong with it.
        reason: String,
    },
    /// A response that breaks the protocol or its promises (a wrong range, a short body).
    #[error("{0}")]
    Protocol(String),
    /// A bundle of trusted certificates (`SSL_CERT_FILE`) that holds none, or a malformed one.
    #[error("{0}")]
    CaBundle(String),
}

impl HttpError {
    /// An error status without a Hub's explanation.
    pub fn status(code: u16) -> HttpError {
        HttpError::Status {
            code,
            hub: None,
            message: None,
        }
    }
}

/// Why a Hugging Face Hub refused a request: its `X-Error-Code` header, which tells apart what
/// the status does not (without a token, a repository that does not exist is a 401, as a
/// private one is). The codes `huggingface_hub` reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HubCode {
    /// No such repository, or a private one the request may not see.
    #[error("RepoNotFound")]
    RepoNotFound,
    /// A gated repository: its licence must be accepted, and a token sent.
    #[error("GatedRepo")]
    GatedRepo,
    /// The repository has no such branch, tag or commit.
    #[error("RevisionNotFound")]
    RevisionNotFound,
    /// The revision has no such file.
    #[error("EntryNotFound")]
    EntryNotFound,
    /// Another code (printable text, at most 64 characters).
    #[error("{0}")]
    Other(String),
}

impl HubCode {
    /// Reads an `X-Error-Code` value; `None` when it is empty.
    pub fn parse(v: &str) -> Option<HubCode> {
        Some(match v.trim() {
            "" => return None,
            "RepoNotFound" => HubCode::RepoNotFound,
            "GatedRepo" => HubCode::GatedRepo,
            "RevisionNotFound" => HubCode::RevisionNotFound,
            "EntryNotFound" => HubCode::EntryNotFound,
            other => HubCode::Other(printable(other, 64)?),
        })
    }
}

/// A header's text as one line: printable ASCII, trimmed, at most `max` characters (a hostile
/// server's value cannot break the error's line or fill the terminal); `None` when nothing is
/// left.
fn printable(v: &str, max: usize) -> Option<String> {
    let kept: String = v
        .chars()
        .map(|c| if c.is_ascii_graphic() { c } else { ' ' })
        .collect();
    let words: Vec<&str> = kept.split_whitespace().collect();
    let mut out = words.join(" ");
    if out.len() > max {
        out.truncate(max);
        out.push('…');
    }
    (!out.is_empty()).then_some(out)
}

fn reason(code: u16) -> &'static str {
    match code {
        401 => " Unauthorized",
        403 => " Forbidden",
        404 => " Not Found",
        416 => " Range Not Satisfiable",
        429 => " Too Many Requests",
        500..=599 => " (server error)",
        _ => "",
    }
}

/// An error status with what a Hub says of it (`X-Error-Code`, `X-Error-Message`).
fn status_error(resp: &ureq::http::Response<ureq::Body>) -> HttpError {
    let header = |name: &str| resp.headers().get(name).and_then(|v| v.to_str().ok());
    HttpError::Status {
        code: resp.status().as_u16(),
        hub: header("x-error-code").and_then(HubCode::parse),
        message: header("x-error-message").and_then(|m| printable(m, 200)),
    }
}

/// A client: timeouts, an optional bearer token, and a count of the body bytes received.
#[derive(Clone)]
pub struct Client {
    agent: ureq::Agent,
    token: Option<String>,
    received: Arc<AtomicU64>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("token", &self.token.as_ref().map(|_| "…"))
            .field("received", &self.received())
            .finish()
    }
}

/// One ranged response: the bytes and the file's whole size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    /// The bytes from the requested offset (fewer than asked at the end of the file).
    pub bytes: Vec<u8>,
    /// The size of the whole file.
    pub total: u64,
}

impl Client {
    /// A client whose every request (redirects and body included) ends within `timeout`, with
    /// `token` sent as `Authorization: Bearer` (to the first host only).
    pub fn new(timeout: Duration, token: Option<String>) -> Client {
        Client::build(timeout, token, ureq::tls::RootCerts::WebPki)
    }

    /// As [`Client::new`], trusting the certificates of the PEM bundle `pem` (`SSL_CERT_FILE`:
    /// a company's own authority, a mirror's) instead of the Mozilla roots built in — as
    /// OpenSSL and curl do with that variable.
    ///
    /// # Errors
    /// [`HttpError::CaBundle`]: a malformed bundle, or one without a certificate.
    pub fn with_roots(
        timeout: Duration,
        token: Option<String>,
        pem: &[u8],
    ) -> Result<Client, HttpError> {
        let mut certs = Vec::new();
        for item in ureq::tls::parse_pem(pem) {
            match item {
                Ok(ureq::tls::PemItem::Certificate(c)) => certs.push(c),
                Ok(_) => {}
                Err(e) => return Err(HttpError::CaBundle(format!("not a PEM bundle: {e}"))),
            }
        }
        if certs.is_empty() {
            return Err(HttpError::CaBundle(
                "no certificate in it (a PEM bundle: -----BEGIN CERTIFICATE-----)".to_string(),
            ));
        }
        Ok(Client::build(
            timeout,
            token,
            ureq::tls::RootCerts::new_with_certs(&certs),
        ))
    }

    fn build(timeout: Duration, token: Option<String>, roots: ureq::tls::RootCerts) -> Client {
        let config = ureq::Agent::config_builder()
            .tls_config(ureq::tls::TlsConfig::builder().root_certs(roots).build())
            .timeout_global(Some(timeout))
            .timeout_connect(Some(timeout.min(Duration::from_secs(10))))
            .http_status_as_error(false)
            .max_redirects(10)
            .redirect_auth_headers(ureq::config::RedirectAuthHeaders::SameHost)
            .user_agent(concat!("hypomnesis/", env!("CARGO_PKG_VERSION")))
            .build();
        Client {
            agent: config.into(),
            token,
            received: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Body bytes received so far, over every request of this client and its clones.
    pub fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// `len` bytes of `url` from `start` (`Range: bytes=start-(start+len-1)`).
    ///
    /// # Errors
    /// [`HttpError`]: an error status, an unreachable server, or a response that does not
    /// answer the range asked.
    pub fn range(&self, url: &str, start: u64, len: u64) -> Result<Range, HttpError> {
        if len == 0 {
            return Err(HttpError::Protocol("an empty range".to_string()));
        }
        let end = start.saturating_add(len - 1);
        let mut req = self
            .agent
            .get(url)
            .header("Range", &format!("bytes={start}-{end}"))
            .header("Accept-Encoding", "identity");
        if let Some(t) = &self.token {
            req = req.header("Authorization", &format!("Bearer {t}"));
        }
        let mut resp = req.call().map_err(|e| transport_error(&e, url))?;
        let status = resp.status().as_u16();
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let content_range = header("content-range");
        let content_length = header("content-length").and_then(|v| v.trim().parse::<u64>().ok());
        let (want, total) = match status {
            206 => {
                let (from, to, total) = content_range
                    .as_deref()
                    .and_then(parse_content_range)
                    .ok_or_else(|| {
                        HttpError::Protocol(format!(
                            "a partial response without a valid Content-Range ({:?})",
                            content_range.as_deref().unwrap_or("none")
                        ))
                    })?;
                if from != start || to < from || to > end || total <= to {
                    return Err(HttpError::Protocol(format!(
                        "asked for bytes {start}-{end}, the server sent {from}-{to}/{total}"
                    )));
                }
                (to - from + 1, total)
            }
            // The whole file instead of a range: only when it is no longer than the range.
            200 => match content_length {
                Some(n) if start == 0 && n <= len => (n, n),
                Some(n) => {
                    return Err(HttpError::Protocol(format!(
                        "the server ignored the range request and sent the whole file ({n} bytes)"
                    )));
                }
                None => {
                    return Err(HttpError::Protocol(
                        "the server ignored the range request (no Content-Length)".to_string(),
                    ));
                }
            },
            416 if start > 0 => {
                return Err(HttpError::Protocol(format!(
                    "the file ends before byte {start}"
                )));
            }
            _ => return Err(status_error(&resp)),
        };
        // Read what the range promised, never more.
        let mut bytes = Vec::with_capacity(usize::try_from(want.min(1 << 20)).unwrap_or(0));
        let body = resp.body_mut().as_reader();
        let read = body.take(want).read_to_end(&mut bytes);
        let got = bytes.len() as u64;
        self.received.fetch_add(got, Ordering::Relaxed);
        match read {
            Ok(_) if got == want => {}
            Ok(_) => {
                return Err(HttpError::Protocol(format!(
                    "the response ended after {got} of {want} bytes"
                )));
            }
            Err(e) => {
                return Err(HttpError::Protocol(format!(
                    "the response ended after {got} of {want} bytes ({e})"
                )));
            }
        }
        Ok(Range { bytes, total })
    }

    /// A whole response of at most `cap` bytes (an API listing, a `config.json`): a plain
    /// `GET` whose body is read up to `cap + 1` bytes, whatever `Content-Length` says; more is
    /// refused.
    ///
    /// # Errors
    /// An error status, an unreachable server, a body larger than `cap`.
    pub fn get(&self, url: &str, cap: u64) -> Result<Vec<u8>, HttpError> {
        let mut req = self.agent.get(url).header("Accept-Encoding", "identity");
        if let Some(t) = &self.token {
            req = req.header("Authorization", &format!("Bearer {t}"));
        }
        let mut resp = req.call().map_err(|e| transport_error(&e, url))?;
        if resp.status().as_u16() != 200 {
            return Err(status_error(&resp));
        }
        let mut bytes = Vec::new();
        let got = resp
            .body_mut()
            .as_reader()
            .take(cap.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| HttpError::Unreachable(e.to_string()))?;
        self.received.fetch_add(got as u64, Ordering::Relaxed);
        if got as u64 > cap {
            return Err(HttpError::Protocol(format!(
                "larger than the {cap}-byte limit"
            )));
        }
        Ok(bytes)
    }
}

/// A remote file read as a `Read + Seek` stream through ranged requests: chunks fetched on
/// demand (the first as asked, then 64 KiB doubling up to 4 MiB, or a read's whole length when
/// larger), a seek past the buffer fetches
/// nothing until the next read, and at most `cap` bytes are ever fetched for it.
#[derive(Debug)]
pub struct RemoteFile {
    client: Client,
    url: String,
    len: u64,
    pos: u64,
    buf: Vec<u8>,
    buf_start: u64,
    chunk: u64,
    fetched: u64,
    cap: u64,
    /// The first error, kept whole (the `io::Error` a reader sees carries its text only).
    pub error: Option<HttpError>,
}

const FIRST_CHUNK: u64 = 64 << 10;
const MAX_CHUNK: u64 = 4 << 20;

impl RemoteFile {
    /// Opens `url`: one request for its first `first` bytes, which also gives its size (then
    /// chunks double from there, and a read larger than the chunk is fetched whole).
    ///
    /// # Errors
    /// As [`Client::range`].
    pub fn open(client: &Client, url: &str, cap: u64, first: u64) -> Result<RemoteFile, HttpError> {
        let first_len = first.clamp(1, cap.max(1));
        let first = client.range(url, 0, first_len)?;
        Ok(RemoteFile {
            client: client.clone(),
            url: url.to_string(),
            len: first.total,
            pos: 0,
            fetched: first.bytes.len() as u64,
            buf: first.bytes,
            buf_start: 0,
            chunk: first_len,
            cap,
            error: None,
        })
    }

    /// The file's size (from `Content-Range`).
    pub fn size(&self) -> u64 {
        self.len
    }

    fn fill(&mut self, wanted: u64) -> std::io::Result<()> {
        let left = self.cap.saturating_sub(self.fetched);
        if left == 0 {
            let e = HttpError::Protocol(format!(
                "read more than the {}-byte limit of a header",
                self.cap
            ));
            self.error.get_or_insert(e.clone());
            return Err(std::io::Error::other(e.to_string()));
        }
        let want = self.chunk.max(wanted).min(left).min(self.len - self.pos);
        match self.client.range(&self.url, self.pos, want) {
            Ok(r) => {
                self.fetched += r.bytes.len() as u64;
                self.buf = r.bytes;
                self.buf_start = self.pos;
                self.chunk = (self.chunk * 2).clamp(FIRST_CHUNK, MAX_CHUNK);
                Ok(())
            }
            Err(e) => {
                let io = std::io::Error::other(e.to_string());
                self.error.get_or_insert(e);
                Err(io)
            }
        }
    }
}

impl Read for RemoteFile {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if out.is_empty() || self.pos >= self.len {
            return Ok(0);
        }
        let in_buf =
            |f: &RemoteFile| f.pos >= f.buf_start && f.pos < f.buf_start + f.buf.len() as u64;
        if !in_buf(self) {
            self.fill(out.len() as u64)?;
            if !in_buf(self) {
                return Ok(0);
            }
        }
        let off = usize::try_from(self.pos - self.buf_start).unwrap_or(usize::MAX);
        let avail = self.buf.get(off..).unwrap_or(&[]);
        let n = avail.len().min(out.len());
        if let (Some(dst), Some(src)) = (out.get_mut(..n), avail.get(..n)) {
            dst.copy_from_slice(src);
        }
        self.pos += n as u64;
        Ok(n)
    }
}

impl std::io::Seek for RemoteFile {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        let target = match to {
            std::io::SeekFrom::Start(n) => Some(n),
            std::io::SeekFrom::Current(d) => self.pos.checked_add_signed(d),
            std::io::SeekFrom::End(d) => self.len.checked_add_signed(d),
        };
        match target {
            Some(t) => {
                self.pos = t;
                Ok(t)
            }
            None => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "seek before the start",
            )),
        }
    }
}

/// A request that got no response: a certificate rustls refused, or an unreachable server.
fn transport_error(e: &ureq::Error, url: &str) -> HttpError {
    if let Some(reason) = certificate_error(e) {
        return HttpError::Certificate {
            host: host_of(url),
            reason,
        };
    }
    let text = e.to_string();
    HttpError::Unreachable(text.lines().next().unwrap_or("").to_string())
}

/// What was wrong with the server's certificate, when that is what failed: rustls's
/// `InvalidCertificate`, as ureq returns it or inside the I/O error of the handshake.
fn certificate_error(e: &ureq::Error) -> Option<String> {
    let tls = match e {
        ureq::Error::Rustls(r) => r,
        ureq::Error::Io(io) => io.get_ref()?.downcast_ref::<rustls::Error>()?,
        _ => return None,
    };
    match tls {
        rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer) => {
            Some("issued by an authority hmn does not trust (UnknownIssuer)".to_string())
        }
        rustls::Error::InvalidCertificate(c) => printable(&c.to_string(), 200),
        _ => None,
    }
}

/// `url`'s host, and its port when it names one (`huggingface.co`, `127.0.0.1:8443`).
fn host_of(url: &str) -> String {
    let Ok(uri) = url.parse::<ureq::http::Uri>() else {
        return "?".to_string();
    };
    match (uri.host(), uri.port_u16()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.to_string(),
        (None, _) => "?".to_string(),
    }
}

/// `bytes FROM-TO/TOTAL` (pure).
pub fn parse_content_range(v: &str) -> Option<(u64, u64, u64)> {
    let rest = v.trim().strip_prefix("bytes")?.trim_start();
    let (range, total) = rest.split_once('/')?;
    let (from, to) = range.split_once('-')?;
    let n = |s: &str| s.trim().parse::<u64>().ok();
    Some((n(from)?, n(to)?, n(total)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_ranges() {
        assert_eq!(parse_content_range("bytes 0-7/100"), Some((0, 7, 100)));
        assert_eq!(parse_content_range("bytes 8-99/100"), Some((8, 99, 100)));
        assert_eq!(parse_content_range("bytes */100"), None);
        assert_eq!(parse_content_range("bytes 0-7/*"), None);
        assert_eq!(parse_content_range("items 0-7/100"), None);
    }

    #[test]
    fn hub_error_codes() {
        assert_eq!(HubCode::parse("RepoNotFound"), Some(HubCode::RepoNotFound));
        assert_eq!(HubCode::parse(" GatedRepo "), Some(HubCode::GatedRepo));
        assert_eq!(
            HubCode::parse("RevisionNotFound"),
            Some(HubCode::RevisionNotFound)
        );
        assert_eq!(
            HubCode::parse("EntryNotFound"),
            Some(HubCode::EntryNotFound)
        );
        assert_eq!(HubCode::parse(""), None);
        assert_eq!(
            HubCode::parse("Disabled\r\nX: y"),
            Some(HubCode::Other("Disabled X: y".into()))
        );
        assert_eq!(printable(&"a".repeat(300), 200).map(|s| s.len()), Some(203));
        assert_eq!(printable(" \u{1b}[2J ", 10), Some("[2J".into()));
        let e = HttpError::Status {
            code: 401,
            hub: Some(HubCode::RepoNotFound),
            message: None,
        };
        assert_eq!(e.to_string(), "HTTP 401 Unauthorized (RepoNotFound)");
        assert_eq!(HttpError::status(404).to_string(), "HTTP 404 Not Found");
    }

    #[test]
    fn certificate_failures_are_told_apart() {
        let bad = |e: rustls::CertificateError| {
            ureq::Error::Io(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                rustls::Error::InvalidCertificate(e),
            ))
        };
        let url = "https://mirror.example:8443/o/r/resolve/main/m.gguf";
        assert_eq!(
            transport_error(&bad(rustls::CertificateError::UnknownIssuer), url),
            HttpError::Certificate {
                host: "mirror.example:8443".into(),
                reason: "issued by an authority hmn does not trust (UnknownIssuer)".into()
            }
        );
        let e = transport_error(
            &ureq::Error::Rustls(rustls::Error::InvalidCertificate(
                rustls::CertificateError::Expired,
            )),
            "https://huggingface.co/x",
        );
        assert_eq!(
            e.to_string(),
            "TLS certificate not trusted, fetching from huggingface.co: Expired"
        );
        // Other failures stay unreachable.
        assert!(matches!(
            transport_error(&ureq::Error::HostNotFound, url),
            HttpError::Unreachable(_)
        ));
        let alert = ureq::Error::Rustls(rustls::Error::General("handshake".into()));
        assert!(matches!(
            transport_error(&alert, url),
            HttpError::Unreachable(_)
        ));
    }
}
