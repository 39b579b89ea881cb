//! TLS on the listener (`--tls-cert`, `--tls-key`): HTTPS with a self-signed certificate made
//! here, the plain-HTTP port not served, the read timeouts kept (a handshake that stalls is
//! cut off too), and start-up refusing files it cannot use.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rebalancer_server::app;
use rebalancer_server::config::{Settings, TlsFiles};
use reqwest::StatusCode;
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;
use tokio_rustls::rustls;

use crate::support::{ADMIN_TOKEN, TestServer, until_closed};

/// A self-signed certificate for `localhost` and 127.0.0.1, as PEM, and its key.
struct SelfSigned {
    cert_pem: String,
    key_pem: String,
}

fn self_signed() -> SelfSigned {
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .expect("a self-signed certificate");
    SelfSigned {
        cert_pem: certified.cert.pem(),
        key_pem: certified.signing_key.serialize_pem(),
    }
}

/// Write the certificate and key into `dir`; the files as `--tls-cert`/`--tls-key` name them.
fn write_files(dir: &std::path::Path, cert_pem: &str, key_pem: &str) -> TlsFiles {
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert, cert_pem).unwrap();
    std::fs::write(&key, key_pem).unwrap();
    TlsFiles { cert, key }
}

/// A ready server serving HTTPS with `cert`, with tiny read timeouts; the certificate's
/// directory lives as long as the server.
async fn https_server(cert: &SelfSigned) -> (TestServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &cert.cert_pem, &cert.key_pem);
    let server = TestServer::start_with(move |settings: &mut Settings| {
        settings.demo = false;
        settings.tls = Some(files.clone());
        settings.header_read_timeout = Duration::from_millis(300);
        settings.body_idle_timeout = Duration::from_millis(300);
    })
    .await;
    (server, dir)
}

/// An HTTPS client that trusts only `cert` (no built-in roots), one connection per request.
fn trusting(cert: &SelfSigned) -> reqwest::Client {
    reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(cert.cert_pem.as_bytes()).unwrap())
        .pool_max_idle_per_host(0)
        .build()
        .unwrap()
}

fn port(server: &TestServer) -> u16 {
    server.base.rsplit(':').next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn the_api_is_served_over_https_and_plain_http_is_not() {
    let cert = self_signed();
    let (server, _dir) = https_server(&cert).await;
    assert!(server.base.starts_with("https://"), "{}", server.base);
    let client = trusting(&cert);
    let base = format!("https://localhost:{}", port(&server));

    let response = client.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.version(), reqwest::Version::HTTP_11);
    let response = client
        .get(format!("{base}/api/v1/clusters"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let response = client
        .post(format!("{base}/api/v1/tokens"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&serde_json::json!({"name": "portal", "role": "viewer"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let response = client.get(format!("{base}/metrics")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response
            .text()
            .await
            .unwrap()
            .contains("# TYPE descheduler_build_info gauge")
    );

    // A client that does not trust the certificate gets no answer.
    let untrusting = reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .build()
        .unwrap();
    let err = untrusting
        .get(format!("{base}/healthz"))
        .send()
        .await
        .unwrap_err();
    assert!(err.is_connect(), "{err:?}");

    // Plain HTTP on the same port is told to use HTTPS, and served nothing else.
    let plain = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{}/healthz", port(&server)))
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), StatusCode::BAD_REQUEST);
    let text = plain.text().await.unwrap();
    assert!(text.contains("speaks HTTPS only"), "{text}");
    let mut stream = TcpStream::connect(("127.0.0.1", port(&server)))
        .await
        .unwrap();
    stream
        .write_all(format!("GET /api/v1/clusters HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let answer = String::from_utf8(until_closed(&mut stream).await).unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
        "{answer}"
    );
    assert!(!answer.contains("items"), "{answer}");
}

/// A TLS client for the raw-stream tests, trusting `cert`.
fn connector(cert: &SelfSigned) -> tokio_rustls::TlsConnector {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(cert.cert_pem.as_bytes()).unwrap())
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

#[tokio::test]
async fn tls_connections_keep_the_read_timeouts() {
    let cert = self_signed();
    let (server, _dir) = https_server(&cert).await;
    let addr = ("127.0.0.1", port(&server));
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();

    // Connected, no handshake at all: closed (the handshake has the head timeout).
    let mut silent = TcpStream::connect(addr).await.unwrap();
    assert!(until_closed(&mut silent).await.is_empty());

    // Half a ClientHello, then nothing: closed.
    let mut stalled = TcpStream::connect(addr).await.unwrap();
    stalled
        .write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
        .await
        .unwrap();
    assert!(until_closed(&mut stalled).await.is_empty());

    // Handshake done, no request head: closed.
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut idle = connector(&cert).connect(name.clone(), tcp).await.unwrap();
    let answer = String::from_utf8(until_closed(&mut idle).await).unwrap();
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );

    // A body that stalls: 408 and closed, as over plain HTTP.
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut slow = connector(&cert).connect(name.clone(), tcp).await.unwrap();
    slow.write_all(
        format!(
            "POST /api/v1/runs HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\n\
             Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"cluster\": "
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let answer = String::from_utf8(until_closed(&mut slow).await).unwrap();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("body_timeout"), "{answer}");

    // And the server still serves.
    let response = trusting(&cert)
        .get(format!("https://localhost:{}/healthz", port(&server)))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

/// Start a server on `files` and return the start-up error.
async fn refused(files: TlsFiles) -> String {
    let db = tempfile::tempdir().unwrap();
    let mut settings = Settings::new("127.0.0.1:0".parse().unwrap(), db.path().join("db.sqlite"));
    settings.tls = Some(files);
    let err = match app::spawn(settings).await {
        Ok(_) => panic!("the server started with certificate files it cannot use"),
        Err(e) => format!("{e:#}"),
    };
    // The files are checked before the database is created.
    let created: Vec<PathBuf> = std::fs::read_dir(db.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(created.is_empty(), "{err}: {created:?}");
    err
}

#[tokio::test]
async fn start_up_refuses_certificate_files_it_cannot_use() {
    let dir = tempfile::tempdir().unwrap();
    let cert = self_signed();
    let other = self_signed();

    let missing = TlsFiles {
        cert: dir.path().join("no-such.crt"),
        key: dir.path().join("no-such.key"),
    };
    let err = refused(missing.clone()).await;
    assert!(
        err.starts_with(&format!(
            "--tls-cert {}: cannot read it",
            missing.cert.display()
        )),
        "{err}"
    );

    // A key from another certificate.
    let mismatched = write_files(dir.path(), &cert.cert_pem, &other.key_pem);
    let err = refused(mismatched.clone()).await;
    assert_eq!(
        err,
        format!(
            "--tls-key {} is not the private key of the certificate in --tls-cert {}",
            mismatched.key.display(),
            mismatched.cert.display()
        )
    );

    // The two files swapped.
    let swapped = write_files(dir.path(), &cert.key_pem, &cert.cert_pem);
    let err = refused(swapped).await;
    assert!(err.contains("tls.crt: it holds no certificate"), "{err}");
}
