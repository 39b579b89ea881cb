//! EvictorConfig: resolving the args against a snapshot.

use super::*;

#[test]
fn priority_threshold_resolution() {
    let base = two_nodes()
        .priority_class("standard", 1000)
        .priority_class("huge", 2_000_000_001);
    let s = base
        .clone()
        .evictor_args(r#"{"priorityThreshold": {"name": "standard"}}"#)
        .session();
    assert_eq!(s.config().unwrap().priority_threshold(), Some(1000));
    let s = base
        .clone()
        .evictor_args(r#"{"priorityThreshold": {"value": 5}}"#)
        .session();
    assert_eq!(s.config().unwrap().priority_threshold(), Some(5));
    let s = base
        .clone()
        .evictor_args(r#"{"priorityThreshold": {"name": "missing"}}"#)
        .session();
    let e = s.config().unwrap_err();
    assert!(
        e[0].field == "priorityThreshold.name" && e[0].message.contains("\"missing\""),
        "{e:?}"
    );
    let s = base
        .clone()
        .evictor_args(r#"{"priorityThreshold": {"name": "huge"}}"#)
        .session();
    assert!(
        s.config().unwrap_err()[0]
            .message
            .contains("can't be greater than 2000000000")
    );
    let s = base
        .clone()
        .evictor_args(r#"{"priorityThreshold": {"value": 2000000001}}"#)
        .session();
    assert!(s.config().is_err());
    // Without SystemCriticalPods the threshold is not even looked up.
    let s = base
        .clone()
        .evictor_args(
            r#"{"evictSystemCriticalPods": true, "priorityThreshold": {"name": "missing"}}"#,
        )
        .session();
    assert_eq!(s.config().unwrap().priority_threshold(), None);
    let s = base.session();
    assert_eq!(s.config().unwrap(), &EvictorConfig::defaults(s.cluster()));
}
