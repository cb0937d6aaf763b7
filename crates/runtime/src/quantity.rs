//! Kubernetes resource quantities (`"2"`, `"250m"`, `"1.5Gi"`, `"1e3"`), read as numbers for
//! controllers that compare requests, capacities and sizes.

/// The value of the quantity `q` in its base unit (cores, bytes, pods): decimal suffixes
/// `m k M G T P E`, binary `Ki Mi Gi Ti Pi Ei`, or an exponent `e3`; `None` if unreadable.
pub fn parse(q: &str) -> Option<f64> {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(q.len());
    let (num, suffix) = q.split_at(split);
    let value: f64 = num.parse().ok()?;
    let factor = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        e if e.starts_with(['e', 'E']) => 10f64.powi(e[1..].parse().ok()?),
        _ => return None,
    };
    Some(value * factor)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn suffixes_read_as_kubernetes_writes_them() {
        assert_eq!(parse("250m"), Some(0.25));
        assert_eq!(parse("1Gi"), Some(1024f64.powi(3)));
        assert_eq!(parse("500M"), Some(5e8));
        assert_eq!(parse("1e3"), Some(1000.0));
        assert_eq!(parse("2"), Some(2.0));
        assert_eq!(parse("2Xi"), None);
        assert_eq!(parse(""), None);
    }
}
