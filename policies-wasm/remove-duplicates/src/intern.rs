//! Interning of short `u32` sequences (image sets, duplicate keys, constraint signatures) into
//! dense ids, so the plugin groups and compares on integers instead of strings or structs.
//!
//! Uses an FxHash-style multiplicative hasher: the keys are small interned ids, not attacker-chosen
//! bytes, and SipHash would dominate the run time on a 150k-pod snapshot.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Multiply-rotate hasher (the rustc "Fx" hash) for integer keys.
#[derive(Debug, Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

pub type FxBuildHasher = BuildHasherDefault<FxHasher>;
pub type FxHashMap<K, V> = HashMap<K, V, FxBuildHasher>;

/// Maps distinct `u32` sequences to dense ids `0, 1, 2, …` in first-seen order.
#[derive(Debug, Default)]
pub struct SliceInterner {
    ids: FxHashMap<Box<[u32]>, u32>,
}

impl SliceInterner {
    /// The id of `key`, and whether it was seen for the first time.
    pub fn intern(&mut self, key: &[u32]) -> (u32, bool) {
        if let Some(&id) = self.ids.get(key) {
            return (id, false);
        }
        let id = self.ids.len() as u32;
        self.ids.insert(key.into(), id);
        (id, true)
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interns_in_first_seen_order() {
        let mut interner = SliceInterner::default();
        assert_eq!(interner.intern(&[1, 2]), (0, true));
        assert_eq!(interner.intern(&[2, 1]), (1, true));
        assert_eq!(interner.intern(&[1, 2]), (0, false));
        assert_eq!(interner.intern(&[]), (2, true));
        assert_eq!(interner.len(), 3);
    }
}
