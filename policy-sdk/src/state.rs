//! Policy state: bytes a policy keeps from one run to the next (since ABI 1.3).
//!
//! Owns [`StateScope`], the keys and values of one scope — one (cluster, profile, plugin set,
//! policy) — as a host holds them during an evaluation, its size cap, and [`encode`] /
//! [`decode`], the compact form the server persists. The server loads a scope before a run,
//! hands it to the evaluation, and commits what the evaluation left only if it succeeded;
//! [`crate::testing`] keeps scopes across simulated runs. Policies use it through
//! [`crate::Context::state_get`] and friends.

use std::collections::BTreeMap;

use crate::caps::quote_prefix;

/// The default size cap of one scope (keys plus values), in bytes.
pub const DEFAULT_MAX_BYTES: usize = 1 << 20;

/// The longest key a scope accepts, in bytes: a key names a thing (a node, an owner), it does
/// not hold data.
pub const MAX_KEY_BYTES: usize = 1024;

/// How much of an offending key an error message quotes.
const QUOTED_KEY_BYTES: usize = 64;

/// One scope's keys and values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateScope {
    entries: BTreeMap<String, Vec<u8>>,
    bytes: usize,
    max_bytes: usize,
    changed: bool,
}

impl Default for StateScope {
    fn default() -> Self {
        StateScope::new(BTreeMap::new(), DEFAULT_MAX_BYTES)
    }
}

impl StateScope {
    /// A scope holding `entries` (as loaded), capped at `max_bytes` of keys plus values. A
    /// loaded scope over the cap (the cap was lowered) can still be read and shrunk.
    pub fn new(entries: BTreeMap<String, Vec<u8>>, max_bytes: usize) -> Self {
        let bytes = entries.iter().map(|(k, v)| k.len() + v.len()).sum();
        StateScope {
            entries,
            bytes,
            max_bytes,
            changed: false,
        }
    }

    pub fn get(&self, key: &str) -> Option<&[u8]> {
        self.entries.get(key).map(Vec::as_slice)
    }

    /// Set `key` to `value`; refused (and nothing changes) when the key is longer than
    /// [`MAX_KEY_BYTES`] or the scope would exceed its cap.
    pub fn put(&mut self, key: &str, value: &[u8]) -> Result<(), String> {
        if key.len() > MAX_KEY_BYTES {
            return Err(format!(
                "policy state key {} is over the {MAX_KEY_BYTES}-byte limit for keys",
                quote_prefix(key, QUOTED_KEY_BYTES)
            ));
        }
        let old = self.entries.get(key).map_or(0, |v| key.len() + v.len());
        let bytes = self.bytes - old + key.len() + value.len();
        if bytes > self.max_bytes && bytes > self.bytes {
            return Err(format!(
                "policy state is capped at {} bytes (keys plus values); putting {} ({} bytes) \
                 would make it {bytes}",
                self.max_bytes,
                quote_prefix(key, QUOTED_KEY_BYTES),
                value.len()
            ));
        }
        if self.entries.get(key).map(Vec::as_slice) != Some(value) {
            self.entries.insert(key.to_owned(), value.to_vec());
            self.bytes = bytes;
            self.changed = true;
        }
        Ok(())
    }

    /// Remove `key`; whether it was there.
    pub fn remove(&mut self, key: &str) -> bool {
        match self.entries.remove(key) {
            Some(v) => {
                self.bytes -= key.len() + v.len();
                self.changed = true;
                true
            }
            None => false,
        }
    }

    /// Every key, in order.
    pub fn keys(&self) -> Vec<String> {
        self.entries.keys().cloned().collect()
    }

    /// Keys plus values, in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether anything was put or removed since the scope was loaded.
    pub fn changed(&self) -> bool {
        self.changed
    }

    pub fn entries(&self) -> &BTreeMap<String, Vec<u8>> {
        &self.entries
    }

    /// The same keys and values, as loaded afresh (not changed).
    pub fn reloaded(&self) -> StateScope {
        StateScope::new(self.entries.clone(), self.max_bytes)
    }
}

/// The persisted form: per entry, the key's length (u32 LE), the key, the value's length (u32
/// LE), the value; in key order.
pub fn encode(entries: &BTreeMap<String, Vec<u8>>) -> Vec<u8> {
    let size = entries.iter().map(|(k, v)| 8 + k.len() + v.len()).sum();
    let mut out = Vec::with_capacity(size);
    for (k, v) in entries {
        out.extend_from_slice(&(k.len() as u32).to_le_bytes());
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(v);
    }
    out
}

/// Read what [`encode`] wrote.
pub fn decode(mut bytes: &[u8]) -> Result<BTreeMap<String, Vec<u8>>, String> {
    fn take<'a>(bytes: &mut &'a [u8], n: usize, what: &str) -> Result<&'a [u8], String> {
        if bytes.len() < n {
            return Err(format!("truncated policy state ({what})"));
        }
        let (head, rest) = bytes.split_at(n);
        *bytes = rest;
        Ok(head)
    }
    fn len(bytes: &mut &[u8], what: &str) -> Result<usize, String> {
        let b = take(bytes, 4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }
    let mut entries = BTreeMap::new();
    while !bytes.is_empty() {
        let n = len(&mut bytes, "key length")?;
        let key = std::str::from_utf8(take(&mut bytes, n, "key")?)
            .map_err(|_| "a policy state key is not UTF-8".to_string())?
            .to_owned();
        let n = len(&mut bytes, "value length")?;
        let value = take(&mut bytes, n, "value")?.to_vec();
        entries.insert(key, value);
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_get_remove_keys_and_the_cap() {
        let mut s = StateScope::new(BTreeMap::new(), 20);
        assert!(!s.changed());
        s.put("a", b"12345").unwrap();
        s.put("b", b"xyz").unwrap();
        assert_eq!(s.get("a"), Some(&b"12345"[..]));
        assert_eq!(s.keys(), ["a", "b"]);
        assert_eq!(s.bytes(), 10);
        assert!(s.changed());
        let err = s.put("c", b"0123456789").unwrap_err();
        assert!(err.contains("capped at 20 bytes"), "{err}");
        assert_eq!(s.get("c"), None);
        // Replacing a value counts only the difference.
        s.put("a", b"1234567890123").unwrap();
        assert_eq!(s.bytes(), 18);
        assert!(s.remove("a"));
        assert!(!s.remove("a"));
        assert_eq!(s.bytes(), 4);
        // Putting the same value again is no change.
        let mut fresh = s.reloaded();
        fresh.put("b", b"xyz").unwrap();
        assert!(!fresh.changed());
    }

    #[test]
    fn keys_over_the_key_cap_are_refused_without_being_echoed() {
        let mut s = StateScope::new(BTreeMap::new(), 64 << 20);
        let long = "k".repeat(MAX_KEY_BYTES + 1);
        let err = s.put(&long, b"v").unwrap_err();
        assert!(err.contains("over the 1024-byte limit for keys"), "{err}");
        assert!(err.contains("(1025 bytes)"), "{err}");
        assert!(err.len() < 200, "the key is not echoed: {err}");
        assert!(s.is_empty() && !s.changed());
        s.put(&long[..MAX_KEY_BYTES], b"v").unwrap();
        // A value too big for the scope: the message quotes a prefix of the key only.
        let mut small = StateScope::new(BTreeMap::new(), 2048);
        let err = small.put(&long[..MAX_KEY_BYTES], &[0; 4096]).unwrap_err();
        assert!(
            err.contains("capped at 2048 bytes") && err.len() < 300,
            "{err}"
        );
    }

    #[test]
    fn encode_and_decode_round_trip_and_refuse_truncation() {
        let mut entries = BTreeMap::new();
        entries.insert("detector/n1".to_string(), vec![1, 2, 3]);
        entries.insert("".to_string(), Vec::new());
        let bytes = encode(&entries);
        assert_eq!(decode(&bytes).unwrap(), entries);
        assert!(decode(&bytes[..bytes.len() - 1]).is_err());
        assert!(decode(&[]).unwrap().is_empty());
    }
}
