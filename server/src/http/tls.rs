//! TLS for the listener (`--tls-cert`, `--tls-key`): the certificate chain and private key read
//! from PEM files into a rustls server configuration.
//!
//! Owns: reading and checking the two files (a certificate chain, a key that belongs to its
//! first certificate) and the rustls settings: the `ring` crypto provider (the one kube-rs
//! already links), TLS 1.2 and 1.3, ALPN `http/1.1` (the server speaks HTTP/1 only).
//! Must not: accept connections or time handshakes — that is [`super::serve`]'s.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_rustls::rustls::pki_types::pem::{self, PemObject};
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ServerConfig};

use crate::config::TlsFiles;

/// Why the certificate or key cannot be used. Each says which flag and file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("--{flag} {}: cannot read it: {source}", path.display())]
    Read {
        flag: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "--tls-cert {}: {problem} (expected PEM `-----BEGIN CERTIFICATE-----` sections, the \
         server's certificate first)",
        path.display()
    )]
    Certificate { path: PathBuf, problem: String },
    #[error(
        "--tls-key {}: {problem} (expected one PEM private key: `BEGIN PRIVATE KEY` (PKCS#8), \
         `BEGIN RSA PRIVATE KEY` or `BEGIN EC PRIVATE KEY`)",
        path.display()
    )]
    Key { path: PathBuf, problem: String },
    #[error(
        "--tls-key {} is not the private key of the certificate in --tls-cert {}",
        key.display(),
        cert.display()
    )]
    Mismatch { cert: PathBuf, key: PathBuf },
    #[error("--tls-cert {} with --tls-key {}: {source}", cert.display(), key.display())]
    Rejected {
        cert: PathBuf,
        key: PathBuf,
        source: rustls::Error,
    },
}

/// The rustls configuration of the files `--tls-cert` and `--tls-key` name.
pub fn server_config(files: &TlsFiles) -> Result<Arc<ServerConfig>, TlsError> {
    let read = |flag: &'static str, path: &Path| {
        std::fs::read(path).map_err(|source| TlsError::Read {
            flag,
            path: path.to_path_buf(),
            source,
        })
    };
    let cert_pem = read("tls-cert", &files.cert)?;
    let key_pem = read("tls-key", &files.key)?;
    let certificate = |problem: String| TlsError::Certificate {
        path: files.cert.clone(),
        problem,
    };
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| certificate(pem_problem(&e)))?;
    if chain.is_empty() {
        return Err(certificate("it holds no certificate".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| TlsError::Key {
        path: files.key.clone(),
        problem: match e {
            pem::Error::NoItemsFound => "it holds no private key".into(),
            e => pem_problem(&e),
        },
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|source| TlsError::Rejected {
            cert: files.cert.clone(),
            key: files.key.clone(),
            source,
        })?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|source| match source {
            rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
                TlsError::Mismatch {
                    cert: files.cert.clone(),
                    key: files.key.clone(),
                }
            }
            source => TlsError::Rejected {
                cert: files.cert.clone(),
                key: files.key.clone(),
                source,
            },
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// What is wrong with a PEM file, in words (the library's own messages print raw bytes).
fn pem_problem(e: &pem::Error) -> String {
    match e {
        pem::Error::MissingSectionEnd { .. } => "a PEM section has no END line".into(),
        pem::Error::IllegalSectionStart { .. } => "a PEM BEGIN line is malformed".into(),
        pem::Error::Base64Decode(_) => "a PEM section is not valid base64".into(),
        pem::Error::NoItemsFound => "it holds no PEM section of the expected kind".into(),
        e => e.to_string(),
    }
}
