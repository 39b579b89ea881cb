//! The port of k8sfixtures.py's object builders, as far as gen_large.py uses them: `Cluster`
//! (fed by the streaming `StreamCluster.add` of gen_large.py), `node`, `pod`, `owner`,
//! `daemonset`, `job_pod`, `pdb`, `priority_class`, namespaces, `profile`/`policy`, and the
//! helpers `ts`/`old`/`young`, `uid_for`, `suffix`, `template_hash`.
//!
//! Every builder draws from the cluster's [`PyRandom`] in exactly the order the Python does and
//! builds its dicts with the same key order; a change here changes the reference bytes. Builders
//! and parameters gen_large.py never uses (`deployment`, `statefulset`, `mirror_pod`, `pvc`,
//! init containers, limits, annotations, volumes, Pending/Succeeded phases, ...) are not
//! ported. Must not decide what the cluster contains: that is the generator's job (`mod.rs`).

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::io::{self, Write};

use sha1::{Digest, Sha1};
use sha2::Sha256;

use super::json::{Json, Obj, Separators, dump, obj};
use super::pyrandom::PyRandom;

/// `SYSTEM_CLUSTER_CRITICAL`.
pub(crate) const SYSTEM_CLUSTER_CRITICAL: i64 = 2_000_000_000;

const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
const COLLISION_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz";
const HEX_ALPHABET: &[u8] = b"0123456789abcdef";

// ------------------------------------------------------------------------------- time

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
const fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day number since 1970-01-01 (`civil_from_days`).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// `OLD_BASE`: 2020-03-02T08:00:00Z, in seconds since the epoch.
const OLD_BASE: i64 = days_from_civil(2020, 3, 2) * 86_400 + 8 * 3600;
/// `YOUNG_BASE`: 2099-06-01T12:00:00Z, in seconds since the epoch.
const YOUNG_BASE: i64 = days_from_civil(2099, 6, 1) * 86_400 + 12 * 3600;

/// `ts(dt)`: `dt.strftime("%Y-%m-%dT%H:%M:%SZ")` for a UTC instant in seconds since the epoch.
fn ts(secs: i64) -> String {
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// `old(minutes)`.
pub(crate) fn old(minutes: i64) -> String {
    ts(OLD_BASE + minutes * 60)
}

/// `young(minutes)`.
pub(crate) fn young(minutes: i64) -> String {
    ts(YOUNG_BASE + minutes * 60)
}

// ----------------------------------------------------------------------------- hashes

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

/// `uid_for(*parts)`: the SHA-1 of the `/`-joined parts, shaped like a UUID.
pub(crate) fn uid_for(parts: &[&str]) -> String {
    let h = hex(&Sha1::digest(parts.join("/").as_bytes()));
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

// ----------------------------------------------------------------------- random names

/// `suffix(rng, n)` (and gen_large.py's `c_suffix`, which is `suffix(rng, 5)`).
pub(crate) fn suffix(rng: &mut PyRandom, n: usize) -> String {
    (0..n)
        .map(|_| char::from(*rng.choice(SUFFIX_ALPHABET)))
        .collect()
}

/// `template_hash(rng)`: nine random hex digits.
fn template_hash(rng: &mut PyRandom) -> String {
    (0..9)
        .map(|_| char::from(*rng.choice(HEX_ALPHABET)))
        .collect()
}

// ---------------------------------------------------------------------------- cluster

/// One container of a pod: `(cname, image, requests, limits)` with `limits` always `None`.
pub(crate) struct Container<'a> {
    pub name: &'a str,
    pub image: &'a str,
    /// The requests dict (`{"cpu": ..., "memory": ...}`); empty means `None`.
    pub requests: Obj,
}

/// The pod phases gen_large.py uses.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Running,
    Failed,
}

/// The keyword arguments of `Cluster.pod` that gen_large.py passes. Dict-valued arguments
/// (`restarts`, `waiting`, `terminated`) are slices of `(container name, value)`; empty is `None`.
pub(crate) struct PodArgs<'a> {
    pub owner: Option<&'a Obj>,
    pub containers: Vec<Container<'a>>,
    pub labels: &'a Obj,
    pub priority: Option<i64>,
    pub priority_class: Option<&'a str>,
    pub tolerations: &'a [Obj],
    pub affinity: Option<&'a Obj>,
    pub tsc: Option<&'a [Obj]>,
    pub phase: Phase,
    pub created: Option<String>,
    pub restarts: &'a [(&'a str, i64)],
    pub waiting: &'a [(&'a str, &'a str)],
    pub terminated: &'a [(&'a str, (i64, &'a str))],
    pub default_tolerations: bool,
    /// `metadata.annotations` (gen_large.py never sets any; the Koordinator layer does).
    pub annotations: Option<&'a Obj>,
}

impl<'a> PodArgs<'a> {
    /// `pod()`'s defaults for everything but the containers and labels.
    pub(crate) fn new(containers: Vec<Container<'a>>, labels: &'a Obj) -> Self {
        PodArgs {
            owner: None,
            containers,
            labels,
            priority: None,
            priority_class: None,
            tolerations: &[],
            affinity: None,
            tsc: None,
            phase: Phase::Running,
            created: None,
            restarts: &[],
            waiting: &[],
            terminated: &[],
            default_tolerations: true,
            annotations: None,
        }
    }
}

fn lookup<'m, V>(map: &'m [(&str, V)], key: &str) -> Option<&'m V> {
    map.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
}

/// The arguments of `Cluster.node` that gen_large.py passes (`pods=110`, no extended resources,
/// schedulable).
pub(crate) struct NodeArgs<'a> {
    pub name: &'a str,
    pub cpu: String,
    pub memory: String,
    pub zone: &'a str,
    pub instance_type: &'a str,
    pub labels: Obj,
    pub taints: Vec<Obj>,
    pub ready: bool,
    pub allocatable_cpu: String,
    pub allocatable_memory: String,
}

/// `StreamCluster`: a `Cluster` whose `add` writes each object to the output right away.
pub(crate) struct Cluster<W: Write> {
    pub rng: PyRandom,
    out: W,
    buf: Vec<u8>,
    first: bool,
    /// `len(self.items)`: objects added so far (node CIDRs and addresses derive from it).
    items: usize,
    /// Pods added so far (`StreamCluster.pods`).
    pub pods: usize,
    namespaces: BTreeMap<String, Obj>,
    minute: i64,
    pod_names: HashSet<String>,
}

impl<W: Write> Cluster<W> {
    pub(crate) fn new(seed: u64, out: W) -> Self {
        Cluster {
            rng: PyRandom::new(seed),
            out,
            buf: Vec::with_capacity(16 << 10),
            first: true,
            items: 0,
            pods: 0,
            namespaces: BTreeMap::new(),
            minute: 0,
            pod_names: HashSet::new(),
        }
    }

    /// `next_old()`.
    pub(crate) fn next_old(&mut self) -> String {
        self.minute += 7;
        old(self.minute)
    }

    /// `next_young()`.
    pub(crate) fn next_young(&mut self) -> String {
        self.minute += 7;
        young(self.minute)
    }

    /// `StreamCluster.add`: `"\n"` before the first object, `",\n"` before the others, then the
    /// object as `json.dumps(obj, separators=(",", ":"))`.
    fn add(&mut self, obj: Obj, is_pod: bool) -> io::Result<()> {
        self.buf.clear();
        self.buf
            .extend_from_slice(if self.first { b"\n" } else { b",\n" });
        dump(&Json::Obj(obj), Separators::Compact, &mut self.buf);
        self.out.write_all(&self.buf)?;
        self.items += 1;
        self.first = false;
        if is_pod {
            self.pods += 1;
        }
        Ok(())
    }

    /// An object outside gen_large.py (the Koordinator layer's), written like the others.
    pub(crate) fn object(&mut self, obj: Obj) -> io::Result<()> {
        self.add(obj, false)
    }

    /// `ns(name)` without labels: remembers the namespace; it is written by [`Self::finish`].
    fn ns(&mut self, name: &str) {
        if !self.namespaces.contains_key(name) {
            let ns = obj! {
                "apiVersion" => "v1", "kind" => "Namespace",
                "metadata" => obj! {
                    "name" => name, "uid" => uid_for(&["ns", name]),
                    "labels" => obj! { "kubernetes.io/metadata.name" => name },
                    "creationTimestamp" => old(0),
                },
                "spec" => obj! { "finalizers" => vec![Json::from("kubernetes")] },
                "status" => obj! { "phase" => "Active" },
            };
            self.namespaces.insert(name.to_owned(), ns);
        }
    }

    /// The end of gen_large.py's `build`: the namespaces in sorted order, each through `add`.
    pub(crate) fn finish(&mut self) -> io::Result<()> {
        let namespaces = std::mem::take(&mut self.namespaces);
        for ns in namespaces.into_values() {
            self.add(ns, false)?;
        }
        self.out.write_all(b"\n]}}\n")
    }

    // -------------------------------------------------------------------- nodes

    /// `node(...)`.
    pub(crate) fn node(&mut self, a: NodeArgs<'_>) -> io::Result<()> {
        let mut lbl = Obj::new();
        lbl.set("beta.kubernetes.io/arch", "amd64");
        lbl.set("beta.kubernetes.io/os", "linux");
        lbl.set("kubernetes.io/arch", "amd64");
        lbl.set("kubernetes.io/os", "linux");
        lbl.set("kubernetes.io/hostname", a.name);
        lbl.set("node.kubernetes.io/instance-type", a.instance_type);
        lbl.set("topology.kubernetes.io/region", "eu-west-1");
        if !a.zone.is_empty() {
            lbl.set("topology.kubernetes.io/zone", a.zone);
        }
        lbl.update(&a.labels);
        let pods = 110;
        let mut capacity = Obj::new();
        capacity.set("cpu", a.cpu.as_str());
        capacity.set("memory", a.memory.as_str());
        capacity.set("pods", pods.to_string());
        capacity.set("ephemeral-storage", "100Gi");
        capacity.set("hugepages-1Gi", "0");
        capacity.set("hugepages-2Mi", "0");
        let mut allocatable = capacity.clone();
        allocatable.set("cpu", a.allocatable_cpu);
        allocatable.set("memory", a.allocatable_memory);
        allocatable.set("ephemeral-storage", "95Gi");
        let t0 = self.next_old();
        let pressure = |kind: &str, reason: &str| {
            obj! {
                "type" => kind, "status" => "False", "reason" => reason,
                "lastHeartbeatTime" => &t0, "lastTransitionTime" => &t0,
            }
        };
        let conds = vec![
            pressure("MemoryPressure", "KubeletHasSufficientMemory"),
            pressure("DiskPressure", "KubeletHasNoDiskPressure"),
            pressure("PIDPressure", "KubeletHasSufficientPID"),
            obj! {
                "type" => "Ready", "status" => if a.ready { "True" } else { "False" },
                "reason" => if a.ready { "KubeletReady" } else { "KubeletNotReady" },
                "message" => if a.ready {
                    "kubelet is posting ready status"
                } else {
                    "container runtime network not ready"
                },
                "lastHeartbeatTime" => &t0, "lastTransitionTime" => &t0,
            },
        ];
        let uid = uid_for(&["node", a.name]);
        let mut spec = Obj::new();
        spec.set("podCIDR", format!("10.{}.0.0/24", self.items % 250));
        spec.set(
            "providerID",
            format!("aws:///eu-west-1a/i-{}", uid[..17].replace('-', "")),
        );
        if !a.taints.is_empty() {
            spec.set("taints", a.taints);
        }
        let n = obj! {
            "apiVersion" => "v1", "kind" => "Node",
            "metadata" => obj! {
                "name" => a.name, "uid" => uid, "labels" => lbl,
                "annotations" => obj! {
                    "node.alpha.kubernetes.io/ttl" => "0",
                    "volumes.kubernetes.io/controller-managed-attach-detach" => "true",
                },
                "creationTimestamp" => &t0,
            },
            "spec" => spec,
            "status" => obj! {
                "capacity" => capacity, "allocatable" => allocatable, "conditions" => conds,
                "addresses" => vec![
                    obj! {
                        "type" => "InternalIP",
                        "address" => format!("10.0.{}.{}", self.items % 250, (self.items * 7) % 250 + 1),
                    },
                    obj! { "type" => "Hostname", "address" => a.name },
                ],
                "nodeInfo" => obj! {
                    "kubeletVersion" => "v1.33.2", "kubeProxyVersion" => "v1.33.2",
                    "containerRuntimeVersion" => "containerd://1.7.27", "operatingSystem" => "linux",
                    "architecture" => "amd64", "osImage" => "Ubuntu 24.04 LTS",
                    "kernelVersion" => "6.8.0-1021-aws", "machineID" => "", "systemUUID" => "",
                    "bootID" => "",
                },
            },
        };
        self.add(n, false)
    }

    // --------------------------------------------------------------------- pods

    /// `pod(name, ns, node, **kw)`.
    pub(crate) fn pod(
        &mut self,
        name: String,
        ns: &str,
        node: &str,
        a: PodArgs<'_>,
    ) -> io::Result<String> {
        self.ns(ns);
        // generated suffixes may collide in big clusters
        let mut name = name;
        let mut key = format!("{ns}/{name}");
        while self.pod_names.contains(&key) {
            name.push(char::from(*self.rng.choice(COLLISION_ALPHABET)));
            key = format!("{ns}/{name}");
        }
        self.pod_names.insert(key);
        let created = match a.created {
            Some(c) => c,
            None => self.next_old(),
        };
        let started = created.clone();
        let running = a.phase == Phase::Running;

        let cspecs: Vec<Obj> = a
            .containers
            .iter()
            .map(|c| {
                let mut resources = Obj::new();
                if !c.requests.is_empty() {
                    resources.set("requests", c.requests.clone());
                }
                obj! {
                    "name" => c.name, "image" => c.image, "imagePullPolicy" => "IfNotPresent",
                    "terminationMessagePath" => "/dev/termination-log",
                    "terminationMessagePolicy" => "File",
                    "resources" => resources,
                }
            })
            .collect();
        let mut spec = Obj::new();
        spec.set("containers", cspecs);
        spec.set("restartPolicy", "Always");
        spec.set("terminationGracePeriodSeconds", 30);
        spec.set("dnsPolicy", "ClusterFirst");
        spec.set("serviceAccountName", "default");
        spec.set("schedulerName", "default-scheduler");
        spec.set("enableServiceLinks", true);
        spec.set("preemptionPolicy", "PreemptLowerPriority");
        if !node.is_empty() {
            spec.set("nodeName", node);
        }
        let mut tol: Vec<Obj> = a.tolerations.to_vec();
        if a.default_tolerations {
            for key in [
                "node.kubernetes.io/not-ready",
                "node.kubernetes.io/unreachable",
            ] {
                tol.push(obj! {
                    "key" => key, "operator" => "Exists", "effect" => "NoExecute",
                    "tolerationSeconds" => 300,
                });
            }
        }
        if !tol.is_empty() {
            spec.set("tolerations", tol);
        }
        spec.set("priority", a.priority.unwrap_or(0));
        if let Some(pc) = a.priority_class.filter(|pc| !pc.is_empty()) {
            spec.set("priorityClassName", pc);
        }
        if let Some(aff) = a.affinity.filter(|aff| !aff.is_empty()) {
            spec.set("affinity", aff.clone());
        }
        if let Some(tsc) = a.tsc.filter(|tsc| !tsc.is_empty()) {
            spec.set("topologySpreadConstraints", tsc.to_vec());
        }
        let vols = vec![obj! {
            "name" => format!("kube-api-access-{}", suffix(&mut self.rng, 5)),
            "projected" => obj! {
                "defaultMode" => 420,
                "sources" => vec![
                    obj! { "serviceAccountToken" => obj! { "expirationSeconds" => 3607, "path" => "token" } },
                    obj! { "configMap" => obj! {
                        "name" => "kube-root-ca.crt",
                        "items" => vec![obj! { "key" => "ca.crt", "path" => "ca.crt" }],
                    } },
                    obj! { "downwardAPI" => obj! { "items" => vec![obj! {
                        "path" => "namespace",
                        "fieldRef" => obj! { "apiVersion" => "v1", "fieldPath" => "metadata.namespace" },
                    }] } },
                ],
            },
        }];
        spec.set("volumes", vols);

        let mut meta = Obj::new();
        meta.set("name", name.as_str());
        meta.set("namespace", ns);
        meta.set("uid", uid_for(&["pod", ns, &name]));
        meta.set("creationTimestamp", created.as_str());
        meta.set("labels", a.labels.clone());
        if let Some(annotations) = a.annotations {
            meta.set("annotations", annotations.clone());
        }
        if let Some(owner) = a.owner {
            meta.set("ownerReferences", vec![owner.clone()]);
        }

        // ---- status
        let mut status = Obj::new();
        status.set("phase", if running { "Running" } else { "Failed" });
        status.set("startTime", started.as_str());
        if running {
            status.set("hostIP", "10.0.0.1");
            let (x, y) = (self.rng.randint(0, 255), self.rng.randint(1, 254));
            status.set("podIP", format!("100.64.{x}.{y}"));
        }
        let terminated_state = |code: i64, reason: &str| {
            obj! { "terminated" => obj! {
                "exitCode" => code, "reason" => reason, "startedAt" => &started, "finishedAt" => &started,
            } }
        };
        let mut cstat = Vec::with_capacity(a.containers.len());
        for c in &a.containers {
            let image_repo = c.image.split(':').next().unwrap_or_default();
            let restart_count = lookup(a.restarts, c.name).copied().unwrap_or(0);
            let mut st = Obj::new();
            st.set("name", c.name);
            st.set("image", c.image);
            st.set(
                "imageID",
                format!("{image_repo}@sha256:{}", sha256_hex(c.image.as_bytes())),
            );
            st.set(
                "containerID",
                format!(
                    "containerd://{}",
                    sha256_hex(format!("{ns}{name}{}", c.name).as_bytes())
                ),
            );
            st.set("restartCount", restart_count);
            st.set("ready", running);
            st.set("started", running);
            if let Some(reason) = lookup(a.waiting, c.name) {
                st.set(
                    "state",
                    obj! { "waiting" => obj! {
                        "reason" => *reason, "message" => "back-off restarting failed container",
                    } },
                );
                st.set("ready", false);
                st.set("started", false);
                if restart_count != 0 {
                    st.set("lastState", terminated_state(1, "Error"));
                }
            } else if let Some((code, reason)) = lookup(a.terminated, c.name) {
                st.set("state", terminated_state(*code, reason));
                st.set("ready", false);
                st.set("started", false);
            } else if running {
                st.set(
                    "state",
                    obj! { "running" => obj! { "startedAt" => &started } },
                );
            } else {
                st.set("state", terminated_state(1, "Error"));
                st.set("ready", false);
                st.set("started", false);
            }
            cstat.push(st);
        }
        status.set("containerStatuses", cstat);
        let ready = if running && a.waiting.is_empty() {
            "True"
        } else {
            "False"
        };
        let scheduled = if node.is_empty() { "False" } else { "True" };
        let cond = |kind: &str, st: &str| {
            obj! { "type" => kind, "status" => st, "lastTransitionTime" => &started }
        };
        status.set(
            "conditions",
            vec![
                cond("PodReadyToStartContainers", scheduled),
                cond("Initialized", "True"),
                cond("Ready", ready),
                cond("ContainersReady", ready),
                cond("PodScheduled", scheduled),
            ],
        );
        // `_qos` without limits: BestEffort when no container requests anything, else Burstable.
        let qos = if a.containers.iter().all(|c| c.requests.is_empty()) {
            "BestEffort"
        } else {
            "Burstable"
        };
        status.set("qosClass", qos);
        let p = obj! {
            "apiVersion" => "v1", "kind" => "Pod", "metadata" => meta, "spec" => spec, "status" => status,
        };
        self.add(p, true)?;
        Ok(name)
    }

    // ---------------------------------------------------------------- workloads

    /// `daemonset(name, ns, nodes, cpu=..., memory=..., priority=..., priority_class=...)`.
    pub(crate) fn daemonset(
        &mut self,
        name: &str,
        ns: &str,
        nodes: &[&str],
        (cpu, memory): (&str, &str),
        priority: Option<(i64, &str)>,
    ) -> io::Result<()> {
        let mut lbl = Obj::new();
        lbl.set("app.kubernetes.io/name", name);
        lbl.set("controller-revision-hash", template_hash(&mut self.rng));
        lbl.set("pod-template-generation", "1");
        let image = format!(
            "registry.example.com/{ns}/{name}:0.{}",
            self.rng.randint(1, 9)
        );
        let tol = [
            obj! { "operator" => "Exists", "effect" => "NoSchedule" },
            obj! { "operator" => "Exists", "effect" => "NoExecute" },
            obj! { "key" => "node.kubernetes.io/disk-pressure", "operator" => "Exists", "effect" => "NoSchedule" },
        ];
        let owner = owner("DaemonSet", name, ns, "apps/v1");
        for &n in nodes {
            let aff = obj! {
                "nodeAffinity" => obj! { "requiredDuringSchedulingIgnoredDuringExecution" => obj! {
                    "nodeSelectorTerms" => vec![obj! { "matchFields" => vec![obj! {
                        "key" => "metadata.name", "operator" => "In", "values" => vec![Json::from(n)],
                    }] }],
                } },
            };
            let pod_name = format!("{name}-{}", suffix(&mut self.rng, 5));
            let mut requests = Obj::new();
            requests.set("cpu", cpu);
            requests.set("memory", memory);
            let mut args = PodArgs::new(
                vec![Container {
                    name,
                    image: &image,
                    requests,
                }],
                &lbl,
            );
            args.owner = Some(&owner);
            args.tolerations = &tol;
            args.affinity = Some(&aff);
            args.default_tolerations = false;
            if let Some((value, class)) = priority {
                args.priority = Some(value);
                args.priority_class = Some(class);
            }
            self.pod(pod_name, ns, n, args)?;
        }
        Ok(())
    }

    /// `job_pod(job, ns, node, phase=..., terminated=..., cpu=..., memory=...)`.
    ///
    /// The Python sets `p["spec"]["restartPolicy"] = "Never"` after `add` returned, when the
    /// stream already holds the pod: the reference bytes keep `"Always"`, and so does this port.
    pub(crate) fn job_pod(
        &mut self,
        job: &str,
        ns: &str,
        node: &str,
        phase: Phase,
        terminated: &[(&str, (i64, &str))],
        (cpu, memory): (&str, &str),
    ) -> io::Result<()> {
        let image = "registry.example.com/batch/report:3.1";
        let mut lbl = Obj::new();
        lbl.set("batch.kubernetes.io/job-name", job);
        lbl.set("job-name", job);
        lbl.set(
            "batch.kubernetes.io/controller-uid",
            uid_for(&["Job", ns, job]),
        );
        let name = format!("{job}-{}", suffix(&mut self.rng, 5));
        let owner = owner("Job", job, ns, "batch/v1");
        let mut requests = Obj::new();
        requests.set("cpu", cpu);
        requests.set("memory", memory);
        let mut args = PodArgs::new(
            vec![Container {
                name: "main",
                image,
                requests,
            }],
            &lbl,
        );
        args.owner = Some(&owner);
        args.phase = phase;
        args.terminated = terminated;
        self.pod(name, ns, node, args).map(drop)
    }

    // ------------------------------------------------------------ other objects

    /// `pdb(name, ns, match_labels, max_unavailable=..., allowed=..., current=..., desired=...,
    /// expected=...)`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn pdb(
        &mut self,
        name: &str,
        ns: &str,
        match_labels: Obj,
        max_unavailable: i64,
        allowed: i64,
        current: i64,
        desired: i64,
        expected: i64,
    ) -> io::Result<()> {
        self.ns(ns);
        let spec = obj! {
            "selector" => obj! { "matchLabels" => match_labels },
            "maxUnavailable" => max_unavailable,
        };
        let p = obj! {
            "apiVersion" => "policy/v1", "kind" => "PodDisruptionBudget",
            "metadata" => obj! {
                "name" => name, "namespace" => ns, "uid" => uid_for(&["pdb", ns, name]),
                "generation" => 1, "creationTimestamp" => old(1),
            },
            "spec" => spec,
            "status" => obj! {
                "observedGeneration" => 1, "disruptionsAllowed" => allowed, "currentHealthy" => current,
                "desiredHealthy" => desired, "expectedPods" => expected,
                "conditions" => vec![obj! {
                    "type" => "DisruptionAllowed", "status" => if allowed > 0 { "True" } else { "False" },
                    "reason" => if allowed > 0 { "SufficientPods" } else { "InsufficientPods" },
                    "lastTransitionTime" => old(1), "observedGeneration" => 1, "message" => "",
                }],
            },
        };
        self.add(p, false)
    }

    /// `priority_class(name, value)` (not the global default).
    pub(crate) fn priority_class(&mut self, name: &str, value: i64) -> io::Result<()> {
        let pc = obj! {
            "apiVersion" => "scheduling.k8s.io/v1", "kind" => "PriorityClass",
            "metadata" => obj! { "name" => name, "uid" => uid_for(&["pc", name]), "creationTimestamp" => old(0) },
            "value" => value, "globalDefault" => false, "preemptionPolicy" => "PreemptLowerPriority",
            "description" => format!("{name} workloads"),
        };
        self.add(pc, false)
    }
}

/// `owner(kind, name, ns, api)`.
pub(crate) fn owner(kind: &str, name: &str, ns: &str, api: &str) -> Obj {
    let mut o = Obj::new();
    o.set("apiVersion", api);
    o.set("kind", kind);
    o.set("name", name);
    o.set("uid", uid_for(&[kind, ns, name]));
    o.set("controller", true);
    o.set("blockOwnerDeletion", true);
    o
}

// ------------------------------------------------------------------------- policies

/// gen_large.py's `DESCHEDULE_PLUGINS`, plus CpuOrchestration (the Koordinator layer's; no
/// gen_large.py profile names it, so the base output is unchanged).
const DESCHEDULE_PLUGINS: [&str; 7] = [
    "RemovePodsViolatingNodeAffinity",
    "RemovePodsViolatingNodeTaints",
    "RemovePodsViolatingInterPodAntiAffinity",
    "RemovePodsHavingTooManyRestarts",
    "PodLifeTime",
    "RemoveFailedPods",
    "CpuOrchestration",
];

/// `profile(name, plugins)` with the default explicit, argument-less `DefaultEvictor`.
pub(crate) fn profile(name: &str, plugins: Vec<(&str, Obj)>) -> Obj {
    let mut cfg = vec![obj! { "name" => "DefaultEvictor", "args" => Obj::new() }];
    let (mut desched, mut bal) = (Vec::new(), Vec::new());
    for (pname, args) in plugins {
        cfg.push(obj! { "name" => pname, "args" => args });
        if DESCHEDULE_PLUGINS.contains(&pname) {
            desched.push(Json::from(pname));
        } else {
            bal.push(Json::from(pname));
        }
    }
    let mut plug = Obj::new();
    plug.set(
        "filter",
        obj! { "enabled" => vec![Json::from("DefaultEvictor")] },
    );
    plug.set(
        "preevictionfilter",
        obj! { "enabled" => vec![Json::from("DefaultEvictor")] },
    );
    if !desched.is_empty() {
        plug.set("deschedule", obj! { "enabled" => desched });
    }
    if !bal.is_empty() {
        plug.set("balance", obj! { "enabled" => bal });
    }
    obj! { "name" => name, "pluginConfig" => cfg, "plugins" => plug }
}

/// `policy(profiles)` without global settings.
pub(crate) fn policy(profiles: Vec<Obj>) -> Obj {
    obj! { "apiVersion" => "descheduler/v1alpha2", "kind" => "DeschedulerPolicy", "profiles" => profiles }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected values from CPython 3.11.7 running the k8sfixtures.py functions, e.g.
    // `python3 -c "import k8sfixtures as k; print(k.young(1234567), k.uid_for('pod', 'team-01', 'x'))"`.

    #[test]
    fn timestamps_match_python() {
        assert_eq!(old(0), "2020-03-02T08:00:00Z");
        assert_eq!(old(7), "2020-03-02T08:07:00Z");
        assert_eq!(old(1_234_567), "2022-07-07T16:07:00Z");
        assert_eq!(young(0), "2099-06-01T12:00:00Z");
        // crosses 2100-02-28, which is not followed by a leap day
        assert_eq!(young(1_234_567), "2101-10-06T20:07:00Z");
    }

    #[test]
    fn uid_for_matches_python() {
        // sha1("pod/team-01/x") = ee400b1a4f840c90d4b4607008cb9b7e97f104f0
        assert_eq!(
            uid_for(&["pod", "team-01", "x"]),
            "ee400b1a-4f84-0c90-d4b4-607008cb9b7e"
        );
    }
}
