//! The HTTP side of `hmn serve`: `GET /metrics`, `GET /healthz`, nothing else (404; methods
//! other than GET and HEAD: 405). Limits on everything a client controls: the request head is
//! at most 16 KiB and 64 headers (hyper answers 431 beyond); each request head, and the next
//! one on an idle keep-alive connection, must arrive within the header timeout (10 s); a
//! connection is closed gracefully after 10 minutes; at most 64 connections are served at
//! once (more are closed on accept).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{ACCEPT, ALLOW, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::Semaphore;

use super::Latest;

/// At most this many connections are served at once.
const MAX_CONNECTIONS: usize = 64;
/// Request head limits.
const MAX_HEAD_BYTES: usize = 16 * 1024;
const MAX_HEADERS: usize = 64;
/// A connection is closed gracefully after this long, however busy.
const MAX_CONNECTION_AGE: Duration = Duration::from_secs(600);

const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";
const OPENMETRICS_TEXT: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

fn response(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// Answers one request (pure over the request and the latest rendering).
pub fn handle(req: &Request<Incoming>, latest: &Latest) -> Response<Full<Bytes>> {
    handle_parts(
        req.method(),
        req.uri().path(),
        req.headers().get(ACCEPT),
        latest,
    )
}

fn handle_parts(
    method: &Method,
    path: &str,
    accept: Option<&HeaderValue>,
    latest: &Latest,
) -> Response<Full<Bytes>> {
    let text = "text/plain; charset=utf-8";
    if !matches!(path, "/metrics" | "/healthz") {
        return response(StatusCode::NOT_FOUND, text, "not found: try /metrics\n");
    }
    if method != Method::GET && method != Method::HEAD {
        let mut r = response(StatusCode::METHOD_NOT_ALLOWED, text, "method not allowed\n");
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let current = latest.read().ok().and_then(|g| g.clone());
    let Some(rendered) = current else {
        return response(
            StatusCode::SERVICE_UNAVAILABLE,
            text,
            "no collection has completed yet\n",
        );
    };
    if path == "/healthz" {
        return response(StatusCode::OK, text, "ok\n");
    }
    let openmetrics = accept
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| a.contains("application/openmetrics-text"));
    let (ct, body) = if openmetrics {
        (OPENMETRICS_TEXT, rendered.openmetrics.clone())
    } else {
        (PROMETHEUS_TEXT, rendered.prometheus.clone())
    };
    let body = if method == Method::HEAD {
        String::new()
    } else {
        body
    };
    response(StatusCode::OK, ct, body)
}

/// Serves until SIGINT or SIGTERM.
pub fn serve(
    listener: std::net::TcpListener,
    latest: Latest,
    timeout: Duration,
) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = tokio::signal::ctrl_c() => break,
                _ = term.recv() => break,
            };
            let Ok((stream, _peer)) = accepted else {
                continue; // a failed accept (EMFILE, a reset) must not stop the server
            };
            let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
                drop(stream); // over the connection cap: close at once
                continue;
            };
            let latest = Arc::clone(&latest);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let r = handle(&req, &latest);
                    async move { Ok::<_, Infallible>(r) }
                });
                let mut builder = hyper::server::conn::http1::Builder::new();
                builder
                    .timer(TokioTimer::new())
                    .header_read_timeout(timeout)
                    .max_buf_size(MAX_HEAD_BYTES)
                    .max_headers(MAX_HEADERS);
                let conn = builder.serve_connection(TokioIo::new(stream), service);
                tokio::pin!(conn);
                // A connection may live MAX_CONNECTION_AGE; then it finishes the request in
                // flight and closes (idle keep-alive connections are closed earlier by the
                // header read timeout).
                tokio::select! {
                    _ = conn.as_mut() => {}
                    () = tokio::time::sleep(MAX_CONNECTION_AGE) => {
                        conn.as_mut().graceful_shutdown();
                        let _ = tokio::time::timeout(timeout, conn).await;
                    }
                }
                drop(permit);
            });
        }
        Ok::<(), anyhow::Error>(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::RwLock;

    fn latest(ready: bool) -> Latest {
        let r = ready.then(|| {
            Arc::new(super::super::Rendered {
                openmetrics: "om\n# EOF\n".into(),
                prometheus: "prom\n".into(),
            })
        });
        Arc::new(RwLock::new(r))
    }

    #[test]
    fn routes_and_methods() {
        let l = latest(true);
        assert_eq!(
            handle_parts(&Method::GET, "/metrics", None, &l).status(),
            StatusCode::OK
        );
        assert_eq!(
            handle_parts(&Method::GET, "/healthz", None, &l).status(),
            StatusCode::OK
        );
        assert_eq!(
            handle_parts(&Method::GET, "/", None, &l).status(),
            StatusCode::NOT_FOUND
        );
        let r = handle_parts(&Method::POST, "/metrics", None, &l);
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(r.headers()[ALLOW], "GET, HEAD");
        assert_eq!(
            handle_parts(&Method::GET, "/metrics", None, &latest(false)).status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
    }

    #[test]
    fn content_negotiation() {
        let l = latest(true);
        let r = handle_parts(&Method::GET, "/metrics", None, &l);
        assert_eq!(r.headers()[CONTENT_TYPE], PROMETHEUS_TEXT);
        let om = HeaderValue::from_static(
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
        );
        let r = handle_parts(&Method::GET, "/metrics", Some(&om), &l);
        assert_eq!(r.headers()[CONTENT_TYPE], OPENMETRICS_TEXT);
    }
}
