//! The invariants this policy checks (the spec's §4.6 table): their ids, whether they are
//! soft, and [`InvariantSet`], a bitmask of them. Owns no check logic.

/// One invariant of the fine-grained CPU orchestration protocol. The declaration order is the
/// importance order: when a pod violates several, the reason names the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Invariant {
    H1,
    H2,
    H3,
    H4,
    H5,
    H6,
    H7,
    H8,
    H9,
    H10,
    H11,
    H12,
    H13,
    S1,
    S2,
    S3,
    S4,
    S5,
}

impl Invariant {
    pub const ALL: [Invariant; 18] = [
        Invariant::H1,
        Invariant::H2,
        Invariant::H3,
        Invariant::H4,
        Invariant::H5,
        Invariant::H6,
        Invariant::H7,
        Invariant::H8,
        Invariant::H9,
        Invariant::H10,
        Invariant::H11,
        Invariant::H12,
        Invariant::H13,
        Invariant::S1,
        Invariant::S2,
        Invariant::S3,
        Invariant::S4,
        Invariant::S5,
    ];

    /// The id as written in args and reasons (`H8`).
    pub fn id(self) -> &'static str {
        const IDS: [&str; 18] = [
            "H1", "H2", "H3", "H4", "H5", "H6", "H7", "H8", "H9", "H10", "H11", "H12", "H13", "S1",
            "S2", "S3", "S4", "S5",
        ];
        IDS[self as usize]
    }

    pub fn from_id(id: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|i| i.id() == id)
    }

    /// Soft invariants are legal but sub-optimal placements; proposed only with `includeSoft`.
    pub fn is_soft(self) -> bool {
        self >= Invariant::S1
    }

    fn bit(self) -> u32 {
        1 << self as u32
    }
}

/// A set of invariants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InvariantSet(u32);

impl InvariantSet {
    pub const EMPTY: InvariantSet = InvariantSet(0);

    pub fn all() -> Self {
        InvariantSet((1 << Invariant::ALL.len()) - 1)
    }

    pub fn contains(self, i: Invariant) -> bool {
        self.0 & i.bit() != 0
    }

    pub fn insert(&mut self, i: Invariant) {
        self.0 |= i.bit();
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// The members, in importance order.
    pub fn iter(self) -> impl Iterator<Item = Invariant> {
        Invariant::ALL
            .into_iter()
            .filter(move |&i| self.contains(i))
    }

    /// Whether some member is hard.
    pub fn has_hard(self) -> bool {
        self.iter().any(|i| !i.is_soft())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_order_is_importance() {
        for i in Invariant::ALL {
            assert_eq!(Invariant::from_id(i.id()), Some(i));
        }
        assert_eq!(Invariant::from_id("H14"), None);
        assert!(Invariant::H13 < Invariant::S1);
        assert!(!Invariant::H13.is_soft() && Invariant::S1.is_soft());
        let mut set = InvariantSet::EMPTY;
        set.insert(Invariant::S2);
        set.insert(Invariant::H8);
        assert_eq!(
            set.iter().collect::<Vec<_>>(),
            [Invariant::H8, Invariant::S2]
        );
        assert!(set.has_hard());
        assert_eq!(set.len(), 2);
        assert_eq!(InvariantSet::all().len(), 18);
    }
}
