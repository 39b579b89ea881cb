//! Kubernetes' own validation rules for what a pushed document names and labels: object
//! names, label keys and values, annotations, int-or-percent values (apimachinery's
//! `validation` package and `ValidateObjectMeta`, with their limits and, near enough, their
//! messages).
//!
//! Owns the rules, as functions returning the problem in words. Must not: know where a value
//! sits in an object (callers add the field path) or decide which objects are validated
//! (pushed documents are; stored and live objects were validated when they arrived).

/// Longest DNS-1123 subdomain (most object names, label-key prefixes).
pub const DNS1123_SUBDOMAIN_MAX: usize = 253;
/// Longest DNS-1123 label (namespace names) and label-key name part / label value.
pub const DNS1123_LABEL_MAX: usize = 63;
/// Keys plus values of one object's annotations (`TotalAnnotationSizeLimitB`).
pub const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;

fn lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && lower_alnum(b[0])
        && lower_alnum(b[b.len() - 1])
        && b.iter().all(|&c| lower_alnum(c) || c == b'-')
}

/// A namespace name (and other DNS-1123 labels): at most 63 of `a-z 0-9 -`, starting and
/// ending with a letter or digit.
pub fn dns1123_label(s: &str) -> Result<(), String> {
    if s.len() > DNS1123_LABEL_MAX {
        return Err(format!(
            "must be no more than {DNS1123_LABEL_MAX} characters (is {})",
            s.len()
        ));
    }
    if !is_dns1123_label(s) {
        return Err(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric \
                    characters or '-', and must start and end with an alphanumeric character \
                    (e.g. 'my-name' or '123-abc')"
                .into(),
        );
    }
    Ok(())
}

/// Most object names: at most 253 characters, dot-separated DNS-1123 labels.
pub fn dns1123_subdomain(s: &str) -> Result<(), String> {
    if s.len() > DNS1123_SUBDOMAIN_MAX {
        return Err(format!(
            "must be no more than {DNS1123_SUBDOMAIN_MAX} characters (is {})",
            s.len()
        ));
    }
    if s.is_empty() || !s.split('.').all(is_dns1123_label) {
        return Err(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
                    characters, '-' or '.', and must start and end with an alphanumeric \
                    character (e.g. 'example.com')"
                .into(),
        );
    }
    Ok(())
}

/// Names of kinds this server does not model: Kubernetes requires at least a valid path
/// segment (not `.` or `..`, no `/` or `%`; e.g. RBAC's `system:controller:…`). Capped at 253
/// characters like subdomain names, so that no name is unbounded.
pub fn path_segment_name(s: &str) -> Result<(), String> {
    if s.len() > DNS1123_SUBDOMAIN_MAX {
        return Err(format!(
            "must be no more than {DNS1123_SUBDOMAIN_MAX} characters (is {})",
            s.len()
        ));
    }
    if s == "." || s == ".." {
        return Err(format!("may not be '{s}'"));
    }
    if let Some(c) = s.chars().find(|c| matches!(c, '/' | '%')) {
        return Err(format!("may not contain '{c}'"));
    }
    Ok(())
}

/// An object's `kind`: an identifier of at most 63 ASCII letters and digits, starting with a
/// letter (`Pod`, `NodeMetric`), as Kubernetes kinds are.
pub fn kind(kind: &str) -> Result<(), String> {
    let b = kind.as_bytes();
    if b.len() > DNS1123_LABEL_MAX
        || !b.first().is_some_and(u8::is_ascii_alphabetic)
        || !b.iter().all(u8::is_ascii_alphanumeric)
    {
        return Err(format!(
            "invalid kind {:?}: a kind is at most {DNS1123_LABEL_MAX} ASCII letters and digits, \
             starting with a letter (e.g. 'Pod')",
            super::document::shorten(kind)
        ));
    }
    Ok(())
}

/// An object's `apiVersion` (`""` when absent): `version` or `group/version`, the group a
/// DNS-1123 subdomain and the version a DNS-1123 label.
pub fn api_version(api_version: &str) -> Result<(), String> {
    if api_version.is_empty() {
        return Ok(());
    }
    let (group, version) = match api_version.split_once('/') {
        Some((group, version)) => (Some(group), version),
        None => (None, api_version),
    };
    let valid = group.is_none_or(|g| dns1123_subdomain(g).is_ok()) && is_dns1123_label(version);
    if !valid || version.len() > DNS1123_LABEL_MAX {
        return Err(format!(
            "invalid apiVersion {:?}: expected `version` or `group/version` (e.g. 'v1', \
             'policy/v1')",
            super::document::shorten(api_version)
        ));
    }
    Ok(())
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, or empty when `empty_ok`.
fn is_label_text(s: &str, empty_ok: bool) -> bool {
    let b = s.as_bytes();
    if b.is_empty() {
        return empty_ok;
    }
    b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// A label key (and an annotation key, lower-cased first): an optional DNS-1123 subdomain
/// prefix and `/`, then a name of at most 63 of `A-Z a-z 0-9 - _ .` starting and ending with
/// a letter or digit.
pub fn qualified_name(key: &str) -> Result<(), String> {
    let mut parts = key.splitn(3, '/');
    let (prefix, name) = match (parts.next(), parts.next(), parts.next()) {
        (Some(name), None, None) => (None, name),
        (Some(prefix), Some(name), None) => (Some(prefix), name),
        _ => {
            return Err(
                "a qualified name must be a name with an optional DNS subdomain prefix \
                        and '/' (e.g. 'example.com/MyName')"
                    .into(),
            );
        }
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return Err("prefix part must be non-empty".into());
        }
        dns1123_subdomain(prefix).map_err(|e| format!("prefix part {e}"))?;
    }
    if name.is_empty() {
        return Err("name part must be non-empty".into());
    }
    if name.len() > DNS1123_LABEL_MAX {
        return Err(format!(
            "name part must be no more than {DNS1123_LABEL_MAX} characters (is {})",
            name.len()
        ));
    }
    if !is_label_text(name, false) {
        return Err(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and \
                    must start and end with an alphanumeric character (e.g. 'MyName', \
                    'my.name' or '123-abc')"
                .into(),
        );
    }
    Ok(())
}

/// A label value: at most 63 of `A-Z a-z 0-9 - _ .`, starting and ending with a letter or
/// digit, or empty.
pub fn label_value(value: &str) -> Result<(), String> {
    if value.len() > DNS1123_LABEL_MAX {
        return Err(format!(
            "must be no more than {DNS1123_LABEL_MAX} characters (is {})",
            value.len()
        ));
    }
    if !is_label_text(value, true) {
        return Err(
            "a valid label must be an empty string or consist of alphanumeric \
                    characters, '-', '_' or '.', and must start and end with an alphanumeric \
                    character (e.g. 'MyValue' or 'my_value')"
                .into(),
        );
    }
    Ok(())
}

/// An annotation key: a qualified name, checked lower-cased (Kubernetes allows upper case in
/// the prefix of annotation keys).
pub fn annotation_key(key: &str) -> Result<(), String> {
    qualified_name(&key.to_ascii_lowercase())
}

/// The total size of an object's annotations (keys plus values).
pub fn annotations_size(total: usize) -> Result<(), String> {
    if total > ANNOTATIONS_MAX_BYTES {
        return Err(format!(
            "may not have more than {ANNOTATIONS_MAX_BYTES} bytes of keys and values in all \
             (has {total})"
        ));
    }
    Ok(())
}

/// An int-or-string value as written (`minAvailable: 2`, `maxUnavailable: "10%"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntOrPercent<'a> {
    Int(i64),
    Str(&'a str),
    /// Neither (a float, a boolean, a list…).
    Other,
}

/// A PodDisruptionBudget's `minAvailable` / `maxUnavailable`: a non-negative integer or a
/// percentage (`"0%"` to `"100%"`).
pub fn non_negative_int_or_percent(value: IntOrPercent<'_>) -> Result<(), String> {
    const EXPECTED: &str = "must be an integer or percentage (e.g. 5 or '5%')";
    match value {
        IntOrPercent::Int(n) if n < 0 => Err("must be greater than or equal to 0".into()),
        IntOrPercent::Int(n) if n > i64::from(i32::MAX) => {
            Err(format!("must be at most {} (an int32)", i32::MAX))
        }
        IntOrPercent::Int(_) => Ok(()),
        IntOrPercent::Str(s) => {
            let digits = s.strip_suffix('%').filter(|d| {
                !d.is_empty() && d.len() <= 10 && d.bytes().all(|b| b.is_ascii_digit())
            });
            match digits.map(str::parse::<u64>) {
                Some(Ok(p)) if p <= 100 => Ok(()),
                Some(Ok(_)) => Err("must not be greater than 100%".into()),
                _ => Err(format!("{EXPECTED}, not {:?}", super::document::shorten(s))),
            }
        }
        IntOrPercent::Other => Err(EXPECTED.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["a", "node-1", "ip-10-0-0-1.ec2.internal", &"a".repeat(253)] {
            assert!(dns1123_subdomain(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "../../x",
            "Node",
            "-a",
            "a-",
            "a..b",
            "a_b",
            "é",
            &"a".repeat(254),
        ] {
            assert!(dns1123_subdomain(bad).is_err(), "{bad}");
        }
        assert!(dns1123_label("kube-system").is_ok());
        for bad in ["a.b", &"a".repeat(64), "", "A"] {
            assert!(dns1123_label(bad).is_err(), "{bad}");
        }
        let long = dns1123_label(&"a".repeat(1 << 20)).unwrap_err();
        assert!(long.contains("(is 1048576)") && long.len() < 100, "{long}");
        for ok in ["system:controller:x", "a_b", "Upper"] {
            assert!(path_segment_name(ok).is_ok(), "{ok}");
        }
        for bad in [".", "..", "a/b", "50%", &"a".repeat(254)] {
            assert!(path_segment_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn kinds_and_api_versions() {
        for ok in ["Pod", "NodeMetric", "PodList", "X1"] {
            assert!(kind(ok).is_ok(), "{ok}");
        }
        for bad in ["", "1Pod", "Pod-x", "Pod s", &"K".repeat(64)] {
            assert!(kind(bad).is_err(), "{bad}");
        }
        for ok in [
            "",
            "v1",
            "policy/v1",
            "slo.koordinator.sh/v1alpha1",
            "metrics.k8s.io/v1beta1",
        ] {
            assert!(api_version(ok).is_ok(), "{ok}");
        }
        for bad in ["/v1", "v1/", "a/b/c", "V1", "policy/V1", &"v".repeat(64)] {
            assert!(api_version(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn label_keys_and_values() {
        for ok in [
            "app",
            "app.kubernetes.io/name",
            "kubernetes.io/hostname",
            "MyName",
            "a_b.c-d",
            "x/y",
            &format!("{}/{}", "p".repeat(253), "n".repeat(63)),
        ] {
            assert!(qualified_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "/a",
            "a/",
            "a/b/c",
            "-a",
            "a b",
            "Example.com/a",
            &"n".repeat(64),
            &format!("{}/a", "p".repeat(254)),
        ] {
            assert!(qualified_name(bad).is_err(), "{bad:?}");
        }
        for ok in ["", "v1", "a.b_c-D", &"v".repeat(63)] {
            assert!(label_value(ok).is_ok(), "{ok}");
        }
        for bad in ["-", "a b", "é", &"v".repeat(64), "a/b"] {
            assert!(label_value(bad).is_err(), "{bad}");
        }
        // Annotation keys may have an upper-case prefix; sizes are summed by the caller.
        assert!(annotation_key("Example.com/Key").is_ok());
        assert!(annotation_key("a b").is_err());
        assert!(annotations_size(ANNOTATIONS_MAX_BYTES).is_ok());
        assert!(annotations_size(ANNOTATIONS_MAX_BYTES + 1).is_err());
    }

    #[test]
    fn int_or_percent() {
        use IntOrPercent::*;
        for ok in [Int(0), Int(3), Str("0%"), Str("50%"), Str("100%")] {
            assert!(non_negative_int_or_percent(ok).is_ok(), "{ok:?}");
        }
        for (bad, says) in [
            (Int(-1), "greater than or equal to 0"),
            (Int(1 << 40), "int32"),
            (Str("abc%"), "integer or percentage"),
            (Str("5"), "integer or percentage"),
            (Str("%"), "integer or percentage"),
            (Str("-5%"), "integer or percentage"),
            (Str("101%"), "greater than 100%"),
            (Str("99999999999999999999%"), "integer or percentage"),
            (Other, "integer or percentage"),
        ] {
            let e = non_negative_int_or_percent(bad).unwrap_err();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }
}
