//! The DeschedulerPolicy v1alpha2 reader: walks the JSON document, collects every error and
//! warning with its path, and builds the [`ProfileSpec`].
//!
//! Semantics follow descheduler v0.36 (`pkg/api/v1alpha2`, `pkg/descheduler/policyconfig.go`,
//! `pkg/framework/profile/profile.go`): extension-point keys are lower case but matched
//! case-insensitively (Go's JSON decoding does), DefaultEvictor is added to every plugin set
//! with default args when it has no `pluginConfig` entry, every other enabled plugin needs a
//! `pluginConfig` entry ("unable to find plugin config"), and an entry without `args` means the
//! plugin's defaults.

use rebalancer_policy_sdk::evictor::DefaultEvictorArgs;
use rebalancer_policy_sdk::k8s::selector::Selector;
use serde_json::{Map, Value};

use super::{
    API_VERSION, DEFAULT_EVICTOR, KIND, PluginSetSpec, PluginSpec, ProfileError, ProfileSpec,
};

/// A parsed document: the spec plus the fields that were accepted but have no effect.
#[derive(Clone, Debug)]
pub struct ParsedPolicy {
    pub spec: ProfileSpec,
    pub warnings: Vec<ProfileError>,
}

const TOP_LEVEL: &[&str] = &[
    "apiVersion",
    "kind",
    "profiles",
    "nodeSelector",
    "maxNoOfPodsToEvictPerNode",
    "maxNoOfPodsToEvictPerNamespace",
    "maxNoOfPodsToEvictTotal",
    "evictionFailureEventNotification",
    "gracePeriodSeconds",
    "metricsCollector",
    "metricsProviders",
];
const PROFILE_LEVEL: &[&str] = &["name", "pluginConfig", "plugins"];
const PLUGIN_CONFIG_LEVEL: &[&str] = &["name", "args"];
const PLUGIN_SET_LEVEL: &[&str] = &["enabled", "disabled"];
/// The extension points of v1alpha2, as the Go JSON tags spell them.
const EXTENSION_POINTS: &[&str] = &[
    "presort",
    "sort",
    "deschedule",
    "balance",
    "filter",
    "preevictionfilter",
];

/// Parse a DeschedulerPolicy document, returning the spec and warnings, or every error found.
pub fn parse_with_warnings(doc: &Value) -> Result<ParsedPolicy, Vec<ProfileError>> {
    let outcome = parse_all(doc);
    if outcome.errors.is_empty() {
        Ok(outcome.parsed)
    } else {
        Err(outcome.errors)
    }
}

/// Everything a read of a document found: the spec of the parts that parsed (so that their
/// plugins can be checked too, and a body with several problems gets them all in one answer),
/// the warnings, and the errors.
#[derive(Debug)]
pub struct ParseOutcome {
    pub parsed: ParsedPolicy,
    pub errors: Vec<ProfileError>,
}

/// Read a DeschedulerPolicy document to the end, whatever it finds on the way.
pub fn parse_all(doc: &Value) -> ParseOutcome {
    let mut reader = Reader::default();
    let spec = reader.policy(doc);
    ParseOutcome {
        parsed: ParsedPolicy {
            spec,
            warnings: reader.warnings,
        },
        errors: reader.errors,
    }
}

/// The key the document uses for an extension point of `profiles[set_index]` (it may be spelled
/// `preEvictionFilter`), or the canonical lower-case key when absent.
pub fn extension_point_key(doc: &Value, set_index: usize, point: &str) -> String {
    doc.pointer(&format!("/profiles/{set_index}/plugins"))
        .and_then(Value::as_object)
        .and_then(|plugins| plugins.keys().find(|k| k.eq_ignore_ascii_case(point)))
        .cloned()
        .unwrap_or_else(|| point.to_string())
}

/// Path of a plugin's args in the document: `profiles[i].pluginConfig[j].args`.
pub(super) fn plugin_args_path(doc: &Value, set_index: usize, plugin: &str) -> String {
    let entry = doc
        .pointer(&format!("/profiles/{set_index}/pluginConfig"))
        .and_then(Value::as_array)
        .and_then(|configs| {
            configs
                .iter()
                .position(|c| c.get("name").and_then(Value::as_str) == Some(plugin))
        });
    match entry {
        Some(j) => format!("profiles[{set_index}].pluginConfig[{j}].args"),
        None => format!("profiles[{set_index}].pluginConfig"),
    }
}

#[derive(Default)]
struct Reader {
    errors: Vec<ProfileError>,
    warnings: Vec<ProfileError>,
}

/// One `pluginConfig` entry.
struct PluginConfig {
    name: String,
    args: Value,
    index: usize,
}

impl Reader {
    fn error(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.errors.push(ProfileError::new(field, message));
    }

    fn warn(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.warnings.push(ProfileError::new(field, message));
    }

    fn policy(&mut self, doc: &Value) -> ProfileSpec {
        let mut spec = ProfileSpec {
            node_selector: None,
            max_per_node: None,
            max_per_namespace: None,
            max_total: None,
            plugin_sets: Vec::new(),
        };
        let Some(top) = doc.as_object() else {
            self.error(
                "",
                format!(
                    "a DeschedulerPolicy must be an object (apiVersion: {API_VERSION}, kind: \
                     {KIND}, profiles: [...]), got {}",
                    type_name(doc)
                ),
            );
            return spec;
        };
        self.unknown_fields("", top, TOP_LEVEL, &[(PROFILE_LEVEL, "profiles[]")]);

        match top.get("apiVersion") {
            None => self.error(
                "apiVersion",
                format!("missing: a DeschedulerPolicy needs apiVersion: {API_VERSION}"),
            ),
            Some(Value::String(v)) if v == API_VERSION => {}
            Some(Value::String(v)) if v == "descheduler/v1alpha1" => self.error(
                "apiVersion",
                "descheduler/v1alpha1 (the `strategies:` format) was removed in descheduler \
                 v0.31; convert the document to descheduler/v1alpha2 (profiles, pluginConfig, \
                 plugins)",
            ),
            Some(other) => self.error(
                "apiVersion",
                format!("must be {API_VERSION}, got {}", show(other)),
            ),
        }
        match top.get("kind") {
            None => self.error("kind", format!("missing: must be {KIND}")),
            Some(Value::String(v)) if v == KIND => {}
            Some(other) => self.error("kind", format!("must be {KIND}, got {}", show(other))),
        }

        spec.node_selector = match top.get("nodeSelector") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if s.trim().is_empty() => None,
            Some(Value::String(s)) => match Selector::parse(s) {
                Ok(_) => Some(s.clone()),
                Err(e) => {
                    self.error("nodeSelector", e.to_string());
                    None
                }
            },
            Some(other) => {
                self.error(
                    "nodeSelector",
                    format!(
                        "must be a label selector string such as \"pool=batch,zone!=a\", got {}",
                        show(other)
                    ),
                );
                None
            }
        };
        spec.max_per_node = self.optional_count(top, "maxNoOfPodsToEvictPerNode");
        spec.max_per_namespace = self.optional_count(top, "maxNoOfPodsToEvictPerNamespace");
        spec.max_total = self.optional_count(top, "maxNoOfPodsToEvictTotal");

        match top.get("evictionFailureEventNotification") {
            None | Some(Value::Null) => {}
            Some(Value::Bool(_)) => self.warn(
                "evictionFailureEventNotification",
                "accepted but has no effect: runs write no Kubernetes events; every refused \
                 eviction is recorded in the run report instead",
            ),
            Some(other) => self.error(
                "evictionFailureEventNotification",
                format!("must be true or false, got {}", show(other)),
            ),
        }
        match top.get("gracePeriodSeconds") {
            None | Some(Value::Null) => {}
            // Applied by the Kubernetes backend to every eviction of this profile's decisions.
            Some(v) if v.as_i64().is_some_and(|n| n >= 0) => {}
            Some(other) => self.error(
                "gracePeriodSeconds",
                format!("must be a whole number of seconds ≥ 0, got {}", show(other)),
            ),
        }
        for field in ["metricsCollector", "metricsProviders"] {
            if top.get(field).is_some_and(|v| !v.is_null()) {
                self.warn(
                    field,
                    "accepted but has no effect: no plugin of this server reads metrics yet; \
                     utilization is computed from pod requests",
                );
            }
        }

        match top.get("profiles") {
            None | Some(Value::Null) => self.error(
                "profiles",
                "missing: a DeschedulerPolicy needs a list of profiles, each with a name, \
                 pluginConfig and plugins",
            ),
            Some(Value::Array(profiles)) => {
                if profiles.is_empty() {
                    self.warn("profiles", "empty: runs of this profile propose nothing");
                }
                let mut names: Vec<(String, usize)> = Vec::new();
                for (index, profile) in profiles.iter().enumerate() {
                    if let Some(set) = self.plugin_set(index, profile) {
                        if let Some((_, first)) = names.iter().find(|(n, _)| *n == set.name) {
                            self.error(
                                format!("profiles[{index}].name"),
                                format!(
                                    "duplicate profile name \"{}\" (also profiles[{first}])",
                                    set.name
                                ),
                            );
                        } else {
                            names.push((set.name.clone(), index));
                        }
                        spec.plugin_sets.push(set);
                    }
                }
            }
            Some(other) => self.error(
                "profiles",
                format!("must be a list of profiles, got {}", show(other)),
            ),
        }
        spec
    }

    /// One `profiles[index]` entry.
    fn plugin_set(&mut self, index: usize, profile: &Value) -> Option<PluginSetSpec> {
        let at = format!("profiles[{index}]");
        let Some(fields) = profile.as_object() else {
            self.error(
                at,
                format!(
                    "must be an object with name, pluginConfig and plugins, got {}",
                    type_name(profile)
                ),
            );
            return None;
        };
        self.unknown_fields(
            &at,
            fields,
            PROFILE_LEVEL,
            &[
                (TOP_LEVEL, "the top level of the document"),
                (PLUGIN_SET_LEVEL, "plugins.<extension point>"),
                (PLUGIN_CONFIG_LEVEL, "pluginConfig[]"),
                (EXTENSION_POINTS, "plugins"),
            ],
        );
        let name = match fields.get("name") {
            Some(Value::String(n)) if !n.trim().is_empty() => n.clone(),
            Some(other) if !other.is_null() => {
                self.error(
                    format!("{at}.name"),
                    format!("must be a non-empty string, got {}", show(other)),
                );
                String::new()
            }
            _ => {
                self.error(format!("{at}.name"), "missing: every profile needs a name");
                String::new()
            }
        };
        let configs = self.plugin_configs(&at, fields.get("pluginConfig"));

        let mut deschedule = Vec::new();
        let mut balance = Vec::new();
        let mut used: Vec<String> = Vec::new();
        match fields.get("plugins") {
            None | Some(Value::Null) => self.warn(
                format!("{at}.plugins"),
                "missing: this profile enables no plugin and proposes nothing",
            ),
            Some(Value::Object(points)) => {
                let mut seen: Vec<(&str, &String)> = Vec::new();
                for (key, value) in points {
                    let field = format!("{at}.plugins.{key}");
                    let Some(point) = EXTENSION_POINTS
                        .iter()
                        .copied()
                        .find(|p| p.eq_ignore_ascii_case(key))
                    else {
                        self.error(
                            field,
                            format!(
                                "unknown extension point; the extension points are {}",
                                EXTENSION_POINTS.join(", ")
                            ),
                        );
                        continue;
                    };
                    if let Some((_, earlier)) = seen.iter().find(|(p, _)| *p == point) {
                        self.error(
                            field,
                            format!(
                                "the {point} extension point is given twice (also as `{earlier}`)"
                            ),
                        );
                        continue;
                    }
                    seen.push((point, key));
                    let enabled = self.enabled_list(&field, value);
                    match point {
                        "deschedule" | "balance" => {
                            let mut plugins = Vec::new();
                            for (i, plugin) in enabled {
                                let item = format!("{field}.enabled[{i}]");
                                if plugin == DEFAULT_EVICTOR {
                                    self.error(
                                        item,
                                        "DefaultEvictor is the evictor plugin: it belongs under \
                                         filter and preEvictionFilter (where it is added \
                                         automatically), not here",
                                    );
                                    continue;
                                }
                                if plugins.iter().any(|p: &PluginSpec| p.name == plugin) {
                                    self.error(
                                        item,
                                        format!("plugin \"{plugin}\" is enabled twice at {point}"),
                                    );
                                    continue;
                                }
                                let Some(config) = configs.iter().find(|c| c.name == plugin) else {
                                    self.error(
                                        item,
                                        format!(
                                            "unable to find plugin config for \"{plugin}\": add \
                                             {{\"name\": \"{plugin}\", \"args\": {{...}}}} to \
                                             {at}.pluginConfig (omit args to use the plugin's \
                                             defaults)"
                                        ),
                                    );
                                    continue;
                                };
                                used.push(plugin.clone());
                                plugins.push(PluginSpec {
                                    name: plugin,
                                    args: config.args.clone(),
                                });
                            }
                            if point == "deschedule" {
                                deschedule = plugins;
                            } else {
                                balance = plugins;
                            }
                        }
                        "filter" | "preevictionfilter" => {
                            for (i, plugin) in enabled {
                                if plugin != DEFAULT_EVICTOR {
                                    self.error(
                                        format!("{field}.enabled[{i}]"),
                                        format!(
                                            "\"{plugin}\" cannot be enabled at {key}: the only \
                                             evictor plugin is DefaultEvictor (custom evictors \
                                             are not supported)"
                                        ),
                                    );
                                }
                            }
                        }
                        _ => {
                            // presort and sort exist in the API but nothing implements them.
                            if let Some((i, plugin)) = enabled.into_iter().next() {
                                self.error(
                                    format!("{field}.enabled[{i}]"),
                                    format!(
                                        "\"{plugin}\" cannot be enabled at {key}: no plugin \
                                         implements the {point} extension point (descheduler \
                                         has none either)"
                                    ),
                                );
                            }
                        }
                    }
                }
            }
            Some(other) => self.error(
                format!("{at}.plugins"),
                format!(
                    "must be an object keyed by extension point (deschedule, balance, ...), got {}",
                    show(other)
                ),
            ),
        }

        for config in &configs {
            if config.name != DEFAULT_EVICTOR && !used.contains(&config.name) {
                self.warn(
                    format!("{at}.pluginConfig[{}]", config.index),
                    format!(
                        "\"{}\" is configured but not enabled at deschedule or balance; it will \
                         not run",
                        config.name
                    ),
                );
            }
        }
        let evictor = configs.iter().find(|c| c.name == DEFAULT_EVICTOR);
        if let Some(config) = evictor {
            self.evictor_args(
                &format!("{at}.pluginConfig[{}].args", config.index),
                &config.args,
            );
        }
        let evictor_args = evictor
            .map(|c| c.args.clone())
            .unwrap_or_else(|| Value::Object(Map::new()));
        Some(PluginSetSpec {
            name,
            evictor_args,
            deschedule,
            balance,
        })
    }

    fn plugin_configs(&mut self, at: &str, value: Option<&Value>) -> Vec<PluginConfig> {
        let mut configs: Vec<PluginConfig> = Vec::new();
        let entries = match value {
            None | Some(Value::Null) => return configs,
            Some(Value::Array(entries)) => entries,
            Some(other) => {
                self.error(
                    format!("{at}.pluginConfig"),
                    format!(
                        "must be a list of {{name, args}} entries, got {}",
                        show(other)
                    ),
                );
                return configs;
            }
        };
        for (index, entry) in entries.iter().enumerate() {
            let field = format!("{at}.pluginConfig[{index}]");
            let Some(fields) = entry.as_object() else {
                self.error(
                    field,
                    format!("must be an object {{name, args}}, got {}", type_name(entry)),
                );
                continue;
            };
            self.unknown_fields(
                &field,
                fields,
                PLUGIN_CONFIG_LEVEL,
                &[(PROFILE_LEVEL, "profiles[]")],
            );
            let name = match fields.get("name") {
                Some(Value::String(n)) if !n.trim().is_empty() => n.clone(),
                Some(other) if !other.is_null() => {
                    self.error(
                        format!("{field}.name"),
                        format!("must be the plugin's name, got {}", show(other)),
                    );
                    continue;
                }
                _ => {
                    self.error(
                        format!("{field}.name"),
                        "missing: every pluginConfig entry names its plugin",
                    );
                    continue;
                }
            };
            let args = match fields.get("args") {
                None | Some(Value::Null) => Value::Object(Map::new()),
                Some(args @ Value::Object(_)) => args.clone(),
                Some(other) => {
                    self.error(
                        format!("{field}.args"),
                        format!("must be an object, got {}", show(other)),
                    );
                    continue;
                }
            };
            if let Some(first) = configs.iter().find(|c| c.name == name) {
                self.error(
                    format!("{field}.name"),
                    format!(
                        "duplicate pluginConfig for \"{name}\" (also {at}.pluginConfig[{}])",
                        first.index
                    ),
                );
                continue;
            }
            configs.push(PluginConfig { name, args, index });
        }
        configs
    }

    /// DefaultEvictor's args: known fields with the right types, and descheduler's validation.
    /// (A `priorityThreshold.name` is resolved against the cluster when a run starts.)
    fn evictor_args(&mut self, at: &str, args: &Value) {
        match serde_json::from_value::<DefaultEvictorArgs>(args.clone()) {
            Ok(parsed) => {
                for e in parsed.validate() {
                    let field = if e.field.is_empty() {
                        at.to_string()
                    } else {
                        format!("{at}.{}", e.field)
                    };
                    self.error(field, e.message);
                }
            }
            Err(e) => self.error(at, format!("invalid DefaultEvictor args: {e}")),
        }
    }

    /// `{enabled: [...], disabled: [...]}` → the enabled names with their indexes.
    fn enabled_list(&mut self, field: &str, value: &Value) -> Vec<(usize, String)> {
        let fields = match value {
            Value::Null => return Vec::new(),
            Value::Object(fields) => fields,
            other => {
                self.error(
                    field,
                    format!(
                        "must be an object {{enabled: [plugin names]}}, got {}",
                        show(other)
                    ),
                );
                return Vec::new();
            }
        };
        self.unknown_fields(field, fields, PLUGIN_SET_LEVEL, &[]);
        if let Some(disabled) = fields.get("disabled")
            && disabled.as_array().is_some_and(|d| !d.is_empty())
        {
            self.warn(
                format!("{field}.disabled"),
                "ignored: there are no default-enabled plugins to disable (descheduler ignores \
                 `disabled` too)",
            );
        }
        let mut names = Vec::new();
        match fields.get("enabled") {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    match item.as_str() {
                        Some(name) if !name.trim().is_empty() => names.push((i, name.to_string())),
                        _ => self.error(
                            format!("{field}.enabled[{i}]"),
                            format!("must be a plugin name, got {}", show(item)),
                        ),
                    }
                }
            }
            Some(other) => self.error(
                format!("{field}.enabled"),
                format!("must be a list of plugin names, got {}", show(other)),
            ),
        }
        names
    }

    /// A `*uint` limit: absent or null → None.
    fn optional_count(&mut self, top: &Map<String, Value>, key: &str) -> Option<u32> {
        match top.get(key) {
            None | Some(Value::Null) => None,
            Some(value) => match value.as_u64().map(u32::try_from) {
                Some(Ok(n)) => Some(n),
                Some(Err(_)) => {
                    self.error(key, format!("{value} is too large (at most {})", u32::MAX));
                    None
                }
                None => {
                    self.error(
                        key,
                        format!("must be a whole number ≥ 0, got {}", show(value)),
                    );
                    None
                }
            },
        }
    }

    /// Report fields not in `known`, with a hint when they are misspelt or belong elsewhere.
    fn unknown_fields(
        &mut self,
        at: &str,
        fields: &Map<String, Value>,
        known: &[&str],
        elsewhere: &[(&[&str], &str)],
    ) {
        for key in fields.keys() {
            if known.contains(&key.as_str()) {
                continue;
            }
            let field = if at.is_empty() {
                key.clone()
            } else {
                format!("{at}.{key}")
            };
            let message = if let Some(right) = known.iter().find(|k| k.eq_ignore_ascii_case(key)) {
                format!("unknown field; did you mean `{right}`?")
            } else if let Some((_, place)) = elsewhere
                .iter()
                .find(|(keys, _)| keys.iter().any(|k| k.eq_ignore_ascii_case(key)))
            {
                format!("misplaced field: `{key}` belongs in {place}")
            } else {
                format!("unknown field; expected one of {}", known.join(", "))
            };
            self.error(field, message);
        }
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A short rendering of a value for messages.
fn show(value: &Value) -> String {
    match value {
        Value::Array(_) | Value::Object(_) => type_name(value).to_string(),
        scalar => scalar.to_string(),
    }
}
