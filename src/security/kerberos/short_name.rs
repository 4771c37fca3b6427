//! Kerberos principal to user name, as Kafka's `KerberosShortNamer` maps
//! it with `sasl.kerberos.principal.to.local.rules`, so that the ACLs a
//! Kafka cluster has for `User:alice` match `alice@EXAMPLE.COM` here too.
//!
//! A rule is `DEFAULT` (the first component, when the realm is the default
//! realm) or `RULE:[n:format](match)s/from/to/g` with an optional `/L` or
//! `/U` (lower or upper case the result): it applies to names of `n`
//! components, builds `format` from `$0` (the realm), `$1`, `$2`; the
//! result must match `match` whole, then `s/from/to/` is applied (every
//! match with `g`). The first rule that applies wins; a result with `/` or
//! `@` is refused; no rule applying refuses the name.

use regex::Regex;

/// One parsed rule.
#[derive(Debug, Clone)]
enum Rule {
    Default,
    Custom {
        components: usize,
        format: String,
        matches: Option<Regex>,
        substitute: Option<(Regex, String, bool)>,
        case: Option<Case>,
        text: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Lower,
    Upper,
}

/// The configured rules and the default realm they compare against.
#[derive(Debug, Clone)]
pub struct ShortNamer {
    rules: Vec<Rule>,
    default_realm: String,
}

impl ShortNamer {
    /// Parses `rules` (Kafka's syntax; an empty list means `DEFAULT`).
    pub fn new(rules: &[String], default_realm: &str) -> Result<ShortNamer, String> {
        let rules = if rules.is_empty() { vec!["DEFAULT".to_string()] } else { rules.to_vec() };
        let rules = rules.iter().map(|r| parse_rule(r)).collect::<Result<_, _>>()?;
        Ok(ShortNamer { rules, default_realm: default_realm.to_string() })
    }

    /// The short name of `principal` (`primary[/instance]@REALM`).
    pub fn short_name(&self, principal: &str) -> Result<String, String> {
        let (name, realm) = match principal.rsplit_once('@') {
            Some((n, r)) if !r.contains('/') => (n, Some(r)),
            Some(_) => return Err(format!("Malformed Kerberos name: {principal}")),
            None => (principal, None),
        };
        let mut parts = name.splitn(2, '/');
        let primary = parts.next().unwrap_or_default();
        let instance = parts.next();
        if instance.is_some_and(|i| i.contains('/')) || primary.contains('@') {
            return Err(format!("Malformed Kerberos name: {principal}"));
        }
        let Some(realm) = realm else {
            // Already simple.
            return Ok(primary.to_string());
        };
        let mut params = vec![realm, primary];
        params.extend(instance);
        for rule in &self.rules {
            if let Some(short) = self.apply(rule, &params)? {
                return Ok(short);
            }
        }
        Err(format!("No rules apply to {principal}, rules [{}]", self.describe()))
    }

    fn apply(&self, rule: &Rule, params: &[&str]) -> Result<Option<String>, String> {
        let (result, case, text) = match rule {
            Rule::Default => match params {
                [realm, primary, ..] => ((self.default_realm == *realm).then(|| primary.to_string()), None, "DEFAULT"),
                _ => (None, None, "DEFAULT"),
            },
            Rule::Custom { components, format, matches, substitute, case, text } => {
                if params.len() - 1 != *components {
                    return Ok(None);
                }
                let base = replace_parameters(format, params)?;
                let result = match matches {
                    Some(m) if !m.is_match(&base) => None,
                    _ => Some(match substitute {
                        None => base,
                        Some((from, to, true)) => from.replace_all(&base, to.as_str()).into_owned(),
                        Some((from, to, false)) => from.replace(&base, to.as_str()).into_owned(),
                    }),
                };
                (result, *case, text.as_str())
            }
        };
        let Some(result) = result else { return Ok(None) };
        if result.contains(['/', '@']) {
            return Err(format!("Non-simple name {result} after auth_to_local rule {text}"));
        }
        Ok(Some(match case {
            Some(Case::Lower) => result.to_lowercase(),
            Some(Case::Upper) => result.to_uppercase(),
            None => result,
        }))
    }

    fn describe(&self) -> String {
        let texts: Vec<&str> = self
            .rules
            .iter()
            .map(|r| match r {
                Rule::Default => "DEFAULT",
                Rule::Custom { text, .. } => text.as_str(),
            })
            .collect();
        texts.join(", ")
    }
}

/// Kafka's rule grammar.
fn rule_parser() -> &'static Regex {
    static PARSER: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    PARSER.get_or_init(|| {
        #[allow(clippy::unwrap_used, reason = "a constant pattern, checked by the tests")]
        Regex::new(r"^(?:(DEFAULT)|RULE:\[(\d*):([^\]]*)\](?:\(([^)]*)\))?(?:s/([^/]*)/([^/]*)/(g)?)?)/?([LU])?$")
            .unwrap()
    })
}

fn parse_rule(text: &str) -> Result<Rule, String> {
    let invalid = |why: &str| format!("Invalid rule: `{text}`{why}");
    let c = rule_parser().captures(text.trim()).ok_or_else(|| invalid(""))?;
    if c.get(1).is_some() {
        return Ok(Rule::Default);
    }
    let group = |i: usize| c.get(i).map(|m| m.as_str());
    let components = group(2).unwrap_or_default().parse::<usize>().map_err(|_| invalid(": no component count"))?;
    let compile = |pattern: &str, whole: bool| {
        let pattern = if whole { format!("^(?:{pattern})$") } else { pattern.to_string() };
        Regex::new(&pattern).map_err(|e| invalid(&format!(": {e}")))
    };
    let matches = group(4).map(|m| compile(m, true)).transpose()?;
    let substitute = match group(5) {
        Some(from) => {
            let from = compile(from, false)?;
            let to = crate::security::java_regex::replacement(group(6).unwrap_or_default(), from.captures_len() - 1);
            Some((from, to, group(7).is_some()))
        }
        None => None,
    };
    let case = match group(8) {
        Some("L") => Some(Case::Lower),
        Some("U") => Some(Case::Upper),
        _ => None,
    };
    Ok(Rule::Custom {
        components,
        format: group(3).unwrap_or_default().to_string(),
        matches,
        substitute,
        case,
        text: text.trim().to_string(),
    })
}

/// `format` with `$n` replaced by `params[n]`.
fn replace_parameters(format: &str, params: &[&str]) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = format;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let digits: String = rest[at + 1..].chars().take_while(|c| c.is_ascii_digit()).collect();
        if digits.is_empty() {
            return Err(format!("bad format in username mapping in {format}"));
        }
        let n: usize = digits.parse().map_err(|_| format!("bad format in username mapping in {format}"))?;
        let value = params.get(n).ok_or_else(|| {
            format!("index {n} from {format} is outside of the valid range 0 to {}", params.len() - 1)
        })?;
        out.push_str(value);
        rest = &rest[at + 1 + digits.len()..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn namer(rules: &[&str]) -> ShortNamer {
        ShortNamer::new(&rules.iter().map(|r| r.to_string()).collect::<Vec<_>>(), "EXAMPLE.COM").unwrap()
    }

    #[test]
    fn the_default_rule_keeps_the_first_component_of_names_in_the_default_realm() {
        let n = namer(&[]);
        assert_eq!(n.short_name("alice@EXAMPLE.COM").unwrap(), "alice");
        assert_eq!(n.short_name("kafka/broker1.example.com@EXAMPLE.COM").unwrap(), "kafka");
        assert_eq!(n.short_name("alice").unwrap(), "alice");
        let other = n.short_name("alice@OTHER.ORG").unwrap_err();
        assert_eq!(other, "No rules apply to alice@OTHER.ORG, rules [DEFAULT]");
    }

    #[test]
    fn custom_rules_rewrite_match_and_change_case_as_kafkas() {
        // Kafka's documentation examples and its KerberosNameTest cases.
        let n = namer(&[
            "RULE:[1:$1@$0](.*@OTHER.ORG)s/@.*//L",
            "RULE:[2:$1](App\\..*)s/App\\.(.*)/$1/g",
            "RULE:[2:$1;$2](^.*;admin$)s/;admin$///U",
            "DEFAULT",
        ]);
        assert_eq!(n.short_name("Bob@OTHER.ORG").unwrap(), "bob");
        assert_eq!(n.short_name("App.service/host@EXAMPLE.COM").unwrap(), "service");
        assert_eq!(n.short_name("joe/admin@EXAMPLE.COM").unwrap(), "JOE");
        assert_eq!(n.short_name("joe/host@EXAMPLE.COM").unwrap(), "joe");
        assert!(n.short_name("joe@THIRD.NET").is_err());
    }

    #[test]
    fn a_rule_leaving_a_realm_or_instance_in_the_name_refuses_it() {
        let n = namer(&["RULE:[1:$1@$0]"]);
        assert_eq!(
            n.short_name("bob@EXAMPLE.COM").unwrap_err(),
            "Non-simple name bob@EXAMPLE.COM after auth_to_local rule RULE:[1:$1@$0]"
        );
    }

    #[test]
    fn malformed_rules_are_refused_at_start() {
        for bad in ["RULE:[1:$1", "DEFAULTX", "RULE:[a:$1]", "RULE:[1:$1](a(b)"] {
            assert!(ShortNamer::new(&[bad.to_string()], "R").is_err(), "{bad}");
        }
    }

    #[test]
    fn a_format_index_past_the_components_is_an_error_not_a_panic() {
        let n = namer(&["RULE:[1:$3]"]);
        assert!(n.short_name("bob@EXAMPLE.COM").unwrap_err().contains("outside of the valid range"));
    }
}
