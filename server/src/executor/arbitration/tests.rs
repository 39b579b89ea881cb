use super::*;

fn pod(name: &str, node: &str) -> PodFacts {
    PodFacts {
        cluster: "east".into(),
        uid: format!("uid-{name}"),
        namespace: "shop".into(),
        name: name.into(),
        node: node.into(),
        koord_priority: KoordPriority::None,
        priority: 0,
        qos: KubeQos::Burstable,
        koord_qos: KoordQos::None,
        deletion_cost: 0,
        eviction_cost: 0,
        creation_ms: 1_000,
        workload: None,
        job: None,
        evict_annotation: false,
        never_migrate: None,
    }
}

/// Lower ids are newer, so that equal pods are considered in id order.
fn candidate(id: i64, pod: PodFacts) -> Candidate {
    Candidate {
        migration: id,
        created_ms: 1_000 - id,
        pod,
    }
}

fn workload(key: &str, replicas: u32, unavailable: &[&str]) -> Workload {
    Workload {
        key: key.into(),
        display: format!("ReplicaSet shop/{key}"),
        replicas,
        unavailable: unavailable.iter().map(|s| s.to_string()).collect(),
    }
}

fn owned(mut p: PodFacts, w: &str) -> PodFacts {
    p.workload = Some(w.into());
    p
}

/// The same pod in another cluster.
fn in_cluster(mut p: PodFacts, cluster: &str) -> PodFacts {
    p.cluster = cluster.into();
    p
}

/// Every cluster on `config`.
fn everywhere(config: ArbitrationConfig) -> ArbitrationConfigs {
    ArbitrationConfigs {
        global: config,
        clusters: HashMap::new(),
    }
}

/// Workloads by cluster, from (cluster, workload) pairs.
fn workloads_in(items: &[(&str, &Workload)]) -> Workloads {
    let mut out = Workloads::new();
    for (cluster, w) in items {
        out.entry(cluster.to_string())
            .or_default()
            .insert(w.key.clone(), (*w).clone());
    }
    out
}

#[test]
fn defaults_are_koordinators() {
    let c = ArbitrationConfig::default();
    assert_eq!(c.max_migrating_per_node, 2);
    assert_eq!(c.max_migrating_globally, None);
    assert_eq!(c.max_migrating_per_namespace, None);
    assert_eq!(c.max_migrating_per_workload, None);
    assert_eq!(c.max_unavailable_per_workload, None);
    assert_eq!(c.evict_qps, 10.0);
    assert_eq!(c.evict_burst, 1);
    assert_eq!(c.default_job_mode, MigrationMode::ReservationFirst);
    assert_eq!(c.ttl_ms(), 5 * 60 * 1000);
    let w = c.object_limiters.workload.as_ref().unwrap();
    assert_eq!(
        (w.duration.as_str(), w.max_migrating, w.burst),
        ("5m", None, 0)
    );
    assert!(c.object_limiters.namespace.is_none());
    assert!(c.validate().is_empty());
    // An empty document means the defaults; the JSON names are Koordinator's.
    let parsed: ArbitrationConfig = serde_json::from_str("{}").unwrap();
    assert_eq!(parsed, c);
    let json = serde_json::to_value(&c).unwrap();
    for key in [
        "maxMigratingPerNode",
        "evictQPS",
        "evictBurst",
        "defaultJobMode",
        "defaultJobTTL",
        "objectLimiters",
        "maxUnavailablePerWorkload",
    ] {
        assert!(json.get(key).is_some(), "{key} in {json}");
    }
}

#[test]
fn knob_validation() {
    let cases: &[(&str, &str)] = &[
        (r#"{"evictQPS": 0}"#, "evictQPS"),
        (r#"{"evictBurst": 0}"#, "evictBurst"),
        (r#"{"defaultJobTTL": "soon"}"#, "defaultJobTTL"),
        (
            r#"{"maxMigratingPerWorkload": "150%"}"#,
            "maxMigratingPerWorkload",
        ),
        (
            r#"{"objectLimiters": {"namespace": {"duration": "1m"}}}"#,
            "objectLimiters.namespace.maxMigrating",
        ),
        (
            r#"{"objectLimiters": {"workload": {"duration": "0"}}}"#,
            "objectLimiters.workload.duration",
        ),
    ];
    for (json, field) in cases {
        let c: ArbitrationConfig = serde_json::from_str(json).unwrap();
        let errors = c.validate();
        assert!(
            errors.iter().any(|e| e.field == *field),
            "{json}: {errors:?}"
        );
    }
    assert!(serde_json::from_str::<ArbitrationConfig>(r#"{"maxMigratingPerNod": 1}"#).is_err());
    assert!(
        serde_json::from_str::<ArbitrationConfig>(r#"{"maxMigratingPerWorkload": "x"}"#).is_err()
    );
    let c: ArbitrationConfig = serde_json::from_str(
        r#"{"maxMigratingPerWorkload": "20%", "maxUnavailablePerWorkload": 3}"#,
    )
    .unwrap();
    assert_eq!(
        c.max_migrating_per_workload,
        Some(IntOrPercent::Percent(20))
    );
    assert_eq!(c.max_unavailable_per_workload, Some(IntOrPercent::Int(3)));
}

#[test]
fn dynamic_workload_limits() {
    // (value, replicas, expected)
    let cases: &[(Option<IntOrPercent>, u32, u32)] = &[
        (None, 1, 1),
        (None, 3, 1),
        (None, 4, 2),
        (None, 10, 2),
        (None, 11, 1),
        (None, 25, 2),
        (None, 100, 10),
        (Some(IntOrPercent::Int(5)), 3, 3),
        (Some(IntOrPercent::Int(0)), 8, 1),
        (Some(IntOrPercent::Percent(30)), 10, 3),
        (Some(IntOrPercent::Percent(5)), 10, 1),
        (Some(IntOrPercent::Percent(50)), 5, 2),
    ];
    for (value, replicas, expected) in cases {
        assert_eq!(
            workload_limit(*value, *replicas),
            *expected,
            "{value:?} of {replicas}"
        );
    }
}

#[test]
fn cost_annotation_parsing() {
    let cases: &[(Option<&str>, i32)] = &[
        (None, 0),
        (Some("0"), 0),
        (Some("15"), 15),
        (Some("-20"), -20),
        (Some("+5"), 0),
        (Some("007"), 0),
        (Some("-0"), 0),
        (Some("2147483647"), i32::MAX),
        (Some("2147483648"), 0),
        (Some("1.5"), 0),
        (Some(""), 0),
        (Some("abc"), 0),
    ];
    for (value, expected) in cases {
        assert_eq!(parse_cost(*value), *expected, "{value:?}");
    }
}

#[test]
fn koordinator_classes() {
    assert_eq!(
        KoordPriority::of(Some("koord-batch"), Some(9500)),
        KoordPriority::Batch
    );
    assert_eq!(KoordPriority::of(None, Some(9500)), KoordPriority::Prod);
    assert_eq!(KoordPriority::of(None, Some(3001)), KoordPriority::Free);
    assert_eq!(KoordPriority::of(None, Some(100)), KoordPriority::None);
    assert!(KoordPriority::Free < KoordPriority::Batch);
    assert!(KoordPriority::Prod < KoordPriority::None);
    assert_eq!(KoordQos::of(Some("SYSTEM")), KoordQos::of(Some("LSE")));
    assert!(KoordQos::Be < KoordQos::Ls && KoordQos::Lsr < KoordQos::None);
}

#[test]
fn pod_sorter_keys_in_order() {
    // Each row: a pod that must sort before `base`, changing one key.
    let base = pod("base", "n1");
    let rows: Vec<(&str, PodFacts)> = vec![
        ("koord priority class", {
            let mut p = pod("a", "n1");
            p.koord_priority = KoordPriority::Batch;
            p.priority = 100; // a later key that would say otherwise
            p
        }),
        ("priority", {
            let mut p = pod("a", "n1");
            p.priority = -5;
            p.qos = KubeQos::Guaranteed;
            p
        }),
        ("k8s QoS", {
            let mut p = pod("a", "n1");
            p.qos = KubeQos::BestEffort;
            p.koord_qos = KoordQos::LseOrSystem;
            p
        }),
        ("koord QoS", {
            let mut p = pod("a", "n1");
            p.koord_qos = KoordQos::Be;
            p.deletion_cost = 100;
            p
        }),
        ("deletion cost", {
            let mut p = pod("a", "n1");
            p.deletion_cost = -1;
            p.eviction_cost = 100;
            p
        }),
        ("eviction cost", {
            let mut p = pod("a", "n1");
            p.eviction_cost = -1;
            p.creation_ms = 0;
            p
        }),
        ("newer pod", {
            let mut p = pod("a", "n1");
            p.creation_ms = 2_000;
            p
        }),
    ];
    for (key, first) in rows {
        assert_eq!(compare_pods(&first, &base), Ordering::Less, "{key}");
        assert_eq!(compare_pods(&base, &first), Ordering::Greater, "{key}");
    }
    assert_eq!(compare_pods(&base, &base.clone()), Ordering::Equal);
}

#[test]
fn sort_groups_jobs_and_prefers_jobs_in_flight() {
    let mut cheap = pod("cheap", "n1");
    cheap.priority = -10;
    let mut job_a1 = pod("a1", "n1");
    job_a1.job = Some("job-a".into());
    job_a1.priority = -5;
    let mut job_a2 = pod("a2", "n1");
    job_a2.job = Some("job-a".into());
    job_a2.priority = 50;
    let mut job_b = pod("b1", "n2");
    job_b.job = Some("job-b".into());
    job_b.priority = 60;
    let middle = pod("middle", "n1");
    let mut candidates = vec![
        candidate(1, middle),
        candidate(2, job_a2),
        candidate(3, cheap),
        candidate(4, job_b),
        candidate(5, job_a1),
    ];
    sort_candidates(&mut candidates, &[]);
    let names: Vec<&str> = candidates.iter().map(|c| c.pod.name.as_str()).collect();
    // Cost order is cheap, a1, middle, a2, b1; a2 joins a1.
    assert_eq!(names, ["cheap", "a1", "a2", "middle", "b1"]);

    // Job b already has a pod migration in flight: its pods go first.
    let in_flight = [Active {
        migration: 99,
        cluster: "east".into(),
        pod_uid: "uid-b0".into(),
        node: "n3".into(),
        namespace: "shop".into(),
        workload: None,
        job: Some("job-b".into()),
    }];
    sort_candidates(&mut candidates, &in_flight);
    assert_eq!(candidates[0].pod.name, "b1");

    // Equal pods: the newest pod migration first.
    let mut equal = vec![candidate(2, pod("x", "n1")), candidate(1, pod("y", "n1"))];
    sort_candidates(&mut equal, &[]);
    assert_eq!(equal[0].migration, 1, "migration 1 is the newer one");
}

fn verdicts(
    config: &ArbitrationConfig,
    candidates: Vec<Candidate>,
    active: &[Active],
    workloads: &[Workload],
) -> Vec<(String, Verdict)> {
    let workloads = workloads_in(&workloads.iter().map(|w| ("east", w)).collect::<Vec<_>>());
    arbitrate(
        &everywhere(config.clone()),
        candidates,
        active,
        &workloads,
        &NoLimits,
    )
    .into_iter()
    .map(|(c, v)| (c.pod.name, v))
    .collect()
}

fn wait_containing(v: &Verdict, text: &str) -> bool {
    matches!(v, Verdict::Wait(m) if m.contains(text))
}

#[test]
fn filters_table() {
    struct Case {
        name: &'static str,
        config: ArbitrationConfig,
        candidates: Vec<Candidate>,
        active: Vec<Active>,
        workloads: Vec<Workload>,
        /// (pod, expected verdict kind, text the message contains)
        expect: Vec<(&'static str, &'static str, &'static str)>,
    }
    let active_on = |node: &str, ns: &str, w: Option<&str>| Active {
        migration: 100,
        cluster: "east".into(),
        pod_uid: format!("uid-active-{node}-{ns}"),
        node: node.into(),
        namespace: ns.into(),
        workload: w.map(String::from),
        job: None,
    };
    let cases = vec![
        Case {
            name: "two per node by default, the third waits and says why",
            config: ArbitrationConfig::default(),
            candidates: vec![
                candidate(1, pod("p1", "n-3")),
                candidate(2, pod("p2", "n-3")),
                candidate(3, pod("p3", "n-3")),
                candidate(4, pod("p4", "n-4")),
            ],
            active: vec![],
            workloads: vec![],
            expect: vec![
                ("p1", "admit", ""),
                ("p2", "admit", ""),
                (
                    "p3",
                    "wait",
                    "waiting: node n-3 already has 2 migrating pods (maxMigratingPerNode=2)",
                ),
                ("p4", "admit", ""),
            ],
        },
        Case {
            name: "running pod migrations count; 0 means unlimited",
            config: ArbitrationConfig {
                max_migrating_per_node: 0,
                ..Default::default()
            },
            candidates: vec![candidate(1, pod("p1", "n1")), candidate(2, pod("p2", "n1"))],
            active: vec![active_on("n1", "shop", None), active_on("n1", "x", None)],
            workloads: vec![],
            expect: vec![("p1", "admit", ""), ("p2", "admit", "")],
        },
        Case {
            name: "global cap",
            config: ArbitrationConfig {
                max_migrating_globally: Some(2),
                ..Default::default()
            },
            candidates: vec![candidate(1, pod("p1", "n1")), candidate(2, pod("p2", "n2"))],
            active: vec![active_on("n9", "x", None)],
            workloads: vec![],
            expect: vec![
                ("p1", "admit", ""),
                (
                    "p2",
                    "wait",
                    "2 pod migrations are running in cluster east (maxMigratingGlobally=2)",
                ),
            ],
        },
        Case {
            name: "per namespace",
            config: ArbitrationConfig {
                max_migrating_per_namespace: Some(1),
                ..Default::default()
            },
            candidates: vec![candidate(1, pod("p1", "n1")), candidate(2, pod("p2", "n2"))],
            active: vec![],
            workloads: vec![],
            expect: vec![
                ("p1", "admit", ""),
                (
                    "p2",
                    "wait",
                    "namespace shop already has 1 migrating pod (maxMigratingPerNamespace=1)",
                ),
            ],
        },
        Case {
            name: "per workload: 3 replicas → one at a time",
            config: ArbitrationConfig::default(),
            candidates: vec![
                candidate(1, owned(pod("w1", "n1"), "web")),
                candidate(2, owned(pod("w2", "n2"), "web")),
            ],
            active: vec![],
            workloads: vec![workload("web", 3, &[])],
            expect: vec![
                ("w1", "admit", ""),
                (
                    "w2",
                    "wait",
                    "ReplicaSet shop/web already has 1 migrating pod (maxMigratingPerWorkload=1 for 3 replicas)",
                ),
            ],
        },
        Case {
            name: "per workload: 8 replicas → two at a time, then maxUnavailable",
            config: ArbitrationConfig::default(),
            candidates: vec![
                candidate(1, owned(pod("w1", "n1"), "web")),
                candidate(2, owned(pod("w2", "n2"), "web")),
                candidate(3, owned(pod("w3", "n3"), "web")),
            ],
            active: vec![],
            workloads: vec![workload("web", 8, &[])],
            expect: vec![
                ("w1", "admit", ""),
                ("w2", "admit", ""),
                ("w3", "wait", "maxMigratingPerWorkload=2 for 8 replicas"),
            ],
        },
        Case {
            name: "maxUnavailable counts pods that are not Ready",
            config: ArbitrationConfig::default(),
            candidates: vec![candidate(1, owned(pod("w1", "n1"), "web"))],
            active: vec![],
            workloads: vec![workload("web", 3, &["uid-other"])],
            expect: vec![(
                "w1",
                "wait",
                "ReplicaSet shop/web has 1 pod unavailable or migrating (maxUnavailablePerWorkload=1 for 3 replicas)",
            )],
        },
        Case {
            name: "the candidate's own readiness does not block it",
            config: ArbitrationConfig::default(),
            candidates: vec![candidate(1, owned(pod("w1", "n1"), "web"))],
            active: vec![],
            workloads: vec![workload("web", 3, &["uid-w1"])],
            expect: vec![("w1", "admit", "")],
        },
        Case {
            name: "single replica workloads are refused (expected replicas)",
            config: ArbitrationConfig::default(),
            candidates: vec![candidate(1, owned(pod("db-0", "n1"), "db"))],
            active: vec![],
            workloads: vec![workload("db", 1, &[])],
            expect: vec![("db-0", "reject", "has 1 replica")],
        },
        Case {
            name: "skipCheckExpectedReplicas lets them through",
            config: ArbitrationConfig {
                skip_check_expected_replicas: true,
                ..Default::default()
            },
            candidates: vec![candidate(1, owned(pod("db-0", "n1"), "db"))],
            active: vec![],
            workloads: vec![workload("db", 1, &[])],
            expect: vec![("db-0", "admit", "")],
        },
        Case {
            name: "MaxInt32 eviction cost is never evicted; terminating pods neither",
            config: ArbitrationConfig::default(),
            candidates: vec![
                candidate(1, {
                    let mut p = pod("precious", "n1");
                    p.eviction_cost = i32::MAX;
                    p
                }),
                candidate(2, {
                    let mut p = pod("leaving", "n2");
                    p.never_migrate = Some("terminating");
                    p
                }),
            ],
            active: vec![],
            workloads: vec![],
            expect: vec![
                (
                    "precious",
                    "reject",
                    "eviction-cost=2147483647 (never evict)",
                ),
                ("leaving", "reject", "is terminating"),
            ],
        },
        Case {
            name: "the evict annotation bypasses filters and limits",
            config: ArbitrationConfig::default(),
            candidates: vec![candidate(1, {
                let mut p = owned(pod("forced", "n1"), "db");
                p.evict_annotation = true;
                p
            })],
            active: vec![active_on("n1", "shop", None), active_on("n1", "y", None)],
            workloads: vec![workload("db", 1, &[])],
            expect: vec![("forced", "admit", "")],
        },
    ];
    for case in cases {
        let got = verdicts(&case.config, case.candidates, &case.active, &case.workloads);
        assert_eq!(got.len(), case.expect.len(), "{}", case.name);
        for (pod, kind, text) in &case.expect {
            let (_, verdict) = got
                .iter()
                .find(|(n, _)| n == pod)
                .unwrap_or_else(|| panic!("{}: no verdict for {pod}", case.name));
            let ok = match *kind {
                "admit" => *verdict == Verdict::Admit,
                "wait" => wait_containing(verdict, text),
                "reject" => matches!(verdict, Verdict::Reject(m) if m.contains(text)),
                _ => unreachable!(),
            };
            assert!(
                ok,
                "{}: {pod}: expected {kind} {text:?}, got {verdict:?}",
                case.name
            );
        }
    }
}

#[test]
fn token_buckets() {
    // 1 per 5 minutes, burst 1.
    let per_ms = 1.0 / 300_000.0;
    let mut b = TokenBucket::full(1, 0);
    assert_eq!(b.wait_ms(0, per_ms, 1), 0);
    b.take(0, per_ms, 1);
    assert_eq!(b.wait_ms(0, per_ms, 1), 300_000);
    assert_eq!(b.wait_ms(60_000, per_ms, 1), 240_000);
    assert_eq!(b.wait_ms(300_000, per_ms, 1), 0);
    // Never more than burst.
    let mut b = TokenBucket::full(2, 0);
    assert_eq!(b.wait_ms(10_000_000, per_ms, 2), 0);
    b.take(10_000_000, per_ms, 2);
    b.take(10_000_000, per_ms, 2);
    assert!(b.wait_ms(10_000_000, per_ms, 2) > 0);
    assert_eq!(human_ms(252_000), "4m12s");
    assert_eq!(human_ms(800), "800ms");
    assert_eq!(instant(1_700_000_000_999), "2023-11-14T22:13:20Z");
}

#[test]
fn object_limiters_make_pods_wait_after_an_eviction() {
    let config = everywhere(ArbitrationConfig::default());
    let web = workload("web", 3, &[]);
    let p = owned(pod("w1", "n1"), "web");
    let mut limiters = ObjectLimiters::default();
    assert_eq!(limiters.at(&config, 0).blocked(&p, Some(&web)), None);
    limiters.record_eviction(&config, &p, Some(&web), 0);
    let why = limiters
        .at(&config, 60_000)
        .blocked(&p, Some(&web))
        .unwrap();
    assert!(
        why.contains(
            "ReplicaSet shop/web used its eviction budget: 1 of 1 eviction at once, one more \
             every 5m0s (objectLimiters.workload: 1 per 5m); next token at 1970-01-01T00:05:00Z"
        ),
        "{why}"
    );
    assert_eq!(limiters.at(&config, 300_000).blocked(&p, Some(&web)), None);
    // Idle buckets go away after 1.5 × duration.
    limiters.expire_idle(&config, 450_001);
    assert!(limiters.clusters.is_empty());

    // The namespace limiter, when configured.
    let config = everywhere(ArbitrationConfig {
        object_limiters: ObjectLimitersConfig {
            workload: None,
            namespace: Some(LimiterConfig {
                duration: "1m".into(),
                max_migrating: Some(IntOrPercent::Int(2)),
                burst: 2,
            }),
        },
        ..Default::default()
    });
    let q = pod("q", "n1");
    let mut limiters = ObjectLimiters::default();
    limiters.record_eviction(&config, &q, None, 0);
    assert_eq!(limiters.at(&config, 0).blocked(&q, None), None);
    limiters.record_eviction(&config, &q, None, 0);
    let why = limiters.at(&config, 0).blocked(&q, None).unwrap();
    assert!(
        why.contains(
            "namespace shop used its eviction budget: 2 of 2 evictions at once, one more every \
             30s (objectLimiters.namespace: 2 per 1m)"
        ),
        "{why}"
    );
    assert_eq!(limiters.at(&config, 30_000).blocked(&q, None), None);
}

/// Two clusters with the same node, namespace, pod and controller names and uids: each cap
/// counts only the pod migrations of the candidate's own cluster.
#[test]
fn clusters_sharing_names_do_not_count_each_other() {
    let web = workload("web", 3, &[]);
    let workloads = workloads_in(&[("east", &web), ("west", &web)]);
    // East has web-1 migrating off n1 in namespace shop.
    let running = Active::of(100, &owned(pod("web-1", "n1"), "web"));
    let cases = [
        (
            ArbitrationConfig {
                max_migrating_globally: Some(1),
                max_migrating_per_node: 0,
                max_unavailable_per_workload: Some(IntOrPercent::Int(3)),
                max_migrating_per_workload: Some(IntOrPercent::Int(3)),
                skip_check_expected_replicas: true,
                ..Default::default()
            },
            "1 pod migration is running in cluster east (maxMigratingGlobally=1)",
        ),
        (
            ArbitrationConfig {
                max_migrating_per_node: 1,
                max_unavailable_per_workload: Some(IntOrPercent::Int(3)),
                max_migrating_per_workload: Some(IntOrPercent::Int(3)),
                skip_check_expected_replicas: true,
                ..Default::default()
            },
            "node n1 already has 1 migrating pod (maxMigratingPerNode=1)",
        ),
        (
            ArbitrationConfig {
                max_migrating_per_node: 0,
                max_migrating_per_namespace: Some(1),
                max_unavailable_per_workload: Some(IntOrPercent::Int(3)),
                max_migrating_per_workload: Some(IntOrPercent::Int(3)),
                skip_check_expected_replicas: true,
                ..Default::default()
            },
            "namespace shop already has 1 migrating pod (maxMigratingPerNamespace=1)",
        ),
        (
            ArbitrationConfig {
                max_migrating_per_node: 0,
                ..Default::default()
            },
            "ReplicaSet shop/web already has 1 migrating pod (maxMigratingPerWorkload=1",
        ),
    ];
    for (config, east_waits_for) in cases {
        let east = owned(pod("web-2", "n1"), "web");
        let west = in_cluster(east.clone(), "west");
        let verdicts = arbitrate(
            &everywhere(config.clone()),
            vec![candidate(1, east), candidate(2, west)],
            std::slice::from_ref(&running),
            &workloads,
            &NoLimits,
        );
        let verdict_of = |cluster: &str| {
            verdicts
                .iter()
                .find(|(c, _)| c.pod.cluster == cluster)
                .map(|(_, v)| v.clone())
                .unwrap()
        };
        assert!(
            wait_containing(&verdict_of("east"), east_waits_for),
            "{config:?}: east: {:?}",
            verdict_of("east")
        );
        assert_eq!(verdict_of("west"), Verdict::Admit, "{config:?}");
    }

    // What west admits counts against west's next candidate, not east's.
    let config = everywhere(ArbitrationConfig {
        max_migrating_per_node: 1,
        ..Default::default()
    });
    let verdicts = arbitrate(
        &config,
        vec![
            candidate(1, in_cluster(pod("a", "n1"), "west")),
            candidate(2, in_cluster(pod("b", "n1"), "west")),
            candidate(3, pod("c", "n2")),
        ],
        &[],
        &Workloads::new(),
        &NoLimits,
    );
    let kinds: Vec<(&str, bool)> = verdicts
        .iter()
        .map(|(c, v)| (c.pod.name.as_str(), *v == Verdict::Admit))
        .collect();
    assert_eq!(kinds, [("a", true), ("b", false), ("c", true)]);
}

/// A cluster with its own knobs is arbitrated by them; the others by the global ones.
#[test]
fn a_cluster_s_own_knobs_apply_to_it_alone() {
    let mut configs = everywhere(ArbitrationConfig::default());
    configs.clusters.insert(
        "west".into(),
        ArbitrationConfig {
            max_migrating_per_node: 1,
            ..Default::default()
        },
    );
    let running = [
        Active::of(100, &pod("x", "n1")),
        Active::of(101, &in_cluster(pod("x", "n1"), "west")),
    ];
    let verdicts = arbitrate(
        &configs,
        vec![
            candidate(1, pod("p", "n1")),
            candidate(2, in_cluster(pod("p", "n1"), "west")),
        ],
        &running,
        &Workloads::new(),
        &NoLimits,
    );
    for (c, v) in verdicts {
        match c.pod.cluster.as_str() {
            "east" => assert_eq!(v, Verdict::Admit, "east follows the global 2 per node"),
            _ => assert!(wait_containing(&v, "(maxMigratingPerNode=1)"), "{v:?}"),
        }
    }
    assert_eq!(configs.for_cluster("north"), &configs.global);
}

#[test]
fn token_buckets_are_per_cluster() {
    let namespace_limited = ArbitrationConfig {
        object_limiters: ObjectLimitersConfig {
            namespace: Some(LimiterConfig {
                duration: "1h".into(),
                max_migrating: Some(IntOrPercent::Int(1)),
                burst: 1,
            }),
            ..Default::default()
        },
        evict_qps: 0.001,
        ..Default::default()
    };
    let mut configs = everywhere(namespace_limited.clone());
    let web = workload("web", 3, &[]);
    let east = owned(pod("web-1", "n1"), "web");
    let west = in_cluster(east.clone(), "west");
    let mut limiters = ObjectLimiters::default();
    limiters.record_eviction(&configs, &east, Some(&web), 0);
    let at = limiters.at(&configs, 1_000);
    let why = at.blocked(&east, Some(&web)).unwrap();
    assert!(
        why.contains("ReplicaSet shop/web used its eviction budget"),
        "{why}"
    );
    assert_eq!(at.blocked(&west, Some(&web)), None);
    let mut namespace_only = east.clone();
    namespace_only.workload = None;
    let why = at.blocked(&namespace_only, None).unwrap();
    assert!(
        why.contains("namespace shop used its eviction budget"),
        "{why}"
    );
    assert_eq!(at.blocked(&in_cluster(namespace_only, "west"), None), None);

    // West without limiters of its own: its evictions take no token, and never wait.
    configs.clusters.insert(
        "west".into(),
        ArbitrationConfig {
            object_limiters: ObjectLimitersConfig {
                workload: None,
                namespace: None,
            },
            ..namespace_limited.clone()
        },
    );
    limiters.record_eviction(&configs, &west, Some(&web), 0);
    limiters.record_eviction(&configs, &west, Some(&web), 0);
    assert_eq!(
        limiters.at(&configs, 1_000).blocked(&west, Some(&web)),
        None
    );
    assert!(!limiters.clusters.contains_key("west"));

    // Eviction QPS: one bucket per cluster (0.001/s, burst 1: one eviction, then ~1000 s).
    let mut evictions = EvictionLimiter::default();
    assert_eq!(evictions.try_take(&namespace_limited, "east", 0), 0);
    assert_eq!(evictions.try_take(&namespace_limited, "east", 0), 1_000_000);
    assert_eq!(evictions.try_take(&namespace_limited, "west", 0), 0);
    assert!(evictions.try_take(&namespace_limited, "west", 0) > 0);
    assert_eq!(evictions.try_take(&namespace_limited, "east", 1_000_000), 0);
}

#[test]
fn jobs_in_flight_are_jobs_of_the_same_cluster() {
    let mut cheap = pod("cheap", "n1");
    cheap.priority = -10;
    let mut job_b = pod("b1", "n2");
    job_b.job = Some("job-b".into());
    job_b.priority = 60;
    let mut west_job_b = in_cluster(job_b.clone(), "west");
    west_job_b.name = "west-b1".into();
    let in_flight_in_west = [Active {
        job: Some("job-b".into()),
        ..Active::of(99, &in_cluster(pod("b0", "n3"), "west"))
    }];
    let mut candidates = vec![
        candidate(1, job_b),
        candidate(2, cheap),
        candidate(3, west_job_b),
    ];
    sort_candidates(&mut candidates, &in_flight_in_west);
    let names: Vec<&str> = candidates.iter().map(|c| c.pod.name.as_str()).collect();
    // West's Job b is in flight in west: only west's pod of it goes first; east's keeps its
    // cost order, and is not grouped with west's.
    assert_eq!(names, ["west-b1", "cheap", "b1"]);
}
