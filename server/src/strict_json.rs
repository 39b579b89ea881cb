//! Request bodies read as the OpenAPI document describes them: where it says "object", only a
//! JSON object. serde's derived `Deserialize` for a struct also takes a JSON array of the
//! field values in order (`[null, null]` for `{"workload": null, "namespace": null}`), which the
//! document does not allow and no client means.
//!
//! Owns: [`Object`] and the `deserialize_with` helpers [`object`], [`optional_object`] and
//! [`objects`].
//! Must not: validate anything else; the types' own `Deserialize` still reads the fields.

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};

/// A `T` read from a JSON object only (an array is refused: "expected a JSON object").
#[derive(Debug, Clone, PartialEq)]
pub struct Object<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectVisitor<T>(PhantomData<T>);

        impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
            type Value = T;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map))
            }
        }

        deserializer
            .deserialize_map(ObjectVisitor(PhantomData))
            .map(Object)
    }
}

/// `#[serde(deserialize_with = "crate::strict_json::object")]` on a struct-typed field.
pub fn object<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<T, D::Error> {
    Object::deserialize(deserializer).map(|Object(value)| value)
}

/// `#[serde(default, deserialize_with = "crate::strict_json::optional_object")]` on an
/// `Option` of a struct: null is `None`, anything but an object is refused.
pub fn optional_object<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    Option::<Object<T>>::deserialize(deserializer).map(|value| value.map(|Object(value)| value))
}

/// `#[serde(deserialize_with = "crate::strict_json::objects")]` on a `Vec` of a struct: every
/// item must be an object.
pub fn objects<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Vec<T>, D::Error> {
    Vec::<Object<T>>::deserialize(deserializer)
        .map(|items| items.into_iter().map(|Object(item)| item).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        #[serde(default)]
        a: Option<u32>,
    }

    #[derive(Debug, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Outer {
        #[serde(default, deserialize_with = "optional_object")]
        inner: Option<Inner>,
        #[serde(default, deserialize_with = "objects")]
        list: Vec<Inner>,
    }

    #[test]
    fn objects_only() {
        let read = |json: &str| serde_json::from_str::<Object<Outer>>(json).map(|o| o.0);
        let empty = Outer {
            inner: None,
            list: Vec::new(),
        };
        assert_eq!(read(r#"{}"#).unwrap(), empty);
        assert_eq!(read(r#"{"inner": null}"#).unwrap(), empty);
        assert_eq!(
            read(r#"{"inner": {"a": 1}, "list": [{}, {"a": 2}]}"#).unwrap(),
            Outer {
                inner: Some(Inner { a: Some(1) }),
                list: vec![Inner { a: None }, Inner { a: Some(2) }],
            }
        );
        // What serde's derive alone takes: arrays in the place of objects.
        assert!(serde_json::from_str::<Inner>("[1]").is_ok());
        for refused in [
            "[]",
            "[null]",
            r#"{"inner": [1]}"#,
            r#"{"inner": []}"#,
            r#"{"list": [[1]]}"#,
            "null",
        ] {
            let err = read(refused).unwrap_err().to_string();
            assert!(err.contains("expected a JSON object"), "{refused}: {err}");
        }
        // The struct's own rules still apply inside.
        assert!(read(r#"{"inner": {"b": 1}}"#).is_err());
    }
}
