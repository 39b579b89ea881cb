//! Request bodies read as the OpenAPI document describes them: where it says "object", only a
//! JSON object. serde's derived `Deserialize` for a struct also takes a JSON array of the
//! field values in order (`[null, null]` for `{"workload": null, "namespace": null}`), which the
//! document does not allow and no client means.
//!
//! Where it says "integer", any number with a zero fractional part: JSON Schema counts `192.0`
//! and `1.92e2` as integers (so do the clients generated from the document, and JavaScript has
//! no other kind of number), while serde's integer types take only `192`.
//!
//! Owns: [`Object`], the `deserialize_with` helpers [`object`], [`optional_object`] and
//! [`objects`], and the reading of integral floats as integers ([`integers`],
//! [`from_slice_with_integers`]).
//! Must not: validate anything else; the types' own `Deserialize` still reads the fields.

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserialize, DeserializeOwned, Deserializer, MapAccess, Visitor};
use serde_json::{Number, Value};

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

/// Rewrite every number of `value` that has a zero fractional part and fits 64 bits (`192.0`,
/// `1.92e2`, `-0.0`) as that integer; true when one was rewritten. A float field still reads
/// the integer (`1` is `1.0` to serde's `f64`), and other numbers are left as they are.
pub fn integers(value: &mut Value) -> bool {
    match value {
        Value::Number(number) => match integral(number) {
            Some(integer) => {
                *number = integer;
                true
            }
            None => false,
        },
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |any, item| integers(item) | any),
        Value::Object(fields) => fields
            .values_mut()
            .fold(false, |any, field| integers(field) | any),
        Value::Null | Value::Bool(_) | Value::String(_) => false,
    }
}

/// The integer a float with a zero fractional part stands for, if it fits `u64` or `i64`.
fn integral(number: &Number) -> Option<Number> {
    let float = number.as_f64().filter(|_| number.is_f64())?;
    if !float.is_finite() || float.fract() != 0.0 {
        return None;
    }
    // Within (-2^63, 2^64), both bounds exact as floats (`as` would saturate). -2^63 itself is
    // left out: an integer below `i64::MIN` (`-9223372036854775809`) is read as a float and
    // rounds to it, and must stay out of range.
    if (0.0..18_446_744_073_709_551_616.0).contains(&float) {
        Some(Number::from(float as u64))
    } else if float > -9_223_372_036_854_775_808.0 && float < 0.0 {
        Some(Number::from(float as i64))
    } else {
        None
    }
}

/// `T` from a JSON body that serde refused, read again with its integral floats as integers
/// ([`integers`]); `None` when the body holds none (the first error stands) or `T` refuses it
/// all the same. Only a body that failed is read twice.
pub fn from_slice_with_integers<T: DeserializeOwned>(bytes: &[u8]) -> Option<T> {
    let mut value = serde_json::from_slice::<Value>(bytes).ok()?;
    if !integers(&mut value) {
        return None;
    }
    T::deserialize(value).ok()
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

    #[derive(Debug, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Numbers {
        count: u32,
        #[serde(default)]
        offset: Option<i64>,
        #[serde(default)]
        ratio: Option<f64>,
    }

    #[test]
    fn integral_floats_are_integers() {
        let read = |json: &str| {
            serde_json::from_str::<Numbers>(json)
                .ok()
                .or_else(|| from_slice_with_integers(json.as_bytes()))
        };
        let numbers = |count, offset, ratio| {
            Some(Numbers {
                count,
                offset,
                ratio,
            })
        };
        assert_eq!(read(r#"{"count": 192}"#), numbers(192, None, None));
        assert_eq!(read(r#"{"count": 192.0}"#), numbers(192, None, None));
        assert_eq!(read(r#"{"count": 1.92e2}"#), numbers(192, None, None));
        assert_eq!(read(r#"{"count": -0.0}"#), numbers(0, None, None));
        assert_eq!(
            read(r#"{"count": 1, "offset": -5.0, "ratio": 2.0}"#),
            numbers(1, Some(-5), Some(2.0))
        );
        assert_eq!(
            read(r#"{"count": 1, "ratio": 0.5}"#),
            numbers(1, None, Some(0.5))
        );
        // Still refused: a fraction, out of the field's range, or not a number at all.
        for refused in [
            r#"{"count": 192.5}"#,
            r#"{"count": 1e-3}"#,
            r#"{"count": 4294967296.0}"#,
            r#"{"count": -1.0}"#,
            r#"{"count": 1e300}"#,
            r#"{"count": "192"}"#,
            r#"{"count": 1, "offset": 9.3e18}"#,
            // Below i64::MIN: serde_json reads it as a float that rounds to -2^63.
            r#"{"count": 1, "offset": -9223372036854775809}"#,
        ] {
            assert_eq!(read(refused), None, "{refused}");
        }
    }

    #[test]
    fn integers_rewrites_every_integral_float() {
        let mut value = serde_json::json!({
            "a": 192.0, "b": [1.0, 1.5, -2.0, "3.0"], "c": {"d": 18446744073709551615_u64},
            "e": -(2f64.powi(63) - 1024.0), "f": 1.8446744073709552e19, "g": 7,
            "h": -(2f64.powi(63))
        });
        assert!(integers(&mut value));
        assert_eq!(
            value,
            serde_json::json!({
                "a": 192, "b": [1, 1.5, -2, "3.0"], "c": {"d": 18446744073709551615_u64},
                "e": -9_223_372_036_854_774_784_i64, "f": 1.8446744073709552e19, "g": 7,
                "h": -(2f64.powi(63))
            })
        );
        let mut plain = serde_json::json!({"a": [1, 2.5, "x"], "b": null});
        assert!(!integers(&mut plain));
    }
}
