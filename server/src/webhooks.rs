//! Webhooks: telling portals of changes by signed HTTP POSTs (background task).
//!
//! Owns: which change-feed events become which webhook events ([`announce`]), the delivery
//! body and its signature ([`body`], [`signature`]), which destinations are refused
//! ([`refused_range`], [`check_destination`]; again at every attempt, after DNS resolution,
//! connecting only to the addresses checked), the dispatcher (tails the change feed in order
//! and turns each stretch of it into deliveries, in the transaction that advances its cursor),
//! the sender (claims due deliveries, makes one attempt each with a timeout, records the
//! outcome, and schedules the next attempt with exponential backoff and jitter), and the task
//! that runs both ([`run`]).
//! Must not: hold SQL (`rebalancer_store::webhooks`), or validate API requests (`http`).
//!
//! Delivery is at least once: an attempt whose outcome was not recorded (the process died) is
//! made again once its claim lapses, with the same delivery id; receivers dedupe on it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use tokio::sync::{Notify, watch};

use crate::config::WebhookSettings;
use rebalancer_store::{
    AttemptFailure, ClaimedDelivery, EventKind, EventRecord, FailureOutcome, NewDelivery, Store,
    StoreError, now_ms,
};

/// The events a hook may ask for (besides `*`, every one).
pub const EVENTS: [&str; 8] = [
    RUN_FINISHED,
    DECISIONS_PROPOSED,
    DECISION_APPROVED,
    DECISION_REJECTED,
    DECISION_SUPERSEDED,
    MIGRATION_PHASE,
    CLUSTER_DISCONNECTED,
    CLUSTER_RECONNECTED,
];
pub const RUN_FINISHED: &str = "run.finished";
pub const DECISIONS_PROPOSED: &str = "decisions.proposed";
pub const DECISION_APPROVED: &str = "decision.approved";
pub const DECISION_REJECTED: &str = "decision.rejected";
pub const DECISION_SUPERSEDED: &str = "decision.superseded";
pub const MIGRATION_PHASE: &str = "migration.phase";
pub const CLUSTER_DISCONNECTED: &str = "cluster.disconnected";
pub const CLUSTER_RECONNECTED: &str = "cluster.reconnected";
/// Sent by `POST /api/v1/webhooks/{id}/test` only.
pub const TEST_EVENT: &str = "webhook.test";

/// Change-feed events read at a time.
const DISPATCH_BATCH: u32 = 200;
/// How often the dispatcher reads the feed when nothing woke it (other replicas' events).
const DISPATCH_POLL: Duration = Duration::from_secs(1);
/// Deliveries attempted at once.
const SEND_BATCH: u32 = 16;
/// The longest the sender sleeps without looking for due deliveries (other replicas').
const SEND_POLL: Duration = Duration::from_secs(1);
/// A claimed delivery is due again this long after its attempt's timeout, should its outcome
/// never be recorded (the process died during the attempt).
const CLAIM_MARGIN: Duration = Duration::from_secs(5);

// ---- destinations ----

/// Why a destination is refused, or cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DestinationError {
    /// The host is, or resolves to, an address in a refused range.
    #[error(
        "destination-not-allowed: {host} is {addr}, a {range} address (allowed only with \
         --webhook-allow-private-destinations)"
    )]
    NotAllowed {
        host: String,
        addr: IpAddr,
        range: &'static str,
    },
    #[error("{host} does not resolve: {message}")]
    Unresolvable { host: String, message: String },
}

/// The kind of address `ip` is when webhooks may not deliver to it: loopback, link-local,
/// private (RFC 1918, fc00::/7, and the deprecated fec0::/10), CGNAT (100.64.0.0/10),
/// unspecified (and 0.0.0.0/8), multicast, broadcast and the reserved 240.0.0.0/4. IPv4
/// addresses embedded in IPv6 (mapped, compatible, NAT64 64:ff9b::/96) are judged as IPv4.
pub fn refused_range(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => refused_v4(v4),
        IpAddr::V6(v6) => refused_v6(v6),
    }
}

fn refused_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    Some(match () {
        () if ip.is_unspecified() || a == 0 => "unspecified",
        () if ip.is_loopback() => "loopback",
        () if ip.is_private() => "private",
        () if a == 100 && (b & 0xc0) == 64 => "shared (CGNAT)",
        () if ip.is_link_local() => "link-local",
        () if ip.is_multicast() => "multicast",
        () if ip.is_broadcast() => "broadcast",
        () if a >= 240 => "reserved",
        () => return None,
    })
}

fn refused_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let segments = ip.segments();
    if let Some(v4) = ip.to_ipv4_mapped() {
        return refused_v4(v4);
    }
    // ::a.b.c.d (deprecated "compatible") and 64:ff9b::a.b.c.d (NAT64): the IPv4 inside.
    let embedded = Ipv4Addr::new(
        (segments[6] >> 8) as u8,
        segments[6] as u8,
        (segments[7] >> 8) as u8,
        segments[7] as u8,
    );
    Some(match segments {
        _ if ip.is_unspecified() => "unspecified",
        _ if ip.is_loopback() => "loopback",
        [0, 0, 0, 0, 0, 0, ..] => return refused_v4(embedded),
        [0x64, 0xff9b, 0, 0, 0, 0, ..] => return refused_v4(embedded),
        [s, ..] if (s & 0xfe00) == 0xfc00 => "private (unique local)",
        [s, ..] if (s & 0xffc0) == 0xfe80 => "link-local",
        [s, ..] if (s & 0xffc0) == 0xfec0 => "private (site local)",
        [s, ..] if (s & 0xff00) == 0xff00 => "multicast",
        _ => return None,
    })
}

/// Every address `host` resolves to, each checked unless `allow_private`.
async fn resolve_checked(
    host: &str,
    allow_private: bool,
) -> Result<Vec<SocketAddr>, DestinationError> {
    let unresolvable = |message: String| DestinationError::Unresolvable {
        host: host.to_string(),
        message,
    };
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, 0))
        .await
        .map_err(|e| unresolvable(e.to_string()))?
        .collect();
    if addrs.is_empty() {
        return Err(unresolvable("no address".into()));
    }
    if !allow_private {
        for addr in &addrs {
            if let Some(range) = refused_range(addr.ip()) {
                return Err(DestinationError::NotAllowed {
                    host: host.to_string(),
                    addr: addr.ip(),
                    range,
                });
            }
        }
    }
    Ok(addrs)
}

/// The refusal of a URL whose host is an IP address in a refused range.
fn check_literal(url: &reqwest::Url) -> Result<(), DestinationError> {
    let ip = match url.host() {
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip),
        _ => return Ok(()),
    };
    match refused_range(ip) {
        Some(range) => Err(DestinationError::NotAllowed {
            host: url.host_str().unwrap_or_default().to_string(),
            addr: ip,
            range,
        }),
        None => Ok(()),
    }
}

/// Refuse `url` when its host is, or resolves to, a refused address (nothing is checked
/// when `allow_private`).
pub async fn check_destination(
    url: &reqwest::Url,
    allow_private: bool,
) -> Result<(), DestinationError> {
    if allow_private {
        return Ok(());
    }
    check_literal(url)?;
    if let Some(url::Host::Domain(host)) = url.host() {
        resolve_checked(host, false).await?;
    }
    Ok(())
}

/// A webhook URL as the API accepts it: absolute `http` or `https` with a host, no user
/// or password (the secret authenticates deliveries), no fragment, at most 2048 bytes.
pub fn parse_url(text: &str) -> Result<reqwest::Url, String> {
    if text.len() > 2048 {
        return Err(format!("is {} bytes long (at most 2048)", text.len()));
    }
    let url = reqwest::Url::parse(text).map_err(|e| format!("{text:?} is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "{text:?}: the scheme must be http or https, not {}",
            url.scheme()
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("{text:?} has no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "{text:?} holds credentials: leave them out (receivers authenticate deliveries by \
             their signature)"
        ));
    }
    if url.fragment().is_some() {
        return Err(format!("{text:?} has a fragment (#…), which is never sent"));
    }
    Ok(url)
}

/// Resolves names for the sender, refusing every answer with a refused address: the
/// connection then goes to an address that was checked, whatever DNS answers later.
struct CheckedResolver;

impl reqwest::dns::Resolve for CheckedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs = resolve_checked(&host, false).await?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The HTTP client of deliveries: no proxy from the environment, no redirects (a 3xx is a
/// failed attempt), rustls with the system's roots; with [`CheckedResolver`] unless private
/// destinations are allowed.
pub fn client(settings: &WebhookSettings) -> reqwest::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("rebalancer-webhooks/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(settings.timeout);
    if !settings.allow_private_destinations {
        builder = builder.dns_resolver(Arc::new(CheckedResolver));
    }
    builder.build()
}

// ---- signing and bodies ----

/// `Rebalancer-Signature` of a body sent at `timestamp` (Unix seconds):
/// `v1=` and the lowercase hex HMAC-SHA256 of `"<timestamp>.<body>"` under the hook's secret.
pub fn signature(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    let mut mac =
        Hmac::<sha2::Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// A random (version 4) UUID: a delivery's id.
pub fn delivery_id() -> Result<String, getrandom::Error> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b)?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    ))
}

/// A delivery's body: `{id, event, occurredAt, webhookId, data}`.
pub fn body(id: &str, event: &str, occurred_at: i64, webhook: i64, data: &Value) -> String {
    json!({
        "id": id,
        "event": event,
        "occurredAt": crate::http::timestamp(occurred_at),
        "webhookId": webhook,
        "data": data,
    })
    .to_string()
}

// ---- which events ----

/// What a change-feed event tells the hooks: the webhook event and its data.
#[derive(Debug, Clone, PartialEq)]
pub struct Announcement {
    pub event: &'static str,
    pub data: Value,
}

/// The webhook event of a change-feed event, if any, with its data — except the pods of
/// `decisions.proposed`, which [`announce`] adds. Runs that start, decisions that expire or
/// execute, steps within a phase, new revisions and first connections announce nothing.
pub fn classify(event: &EventRecord) -> Option<Announcement> {
    let d = &event.data;
    let str_of = |key: &str| d[key].as_str().unwrap_or_default();
    let (name, data) = match event.kind {
        EventKind::Run => match str_of("status") {
            "succeeded" | "failed" => (
                RUN_FINISHED,
                json!({
                    "run": d["id"], "cluster": d["cluster"], "profile": d["profile"],
                    "status": d["status"],
                }),
            ),
            _ => return None,
        },
        EventKind::Decisions => {
            let name = match str_of("status") {
                "proposed" => DECISIONS_PROPOSED,
                "approved" => DECISION_APPROVED,
                "rejected" => DECISION_REJECTED,
                "superseded" => DECISION_SUPERSEDED,
                _ => return None,
            };
            let mut data = json!({ "cluster": d["cluster"], "ids": d["ids"] });
            if name == DECISIONS_PROPOSED || name == DECISION_SUPERSEDED {
                data["run"] = d["run"].clone();
                data["profile"] = d["profile"].clone();
                data["dryRun"] = d["dryRun"].clone();
            }
            if name == DECISIONS_PROPOSED {
                data["count"] = json!(d["ids"].as_array().map_or(0, Vec::len));
            }
            (name, data)
        }
        EventKind::Migration => {
            if d["from"].is_null() || d["from"] == d["phase"] {
                return None;
            }
            (
                MIGRATION_PHASE,
                json!({
                    "id": d["id"], "decision": d["decision"], "cluster": d["cluster"],
                    "phase": d["phase"], "from": d["from"], "step": d["step"],
                }),
            )
        }
        EventKind::Cluster => match (str_of("connection"), str_of("previous")) {
            ("disconnected", previous) if previous != "disconnected" => (
                CLUSTER_DISCONNECTED,
                json!({ "cluster": d["name"], "message": d["message"] }),
            ),
            ("synced", "disconnected") => (CLUSTER_RECONNECTED, json!({ "cluster": d["name"] })),
            _ => return None,
        },
    };
    Some(Announcement { event: name, data })
}

/// [`classify`], with the pods of a `decisions.proposed` (`decisions: [{id, namespace, name,
/// node}]`, read now; a decision already deleted is left out).
pub async fn announce(
    store: &Store,
    event: &EventRecord,
) -> Result<Option<Announcement>, StoreError> {
    let Some(mut announcement) = classify(event) else {
        return Ok(None);
    };
    if announcement.event == DECISIONS_PROPOSED {
        let ids: Vec<i64> = announcement.data["ids"]
            .as_array()
            .map(|ids| ids.iter().filter_map(Value::as_i64).collect())
            .unwrap_or_default();
        let pods = store.decision_pods(&ids).await?;
        announcement.data["decisions"] = pods
            .into_iter()
            .map(|(id, namespace, name, node)| {
                json!({ "id": id, "namespace": namespace, "name": name, "node": node })
            })
            .collect();
        if let Some(data) = announcement.data.as_object_mut() {
            data.remove("ids");
        }
    }
    Ok(Some(announcement))
}

// ---- the task ----

/// What the webhook task uses.
#[derive(Clone)]
pub struct Deps {
    pub store: Store,
    pub settings: WebhookSettings,
    /// Poked when deliveries became due (new ones, a test, a hook enabled again).
    pub wake: Arc<Notify>,
    pub client: reqwest::Client,
}

/// Dispatch and send until `stop` turns true. Attempts under way then are abandoned and due
/// again at once (the next start makes them, with the same delivery id).
pub async fn run(deps: Deps, stop: watch::Receiver<bool>) {
    tokio::join!(dispatch(&deps, stop.clone()), send_due(&deps, stop));
}

async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

async fn dispatch(deps: &Deps, mut stop: watch::Receiver<bool>) {
    let mut changes = deps.store.subscribe_events();
    loop {
        if *stop.borrow() {
            return;
        }
        match dispatch_once(deps).await {
            Ok(true) => continue,
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(error = %e, "webhooks: reading the change feed failed; trying again")
            }
        }
        tokio::select! {
            _ = changes.changed() => {}
            () = tokio::time::sleep(DISPATCH_POLL) => {}
            () = stopped(&mut stop) => return,
        }
    }
}

/// Turn the next stretch of the change feed into deliveries. `true` when more may follow at
/// once.
pub async fn dispatch_once(deps: &Deps) -> Result<bool, StoreError> {
    let from = deps.store.webhook_cursor().await?;
    let events = deps.store.events_after(from, DISPATCH_BATCH).await?;
    let Some(to) = events.last().map(|e| e.id) else {
        return Ok(false);
    };
    let hooks: Vec<_> = deps
        .store
        .list_webhooks()
        .await?
        .into_iter()
        .filter(|h| h.enabled)
        .collect();
    let mut deliveries = Vec::new();
    for event in &events {
        let Some(name) = classify(event).map(|a| a.event) else {
            continue;
        };
        // A hook hears of changes made after it was created.
        let listening: Vec<_> = hooks
            .iter()
            .filter(|h| h.created_at <= event.time && h.wants(name))
            .collect();
        if listening.is_empty() {
            continue;
        }
        let Some(announcement) = announce(&deps.store, event).await? else {
            continue;
        };
        for hook in listening {
            let id = delivery_id().map_err(|e| StoreError::corrupt("a delivery id", e))?;
            let body = body(&id, name, event.time, hook.id, &announcement.data);
            deliveries.push(NewDelivery {
                id,
                webhook_id: hook.id,
                event: name.to_string(),
                body,
            });
        }
    }
    let moved = deps
        .store
        .dispatch_webhook_events(from, to, &deliveries)
        .await?;
    if moved && !deliveries.is_empty() {
        tracing::debug!(
            deliveries = deliveries.len(),
            up_to = to,
            "webhooks: dispatched"
        );
        deps.wake.notify_one();
    }
    Ok(!moved || events.len() == DISPATCH_BATCH as usize)
}

async fn send_due(deps: &Deps, mut stop: watch::Receiver<bool>) {
    let claim_for = deps.settings.timeout + CLAIM_MARGIN;
    loop {
        if *stop.borrow() {
            return;
        }
        let now = now_ms();
        match deps
            .store
            .claim_webhook_deliveries(now, now + millis(claim_for), SEND_BATCH)
            .await
        {
            Ok(claimed) if !claimed.is_empty() => {
                let attempts = futures::future::join_all(claimed.iter().map(|c| attempt(deps, c)));
                tokio::select! {
                    _ = attempts => continue,
                    () = stopped(&mut stop) => {
                        release(deps, &claimed).await;
                        return;
                    }
                }
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "webhooks: claiming due deliveries failed"),
        }
        let wait = match deps.store.next_webhook_delivery_due().await {
            Ok(Some(at)) => Duration::from_millis(u64::try_from(at - now_ms()).unwrap_or(0))
                .clamp(Duration::from_millis(10), SEND_POLL),
            _ => SEND_POLL,
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = deps.wake.notified() => {}
            () = stopped(&mut stop) => return,
        }
    }
}

/// Make claimed deliveries whose attempt was abandoned at shutdown due again now.
async fn release(deps: &Deps, claimed: &[ClaimedDelivery]) {
    for c in claimed {
        let d = &c.delivery;
        if let Err(e) = deps.store.release_webhook_delivery(&d.id, d.attempts).await {
            tracing::warn!(delivery = %d.id, error = %e, "webhooks: could not release a delivery at shutdown; it is due again after its claim lapses");
        }
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// How an attempt ended.
#[derive(Debug)]
pub enum Sent {
    /// The receiver answered with this status.
    Answered(u16),
    /// The destination is refused: not attempted again.
    Refused(DestinationError),
    /// No answer (connection, TLS, timeout): why.
    Failed(String),
}

/// POST `body` to `url`, signed with `secret` at this second.
pub async fn send(
    client: &reqwest::Client,
    settings: &WebhookSettings,
    url: &str,
    secret: &str,
    delivery: (&str, &str),
    body: &str,
) -> Sent {
    let (id, event) = delivery;
    let url = match reqwest::Url::parse(url) {
        Ok(url) => url,
        Err(e) => return Sent::Failed(format!("the stored URL does not parse: {e}")),
    };
    if !settings.allow_private_destinations
        && let Err(refused) = check_literal(&url)
    {
        return Sent::Refused(refused);
    }
    let timestamp = now_ms() / 1000;
    let request = client
        .post(url)
        .timeout(settings.timeout)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header("Rebalancer-Delivery", id)
        .header("Rebalancer-Event", event)
        .header("Rebalancer-Timestamp", timestamp.to_string())
        .header(
            "Rebalancer-Signature",
            signature(secret.as_bytes(), timestamp, body.as_bytes()),
        )
        .body(body.to_string());
    match request.send().await {
        Ok(response) => Sent::Answered(response.status().as_u16()),
        Err(e) => {
            let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
            let mut causes = Vec::new();
            while let Some(err) = source {
                if let Some(refused) = err.downcast_ref::<DestinationError>() {
                    return Sent::Refused(refused.clone());
                }
                causes.push(err.to_string());
                source = err.source();
            }
            if e.is_timeout() {
                Sent::Failed(format!("no answer within {:?}", settings.timeout))
            } else {
                causes.dedup();
                Sent::Failed(causes.join(": "))
            }
        }
    }
}

/// The wait after failed attempt number `attempts` (1 for the first): `retry_base` doubled
/// for each earlier failed attempt, at most `retry_max`, less `jitter` (0 to 1) of its half.
pub fn backoff(settings: &WebhookSettings, attempts: i64, jitter: f64) -> Duration {
    let doublings = u32::try_from((attempts - 1).clamp(0, 62)).unwrap_or(0);
    let full = settings
        .retry_base
        .checked_mul(1u32.checked_shl(doublings.min(31)).unwrap_or(u32::MAX))
        .unwrap_or(settings.retry_max)
        .min(settings.retry_max);
    full - full.mul_f64(jitter.clamp(0.0, 1.0) / 2.0)
}

/// A random number from 0 to 1, for jitter (0 when the system has no randomness to give).
fn random_unit() -> f64 {
    let mut b = [0u8; 4];
    match getrandom::fill(&mut b) {
        Ok(()) => f64::from(u32::from_le_bytes(b)) / f64::from(u32::MAX),
        Err(_) => 0.0,
    }
}

/// One attempt of a claimed delivery, and its outcome recorded.
async fn attempt(deps: &Deps, claimed: &ClaimedDelivery) {
    let d = &claimed.delivery;
    let sent = send(
        &deps.client,
        &deps.settings,
        &claimed.url,
        &claimed.secret,
        (&d.id, &d.event),
        &d.body,
    )
    .await;
    let (response_status, error, retry) = match sent {
        Sent::Answered(status) if (200..300).contains(&status) => {
            match deps
                .store
                .webhook_delivered(&d.id, d.attempts, status)
                .await
            {
                Ok(_) => {
                    tracing::debug!(delivery = %d.id, webhook = d.webhook_id, status, "webhooks: delivered")
                }
                Err(e) => {
                    tracing::warn!(delivery = %d.id, error = %e, "webhooks: a delivery arrived but could not be recorded; it will be sent again")
                }
            }
            return;
        }
        Sent::Answered(status) => (
            Some(status),
            format!("the receiver answered HTTP {status}"),
            true,
        ),
        Sent::Refused(refused) => (None, refused.to_string(), false),
        Sent::Failed(why) => (None, why, true),
    };
    let retry_at = (retry && d.attempts < i64::from(deps.settings.max_attempts))
        .then(|| now_ms() + millis(backoff(&deps.settings, d.attempts, random_unit())));
    let failure = AttemptFailure {
        response_status,
        error: &error,
        retry_at,
    };
    match deps
        .store
        .webhook_attempt_failed(&d.id, d.attempts, &failure, deps.settings.disable_after)
        .await
    {
        Ok(FailureOutcome::Failed { failures, disabled }) => {
            tracing::warn!(delivery = %d.id, webhook = d.webhook_id, attempts = d.attempts, error = %error, "webhooks: a delivery failed for good");
            if disabled {
                tracing::warn!(
                    webhook = d.webhook_id,
                    failures,
                    "webhooks: hook disabled after failed deliveries in a row"
                );
            }
        }
        Ok(FailureOutcome::Retrying) => {
            tracing::info!(delivery = %d.id, webhook = d.webhook_id, attempts = d.attempts, error = %error, "webhooks: attempt failed; retrying later")
        }
        Ok(FailureOutcome::Stale) => {}
        Err(e) => {
            tracing::warn!(delivery = %d.id, error = %e, "webhooks: could not record a failed attempt; it is attempted again after its claim lapses")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> Option<&'static str> {
        refused_range(text.parse().unwrap())
    }

    #[test]
    fn private_loopback_link_local_cgnat_unspecified_and_multicast_are_refused() {
        for (ip, range) in [
            ("127.0.0.1", "loopback"),
            ("127.255.0.9", "loopback"),
            ("10.1.2.3", "private"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.168.1.1", "private"),
            ("169.254.169.254", "link-local"),
            ("100.64.0.1", "shared (CGNAT)"),
            ("100.127.255.255", "shared (CGNAT)"),
            ("0.0.0.0", "unspecified"),
            ("0.1.2.3", "unspecified"),
            ("224.0.0.1", "multicast"),
            ("239.255.255.250", "multicast"),
            ("255.255.255.255", "broadcast"),
            ("240.0.0.1", "reserved"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("fc00::1", "private (unique local)"),
            ("fd12:3456::1", "private (unique local)"),
            ("fe80::1", "link-local"),
            ("febf::1", "link-local"),
            ("fec0::1", "private (site local)"),
            ("ff02::1", "multicast"),
            // IPv4 inside IPv6 is judged as IPv4.
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:10.0.0.1", "private"),
            ("::ffff:169.254.169.254", "link-local"),
            ("::10.0.0.1", "private"),
            ("64:ff9b::192.168.0.1", "private"),
        ] {
            assert_eq!(refused(ip), Some(range), "{ip}");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "100.63.255.255",
            "100.128.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "192.169.0.1",
            "169.255.0.1",
            "223.255.255.255",
            "2001:4860:4860::8888",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::8.8.8.8",
            "fbff::1",
        ] {
            assert_eq!(refused(ip), None, "{ip}");
        }
    }

    #[test]
    fn the_signature_is_hmac_sha256_of_timestamp_dot_body() {
        // Python: hmac.new(b"0123456789abcdef", b'1700000000.{"a":1}', hashlib.sha256).hexdigest()
        let a = signature(b"0123456789abcdef", 1_700_000_000, b"{\"a\":1}");
        assert_eq!(
            a,
            "v1=9eb18f493f8ec135d9eb2dad817c369bb4e9cbfa818657897a7437c1cd8c3a23"
        );
        // The timestamp, the secret and the body each change it.
        assert_ne!(
            a,
            signature(b"0123456789abcdef", 1_700_000_001, b"{\"a\":1}")
        );
        assert_ne!(
            a,
            signature(b"0123456789abcdeF", 1_700_000_000, b"{\"a\":1}")
        );
        assert_ne!(
            a,
            signature(b"0123456789abcdef", 1_700_000_000, b"{\"a\":2}")
        );
    }

    #[test]
    fn delivery_ids_are_version_4_uuids() {
        let id = delivery_id().unwrap();
        let parts: Vec<&str> = id.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('4'), "{id}");
        assert!(matches!(&parts[3][..1], "8" | "9" | "a" | "b"), "{id}");
        assert_ne!(id, delivery_id().unwrap());
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_less_jitter() {
        let settings = WebhookSettings {
            retry_base: Duration::from_secs(1),
            retry_max: Duration::from_secs(60),
            ..WebhookSettings::default()
        };
        let waits: Vec<u64> = (1..=8)
            .map(|n| backoff(&settings, n, 0.0).as_secs())
            .collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(backoff(&settings, 3, 1.0), Duration::from_secs(2));
        assert_eq!(backoff(&settings, 1000, 0.0), Duration::from_secs(60));
    }

    #[test]
    fn urls_must_be_http_with_a_host_and_no_credentials() {
        assert!(parse_url("https://portal.example.com/hooks?x=1").is_ok());
        assert!(parse_url("http://[::1]:8080/").is_ok());
        for (bad, says) in [
            ("portal.example.com/hook", "is not a URL"),
            ("ftp://portal.example.com/", "scheme must be http or https"),
            ("https://user:pw@portal.example.com/", "credentials"),
            ("https://portal.example.com/#top", "fragment"),
        ] {
            let err = parse_url(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[tokio::test]
    async fn destinations_are_checked_after_resolution() {
        let url = parse_url("http://localhost:9/").unwrap();
        let err = check_destination(&url, false).await.unwrap_err();
        assert!(
            matches!(
                err,
                DestinationError::NotAllowed {
                    range: "loopback",
                    ..
                }
            ),
            "{err}"
        );
        assert!(
            err.to_string()
                .starts_with("destination-not-allowed: localhost is ")
        );
        assert!(check_destination(&url, true).await.is_ok());
        let literal = parse_url("http://[::ffff:10.0.0.1]/").unwrap();
        assert!(matches!(
            check_destination(&literal, false).await,
            Err(DestinationError::NotAllowed {
                range: "private",
                ..
            })
        ));
        // Numeric forms are IP addresses too (WHATWG URL parsing): 2130706433 is 127.0.0.1.
        let numeric = parse_url("http://2130706433/").unwrap();
        assert!(check_destination(&numeric, false).await.is_err());
    }

    /// The sender connects through the checked resolver: a name that resolves to loopback is
    /// refused at delivery time too, with the reason, and nothing is sent.
    #[tokio::test]
    async fn the_sender_refuses_a_name_that_resolves_to_a_refused_address() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let settings = WebhookSettings::default();
        let client = client(&settings).unwrap();
        let sent = send(
            &client,
            &settings,
            &format!("http://localhost:{port}/hook"),
            "0123456789abcdef",
            ("id", TEST_EVENT),
            "{}",
        )
        .await;
        match sent {
            Sent::Refused(DestinationError::NotAllowed { host, range, .. }) => {
                assert_eq!((host.as_str(), range), ("localhost", "loopback"));
            }
            other => panic!("{other:?}"),
        }
        let literal = send(
            &client,
            &settings,
            &format!("http://127.0.0.1:{port}/hook"),
            "0123456789abcdef",
            ("id", TEST_EVENT),
            "{}",
        )
        .await;
        assert!(matches!(literal, Sent::Refused(_)), "{literal:?}");
        // Nothing connected.
        let accepted = tokio::time::timeout(Duration::from_millis(100), listener.accept()).await;
        assert!(accepted.is_err(), "a refused destination was connected to");
    }

    fn event(kind: EventKind, data: Value) -> EventRecord {
        EventRecord {
            id: 1,
            time: 0,
            kind,
            cluster: None,
            data,
        }
    }

    #[test]
    fn feed_events_map_to_webhook_events() {
        let name = |kind, data| classify(&event(kind, data)).map(|a| a.event);
        assert_eq!(
            name(EventKind::Run, json!({"id": 1, "status": "running"})),
            None
        );
        assert_eq!(
            name(EventKind::Run, json!({"id": 1, "status": "failed"})),
            Some(RUN_FINISHED)
        );
        for (status, expected) in [
            ("proposed", Some(DECISIONS_PROPOSED)),
            ("approved", Some(DECISION_APPROVED)),
            ("rejected", Some(DECISION_REJECTED)),
            ("superseded", Some(DECISION_SUPERSEDED)),
            ("expired", None),
            ("executing", None),
        ] {
            assert_eq!(
                name(
                    EventKind::Decisions,
                    json!({"ids": [1], "cluster": "c", "status": status})
                ),
                expected,
                "{status}"
            );
        }
        let step = json!({"id": 3, "decision": 1, "phase": "Running", "from": "Running"});
        assert_eq!(name(EventKind::Migration, step), None);
        let phase = json!({"id": 3, "decision": 1, "phase": "Succeeded", "from": "Running"});
        assert_eq!(name(EventKind::Migration, phase), Some(MIGRATION_PHASE));
        let cluster = |connection: &str, previous: Value| {
            name(
                EventKind::Cluster,
                json!({"name": "east", "connection": connection, "previous": previous}),
            )
        };
        assert_eq!(cluster("synced", Value::Null), None);
        assert_eq!(cluster("synced", json!("connecting")), None);
        assert_eq!(
            cluster("disconnected", json!("synced")),
            Some(CLUSTER_DISCONNECTED)
        );
        // A new reason while still disconnected is not a second loss.
        assert_eq!(cluster("disconnected", json!("disconnected")), None);
        assert_eq!(
            cluster("synced", json!("disconnected")),
            Some(CLUSTER_RECONNECTED)
        );
        assert_eq!(
            name(EventKind::Cluster, json!({"name": "east", "revision": 4})),
            None
        );
    }
}
