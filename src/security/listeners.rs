//! Named listeners, parsed as Kafka's `listeners`,
//! `advertised.listeners` and `listener.security.protocol.map`.

use crate::config::Endpoint;

/// Kafka's security protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn parse(name: &str) -> Option<SecurityProtocol> {
        match name {
            "PLAINTEXT" => Some(SecurityProtocol::Plaintext),
            "SSL" => Some(SecurityProtocol::Ssl),
            "SASL_PLAINTEXT" => Some(SecurityProtocol::SaslPlaintext),
            "SASL_SSL" => Some(SecurityProtocol::SaslSsl),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    pub fn uses_sasl(self) -> bool {
        matches!(self, SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl)
    }
}

/// One listener: its name, protocol, where it binds and what it advertises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerSpec {
    pub name: String,
    pub protocol: SecurityProtocol,
    pub bind: Endpoint,
    /// `None`: the bound address is advertised.
    pub advertised: Option<Endpoint>,
}

/// `NAME://host:port` → (NAME, endpoint). An empty host binds every
/// interface, as in Kafka.
fn parse_one(s: &str) -> Result<(String, Endpoint), String> {
    let (name, addr) = s.split_once("://").ok_or_else(|| format!("listener {s:?}: expected NAME://HOST:PORT"))?;
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        return Err(format!("listener {s:?}: invalid listener name {name:?}"));
    }
    let addr = if addr.starts_with(':') { format!("0.0.0.0{addr}") } else { addr.to_string() };
    let ep = Endpoint::parse(&addr).map_err(|e| format!("listener {s:?}: {e}"))?;
    Ok((name.to_ascii_uppercase(), ep))
}

/// `NAME:PROTOCOL,NAME:PROTOCOL` (Kafka's `listener.security.protocol.map`).
fn parse_map(map: &str) -> Result<Vec<(String, SecurityProtocol)>, String> {
    let mut out = Vec::new();
    for entry in map.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, proto) = entry
            .split_once(':')
            .ok_or_else(|| format!("listener_security_protocol_map entry {entry:?}: expected NAME:PROTOCOL"))?;
        let proto = SecurityProtocol::parse(proto.trim())
            .ok_or_else(|| format!("listener_security_protocol_map entry {entry:?}: unknown security protocol"))?;
        out.push((name.trim().to_ascii_uppercase(), proto));
    }
    Ok(out)
}

/// The listeners a configuration describes. With no `listeners`, the one
/// PLAINTEXT listener of `listen`/`advertised_listener` (kcoord's original
/// single listener, unchanged).
pub fn resolve(
    listeners: &[String],
    advertised: &[String],
    protocol_map: &str,
    listen: &str,
    advertised_listener: &str,
) -> Result<Vec<ListenerSpec>, String> {
    if listeners.is_empty() {
        if !advertised.is_empty() {
            return Err("server.advertised_listeners needs server.listeners".into());
        }
        let bind = Endpoint::parse(listen).map_err(|e| format!("server.listen: {e}"))?;
        let advertised = match advertised_listener {
            "" => None,
            a => Some(Endpoint::parse(a).map_err(|e| format!("server.advertised_listener: {e}"))?),
        };
        return Ok(vec![ListenerSpec {
            name: "PLAINTEXT".into(),
            protocol: SecurityProtocol::Plaintext,
            bind,
            advertised,
        }]);
    }
    let map = parse_map(protocol_map)?;
    let mut out: Vec<ListenerSpec> = Vec::with_capacity(listeners.len());
    for l in listeners {
        let (name, bind) = parse_one(l)?;
        if out.iter().any(|o| o.name == name) {
            return Err(format!("listener name {name} is used twice in server.listeners"));
        }
        let protocol = match map.iter().find(|(n, _)| *n == name) {
            Some((_, p)) => *p,
            None => SecurityProtocol::parse(&name).ok_or_else(|| {
                format!("listener {name} is not a security protocol; map it in server.listener_security_protocol_map")
            })?,
        };
        out.push(ListenerSpec { name, protocol, bind, advertised: None });
    }
    for a in advertised {
        let (name, ep) = parse_one(a)?;
        let Some(l) = out.iter_mut().find(|l| l.name == name) else {
            return Err(format!("advertised listener {name} is not in server.listeners"));
        };
        if l.advertised.is_some() {
            return Err(format!("listener name {name} is used twice in server.advertised_listeners"));
        }
        l.advertised = Some(ep);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn without_named_listeners_the_single_listen_address_is_plaintext() {
        let l = resolve(&[], &[], "", "127.0.0.1:9092", "kafka:9092").unwrap();
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].protocol, SecurityProtocol::Plaintext);
        assert_eq!(l[0].advertised, Some(Endpoint { host: "kafka".into(), port: 9092 }));
    }

    #[test]
    fn named_listeners_take_their_protocol_from_the_name_or_the_map() {
        let l = resolve(
            &s(&["SASL_SSL://127.0.0.1:9093", "internal://:9094"]),
            &s(&["SASL_SSL://kafka.example.com:19093"]),
            "INTERNAL:SASL_PLAINTEXT",
            "",
            "",
        )
        .unwrap();
        assert_eq!(l[0].protocol, SecurityProtocol::SaslSsl);
        assert_eq!(l[0].advertised, Some(Endpoint { host: "kafka.example.com".into(), port: 19093 }));
        assert_eq!(l[1].name, "INTERNAL");
        assert_eq!(l[1].protocol, SecurityProtocol::SaslPlaintext);
        assert_eq!(l[1].bind, Endpoint { host: "0.0.0.0".into(), port: 9094 });
        assert_eq!(l[1].advertised, None);
    }

    #[test]
    fn bad_listener_lists_are_refused_with_the_reason() {
        for (ls, adv, map) in [
            (&["CLIENT://127.0.0.1:1"][..], &[][..], ""),
            (&["PLAINTEXT://127.0.0.1:1", "PLAINTEXT://127.0.0.1:2"][..], &[][..], ""),
            (&["PLAINTEXT://127.0.0.1:1"][..], &["SSL://x:1"][..], ""),
            (&["127.0.0.1:1"][..], &[][..], ""),
            (&["X://127.0.0.1:1"][..], &[][..], "X:TLS"),
        ] {
            assert!(resolve(&s(ls), &s(adv), map, "", "").is_err(), "{ls:?} {adv:?} {map}");
        }
    }
}
