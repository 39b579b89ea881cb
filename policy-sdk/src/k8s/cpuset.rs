//! Linux CPU lists (`"0-3,8-11"`), as kubelet, koordlet and koord-scheduler write them
//! (`k8s.io/utils/cpuset`: `Parse` and `CPUSet.String`).
//!
//! Lives in the SDK so that the host (which parses Koordinator's annotations and
//! NodeResourceTopology into snapshot rows) and policies agree on every edge case.
//!
//! Matches `cpuset.Parse`: elements are separated by `,`; an element is `N` or `N-M` with
//! `N <= M` (`1-1` is `1`); an empty string is the empty set; anything else (spaces, empty
//! elements, signs, strides) is an error. One deliberate difference: Go's parser would expand
//! `0-2147483647` into two billion CPUs; this one refuses CPU ids above [`MAX_CPU`].

/// The largest CPU id accepted (Linux's `NR_CPUS` is at most 8192 on every architecture).
pub const MAX_CPU: u32 = 65_535;

/// Parse a CPU list into ascending, distinct CPU ids.
pub fn parse_cpu_list(s: &str) -> Result<Vec<u32>, String> {
    if s.is_empty() {
        return Ok(Vec::new());
    }
    let mut cpus = Vec::new();
    for element in s.split(',') {
        let number = |text: &str| -> Result<u32, String> {
            if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!(
                    "{element:?} in CPU list {s:?} is not a CPU id or range"
                ));
            }
            let n: u64 = text
                .parse()
                .map_err(|_| format!("CPU id {text:?} in {s:?} is too large"))?;
            if n > u64::from(MAX_CPU) {
                return Err(format!("CPU id {n} in {s:?} is above {MAX_CPU}"));
            }
            Ok(n as u32)
        };
        match element.split_once('-') {
            None => cpus.push(number(element)?),
            Some((start, end)) => {
                let (start, end) = (number(start)?, number(end)?);
                if start > end {
                    return Err(format!(
                        "invalid range {element:?} in CPU list {s:?} ({start} > {end})"
                    ));
                }
                cpus.extend(start..=end);
            }
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// Write ascending, distinct CPU ids as a CPU list with ranges (`CPUSet.String()`):
/// `[0, 1, 2, 3, 8]` → `"0-3,8"`.
pub fn format_cpu_list(cpus: &[u32]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_like_k8s_cpuset() {
        assert_eq!(parse_cpu_list(""), Ok(vec![]));
        assert_eq!(parse_cpu_list("3"), Ok(vec![3]));
        assert_eq!(
            parse_cpu_list("0-3,8-11"),
            Ok(vec![0, 1, 2, 3, 8, 9, 10, 11])
        );
        assert_eq!(parse_cpu_list("1-1"), Ok(vec![1]));
        // Out of order and overlapping: a set.
        assert_eq!(parse_cpu_list("8,0-2,1"), Ok(vec![0, 1, 2, 8]));
        for bad in [
            " 1", "1,", ",1", "1--2", "-1", "a", "1-", "3-1", "0-2:2", "+1", "1 ,2",
        ] {
            assert!(parse_cpu_list(bad).is_err(), "{bad:?} should be refused");
        }
        let err = parse_cpu_list("4-2").unwrap_err();
        assert!(
            err.contains("invalid range \"4-2\"") && err.contains("4 > 2"),
            "{err}"
        );
        // Hostile sizes are refused rather than expanded.
        assert!(
            parse_cpu_list("0-4294967295")
                .unwrap_err()
                .contains("above 65535")
        );
        assert!(parse_cpu_list("99999999999999999999").is_err());
    }

    #[test]
    fn lists_format_with_ranges_and_round_trip() {
        assert_eq!(format_cpu_list(&[]), "");
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 8]), "0-3,8");
        assert_eq!(format_cpu_list(&[5]), "5");
        assert_eq!(format_cpu_list(&[1, 3, 4]), "1,3-4");
        for text in ["0-63", "0,2,4-7,64-127", ""] {
            assert_eq!(format_cpu_list(&parse_cpu_list(text).unwrap()), text);
        }
    }
}
