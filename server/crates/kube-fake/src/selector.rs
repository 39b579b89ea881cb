//! Label and field selectors: parsing the `labelSelector` / `fieldSelector` query strings the
//! way the real API server does, matching them against stored objects, and matching a
//! `meta/v1` `LabelSelector` object (a PodDisruptionBudget's `spec.selector`) against labels.

use std::borrow::Cow;

use serde_json::Value;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
    Gt(String, i64),
    Lt(String, i64),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LabelSelector(Vec<LabelReq>);

fn label<'a>(labels: &'a [(Box<str>, Box<str>)], key: &str) -> Option<&'a str> {
    labels.iter().find(|(k, _)| &**k == key).map(|(_, v)| &**v)
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn is_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/')
}

fn parse_set(rest: &str, whole: &str) -> Result<Vec<String>, String> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format!("unable to parse requirement: found '{whole}', expected: '('"))?;
    let values: Vec<String> = inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect();
    if values.is_empty() {
        return Err(format!(
            "unable to parse requirement: for 'in', 'notin' operators, values set can't be empty: '{whole}'"
        ));
    }
    Ok(values)
}

fn parse_requirement(req: &str) -> Result<LabelReq, String> {
    let whole = req.trim();
    if let Some(key) = whole.strip_prefix('!') {
        let key = key.trim();
        if key.is_empty() || !key.chars().all(is_key_char) {
            return Err(format!(
                "unable to parse requirement: invalid key in '{whole}'"
            ));
        }
        return Ok(LabelReq::NotExists(key.to_string()));
    }
    let key_end = whole.find(|c: char| !is_key_char(c)).unwrap_or(whole.len());
    let key = &whole[..key_end];
    if key.is_empty() {
        return Err(format!(
            "unable to parse requirement: found '{whole}', expected: identifier"
        ));
    }
    let rest = whole[key_end..].trim_start();
    let key = key.to_string();
    if rest.is_empty() {
        return Ok(LabelReq::Exists(key));
    }
    let number = |v: &str| {
        v.trim()
            .parse::<i64>()
            .map_err(|_| format!("unable to parse requirement: '{v}' is not an integer"))
    };
    if let Some(v) = rest.strip_prefix("!=") {
        Ok(LabelReq::NotEq(key, v.trim().to_string()))
    } else if let Some(v) = rest.strip_prefix("==") {
        Ok(LabelReq::Eq(key, v.trim().to_string()))
    } else if let Some(v) = rest.strip_prefix('=') {
        Ok(LabelReq::Eq(key, v.trim().to_string()))
    } else if let Some(v) = rest.strip_prefix('>') {
        Ok(LabelReq::Gt(key, number(v)?))
    } else if let Some(v) = rest.strip_prefix('<') {
        Ok(LabelReq::Lt(key, number(v)?))
    } else if let Some(v) = rest.strip_prefix("notin") {
        Ok(LabelReq::NotIn(key, parse_set(v, whole)?))
    } else if let Some(v) = rest.strip_prefix("in") {
        Ok(LabelReq::In(key, parse_set(v, whole)?))
    } else {
        Err(format!(
            "unable to parse requirement: found '{rest}', expected: in, notin, =, ==, !=, gt, lt"
        ))
    }
}

impl LabelSelector {
    /// Parses a `labelSelector` query value; the message of the error is what the 400 answer says.
    pub(crate) fn parse(s: &str) -> Result<Self, String> {
        if s.trim().is_empty() {
            return Ok(LabelSelector::default());
        }
        split_top_level(s)
            .into_iter()
            .map(parse_requirement)
            .collect::<Result<Vec<_>, _>>()
            .map(LabelSelector)
    }

    pub(crate) fn matches(&self, labels: &[(Box<str>, Box<str>)]) -> bool {
        self.0.iter().all(|req| match req {
            LabelReq::Eq(k, v) => label(labels, k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => label(labels, k) != Some(v.as_str()),
            LabelReq::In(k, vs) => label(labels, k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelReq::NotIn(k, vs) => label(labels, k).is_none_or(|l| vs.iter().all(|v| v != l)),
            LabelReq::Exists(k) => label(labels, k).is_some(),
            LabelReq::NotExists(k) => label(labels, k).is_none(),
            LabelReq::Gt(k, n) => label(labels, k)
                .and_then(|l| l.parse::<i64>().ok())
                .is_some_and(|l| l > *n),
            LabelReq::Lt(k, n) => label(labels, k)
                .and_then(|l| l.parse::<i64>().ok())
                .is_some_and(|l| l < *n),
        })
    }
}

/// A parsed field selector (`key=value`, `key==value`, `key!=value`, comma-separated): each
/// requirement is (key, whether it tests equality, value).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FieldSelector(Vec<(&'static str, bool, String)>);

/// Old clients' names of a field, as the real server converts them.
const FIELD_ALIASES: &[(&str, &str)] = &[("spec.host", "spec.nodeName")];

impl FieldSelector {
    /// Parses a `fieldSelector` value, accepting only the keys in `supported` (the resource's
    /// field label conversion on a real server); the error is the real 400 message.
    pub(crate) fn parse(s: &str, supported: &[&'static str]) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(FieldSelector(reqs));
        }
        for part in s.split(',') {
            let (key, equal, value) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                ));
            };
            let key = key.trim();
            let key = FIELD_ALIASES
                .iter()
                .find(|(old, _)| *old == key)
                .map_or(key, |(_, new)| *new);
            let key = supported
                .iter()
                .copied()
                .find(|k| *k == key)
                .ok_or_else(|| format!("field label not supported: {key}"))?;
            reqs.push((key, equal, value.trim().to_string()));
        }
        Ok(FieldSelector(reqs))
    }

    /// `value` gives an object's value of a field key (`""` when unset, as on the real server).
    pub(crate) fn matches<'a>(&self, value: impl Fn(&str) -> Cow<'a, str>) -> bool {
        self.0
            .iter()
            .all(|(key, equal, want)| (value(key) == want.as_str()) == *equal)
    }
}

/// An object's value of a selectable field, as the real registries compute it: strings as they
/// are (`""` when unset), booleans as `true`/`false` (unset is `false`), `status.podIP` from
/// `status.podIPs[0]`, `source` from `source.component`. Keys no registry computes are `""`.
pub(crate) fn field_value(object: &Value, key: &str) -> String {
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let flag = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_bool)
            .unwrap_or(false)
            .to_string()
    };
    match key {
        "spec.hostNetwork" => flag("/spec/hostNetwork"),
        "spec.unschedulable" => flag("/spec/unschedulable"),
        "status.podIP" => match object
            .pointer("/status/podIPs/0/ip")
            .and_then(Value::as_str)
        {
            Some(ip) => ip.to_string(),
            None => text("/status/podIP"),
        },
        "source" => text("/source/component"),
        "status.podIPs" => String::new(),
        other => text(&format!("/{}", other.replace('.', "/"))),
    }
}

/// Whether a `meta/v1` `LabelSelector` object selects `labels`. An empty selector (`{}`)
/// selects everything; a missing one (`null`) selects nothing, as for policy/v1 PDBs.
/// Malformed selectors select nothing.
pub(crate) fn selector_object_matches(
    selector: Option<&Value>,
    labels: &[(Box<str>, Box<str>)],
) -> bool {
    let Some(Value::Object(sel)) = selector else {
        return false;
    };
    if let Some(match_labels) = sel.get("matchLabels") {
        let Some(match_labels) = match_labels.as_object() else {
            return false;
        };
        for (k, v) in match_labels {
            if label(labels, k) != v.as_str() {
                return false;
            }
        }
    }
    if let Some(exprs) = sel.get("matchExpressions") {
        let Some(exprs) = exprs.as_array() else {
            return false;
        };
        for expr in exprs {
            let Some(key) = expr.get("key").and_then(Value::as_str) else {
                return false;
            };
            let values: Vec<&str> = expr
                .get("values")
                .and_then(Value::as_array)
                .map(|vs| vs.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let have = label(labels, key);
            let ok = match expr.get("operator").and_then(Value::as_str) {
                Some("In") => have.is_some_and(|h| values.contains(&h)),
                Some("NotIn") => have.is_none_or(|h| !values.contains(&h)),
                Some("Exists") => have.is_some(),
                Some("DoesNotExist") => have.is_none(),
                _ => false,
            };
            if !ok {
                return false;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> Vec<(Box<str>, Box<str>)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn label_selector_grammar() {
        let l = labels(&[("app", "web"), ("tier", "front"), ("n", "5")]);
        let yes = [
            "",
            "app=web",
            "app==web",
            "app!=db",
            "app in (web, db)",
            "tier notin (back)",
            "app",
            "!missing",
            "app=web,tier=front",
            "n>3",
            "n<7",
            "missing notin (x)",
            "missing!=x",
        ];
        for s in yes {
            assert!(LabelSelector::parse(s).unwrap().matches(&l), "{s}");
        }
        let no = [
            "app=db",
            "app!=web",
            "app in (db)",
            "app notin (web,x)",
            "missing",
            "!app",
            "n>5",
            "missing in (x)",
        ];
        for s in no {
            assert!(!LabelSelector::parse(s).unwrap().matches(&l), "{s}");
        }
        for bad in ["app in ()", "app in web", "=x", "app ~ x", "n>x"] {
            assert!(LabelSelector::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn field_selector_keys_are_checked() {
        let pods = ["metadata.name", "metadata.namespace", "spec.nodeName"];
        let sel = FieldSelector::parse("spec.nodeName=n1,metadata.name!=a", &pods).unwrap();
        let value = |name: &'static str| {
            move |f: &str| {
                Cow::Borrowed(match f {
                    "metadata.name" => name,
                    "spec.nodeName" => "n1",
                    _ => "",
                })
            }
        };
        assert!(sel.matches(value("b")));
        assert!(!sel.matches(value("a")));
        let old = FieldSelector::parse("spec.host=n1", &pods).unwrap();
        assert!(old.matches(value("b")));
        let err = FieldSelector::parse("spec.nodeName=n1", &["metadata.name"]).unwrap_err();
        assert_eq!(err, "field label not supported: spec.nodeName");
        assert!(FieldSelector::parse("nonsense", &pods).is_err());
    }

    #[test]
    fn field_values_are_computed_like_the_registries() {
        let pod = json!({"spec": {"schedulerName": "s", "hostNetwork": true},
            "status": {"podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.2"}]}});
        assert_eq!(field_value(&pod, "spec.schedulerName"), "s");
        assert_eq!(field_value(&pod, "spec.hostNetwork"), "true");
        assert_eq!(field_value(&pod, "status.podIP"), "10.0.0.2");
        assert_eq!(field_value(&pod, "spec.restartPolicy"), "");
        assert_eq!(field_value(&json!({}), "spec.unschedulable"), "false");
        let event = json!({"involvedObject": {"uid": "u"}, "source": {"component": "kubelet"}});
        assert_eq!(field_value(&event, "involvedObject.uid"), "u");
        assert_eq!(field_value(&event, "source"), "kubelet");
    }

    #[test]
    fn label_selector_objects() {
        let l = labels(&[("app", "web")]);
        assert!(selector_object_matches(Some(&json!({})), &l));
        assert!(!selector_object_matches(None, &l));
        assert!(selector_object_matches(
            Some(&json!({"matchLabels": {"app": "web"}})),
            &l
        ));
        assert!(!selector_object_matches(
            Some(&json!({"matchLabels": {"app": "db"}})),
            &l
        ));
        let expr = |op: &str, values: &[&str]| json!({"matchExpressions": [{"key": "app", "operator": op, "values": values}]});
        assert!(selector_object_matches(
            Some(&expr("In", &["web", "x"])),
            &l
        ));
        assert!(!selector_object_matches(Some(&expr("NotIn", &["web"])), &l));
        assert!(selector_object_matches(Some(&expr("Exists", &[])), &l));
        assert!(!selector_object_matches(
            Some(&expr("DoesNotExist", &[])),
            &l
        ));
        assert!(!selector_object_matches(Some(&expr("Bogus", &[])), &l));
    }
}
