//! A YAML document read as the JSON value it stands for.
//!
//! Owns: [`json_value`]. YAML integers beyond 64 bits (serde_yaml hands them out as `i128`/
//! `u128`, which `serde_json::Value` refuses with "JSON number out of range") become floats, as
//! they do when the same document is sent as JSON; everything else is what
//! `serde_json::Value::deserialize` makes of it.

use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// One YAML (or any self-describing) document as a JSON value.
pub fn json_value<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Value, D::Error> {
    Lenient::deserialize(deserializer).map(|Lenient(value)| value)
}

struct Lenient(Value);

impl<'de> Deserialize<'de> for Lenient {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LenientVisitor).map(Lenient)
    }
}

struct LenientVisitor;

fn float(f: f64) -> Value {
    Number::from_f64(f).map_or(Value::Null, Value::Number)
}

impl<'de> Visitor<'de> for LenientVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_i128<E>(self, v: i128) -> Result<Value, E> {
        Ok(i64::try_from(v).map_or_else(|_| float(v as f64), |n| Value::Number(n.into())))
    }
    fn visit_u128<E>(self, v: u128) -> Result<Value, E> {
        Ok(u64::try_from(v).map_or_else(|_| float(v as f64), |n| Value::Number(n.into())))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        json_value(deserializer)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(Lenient(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some((key, Lenient(value))) = map.next_entry::<String, Lenient>()? {
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(yaml: &str) -> Result<Value, serde_yaml::Error> {
        json_value(serde_yaml::Deserializer::from_str(yaml))
    }

    #[test]
    fn big_integers_become_floats_like_json() {
        let big = "1180591620717411303424";
        // serde_json::Value alone refuses it.
        assert!(serde_json::Value::deserialize(serde_yaml::Deserializer::from_str(big)).is_err());
        let json: Value = serde_json::from_str(big).unwrap();
        assert_eq!(read(big).unwrap(), json);
        assert_eq!(
            read(&format!("-{big}")).unwrap(),
            json!(-1.1805916207174113e21)
        );
        assert_eq!(
            read("a: [1, -2, 1.5, x, true, null, {b: .inf}]").unwrap(),
            json!({"a": [1, -2, 1.5, "x", true, null, {"b": null}]})
        );
        // What is not JSON stays refused: a key that is not a string.
        assert!(read("? [1]\n: x").is_err());
    }

    use serde_json::json;
}
