//! SASL/PLAIN (RFC 4616) as Kafka's `PlainSaslServer` checks it, with
//! Kafka's messages. The password is checked against the salted SCRAM
//! credential of the user (see [`super::credentials`]).

/// `authzid NUL authcid NUL passwd`: the user name and password, or the
/// message Kafka sends back to the client.
pub fn parse(message: &[u8]) -> Result<(String, String), String> {
    let text = String::from_utf8_lossy(message);
    let tokens: Vec<&str> = text.split('\u{0}').collect();
    let [authzid, username, password] = tokens[..] else {
        return Err(format!("Invalid SASL/PLAIN response: expected 3 tokens, got {}", tokens.len()));
    };
    if username.is_empty() {
        return Err("Authentication failed: username not specified".into());
    }
    if password.is_empty() {
        return Err("Authentication failed: password not specified".into());
    }
    if !authzid.is_empty() && authzid != username {
        return Err(
            "Authentication failed: Client requested an authorization id that is different from username".into()
        );
    }
    Ok((username.to_string(), password.to_string()))
}

/// What a wrong user name or password gets.
pub const INVALID: &str = "Authentication failed: Invalid username or password";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_messages_are_parsed_as_kafka_does() {
        assert_eq!(parse(b"\0alice\0pw"), Ok(("alice".into(), "pw".into())));
        assert_eq!(parse(b"alice\0alice\0pw"), Ok(("alice".into(), "pw".into())));
        assert!(parse(b"bob\0alice\0pw").unwrap_err().contains("authorization id"));
        assert_eq!(parse(b"alice"), Err("Invalid SASL/PLAIN response: expected 3 tokens, got 1".into()));
        assert_eq!(parse(b"\0\0pw"), Err("Authentication failed: username not specified".into()));
        assert_eq!(parse(b"\0alice\0"), Err("Authentication failed: password not specified".into()));
    }
}
