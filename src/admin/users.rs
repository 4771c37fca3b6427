//! `kcoord users add|remove|list`: manages the credentials file SASL
//! listeners check. Passwords are salted and hashed here (SCRAM), never
//! written; a running daemon picks the change up within seconds.

use std::path::Path;

use crate::security::credentials::Credentials;
use crate::security::scram::ScramMechanism;

/// Adds `user` or changes its password, for `mechanisms` (both SCRAM
/// mechanisms when empty; PLAIN logins are checked against them).
pub fn add(file: &Path, user: &str, password: &str, mechanisms: &[String], iterations: u32) -> Result<String, String> {
    if user.is_empty() || user.contains(|c: char| c.is_control()) {
        return Err(format!("invalid user name {user:?}"));
    }
    if password.is_empty() {
        return Err("the password is empty".into());
    }
    if !(ScramMechanism::MIN_ITERATIONS..=ScramMechanism::MAX_ITERATIONS).contains(&iterations) {
        return Err(format!(
            "iterations must be between {} and {} (Kafka's bounds)",
            ScramMechanism::MIN_ITERATIONS,
            ScramMechanism::MAX_ITERATIONS
        ));
    }
    let mechs: Vec<ScramMechanism> = if mechanisms.is_empty() {
        ScramMechanism::ALL.to_vec()
    } else {
        mechanisms
            .iter()
            .map(|m| {
                ScramMechanism::from_name(m)
                    .ok_or_else(|| format!("unknown mechanism {m:?} (SCRAM-SHA-256, SCRAM-SHA-512)"))
            })
            .collect::<Result<_, _>>()?
    };
    let existed = Credentials::edit(file, |creds| {
        let existed = creds.users.contains_key(user);
        creds.set_password(user, password, &mechs, iterations);
        Ok(existed)
    })?;
    let names: Vec<&str> = mechs.iter().map(|m| m.name()).collect();
    Ok(format!("{} user {user} ({})", if existed { "Updated" } else { "Added" }, names.join(", ")))
}

pub fn remove(file: &Path, user: &str) -> Result<String, String> {
    Credentials::edit(file, |creds| match creds.remove(user) {
        true => Ok(()),
        false => Err(format!("no user {user} in {}", file.display())),
    })?;
    Ok(format!("Removed user {user}"))
}

/// One line per user: its name and mechanisms.
pub fn list(file: &Path) -> Result<String, String> {
    let creds = Credentials::load(file)?;
    Ok(creds
        .users
        .iter()
        .map(|(user, mechs)| {
            let m: Vec<String> =
                mechs.iter().map(|(name, c)| format!("{name} (iterations {})", c.iterations)).collect();
            format!("{user}\t{}\n", m.join(", "))
        })
        .collect())
}
