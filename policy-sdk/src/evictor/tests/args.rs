//! DefaultEvictorArgs: JSON names and validation rules.

use super::*;

#[test]
fn args_json_names_match_descheduler() {
    let json = r#"{
        "nodeSelector": "pool=a",
        "labelSelector": {"matchLabels": {"app": "web"}},
        "namespaceLabelSelector": {"matchExpressions": [{"key": "team", "operator": "Exists"}]},
        "priorityThreshold": {"value": 100},
        "nodeFit": true,
        "minReplicas": 2,
        "minPodAge": "5m",
        "noEvictionPolicy": "Mandatory",
        "podProtections": {
            "extraEnabled": ["PodsWithPVC", "PodsWithoutPDB", "PodsWithResourceClaims"],
            "defaultDisabled": ["PodsWithLocalStorage", "DaemonSetPods", "SystemCriticalPods", "FailedBarePods"],
            "config": {"PodsWithPVC": {"protectedStorageClasses": [{"name": "local-path"}]}}
        }
    }"#;
    let args = DefaultEvictorArgs::from_json(json).unwrap();
    assert!(args.validate().is_empty(), "{:?}", args.validate());
    assert_eq!(args.protected_storage_classes(), vec!["local-path"]);
    let p = args.effective_protections();
    assert_eq!(
        p,
        Protections {
            local_storage: false,
            daemon_set: false,
            system_critical: false,
            failed_bare: false,
            pvc: true,
            without_pdb: true,
            resource_claims: true,
        }
    );
    let legacy = DefaultEvictorArgs::from_json(
        r#"{"evictLocalStoragePods": true, "evictDaemonSetPods": true, "evictSystemCriticalPods": true,
            "evictFailedBarePods": true, "ignorePvcPods": true, "ignorePodsWithoutPDB": true,
            "apiVersion": "descheduler/v1alpha2", "kind": "DefaultEvictorArgs"}"#,
    )
    .unwrap();
    assert_eq!(
        legacy.effective_protections(),
        Protections {
            resource_claims: false,
            ..p
        },
        "there is no deprecated flag for ResourceClaims"
    );
    assert_eq!(
        DefaultEvictorArgs::default().effective_protections(),
        Protections {
            local_storage: true,
            daemon_set: true,
            system_critical: true,
            failed_bare: true,
            ..Protections::default()
        }
    );
    for bad in [
        r#"{"nodefit": true}"#,
        r#"{"ignorePodsWithoutPdb": true}"#,
        r#"{"minReplicas": -1}"#,
        r#"{"podProtections": {"config": {"PodsWithPvc": {}}}}"#,
    ] {
        assert!(DefaultEvictorArgs::from_json(bad).is_err(), "{bad}");
    }
    assert_eq!(
        DefaultEvictorArgs::from_json(" null ").unwrap(),
        DefaultEvictorArgs::default()
    );
}

#[test]
fn validation_rules() {
    let cases: &[(&str, &str, &str)] = &[
        (
            r#"{"priorityThreshold": {"value": 1, "name": "x"}}"#,
            "priorityThreshold",
            "only one of priorityThreshold fields can be set",
        ),
        (
            r#"{"noEvictionPolicy": "Always"}"#,
            "noEvictionPolicy",
            "accepts only",
        ),
        (
            r#"{"evictLocalStoragePods": true, "podProtections": {"defaultDisabled": ["DaemonSetPods"]}}"#,
            "podProtections",
            "cannot use Deprecated fields",
        ),
        (
            r#"{"ignorePodsWithoutPDB": true, "podProtections": {"extraEnabled": ["PodsWithPVC"]}}"#,
            "podProtections",
            "cannot use Deprecated fields",
        ),
        (
            r#"{"podProtections": {"extraEnabled": ["PodsWithPVCC"]}}"#,
            "podProtections.extraEnabled[0]",
            "invalid pod protection policy in ExtraEnabled: \"PodsWithPVCC\". Valid options are: [PodsWithPVC PodsWithoutPDB PodsWithResourceClaims]",
        ),
        (
            r#"{"podProtections": {"extraEnabled": ["DaemonSetPods"]}}"#,
            "podProtections.extraEnabled[0]",
            "ExtraEnabled",
        ),
        (
            r#"{"podProtections": {"defaultDisabled": ["PodsWithPVC"]}}"#,
            "podProtections.defaultDisabled[0]",
            "Valid options are: [PodsWithLocalStorage SystemCriticalPods FailedBarePods DaemonSetPods]",
        ),
        (
            r#"{"podProtections": {"defaultDisabled": ["DaemonSetPods", "DaemonSetPods"]}}"#,
            "podProtections.defaultDisabled",
            "PodProtections.DefaultDisabled contains duplicate entries",
        ),
        (
            r#"{"podProtections": {"extraEnabled": ["PodsWithPVC", "PodsWithPVC"]}}"#,
            "podProtections.extraEnabled",
            "PodProtections.ExtraEnabled contains duplicate entries",
        ),
        (
            r#"{"nodeSelector": "a in b"}"#,
            "nodeSelector",
            "expected: '('",
        ),
        (
            r#"{"minPodAge": "5 minutes"}"#,
            "minPodAge",
            "\"5 minutes\"",
        ),
        (
            r#"{"labelSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}"#,
            "labelSelector.matchExpressions[0].values",
            "must be specified",
        ),
        (
            r#"{"namespaceLabelSelector": {"matchLabels": {"a": "not ok"}}}"#,
            "namespaceLabelSelector.matchLabels.a",
            "invalid label value",
        ),
    ];
    for (json, field, msg) in cases {
        let errors = DefaultEvictorArgs::from_json(json).unwrap().validate();
        assert!(
            errors
                .iter()
                .any(|e| e.field == *field && e.message.contains(msg)),
            "{json}: want {field}: {msg}, got {errors:?}"
        );
    }
    // minReplicas 1 only warns in descheduler.
    assert!(
        DefaultEvictorArgs::from_json(r#"{"minReplicas": 1}"#)
            .unwrap()
            .validate()
            .is_empty()
    );
    // Several problems are all reported.
    let many = DefaultEvictorArgs::from_json(
        r#"{"noEvictionPolicy": "x", "nodeSelector": "!", "minPodAge": "1"}"#,
    )
    .unwrap();
    assert_eq!(many.validate().len(), 3, "{:?}", many.validate());
}
