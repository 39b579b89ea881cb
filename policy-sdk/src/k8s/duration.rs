//! Go's `time.Duration` text form: [`parse_go_duration`] (`time.ParseDuration`) and
//! [`format_go_duration`] (`Duration.String()`), in nanoseconds, so durations such as
//! DefaultEvictor's `minPodAge` and the server's TTLs read and print as in descheduler. Here
//! rather than in the evictor because guests may parse durations too (the evictor is host-only).
//!
//! Owns the text form only; must not know what a duration is used for. Still re-exported from
//! `crate::evictor` (its old home, feature `host`) for existing callers.

/// `time.ParseDuration`: a signed sequence of decimal numbers with units (`ns`, `us`/`µs`, `ms`,
/// `s`, `m`, `h`), e.g. `"300ms"`, `"-1.5h"`, `"2h45m"`; `"0"` needs no unit. Returns nanoseconds.
pub fn parse_go_duration(s: &str) -> Result<i128, String> {
    let invalid = || format!("invalid duration {s:?}");
    let (neg, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let int_part = &rest[..int_len];
        rest = &rest[int_len..];
        let mut frac_part = "";
        if let Some(after) = rest.strip_prefix('.') {
            let frac_len = after.bytes().take_while(u8::is_ascii_digit).count();
            frac_part = &after[..frac_len];
            rest = &after[frac_len..];
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(invalid());
        }
        let unit_len = rest
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        if unit_len == 0 {
            return Err(format!("missing unit in duration {s:?}"));
        }
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let scale: i128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 3_600 * 1_000_000_000,
            _ => return Err(format!("unknown unit {unit:?} in duration {s:?}")),
        };
        let int: i128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().map_err(|_| invalid())?
        };
        let mut value = int.checked_mul(scale).ok_or_else(invalid)?;
        if !frac_part.is_empty() {
            let (mut f, mut div): (i128, i128) = (0, 1);
            for d in frac_part.bytes().take(18) {
                f = f * 10 + i128::from(d - b'0');
                div *= 10;
            }
            value += f * scale / div;
        }
        total = total.checked_add(value).ok_or_else(invalid)?;
        if total > i128::from(i64::MAX) {
            return Err(invalid());
        }
    }
    Ok(if neg { -total } else { total })
}

/// `time.Duration.String()` (`"1h0m0s"`, `"1.5s"`, `"300ms"`).
pub fn format_go_duration(nanos: i128) -> String {
    fn frac(v: u128, prec: u32) -> (u128, String) {
        let pow = 10u128.pow(prec);
        let (int, f) = (v / pow, v % pow);
        if f == 0 {
            (int, String::new())
        } else {
            let digits = format!("{f:0width$}", width = prec as usize);
            (int, format!(".{}", digits.trim_end_matches('0')))
        }
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let u = nanos.unsigned_abs();
    if u == 0 {
        return "0s".into();
    }
    if u < 1_000_000_000 {
        let (prec, unit) = if u < 1_000 {
            (0, "ns")
        } else if u < 1_000_000 {
            (3, "µs")
        } else {
            (6, "ms")
        };
        let (int, f) = frac(u, prec);
        return format!("{sign}{int}{f}{unit}");
    }
    let (secs, f) = frac(u, 9);
    let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    if h > 0 {
        format!("{sign}{h}h{m}m{s}{f}s")
    } else if m > 0 {
        format!("{sign}{m}m{s}{f}s")
    } else {
        format!("{sign}{s}{f}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let ok: &[(&str, i128, &str)] = &[
            ("0", 0, "0s"),
            ("5m", 300_000_000_000, "5m0s"),
            ("1h30m", 5_400_000_000_000, "1h30m0s"),
            ("1.5h", 5_400_000_000_000, "1h30m0s"),
            ("300ms", 300_000_000, "300ms"),
            ("-2s", -2_000_000_000, "-2s"),
            ("+1s", 1_000_000_000, "1s"),
            ("1h2m3.5s", 3_723_500_000_000, "1h2m3.5s"),
            ("10us", 10_000, "10µs"),
            ("7µs", 7_000, "7µs"),
            ("42ns", 42, "42ns"),
            (".5s", 500_000_000, "500ms"),
            ("1.25ms", 1_250_000, "1.25ms"),
        ];
        for (s, nanos, shown) in ok {
            assert_eq!(parse_go_duration(s), Ok(*nanos), "{s}");
            assert_eq!(format_go_duration(*nanos), *shown, "{s}");
        }
        for bad in ["", "5", "m", "1d", "1.s.", "-", ".s", "5m3", "9999999999h"] {
            assert!(parse_go_duration(bad).is_err(), "{bad:?}");
        }
    }
}
