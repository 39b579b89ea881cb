//! Live and identity: `GET /api/v1/whoami` per role, the event stream (`GET /api/v1/events`:
//! what a run and an approval announce, resuming with `Last-Event-ID`, `reset` when the feed no
//! longer holds what followed, the end of the stream at shutdown), and the retention settings
//! (`GET`/`PUT /api/v1/retention`).

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::approval::proposals;
use crate::support::{ADMIN_TOKEN, TestServer, assert_error, client_with_token};

/// One server-sent event.
#[derive(Debug, Clone)]
struct SseEvent {
    id: Option<i64>,
    event: String,
    data: Value,
}

/// An open event stream, read frame by frame.
struct Stream {
    response: reqwest::Response,
    buffer: String,
}

impl Stream {
    /// Open the stream with `token`, resuming after `last_event_id` (header) when given.
    async fn open(server: &TestServer, token: &str, last_event_id: Option<&str>) -> Stream {
        let mut request = client_with_token(token).get(server.url("/api/v1/events"));
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id);
        }
        Stream::from(request).await
    }

    async fn from(request: reqwest::RequestBuilder) -> Stream {
        let response = tokio::time::timeout(Duration::from_secs(10), request.send())
            .await
            .expect("the stream's headers within 10 s")
            .expect("the request is sent");
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            response.headers()["content-type"].to_str().unwrap(),
            "text/event-stream"
        );
        Stream {
            response,
            buffer: String::new(),
        }
    }

    /// The next event (comments skipped), `None` when none came within `within` or the stream
    /// ended.
    async fn next(&mut self, within: Duration) -> Option<SseEvent> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let frame: String = self.buffer.drain(..end + 2).collect();
                if let Some(event) = parse(&frame) {
                    return Some(event);
                }
            }
            let chunk = tokio::time::timeout_at(deadline, self.response.chunk())
                .await
                .ok()?
                .expect("the stream reads");
            self.buffer
                .push_str(std::str::from_utf8(&chunk?).expect("UTF-8"));
        }
    }

    /// Events until one matches `wanted` (included), failing after `within`.
    async fn until(
        &mut self,
        within: Duration,
        wanted: impl Fn(&SseEvent) -> bool,
    ) -> Vec<SseEvent> {
        let deadline = tokio::time::Instant::now() + within;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let Some(event) = self.next(left).await else {
                panic!("no matching event within {within:?}; seen: {seen:#?}");
            };
            let done = wanted(&event);
            seen.push(event);
            if done {
                return seen;
            }
        }
    }
}

/// A frame's event; `None` for a comment-only frame (the keep-alive).
fn parse(frame: &str) -> Option<SseEvent> {
    let (mut id, mut event, mut data) = (None, None, String::new());
    for line in frame.lines() {
        if let Some(v) = line.strip_prefix("id:") {
            id = Some(v.trim().parse().expect("an integer id"));
        } else if let Some(v) = line.strip_prefix("event:") {
            event = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("data:") {
            data.push_str(v.trim_start());
        }
    }
    Some(SseEvent {
        id,
        event: event?,
        data: serde_json::from_str(&data).expect("JSON data"),
    })
}

#[tokio::test]
async fn whoami_names_the_token_its_role_and_what_it_may_do() {
    let server = TestServer::start().await;
    let cases = [
        ("viewer", [true, false, false, false, false]),
        ("approver", [true, true, false, true, false]),
        ("operator", [true, false, true, false, false]),
    ];
    for (role, can) in cases {
        let token = server.create_token(&format!("who-{role}"), role).await;
        let (status, me) = server
            .call(Some(&token), Method::GET, "/api/v1/whoami", None)
            .await;
        assert_eq!(status, StatusCode::OK, "{me:#}");
        assert_eq!(me["name"], format!("who-{role}"));
        assert_eq!(me["role"], role);
        assert_eq!(me["clusters"], Value::Null);
        assert_eq!(me["expiresAt"], Value::Null);
        let flags: Vec<bool> = ["read", "approve", "run", "abort", "admin"]
            .iter()
            .map(|k| me["can"][k].as_bool().expect("a boolean"))
            .collect();
        assert_eq!(flags, can, "{role}: {me:#}");
    }
    let (status, me) = server.get("/api/v1/whoami").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(me["role"], "admin");
    assert_eq!(
        me["can"],
        json!({"read": true, "approve": true, "run": true, "abort": true, "admin": true})
    );

    // An expiring token says when.
    let (status, created) = server
        .post_json(
            "/api/v1/tokens",
            &json!({"name": "who-expiring", "role": "viewer", "expiresIn": 3600}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created:#}");
    let token = created["token"].as_str().unwrap();
    let (_, me) = server
        .call(Some(token), Method::GET, "/api/v1/whoami", None)
        .await;
    assert_eq!(me["expiresAt"], created["expiresAt"], "{me:#}");
    assert!(me["expiresAt"].is_string(), "{me:#}");

    let (status, body) = server.call(None, Method::GET, "/api/v1/whoami", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_error(&body, "missing_token");
}

#[tokio::test]
async fn the_stream_announces_a_run_its_decisions_and_their_pod_migrations() {
    let server = TestServer::start().await;
    let viewer = server.create_token("live-viewer", "viewer").await;
    let mut stream = Stream::open(&server, &viewer, None).await;

    let (run, decisions) = proposals(&server).await;
    let seen = stream
        .until(Duration::from_secs(20), |e| {
            e.event == "run" && e.data["id"] == run && e.data["status"] == "succeeded"
        })
        .await;
    assert!(
        seen.iter()
            .any(|e| e.event == "cluster" && e.data["name"] == "east"),
        "the push announces the cluster's revision: {seen:#?}"
    );
    let started = seen
        .iter()
        .find(|e| e.event == "run" && e.data["status"] == "running")
        .unwrap_or_else(|| panic!("the run's start: {seen:#?}"));
    assert_eq!(started.data["id"], run);
    assert_eq!(started.data["cluster"], "east");
    assert_eq!(started.data["profile"], "lifetime");
    // The run's proposals are one event with every id.
    let proposed: Vec<&SseEvent> = seen
        .iter()
        .filter(|e| e.event == "decisions" && e.data["status"] == "proposed")
        .collect();
    assert_eq!(proposed.len(), 1, "{seen:#?}");
    let mut ids: Vec<i64> = decisions
        .iter()
        .map(|d| d["id"].as_i64().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(proposed[0].data["ids"], json!(ids));
    assert_eq!(proposed[0].data["cluster"], "east");
    // Ids only grow.
    let ids_seen: Vec<i64> = seen.iter().map(|e| e.id.expect("an id")).collect();
    assert!(ids_seen.windows(2).all(|w| w[0] < w[1]), "{ids_seen:?}");

    // A bulk approval is one event; its pod migrations announce their steps.
    let (status, approved) = server
        .post_json("/api/v1/decisions/approve", &json!({"run": run}))
        .await;
    assert_eq!(status, StatusCode::OK, "{approved:#}");
    let seen = stream
        .until(Duration::from_secs(30), |e| e.event == "migration")
        .await;
    let approvals: Vec<&SseEvent> = seen
        .iter()
        .filter(|e| e.event == "decisions" && e.data["status"] == "approved")
        .collect();
    assert_eq!(approvals.len(), 1, "{seen:#?}");
    assert_eq!(approvals[0].data["ids"], json!(ids));
    let migration = seen.last().unwrap();
    assert!(
        ids.contains(&migration.data["decision"].as_i64().unwrap()),
        "{migration:#?}"
    );
    assert_eq!(migration.data["cluster"], "east");
    assert!(migration.data["id"].is_i64(), "{migration:#?}");
    assert!(migration.data["step"].is_string(), "{migration:#?}");
}

#[tokio::test]
async fn a_resumed_stream_sends_only_later_events_and_a_reset_when_they_are_gone() {
    let server = TestServer::start().await;
    proposals(&server).await;
    let store = server.state().store.clone();
    let all = store.events_after(0, 1000).await.unwrap();
    assert!(all.len() >= 4, "{all:#?}");
    let middle = all[all.len() / 2].id;

    // Header and query parameter alike.
    let mut stream = Stream::open(&server, ADMIN_TOKEN, Some(&middle.to_string())).await;
    let first = stream.next(Duration::from_secs(5)).await.expect("an event");
    assert_eq!(first.id, Some(middle + 1), "{first:#?}");
    let request = server
        .client
        .get(server.url(&format!("/api/v1/events?lastEventId={middle}")));
    let mut stream = Stream::from(request).await;
    let first = stream.next(Duration::from_secs(5)).await.expect("an event");
    assert_eq!(first.id, Some(middle + 1), "{first:#?}");

    // Up to date: nothing until something happens.
    let last = all.last().unwrap().id;
    let mut stream = Stream::open(&server, ADMIN_TOKEN, Some(&last.to_string())).await;
    assert!(stream.next(Duration::from_millis(500)).await.is_none());

    // Retention took what followed `middle`'s predecessor: a reset, then the stream goes on
    // from the newest id.
    store.prune_events(None, Some(1), 1000).await.unwrap();
    for resume in ["1", "999999"] {
        let mut stream = Stream::open(&server, ADMIN_TOKEN, Some(resume)).await;
        let reset = stream.next(Duration::from_secs(5)).await.expect("a reset");
        assert_eq!(reset.event, "reset", "{reset:#?}");
        assert_eq!(reset.data, json!({}));
        assert_eq!(reset.id, Some(last), "resume from {resume}");
    }
    let mut stream = Stream::open(&server, ADMIN_TOKEN, Some(&last.to_string())).await;
    let (status, _) = server.delete("/api/v1/clusters/east").await;
    assert_eq!(status, StatusCode::OK);
    let next = stream.next(Duration::from_secs(5)).await.expect("an event");
    assert_eq!(
        (next.event.as_str(), next.id),
        ("decisions", Some(last + 1))
    );
    let next = stream.next(Duration::from_secs(5)).await.expect("an event");
    assert_eq!(next.event, "cluster");
    assert_eq!(next.data, json!({"name": "east", "deleted": true}));

    // A bad query parameter is refused even when the header wins.
    let response = server
        .client
        .get(server.url("/api/v1/events?lastEventId=-1"))
        .header("Last-Event-ID", "0")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    for bad in ["-1", "abc", "1.5", "null"] {
        let response = server
            .client
            .get(server.url("/api/v1/events"))
            .header("Last-Event-ID", bad)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{bad}");
        let body: Value = response.json().await.unwrap();
        assert_error(&body, "invalid_last_event_id");
    }
}

#[tokio::test]
async fn streams_end_when_the_server_stops() {
    let mut server = TestServer::start().await;
    let mut stream = Stream::open(&server, ADMIN_TOKEN, None).await;
    // Bounded by TestServer::stop: a stream that kept the shutdown waiting fails the test.
    server.stop().await;
    assert!(stream.next(Duration::from_secs(5)).await.is_none());
}

#[tokio::test]
async fn retention_settings_are_read_by_any_role_and_overridden_by_admins() {
    let server = TestServer::start().await;
    let viewer = server.create_token("retention-viewer", "viewer").await;
    let (status, view) = server
        .call(Some(&viewer), Method::GET, "/api/v1/retention", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{view:#}");
    let defaults = json!({"proposals": "1d", "dryRuns": "6h", "history": "90d", "runs": "30d",
                          "audit": "365d", "interval": "10m"});
    assert_eq!(view["defaults"], defaults);
    assert_eq!(view["effective"], defaults);
    assert_eq!(view["overrides"], json!({}));
    assert_eq!(view["updatedAt"], Value::Null);
    assert_eq!(view["events"], json!({"keep": "1d", "maxEvents": 100000}));

    let (status, body) = server
        .call(
            Some(&viewer),
            Method::PUT,
            "/api/v1/retention",
            Some(&json!({"runs": "7d"})),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_error(&body, "forbidden");

    // Every bad field is named; nothing is stored.
    let (status, body) = server
        .put_json(
            "/api/v1/retention",
            &json!({"runs": "7d", "audit": "2h", "interval": "0s", "history": "soon"}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body:#}");
    let message = assert_error(&body, "invalid_retention");
    let fields: Vec<&str> = body["details"]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["history", "audit", "interval"], "{body:#}");
    assert!(message.contains("shorter than a day"), "{message}");
    let (status, body) = server
        .put_json("/api/v1/retention", &json!({"keepForever": true}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body:#}");
    let (_, view) = server.get("/api/v1/retention").await;
    assert_eq!(view["overrides"], json!({}));

    let (status, view) = server
        .put_json("/api/v1/retention", &json!({"runs": "7d", "audit": "0"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{view:#}");
    assert_eq!(view["overrides"], json!({"runs": "7d", "audit": "0"}));
    assert_eq!(view["effective"]["runs"], "7d");
    assert_eq!(view["effective"]["audit"], "0");
    assert_eq!(view["effective"]["history"], "90d");
    assert_eq!(view["defaults"], defaults);
    assert!(view["updatedAt"].is_string());
    let (_, audit) = server.get("/api/v1/audit?action=retention.put").await;
    assert_eq!(
        audit["items"][0]["detail"],
        json!({"runs": "7d", "audit": "0"})
    );

    // A PUT replaces the overrides: left out, a field follows its flag again.
    let (status, view) = server.put_json("/api/v1/retention", &json!({})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(view["effective"], defaults);
}

#[tokio::test]
async fn a_pass_records_what_it_did_and_prunes_old_events() {
    let server = TestServer::start_with(|s| {
        s.demo = false;
        s.retention.interval = Duration::from_millis(200);
    })
    .await;
    let store = server.state().store.clone();
    // An event older than the feed keeps.
    sqlx::query(
        "INSERT INTO events (time, type, cluster, data) VALUES (1, 'cluster', 'old', '{}')",
    )
    .execute(store.pool())
    .await
    .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM events WHERE cluster = 'old'")
            .fetch_one(store.pool())
            .await
            .unwrap();
        if left == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no pass pruned the old event"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, view) = server.get("/api/v1/retention").await;
    let pass = &view["lastPass"];
    assert_eq!(pass["error"], Value::Null, "{view:#}");
    assert!(pass["finishedAt"].is_string(), "{view:#}");
    assert!(pass["pruned"]["events"].is_u64(), "{view:#}");
    assert!(pass["pruned"]["decisions"].is_u64(), "{view:#}");
}

#[tokio::test]
async fn a_kubernetes_cluster_s_connection_changes_are_announced() {
    use crate::kube::{EAST, cluster, managing};
    let cluster = cluster(&[]).await;
    let server = TestServer::start_with(managing(&cluster, "server-a")).await;
    // From the first event on: the first sync may have been announced before the stream opened.
    let mut stream = Stream::open(&server, ADMIN_TOKEN, Some("0")).await;
    let connection = |state: &'static str| {
        move |e: &SseEvent| {
            e.event == "cluster" && e.data["name"] == EAST && e.data["connection"] == state
        }
    };
    stream
        .until(Duration::from_secs(30), connection("synced"))
        .await;
    cluster.fake.set_down(true);
    let seen = stream
        .until(Duration::from_secs(30), connection("disconnected"))
        .await;
    let lost = seen.last().unwrap();
    assert!(lost.data["message"].is_string(), "{lost:#?}");
    cluster.fake.set_down(false);
    stream
        .until(Duration::from_secs(30), connection("synced"))
        .await;
}
