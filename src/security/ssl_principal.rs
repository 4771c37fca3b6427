//! A TLS client's principal name from its certificate subject, as Kafka's
//! `SslPrincipalMapper` derives it with `ssl.principal.mapping.rules`
//! (KIP-371): a comma-separated list of `DEFAULT` (the RFC 2253 subject as
//! it is) and `RULE:pattern/replacement/` with an optional `L` or `U`
//! (lower or upper case the result). A rule applies when its pattern
//! matches the whole subject; the first that applies wins; a subject no
//! rule maps cannot connect. `\/` puts a slash in a pattern.

use regex::Regex;

use super::java_regex;

#[derive(Debug, Clone)]
enum Rule {
    Default,
    Map { whole: Regex, pattern: Regex, replacement: String, case: Option<bool>, text: String },
}

/// The parsed rules.
#[derive(Debug, Clone)]
pub struct SslPrincipalMapper {
    rules: Vec<Rule>,
}

/// Kafka's grammar of one rule.
const RULE: &str = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)";

fn compiled(pattern: &str) -> &'static Regex {
    static SPLITTER: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    static PARSER: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    let (cell, text) = if pattern == "split" {
        (&SPLITTER, format!(r"\s*({RULE})\s*(?:,\s*|$)"))
    } else {
        (&PARSER, format!("^(?:{RULE})"))
    };
    #[allow(clippy::unwrap_used, reason = "constant patterns, checked by the tests")]
    cell.get_or_init(|| Regex::new(&text).unwrap())
}

impl SslPrincipalMapper {
    /// Parses Kafka's `ssl.principal.mapping.rules` value (empty: `DEFAULT`).
    pub fn new(rules: &str) -> Result<SslPrincipalMapper, String> {
        let rules = if rules.trim().is_empty() { "DEFAULT" } else { rules.trim() };
        let mut parsed = Vec::new();
        for c in compiled("split").captures_iter(rules) {
            let rule = c.get(1).map_or("", |m| m.as_str());
            let m = compiled("parse").captures(rule).ok_or_else(|| format!("Invalid rule: {rule}"))?;
            let end = m.get(0).map_or(0, |m| m.end());
            if end != rule.len() {
                return Err(format!("Invalid rule: `{rule}`, unmatched substring: `{}`", &rule[end..]));
            }
            if m.get(1).is_some() {
                parsed.push(Rule::Default);
            } else if let (Some(pattern), Some(to)) = (m.get(2), m.get(3)) {
                let invalid = |e: regex::Error| format!("Invalid rule: `{rule}`: {e}");
                let pattern_text = pattern.as_str();
                let whole = Regex::new(&format!("^(?:{pattern_text})$")).map_err(invalid)?;
                let pattern = Regex::new(pattern_text).map_err(invalid)?;
                let replacement = java_regex::replacement(to.as_str(), pattern.captures_len() - 1);
                let case = match m.get(4).map(|f| f.as_str()) {
                    Some("L") => Some(false),
                    Some("U") => Some(true),
                    _ => None,
                };
                parsed.push(Rule::Map { whole, pattern, replacement, case, text: rule.to_string() });
            }
            // Empty rules are ignored, as Kafka ignores them.
        }
        Ok(SslPrincipalMapper { rules: parsed })
    }

    /// The principal name of the RFC 2253 subject `dn`.
    pub fn name(&self, dn: &str) -> Result<String, String> {
        for rule in &self.rules {
            match rule {
                Rule::Default => return Ok(dn.to_string()),
                Rule::Map { whole, pattern, replacement, case, .. } if whole.is_match(dn) => {
                    let name = pattern.replace_all(dn, replacement.as_str()).into_owned();
                    return Ok(match case {
                        Some(false) => name.to_lowercase(),
                        Some(true) => name.to_uppercase(),
                        None => name,
                    });
                }
                Rule::Map { .. } => {}
            }
        }
        let texts: Vec<&str> = self
            .rules
            .iter()
            .map(|r| match r {
                Rule::Default => "DEFAULT",
                Rule::Map { text, .. } => text.as_str(),
            })
            .collect();
        Err(format!("No rules apply to {dn}, rules [{}]", texts.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(rules: &str, dn: &str) -> Result<String, String> {
        SslPrincipalMapper::new(rules).unwrap().name(dn)
    }

    #[test]
    fn rules_map_subjects_as_kafkas_ssl_principal_mapper() {
        // Kafka's documentation and SslPrincipalMapperTest cases.
        let dn = "CN=kafka1,OU=ServiceUsers,O=Org,C=US";
        assert_eq!(map("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", dn).unwrap(), "kafka1");
        assert_eq!(
            map("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/, DEFAULT", "CN=alice,OU=People").unwrap(),
            "CN=alice,OU=People"
        );
        assert_eq!(
            map(
                "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
                "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Palo Alto,ST=CA,C=US"
            )
            .unwrap(),
            "duke@javasoft"
        );
        assert_eq!(map("RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U", "cn=kafka.1,o=x").unwrap(), "KAFKA.1");
        assert_eq!(map("RULE:^CN=(.*?)\\/(.*)$/$1-$2/", "CN=a/b").unwrap(), "a-b");
        assert_eq!(map("DEFAULT", dn).unwrap(), dn);
        assert_eq!(map("", dn).unwrap(), dn);
    }

    #[test]
    fn a_subject_no_rule_maps_is_refused_and_bad_rules_are_refused_at_start() {
        assert_eq!(
            map("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", "CN=mallory,OU=Other").unwrap_err(),
            "No rules apply to CN=mallory,OU=Other, rules [RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/]"
        );
        for bad in ["RULE:a/b/Lxyz", "DEFAULTX", "RULE:(/x/", "FOO"] {
            assert!(SslPrincipalMapper::new(bad).is_err(), "{bad}");
        }
    }
}
