//! Java's regex replacement strings in the regex crate's syntax, for the
//! principal rules Kafka users write for Java (`sasl.kerberos.principal
//! .to.local.rules`, `ssl.principal.mapping.rules`): `$n` refers to a group
//! as Java's `Matcher.appendReplacement` reads it (the longest number that
//! names an existing group; one that names none stays literal, as Kafka's
//! `SslPrincipalMapper` escapes it), `\x` is a literal `x`.

/// `to` (Java's syntax) for a pattern with `groups` capturing groups.
pub fn replacement(to: &str, groups: usize) -> String {
    let mut out = String::with_capacity(to.len());
    let mut chars = to.chars().peekable();
    while let Some(ch) = chars.next() {
        match ch {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(other) => out.push(other),
                None => {}
            },
            '$' => match chars.peek().and_then(|d| d.to_digit(10)) {
                Some(first) if (first as usize) <= groups => {
                    chars.next();
                    let mut n = first as usize;
                    while let Some(d) = chars.peek().and_then(|d| d.to_digit(10)) {
                        let longer = n * 10 + d as usize;
                        if longer > groups {
                            break;
                        }
                        n = longer;
                        chars.next();
                    }
                    out.push_str(&format!("${{{n}}}"));
                }
                _ => out.push_str("$$"),
            },
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::replacement;

    #[test]
    fn group_references_read_as_javas_and_unknown_ones_stay_literal() {
        assert_eq!(replacement("$1@$2", 2), "${1}@${2}");
        assert_eq!(replacement("$12", 1), "${1}2");
        assert_eq!(replacement("$12", 12), "${12}");
        assert_eq!(replacement("$1@$4", 3), "${1}@$$4");
        assert_eq!(replacement(r"a\$b\/c", 0), "a$$b/c");
        assert_eq!(replacement("$", 1), "$$");
    }
}
