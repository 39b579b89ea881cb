//! The state machine against a scripted fake backend: a real server (store, executor task,
//! HTTP) whose backend answers per pod as each test says.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::app::{self, Server};
use crate::backend::{
    Backend, BackendError, EvictedPod, EvictionCheck, EvictionRequest, EvictionResult, PodState,
    ReservationRequest, ReservationState,
};
use crate::config::{Secret, Settings};
use rebalancer_store::{NewDecision, NewRun, RunEnd};

const TOKEN: &str = "test-admin-token";

/// What happens to a pod's replacement after its eviction.
#[derive(Clone, Debug)]
enum After {
    /// Binds into the reservation; Ready after `ready_after` looks.
    Bind { ready_after: u32 },
    /// Lands on this node, outside the reservation.
    Elsewhere(&'static str),
    /// Never appears.
    Nothing,
}

#[derive(Clone, Debug)]
struct Script {
    reserve: ReservationState,
    check: EvictionCheck,
    after: After,
}

impl Default for Script {
    fn default() -> Self {
        Script {
            reserve: ReservationState::Scheduled { node: "n2".into() },
            check: EvictionCheck::Allowed { pdb: None },
            // One look when the binding is recorded, one while waiting for Ready.
            after: After::Bind { ready_after: 2 },
        }
    }
}

#[derive(Default)]
struct FakeState {
    pods: HashMap<String, PodState>,
    scripts: HashMap<String, Script>,
    /// reservation name → (pod uid it is for, state)
    reservations: HashMap<String, (String, ReservationState)>,
    evictions: Vec<String>,
    reserve_calls: Vec<String>,
    released: Vec<String>,
    replacement: HashMap<String, String>,
    ready_looks: HashMap<String, u32>,
}

#[derive(Default)]
struct Fake(Mutex<FakeState>);

impl Fake {
    fn add_pod(&self, uid: &str, node: &str, script: Script) {
        let mut s = self.0.lock().unwrap();
        s.pods
            .insert(uid.into(), pod_state(uid, Some(node), true, None));
        s.scripts.insert(uid.into(), script);
    }

    fn set_check(&self, uid: &str, check: EvictionCheck) {
        self.0.lock().unwrap().scripts.get_mut(uid).unwrap().check = check;
    }

    fn move_pod(&self, uid: &str, node: &str) {
        self.0.lock().unwrap().pods.get_mut(uid).unwrap().node = Some(node.into());
    }

    fn evictions(&self) -> Vec<String> {
        self.0.lock().unwrap().evictions.clone()
    }

    fn reserve_calls(&self) -> Vec<String> {
        self.0.lock().unwrap().reserve_calls.clone()
    }

    fn released(&self) -> Vec<String> {
        self.0.lock().unwrap().released.clone()
    }
}

fn pod_state(uid: &str, node: Option<&str>, ready: bool, reservation: Option<&str>) -> PodState {
    PodState {
        uid: uid.into(),
        namespace: "shop".into(),
        name: uid.trim_start_matches("uid-shop-").into(),
        node: node.map(String::from),
        phase: "Running".into(),
        ready,
        owner: None,
        reservation: reservation.map(String::from),
        terminating: false,
        created_ms: None,
    }
}

#[async_trait]
impl Backend for Fake {
    async fn pod(&self, _: &str, uid: &str) -> Result<Option<PodState>, BackendError> {
        let mut s = self.0.lock().unwrap();
        // A bound replacement turns Ready after its scripted number of looks.
        let owner = s
            .replacement
            .iter()
            .find(|(_, new)| new.as_str() == uid)
            .map(|(old, _)| old.clone());
        if let Some(old) = owner
            && let Some(Script {
                after: After::Bind { ready_after },
                ..
            }) = s.scripts.get(&old).cloned()
        {
            let looks = s.ready_looks.entry(uid.to_string()).or_default();
            *looks += 1;
            let ready = *looks > ready_after;
            if let Some(p) = s.pods.get_mut(uid) {
                p.ready = ready;
            }
        }
        Ok(s.pods.get(uid).cloned())
    }

    async fn eviction_check(&self, _: &str, uid: &str) -> Result<EvictionCheck, BackendError> {
        let s = self.0.lock().unwrap();
        if !s.pods.contains_key(uid) {
            return Ok(EvictionCheck::PodNotFound);
        }
        Ok(s.scripts.get(uid).cloned().unwrap_or_default().check)
    }

    async fn reserve(
        &self,
        _: &str,
        req: &ReservationRequest,
    ) -> Result<ReservationState, BackendError> {
        let mut s = self.0.lock().unwrap();
        s.reserve_calls.push(req.name.clone());
        if let Some((_, state)) = s.reservations.get(&req.name) {
            return Ok(state.clone());
        }
        let state = s
            .scripts
            .get(&req.pod_uid)
            .cloned()
            .unwrap_or_default()
            .reserve;
        s.reservations
            .insert(req.name.clone(), (req.pod_uid.clone(), state.clone()));
        Ok(state)
    }

    async fn reservation(
        &self,
        _: &str,
        name: &str,
    ) -> Result<Option<ReservationState>, BackendError> {
        Ok(self
            .0
            .lock()
            .unwrap()
            .reservations
            .get(name)
            .map(|(_, s)| s.clone()))
    }

    async fn release(&self, _: &str, name: &str) -> Result<(), BackendError> {
        let mut s = self.0.lock().unwrap();
        s.released.push(name.to_string());
        if let Some((_, state)) = s.reservations.get_mut(name)
            && !matches!(state, ReservationState::Bound { .. })
        {
            *state = ReservationState::Released;
        }
        Ok(())
    }

    async fn evict(
        &self,
        _: &str,
        request: &EvictionRequest,
    ) -> Result<EvictionResult, BackendError> {
        let uid = request.uid.as_str();
        let mut s = self.0.lock().unwrap();
        let Some(pod) = s.pods.remove(uid) else {
            return Ok(EvictionResult::NotFound);
        };
        s.evictions.push(uid.to_string());
        let new_uid = format!("{uid}-new");
        let script = s.scripts.get(uid).cloned().unwrap_or_default();
        match script.after {
            After::Bind { .. } => {
                let entry = s
                    .reservations
                    .iter_mut()
                    .find(|(_, (owner, _))| owner == uid);
                if let Some((name, (_, state))) = entry
                    && let ReservationState::Scheduled { node } = state.clone()
                {
                    let name = name.clone();
                    *state = ReservationState::Bound {
                        node: node.clone(),
                        pod_uid: new_uid.clone(),
                    };
                    s.pods.insert(
                        new_uid.clone(),
                        pod_state(&new_uid, Some(&node), false, Some(&name)),
                    );
                } else {
                    // EvictDirectly: the replacement lands anywhere.
                    s.pods
                        .insert(new_uid.clone(), pod_state(&new_uid, Some("n3"), true, None));
                }
                s.replacement.insert(uid.to_string(), new_uid);
            }
            After::Elsewhere(node) => {
                s.pods
                    .insert(new_uid.clone(), pod_state(&new_uid, Some(node), true, None));
                s.replacement.insert(uid.to_string(), new_uid);
            }
            After::Nothing => {}
        }
        drop(pod);
        Ok(EvictionResult::Evicted)
    }

    async fn replacements_of(
        &self,
        _: &str,
        evicted: &EvictedPod,
    ) -> Result<Vec<PodState>, BackendError> {
        let evicted_uid = evicted.uid.as_str();
        let s = self.0.lock().unwrap();
        Ok(s.replacement
            .get(evicted_uid)
            .and_then(|new| s.pods.get(new).cloned())
            .into_iter()
            .collect())
    }
}

struct Harness {
    server: Option<Server>,
    fake: Arc<Fake>,
    base: String,
    client: reqwest::Client,
    run: i64,
    _dir: tempfile::TempDir,
}

fn node(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
           "metadata": {"name": name, "uid": format!("uid-node-{name}")},
           "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                      "conditions": [{"type": "Ready", "status": "True"}]}})
}

fn bare_pod(name: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-shop-{name}"),
                        "creationTimestamp": "2020-01-01T00:00:00Z"},
           "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]},
           "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
}

impl Harness {
    /// A server with the fake backend, cluster `c` holding `pods` (name, node, script), and one
    /// finished run that proposed every pod.
    async fn start(pods: &[(&str, &str, Script)]) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = Settings::new("127.0.0.1:0".parse().unwrap(), dir.path().join("t.db"));
        settings.demo = false;
        settings.admin_token = Some(Secret::new(TOKEN));
        let fake = Arc::new(Fake::default());
        let mut server = app::spawn_with_backend(settings, Some(fake.clone()))
            .await
            .unwrap();
        server.wait_ready().await.unwrap();
        let state = server.state.clone();
        // Node and pod caps out of the way; these tests are about the machine.
        state
            .pod_migrations
            .executor
            .set_config(crate::executor::arbitration::ArbitrationConfig {
                max_migrating_per_node: 0,
                ..Default::default()
            });
        let mut items = vec![node("n1"), node("n2"), node("n3")];
        for (name, on, script) in pods {
            items.push(bare_pod(name, on));
            fake.add_pod(&format!("uid-shop-{name}"), on, script.clone());
        }
        let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
        state
            .ingest
            .snapshot(
                "c",
                serde_json::to_vec(&list).unwrap(),
                rebalancer_cluster::Format::Json,
                None,
            )
            .await
            .unwrap();
        let run = state
            .store
            .insert_run(&NewRun::manual("c", 1, "default"))
            .await
            .unwrap();
        let uids: Vec<String> = pods
            .iter()
            .map(|(n, _, _)| format!("uid-shop-{n}"))
            .collect();
        let decisions: Vec<NewDecision<'_>> = pods
            .iter()
            .zip(&uids)
            .map(|((name, on, _), uid)| NewDecision {
                plugin_set: "default",
                plugin: "PodLifeTime",
                pod_uid: uid,
                pod_namespace: "shop",
                pod_name: name,
                node: on,
                reason: "test",
            })
            .collect();
        state
            .store
            .finish_run(
                run.id,
                RunEnd::Succeeded {
                    report: &|_: &[usize]| "{}".to_string(),
                    decisions: &decisions,
                    state: &[],
                },
            )
            .await
            .unwrap();
        Harness {
            base: format!("http://{}", server.addr),
            server: Some(server),
            fake,
            client: reqwest::Client::new(),
            run: run.id,
            _dir: dir,
        }
    }

    async fn decision_of(&self, pod: &str) -> i64 {
        let (_, body) = self
            .get(&format!("/api/v1/decisions?run={}", self.run))
            .await;
        body["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["pod"]["name"] == pod)
            .unwrap()["id"]
            .as_i64()
            .unwrap()
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let r = self
            .client
            .get(format!("{}{path}", self.base))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let r = self
            .client
            .post(format!("{}{path}", self.base))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    /// Approve the decision of `pod`; returns its pod migration id.
    async fn approve(&self, pod: &str) -> i64 {
        let id = self.decision_of(pod).await;
        let (status, body) = self
            .post(
                &format!("/api/v1/decisions/{id}/approve"),
                json!({"comment": "go"}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        body["podMigration"].as_i64().unwrap()
    }

    /// Poll pod migration `id` until `done` says so (10 s at most).
    async fn wait_for(&self, id: i64, done: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..200 {
            let (_, body) = self.get(&format!("/api/v1/pod-migrations/{id}")).await;
            if done(&body) {
                return body;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let (_, body) = self.get(&format!("/api/v1/pod-migrations/{id}")).await;
        panic!("pod migration {id} did not get there: {body:#}");
    }

    async fn finished(&self, id: i64) -> Value {
        self.wait_for(id, |m| {
            matches!(
                m["phase"].as_str(),
                Some("Succeeded" | "Failed" | "Aborted")
            )
        })
        .await
    }

    async fn stop(mut self) {
        if let Some(server) = self.server.take() {
            server.stop().await.unwrap();
        }
    }
}

fn event_reasons(m: &Value) -> Vec<String> {
    m["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["reason"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn the_state_machine_against_a_scripted_backend() {
    let h = Harness::start(&[
        ("happy", "n1", Script::default()),
        (
            "unschedulable",
            "n1",
            Script {
                reserve: ReservationState::Unschedulable {
                    reason: "0/3 nodes are available: 3 Insufficient cpu".into(),
                },
                ..Script::default()
            },
        ),
        (
            "elsewhere",
            "n1",
            Script {
                after: After::Elsewhere("n3"),
                ..Script::default()
            },
        ),
        (
            "guarded",
            "n1",
            Script {
                check: EvictionCheck::Blocked {
                    pdb: "shop/guard".into(),
                    reason: "0 disruptions allowed".into(),
                },
                ..Script::default()
            },
        ),
        ("moved", "n1", Script::default()),
        (
            "stuck",
            "n1",
            Script {
                after: After::Nothing,
                ..Script::default()
            },
        ),
        (
            "double",
            "n1",
            Script {
                reserve: ReservationState::Scheduled { node: "n1".into() },
                ..Script::default()
            },
        ),
    ])
    .await;

    // Happy path: every condition in Koordinator's order, then Complete.
    let happy = h.approve("happy").await;
    let m = h.finished(happy).await;
    assert_eq!(m["phase"], "Succeeded", "{m:#}");
    assert_eq!(m["status"], "Complete");
    assert_eq!(m["mode"], "ReservationFirst");
    assert_eq!(m["sourceNode"], "n1");
    assert_eq!(m["targetNode"], "n2");
    assert_eq!(m["reservation"], format!("rebalancer-pm-{happy}"));
    assert_eq!(m["newPod"]["uid"], "uid-shop-happy-new");
    let reasons = event_reasons(&m);
    let chain = [
        "Created",
        "PassedArbitration",
        "CreatingReservation",
        "ReservationCreated",
        "ReservationScheduled",
        "Evicting",
        "EvictComplete",
        "PodBoundReservation",
        "WaitForBoundPodReady",
        "BoundPodReady",
        "Complete",
    ];
    assert_eq!(reasons, chain, "{m:#}");
    let times: Vec<time::OffsetDateTime> = m["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            time::OffsetDateTime::parse(
                e["time"].as_str().unwrap(),
                &time::format_description::well_known::Rfc3339,
            )
            .unwrap()
        })
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    let decision = h.decision_of("happy").await;
    let (_, d) = h.get(&format!("/api/v1/decisions/{decision}")).await;
    assert_eq!(d["status"], "succeeded", "{d:#}");
    let history: Vec<(&str, &str)> = d["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["to"].as_str().unwrap(), t["actor"].as_str().unwrap()))
        .collect();
    assert_eq!(history.len(), 3, "{d:#}");
    assert_eq!(history[0].0, "approved");
    assert!(!history[0].1.starts_with("system:"), "{d:#}");
    assert_eq!(
        &history[1..],
        [
            ("executing", "system:executor"),
            ("succeeded", "system:executor")
        ]
    );
    assert_eq!(d["history"][0]["comment"], "go");
    assert_eq!(d["podMigration"], happy);

    // An unschedulable reservation fails at once, nothing evicted, the reservation released.
    let unschedulable = h.approve("unschedulable").await;
    let m = h.finished(unschedulable).await;
    assert_eq!(
        (m["phase"].as_str(), m["reason"].as_str()),
        (Some("Failed"), Some("Unschedulable")),
        "{m:#}"
    );
    assert!(
        m["message"]
            .as_str()
            .unwrap()
            .contains("3 Insufficient cpu"),
        "{m:#}"
    );
    assert!(
        !h.fake
            .evictions()
            .contains(&"uid-shop-unschedulable".to_string())
    );
    assert!(
        h.fake
            .released()
            .contains(&format!("rebalancer-pm-{unschedulable}"))
    );
    let (_, d) = h
        .get(&format!(
            "/api/v1/decisions/{}",
            h.decision_of("unschedulable").await
        ))
        .await;
    assert_eq!(d["status"], "failed");

    // A replacement landing elsewhere completes with a note instead of timing out.
    let elsewhere = h.approve("elsewhere").await;
    let m = h.finished(elsewhere).await;
    assert_eq!(
        (m["phase"].as_str(), m["reason"].as_str()),
        (Some("Succeeded"), Some("ReplacementElsewhere")),
        "{m:#}"
    );
    assert!(
        m["message"].as_str().unwrap().contains("landed on node n3"),
        "{m:#}"
    );
    assert_eq!(m["newPod"]["node"], "n3");
    assert!(
        h.fake
            .released()
            .contains(&format!("rebalancer-pm-{elsewhere}"))
    );

    // A reservation on the pod's own node is refused.
    let double = h.approve("double").await;
    let m = h.finished(double).await;
    assert_eq!(m["reason"], "ForbiddenMigratePod", "{m:#}");
    assert!(!h.fake.evictions().contains(&"uid-shop-double".to_string()));

    // PDB without headroom: waits, says so, and reserves nothing until it has headroom.
    let guarded = h.approve("guarded").await;
    let m = h.wait_for(guarded, |m| m["reason"] == "BlockedByPdb").await;
    assert_eq!(m["phase"], "Running");
    assert!(
        m["message"]
            .as_str()
            .unwrap()
            .contains("PodDisruptionBudget shop/guard"),
        "{m:#}"
    );
    assert!(m["reservation"].is_null(), "{m:#}");
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(
        !h.fake
            .reserve_calls()
            .iter()
            .any(|r| r == &format!("rebalancer-pm-{guarded}"))
    );
    h.fake.set_check(
        "uid-shop-guarded",
        EvictionCheck::Allowed {
            pdb: Some("shop/guard".into()),
        },
    );
    let m = h.finished(guarded).await;
    assert_eq!(m["phase"], "Succeeded", "{m:#}");

    // A pod that moved since the proposal: the decision fails as stale, with the reason.
    h.fake.move_pod("uid-shop-moved", "n3");
    let moved = h.approve("moved").await;
    let m = h.finished(moved).await;
    assert_eq!(
        (m["phase"].as_str(), m["reason"].as_str()),
        (Some("Failed"), Some("Stale")),
        "{m:#}"
    );
    let (_, d) = h
        .get(&format!(
            "/api/v1/decisions/{}",
            h.decision_of("moved").await
        ))
        .await;
    assert_eq!(d["status"], "failed");
    assert!(
        d["statusReason"]
            .as_str()
            .unwrap()
            .contains("stale: pod shop/moved is now on node n3"),
        "{d:#}"
    );

    // Abort while waiting for the replacement: Aborted, reservation released, decision failed.
    let stuck = h.approve("stuck").await;
    h.wait_for(stuck, |m| m["reason"] == "WaitForPodBindReservation")
        .await;
    let (status, m) = h
        .post(
            &format!("/api/v1/pod-migrations/{stuck}/abort"),
            json!({"comment": "enough"}),
        )
        .await;
    assert_eq!(status, 200, "{m}");
    assert_eq!(m["phase"], "Aborted");
    assert!(
        m["message"].as_str().unwrap().contains("cannot be undone"),
        "{m:#}"
    );
    assert_eq!(m["reservationReleased"], true);
    assert!(
        h.fake
            .released()
            .contains(&format!("rebalancer-pm-{stuck}"))
    );
    let (status, body) = h
        .post(&format!("/api/v1/pod-migrations/{stuck}/abort"), json!({}))
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["details"]["phase"], "Aborted");
    let (_, d) = h
        .get(&format!(
            "/api/v1/decisions/{}",
            h.decision_of("stuck").await
        ))
        .await;
    assert_eq!(d["status"], "failed");

    // Every pod was evicted at most once.
    let evictions = h.fake.evictions();
    let mut unique = evictions.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), evictions.len(), "{evictions:?}");
    h.stop().await;
}

#[tokio::test]
async fn ttl_and_evict_directly() {
    let h = Harness::start(&[
        (
            "slow",
            "n1",
            Script {
                after: After::Nothing,
                ..Script::default()
            },
        ),
        ("direct", "n1", Script::default()),
    ])
    .await;
    let state = h.server.as_ref().unwrap().state.clone();
    state
        .pod_migrations
        .executor
        .set_config(crate::executor::arbitration::ArbitrationConfig {
            max_migrating_per_node: 0,
            default_job_ttl: "1s".into(),
            ..Default::default()
        });
    let slow = h.approve("slow").await;
    let m = h.finished(slow).await;
    assert_eq!(
        (m["phase"].as_str(), m["reason"].as_str()),
        (Some("Failed"), Some("Timeout")),
        "{m:#}"
    );
    assert!(
        m["message"].as_str().unwrap().contains("had been evicted"),
        "{m:#}"
    );
    assert!(h.fake.released().contains(&format!("rebalancer-pm-{slow}")));

    state
        .pod_migrations
        .executor
        .set_config(crate::executor::arbitration::ArbitrationConfig {
            max_migrating_per_node: 0,
            default_job_mode: crate::executor::arbitration::MigrationMode::EvictDirectly,
            ..Default::default()
        });
    let direct = h.approve("direct").await;
    let m = h.finished(direct).await;
    assert_eq!(m["phase"], "Succeeded", "{m:#}");
    assert_eq!(m["mode"], "EvictDirectly");
    assert!(m["reservation"].is_null());
    assert_eq!(
        event_reasons(&m),
        [
            "Created",
            "PassedArbitration",
            "Evicting",
            "EvictComplete",
            "Complete"
        ]
    );
    h.stop().await;
}
