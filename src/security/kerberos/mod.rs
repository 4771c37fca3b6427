//! SASL/GSSAPI (Kerberos V5, RFC 4752) as Kafka speaks it: the GSS-API
//! context tokens travel in SaslAuthenticate requests, then the acceptor
//! offers "no security layer" in a wrapped 4-byte message and the
//! initiator accepts it the same way; the connection itself stays as it is
//! (TLS or plaintext), as in Kafka, which supports only `auth` quality of
//! protection.
//!
//! - [`library`]: the system's MIT GSS-API, loaded at run time;
//! - [`server`]: the acceptor side of a listener;
//! - [`client`]: the initiator side of kcoord's own logins (sidecar
//!   upstream links, the admin CLI, kcoord-bench);
//! - [`short_name`]: Kafka's principal-to-local rules.

pub mod client;
pub mod library;
pub mod server;
pub mod short_name;

/// The mechanism's name.
pub const GSSAPI: &str = "GSSAPI";

/// The only security layer offered or chosen: none (RFC 4752 bit 1).
const NO_SECURITY_LAYER: u8 = 0x01;

/// The acceptor's offer: no security layer, and the largest message it
/// would take with one (Kafka's Java acceptor sends 65536).
fn layer_offer() -> [u8; 4] {
    [NO_SECURITY_LAYER, 0x01, 0x00, 0x00]
}

/// The initiator's answer to an offer: no security layer, no buffer, and
/// an empty authorization identity (act as the authenticated principal).
fn layer_choice(offer: &[u8]) -> Result<Vec<u8>, String> {
    match offer.first() {
        Some(layers) if offer.len() == 4 && layers & NO_SECURITY_LAYER != 0 => Ok(vec![NO_SECURITY_LAYER, 0, 0, 0]),
        Some(_) if offer.len() == 4 => {
            Err("the broker requires a GSSAPI security layer, which Kafka clients do not support".into())
        }
        _ => Err(format!("a GSSAPI security-layer offer of {} bytes, not 4", offer.len())),
    }
}

/// The authorization identity in the initiator's answer, checked against
/// what was offered.
fn chosen_authzid(choice: &[u8]) -> Result<String, String> {
    let (Some(&layer), Some(authzid)) = (choice.first(), choice.get(4..)) else {
        return Err(format!("a GSSAPI security-layer choice of {} bytes, under 4", choice.len()));
    };
    if layer != NO_SECURITY_LAYER {
        return Err(format!("the client chose GSSAPI security layer {layer:#04x}, which is not offered"));
    }
    String::from_utf8(authzid.to_vec()).map_err(|_| "a GSSAPI authorization id that is not UTF-8".to_string())
}

/// Writes a keytab (MIT format 0x0502) with one random AES-256 key for
/// `principal` (`primary[/instance]@REALM`), for tests and fuzzing that
/// need an acceptor without a KDC: no ticket will ever match the key, so
/// every context token fails, as hostile input must.
#[doc(hidden)]
pub fn write_random_keytab(path: &std::path::Path, principal: &str) -> std::io::Result<()> {
    let invalid = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidInput, m.to_string());
    let (name, realm) = principal.rsplit_once('@').ok_or_else(|| invalid("a principal needs @REALM"))?;
    let counted = |out: &mut Vec<u8>, s: &str| -> std::io::Result<()> {
        out.extend_from_slice(&u16::try_from(s.len()).map_err(|_| invalid("a name part is too long"))?.to_be_bytes());
        out.extend_from_slice(s.as_bytes());
        Ok(())
    };
    let components: Vec<&str> = name.split('/').collect();
    let mut entry = Vec::new();
    entry.extend_from_slice(&(components.len() as u16).to_be_bytes());
    counted(&mut entry, realm)?;
    for c in &components {
        counted(&mut entry, c)?;
    }
    entry.extend_from_slice(&1u32.to_be_bytes()); // KRB5_NT_PRINCIPAL
    entry.extend_from_slice(&0u32.to_be_bytes()); // timestamp
    entry.push(1); // key version
    entry.extend_from_slice(&18u16.to_be_bytes()); // aes256-cts-hmac-sha1-96
    let mut key = [0u8; 32];
    crate::security::random_bytes(&mut key);
    entry.extend_from_slice(&32u16.to_be_bytes());
    entry.extend_from_slice(&key);
    let mut file = vec![0x05, 0x02];
    file.extend_from_slice(&(entry.len() as i32).to_be_bytes());
    file.extend_from_slice(&entry);
    std::fs::write(path, file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_initiator_takes_the_offer_of_no_security_layer_and_refuses_one_without_it() {
        assert_eq!(layer_choice(&layer_offer()).unwrap(), vec![1, 0, 0, 0]);
        assert!(layer_choice(&[0x04, 0, 0x10, 0]).unwrap_err().contains("security layer"));
        assert!(layer_choice(&[1, 0]).is_err());
        assert!(layer_choice(&[]).is_err());
    }

    #[test]
    fn the_acceptor_reads_the_authorization_id_of_a_choice_of_no_layer_only() {
        assert_eq!(chosen_authzid(&[1, 0, 0, 0]).unwrap(), "");
        assert_eq!(chosen_authzid(b"\x01\x00\x00\x00alice@R").unwrap(), "alice@R");
        assert!(chosen_authzid(&[4, 0, 0, 0]).is_err());
        assert!(chosen_authzid(&[1, 0]).is_err());
        assert!(chosen_authzid(b"\x01\x00\x00\x00\xff").is_err());
    }
}
