//! What `rebalancer eval` reads and writes: the snapshot file (parsed and built exactly as a
//! pushed snapshot is), JSON or YAML documents (args, profiles: the same structural checks as
//! the API's bodies), and the state directory.
//!
//! Owns the state file's format (`DIR/state.json`, see [`StateFile`]) and its atomic writing.
//! Must not: run policies or print anything; every error says which file and what is wrong.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use rebalancer_cluster::{self as cluster, ClusterSnapshot, Format, IngestWarning};

use super::EvalError;

/// The name of the state file inside `--state DIR`.
pub const STATE_FILE: &str = "state.json";

/// A path as the user gave it, for messages (`-` is standard input).
pub fn shown(path: &Path) -> String {
    if path == Path::new("-") {
        "<stdin>".to_string()
    } else {
        path.display().to_string()
    }
}

fn read(path: &Path) -> Result<Vec<u8>, EvalError> {
    let mut bytes = Vec::new();
    let result = if path == Path::new("-") {
        std::io::stdin().lock().read_to_end(&mut bytes).map(|_| ())
    } else {
        std::fs::read(path).map(|b| bytes = b)
    };
    result.map_err(|e| EvalError::input(path, format!("cannot read it: {e}")))?;
    Ok(bytes)
}

/// The format of a document file: by its extension (`.json`; `.yaml`, `.yml`), else by its
/// first byte, as [`Format::sniff`] guesses.
fn format_of(path: &Path, bytes: &[u8]) -> Format {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("json") => Format::Json,
        Some("yaml" | "yml") => Format::Yaml,
        _ => Format::sniff(bytes),
    }
}

/// A snapshot read from a file, and what it holds.
pub struct Snapshot {
    pub snapshot: Arc<ClusterSnapshot>,
    pub format: Format,
    pub nodes: u64,
    pub pods: u64,
    pub warnings: Vec<IngestWarning>,
}

/// Read a `kubectl get -o json|yaml` List and build the snapshot policies read, as
/// `PUT /api/v1/clusters/{name}/snapshot` does (every object validated; NodeMetric,
/// NodeResourceTopology and metrics objects attached). A List without nodes and pods is
/// refused, as the server refuses it without `allowEmpty`.
pub fn snapshot(path: &Path, time_ms: i64) -> Result<Snapshot, EvalError> {
    let bytes = read(path)?;
    let format = format_of(path, &bytes);
    let objects = cluster::parse_list(bytes, format)
        .map_err(|e| EvalError::input(path, format!("not a valid snapshot ({format}): {e}")))?;
    let snapshot = cluster::build_snapshot(&objects, 1, time_ms)
        .map_err(|e| EvalError::input(path, format!("not a valid snapshot: {e}")))?;
    let count = |kind: &str| snapshot.counts.get(kind).copied().unwrap_or(0);
    let (nodes, pods) = (count("Node"), count("Pod"));
    if nodes == 0 && pods == 0 {
        return Err(EvalError::input(
            path,
            format!(
                "the List holds no node and no pod ({} other objects): nothing to evaluate \
                 (was it the output of a failed kubectl get?)",
                objects.len()
            ),
        ));
    }
    let warnings = snapshot.warnings.clone();
    Ok(Snapshot {
        snapshot: Arc::new(snapshot),
        format,
        nodes,
        pods,
        warnings,
    })
}

/// A JSON or YAML document (args, a DeschedulerPolicy), its structure checked as the API checks
/// request bodies (nesting depth, repeated keys, one YAML document).
pub fn document(path: &Path) -> Result<Value, EvalError> {
    let bytes = read(path)?;
    let at = |line: usize, column: usize| format!("{}:{line}:{column}", shown(path));
    match format_of(path, &bytes) {
        Format::Json => {
            cluster::document::check_json(&bytes)
                .map_err(|e| EvalError::Input(format!("{}: {e}", shown(path))))?;
            serde_json::from_slice(&bytes).map_err(|e| {
                EvalError::Input(format!("{}: not valid JSON: {e}", at(e.line(), e.column())))
            })
        }
        Format::Yaml => {
            cluster::document::check_yaml(&bytes)
                .map_err(|e| EvalError::Input(format!("{}: {e}", shown(path))))?;
            cluster::document::yaml_value(serde_yaml::Deserializer::from_slice(&bytes)).map_err(
                |e| match e {
                    cluster::document::YamlFailure::Structure(e) => {
                        EvalError::Input(format!("{}: {e}", shown(path)))
                    }
                    cluster::document::YamlFailure::Syntax(e) => {
                        EvalError::input(path, format!("not valid YAML: {e}"))
                    }
                },
            )
        }
    }
}

/// One state scope: a policy's keys and values in one plugin set, as the state file and
/// `--output json` write it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScopeEntries {
    pub plugin_set: String,
    pub plugin: String,
    pub entries: Vec<StateEntry>,
}

/// One key and its value: `text` when the value is UTF-8, else `base64`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateEntry {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base64: Option<String>,
}

impl StateEntry {
    pub fn new(key: &str, value: &[u8]) -> StateEntry {
        match std::str::from_utf8(value) {
            Ok(text) => StateEntry {
                key: key.to_string(),
                text: Some(text.to_string()),
                base64: None,
            },
            Err(_) => StateEntry {
                key: key.to_string(),
                text: None,
                base64: Some(base64::engine::general_purpose::STANDARD.encode(value)),
            },
        }
    }

    fn value(&self) -> Result<Vec<u8>, String> {
        match (&self.text, &self.base64) {
            (Some(text), None) => Ok(text.clone().into_bytes()),
            (None, Some(encoded)) => base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .map_err(|e| format!("key {:?}: base64: {e}", self.key)),
            _ => Err(format!(
                "key {:?}: give exactly one of \"text\" and \"base64\"",
                self.key
            )),
        }
    }
}

/// Every scope's entries by (plugin set, plugin).
pub type States = BTreeMap<(String, String), BTreeMap<String, Vec<u8>>>;

/// `DIR/state.json`: `{"scopes": [{"pluginSet", "plugin", "entries": [{"key", "text"|"base64"}]}]}`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateFile {
    pub scopes: Vec<ScopeEntries>,
}

impl StateFile {
    pub fn from_states(states: &States) -> StateFile {
        StateFile {
            scopes: states
                .iter()
                .map(|((plugin_set, plugin), entries)| scope_entries(plugin_set, plugin, entries))
                .collect(),
        }
    }
}

pub fn scope_entries(
    plugin_set: &str,
    plugin: &str,
    entries: &BTreeMap<String, Vec<u8>>,
) -> ScopeEntries {
    ScopeEntries {
        plugin_set: plugin_set.to_string(),
        plugin: plugin.to_string(),
        entries: entries.iter().map(|(k, v)| StateEntry::new(k, v)).collect(),
    }
}

pub fn state_path(dir: &Path) -> PathBuf {
    dir.join(STATE_FILE)
}

/// The states kept in `dir` (none when it or its state file does not exist yet).
pub fn read_states(dir: &Path) -> Result<States, EvalError> {
    let path = state_path(dir);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(States::new()),
        Err(e) => return Err(EvalError::input(&path, format!("cannot read it: {e}"))),
    };
    let file: StateFile = serde_json::from_slice(&bytes).map_err(|e| {
        EvalError::input(
            &path,
            format!(
                "not a state file (line {}, column {}): {e}",
                e.line(),
                e.column()
            ),
        )
    })?;
    let mut states = States::new();
    for (i, scope) in file.scopes.into_iter().enumerate() {
        let mut entries = BTreeMap::new();
        for entry in &scope.entries {
            let value = entry
                .value()
                .map_err(|m| EvalError::input(&path, format!("scopes[{i}]: {m}")))?;
            entries.insert(entry.key.clone(), value);
        }
        if states
            .insert((scope.plugin_set.clone(), scope.plugin.clone()), entries)
            .is_some()
        {
            return Err(EvalError::input(
                &path,
                format!(
                    "scopes[{i}]: plugin set {:?}, plugin {:?} appears twice",
                    scope.plugin_set, scope.plugin
                ),
            ));
        }
    }
    Ok(states)
}

/// Replace `dir`'s state file with `states` (the directory is created when missing): written
/// beside it and renamed over it, so a failure leaves the previous file whole.
pub fn write_states(dir: &Path, states: &States) -> Result<PathBuf, EvalError> {
    let path = state_path(dir);
    std::fs::create_dir_all(dir)
        .map_err(|e| EvalError::input(dir, format!("cannot create the state directory: {e}")))?;
    let mut json = serde_json::to_vec_pretty(&StateFile::from_states(states))
        .map_err(|e| EvalError::Internal(format!("serialising the state: {e}")))?;
    json.push(b'\n');
    let partial = dir.join(format!(".{STATE_FILE}.{}.partial", std::process::id()));
    let written = std::fs::File::create(&partial)
        .and_then(|mut file| {
            std::io::Write::write_all(&mut file, &json)?;
            file.sync_all()
        })
        .and_then(|()| std::fs::rename(&partial, &path));
    if written.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    written.map_err(|e| EvalError::input(&path, format!("cannot write it: {e}")))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_files_round_trip_text_and_bytes_and_refuse_mistakes() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_states(dir.path()).unwrap().is_empty());
        let mut states = States::new();
        states.insert(
            ("default".into(), "P".into()),
            BTreeMap::from([
                ("runs".to_string(), b"2".to_vec()),
                ("raw".to_string(), vec![0xff, 0, 1]),
            ]),
        );
        let written = write_states(&dir.path().join("new"), &states).unwrap();
        let text = std::fs::read_to_string(&written).unwrap();
        assert!(text.contains(r#""text": "2""#), "{text}");
        assert!(text.contains(r#""base64": "/wAB""#), "{text}");
        assert_eq!(read_states(&dir.path().join("new")).unwrap(), states);

        for (bad, says) in [
            (
                r#"{"scopes": [{"pluginSet": "a", "plugin": "P", "entries": [{"key": "k"}]}]}"#,
                "exactly one of",
            ),
            (
                r#"{"scopes": [{"pluginSet": "a", "plugin": "P", "entries": [{"key": "k", "base64": "%"}]}]}"#,
                "base64",
            ),
            (
                r#"{"scopes": [{"pluginSet": "a", "plugin": "P", "entries": []},
                            {"pluginSet": "a", "plugin": "P", "entries": []}]}"#,
                "appears twice",
            ),
            (r#"{"scope": []}"#, "not a state file"),
        ] {
            std::fs::write(dir.path().join(STATE_FILE), bad).unwrap();
            let message = read_states(dir.path()).unwrap_err().to_string();
            assert!(message.contains(says), "{message}");
            assert!(message.contains(STATE_FILE), "{message}");
        }
    }
}
