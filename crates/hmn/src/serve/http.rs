//! The HTTP side of `hmn serve`: `GET /metrics`, `GET /healthz`, nothing else (404; methods
//! other than GET and HEAD: 405). Limits on everything a client controls: the request head is
//! at most 16 KiB and 64 headers (hyper answers 431 beyond); a connection must complete each
//! request head within the head timeout (5 s) of being accepted or answered, and have its
//! answer taken by the socket within it too — a slow sender, a client that never reads, and an
//! idle keep-alive connection alike are closed after it; a connection is closed
//! gracefully after 10 minutes; slots are managed by [`super::slots`]: when all 64 are taken,
//! the longest-silent idle connection is evicted for the new one, so slow or idle clients
//! cannot starve a scrape. SIGTERM and SIGINT stop the server; SIGHUP is ignored (noted on
//! stderr: there is no configuration to reload, and the textfile is rewritten at every
//! collection anyway).

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::header::{ACCEPT, ALLOW, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};

use super::latest::Latest;
use super::slots::Slots;

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
    let stale = Instant::now() >= rendered.stale_at;
    if path == "/healthz" {
        return if stale {
            response(
                StatusCode::SERVICE_UNAVAILABLE,
                text,
                "stale: no collection has completed for 3 intervals (and 2 s)\n",
            )
        } else {
            response(StatusCode::OK, text, "ok\n")
        };
    }
    let openmetrics = accept
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| a.contains("application/openmetrics-text"));
    let (ct, body) = match (openmetrics, stale) {
        (true, false) => (OPENMETRICS_TEXT, rendered.openmetrics.clone()),
        (true, true) => (OPENMETRICS_TEXT, rendered.stale_openmetrics.clone()),
        (false, false) => (PROMETHEUS_TEXT, rendered.prometheus.clone()),
        (false, true) => (PROMETHEUS_TEXT, rendered.stale_prometheus.clone()),
    };
    let body = if method == Method::HEAD {
        String::new()
    } else {
        body
    };
    response(StatusCode::OK, ct, body)
}

/// A response body that tells the slot table when it has been handed over (dropped by hyper
/// once written, or unread for HEAD).
struct Tracked {
    inner: Full<Bytes>,
    slots: Arc<Slots>,
    id: u64,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.slots.answered(self.id, Instant::now());
    }
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Serves one connection until it closes, is evicted, stays idle past `timeout`, or reaches
/// its maximum age.
async fn connection(
    stream: tokio::net::TcpStream,
    slot: super::slots::Slot,
    slots: Arc<Slots>,
    latest: Latest,
    timeout: Duration,
) {
    let id = slot.id;
    let svc_slots = Arc::clone(&slots);
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        svc_slots.busy(id, Instant::now());
        let r = handle(&req, &latest).map(|inner| Tracked {
            inner,
            slots: Arc::clone(&svc_slots),
            id,
        });
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
    let end_of_life = tokio::time::Instant::now() + MAX_CONNECTION_AGE;
    // The next head (or the socket taking the answer) is due by progress + timeout; none once
    // evicted.
    while let Some(due) = slots.deadline(id, timeout) {
        tokio::select! {
            _ = conn.as_mut() => break,
            () = slot.evicted.notified() => break, // dropped: closed at once
            () = tokio::time::sleep_until(due.into()) => {
                if slots.deadline(id, timeout).is_none_or(|d| d <= Instant::now()) {
                    break; // no progress within the timeout
                }
            }
            () = tokio::time::sleep_until(end_of_life) => {
                // It finishes the request in flight, then closes.
                conn.as_mut().graceful_shutdown();
                let _ = tokio::time::timeout(timeout, conn.as_mut()).await;
                break;
            }
        }
    }
    slots.release(id);
}

/// Serves until SIGINT or SIGTERM.
pub fn serve(
    listener: std::net::TcpListener,
    latest: Latest,
    timeout: Duration,
) -> anyhow::Result<()> {
    #[cfg(unix)]
    use tokio::signal::unix::{SignalKind, signal};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let slots = Arc::new(Slots::default());
        #[cfg(unix)]
        let (mut term, mut int, mut hup) = (
            signal(SignalKind::terminate())?,
            signal(SignalKind::interrupt())?,
            signal(SignalKind::hangup())?,
        );
        // Windows: Ctrl+C and Ctrl+Break end the server (the console's two interrupts).
        #[cfg(windows)]
        let (mut int, mut brk) = (
            tokio::signal::windows::ctrl_c()?,
            tokio::signal::windows::ctrl_break()?,
        );
        loop {
            #[cfg(unix)]
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = int.recv() => break,
                _ = term.recv() => break,
                _ = hup.recv() => {
                    let _ = crate::output::note("serve: SIGHUP ignored (nothing to reload)");
                    continue;
                }
            };
            #[cfg(windows)]
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = int.recv() => break,
                _ = brk.recv() => break,
            };
            let stream = match accepted {
                Ok((stream, _peer)) => stream,
                Err(_) => {
                    // A failed accept (EMFILE, a reset) must not stop the server, nor spin.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            let Some(slot) = slots.admit(Instant::now()) else {
                drop(stream); // every slot busy: close at once
                continue;
            };
            tokio::spawn(connection(
                stream,
                slot,
                Arc::clone(&slots),
                Arc::clone(&latest),
                timeout,
            ));
            // Let the new connection read its head before the next accept.
            tokio::task::yield_now().await;
        }
        Ok::<(), anyhow::Error>(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::RwLock;

    fn latest(ready: bool) -> Latest {
        rendered(ready, Instant::now() + Duration::from_secs(60))
    }

    fn rendered(ready: bool, stale_at: Instant) -> Latest {
        let r = ready.then(|| {
            Arc::new(crate::serve::latest::Rendered {
                openmetrics: "om\n# EOF\n".into(),
                prometheus: "prom\n".into(),
                stale_openmetrics: "stale om\n# EOF\n".into(),
                stale_prometheus: "stale prom\n".into(),
                stale_at,
            })
        });
        Arc::new(RwLock::new(r))
    }

    #[test]
    fn a_stale_collection_is_served_as_stale() {
        use http_body_util::BodyExt as _;
        let l = rendered(true, Instant::now());
        let r = handle_parts(&Method::GET, "/metrics", None, &l);
        assert_eq!(r.status(), StatusCode::OK);
        let body = futures_body(r.into_body());
        assert_eq!(body, "stale prom\n");
        assert_eq!(
            handle_parts(&Method::GET, "/healthz", None, &l).status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        let fresh = handle_parts(&Method::GET, "/metrics", None, &latest(true));
        assert_eq!(futures_body(fresh.into_body()), "prom\n");

        fn futures_body(b: Full<Bytes>) -> String {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            let bytes = rt.block_on(b.collect()).unwrap().to_bytes();
            String::from_utf8(bytes.to_vec()).unwrap()
        }
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
