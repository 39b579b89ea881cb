//! Pieces of descheduler's plugin args that several plugins share: `api.Namespaces` and Go's
//! `null`-means-zero-value decoding. Plugins keep their own validation messages.

use serde::{Deserialize, Deserializer, Serialize};

/// descheduler's `api.Namespaces`: the pods considered are those of `include`, or all but those
/// of `exclude` (which plugins accept which, and whether both may be set, is theirs to check).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Namespaces {
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub include: Vec<String>,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub exclude: Vec<String>,
}

/// Go's JSON decoder turns `null` into the zero value; decode it the same way
/// (`#[serde(default, deserialize_with = "null_as_default")]`).
pub fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_and_missing_lists_are_empty_and_unknown_fields_refused() {
        let ns: Namespaces = serde_json::from_str(r#"{"include": null}"#).unwrap();
        assert_eq!(ns, Namespaces::default());
        let ns: Namespaces = serde_json::from_str(r#"{"exclude": ["kube-system"]}"#).unwrap();
        assert_eq!(ns.exclude, ["kube-system"]);
        assert_eq!(
            serde_json::to_string(&ns).unwrap(),
            r#"{"exclude":["kube-system"]}"#
        );
        assert!(serde_json::from_str::<Namespaces>(r#"{"includes": []}"#).is_err());
    }
}
