use serde_json::json;

use super::*;

fn fields(errors: &[ProfileError]) -> Vec<&str> {
    errors.iter().map(|e| e.field.as_str()).collect()
}

fn errors_of(doc: Value) -> Vec<ProfileError> {
    parse_deschedule_policy(&doc).expect_err("the document should be rejected")
}

#[test]
fn default_profile_is_the_helm_chart_default() {
    let spec = parse_deschedule_policy(&default_profile_document()).unwrap();
    assert_eq!(spec.plugin_sets.len(), 1);
    let set = &spec.plugin_sets[0];
    assert_eq!(set.name, "default");
    let deschedule: Vec<&str> = set.deschedule.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        deschedule,
        [
            "RemovePodsHavingTooManyRestarts",
            "RemovePodsViolatingNodeTaints",
            "RemovePodsViolatingNodeAffinity",
            "RemovePodsViolatingInterPodAntiAffinity",
        ]
    );
    assert_eq!(set.deschedule[0].args["podRestartThreshold"], 100);
    assert_eq!(set.deschedule[0].args["includingInitContainers"], true);
    assert_eq!(
        set.deschedule[2].args["nodeAffinityType"],
        json!(["requiredDuringSchedulingIgnoredDuringExecution"])
    );
    let balance: Vec<&str> = set.balance.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        balance,
        [
            "RemoveDuplicates",
            "RemovePodsViolatingTopologySpreadConstraint",
            "LowNodeUtilization"
        ]
    );
    assert_eq!(set.balance[0].args, json!({}));
    assert_eq!(set.balance[2].args["thresholds"]["cpu"], 20);
    assert_eq!(set.balance[2].args["targetThresholds"]["pods"], 50);
    assert_eq!(
        set.evictor_args["podProtections"]["defaultDisabled"],
        json!(["PodsWithLocalStorage"])
    );
    assert_eq!(
        set.evictor_args["podProtections"]["extraEnabled"],
        json!(["PodsWithPVC"])
    );
    assert_eq!(spec.max_total, None);
}

#[test]
fn multi_profile_document_keeps_order_limits_and_args() {
    let doc = json!({
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "nodeSelector": "pool=batch",
        "maxNoOfPodsToEvictPerNode": 2,
        "maxNoOfPodsToEvictPerNamespace": 3,
        "maxNoOfPodsToEvictTotal": 4,
        "profiles": [
            {
                "name": "hygiene",
                "pluginConfig": [
                    {"name": "DefaultEvictor", "args": {"evictFailedBarePods": true}},
                    {"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": 600}}
                ],
                "plugins": {
                    "filter": {"enabled": ["DefaultEvictor"]},
                    "preevictionfilter": {"enabled": ["DefaultEvictor"]},
                    "deschedule": {"enabled": ["PodLifeTime"]}
                }
            },
            {
                "name": "balance",
                "pluginConfig": [
                    {"name": "RemoveDuplicates", "args": {"excludeOwnerKinds": ["Job"]}},
                    {"name": "LowNodeUtilization", "args": {"thresholds": {"cpu": 10}}}
                ],
                "plugins": {"balance": {"enabled": ["LowNodeUtilization", "RemoveDuplicates"]}}
            }
        ]
    });
    let spec = parse_deschedule_policy(&doc).unwrap();
    assert_eq!(spec.node_selector.as_deref(), Some("pool=batch"));
    assert_eq!(
        (spec.max_per_node, spec.max_per_namespace, spec.max_total),
        (Some(2), Some(3), Some(4))
    );
    let names: Vec<&str> = spec.plugin_sets.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["hygiene", "balance"]);
    assert_eq!(spec.plugin_sets[0].deschedule[0].name, "PodLifeTime");
    assert_eq!(
        spec.plugin_sets[0].evictor_args,
        json!({"evictFailedBarePods": true})
    );
    // DefaultEvictor is injected with default args when the set has no entry for it.
    assert_eq!(spec.plugin_sets[1].evictor_args, json!({}));
    let balance: Vec<&str> = spec.plugin_sets[1]
        .balance
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(balance, ["LowNodeUtilization", "RemoveDuplicates"]);
    assert_eq!(
        spec.plugin_sets[1].balance[1].args,
        json!({"excludeOwnerKinds": ["Job"]})
    );
}

#[test]
fn extension_point_keys_match_case_insensitively_like_go() {
    let doc = json!({
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [{
            "name": "p",
            "pluginConfig": [{"name": "RemoveDuplicates"}],
            "plugins": {
                "preEvictionFilter": {"enabled": ["DefaultEvictor"]},
                "Balance": {"enabled": ["RemoveDuplicates"]}
            }
        }]
    });
    let spec = parse_deschedule_policy(&doc).unwrap();
    assert_eq!(spec.plugin_sets[0].balance[0].name, "RemoveDuplicates");
    assert_eq!(
        policy_doc::extension_point_key(&doc, 0, "preevictionfilter"),
        "preEvictionFilter"
    );
    assert_eq!(
        policy_doc::extension_point_key(&doc, 0, "deschedule"),
        "deschedule"
    );
}

#[test]
fn the_same_extension_point_twice_is_an_error() {
    let errors = errors_of(json!({
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [{
            "name": "p",
            "plugins": {
                "preevictionfilter": {"enabled": ["DefaultEvictor"]},
                "preEvictionFilter": {"enabled": ["DefaultEvictor"]}
            }
        }]
    }));
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].message.contains("given twice"), "{errors:?}");
}

#[test]
fn enabled_plugin_without_plugin_config_is_an_error_but_missing_args_mean_defaults() {
    let errors = errors_of(json!({
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [{
            "name": "p",
            "pluginConfig": [{"name": "RemoveDuplicates"}],
            "plugins": {"balance": {"enabled": ["RemoveDuplicates", "LowNodeUtilization"]}}
        }]
    }));
    assert_eq!(fields(&errors), ["profiles[0].plugins.balance.enabled[1]"]);
    assert!(
        errors[0]
            .message
            .contains("unable to find plugin config for \"LowNodeUtilization\""),
        "{errors:?}"
    );
}

#[test]
fn unknown_and_misplaced_fields_are_reported_by_path() {
    let errors = errors_of(json!({
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "maxNoOfPodsToEvictPernode": 3,
        "pluginConfig": [],
        "profiles": [{
            "name": "p",
            "maxNoOfPodsToEvictTotal": 3,
            "balance": {"enabled": ["RemoveDuplicates"]},
            "pluginConfig": [{"name": "RemoveDuplicates", "arg": {}}],
            "plugins": {
                "balance": {"enabled": ["RemoveDuplicates"], "enable": []},
                "evict": {"enabled": []}
            }
        }]
    }));
    let mut got: Vec<(String, String)> = errors.into_iter().map(|e| (e.field, e.message)).collect();
    got.sort();
    let expect = |field: &str, needle: &str| {
        assert!(
            got.iter().any(|(f, m)| f == field && m.contains(needle)),
            "expected {field}: …{needle}… in {got:#?}"
        );
    };
    expect(
        "maxNoOfPodsToEvictPernode",
        "did you mean `maxNoOfPodsToEvictPerNode`",
    );
    expect("pluginConfig", "belongs in profiles[]");
    expect(
        "profiles[0].maxNoOfPodsToEvictTotal",
        "belongs in the top level",
    );
    expect("profiles[0].balance", "belongs in plugins");
    expect("profiles[0].pluginConfig[0].arg", "unknown field");
    expect("profiles[0].plugins.balance.enable", "unknown field");
    expect("profiles[0].plugins.evict", "unknown extension point");
    assert_eq!(got.len(), 7, "{got:#?}");
}

#[test]
fn wrong_api_version_kind_and_types_are_errors() {
    let errors = errors_of(json!({
        "apiVersion": "descheduler/v1alpha1",
        "kind": "Policy",
        "maxNoOfPodsToEvictTotal": -1,
        "maxNoOfPodsToEvictPerNode": 1e12,
        "nodeSelector": 3,
        "profiles": {"name": "p"}
    }));
    assert_eq!(
        fields(&errors),
        [
            "apiVersion",
            "kind",
            "nodeSelector",
            "maxNoOfPodsToEvictPerNode",
            "maxNoOfPodsToEvictTotal",
            "profiles"
        ]
    );
    assert!(errors[0].message.contains("v1alpha1"), "{errors:?}");
    assert!(errors[0].message.contains("removed"), "{errors:?}");

    let errors = errors_of(json!({"kind": "DeschedulerPolicy", "profiles": []}));
    assert_eq!(fields(&errors), ["apiVersion"]);

    let errors = errors_of(json!(["not", "an", "object"]));
    assert_eq!(fields(&errors), [""]);
    assert!(errors[0].message.contains("got a list"));
}

#[test]
fn plugin_placement_rules() {
    let errors = errors_of(json!({
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [{
            "name": "p",
            "pluginConfig": [
                {"name": "RemoveDuplicates"},
                {"name": "RemoveDuplicates", "args": {}},
                {"name": "LowNodeUtilization", "args": "cpu=20"}
            ],
            "plugins": {
                "filter": {"enabled": ["DefaultEvictor", "MyEvictor"]},
                "sort": {"enabled": ["Priority"]},
                "deschedule": {"enabled": ["DefaultEvictor"]},
                "balance": {"enabled": ["RemoveDuplicates", "RemoveDuplicates", 7]}
            }
        }, {
            "pluginConfig": [],
            "plugins": []
        }, {
            "name": "p"
        }]
    }));
    let got = fields(&errors);
    assert_eq!(
        got,
        [
            "profiles[0].pluginConfig[1].name",
            "profiles[0].pluginConfig[2].args",
            // Object keys are visited in sorted order (serde_json's map).
            "profiles[0].plugins.balance.enabled[2]",
            "profiles[0].plugins.balance.enabled[1]",
            "profiles[0].plugins.deschedule.enabled[0]",
            "profiles[0].plugins.filter.enabled[1]",
            "profiles[0].plugins.sort.enabled[0]",
            "profiles[1].name",
            "profiles[1].plugins",
            "profiles[2].name",
        ],
        "{errors:#?}"
    );
    assert!(errors[0].message.contains("duplicate pluginConfig"));
    assert!(errors[3].message.contains("enabled twice"));
    assert!(errors[4].message.contains("evictor plugin"));
    assert!(
        errors[5]
            .message
            .contains("only evictor plugin is DefaultEvictor")
    );
    assert!(errors[6].message.contains("no plugin implements the sort"));
    assert!(errors[9].message.contains("duplicate profile name"));
}

#[test]
fn accepted_fields_without_effect_are_warnings() {
    let doc = json!({
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "gracePeriodSeconds": 30,
        "evictionFailureEventNotification": true,
        "metricsProviders": [{"source": "KubernetesMetrics"}],
        "profiles": [{
            "name": "p",
            "pluginConfig": [{"name": "RemoveDuplicates"}, {"name": "PodLifeTime"}],
            "plugins": {"balance": {"enabled": ["RemoveDuplicates"], "disabled": ["X"]}}
        }]
    });
    let parsed = parse_with_warnings(&doc).unwrap();
    let warned: Vec<&str> = parsed.warnings.iter().map(|w| w.field.as_str()).collect();
    assert_eq!(
        warned,
        [
            "evictionFailureEventNotification",
            "metricsProviders",
            "profiles[0].plugins.balance.disabled",
            "profiles[0].pluginConfig[1]",
        ]
    );
    assert!(parsed.warnings[3].message.contains("not enabled"));
}

#[test]
fn args_paths_point_into_the_document() {
    let doc = default_profile_document();
    assert_eq!(
        policy_doc::plugin_args_path(&doc, 0, "LowNodeUtilization"),
        "profiles[0].pluginConfig[7].args"
    );
    assert_eq!(
        policy_doc::plugin_args_path(&doc, 0, "Nope"),
        "profiles[0].pluginConfig"
    );
}

#[test]
fn spec_round_trips_through_json() {
    let spec = parse_deschedule_policy(&default_profile_document()).unwrap();
    let text = serde_json::to_string(&spec).unwrap();
    assert!(text.contains("\"pluginSets\""), "{text}");
    let back: ProfileSpec = serde_json::from_str(&text).unwrap();
    assert_eq!(back, spec);
}

#[test]
fn profile_error_display_names_the_field() {
    assert_eq!(
        ProfileError::new("profiles[0].name", "missing").to_string(),
        "profiles[0].name: missing"
    );
    assert_eq!(ProfileError::new("", "bad").to_string(), "bad");
}

#[test]
fn node_selector_and_evictor_args_are_checked() {
    let errors = errors_of(json!({
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "nodeSelector": "pool in (a,",
        "profiles": [{
            "name": "p",
            "pluginConfig": [
                {"name": "RemoveDuplicates"},
                {"name": "DefaultEvictor", "args": {"evictPodsWithPVC": true}}
            ],
            "plugins": {"balance": {"enabled": ["RemoveDuplicates"]}}
        }, {
            "name": "q",
            "pluginConfig": [
                {"name": "DefaultEvictor", "args": {
                    "priorityThreshold": {"value": 10, "name": "high"}
                }}
            ]
        }]
    }));
    assert_eq!(errors[0].field, "nodeSelector");
    assert!(
        errors[0].message.contains("invalid label selector"),
        "{errors:?}"
    );
    assert_eq!(errors[1].field, "profiles[0].pluginConfig[1].args");
    assert!(errors[1].message.contains("evictPodsWithPVC"), "{errors:?}");
    assert!(
        errors[2]
            .field
            .starts_with("profiles[1].pluginConfig[0].args"),
        "{errors:?}"
    );
    assert_eq!(errors.len(), 3, "{errors:#?}");

    let ok = json!({
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "nodeSelector": "pool in (a,b),!spot",
        "profiles": [{
            "name": "p",
            "pluginConfig": [{"name": "DefaultEvictor", "args": {
                "minPodAge": "5m", "nodeFit": true, "priorityThreshold": {"name": "high"}
            }}]
        }]
    });
    let spec = parse_deschedule_policy(&ok).unwrap();
    assert_eq!(spec.node_selector.as_deref(), Some("pool in (a,b),!spot"));
}
