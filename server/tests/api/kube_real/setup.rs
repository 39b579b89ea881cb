//! Set-up and clean-up of the real-cluster tests.
//!
//! Owns everything the tests create in the cluster, and its removal: [`run`] gives a test its
//! namespace (and, when asked for, the ServiceAccount of `deploy/` to act as) and deletes what
//! was created once the test has ended, whether it passed or panicked. Must not delete or keep
//! changed anything that existed before, except what the module doc says (`deploy/` objects
//! that existed are replaced with `deploy/`'s version).

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::FutureExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::discovery::Scope;
use kube::{Api, Client};
use rebalancer_server::config::{KubeCluster, Settings};
use serde_json::{Value, json};

/// The name the server manages the cluster under.
pub const CLUSTER: &str = "real";
/// `terminationGracePeriodSeconds` of the test pods and `gracePeriodSeconds` of the profiles:
/// an evicted pod stays Terminating this long (its container ignores SIGTERM), so the
/// scheduler still sees it on its node when the replacement is placed, and a restarted server
/// finds it still there.
pub const GRACE_SECONDS: i64 = 30;
/// Image of the test pods: a shell that ignores SIGTERM. The pause image would not do: it exits
/// on SIGTERM at once, so an evicted pod would be gone within a second or two.
/// `REBALANCER_E2E_IMAGE` overrides it (a mirror, an air-gapped registry).
const IMAGE: &str = "registry.k8s.io/e2e-test-images/busybox:1.36.1-1";
/// Set to `1` to act as `deploy/`'s ServiceAccount instead of with `KUBECONFIG`'s credentials.
const AS_SERVICE_ACCOUNT: &str = "REBALANCER_E2E_AS_SERVICE_ACCOUNT";
/// `deploy/` files applied in ServiceAccount mode, in order.
const DEPLOY_FILES: [&str; 4] = [
    "namespace.yaml",
    "serviceaccount.yaml",
    "rbac.yaml",
    "priorityclass.yaml",
];
/// The namespace and ServiceAccount of `deploy/`.
const DEPLOY_NAMESPACE: &str = "rebalancer";
/// Koordinator's Reservation kind.
pub const RESERVATION: (&str, &str, &str) =
    ("scheduling.koordinator.sh", "v1alpha1", "Reservation");

/// One real-cluster test at a time: they share nodes, the placeholder PriorityClass and
/// `deploy/`'s objects, and each cordons nodes. A tokio Mutex, as it is held across awaits and
/// each test has its own runtime.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
/// The most a test may take, set-up and clean-up aside.
const TEST_LIMIT: Duration = Duration::from_secs(300);
/// Numbers the namespaces of this process.
static NEXT: AtomicU32 = AtomicU32::new(0);

/// What a test runs against.
pub struct E2e {
    /// `KUBECONFIG`'s own credentials: the tests' view of the cluster, and their hands.
    pub client: Client,
    /// `rebalancer-e2e-<pid>-<n>`, deleted at the end.
    pub namespace: String,
    /// The kubeconfig servers use: `None` for `KUBECONFIG` itself (its current context).
    kubeconfig: Option<PathBuf>,
    /// Where servers keep their Lease: the test namespace, or `rebalancer` as the
    /// ServiceAccount (`deploy/rbac.yaml` grants Leases there only).
    lease_namespace: String,
    undo: Undo,
    /// Holds the ServiceAccount's kubeconfig.
    _dir: Option<tempfile::TempDir>,
}

/// Run `body` with a fresh [`E2e`], then delete what set-up and `body` created, even when
/// either panicked (the panic is passed on afterwards).
pub async fn run<F, Fut>(body: F)
where
    F: FnOnce(Arc<E2e>) -> Fut,
    Fut: Future<Output = ()>,
{
    assert!(
        std::env::var_os("KUBECONFIG").is_some(),
        "set KUBECONFIG to a disposable cluster (see the module doc of kube_real)"
    );
    let _serial = SERIAL.lock().await;
    let client = Client::try_default()
        .await
        .expect("a client from KUBECONFIG's current context");
    let namespace = format!(
        "rebalancer-e2e-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let undo = Undo::default();
    let outcome = AssertUnwindSafe(async {
        let e2e = Arc::new(set_up(client.clone(), namespace.clone(), undo.clone()).await);
        // Every wait inside has a bound of its own, which fails with what it waited for;
        // this one keeps their sum from passing the few minutes the module doc promises.
        tokio::time::timeout(TEST_LIMIT, body(e2e))
            .await
            .unwrap_or_else(|_| panic!("the test took longer than {TEST_LIMIT:?}"));
    })
    .catch_unwind()
    .await;
    let problems = tear_down(&client, &namespace, &undo).await;
    if let Err(panic) = outcome {
        if !problems.is_empty() {
            eprintln!("clean-up after the failure: {problems:#?}");
        }
        std::panic::resume_unwind(panic);
    }
    assert!(problems.is_empty(), "clean-up failed: {problems:#?}");
}

async fn set_up(client: Client, namespace: String, undo: Undo) -> E2e {
    let as_service_account = std::env::var(AS_SERVICE_ACCOUNT).is_ok_and(|v| v == "1");
    let (kubeconfig, lease_namespace, dir) = if as_service_account {
        for file in DEPLOY_FILES {
            apply_deploy_file(&client, file, &undo).await;
        }
        // The Lease the servers create there is ours too.
        undo.push(Step::Delete {
            resource: ApiResource::erase::<k8s_openapi::api::coordination::v1::Lease>(&()),
            namespace: Some(DEPLOY_NAMESPACE.into()),
            name: format!("rebalancer-{CLUSTER}"),
        });
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("kubeconfig");
        write_service_account_kubeconfig(&client, &path).await;
        (Some(path), DEPLOY_NAMESPACE.to_owned(), Some(dir))
    } else {
        // Placeholder pods need their PriorityClass: deploy/'s, created when missing.
        create_missing(&client, "priorityclass.yaml", &undo).await;
        (None, namespace.clone(), None)
    };
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {
                "name": namespace,
                "labels": {"app.kubernetes.io/created-by": "rebalancer-e2e"}
            }}))
            .unwrap(),
        )
        .await
        .unwrap_or_else(|e| panic!("creating namespace {namespace}: {e}"));
    undo.push(Step::Delete {
        resource: ApiResource::erase::<Namespace>(&()),
        namespace: None,
        name: namespace.clone(),
    });
    E2e {
        client,
        namespace,
        kubeconfig,
        lease_namespace,
        undo,
        _dir: dir,
    }
}

/// Undo everything, newest first; what could not be undone, in words.
async fn tear_down(client: &Client, namespace: &str, undo: &Undo) -> Vec<String> {
    let mut problems = Vec::new();
    // Reservations are cluster-scoped: the namespace's deletion does not take them along. A
    // server stopped in the middle of a pod migration (a failed test) may have left one.
    if let Some(resource) = reservation_resource(client).await {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        match api
            .list(&ListParams::default().labels("app.kubernetes.io/managed-by=rebalancer"))
            .await
        {
            Ok(list) => {
                for r in list.items {
                    let ours = r.data["spec"]["template"]["metadata"]["namespace"] == namespace;
                    let name = r.metadata.name.unwrap_or_default();
                    if ours && let Err(e) = api.delete(&name, &DeleteParams::default()).await {
                        problems.push(format!("deleting Reservation {name}: {e}"));
                    }
                }
            }
            Err(e) => problems.push(format!("listing Reservations: {e}")),
        }
    }
    for step in undo.take().into_iter().rev() {
        if let Err(problem) = step.undo(client).await {
            problems.push(problem);
        }
    }
    problems
}

impl E2e {
    /// Settings of an in-process server managing the cluster as [`CLUSTER`].
    pub fn settings(&self) -> impl Fn(&mut Settings) + Send + Sync + 'static {
        let kubeconfig = self.kubeconfig.clone();
        let lease_namespace = self.lease_namespace.clone();
        move |s: &mut Settings| {
            s.demo = false;
            s.kube.clusters = vec![KubeCluster {
                name: CLUSTER.into(),
                source: rebalancer_kube::Source::Kubeconfig {
                    path: kubeconfig.clone(),
                    context: None,
                },
            }];
            s.kube.lease.namespace = lease_namespace.clone();
        }
    }

    /// Environment of the `rebalancer` binary managing the cluster as [`CLUSTER`], as
    /// `identity` (the same identity after a crash takes the Lease over at once).
    pub fn binary_env(&self, identity: &str) -> Vec<(&'static str, String)> {
        let mut env = vec![
            ("REBALANCER_KUBE_CLUSTERS", CLUSTER.to_owned()),
            ("REBALANCER_IDENTITY", identity.to_owned()),
            ("REBALANCER_LEASE_NAMESPACE", self.lease_namespace.clone()),
            // The built-ins compiled once for every test server: a restart is ready in
            // seconds, well within the evicted pod's grace period.
            (
                "REBALANCER_POLICY_CACHE_DIR",
                crate::support::shared_compile_cache().display().to_string(),
            ),
        ];
        if let Some(path) = &self.kubeconfig {
            env.push(("REBALANCER_KUBECONFIG", path.display().to_string()));
        }
        env
    }

    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Mark `node` unschedulable until the end of the test, so that a replacement cannot land
    /// back on the node its pod was evicted from (in a cluster with room everywhere, the
    /// default scheduler may well choose it: the pod migration then fails, rightly, as
    /// `ReplacementOnSourceNode`). A node cordoned already is left as it is.
    pub async fn cordon(&self, node: &str) {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let current = nodes
            .get(node)
            .await
            .unwrap_or_else(|e| panic!("reading node {node}: {e}"));
        if current.spec.and_then(|s| s.unschedulable) == Some(true) {
            return;
        }
        self.undo.push(Step::Uncordon(node.to_owned()));
        nodes
            .patch(
                node,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"unschedulable": true}})),
            )
            .await
            .unwrap_or_else(|e| panic!("cordoning node {node}: {e}"));
    }

    /// `Descheduled` Events (events.k8s.io) about the pod with `uid`.
    pub async fn descheduled_events(&self, uid: &str) -> Vec<Event> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), &self.namespace);
        events
            .list(&ListParams::default())
            .await
            .expect("listing events.k8s.io Events")
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("Descheduled"))
            .filter(|e| e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == Some(uid))
            .collect()
    }

    /// Placeholder pods and Reservations made for pods of the test namespace.
    pub async fn reservations_left(&self) -> Vec<String> {
        let mut left: Vec<String> = self
            .pods()
            .list(&ListParams::default().labels("rebalancer.io/reservation"))
            .await
            .expect("listing placeholder pods")
            .items
            .into_iter()
            .map(|p| format!("placeholder pod {}", p.metadata.name.unwrap_or_default()))
            .collect();
        if let Some(resource) = reservation_resource(&self.client).await {
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
            left.extend(
                api.list(&ListParams::default())
                    .await
                    .expect("listing Reservations")
                    .items
                    .into_iter()
                    .filter(|r| {
                        r.data["spec"]["template"]["metadata"]["namespace"] == self.namespace
                    })
                    .map(|r| format!("Reservation {}", r.metadata.name.unwrap_or_default())),
            );
        }
        left
    }

    /// Wait (60 s) until no placeholder or Reservation of the test namespace is left: a pod
    /// migration releases its reservation as it finishes.
    pub async fn assert_nothing_left(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = self.reservations_left().await;
            if left.is_empty() {
                return;
            }
            assert!(Instant::now() < deadline, "left behind: {left:?}");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// Nodes a test pod can be scheduled on: Ready, not cordoned, no NoSchedule or NoExecute
    /// taint (the test pods tolerate none).
    pub async fn schedulable_nodes(&self) -> Vec<String> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        nodes
            .list(&ListParams::default())
            .await
            .expect("listing nodes")
            .items
            .into_iter()
            .filter(|n| {
                let spec = n.spec.clone().unwrap_or_default();
                let ready = n
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
                let tainted = spec
                    .taints
                    .unwrap_or_default()
                    .iter()
                    .any(|t| t.effect == "NoSchedule" || t.effect == "NoExecute");
                ready && spec.unschedulable != Some(true) && !tainted
            })
            .filter_map(|n| n.metadata.name)
            .collect()
    }

    /// Fail unless at least `n` nodes are schedulable.
    pub async fn require_nodes(&self, n: usize) -> Vec<String> {
        let nodes = self.schedulable_nodes().await;
        assert!(
            nodes.len() >= n,
            "this test needs {n} schedulable nodes (Ready, not cordoned, untainted); the \
             cluster has {nodes:?}"
        );
        nodes
    }
}

/// The test workload: Deployment `web` (label `app=web`).
pub struct Web {
    replicas: i32,
    scheduler: Option<&'static str>,
}

pub fn web(replicas: i32) -> Web {
    Web {
        replicas,
        scheduler: None,
    }
}

impl Web {
    pub fn scheduled_by(mut self, scheduler: &'static str) -> Web {
        self.scheduler = Some(scheduler);
        self
    }

    /// Create it in the test namespace and wait (2 min: the image may need pulling) until
    /// every replica runs and is Ready. Returns the pods.
    pub async fn create(self, e2e: &E2e) -> Vec<Pod> {
        let image = std::env::var("REBALANCER_E2E_IMAGE").unwrap_or_else(|_| IMAGE.to_owned());
        let mut spec = json!({
            "terminationGracePeriodSeconds": GRACE_SECONDS,
            "automountServiceAccountToken": false,
            "enableServiceLinks": false,
            // Spread over the nodes: replicas prefer nodes without one (a Terminating pod
            // counts too, which also keeps a replacement off its predecessor's node).
            "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                "weight": 100,
                "podAffinityTerm": {
                    "labelSelector": {"matchLabels": {"app": "web"}},
                    "topologyKey": "kubernetes.io/hostname"
                }
            }]}},
            // Admitted by the `restricted` Pod Security Standard.
            "securityContext": {
                "runAsNonRoot": true,
                "runAsUser": 65534,
                "seccompProfile": {"type": "RuntimeDefault"}
            },
            "containers": [{
                "name": "hold",
                "image": image,
                // Ignores SIGTERM: the pod stays Terminating for its whole grace period.
                "command": ["sh", "-c", "trap '' TERM; while true; do sleep 1; done"],
                "resources": {
                    "requests": {"cpu": "10m", "memory": "16Mi"},
                    "limits": {"memory": "32Mi"}
                },
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "readOnlyRootFilesystem": true,
                    "capabilities": {"drop": ["ALL"]}
                }
            }]
        });
        if let Some(scheduler) = self.scheduler {
            spec["schedulerName"] = json!(scheduler);
        }
        let deployments: Api<Deployment> = Api::namespaced(e2e.client.clone(), &e2e.namespace);
        deployments
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({
                    "metadata": {"name": "web", "labels": {"app": "web"}},
                    "spec": {
                        "replicas": self.replicas,
                        "selector": {"matchLabels": {"app": "web"}},
                        "template": {"metadata": {"labels": {"app": "web"}}, "spec": spec}
                    }
                }))
                .unwrap(),
            )
            .await
            .expect("creating Deployment web");
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let pods = live_web_pods(e2e).await;
            let ready = pods.iter().filter(|p| is_ready(p)).count();
            if ready == self.replicas as usize && pods.len() == ready {
                return pods;
            }
            if Instant::now() > deadline {
                let states: Vec<Value> = pods
                    .iter()
                    .map(|p| json!({"name": p.metadata.name, "status": p.status}))
                    .collect();
                panic!(
                    "Deployment web: {ready} of {} replicas Ready after 2 min: {states:#?}",
                    self.replicas
                );
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

/// Pods of Deployment `web` that are not being deleted.
pub async fn live_web_pods(e2e: &E2e) -> Vec<Pod> {
    e2e.pods()
        .list(&ListParams::default().labels("app=web"))
        .await
        .expect("listing the web pods")
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

pub fn node_of(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default()
}

/// The Reservation API's resource, when the cluster serves it.
pub async fn reservation_resource(client: &Client) -> Option<ApiResource> {
    let (group, version, kind) = RESERVATION;
    kube::discovery::pinned_kind(client, &GroupVersionKind::gvk(group, version, kind))
        .await
        .ok()
        .map(|(resource, _)| resource)
}

// ---- Undo ---------------------------------------------------------------------------------

/// What a test changed in the cluster, to be undone at its end.
#[derive(Clone, Default)]
struct Undo(Arc<Mutex<Vec<Step>>>);

enum Step {
    Delete {
        resource: ApiResource,
        namespace: Option<String>,
        name: String,
    },
    Uncordon(String),
}

impl Undo {
    fn push(&self, step: Step) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(step);
    }

    fn take(&self) -> Vec<Step> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl Step {
    async fn undo(self, client: &Client) -> Result<(), String> {
        match self {
            Step::Delete {
                resource,
                namespace,
                name,
            } => {
                let api: Api<DynamicObject> = match &namespace {
                    Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
                    None => Api::all_with(client.clone(), &resource),
                };
                match api.delete(&name, &DeleteParams::background()).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
                    Err(e) => Err(format!("deleting {} {name}: {e}", resource.kind)),
                }
            }
            Step::Uncordon(node) => {
                let nodes: Api<Node> = Api::all(client.clone());
                nodes
                    .patch(
                        &node,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"spec": {"unschedulable": null}})),
                    )
                    .await
                    .map(drop)
                    .map_err(|e| format!("uncordoning node {node}: {e} (kubectl uncordon {node})"))
            }
        }
    }
}

// ---- deploy/ ------------------------------------------------------------------------------

/// The objects of `deploy/<file>`, each with its resource and scope (by discovery).
async fn deploy_objects(client: &Client, file: &str) -> Vec<(DynamicObject, ApiResource, bool)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut objects = Vec::new();
    for document in serde_yaml::Deserializer::from_str(&text) {
        let value: Value = serde_yaml::with::singleton_map_recursive::deserialize(document)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if value.is_null() {
            continue;
        }
        let object: DynamicObject = serde_json::from_value(value)
            .unwrap_or_else(|e| panic!("{}: not a Kubernetes object: {e}", path.display()));
        let types = object
            .types
            .clone()
            .unwrap_or_else(|| panic!("{}: an object without apiVersion/kind", path.display()));
        let gvk = GroupVersionKind::try_from(&types)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let (resource, capabilities) = kube::discovery::pinned_kind(client, &gvk)
            .await
            .unwrap_or_else(|e| panic!("discovery of {gvk:?} ({}): {e}", path.display()));
        objects.push((object, resource, capabilities.scope == Scope::Namespaced));
    }
    objects
}

fn api_for(
    client: &Client,
    object: &DynamicObject,
    resource: &ApiResource,
    namespaced: bool,
) -> Api<DynamicObject> {
    if namespaced {
        let namespace = object.metadata.namespace.as_deref().unwrap_or("default");
        Api::namespaced_with(client.clone(), namespace, resource)
    } else {
        Api::all_with(client.clone(), resource)
    }
}

/// Create or replace every object of `deploy/<file>`; those created are deleted at the end.
async fn apply_deploy_file(client: &Client, file: &str, undo: &Undo) {
    for (mut object, resource, namespaced) in deploy_objects(client, file).await {
        let api = api_for(client, &object, &resource, namespaced);
        let name = object.metadata.name.clone().unwrap_or_default();
        let what = format!("deploy/{file}: {} {name}", resource.kind);
        match api.get_opt(&name).await {
            Ok(None) => {
                api.create(&PostParams::default(), &object)
                    .await
                    .unwrap_or_else(|e| panic!("creating {what}: {e}"));
                undo.push(Step::Delete {
                    resource,
                    namespace: namespaced
                        .then(|| object.metadata.namespace.clone().unwrap_or_default()),
                    name,
                });
            }
            Ok(Some(existing)) => {
                object.metadata.resource_version = existing.metadata.resource_version;
                api.replace(&name, &PostParams::default(), &object)
                    .await
                    .unwrap_or_else(|e| panic!("replacing {what}: {e}"));
            }
            Err(e) => panic!("reading {what}: {e}"),
        }
    }
}

/// Create the objects of `deploy/<file>` that do not exist; those are deleted at the end.
async fn create_missing(client: &Client, file: &str, undo: &Undo) {
    for (object, resource, namespaced) in deploy_objects(client, file).await {
        let api = api_for(client, &object, &resource, namespaced);
        let name = object.metadata.name.clone().unwrap_or_default();
        let what = format!("deploy/{file}: {} {name}", resource.kind);
        let exists = api
            .get_opt(&name)
            .await
            .unwrap_or_else(|e| panic!("reading {what}: {e}"))
            .is_some();
        if !exists {
            api.create(&PostParams::default(), &object)
                .await
                .unwrap_or_else(|e| panic!("creating {what}: {e}"));
            undo.push(Step::Delete {
                resource,
                namespace: namespaced
                    .then(|| object.metadata.namespace.clone().unwrap_or_default()),
                name,
            });
        }
    }
}

/// A kubeconfig at `path` with KUBECONFIG's current cluster (server, CA, TLS settings) and a
/// one-hour token of ServiceAccount `rebalancer/rebalancer` (TokenRequest API).
async fn write_service_account_kubeconfig(client: &Client, path: &Path) {
    let admin = kube::config::Kubeconfig::read().expect("reading KUBECONFIG");
    let context_name = admin
        .current_context
        .clone()
        .expect("KUBECONFIG has no current-context");
    let cluster_name = admin
        .contexts
        .iter()
        .find(|c| c.name == context_name)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone())
        .unwrap_or_else(|| panic!("KUBECONFIG: no context {context_name}"));
    let cluster = admin
        .clusters
        .iter()
        .find(|c| c.name == cluster_name)
        .and_then(|c| c.cluster.clone())
        .unwrap_or_else(|| panic!("KUBECONFIG: no cluster {cluster_name}"));

    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), DEPLOY_NAMESPACE);
    let request: TokenRequest = serde_json::from_value(json!({
        "spec": {"audiences": [], "expirationSeconds": 3600}
    }))
    .unwrap();
    let token = accounts
        .create_token_request("rebalancer", &PostParams::default(), &request)
        .await
        .expect("a token for ServiceAccount rebalancer/rebalancer (TokenRequest)")
        .status
        .map(|s| s.token)
        .expect("the TokenRequest's status.token");

    // JSON is YAML: kube reads it as any kubeconfig.
    let kubeconfig = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": cluster}],
        "users": [{"name": "rebalancer", "user": {"token": token}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "rebalancer"}}],
        "current-context": "e2e"
    });
    std::fs::write(path, serde_json::to_vec_pretty(&kubeconfig).unwrap())
        .expect("writing the ServiceAccount's kubeconfig");
}
