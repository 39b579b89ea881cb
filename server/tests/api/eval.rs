//! `rebalancer eval`: the real binary on the snapshot files of `tests/data/eval` (written by
//! `cluster.py` there) — one test per exit code, each kind of bad input, both outputs, a YAML
//! snapshot, `--state` across evals, and a profile whose eval matches the server's run of it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestServer, policy_module};

const BINARY: &str = env!("CARGO_BIN_EXE_rebalancer");
/// The time the tests' snapshots are taken at: the web and db pods are 2455 days old then.
const OBSERVED_AT: &str = "2026-11-20T12:00:00Z";

fn data(file: &str) -> String {
    format!("{}/tests/data/eval/{file}", env!("CARGO_MANIFEST_DIR"))
}

fn misbehaving() -> PathBuf {
    Path::new(rebalancer_builtins::WASM_DIR).join("test_misbehaving.wasm")
}

struct Eval {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Eval {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}\nstderr: {}", self.stdout, self.stderr))
    }
}

fn eval(args: &[&str]) -> Eval {
    let output = Command::new(BINARY)
        .arg("eval")
        .args(args)
        .output()
        .expect("the binary runs");
    Eval {
        code: output.status.code().expect("an exit code"),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// A file holding `text` in a temporary directory.
fn file(dir: &tempfile::TempDir, name: &str, text: &[u8]) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn nothing_proposed_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    // Ten years: older than every pod of the snapshot.
    let args = file(
        &dir,
        "args.json",
        br#"{"maxPodLifeTimeSeconds": 315360000}"#,
    );
    let out = eval(&[
        "--builtin",
        "PodLifeTime",
        "--snapshot",
        &data("cluster.json"),
        "--args",
        &args,
        "--observed-at",
        OBSERVED_AT,
    ]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("\nPROPOSALS (0)\n"), "{}", out.stdout);
    assert!(out.stdout.ends_with("exit code 0\n"), "{}", out.stdout);
}

#[test]
fn cache_dir_keeps_compiled_code_for_the_next_eval() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("compiled");
    let args = file(&dir, "args.yaml", b"maxPodLifeTimeSeconds: 86400\n");
    let run = || {
        let out = eval(&[
            "--builtin",
            "PodLifeTime",
            "--snapshot",
            &data("cluster.json"),
            "--args",
            &args,
            "--observed-at",
            OBSERVED_AT,
            "--cache-dir",
            cache.to_str().unwrap(),
            "--output",
            "json",
        ]);
        assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
        out.json()
    };
    let first = run();
    assert_eq!(first["modules"][0]["cached"], false);
    let artifacts = std::fs::read_dir(&cache).unwrap().count();
    assert_eq!(artifacts, 1, "one compiled module in {}", cache.display());
    let second = run();
    assert_eq!(second["modules"][0]["cached"], true);
    assert_eq!(first["proposals"], second["proposals"]);
}

#[test]
fn proposals_exit_1_with_the_documented_json_shape() {
    let dir = tempfile::tempdir().unwrap();
    let args = file(&dir, "args.yaml", b"maxPodLifeTimeSeconds: 86400\n");
    let out = eval(&[
        "--builtin",
        "PodLifeTime",
        "--snapshot",
        &data("cluster.json"),
        "--args",
        &args,
        "--observed-at",
        OBSERVED_AT,
        "--output",
        "json",
    ]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let v = out.json();
    assert_eq!(v["exitCode"], 1);
    let snapshot = &v["snapshot"];
    assert_eq!(snapshot["format"], "json");
    assert_eq!(snapshot["time"], OBSERVED_AT);
    assert_eq!(
        (snapshot["nodes"].as_u64(), snapshot["pods"].as_u64()),
        (Some(3), Some(9))
    );
    // The usage objects are read as a push reads them.
    assert_eq!(snapshot["counts"]["NodeMetric"], 1);
    assert_eq!(snapshot["counts"]["NodeMetrics"], 1);
    let module = &v["modules"][0];
    assert_eq!(
        (&module["name"], &module["source"]),
        (&json!("PodLifeTime"), &json!("builtin"))
    );
    assert!(module["loadMs"].as_f64().unwrap() > 0.0);
    assert_eq!(module["digest"].as_str().unwrap().len(), 64);
    let set = &v["profile"]["pluginSets"][0];
    assert_eq!(set["name"], "default");
    assert_eq!(
        set["deschedule"][0],
        json!({"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": 86400}})
    );
    assert_eq!(v["nodesInScope"], 3);
    assert_eq!(v["skipped"], Value::Null);

    let policy = &v["policies"][0];
    assert_eq!(policy["plugin"], "PodLifeTime");
    assert_eq!(policy["extensionPoint"], "deschedule");
    assert_eq!(
        (policy["proposals"].as_u64(), policy["refusals"].as_u64()),
        (Some(6), Some(2))
    );
    assert!(policy["durationMs"].as_f64().unwrap() > 0.0);
    assert_eq!(policy["error"], Value::Null);
    let logs = policy["logs"].as_array().unwrap();
    assert!(
        logs.iter().any(|l| l["level"] == "info"
            && l["message"] == "PodLifeTime: 8 candidate pods, 6 proposals, 2 refused"),
        "{logs:#?}"
    );

    let proposed: Vec<&str> = v["proposals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        proposed,
        ["web-0", "web-1", "web-2", "web-3", "web-4", "web-5"]
    );
    let first = &v["proposals"][0];
    assert_eq!(first["node"], "node-a");
    assert_eq!(first["podUid"], "uid-shop-web-0");
    assert_eq!(first["pluginSet"], "default");
    assert_eq!(
        first["reason"],
        "pod is 2455d12h old, more than maxPodLifeTimeSeconds 86400 (1d)"
    );
    assert_eq!(v["refusalCount"], 2);
    for (refusal, pod) in v["refusals"]
        .as_array()
        .unwrap()
        .iter()
        .zip(["db-0", "db-1"])
    {
        assert_eq!(refusal["name"], pod);
        assert!(
            refusal["refusal"]
                .as_str()
                .unwrap()
                .starts_with("disruption budget: "),
            "{refusal}"
        );
    }
    assert_eq!(v["state"], json!([]));
    assert_eq!(v["stateWritten"], Value::Null);
}

#[test]
fn the_table_from_a_yaml_snapshot_shows_policies_proposals_refusals_and_logs() {
    let dir = tempfile::tempdir().unwrap();
    let args = file(&dir, "args.json", br#"{"maxPodLifeTimeSeconds": 86400}"#);
    let out = eval(&[
        "--builtin",
        "PodLifeTime",
        "--snapshot",
        &data("cluster.yaml"),
        "--args",
        &args,
        "--observed-at",
        OBSERVED_AT,
    ]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let text = &out.stdout;
    assert!(
        text.starts_with(&format!(
            "snapshot {} (YAML): 3 nodes, 9 pods at {OBSERVED_AT}; 3 ready nodes in scope\n",
            data("cluster.yaml")
        )),
        "{text}"
    );
    for line in [
        "MODULE       SOURCE    VERSION",
        "POLICY       PLUGIN SET  POINT       EVAL",
        "\nPROPOSALS (6)\nPOD         NODE    PLUGIN       REASON\n\
         shop/web-0  node-a  PodLifeTime  pod is 2455d12h old, more than maxPodLifeTimeSeconds 86400 (1d)\n",
        "\nREFUSALS (2)\n",
        "data/db-1  node-c  PodLifeTime  pod is 2455d12h old",
        "\nLOGS\nPodLifeTime debug eviction of data/db-0 refused: disruption budget: ",
        "PodLifeTime info  PodLifeTime: 8 candidate pods, 6 proposals, 2 refused\n",
    ] {
        assert!(text.contains(line), "{line:?} in\n{text}");
    }
    assert!(
        text.ends_with("6 proposed, 2 refused, 0 of 1 policy evaluations failed in ")
            || text.contains("6 proposed, 2 refused, 0 of 1 policy evaluations failed in "),
        "{text}"
    );
    assert!(text.ends_with("; exit code 1\n"), "{text}");

    // The YAML and the JSON file are the same cluster: the same proposals.
    let from = |snapshot: &str| {
        let out = eval(&[
            "--builtin",
            "PodLifeTime",
            "--snapshot",
            &data(snapshot),
            "--args",
            &args,
            "--observed-at",
            OBSERVED_AT,
            "--output",
            "json",
        ]);
        out.json()["proposals"].clone()
    };
    assert_eq!(from("cluster.yaml"), from("cluster.json"));
}

#[test]
fn a_failing_policy_exits_2_and_its_failure_is_shown() {
    let module = misbehaving();
    let dir = tempfile::tempdir().unwrap();
    for (behaviour, kind) in [("trap", "trap"), ("panic", "panic")] {
        let args = file(
            &dir,
            "args.json",
            json!({"behaviour": behaviour}).to_string().as_bytes(),
        );
        let out = eval(&[
            module.to_str().unwrap(),
            "--snapshot",
            &data("cluster.json"),
            "--args",
            &args,
            "--extension-point",
            "deschedule",
        ]);
        assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
        assert!(
            out.stdout.contains(&format!("failed: {kind}\n")),
            "{}",
            out.stdout
        );
        assert!(
            out.stdout.contains(&format!(
                "TestMisbehaving (default, deschedule) failed ({kind}): "
            )),
            "{}",
            out.stdout
        );
        assert!(out.stdout.ends_with("exit code 2\n"), "{}", out.stdout);
    }
    // A failure counts before proposals: `propose` at deschedule, then a trap at balance.
    let profile = file(&dir, "profile.json", json!({
        "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
        "profiles": [
            {"name": "a", "pluginConfig": [{"name": "TestMisbehaving", "args": {"behaviour": "propose"}}],
             "plugins": {"deschedule": {"enabled": ["TestMisbehaving"]}}},
            {"name": "b", "pluginConfig": [{"name": "TestMisbehaving", "args": {"behaviour": "trap"}}],
             "plugins": {"balance": {"enabled": ["TestMisbehaving"]}}}
        ]
    }).to_string().as_bytes());
    let out = eval(&[
        module.to_str().unwrap(),
        "--snapshot",
        &data("cluster.json"),
        "--profile",
        &profile,
        "--output",
        "json",
    ]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    let v = out.json();
    assert_eq!(v["exitCode"], 2);
    assert_eq!(v["proposals"].as_array().unwrap().len(), 1);
    assert_eq!(v["policies"][0]["error"], Value::Null);
    assert_eq!(v["policies"][1]["error"]["kind"], "trap");
}

#[test]
fn bad_input_exits_3_saying_what_and_where() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = data("cluster.json");
    let bad_cpu = serde_json::to_vec(&crate::support::list([
        crate::support::node("n1").build(),
        crate::support::pod("shop", "web-1")
            .on("n1")
            .requests("lots", "1Gi")
            .build(),
    ]))
    .unwrap();
    let files = [
        (
            "malformed.json",
            b"{\"kind\": \"List\", \"items\": [".to_vec(),
        ),
        (
            "pod.json",
            br#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}}"#.to_vec(),
        ),
        ("bad-cpu.json", bad_cpu),
        (
            "empty.json",
            br#"{"apiVersion": "v1", "kind": "List", "items": []}"#.to_vec(),
        ),
        (
            "bad-args.json",
            br#"{"maxPodLifeTimeSeconds": 60, "bogus": true}"#.to_vec(),
        ),
        (
            "broken-args.json",
            b"{\"maxPodLifeTimeSeconds\": }".to_vec(),
        ),
        ("core.wasm", b"\0asm\x01\0\0\0".to_vec()),
        ("not.wasm", b"hello".to_vec()),
        (
            "unknown-plugin.yaml",
            b"apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n\
            profiles:\n  - name: p\n    pluginConfig: [{name: Nope}]\n    plugins:\n      deschedule:\n        enabled: [Nope]\n"
                .to_vec(),
        ),
        (
            "no-version.yaml",
            b"kind: DeschedulerPolicy\nprofiles: []\n".to_vec(),
        ),
    ];
    for (name, bytes) in &files {
        file(&dir, name, bytes);
    }
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::write(state.join("state.json"), b"{\"scopes\": 1}").unwrap();
    let at = |name: &str| dir.path().join(name).display().to_string();
    let builtin = ["--builtin", "PodLifeTime"];
    let cases: Vec<(Vec<String>, Vec<String>)> = vec![
        (
            vec!["--snapshot".into(), at("missing.json")],
            vec![format!("{}: cannot read it", at("missing.json"))],
        ),
        (
            vec!["--snapshot".into(), at("malformed.json")],
            vec![at("malformed.json"), "malformed document at line 1".into()],
        ),
        (
            vec!["--snapshot".into(), at("pod.json")],
            vec!["not a List".into()],
        ),
        (
            vec!["--snapshot".into(), at("bad-cpu.json")],
            vec!["Pod shop/web-1".into(), "requests.cpu".into()],
        ),
        (
            vec!["--snapshot".into(), at("empty.json")],
            vec!["holds no node and no pod".into()],
        ),
        (
            vec![
                "--snapshot".into(),
                cluster.clone(),
                "--args".into(),
                at("bad-args.json"),
            ],
            vec![format!("{}: ", at("bad-args.json")), "bogus".into()],
        ),
        (
            vec![
                "--snapshot".into(),
                cluster.clone(),
                "--args".into(),
                at("broken-args.json"),
            ],
            vec![
                format!("{}:1:", at("broken-args.json")),
                "not valid JSON".into(),
            ],
        ),
        (
            vec![
                "--snapshot".into(),
                cluster.clone(),
                "--observed-at".into(),
                "yesterday".into(),
            ],
            vec!["--observed-at \"yesterday\" is not an RFC 3339 time".into()],
        ),
        (
            vec![
                "--snapshot".into(),
                cluster.clone(),
                "--state".into(),
                state.display().to_string(),
            ],
            vec![format!(
                "{}: not a state file",
                state.join("state.json").display()
            )],
        ),
        (
            vec!["--args".into(), at("bad-args.json")],
            vec!["--snapshot".into()],
        ),
        (
            vec!["--snapshot".into(), cluster.clone(), "--write-state".into()],
            vec!["--state".into()],
        ),
    ];
    let mut runs: Vec<(Vec<String>, Vec<String>)> = cases
        .into_iter()
        .map(|(args, says)| {
            (
                builtin.iter().map(|s| s.to_string()).chain(args).collect(),
                says,
            )
        })
        .collect();
    runs.extend([
        (vec!["--builtin".into(), "Nope".into(), "--snapshot".into(), cluster.clone()],
         vec!["--builtin \"Nope\": no built-in policy has this name (built-ins: RemoveDuplicates,".into()]),
        (vec![at("core.wasm"), "--snapshot".into(), cluster.clone()],
         vec![format!("{}: refused (not_a_component)", at("core.wasm"))]),
        (vec![at("not.wasm"), "--snapshot".into(), cluster.clone()],
         vec![format!("{}: refused (not_wasm)", at("not.wasm"))]),
        (vec!["--profile".into(), at("unknown-plugin.yaml"), "--snapshot".into(), cluster.clone()],
         vec![format!("{}: profiles[0].plugins.deschedule.enabled[0]: unknown plugin \"Nope\": neither a built-in", at("unknown-plugin.yaml"))]),
        (vec!["--profile".into(), at("no-version.yaml"), "--snapshot".into(), cluster.clone()],
         vec![format!("{}: apiVersion", at("no-version.yaml"))]),
        (vec!["--profile".into(), at("no-version.yaml"), "--builtin".into(), "PodLifeTime".into(),
              "--snapshot".into(), cluster.clone()], vec!["cannot be used with".into()]),
    ]);
    for (args, says) in runs {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = eval(&args);
        assert_eq!(out.code, 3, "{args:?}: {}{}", out.stdout, out.stderr);
        assert!(out.stdout.is_empty(), "{args:?}: {}", out.stdout);
        for said in says {
            assert!(
                out.stderr.contains(&said),
                "{args:?}: {said:?} in {}",
                out.stderr
            );
        }
    }
}

#[test]
fn state_is_read_and_written_so_that_consecutive_evals_are_consecutive_runs() {
    let module = misbehaving();
    let module = module.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let state_dir = state.to_str().unwrap();
    let args = |behaviour: &str| {
        file(
            &dir,
            &format!("{behaviour}.json"),
            json!({"behaviour": behaviour}).to_string().as_bytes(),
        )
    };
    let (count, trap) = (args("count-runs"), args("count-runs-then-trap"));
    let cluster = data("cluster.json");
    let run = |args: &str, write: bool| {
        let mut flags = vec![
            module,
            "--snapshot",
            &cluster,
            "--args",
            args,
            "--extension-point",
            "deschedule",
            "--state",
            state_dir,
            "--output",
            "json",
        ];
        if write {
            flags.push("--write-state");
        }
        eval(&flags)
    };
    let logged = |v: &Value| {
        v["policies"][0]["logs"][0]["message"]
            .as_str()
            .unwrap()
            .to_string()
    };

    let first = run(&count, true);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let v = first.json();
    assert_eq!(logged(&v), "run 1");
    assert_eq!(
        v["state"],
        json!([{"pluginSet": "default", "plugin": "TestMisbehaving",
        "entries": [{"key": "runs", "text": "1"}]}])
    );
    let written = state.join("state.json");
    assert_eq!(v["stateWritten"], written.display().to_string());
    assert!(
        first.stderr.contains("state written to"),
        "{}",
        first.stderr
    );
    let after_first = std::fs::read_to_string(&written).unwrap();

    // Read but not written: the file stays as it was.
    let second = run(&count, false);
    assert_eq!(logged(&second.json()), "run 2");
    assert_eq!(second.json()["stateWritten"], Value::Null);
    assert_eq!(std::fs::read_to_string(&written).unwrap(), after_first);

    // A failed evaluation commits nothing, as in a server run.
    let failed = run(&trap, true);
    assert_eq!(failed.code, 2, "{}", failed.stderr);
    assert_eq!(logged(&failed.json()), "run 2");
    assert_eq!(failed.json()["state"], json!([]));
    let unchanged: Value =
        serde_json::from_str(&std::fs::read_to_string(&written).unwrap()).unwrap();
    assert_eq!(
        unchanged["scopes"][0]["entries"],
        json!([{"key": "runs", "text": "1"}])
    );

    let third = run(&count, true);
    assert_eq!(logged(&third.json()), "run 2");
    let fourth = run(&count, true);
    assert_eq!(logged(&fourth.json()), "run 3");
    // The table shows what would be committed.
    let table = eval(&[
        module,
        "--snapshot",
        &cluster,
        "--args",
        &count,
        "--extension-point",
        "deschedule",
        "--state",
        state_dir,
    ]);
    assert!(
        table.stdout.contains(
            "\nSTATE TO COMMIT\nTestMisbehaving in plugin set default: 1 keys\n  runs = 4\n"
        ),
        "{}",
        table.stdout
    );
}

/// The same snapshot and profile through the HTTP API and through eval: the same proposals,
/// refusals and per-policy outcomes.
#[tokio::test]
async fn a_profile_evaluates_as_the_server_runs_it() {
    let module = misbehaving();
    let out = tokio::task::spawn_blocking(move || {
        eval(&[
            module.to_str().unwrap(),
            "--profile",
            &data("profile.yaml"),
            "--snapshot",
            &data("cluster.json"),
            "--observed-at",
            OBSERVED_AT,
            "--output",
            "json",
        ])
    })
    .await
    .unwrap();
    assert_eq!(out.code, 1, "{}", out.stderr);
    let evaluated = out.json();

    let server = TestServer::start().await;
    let cluster: Value =
        serde_json::from_str(&std::fs::read_to_string(data("cluster.json")).unwrap()).unwrap();
    let (status, body) = server
        .put_json(
            &format!("/api/v1/clusters/eval/snapshot?observedAt={OBSERVED_AT}"),
            &cluster,
        )
        .await;
    assert!(status.is_success(), "{status}: {body:#}");
    server.upload(policy_module("test_misbehaving.wasm")).await;
    let (status, body) = server
        .put_bytes(
            "/api/v1/profiles/eval",
            "application/yaml",
            std::fs::read(data("profile.yaml")).unwrap(),
        )
        .await;
    assert!(status.is_success(), "{status}: {body:#}");
    assert_eq!(
        evaluated["profile"], body["spec"],
        "the same normalised profile"
    );
    let (status, run) = server.run("eval", "eval").await;
    assert_eq!(status, StatusCode::CREATED, "{run:#}");
    let (status, decisions) = server
        .get(&format!("/api/v1/decisions?run={}&limit=100", run["id"]))
        .await;
    assert_eq!(status, StatusCode::OK, "{decisions:#}");

    let served: BTreeSet<(String, String, String, String)> = decisions["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                format!(
                    "{}/{}",
                    d["pod"]["namespace"].as_str().unwrap(),
                    d["pod"]["name"].as_str().unwrap()
                ),
                d["plugin"].as_str().unwrap().into(),
                d["pluginSet"].as_str().unwrap().into(),
                d["reason"].as_str().unwrap().into(),
            )
        })
        .collect();
    let proposed: BTreeSet<(String, String, String, String)> = evaluated["proposals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                format!(
                    "{}/{}",
                    p["namespace"].as_str().unwrap(),
                    p["name"].as_str().unwrap()
                ),
                p["plugin"].as_str().unwrap().into(),
                p["pluginSet"].as_str().unwrap().into(),
                p["reason"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(proposed.len(), 4, "{evaluated:#}");
    assert_eq!(proposed, served);

    let outcome = |p: &Value| {
        json!([
            p["plugin"],
            p["pluginSet"],
            p["extensionPoint"],
            p["proposals"],
            p["refusals"],
            p["error"],
            p["logs"]
        ])
    };
    let evaluated_policies: Vec<Value> = evaluated["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(outcome)
        .collect();
    let served_policies: Vec<Value> = run["report"]["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(outcome)
        .collect();
    assert_eq!(evaluated_policies, served_policies);
    assert_eq!(evaluated["nodesInScope"], run["report"]["nodesInScope"]);
    assert_eq!(evaluated["refusalCount"], 6);
    let plugins: Vec<&str> = evaluated["modules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        plugins,
        [
            "TestMisbehaving",
            "PodLifeTime",
            "RemoveDuplicates",
            "LowNodeUtilization"
        ]
    );
    assert_eq!(evaluated["modules"][0]["source"], "file");
}
