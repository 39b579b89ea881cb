//! The object store: per resource type, the current objects keyed by (namespace, name), the
//! watch history and the open watches; one global resourceVersion counter. Every write goes
//! through here under one lock, assigns the next resourceVersion, appends to history and hands
//! the event to each matching watch without ever blocking (a watch whose buffer is full is
//! dropped, like the real server drops a watcher that cannot keep up).
//!
//! Deletion follows the real registry (`rest.BeforeDelete`, the pod strategy's
//! `CheckGracefulDelete`, the generic store's finalizer handling): a pod bound to a node and not
//! terminal is deleted gracefully (it gets `deletionTimestamp` and `deletionGracePeriodSeconds`
//! and stays, listed in [`Inner::terminating`] for the kubelet stand-in); an object with
//! `metadata.finalizers` gets a `deletionTimestamp` and stays until an update empties them.
//! The store must not decide when a terminating pod goes: that is the kubelet stand-in's job.
//!
//! Semantics that differ from a real API server, on purpose:
//! - Deleting a namespace does not delete its contents (and namespaces have no
//!   `spec.finalizers`).
//! - Paged lists are not a consistent snapshot: later pages show the current objects. Every page
//!   reports the resourceVersion of the first, so a watch started from it replays whatever
//!   changed meanwhile; a list with `resourceVersionMatch=Exact` serves the current objects
//!   (after checking the version is neither compacted nor in the future).
//! - History holds at most [`HISTORY_LIMIT`] events per resource type; a watch resuming from
//!   before the oldest kept event gets 410 Expired, as from the real watch cache.
//! - Namespaces need not exist for objects to be created in them.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::value::RawValue;
use serde_json::{Map, Value};
use tokio::sync::{Notify, mpsc};

use crate::object::{self, Stored};
use crate::ownership::{self, Owners};
use crate::patch::{self, PatchKind};
use crate::resources::{NODES, PODS, RESOURCES, ResourceType, TypeId};
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::ApiError;

/// Watch events kept per resource type.
pub(crate) const HISTORY_LIMIT: usize = 200_000;
/// Events buffered per watch before the watch is closed as too slow.
pub(crate) const WATCH_BUFFER: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

#[derive(Debug)]
struct HistoryEvent {
    kind: EventType,
    object: Arc<Stored>,
    /// The version before a modification.
    prev: Option<Arc<Stored>>,
}

/// What a watch stream sends, before rendering to a line.
#[derive(Debug)]
pub(crate) enum WatchItem {
    Event(EventType, Arc<Stored>),
    /// An object that stopped matching the watch's selectors: a DELETED event with its previous
    /// content at the resourceVersion of the change.
    Left(Arc<Stored>, u64),
    /// A BOOKMARK at this resourceVersion; `true` when it ends the initial events of a
    /// `sendInitialEvents` watch.
    Bookmark(u64, bool),
    /// The requested resourceVersion (first) is older than the oldest kept (second).
    Expired(u64, u64),
}

/// Which objects a list or watch sees.
#[derive(Debug, Clone, Default)]
pub(crate) struct Filter {
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Filter {
    pub(crate) fn matches(&self, object: &Stored) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| *object.namespace == *ns)
            && self.labels.matches(&object.labels)
            && self.fields.matches(|f| object.field(f))
    }
}

struct Watcher {
    filter: Filter,
    bookmarks: bool,
    tx: mpsc::Sender<WatchItem>,
}

#[derive(Default)]
struct TypeStore {
    objects: BTreeMap<(Box<str>, Box<str>), Arc<Stored>>,
    history: VecDeque<HistoryEvent>,
    /// A watch may resume from any resourceVersion at or after this.
    floor: u64,
    watchers: Vec<Watcher>,
    /// Field managers of objects written over HTTP (see [`ownership`]).
    owners: HashMap<(Box<str>, Box<str>), Owners>,
}

/// Who writes, and how (from the request's query and headers).
#[derive(Debug, Clone, Default)]
pub(crate) struct Writer {
    /// The field manager (`fieldManager`, else from the User-Agent).
    pub manager: String,
    /// `force=true`: an apply takes fields over instead of conflicting.
    pub force: bool,
    pub dry_run: bool,
}

/// What a history event looks like to one watch (with the selector transitions the real
/// server applies: an object that starts matching is ADDED, one that stops is DELETED).
fn deliver(filter: &Filter, event: &HistoryEvent) -> Option<WatchItem> {
    let now = filter.matches(&event.object);
    match (event.kind, &event.prev) {
        (EventType::Modified, Some(prev)) => match (filter.matches(prev), now) {
            (true, true) => Some(WatchItem::Event(EventType::Modified, event.object.clone())),
            (false, true) => Some(WatchItem::Event(EventType::Added, event.object.clone())),
            (true, false) => Some(WatchItem::Left(prev.clone(), event.object.rv)),
            (false, false) => None,
        },
        (kind, _) => now.then(|| WatchItem::Event(kind, event.object.clone())),
    }
}

pub(crate) struct Inner {
    rv: u64,
    /// Lists and continue tokens older than this get 410 (the last `compact()`).
    compacted: u64,
    types: Vec<TypeStore>,
    /// Pods deleted gracefully and not gone yet, by (namespace, name): what the kubelet
    /// stand-in finishes.
    pub(crate) terminating: BTreeMap<(Box<str>, Box<str>), Terminating>,
    /// Woken when a pod starts or shortens its termination.
    pub(crate) kubelet_wake: Arc<Notify>,
}

/// A pod in graceful termination.
#[derive(Debug, Clone)]
pub(crate) struct Terminating {
    pub uid: Box<str>,
    /// When its graceful deletion started.
    pub since: Instant,
    /// Its `deletionGracePeriodSeconds`.
    pub grace: Duration,
}

/// How a delete went.
#[derive(Debug)]
pub(crate) struct Deletion {
    /// The removed object, or the object that stays (terminating or waiting for finalizers).
    pub object: Arc<Stored>,
    /// Removed from the store (DELETED emitted).
    pub removed: bool,
}

impl Inner {
    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    pub(crate) fn object(&self, tid: TypeId, namespace: &str, name: &str) -> Option<&Arc<Stored>> {
        self.types[tid]
            .objects
            .get(&(Box::from(namespace), Box::from(name)))
    }

    /// The objects of a type in one namespace.
    pub(crate) fn in_namespace(
        &self,
        tid: TypeId,
        namespace: &str,
    ) -> impl Iterator<Item = &Arc<Stored>> {
        let start = (Box::from(namespace), Box::from(""));
        self.types[tid]
            .objects
            .range(start..)
            .take_while(move |((ns, _), _)| **ns == *namespace)
            .map(|(_, o)| o)
    }

    /// Records a change: updates the current objects, history and every open watch.
    pub(crate) fn commit(
        &mut self,
        tid: TypeId,
        kind: EventType,
        object: Arc<Stored>,
        prev: Option<Arc<Stored>>,
    ) {
        let ts = &mut self.types[tid];
        let key = (object.namespace.clone(), object.name.clone());
        match kind {
            EventType::Deleted => {
                ts.objects.remove(&key);
            }
            EventType::Added | EventType::Modified => {
                ts.objects.insert(key, object.clone());
            }
        }
        let event = HistoryEvent { kind, object, prev };
        ts.watchers.retain(|w| match deliver(&w.filter, &event) {
            None => !w.tx.is_closed(),
            // Full: the watch is too far behind and is closed; Closed: its client is gone.
            Some(item) => w.tx.try_send(item).is_ok(),
        });
        ts.history.push_back(event);
        while ts.history.len() > HISTORY_LIMIT {
            if let Some(oldest) = ts.history.pop_front() {
                ts.floor = oldest.object.rv;
            }
        }
    }

    /// Stores `object` (a complete object tree) at the next resourceVersion.
    fn write(&mut self, tid: TypeId, mut object: Value, prev: Option<Arc<Stored>>) -> Arc<Stored> {
        let rv = self.next_rv();
        set_resource_version(&mut object, Some(rv));
        let stored = Arc::new(Stored::from_value(&object, rv));
        let kind = if prev.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.commit(tid, kind, stored.clone(), prev);
        stored
    }

    /// Deletes an object at the next resourceVersion; returns its final state.
    pub(crate) fn remove(&mut self, tid: TypeId, old: &Arc<Stored>) -> Arc<Stored> {
        let key = (old.namespace.clone(), old.name.clone());
        if tid == PODS {
            self.terminating.remove(&key);
        }
        self.types[tid].owners.remove(&key);
        let rv = self.next_rv();
        let gone = Arc::new(old.at_resource_version(rv));
        self.commit(tid, EventType::Deleted, gone.clone(), None);
        gone
    }

    /// Notes which fields `writer` set (see [`ownership::record`]).
    fn own(
        &mut self,
        tid: TypeId,
        key: (Box<str>, Box<str>),
        old: Option<&Value>,
        new: &Value,
        writer: &Writer,
        applied: Option<&Value>,
    ) {
        let owners = self.types[tid].owners.entry(key).or_default();
        ownership::record(owners, old, new, &writer.manager, applied);
    }

    /// Replaces a stored object by `object`, unless that changes nothing (then, as on a real
    /// server, there is no new resourceVersion and no event).
    pub(crate) fn replace(
        &mut self,
        tid: TypeId,
        old: &Arc<Stored>,
        mut object: Value,
    ) -> Arc<Stored> {
        set_resource_version(&mut object, Some(old.rv));
        if object == old.value() {
            return old.clone();
        }
        self.write(tid, object, Some(old.clone()))
    }
}

impl Inner {
    /// DELETE of a stored object, as the real registry does it (see the module doc): checks the
    /// preconditions, then removes the object, or starts or shortens its graceful deletion, or
    /// marks it deleting until its finalizers are gone. `opts.dry_run` computes the answer and
    /// changes nothing.
    pub(crate) fn delete(
        &mut self,
        tid: TypeId,
        old: &Arc<Stored>,
        opts: &DeleteOptions,
    ) -> Result<Deletion, ApiError> {
        let rt = &RESOURCES[tid];
        let group_kind = if rt.group.is_empty() {
            rt.kind.to_string()
        } else {
            format!("{}.{}", rt.kind, rt.group)
        };
        if let Some(uid) = opts.uid.as_deref().filter(|u| *u != &*old.uid) {
            return Err(ApiError::conflict_named(
                &group_kind,
                rt,
                &old.name,
                &format!(
                    "the UID in the precondition ({uid}) does not match the UID in record ({}). \
                     The object might have been deleted and then recreated",
                    old.uid
                ),
            ));
        }
        if let Some(rv) = opts
            .resource_version
            .as_deref()
            .filter(|rv| *rv != old.rv.to_string())
        {
            return Err(ApiError::conflict_named(
                &group_kind,
                rt,
                &old.name,
                &format!(
                    "the ResourceVersion in the precondition ({rv}) does not match the \
                     ResourceVersion in record ({}). The object might have been modified",
                    old.rv
                ),
            ));
        }
        let requested = opts.grace_period_seconds.map(|g| if g < 0 { 1 } else { g });
        let mut value = old.value();
        let meta = metadata_mut(&mut value)?;
        let deleting_since = meta
            .get("deletionTimestamp")
            .and_then(Value::as_str)
            .and_then(object::parse_timestamp);
        let current_grace = meta
            .get("deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .map(|g| if g < 0 { 1 } else { g });
        let finalizers = meta
            .get("finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        let now = time::OffsetDateTime::now_utc();
        let unchanged = Deletion {
            object: old.clone(),
            removed: false,
        };
        // Only pods have a graceful delete strategy.
        let graceful = if tid != PODS {
            None
        } else if let Some(since) = deleting_since {
            match (current_grace, requested) {
                (None | Some(0), _) => None,
                (Some(current), Some(shorter)) if shorter < current => {
                    let at =
                        since - time::Duration::seconds(current) + time::Duration::seconds(shorter);
                    meta.insert(
                        "deletionTimestamp".into(),
                        Value::String(object::format_timestamp(at)),
                    );
                    Some(shorter)
                }
                // Already terminating with a grace no longer than asked: nothing changes.
                _ => return Ok(unchanged),
            }
        } else {
            let pod = old.value();
            let mut period = requested
                .or_else(|| {
                    pod.pointer("/spec/terminationGracePeriodSeconds")
                        .and_then(Value::as_i64)
                })
                .unwrap_or(DEFAULT_GRACE_SECONDS);
            if old.node_name.as_deref().is_none_or(str::is_empty)
                || matches!(old.phase.as_deref(), Some("Succeeded" | "Failed"))
            {
                period = 0;
            }
            if period < 0 {
                period = 1;
            }
            meta.insert(
                "deletionTimestamp".into(),
                Value::String(object::format_timestamp(
                    now + time::Duration::seconds(period),
                )),
            );
            if let Some(generation) = meta.get("generation").and_then(Value::as_i64)
                && generation > 0
            {
                meta.insert("generation".into(), (generation + 1).into());
            }
            Some(period)
        };
        let stays = match graceful {
            Some(period) => {
                meta.insert("deletionGracePeriodSeconds".into(), period.into());
                finalizers || period > 0
            }
            None if finalizers => {
                // markAsDeleting: now (unless an earlier deletion is due sooner), grace 0.
                if deleting_since.is_none()
                    && let Some(generation) = meta.get("generation").and_then(Value::as_i64)
                    && generation > 0
                {
                    meta.insert("generation".into(), (generation + 1).into());
                }
                if deleting_since.is_none_or(|t| t > now) {
                    meta.insert(
                        "deletionTimestamp".into(),
                        Value::String(object::format_timestamp(now)),
                    );
                }
                meta.insert("deletionGracePeriodSeconds".into(), 0.into());
                true
            }
            None => {
                if opts.dry_run {
                    return Ok(Deletion {
                        removed: true,
                        ..unchanged
                    });
                }
                return Ok(Deletion {
                    object: self.remove(tid, old),
                    removed: true,
                });
            }
        };
        if opts.dry_run {
            return Ok(Deletion {
                object: Arc::new(Stored::from_value(&value, old.rv)),
                removed: !stays,
            });
        }
        let updated = self.replace(tid, old, value);
        if stays {
            if tid == PODS
                && let Some(period) = graceful.filter(|p| *p > 0)
            {
                let key = (updated.namespace.clone(), updated.name.clone());
                let grace = Duration::from_secs(period.unsigned_abs());
                let since = match self.terminating.get(&key) {
                    Some(t) if *t.uid == *updated.uid => t.since,
                    _ => Instant::now(),
                };
                self.terminating.insert(
                    key,
                    Terminating {
                        uid: updated.uid.clone(),
                        since,
                        grace,
                    },
                );
                self.kubelet_wake.notify_one();
            }
            return Ok(Deletion {
                object: updated,
                removed: false,
            });
        }
        Ok(Deletion {
            object: self.remove(tid, &updated),
            removed: true,
        })
    }

    /// Whether an update from `old` to `new` completes a deletion: `old` is being deleted with
    /// no grace left and `new` has no finalizers (the real store then deletes instead).
    fn completes_deletion(old: &Value, new: &Value) -> bool {
        let meta = |v: &Value, key: &str| v.get("metadata").and_then(|m| m.get(key)).cloned();
        let finalizers_left = meta(new, "finalizers")
            .and_then(|f| f.as_array().map(|a| !a.is_empty()))
            .unwrap_or(false);
        let deleting = meta(old, "deletionTimestamp").is_some_and(|t| !t.is_null());
        let grace_left = meta(old, "deletionGracePeriodSeconds")
            .and_then(|g| g.as_i64())
            .is_some_and(|g| g > 0);
        deleting && !finalizers_left && !grace_left
    }
}

/// A pod's grace period when neither the delete nor `spec.terminationGracePeriodSeconds` gives
/// one (the real server defaults the spec field to this on creation).
pub(crate) const DEFAULT_GRACE_SECONDS: i64 = 30;

fn set_resource_version(object: &mut Value, rv: Option<u64>) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        match rv {
            Some(rv) => {
                meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
            }
            None => {
                meta.remove("resourceVersion");
            }
        }
    }
}

fn meta_str<'a>(object: &'a Value, key: &str) -> &'a str {
    object
        .get("metadata")
        .and_then(|m| m.get(key))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Checks `apiVersion`/`kind` of a request body against the resource and fills them in; makes
/// sure `metadata` is an object.
fn check_type_meta(rt: &ResourceType, object: &mut Value) -> Result<(), ApiError> {
    let Value::Object(map) = object else {
        return Err(ApiError::bad_request(
            "the request body is not a JSON object",
        ));
    };
    let api_version = rt.api_version();
    if let Some(v) = map
        .get("apiVersion")
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty())
        && v != api_version
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({v}) does not match the expected API version ({api_version})"
        )));
    }
    if let Some(k) = map
        .get("kind")
        .and_then(Value::as_str)
        .filter(|k| !k.is_empty())
        && k != rt.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({k}) does not match the expected kind ({})",
            rt.kind
        )));
    }
    map.insert("apiVersion".into(), Value::String(api_version));
    map.insert("kind".into(), Value::String(rt.kind.to_string()));
    match map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()))
    {
        Value::Object(_) => Ok(()),
        _ => Err(ApiError::bad_request("metadata is not an object")),
    }
}

/// `metadata` of an object that passed [`check_type_meta`] or a patch.
fn metadata_mut(object: &mut Value) -> Result<&mut Map<String, Value>, ApiError> {
    object
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| ApiError::bad_request("metadata is not an object"))
}

/// The namespace in a body must be empty or the request's.
fn check_namespace(rt: &ResourceType, object: &mut Value, namespace: &str) -> Result<(), ApiError> {
    let meta = metadata_mut(object)?;
    if rt.namespaced {
        let body = meta.get("namespace").and_then(Value::as_str).unwrap_or("");
        if !body.is_empty() && body != namespace {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        meta.insert("namespace".into(), Value::String(namespace.to_string()));
    } else {
        meta.remove("namespace");
    }
    Ok(())
}

fn uid_conflict(rt: &ResourceType, name: &str, want: &str, have: &str) -> ApiError {
    ApiError::conflict(
        rt,
        name,
        &format!("Precondition failed: UID in precondition: {want}, UID in object meta: {have}"),
    )
}

/// Makes `new` an update of `old`: keeps what the server owns (uid, creationTimestamp, type),
/// and applies the status-subresource rule (main resource writes keep the old `.status`,
/// `/status` writes change only `.status`).
fn merge_update(
    rt: &ResourceType,
    old: &Stored,
    mut new: Value,
    status_only: bool,
) -> Result<Value, ApiError> {
    let old_value = old.value();
    if status_only {
        let mut merged = old_value;
        match new.get_mut("status").map(Value::take) {
            Some(status) => merged["status"] = status,
            None => {
                if let Some(map) = merged.as_object_mut() {
                    map.remove("status");
                }
            }
        }
        return Ok(merged);
    }
    if rt.status {
        match old_value.get("status") {
            Some(status) => new["status"] = status.clone(),
            None => {
                if let Some(map) = new.as_object_mut() {
                    map.remove("status");
                }
            }
        }
    }
    let spec_changed = generation_changed(&old_value, &new);
    let meta = metadata_mut(&mut new)?;
    // An update can never change these (the real `rest.BeforeUpdate`).
    for key in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        match old_value.get("metadata").and_then(|m| m.get(key)) {
            Some(v) => {
                meta.insert(key.into(), v.clone());
            }
            None => {
                meta.remove(key);
            }
        }
    }
    if rt.generation && spec_changed {
        let generation = meta.get("generation").and_then(Value::as_i64).unwrap_or(0);
        meta.insert("generation".into(), (generation + 1).into());
    }
    let new_finalizers = |m: &Map<String, Value>| -> Vec<String> {
        m.get("finalizers")
            .and_then(Value::as_array)
            .map(|f| {
                f.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    if let Some(old_meta) = old_value.get("metadata").and_then(Value::as_object)
        && old_meta
            .get("deletionTimestamp")
            .is_some_and(|t| !t.is_null())
    {
        let before = new_finalizers(old_meta);
        let added: Vec<String> = new_finalizers(meta)
            .into_iter()
            .filter(|f| !before.contains(f))
            .collect();
        if !added.is_empty() {
            return Err(ApiError::invalid(
                rt,
                &old.name,
                format!(
                    "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
                ),
            ));
        }
    }
    new["apiVersion"] = Value::String(rt.api_version());
    new["kind"] = Value::String(rt.kind.to_string());
    Ok(new)
}

/// Whether `new` differs from `old` in what bumps `metadata.generation`: anything but
/// `metadata` and `status`.
fn generation_changed(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| -> Map<String, Value> {
        v.as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| !matches!(k.as_str(), "metadata" | "status"))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    strip(old) != strip(new)
}

/// Options of a list request.
#[derive(Debug, Default)]
pub(crate) struct ListOptions {
    pub filter: Filter,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
    pub version_match: Option<String>,
}

#[derive(Debug)]
pub(crate) struct ListPage {
    pub items: Vec<Arc<Stored>>,
    pub resource_version: u64,
    pub continue_token: Option<String>,
}

/// Options of a watch request.
#[derive(Debug, Default)]
pub(crate) struct WatchOptions {
    pub filter: Filter,
    pub resource_version: Option<String>,
    pub bookmarks: bool,
    pub send_initial_events: bool,
}

/// What a new watch sends first, and the channel of what follows (none after an error).
pub(crate) struct WatchStart {
    pub initial: Vec<WatchItem>,
    pub rx: Option<mpsc::Receiver<WatchItem>>,
}

/// Preconditions and options of a delete.
#[derive(Debug, Default)]
pub(crate) struct DeleteOptions {
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    /// `gracePeriodSeconds`, as given (negative values count as 1).
    pub grace_period_seconds: Option<i64>,
    pub dry_run: bool,
}

fn encode_continue(rv: u64, namespace: &str, name: &str) -> String {
    format!("{rv}\u{0}{namespace}\u{0}{name}")
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn decode_continue(token: &str) -> Option<(u64, String, String)> {
    if !token.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..token.len())
        .step_by(2)
        .map(|i| {
            token
                .get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect();
    let text = String::from_utf8(bytes?).ok()?;
    let mut parts = text.split('\u{0}');
    let rv = parts.next()?.parse().ok()?;
    let namespace = parts.next()?.to_string();
    let name = parts.next()?.to_string();
    parts.next().is_none().then_some((rv, namespace, name))
}

fn parse_rv(rv: &str) -> Result<u64, ApiError> {
    rv.parse()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv:?}")))
}

/// The store; see the module documentation.
pub(crate) struct Store {
    inner: Mutex<Inner>,
}

impl Default for Store {
    fn default() -> Self {
        Store {
            inner: Mutex::new(Inner {
                rv: 0,
                compacted: 0,
                types: RESOURCES.iter().map(|_| TypeStore::default()).collect(),
                terminating: BTreeMap::new(),
                kubelet_wake: Arc::new(Notify::new()),
            }),
        }
    }
}

impl Store {
    /// The lock; a panic while it was held cannot leave it half-written (every mutation is a
    /// single insert/remove plus pushes), so a poisoned lock is used as is.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    pub(crate) fn get(&self, tid: TypeId, namespace: &str, name: &str) -> Option<Arc<Stored>> {
        self.lock().object(tid, namespace, name).cloned()
    }

    pub(crate) fn all(&self, tid: TypeId) -> Vec<Arc<Stored>> {
        self.lock().types[tid].objects.values().cloned().collect()
    }

    pub(crate) fn list(&self, tid: TypeId, opts: &ListOptions) -> Result<ListPage, ApiError> {
        let inner = self.lock();
        let (report_rv, after) = match &opts.continue_token {
            Some(token) => {
                let (rv, ns, name) = decode_continue(token)
                    .ok_or_else(|| ApiError::bad_request("continue key is not valid"))?;
                if rv < inner.compacted {
                    return Err(ApiError::expired(
                        "The provided continue parameter is too old to display a consistent list result. \
                         You can start a new list without the continue parameter, or use the continue token \
                         in this response to retrieve the remainder of the results. Continuing with the \
                         provided token results in an inconsistent list - objects that were created, \
                         modified, or deleted between the time the first chunk was returned and now may \
                         show up in the list.",
                    ));
                }
                (rv, Some((Box::<str>::from(ns), Box::<str>::from(name))))
            }
            None => {
                let requested = match opts.resource_version.as_deref() {
                    None | Some("") => {
                        if opts.version_match.is_some() {
                            return Err(ApiError::bad_request(
                                "resourceVersionMatch is forbidden unless resourceVersion is provided",
                            ));
                        }
                        None
                    }
                    Some(rv) => Some(parse_rv(rv)?),
                };
                let exact = match opts.version_match.as_deref() {
                    None | Some("NotOlderThan") => false,
                    Some("Exact") => true,
                    Some(other) => {
                        return Err(ApiError::bad_request(format!(
                            "unsupported resourceVersionMatch {other:?}"
                        )));
                    }
                };
                match requested {
                    None => (inner.rv, None),
                    Some(0) if exact => {
                        return Err(ApiError::bad_request(
                            "resourceVersionMatch \"Exact\" is forbidden for resourceVersion \"0\"",
                        ));
                    }
                    Some(n) if n > inner.rv => {
                        return Err(ApiError::too_large_resource_version(n, inner.rv));
                    }
                    Some(n) if exact => {
                        if n < inner.compacted {
                            return Err(ApiError::expired(format!(
                                "too old resource version: {n} ({})",
                                inner.compacted
                            )));
                        }
                        (n, None)
                    }
                    Some(_) => (inner.rv, None),
                }
            }
        };
        let objects = &inner.types[tid].objects;
        let lower = match (&after, &opts.filter.namespace) {
            (Some(key), _) => Bound::Excluded(key.clone()),
            (None, Some(ns)) => Bound::Included((Box::from(ns.as_str()), Box::from(""))),
            (None, None) => Bound::Unbounded,
        };
        let limit = opts.limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        let mut items = Vec::new();
        let mut continue_token = None;
        for ((ns, _), object) in objects.range((lower, Bound::Unbounded)) {
            if opts
                .filter
                .namespace
                .as_deref()
                .is_some_and(|want| **ns != *want)
            {
                break;
            }
            if !opts.filter.matches(object) {
                continue;
            }
            if items.len() == limit {
                let last: &Arc<Stored> = &items[items.len() - 1];
                continue_token = Some(encode_continue(report_rv, &last.namespace, &last.name));
                break;
            }
            items.push(object.clone());
        }
        Ok(ListPage {
            items,
            resource_version: report_rv,
            continue_token,
        })
    }

    pub(crate) fn watch(&self, tid: TypeId, opts: WatchOptions) -> Result<WatchStart, ApiError> {
        let mut inner = self.lock();
        let current = inner.rv;
        let start_rv = match opts.resource_version.as_deref() {
            None | Some("") | Some("0") => None,
            Some(rv) => Some(parse_rv(rv)?),
        };
        let ts = &inner.types[tid];
        let mut initial = Vec::new();
        if opts.send_initial_events || start_rv.is_none() {
            if let Some(n) = start_rv.filter(|n| *n > current) {
                return Err(ApiError::too_large_resource_version(n, current));
            }
            initial.extend(
                ts.objects
                    .values()
                    .filter(|o| opts.filter.matches(o))
                    .map(|o| WatchItem::Event(EventType::Added, o.clone())),
            );
            if opts.send_initial_events && opts.bookmarks {
                initial.push(WatchItem::Bookmark(current, true));
            }
        } else if let Some(n) = start_rv {
            if n > current {
                return Err(ApiError::too_large_resource_version(n, current));
            }
            let oldest = ts.floor.max(inner.compacted);
            if n < oldest {
                return Ok(WatchStart {
                    initial: vec![WatchItem::Expired(n, oldest)],
                    rx: None,
                });
            }
            let first = ts.history.partition_point(|e| e.object.rv <= n);
            initial.extend(
                ts.history
                    .range(first..)
                    .filter_map(|e| deliver(&opts.filter, e)),
            );
        }
        let (tx, rx) = mpsc::channel(WATCH_BUFFER);
        let ts = &mut inner.types[tid];
        ts.watchers.retain(|w| !w.tx.is_closed());
        ts.watchers.push(Watcher {
            filter: opts.filter,
            bookmarks: opts.bookmarks,
            tx,
        });
        Ok(WatchStart {
            initial,
            rx: Some(rx),
        })
    }

    pub(crate) fn create(
        &self,
        tid: TypeId,
        namespace: &str,
        mut object: Value,
        writer: &Writer,
    ) -> Result<Arc<Stored>, ApiError> {
        let rt = &RESOURCES[tid];
        check_type_meta(rt, &mut object)?;
        check_namespace(rt, &mut object, namespace)?;
        if !meta_str(&object, "resourceVersion").is_empty() {
            return Err(ApiError::internal(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        if !object::fill_create_metadata(metadata_mut(&mut object)?, rt.namespaced, namespace) {
            return Err(ApiError::invalid(
                rt,
                "",
                "metadata.name: Required value: name or generateName is required",
            ));
        }
        if rt.generation {
            metadata_mut(&mut object)?.insert("generation".into(), 1.into());
        }
        let name = meta_str(&object, "name").to_string();
        let mut inner = self.lock();
        if inner
            .object(tid, namespace_of(rt, namespace), &name)
            .is_some()
        {
            return Err(ApiError::already_exists(rt, &name));
        }
        if writer.dry_run {
            return Ok(Arc::new(Stored::from_value(&object, 0)));
        }
        let key = (
            Box::from(namespace_of(rt, namespace)),
            Box::from(name.as_str()),
        );
        inner.own(tid, key, None, &object, writer, None);
        Ok(inner.write(tid, object, None))
    }

    /// PUT. Returns the stored object and whether it was created.
    pub(crate) fn update(
        &self,
        tid: TypeId,
        namespace: &str,
        name: &str,
        mut object: Value,
        status_only: bool,
        writer: &Writer,
    ) -> Result<(Arc<Stored>, bool), ApiError> {
        let rt = &RESOURCES[tid];
        check_type_meta(rt, &mut object)?;
        check_namespace(rt, &mut object, namespace)?;
        let body_name = meta_str(&object, "name");
        if body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let mut inner = self.lock();
        let Some(old) = inner
            .object(tid, namespace_of(rt, namespace), name)
            .cloned()
        else {
            if rt.create_on_update && !status_only {
                drop(inner);
                set_resource_version(&mut object, None);
                return self
                    .create(tid, namespace, object, writer)
                    .map(|o| (o, true));
            }
            return Err(ApiError::not_found(rt, name));
        };
        let body_rv = meta_str(&object, "resourceVersion");
        if !body_rv.is_empty() && body_rv != old.rv.to_string() {
            return Err(ApiError::stale(rt, name));
        }
        let body_uid = meta_str(&object, "uid");
        if !body_uid.is_empty() && body_uid != &*old.uid {
            return Err(uid_conflict(rt, name, body_uid, &old.uid));
        }
        let merged = merge_update(rt, &old, object, status_only)?;
        if writer.dry_run {
            return Ok((Arc::new(Stored::from_value(&merged, old.rv)), false));
        }
        let old_value = old.value();
        if Inner::completes_deletion(&old_value, &merged) {
            return Ok((inner.remove(tid, &old), false));
        }
        let key = (old.namespace.clone(), old.name.clone());
        inner.own(tid, key, Some(&old_value), &merged, writer, None);
        Ok((inner.replace(tid, &old, merged), false))
    }

    /// PATCH. Returns the stored object and whether it was created (server-side apply of a
    /// missing object creates it).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn patch(
        &self,
        tid: TypeId,
        namespace: &str,
        name: &str,
        kind: PatchKind,
        patch: &Value,
        status_only: bool,
        writer: &Writer,
    ) -> Result<(Arc<Stored>, bool), ApiError> {
        let rt = &RESOURCES[tid];
        if kind == PatchKind::Strategic && !rt.builtin {
            return Err(ApiError::unsupported_media_type(
                "strategic merge patch format is not supported",
            ));
        }
        let mut inner = self.lock();
        let Some(old) = inner
            .object(tid, namespace_of(rt, namespace), name)
            .cloned()
        else {
            if kind == PatchKind::Apply && !status_only {
                drop(inner);
                let mut object = patch.clone();
                check_type_meta(rt, &mut object)?;
                let meta = metadata_mut(&mut object)?;
                if meta
                    .get("name")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    meta.insert("name".into(), Value::String(name.to_string()));
                }
                let body_name = meta_str(&object, "name");
                if body_name != name {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({body_name}) does not match the name on the URL ({name})"
                    )));
                }
                return self
                    .create(tid, namespace, object, writer)
                    .map(|o| (o, true));
            }
            return Err(ApiError::not_found(rt, name));
        };
        let old_value = old.value();
        let key = (old.namespace.clone(), old.name.clone());
        if kind == PatchKind::Apply && !writer.force {
            let found = inner.types[tid]
                .owners
                .get(&key)
                .map(|owners| ownership::conflicts(owners, &old_value, patch, &writer.manager))
                .unwrap_or_default();
            if !found.is_empty() {
                return Err(ownership::conflict_error(rt, name, &found));
            }
        }
        let mut object = old_value.clone();
        match kind {
            PatchKind::Json => {
                patch::json_patch(&mut object, patch).map_err(ApiError::unprocessable)?
            }
            PatchKind::Merge | PatchKind::Strategic | PatchKind::Apply => {
                if !patch.is_object() {
                    return Err(ApiError::bad_request("the patch is not a JSON object"));
                }
                patch::merge(&mut object, patch);
            }
        }
        if !object.is_object() {
            return Err(ApiError::unprocessable(
                "the patched object is not a JSON object",
            ));
        }
        // A patch that sets resourceVersion or uid makes it a precondition; one that removes
        // them makes the write unconditional.
        let rv = meta_str(&object, "resourceVersion");
        if !rv.is_empty() && rv != old.rv.to_string() {
            return Err(ApiError::stale(rt, name));
        }
        let uid = meta_str(&object, "uid");
        if !uid.is_empty() && uid != &*old.uid {
            return Err(uid_conflict(rt, name, uid, &old.uid));
        }
        if meta_str(&object, "name") != name || meta_str(&object, "namespace") != &*old.namespace {
            return Err(ApiError::bad_request(
                "metadata.name and metadata.namespace cannot be changed by a patch",
            ));
        }
        let merged = merge_update(rt, &old, object, status_only)?;
        if writer.dry_run {
            return Ok((Arc::new(Stored::from_value(&merged, old.rv)), false));
        }
        if Inner::completes_deletion(&old_value, &merged) {
            return Ok((inner.remove(tid, &old), false));
        }
        let applied = (kind == PatchKind::Apply).then_some(patch);
        inner.own(tid, key, Some(&old_value), &merged, writer, applied);
        Ok((inner.replace(tid, &old, merged), false))
    }

    pub(crate) fn delete(
        &self,
        tid: TypeId,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Deletion, ApiError> {
        let rt = &RESOURCES[tid];
        let mut inner = self.lock();
        let old = inner
            .object(tid, namespace_of(rt, namespace), name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(rt, name))?;
        inner.delete(tid, &old, opts)
    }

    /// DELETE of a collection: each selected object deleted as by [`Inner::delete`] (the real
    /// server deletes them one by one with the same options). Returns the selected objects as
    /// they were.
    pub(crate) fn delete_collection(
        &self,
        tid: TypeId,
        filter: &Filter,
        opts: &DeleteOptions,
    ) -> Result<Vec<Arc<Stored>>, ApiError> {
        let mut inner = self.lock();
        let doomed: Vec<Arc<Stored>> = inner.types[tid]
            .objects
            .values()
            .filter(|o| filter.matches(o))
            .cloned()
            .collect();
        for object in &doomed {
            inner.delete(tid, object, opts)?;
        }
        Ok(doomed)
    }

    /// Creates or replaces an object unconditionally (the in-process `apply`).
    pub(crate) fn put(&self, tid: TypeId, mut object: Value) -> Result<Arc<Stored>, String> {
        let rt = &RESOURCES[tid];
        check_type_meta(rt, &mut object).map_err(|e| e.message)?;
        let namespace = match meta_str(&object, "namespace") {
            "" => "default".to_string(),
            ns => ns.to_string(),
        };
        let mut inner = self.lock();
        let name = meta_str(&object, "name").to_string();
        let old = if name.is_empty() {
            None
        } else {
            inner
                .object(tid, namespace_of(rt, &namespace), &name)
                .cloned()
        };
        let spec_changed = old
            .as_ref()
            .is_some_and(|o| generation_changed(&o.value(), &object));
        let meta = metadata_mut(&mut object).map_err(|e| e.message)?;
        if rt.generation && meta.get("generation").and_then(Value::as_i64).is_none() {
            let before = old.as_ref().and_then(|o| {
                o.value()
                    .pointer("/metadata/generation")
                    .and_then(Value::as_i64)
            });
            let generation = match before {
                Some(g) => g + i64::from(spec_changed),
                None => 1,
            };
            meta.insert("generation".into(), generation.into());
        }
        if let Some(old) = &old {
            let old_value = old.value();
            for key in ["uid", "creationTimestamp"] {
                if meta
                    .get(key)
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                    && let Some(v) = old_value.get("metadata").and_then(|m| m.get(key))
                {
                    meta.insert(key.into(), v.clone());
                }
            }
        }
        if !object::fill_create_metadata(meta, rt.namespaced, &namespace) {
            return Err("the object has neither metadata.name nor metadata.generateName".into());
        }
        if let Some(old) = &old
            && Inner::completes_deletion(&old.value(), &object)
        {
            return Ok(inner.remove(tid, old));
        }
        Ok(inner.write(tid, object, old))
    }

    /// Replaces `.status` of an object; `false` if there is no such object.
    pub(crate) fn set_status(
        &self,
        tid: TypeId,
        namespace: &str,
        name: &str,
        status: Value,
    ) -> bool {
        let rt = &RESOURCES[tid];
        let mut inner = self.lock();
        let Some(old) = inner
            .object(tid, namespace_of(rt, namespace), name)
            .cloned()
        else {
            return false;
        };
        let mut object = old.value();
        object["status"] = status;
        inner.replace(tid, &old, object);
        true
    }

    /// Deletes an object unconditionally (the in-process `delete`).
    pub(crate) fn take(&self, tid: TypeId, namespace: &str, name: &str) -> Option<Arc<Stored>> {
        let rt = &RESOURCES[tid];
        let mut inner = self.lock();
        let old = inner
            .object(tid, namespace_of(rt, namespace), name)
            .cloned()?;
        Some(inner.remove(tid, &old))
    }

    /// The kubelet's final delete of a terminating pod (grace 0, uid precondition): removes it
    /// unless finalizers hold it. Returns whether it was removed; `false` also when the pod is
    /// gone, was replaced (another uid) or is not terminating.
    pub(crate) fn finish_termination(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
    ) -> bool {
        let mut inner = self.lock();
        // Whatever happens, the stand-in is done with this pod: it goes now, or it is gone,
        // replaced, or not terminating (an in-process write took its deletion away).
        inner
            .terminating
            .remove(&(Box::<str>::from(namespace), Box::<str>::from(name)));
        let Some(pod) = inner.object(PODS, namespace, name).cloned() else {
            return false;
        };
        if uid.is_some_and(|u| u != &*pod.uid)
            || pod
                .value()
                .pointer("/metadata/deletionTimestamp")
                .is_none_or(Value::is_null)
        {
            return false;
        }
        let opts = DeleteOptions {
            uid: Some(pod.uid.to_string()),
            grace_period_seconds: Some(0),
            ..DeleteOptions::default()
        };
        match inner.delete(PODS, &pod, &opts) {
            Ok(deletion) => deletion.removed,
            Err(e) => {
                tracing::warn!(
                    "kube-fake kubelet cannot finish {namespace}/{name}: {}",
                    e.message
                );
                false
            }
        }
    }

    /// A kubelet's node status heartbeat on every node: each condition's `lastHeartbeatTime`
    /// becomes now, at a new resourceVersion (MODIFIED) even within the same second, as the
    /// real heartbeats, seconds apart, always are. Nodes without conditions are left alone.
    pub(crate) fn heartbeat_nodes(&self) -> usize {
        let now = object::now_timestamp();
        let mut inner = self.lock();
        let nodes: Vec<Arc<Stored>> = inner.types[NODES].objects.values().cloned().collect();
        let mut beaten = 0;
        for node in nodes {
            let mut value = node.value();
            let Some(conditions) = value
                .pointer_mut("/status/conditions")
                .and_then(Value::as_array_mut)
                .filter(|c| !c.is_empty())
            else {
                continue;
            };
            for condition in conditions.iter_mut().filter(|c| c.is_object()) {
                condition["lastHeartbeatTime"] = Value::String(now.clone());
            }
            inner.write(NODES, value, Some(node));
            beaten += 1;
        }
        beaten
    }

    /// Bulk-loads list items (see [`object::prepare_all`]), holding the lock throughout so
    /// that the items get consecutive resourceVersions. Returns how many were loaded and why
    /// the others were skipped.
    pub(crate) fn load(&self, items: &[&RawValue]) -> (usize, Vec<String>) {
        let mut inner = self.lock();
        let first = inner.rv + 1;
        let prepared = object::prepare_all(items, first);
        inner.rv += items.len() as u64;
        let mut loaded = 0;
        let mut skipped = Vec::new();
        for item in prepared {
            let (tid, stored) = match item {
                Ok(item) => item,
                Err(reason) => {
                    skipped.push(reason);
                    continue;
                }
            };
            let stored = Arc::new(stored);
            let prev = inner.object(tid, &stored.namespace, &stored.name).cloned();
            let kind = if prev.is_some() {
                EventType::Modified
            } else {
                EventType::Added
            };
            inner.commit(tid, kind, stored, prev);
            loaded += 1;
        }
        (loaded, skipped)
    }

    /// Forgets all watch history (see `FakeApiServer::compact`).
    pub(crate) fn compact(&self) {
        let mut inner = self.lock();
        let rv = inner.rv;
        inner.compacted = rv;
        for ts in &mut inner.types {
            ts.history.clear();
            ts.floor = rv;
        }
    }

    /// Sends a BOOKMARK at the current resourceVersion to every watch that allows them.
    pub(crate) fn bookmark(&self) {
        let mut inner = self.lock();
        let rv = inner.rv;
        for ts in &mut inner.types {
            ts.watchers
                .retain(|w| !w.bookmarks || w.tx.try_send(WatchItem::Bookmark(rv, false)).is_ok());
        }
    }
}

/// The namespace key of an object: `""` for cluster-scoped types.
pub(crate) fn namespace_of<'a>(rt: &ResourceType, namespace: &'a str) -> &'a str {
    if rt.namespaced { namespace } else { "" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::by_kind;
    use serde_json::json;

    fn pods() -> TypeId {
        by_kind("v1", "Pod").unwrap()
    }

    fn pod(name: &str, labels: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns", "labels": labels}})
    }

    #[test]
    fn continue_tokens_round_trip() {
        let t = encode_continue(42, "ns", "a-b");
        assert_eq!(decode_continue(&t), Some((42, "ns".into(), "a-b".into())));
        assert_eq!(decode_continue("zz"), None);
        assert_eq!(decode_continue("abc"), None);
    }

    #[test]
    fn unchanged_updates_keep_the_resource_version() {
        let store = Store::default();
        let a = store.put(pods(), pod("a", json!({"x": "1"}))).unwrap();
        let same = store
            .patch(
                pods(),
                "ns",
                "a",
                PatchKind::Merge,
                &json!({"metadata": {"labels": {"x": "1"}}}),
                false,
                &Writer::default(),
            )
            .unwrap();
        assert_eq!(same.0.rv, a.rv);
        let changed = store
            .patch(
                pods(),
                "ns",
                "a",
                PatchKind::Merge,
                &json!({"metadata": {"labels": {"x": "2"}}}),
                false,
                &Writer::default(),
            )
            .unwrap();
        assert!(changed.0.rv > a.rv);
        let stale =
            json!({"metadata": {"resourceVersion": a.rv.to_string(), "labels": {"x": "3"}}});
        let conflict = store.patch(
            pods(),
            "ns",
            "a",
            PatchKind::Merge,
            &stale,
            false,
            &Writer::default(),
        );
        assert_eq!(conflict.map(|_| ()).unwrap_err().code, 409);
        let unconditional =
            json!({"metadata": {"resourceVersion": null, "uid": null, "labels": {"x": "3"}}});
        let (patched, _) = store
            .patch(
                pods(),
                "ns",
                "a",
                PatchKind::Merge,
                &unconditional,
                false,
                &Writer::default(),
            )
            .unwrap();
        assert_eq!(patched.uid, a.uid);
        assert_eq!(patched.labels[0].1.as_ref(), "3");
    }

    #[test]
    fn watch_sees_selector_transitions() {
        let store = Store::default();
        let a = store.put(pods(), pod("a", json!({"app": "web"}))).unwrap();
        let filter = Filter {
            labels: LabelSelector::parse("app=web").unwrap(),
            ..Filter::default()
        };
        let start = store
            .watch(
                pods(),
                WatchOptions {
                    filter,
                    resource_version: Some(a.rv.to_string()),
                    ..WatchOptions::default()
                },
            )
            .unwrap();
        assert!(start.initial.is_empty());
        let mut rx = start.rx.unwrap();
        store
            .patch(
                pods(),
                "ns",
                "a",
                PatchKind::Merge,
                &json!({"metadata": {"labels": {"app": "db"}}}),
                false,
                &Writer::default(),
            )
            .unwrap();
        store
            .patch(
                pods(),
                "ns",
                "a",
                PatchKind::Merge,
                &json!({"metadata": {"labels": {"app": "web"}}}),
                false,
                &Writer::default(),
            )
            .unwrap();
        store
            .put(pods(), pod("other", json!({"app": "db"})))
            .unwrap();
        match rx.try_recv().unwrap() {
            WatchItem::Left(prev, rv) => {
                assert_eq!(prev.labels[0].1.as_ref(), "web");
                assert_eq!(rv, a.rv + 1);
            }
            other => panic!("{other:?}"),
        }
        assert!(
            matches!(rx.try_recv().unwrap(), WatchItem::Event(EventType::Added, o) if o.rv == a.rv + 2)
        );
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn the_kubelet_never_finishes_a_replacement() {
        let store = Store::default();
        let mut bound = pod("a", json!({}));
        bound["spec"] = json!({"nodeName": "n1"});
        let first = store.put(pods(), bound.clone()).unwrap();
        let dry = DeleteOptions {
            dry_run: true,
            ..DeleteOptions::default()
        };
        let preview = store.delete(pods(), "ns", "a", &dry).unwrap();
        assert!(!preview.removed);
        assert!(
            store.lock().terminating.is_empty(),
            "a dry run changes nothing"
        );
        store
            .delete(pods(), "ns", "a", &DeleteOptions::default())
            .unwrap();
        assert!(
            store
                .lock()
                .terminating
                .contains_key(&("ns".into(), "a".into()))
        );
        // Replaced in process by a pod of another uid, not terminating.
        bound["metadata"]["uid"] = json!("another");
        store.put(pods(), bound).unwrap();
        assert!(!store.finish_termination("ns", "a", Some(&first.uid)));
        assert!(store.lock().terminating.is_empty());
        assert_eq!(&*store.get(pods(), "ns", "a").unwrap().uid, "another");
    }

    #[test]
    fn slow_watchers_are_dropped_without_blocking_writers() {
        let store = Store::default();
        let start = store.watch(pods(), WatchOptions::default()).unwrap();
        let mut rx = start.rx.unwrap();
        for i in 0..WATCH_BUFFER + 10 {
            store.put(pods(), pod(&format!("p{i}"), json!({}))).unwrap();
        }
        let mut received = 0;
        while rx.try_recv().is_ok() {
            received += 1;
        }
        assert_eq!(received, WATCH_BUFFER);
        assert!(matches!(
            rx.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        ));
    }
}
