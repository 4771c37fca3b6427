//! Parsing `--to-datetime` and `--by-duration` without a date library:
//! ISO-8601 `YYYY-MM-DDTHH:mm:SS[.sss][Z|±HH:MM]`, UTC when no offset is
//! given, and ISO-8601 durations as Java's `Duration.parse` reads them.

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// Milliseconds since the epoch, or None if the text is not a datetime.
pub fn parse_datetime_ms(s: &str) -> Option<i64> {
    let (date, rest) = s.split_once('T')?;
    let mut d = date.split('-');
    let (y, mo, da): (i64, i64, i64) = (d.next()?.parse().ok()?, d.next()?.parse().ok()?, d.next()?.parse().ok()?);
    if d.next().is_some() || !(1..=12).contains(&mo) || !(1..=31).contains(&da) {
        return None;
    }
    // Split off a zone designator.
    let (time, offset_min) = if let Some(t) = rest.strip_suffix('Z') {
        (t, 0)
    } else if let Some(i) = rest.rfind(['+', '-']) {
        let (t, z) = rest.split_at(i);
        let sign = if z.starts_with('-') { -1 } else { 1 };
        let (zh, zm) = z[1..].split_once(':').unwrap_or((&z[1..], "0"));
        (t, sign * (zh.parse::<i64>().ok()? * 60 + zm.parse::<i64>().ok()?))
    } else {
        (rest, 0)
    };
    let mut t = time.split(':');
    let h: i64 = t.next()?.parse().ok()?;
    let mi: i64 = t.next()?.parse().ok()?;
    let sec = t.next().unwrap_or("0");
    let (sec, ms) = match sec.split_once('.') {
        Some((s, frac)) => {
            let frac3: String = frac.chars().chain("000".chars()).take(3).collect();
            (s.parse::<i64>().ok()?, frac3.parse::<i64>().ok()?)
        }
        None => (sec.parse::<i64>().ok()?, 0),
    };
    if h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let days = days_from_civil(y, mo, da);
    Some(((days * 24 + h) * 60 + mi - offset_min) * 60_000 + sec * 1000 + ms)
}

/// Milliseconds of an ISO-8601 duration in the form Java's
/// `Duration.parse` (and so kafka-consumer-groups.sh --by-duration) takes:
/// `[±]P[nD][T[nH][nM][n[.fff]S]]`, any letter case, each number signed or
/// not; at least one part, and `T` only before a time part. None if the text
/// is not one, or overflows.
pub fn parse_duration_ms(s: &str) -> Option<i64> {
    let upper = s.to_ascii_uppercase();
    let (sign, unsigned) = match upper.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, upper.strip_prefix('+').unwrap_or(&upper)),
    };
    let body = unsigned.strip_prefix('P')?;
    let (date, time) = match body.split_once('T') {
        Some((d, t)) if !t.is_empty() => (d, Some(t)),
        Some(_) => return None,
        None => (body, None),
    };
    let mut parts = Vec::new();
    if !date.is_empty() {
        parts.push((date.strip_suffix('D')?, 86_400_000));
    }
    let mut rest = time.unwrap_or("");
    for (unit, ms) in [('H', 3_600_000), ('M', 60_000)] {
        if let Some((n, after)) = rest.split_once(unit) {
            parts.push((n, ms));
            rest = after;
        }
    }
    let mut total: i64 = 0;
    if !rest.is_empty() {
        let seconds = rest.strip_suffix('S')?;
        let (whole, fraction) = seconds.split_once(['.', ',']).unwrap_or((seconds, ""));
        if fraction.len() > 9 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let millis: i64 = fraction.chars().chain("000".chars()).take(3).collect::<String>().parse().ok()?;
        let whole_ms = whole.parse::<i64>().ok()?.checked_mul(1000)?;
        total = if whole.starts_with('-') { whole_ms.checked_sub(millis)? } else { whole_ms.checked_add(millis)? };
    } else if parts.is_empty() {
        return None;
    }
    for (n, unit_ms) in parts {
        total = total.checked_add(n.parse::<i64>().ok()?.checked_mul(unit_ms)?)?;
    }
    total.checked_mul(sign)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kafka_style_datetimes() {
        assert_eq!(parse_datetime_ms("1970-01-01T00:00:00.000"), Some(0));
        assert_eq!(parse_datetime_ms("2023-11-14T22:13:20.000"), Some(1_700_000_000_000));
        assert_eq!(parse_datetime_ms("2023-11-14T22:13:20Z"), Some(1_700_000_000_000));
        assert_eq!(parse_datetime_ms("2023-11-15T00:13:20.5+02:00"), Some(1_700_000_000_500));
        assert_eq!(parse_datetime_ms("not a date"), None);
        assert_eq!(parse_datetime_ms("2023-13-01T00:00:00"), None);
    }

    #[test]
    fn parses_java_style_durations() {
        assert_eq!(parse_duration_ms("PT1H"), Some(3_600_000));
        assert_eq!(parse_duration_ms("PT30M"), Some(1_800_000));
        assert_eq!(parse_duration_ms("pt1h30m"), Some(5_400_000));
        assert_eq!(parse_duration_ms("P1DT12H"), Some(129_600_000));
        assert_eq!(parse_duration_ms("P2D"), Some(172_800_000));
        assert_eq!(parse_duration_ms("PT0.5S"), Some(500));
        assert_eq!(parse_duration_ms("PT-1.5S"), Some(-1_500));
        assert_eq!(parse_duration_ms("-PT1M"), Some(-60_000));
        assert_eq!(parse_duration_ms("PT1H-10M"), Some(3_000_000));
        for bad in ["", "P", "PT", "1H", "PT1", "PT5M1H", "P1H", "PT1.2345678901S", "P99999999999999999D"] {
            assert_eq!(parse_duration_ms(bad), None, "{bad:?}");
        }
    }
}
