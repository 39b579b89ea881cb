"""PodAgeOnHotNodes: a Rebalancer policy written in Python.

Propose evicting pods older than `minAgeDays` days from nodes whose measured cpu usage has been
above `cpuThresholdPercent` % of their allocatable cpu for `hotRuns` consecutive runs, the
hottest node first and each node's oldest pods first, at most `maxEvictionsPerRun` pods per run.
The host's evictor decides what may go (DefaultEvictor filters, PDBs, the run's limits).

It reads the cluster through the language-neutral `columns` interface of ABI 1.4 (typed
columns pulled by name; no rkyv), remembers hot nodes between runs in its `state`, and writes
what it decided to the run's log. `build.sh` turns it into a component with componentize-py;
`docs/writing-a-policy-python.md` walks through it. `policies-wasm/example-python-twin` is the
same logic in Rust: the two decide identically (server/tests/api/python_policy.rs).

State, one key per node that was hot in the previous run:
    hot-runs/<node name>  ->  the number of consecutive runs it was hot, as ASCII digits ("3")
A node that is not hot in a run (below the threshold, no measurement, not Ready, outside the
profile's nodeSelector) loses its key, so the count restarts from 1 when it is hot again.

Not available in the sandbox: files, clocks, randomness, network, environment and stdout.
`print` and importing a module the build did not preload end the evaluation; use `cluster.log`,
and import everything at the top of this file (componentize-py preloads what it imports).
"""

import json

import wit_world
from componentize_py_types import Err
from wit_world.imports import cluster, columns, evictor, state, types

NAME = "PodAgeOnHotNodes"
VERSION = "0.1.0"

# Absent values in columns (WIT has no constants; docs/abi.md documents these).
ABSENT_U32 = 0xFFFF_FFFF
ABSENT_S64 = -(1 << 63)

DAY_MS = 86_400_000
STATE_PREFIX = "hot-runs/"
# Per-pod and per-node detail lines logged before they are only counted: the host ends an
# evaluation past its log caps, so detail stays bounded on any cluster size.
MAX_DETAIL_LINES = 50

# name -> (default, minimum, maximum, description); every arg is an integer.
ARGS = {
    "minAgeDays": (7, 1, 3650, "Only pods created more than this many days ago are proposed."),
    "cpuThresholdPercent": (
        80,
        1,
        100,
        "A node is hot when its measured cpu usage is above this percentage of its allocatable cpu.",
    ),
    "hotRuns": (
        3,
        1,
        1000,
        "A node's pods are proposed once it has been hot for this many consecutive runs.",
    ),
    "maxEvictionsPerRun": (10, 1, 100_000, "At most this many pods are proposed per run."),
}

ARGS_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        name: {
            "type": "integer",
            "minimum": minimum,
            "maximum": maximum,
            "default": default,
            "description": description,
        }
        for name, (default, minimum, maximum, description) in ARGS.items()
    },
}
DEFAULT_ARGS = {name: spec[0] for name, spec in ARGS.items()}


def parse_args(text):
    """The args with defaults applied, and the list of `ArgError`s (all of them, per field)."""
    text = text.strip()
    if text in ("", "null"):
        return dict(DEFAULT_ARGS), []
    try:
        raw = json.loads(text)
    except ValueError as e:
        return None, [types.ArgError("", f"the args are not JSON: {e}")]
    if not isinstance(raw, dict):
        return None, [types.ArgError("", f"must be an object, got {json_type(raw)}")]
    args = dict(DEFAULT_ARGS)
    errors = []
    for field, value in raw.items():
        if field not in ARGS:
            known = ", ".join(ARGS)
            errors.append(types.ArgError(field, f"unknown field; the args are {known}"))
            continue
        _, minimum, maximum, _ = ARGS[field]
        # JSON Schema's integer: 7 and 7.0 are integers, true and 7.5 are not.
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            errors.append(types.ArgError(field, f"must be an integer, got {json.dumps(value)}"))
        elif not minimum <= value <= maximum:
            errors.append(
                types.ArgError(field, f"must be between {minimum} and {maximum}, got {value}")
            )
        else:
            args[field] = value
    return args, errors


def json_type(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array"


def percent(permille):
    """`934` -> `93.4%`."""
    return f"{permille // 10}.{permille % 10}%"


def refusal_text(refusal):
    """The words the Rust SDK uses for each refusal (`Refusal`'s Display)."""
    if isinstance(refusal, types.Refusal_NodeLimit):
        return "maximum number of evicted pods per node reached"
    if isinstance(refusal, types.Refusal_NamespaceLimit):
        return "maximum number of evicted pods per namespace reached"
    if isinstance(refusal, types.Refusal_TotalLimit):
        return "maximum number of evicted pods per a descheduling cycle reached"
    if isinstance(refusal, types.Refusal_DisruptionBudget):
        return f"disruption budget: {refusal.value}"
    if isinstance(refusal, types.Refusal_NotEvictable):
        return f"not evictable: {refusal.value}"
    return "unknown pod"


class Details:
    """Debug lines about single pods or nodes: the first MAX_DETAIL_LINES, then only counted."""

    def __init__(self):
        self.written = 0
        self.suppressed = 0

    def log(self, message):
        if self.written < MAX_DETAIL_LINES:
            self.written += 1
            cluster.log(types.LogLevel.DEBUG, message())
        else:
            self.suppressed += 1

    def finish(self):
        if self.suppressed:
            cluster.log(types.LogLevel.DEBUG, f"{self.suppressed} more detail lines not logged")


def update_hot_runs(hot_names):
    """Count this run in the state: +1 for each hot node, drop every other node's key.
    Returns {node name: consecutive hot runs, this one included}."""
    previous = {}
    for key in state.keys():
        if not key.startswith(STATE_PREFIX):
            continue
        raw = state.get(key) or b""
        text = raw.decode("ascii", "replace")
        previous[key[len(STATE_PREFIX) :]] = int(text) if text.isdigit() else 0
    counts = {name: previous.get(name, 0) + 1 for name in hot_names}
    for name in previous:
        if name not in counts:
            state.remove(STATE_PREFIX + name)
    for name, count in counts.items():
        # `put` raises Err(message) when the scope would exceed its cap: the evaluation fails
        # and nothing of it is committed.
        state.put(STATE_PREFIX + name, str(count).encode("ascii"))
    return counts


def deschedule(args):
    now_ms = cluster.now_ms()
    threshold = args["cpuThresholdPercent"]
    min_age_ms = args["minAgeDays"] * DAY_MS

    # The nodes this evaluation covers: Ready and matching the profile's nodeSelector.
    in_scope = cluster.nodes()
    usage = columns.column_s64("nodes", "usage:cpu")
    allocatable = columns.column_s64("nodes", "allocatable:cpu")
    unmeasured = 0
    hot = []  # (node id, usage in permille of allocatable)
    for node in in_scope:
        used, alloc = usage[node], allocatable[node]
        if used == ABSENT_S64 or alloc == ABSENT_S64 or alloc <= 0:
            unmeasured += 1
        elif used * 100 > threshold * alloc:
            hot.append((node, used * 1000 // alloc))
    if unmeasured:
        cluster.log(
            types.LogLevel.DEBUG,
            f"{unmeasured} of {len(in_scope)} nodes have no cpu usage or allocatable cpu: never hot",
        )

    name_ids = columns.column_u32("nodes", "name")
    names = columns.strings_of([name_ids[node] for node, _ in hot])
    node_name = {node: name for (node, _), name in zip(hot, names)}
    counts = update_hot_runs(names)

    # Hottest first; the node id breaks ties.
    hot.sort(key=lambda entry: (-entry[1], entry[0]))
    details = Details()
    acting = []
    for node, permille in hot:
        runs = counts[node_name[node]]
        if runs >= args["hotRuns"]:
            acting.append((node, permille, runs))
        else:
            details.log(
                lambda: f"node {node_name[node]} at {percent(permille)} cpu, hot for {runs} of "
                f"{args['hotRuns']} runs: waiting"
            )
    cluster.log(
        types.LogLevel.INFO,
        f"{len(hot)} of {len(in_scope)} nodes above {threshold}% cpu; {len(acting)} of them for "
        f"at least {args['hotRuns']} consecutive runs",
    )
    if not acting:
        details.finish()
        return

    # Old pods of the acting nodes, each node's oldest first (the pod id breaks ties).
    pod_node = columns.column_u32("pods", "node")
    created = columns.column_s64("pods", "creation-ms")
    old = {node: [] for node, _, _ in acting}
    for pod, node in enumerate(pod_node):
        pods = old.get(node)
        if pods is not None and now_ms - created[pod] > min_age_ms:
            pods.append(pod)
    ordered = []
    for node, _, _ in acting:
        old[node].sort(key=lambda pod: (created[pod], pod))
        ordered.extend(old[node])

    # The evictor's filters (DefaultEvictor: DaemonSet, mirror, static, local-storage pods,
    # priority, ...; then nodeFit when enabled) decide which of them may go at all. Both keep
    # the order they are given.
    evictable = evictor.filter(ordered)
    if evictable:
        evictable = evictor.pre_eviction_filter(evictable)
    by_node = {node: [] for node, _, _ in acting}
    for pod in evictable:
        by_node[pod_node[pod]].append(pod)

    budget = args["maxEvictionsPerRun"]
    proposed = 0
    pod_names = pod_namespaces = None  # pulled only when a refusal is logged
    stop = False
    for node, permille, runs in acting:
        if stop or budget == 0:
            break
        pods = by_node[node]
        cluster.log(
            types.LogLevel.INFO,
            f"node {node_name[node]} at {percent(permille)} cpu for {runs} runs: "
            f"{len(pods)} of {len(old[node])} pods older than {args['minAgeDays']} days evictable",
        )
        reason = (
            f"node {node_name[node]} uses {percent(permille)} of its allocatable cpu, above "
            f"{threshold}% for {runs} consecutive runs; the pod is older than "
            f"{args['minAgeDays']} days"
        )
        start = 0
        while start < len(pods) and budget > 0:
            batch = pods[start : start + budget]
            outcome = evictor.propose_evictions(batch, reason)
            proposed += outcome.admitted
            budget -= outcome.admitted
            if outcome.refusal is None:
                start += len(batch)
                continue
            refusal = outcome.refusal
            if isinstance(refusal, types.Refusal_TotalLimit):
                stop = True
                break
            if isinstance(refusal, types.Refusal_NodeLimit):
                break
            # A PDB, the namespace limit, or a pod that is no longer evictable: this pod only.
            refused = batch[outcome.admitted]
            if pod_names is None:
                pod_names = columns.column_text("pods", "name")
                pod_namespaces = columns.column_u32("pods", "namespace")
            details.log(
                lambda: f"eviction of {columns.strings_of([pod_namespaces[refused]])[0]}/"
                f"{pod_names[refused]} refused: {refusal_text(refusal)}"
            )
            start += outcome.admitted + 1
    details.finish()
    cluster.log(
        types.LogLevel.INFO,
        f"proposed {proposed} pods from {len(acting)} nodes (maxEvictionsPerRun "
        f"{args['maxEvictionsPerRun']})",
    )


def described(error):
    """An unexpected exception as the run report shows it: type, message and where, innermost
    frame last. (`traceback` would read source files, which the sandbox has not got.)"""
    frames = []
    tb = error.__traceback__
    while tb is not None:
        frames.append(f"{tb.tb_frame.f_code.co_name}:{tb.tb_lineno}")
        tb = tb.tb_next
    return f"{type(error).__name__}: {error} (at {' > '.join(frames)})"


class WitWorld(wit_world.WitWorld):
    """The four exports of the `policy` world."""

    def info(self) -> types.PolicyInfo:
        return types.PolicyInfo(
            name=NAME,
            version=VERSION,
            description=(
                "Example policy written in Python: evicts pods older than minAgeDays from nodes "
                "whose measured cpu usage has been above cpuThresholdPercent of allocatable for "
                "hotRuns consecutive runs, hottest node and oldest pods first, at most "
                "maxEvictionsPerRun per run."
            ),
            extension_points=[types.ExtensionPoint.DESCHEDULE],
            args_schema=json.dumps(ARGS_SCHEMA),
            default_args=json.dumps(DEFAULT_ARGS),
        )

    def validate_args(self, args: str) -> None:
        _, errors = parse_args(args)
        if errors:
            raise Err(errors)

    def deschedule(self, args: str) -> None:
        parsed, errors = parse_args(args)
        if errors:
            raise Err("invalid args: " + "; ".join(
                f"{e.field}: {e.message}" if e.field else e.message for e in errors
            ))
        try:
            deschedule(parsed)
        except Err:
            raise
        except Exception as e:
            raise Err(described(e)) from None

    def balance(self, args: str) -> None:
        raise Err(f"{NAME} implements the deschedule extension point only")
