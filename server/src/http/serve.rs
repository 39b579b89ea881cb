//! Serving the router on a TCP listener: HTTP/1.1 connections with read timeouts, and graceful
//! shutdown.
//!
//! Owns: the accept loop, the per-connection HTTP/1 settings and the two read timeouts — the
//! request head must arrive within [`ReadTimeouts::head`] (hyper's header read timeout, which
//! also closes a kept-alive connection that sends no next request in that time), and a request
//! body may not pause longer than [`ReadTimeouts::body_idle`] between two bytes
//! ([`IdleTimeoutBody`]; the handler reading it answers `408 body_timeout` and the connection
//! is closed). A client that trickles its head or its body therefore cannot hold a connection
//! open indefinitely.
//! With TLS ([`tls`](super::tls)), each connection's handshake runs in the connection's own task
//! and must finish within [`ReadTimeouts::head`] too; then the same HTTP/1 settings apply to the
//! decrypted stream. A client that speaks plain HTTP to a TLS listener is answered one `400`
//! saying so, in plain text, and the connection is closed.
//! Must not: route, authorize or answer requests itself — that is the router's.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt as _;

/// How long the server waits for what a client sends (`--header-read-timeout`,
/// `--body-idle-timeout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadTimeouts {
    /// From the moment the server waits for a request (a new connection, or a kept-alive one
    /// after its previous answer) until the request's head (request line and headers) is in.
    pub head: Duration,
    /// Longest pause between two pieces of a request body while a handler waits for it.
    pub body_idle: Duration,
}

/// Serve `router` on `listener` (over TLS with `tls`) until `shutdown` completes, then stop
/// accepting, let the requests in progress finish and return once every connection has closed.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    timeouts: ReadTimeouts,
    tls: Option<TlsAcceptor>,
    shutdown: impl Future<Output = ()> + Send,
) {
    // `stop` tells connections to finish; every connection task holds a `done` receiver, so
    // `done_tx.closed()` completes when the last one has ended.
    let (stop_tx, stop_rx) = watch::channel(false);
    let (done_tx, done_rx) = watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let stream = match accepted {
            Ok((stream, _peer)) => stream,
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::error!(error = %e, "accepting a connection failed; retrying in 1 s");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (router, stop, done) = (router.clone(), stop_rx.clone(), done_rx.clone());
        match &tls {
            None => {
                tokio::spawn(serve_connection(stream, router, timeouts, stop, done));
            }
            Some(acceptor) => {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    if let Some(stream) =
                        handshake(acceptor, stream, timeouts.head, stop.clone()).await
                    {
                        serve_connection(stream, router, timeouts, stop, done).await;
                    }
                });
            }
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(done_rx);
    tracing::debug!(
        connections = done_tx.receiver_count(),
        "stopped accepting; waiting for the open connections"
    );
    let mut waited = 0u32;
    loop {
        tokio::select! {
            () = done_tx.closed() => break,
            () = tokio::time::sleep(Duration::from_secs(1)) => {
                waited += 1;
                tracing::info!(
                    connections = done_tx.receiver_count(),
                    seconds = waited,
                    "stopping: still waiting for open connections to finish their requests"
                );
            }
        }
    }
}

/// The first byte of a TLS connection: a handshake record.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// What a plain-HTTP client of a TLS listener is told before the connection closes.
const PLAIN_HTTP_BODY: &str = "This server speaks HTTPS only: use an https:// address.\n";

fn plain_http_answer() -> String {
    format!(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Connection: close\r\nContent-Length: {}\r\n\r\n{PLAIN_HTTP_BODY}",
        PLAIN_HTTP_BODY.len()
    )
}

/// Complete the TLS handshake of `stream` within `limit` (counted from the connection), or
/// give up on it: `None` when it failed, took too long, or the server is stopping.
async fn handshake(
    acceptor: TlsAcceptor,
    mut stream: TcpStream,
    limit: Duration,
    mut stop: watch::Receiver<bool>,
) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
    let work = async {
        // A client that sends plain HTTP gets told, instead of a TLS alert it cannot read.
        let mut first = [0u8; 1];
        let n = stream.peek(&mut first).await.ok()?;
        if n == 1 && first[0] != TLS_HANDSHAKE_RECORD {
            // Read the request first and drain what follows before closing: closing a socket
            // with unread data resets it, and the client might lose the answer.
            let mut buffer = [0u8; 4096];
            let _ = stream.read(&mut buffer).await;
            let _ = stream.write_all(plain_http_answer().as_bytes()).await;
            let _ = stream.shutdown().await;
            while matches!(stream.read(&mut buffer).await, Ok(n) if n > 0) {}
            tracing::debug!("plain HTTP on the TLS listener: answered 400 and closed");
            return None;
        }
        match acceptor.accept(stream).await {
            Ok(stream) => Some(stream),
            Err(e) => {
                // Scanners, clients that do not trust the certificate: routine.
                tracing::debug!(error = %e, "TLS handshake failed");
                None
            }
        }
    };
    let stopping = async move {
        let _ = stop.wait_for(|stop| *stop).await;
    };
    tokio::select! {
        done = tokio::time::timeout(limit, work) => done.unwrap_or_else(|_| {
            tracing::debug!(limit = %humantime(limit), "TLS handshake took too long; connection closed");
            None
        }),
        () = stopping => None,
    }
}

async fn serve_connection<S>(
    stream: S,
    router: Router,
    timeouts: ReadTimeouts,
    mut stop: watch::Receiver<bool>,
    _done: watch::Receiver<()>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let request = request.map(|body| IdleTimeoutBody::new(body, timeouts.body_idle));
        router.clone().oneshot(request)
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(timeouts.head);
    let connection = builder
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    let mut connection = std::pin::pin!(connection);
    let stopping = async move {
        // A dropped sender also means stop.
        let _ = stop.wait_for(|stop| *stop).await;
    };
    let finished = tokio::select! {
        finished = connection.as_mut() => finished,
        () = stopping => {
            // Finish the request in progress (if any), then close.
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(e) = finished {
        // Clients that go away or time out are routine: not worth more than debug.
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

/// Errors of one incoming connection that say nothing about the listener.
fn is_connection_error(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}

/// The error a request body reports when no byte of it arrived for the idle timeout.
#[derive(Debug, thiserror::Error)]
#[error(
    "no byte of the request body arrived for {}; send the body without pausing (see the \
     server's --body-idle-timeout)",
    humantime(*.0)
)]
pub struct BodyIdleTimeout(pub Duration);

impl BodyIdleTimeout {
    /// Is `err`, or any error it was caused by, a [`BodyIdleTimeout`]?
    pub fn is_cause_of(err: &(dyn std::error::Error + 'static)) -> bool {
        let mut current = Some(err);
        while let Some(e) = current {
            if e.is::<BodyIdleTimeout>() {
                return true;
            }
            current = e.source();
        }
        false
    }
}

/// `1.5s`, `200ms`, `30s`.
fn humantime(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else if d.as_secs() == 0 {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.3}s", d.as_secs_f64())
    }
}

/// A request body that fails with [`BodyIdleTimeout`] when, while it is being read, nothing
/// arrives for `idle`. The clock runs only while the reader waits: a handler that pauses
/// between reads is not the client's fault.
pub struct IdleTimeoutBody<B> {
    inner: B,
    idle: Duration,
    /// Armed when a read found nothing to return; disarmed by the next piece of the body.
    deadline: Pin<Box<tokio::time::Sleep>>,
    armed: bool,
    failed: bool,
}

impl<B> IdleTimeoutBody<B> {
    pub fn new(inner: B, idle: Duration) -> Self {
        IdleTimeoutBody {
            inner,
            idle,
            deadline: Box::pin(tokio::time::sleep(idle)),
            armed: false,
            failed: false,
        }
    }
}

impl<B> HttpBody for IdleTimeoutBody<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::BoxError>>> {
        let this = self.get_mut();
        if this.failed {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.armed = false;
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => {
                if !this.armed {
                    this.armed = true;
                    let at = tokio::time::Instant::now() + this.idle;
                    this.deadline.as_mut().reset(at);
                }
                match this.deadline.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        this.failed = true;
                        Poll::Ready(Some(Err(BodyIdleTimeout(this.idle).into())))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        if self.failed {
            SizeHint::with_exact(0)
        } else {
            self.inner.size_hint()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use http_body_util::BodyExt as _;
    use http_body_util::StreamBody;

    /// A body whose pieces come from a channel: the test decides when (and whether) they come.
    fn channel_body() -> (
        tokio::sync::mpsc::Sender<Bytes>,
        impl HttpBody<Data = Bytes, Error = std::convert::Infallible> + Unpin,
    ) {
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(4);
        let stream = futures::stream::unfold(rx, |mut rx| async move {
            rx.recv()
                .await
                .map(|bytes| (Ok::<_, std::convert::Infallible>(Frame::data(bytes)), rx))
        });
        (tx, StreamBody::new(Box::pin(stream)))
    }

    // Paused time: the clock only moves when every task waits, so these tests say what
    // happens in which order, not how long anything took.
    #[tokio::test(start_paused = true)]
    async fn a_body_that_stops_arriving_fails_with_the_idle_timeout() {
        let (tx, inner) = channel_body();
        let mut body = IdleTimeoutBody::new(inner, Duration::from_secs(30));
        tx.send(Bytes::from_static(b"{\"a\":")).await.unwrap();
        let first = body.frame().await.unwrap().unwrap();
        assert_eq!(first.into_data().unwrap(), "{\"a\":");
        // The sender is kept (the client is connected) but sends nothing more.
        let err = body.frame().await.unwrap().unwrap_err();
        assert!(BodyIdleTimeout::is_cause_of(&*err), "{err}");
        assert!(err.to_string().contains("30s"), "{err}");
        assert!(body.frame().await.is_none(), "a failed body ends");
        drop(tx);
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_keeps_arriving_is_read_whole_however_long_it_takes() {
        let (tx, inner) = channel_body();
        let idle = Duration::from_secs(30);
        let sender = tokio::spawn(async move {
            // Ten pauses just under the idle timeout: far longer than it in total.
            for i in 0..10u8 {
                tokio::time::sleep(idle - Duration::from_secs(1)).await;
                tx.send(Bytes::from(vec![b'0' + i])).await.unwrap();
            }
        });
        let body = IdleTimeoutBody::new(inner, idle);
        let bytes = body.collect().await.unwrap().to_bytes();
        assert_eq!(bytes, "0123456789");
        sender.await.unwrap();
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(humantime(Duration::from_secs(30)), "30s");
        assert_eq!(humantime(Duration::from_millis(200)), "200ms");
        assert_eq!(humantime(Duration::from_millis(1500)), "1.500s");
    }
}
