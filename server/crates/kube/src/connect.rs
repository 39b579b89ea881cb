//! Connecting to a cluster with the server's own credentials.
//!
//! Owns [`Source`] (a kubeconfig context, or the pod's service account) and [`connect`], which
//! builds a kube-rs client with kube's own retry of 429/503/504 turned off: a 429 from the
//! Eviction API is a PDB's answer, which the executor retries on its own schedule. Credentials
//! stay inside the client: nothing here stores, returns or logs them (only the API server URL).

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// Where a cluster's credentials come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A kubeconfig: `path` (else `$KUBECONFIG`, else `~/.kube/config`), `context` (else the
    /// current context).
    Kubeconfig {
        path: Option<PathBuf>,
        context: Option<String>,
    },
    /// The service account of the pod the server runs in.
    InCluster,
}

impl Source {
    /// How the source is shown to people (no credentials in it).
    pub fn describe(&self) -> String {
        match self {
            Source::Kubeconfig { path, context } => format!(
                "kubeconfig {}{}",
                path.as_ref().map_or_else(
                    || "from $KUBECONFIG".to_owned(),
                    |p| p.display().to_string()
                ),
                context.as_ref().map_or_else(
                    || ", current context".to_owned(),
                    |c| format!(", context {c}")
                )
            ),
            Source::InCluster => "in-cluster service account".to_owned(),
        }
    }
}

/// A client for one cluster.
#[derive(Clone)]
pub struct Connection {
    pub client: Client,
    /// The API server's URL (the only part of the credentials that is ever shown).
    pub api_server: String,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("api_server", &self.api_server)
            .finish_non_exhaustive()
    }
}

/// Why a cluster's client could not be built.
#[derive(Debug, thiserror::Error)]
#[error("{source_desc}: {message}")]
pub struct ConnectError {
    pub source_desc: String,
    pub message: String,
}

/// Build the client of `source`. Reads the kubeconfig (or the service account), nothing more:
/// the API server is first contacted by discovery.
pub async fn connect(source: &Source) -> Result<Connection, ConnectError> {
    let fail = |message: String| ConnectError {
        source_desc: source.describe(),
        message,
    };
    let mut config = match source {
        Source::InCluster => Config::incluster().map_err(|e| fail(e.to_string()))?,
        Source::Kubeconfig { path, context } => {
            let options = KubeConfigOptions {
                context: context.clone(),
                ..KubeConfigOptions::default()
            };
            match path {
                Some(path) => {
                    let kubeconfig =
                        Kubeconfig::read_from(path).map_err(|e| fail(e.to_string()))?;
                    Config::from_custom_kubeconfig(kubeconfig, &options)
                        .await
                        .map_err(|e| fail(e.to_string()))?
                }
                None => Config::from_kubeconfig(&options)
                    .await
                    .map_err(|e| fail(e.to_string()))?,
            }
        }
    };
    // A 429 is a PodDisruptionBudget refusing an eviction: the executor decides when to retry.
    config.default_retry = false;
    let api_server = config.cluster_url.to_string();
    let client = Client::try_from(config).map_err(|e| fail(e.to_string()))?;
    Ok(Connection { client, api_server })
}
