//! Kubernetes resource quantities (`resource.Quantity`), parsed exactly as the API server does.
//!
//! Owns the grammar (sign, decimal number, decimal-SI suffixes `n u m "" k M G T P E`, binary
//! suffixes `Ki … Ei`, exponents `e3`/`E-2`) and the two integer views the rest of the code uses:
//! nano-units ([`parse_nano`], exact for every quantity Kubernetes accepts, so sums are exact the
//! way `Quantity.Add` is) and milli-units ([`parse_milli`], `Quantity.MilliValue()`). Formatting
//! for humans is [`format_milli`]. No I/O, no allocation on the success path.
//!
//! Kubernetes' own quirks are kept on purpose, because a snapshot must mean what the cluster
//! means: `"-"`, `"."` and `"m"` parse as zero, `"1."` is one, values finer than a nano-unit are
//! rounded up to one nano-unit and magnitudes above `2^63-1` units are capped there. Rounding to
//! milli-units goes away from zero, like `MilliValue()`.

use std::fmt;

/// Largest magnitude Kubernetes keeps (`2^63 - 1` units), in nano-units.
pub const MAX_NANO: i128 = (i64::MAX as i128) * NANO_PER_UNIT;

/// Nano-units per unit.
pub const NANO_PER_UNIT: i128 = 1_000_000_000;

/// Nano-units per milli-unit.
pub const NANO_PER_MILLI: i128 = 1_000_000;

/// Why a quantity string is not a valid Kubernetes quantity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuantityError {
    /// The empty string.
    Empty,
    /// Not `<sign><number><suffix>`.
    Format { input: String },
    /// A well-formed number with a suffix Kubernetes does not know (`"1ki"`, `"5e"`).
    Suffix { input: String, suffix: String },
    /// Valid, but its milli-value does not fit in 64 bits.
    Overflow { input: String },
}

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QuantityError::Empty => write!(f, "invalid quantity \"\": the value is empty"),
            QuantityError::Format { input } => write!(
                f,
                "invalid quantity {input:?}: expected a decimal number with an optional suffix \
                 (n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or an exponent such as e3), \
                 e.g. \"250m\", \"1.5Gi\", \"2e3\""
            ),
            QuantityError::Suffix { input, suffix } => write!(
                f,
                "invalid quantity {input:?}: unknown suffix {suffix:?} (decimal: n, u, m, k, M, G, \
                 T, P, E; binary: Ki, Mi, Gi, Ti, Pi, Ei; exponent: e<int> or E<int>)"
            ),
            QuantityError::Overflow { input } => write!(
                f,
                "invalid quantity {input:?}: too large, its milli-value does not fit in a signed \
                 64-bit integer (at most 9223372036854775807m, about 8Pi)"
            ),
        }
    }
}

impl std::error::Error for QuantityError {}

/// How the number is scaled by its suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scale {
    /// `× 10^e`.
    Decimal(i64),
    /// `× 2^e`.
    Binary(u32),
}

/// The pieces of a quantity string, as `parseQuantityString` splits them.
struct Parts<'a> {
    negative: bool,
    /// Integer digits with leading zeros stripped (may be empty).
    num: &'a [u8],
    /// Fraction digits (may be empty).
    denom: &'a [u8],
    suffix: &'a str,
}

fn split(s: &str) -> Result<Parts<'_>, QuantityError> {
    let b = s.as_bytes();
    let end = b.len();
    let mut pos = 0;
    let mut negative = false;
    match b.first() {
        Some(b'-') => {
            negative = true;
            pos += 1;
        }
        Some(b'+') => pos += 1,
        _ => {}
    }
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    let num_start = pos;
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    let num = &b[num_start..pos];
    let mut denom: &[u8] = &[];
    if pos < end && b[pos] == b'.' {
        pos += 1;
        let denom_start = pos;
        while pos < end && b[pos].is_ascii_digit() {
            pos += 1;
        }
        denom = &b[denom_start..pos];
    }
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < end && (b[pos] == b'-' || b[pos] == b'+') {
        pos += 1;
    }
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        return Err(QuantityError::Format {
            input: s.to_owned(),
        });
    }
    Ok(Parts {
        negative,
        num,
        denom,
        suffix: &s[suffix_start..],
    })
}

fn interpret(suffix: &str) -> Option<Scale> {
    Some(match suffix {
        "" => Scale::Decimal(0),
        "n" => Scale::Decimal(-9),
        "u" => Scale::Decimal(-6),
        "m" => Scale::Decimal(-3),
        "k" => Scale::Decimal(3),
        "M" => Scale::Decimal(6),
        "G" => Scale::Decimal(9),
        "T" => Scale::Decimal(12),
        "P" => Scale::Decimal(15),
        "E" => Scale::Decimal(18),
        "Ki" => Scale::Binary(10),
        "Mi" => Scale::Binary(20),
        "Gi" => Scale::Binary(30),
        "Ti" => Scale::Binary(40),
        "Pi" => Scale::Binary(50),
        "Ei" => Scale::Binary(60),
        _ => {
            let rest = suffix
                .strip_prefix('e')
                .or_else(|| suffix.strip_prefix('E'))?;
            // Go's strconv.ParseInt(s, 10, 64): optional sign, ASCII digits, no overflow.
            if rest.is_empty() {
                return None;
            }
            Scale::Decimal(rest.parse::<i64>().ok()?)
        }
    })
}

/// Parse a quantity into nano-units (1e-9 of the resource's base unit), exactly as
/// `resource.ParseQuantity` stores it: rounded up (away from zero) to a whole nano-unit and
/// capped at `±(2^63-1)` units ([`MAX_NANO`]).
pub fn parse_nano(s: &str) -> Result<i128, QuantityError> {
    if s.is_empty() {
        return Err(QuantityError::Empty);
    }
    let parts = split(s)?;
    let scale = interpret(parts.suffix).ok_or_else(|| QuantityError::Suffix {
        input: s.to_owned(),
        suffix: parts.suffix.to_owned(),
    })?;
    let magnitude = magnitude_nano(&parts, scale);
    Ok(if parts.negative {
        -magnitude
    } else {
        magnitude
    })
}

/// `ceil(|digits × 10^e10 × 2^bin| × 10^9)`, capped at [`MAX_NANO`].
fn magnitude_nano(parts: &Parts<'_>, scale: Scale) -> i128 {
    // All significant digits, as decimal digit values, most significant first.
    let mut digits: Vec<u8> = Vec::with_capacity(parts.num.len() + parts.denom.len() + 20);
    digits.extend(parts.num.iter().chain(parts.denom).map(|d| d - b'0'));
    let first_nonzero = digits.iter().position(|&d| d != 0);
    let Some(first_nonzero) = first_nonzero else {
        return 0;
    };
    digits.drain(..first_nonzero);
    let (e10, bin) = match scale {
        Scale::Decimal(e) => (i128::from(e), 0),
        Scale::Binary(b) => (0, b),
    };
    for _ in 0..bin {
        double(&mut digits);
    }
    // Shift so that the integer part of `digits × 10^shift` is the value in nano-units.
    let shift = e10 - parts.denom.len() as i128 + 9;
    // MAX_NANO has 28 digits; anything with more integer digits is over the cap.
    const CAP_DIGITS: i128 = 28;
    if shift >= 0 {
        if digits.len() as i128 + shift > CAP_DIGITS {
            return MAX_NANO;
        }
        let mut v = to_u128(&digits);
        for _ in 0..shift {
            v *= 10;
        }
        (v as i128).min(MAX_NANO)
    } else {
        let frac = -shift;
        if frac >= digits.len() as i128 {
            // 0 < value < 1 nano-unit: rounded up to one.
            return 1;
        }
        let int_len = digits.len() - frac as usize;
        if int_len as i128 > CAP_DIGITS {
            return MAX_NANO;
        }
        let (int_part, frac_part) = digits.split_at(int_len);
        let mut v = to_u128(int_part);
        if frac_part.iter().any(|&d| d != 0) {
            v += 1;
        }
        (v as i128).min(MAX_NANO)
    }
}

/// Multiply a big-endian decimal digit string by two in place.
fn double(digits: &mut Vec<u8>) {
    let mut carry = 0u8;
    for d in digits.iter_mut().rev() {
        let v = *d * 2 + carry;
        *d = v % 10;
        carry = v / 10;
    }
    if carry > 0 {
        digits.insert(0, carry);
    }
}

/// At most 28 digits: always fits.
fn to_u128(digits: &[u8]) -> u128 {
    digits
        .iter()
        .fold(0u128, |acc, &d| acc * 10 + u128::from(d))
}

/// Nano-units to milli-units, rounding away from zero like `Quantity.MilliValue()`; `None` when
/// the result does not fit in an `i64`.
pub fn nano_to_milli(nano: i128) -> Option<i64> {
    let magnitude = nano.unsigned_abs();
    let per = NANO_PER_MILLI as u128;
    let milli = magnitude / per + u128::from(!magnitude.is_multiple_of(per));
    let milli = i64::try_from(milli).ok()?;
    Some(if nano < 0 { -milli } else { milli })
}

/// Nano-units to milli-units, rounding away from zero and saturating at `i64::MIN/MAX`.
pub fn nano_to_milli_saturating(nano: i128) -> i64 {
    nano_to_milli(nano).unwrap_or(if nano < 0 { i64::MIN } else { i64::MAX })
}

/// Parse a quantity and return its milli-value (`Quantity.MilliValue()`): cpu `"250m"` → 250,
/// memory `"1Ki"` → 1,024,000. Errors name the input; a milli-value beyond `i64` is
/// [`QuantityError::Overflow`] (Kubernetes would silently wrap).
pub fn parse_milli(s: &str) -> Result<i64, QuantityError> {
    let nano = parse_nano(s)?;
    nano_to_milli(nano).ok_or_else(|| QuantityError::Overflow {
        input: s.to_owned(),
    })
}

/// Resources measured in bytes (formatted with binary suffixes).
pub fn is_byte_resource(resource: &str) -> bool {
    matches!(resource, "memory" | "ephemeral-storage" | "storage")
        || resource.starts_with("hugepages-")
}

/// A milli-value for humans: cpu and counts as `"250m"` or `"2"`, byte resources with the
/// largest binary suffix that keeps at least one unit (`"1.5Gi"`, `"953.67Mi"`, two decimals at
/// most, trailing zeros dropped).
pub fn format_milli(resource: &str, milli: i64) -> String {
    let sign = if milli < 0 { "-" } else { "" };
    let magnitude = milli.unsigned_abs();
    if is_byte_resource(resource) && magnitude.is_multiple_of(1000) {
        let bytes = magnitude / 1000;
        const UNITS: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
        let mut unit = None;
        for (i, u) in UNITS.iter().enumerate() {
            if bytes >= 1u64 << (10 * (i + 1)) {
                unit = Some((i, *u));
            }
        }
        return match unit {
            None => format!("{sign}{bytes}"),
            Some((i, u)) => {
                let div = 1u64 << (10 * (i + 1));
                // Two decimals, rounded half up, computed in integers.
                let hundredths = (u128::from(bytes) * 100 + u128::from(div) / 2) / u128::from(div);
                let whole = hundredths / 100;
                let frac = hundredths % 100;
                if frac == 0 {
                    format!("{sign}{whole}{u}")
                } else if frac % 10 == 0 {
                    format!("{sign}{whole}.{}{u}", frac / 10)
                } else {
                    format!("{sign}{whole}.{frac:02}{u}")
                }
            }
        };
    }
    if magnitude.is_multiple_of(1000) {
        format!("{sign}{}", magnitude / 1000)
    } else {
        format!("{sign}{magnitude}m")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn milli(s: &str) -> i64 {
        parse_milli(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
    }

    #[test]
    fn plain_and_decimal_si() {
        assert_eq!(milli("0"), 0);
        assert_eq!(milli("1"), 1000);
        assert_eq!(milli("2"), 2000);
        assert_eq!(milli("250m"), 250);
        assert_eq!(milli("1500m"), 1500);
        assert_eq!(milli("0.5"), 500);
        assert_eq!(milli("1.5"), 1500);
        assert_eq!(milli("100k"), 100_000_000);
        assert_eq!(milli("1M"), 1_000_000_000);
        assert_eq!(milli("1G"), 1_000_000_000_000);
        assert_eq!(milli("1T"), 1_000_000_000_000_000);
        assert_eq!(milli("1P"), 1_000_000_000_000_000_000);
        assert_eq!(milli("9P"), 9_000_000_000_000_000_000);
        assert!(matches!(
            parse_milli("1E"),
            Err(QuantityError::Overflow { .. })
        ));
        assert_eq!(
            parse_nano("1E"),
            Ok(1_000_000_000_000_000_000 * NANO_PER_UNIT)
        );
    }

    #[test]
    fn sub_milli_rounds_up_like_milli_value() {
        assert_eq!(milli("1n"), 1);
        assert_eq!(milli("1u"), 1);
        assert_eq!(milli("999u"), 1);
        assert_eq!(milli("1001u"), 2);
        assert_eq!(milli("1000u"), 1);
        assert_eq!(milli("0.1m"), 1);
        assert_eq!(milli("0.0001"), 1);
        assert_eq!(milli("100n"), 1);
        // Rounding goes away from zero.
        assert_eq!(milli("-0.5m"), -1);
        assert_eq!(milli("-1500u"), -2);
    }

    #[test]
    fn nano_precision_is_exact_and_finer_values_round_up() {
        assert_eq!(parse_nano("1n"), Ok(1));
        assert_eq!(parse_nano("1.5n"), Ok(2));
        assert_eq!(parse_nano("0.000000000001"), Ok(1));
        assert_eq!(parse_nano("1e-12"), Ok(1));
        assert_eq!(parse_nano("1"), Ok(1_000_000_000));
        assert_eq!(parse_nano("250m"), Ok(250_000_000));
        assert_eq!(parse_nano("-1.5n"), Ok(-2));
        assert_eq!(parse_nano("0.1Ki"), Ok(102_400_000_000));
        // 1e-10 Ki = 1.024e-7 → 102.4 nano → 103
        assert_eq!(parse_nano("0.0000000001Ki"), Ok(103));
    }

    #[test]
    fn binary_si() {
        assert_eq!(milli("1Ki"), 1024 * 1000);
        assert_eq!(milli("128Mi"), 128 * 1024 * 1024 * 1000);
        assert_eq!(milli("1.5Gi"), 1_610_612_736_000);
        assert_eq!(milli("1Ti"), (1i64 << 40) * 1000);
        assert_eq!(milli("1Pi"), (1i64 << 50) * 1000);
        assert_eq!(milli("0.5Ki"), 512_000);
        assert_eq!(milli("3.3Mi"), 3_460_300_800); // 3.3 × 1048576 = 3460300.8 bytes
        assert!(matches!(
            parse_milli("1Ei"),
            Err(QuantityError::Overflow { .. })
        ));
        assert_eq!(parse_nano("1Ei"), Ok((1i128 << 60) * NANO_PER_UNIT));
    }

    #[test]
    fn exponents() {
        assert_eq!(milli("1e3"), 1_000_000);
        assert_eq!(milli("1E3"), 1_000_000);
        assert_eq!(milli("1e+3"), 1_000_000);
        assert_eq!(milli("1e-3"), 1);
        assert_eq!(milli("12e-1"), 1200);
        assert_eq!(milli("1.5e2"), 150_000);
        assert_eq!(milli("1e0"), 1000);
        assert_eq!(milli("1e-999"), 1);
        assert_eq!(parse_nano("1e999"), Ok(MAX_NANO));
        assert_eq!(parse_nano("-1e999"), Ok(-MAX_NANO));
    }

    #[test]
    fn signs_and_kubernetes_quirks() {
        assert_eq!(milli("+1"), 1000);
        assert_eq!(milli("-1"), -1000);
        assert_eq!(milli("-0"), 0);
        assert_eq!(milli("007"), 7000);
        assert_eq!(milli("1."), 1000);
        assert_eq!(milli(".5"), 500);
        // Kubernetes accepts these as zero.
        assert_eq!(milli("-"), 0);
        assert_eq!(milli("+"), 0);
        assert_eq!(milli("."), 0);
        assert_eq!(milli("m"), 0);
        assert_eq!(milli("0.000"), 0);
        assert_eq!(milli("0Gi"), 0);
    }

    #[test]
    fn overflow_is_an_error_naming_the_input() {
        let err = parse_milli("10E").unwrap_err();
        assert_eq!(
            err,
            QuantityError::Overflow {
                input: "10E".into()
            }
        );
        assert!(err.to_string().contains("\"10E\""));
        assert!(err.to_string().contains("too large"));
        // Largest value that still fits: i64::MAX milli-units.
        assert_eq!(milli("9223372036854775807m"), i64::MAX);
        assert!(parse_milli("9223372036854775808m").is_err());
        assert_eq!(milli("-9223372036854775807m"), -i64::MAX);
        // Values beyond 2^63-1 units are capped (as Kubernetes does) before scaling.
        assert_eq!(parse_nano("99999999999999999999999"), Ok(MAX_NANO));
        assert_eq!(
            parse_nano("9223372036854775807"),
            Ok(9_223_372_036_854_775_807 * NANO_PER_UNIT)
        );
        assert_eq!(parse_nano("9223372036854775808"), Ok(MAX_NANO));
        assert_eq!(
            parse_nano("1000000000000000000000000000000000000000000"),
            Ok(MAX_NANO)
        );
        assert_eq!(nano_to_milli_saturating(MAX_NANO), i64::MAX);
        assert_eq!(nano_to_milli_saturating(-MAX_NANO), i64::MIN);
    }

    #[test]
    fn malformed_inputs() {
        assert_eq!(parse_milli(""), Err(QuantityError::Empty));
        for bad in [
            "abc", " 1", "1 ", "1x", "1kb", "1Kb", "1..5", "1.5.5", "--1", "1e3.5", "1,5", "0x10",
            "1_000", "Mi1", "1Mi ", "∞", "1KiB",
        ] {
            let err = parse_milli(bad).unwrap_err();
            assert!(
                matches!(
                    err,
                    QuantityError::Format { .. } | QuantityError::Suffix { .. }
                ),
                "{bad:?} gave {err:?}"
            );
            assert!(
                err.to_string()
                    .starts_with(&format!("invalid quantity {bad:?}")),
                "{err}"
            );
        }
        for (bad, suffix) in [
            ("1ki", "ki"),
            ("1e", "e"),
            ("1E+", "E+"),
            ("1mi", "mi"),
            ("1Ee3", "Ee3"),
            ("1k3", "k3"),
            ("+-5", "-5"),
            ("1e99999999999999999999", "e99999999999999999999"),
        ] {
            assert_eq!(
                parse_milli(bad),
                Err(QuantityError::Suffix {
                    input: bad.into(),
                    suffix: suffix.into()
                }),
                "{bad:?}"
            );
        }
        assert_eq!(
            parse_milli("abc")
                .unwrap_err()
                .to_string()
                .split(':')
                .next(),
            Some("invalid quantity \"abc\"")
        );
    }

    #[test]
    fn nano_to_milli_rounds_away_from_zero() {
        assert_eq!(nano_to_milli(0), Some(0));
        assert_eq!(nano_to_milli(1), Some(1));
        assert_eq!(nano_to_milli(1_000_000), Some(1));
        assert_eq!(nano_to_milli(1_000_001), Some(2));
        assert_eq!(nano_to_milli(-1), Some(-1));
        assert_eq!(nano_to_milli(-2_000_000), Some(-2));
        assert_eq!(
            nano_to_milli(i128::from(i64::MAX) * NANO_PER_MILLI),
            Some(i64::MAX)
        );
        assert_eq!(
            nano_to_milli(i128::from(i64::MAX) * NANO_PER_MILLI + 1),
            None
        );
    }

    #[test]
    fn format_for_humans() {
        assert_eq!(format_milli("cpu", 250), "250m");
        assert_eq!(format_milli("cpu", 2000), "2");
        assert_eq!(format_milli("cpu", 0), "0");
        assert_eq!(format_milli("cpu", 1500), "1500m");
        assert_eq!(format_milli("cpu", -250), "-250m");
        assert_eq!(format_milli("pods", 110_000), "110");
        assert_eq!(format_milli("memory", milli("1.5Gi")), "1.5Gi");
        assert_eq!(format_milli("memory", milli("2Gi")), "2Gi");
        assert_eq!(format_milli("memory", milli("128Mi")), "128Mi");
        assert_eq!(format_milli("memory", milli("1G")), "953.67Mi");
        assert_eq!(format_milli("memory", milli("1.25Gi")), "1.25Gi");
        assert_eq!(format_milli("memory", milli("1023")), "1023");
        assert_eq!(format_milli("memory", milli("1Ki")), "1Ki");
        assert_eq!(format_milli("memory", milli("1Pi")), "1Pi");
        assert_eq!(format_milli("memory", 500), "500m");
        assert_eq!(format_milli("memory", -milli("1Gi")), "-1Gi");
        assert_eq!(format_milli("ephemeral-storage", milli("95Gi")), "95Gi");
        assert_eq!(format_milli("hugepages-2Mi", milli("4Mi")), "4Mi");
        assert_eq!(format_milli("nvidia.com/gpu", 1000), "1");
        assert_eq!(format_milli("memory", i64::MAX), "9223372036854775807m");
    }

    #[test]
    fn parse_and_format_round_trip_for_common_values() {
        for (resource, s) in [
            ("cpu", "100m"),
            ("cpu", "4"),
            ("memory", "64Mi"),
            ("memory", "16Gi"),
            ("memory", "1.5Gi"),
        ] {
            assert_eq!(format_milli(resource, milli(s)), s);
        }
    }
}
